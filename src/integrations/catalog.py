"""What the external-framework manager runs when told nothing else, and the command-line
parsing of an integration list.

The integrations themselves are plugins (:mod:`jobframework.plugins`): each installed
distribution declares its own in the ``kueue_jobframework.integrations`` entry-point
group, this project's four reference integrations included, so a user's integration is
run and rendered exactly as ours are.
"""

from __future__ import annotations

import argparse
from typing import Final

from jobframework.plugins import (
    IntegrationLoadError,
    UnknownIntegrationError,
    check_names,
    installed_integrations,
)

__all__ = ["DEFAULT_INTEGRATIONS", "DISTRIBUTION", "parse_integrations", "reference_names"]

#: This project's distribution, which declares the reference integrations.
DISTRIBUTION: Final = "kueue-jobframework"

#: What ``python -m integrations run`` and ``deploy render`` run when told nothing else
#: (``batchjob`` only on request: Kueue's own ``batch/job`` integration normally manages
#: Jobs).
DEFAULT_INTEGRATIONS: Final = ("jobflow", "daemonjob", "appwrapper")


def parse_integrations(value: str) -> tuple[str, ...]:
    """``--integrations a,b``: installed integration names, in order, duplicates dropped;
    an unknown name is an error listing what is installed."""
    try:
        return check_names(n.strip() for n in value.split(",") if n.strip())
    except (UnknownIntegrationError, IntegrationLoadError) as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def reference_names() -> tuple[str, ...]:
    """The short names of the integrations this project's own distribution declares (its
    entry points: ``appwrapper``, ``batchjob``, ``daemonjob``, ``jobflow``), sorted."""
    return tuple(name for name, entry in installed_integrations().items()
                 if entry.distribution == DISTRIBUTION)
