"""The demo: the seed's JobFlow samples through real Kueue, with live progress.

``python -m integrations.demo`` (or ``nox -s demo``) brings up the local control plane,
starts our external-framework manager in-process (:mod:`integrations.manager`), applies
the samples (showing the webhook's rejection of the invalid one) and two JobFlows that
compete for quota, prints a line per change, and a table of the end states. See
``docs/demo.md``. :func:`run_demo` is the core loop, for any cluster and for tests.
"""

from .core import DemoOptions, DemoResult, plan_samples, quota_jobflows, run_demo
from .follow import Follower, Snapshot, final_table, take_snapshot

__all__ = [
    "DemoOptions",
    "DemoResult",
    "Follower",
    "Snapshot",
    "final_table",
    "plan_samples",
    "quota_jobflows",
    "run_demo",
    "take_snapshot",
]
