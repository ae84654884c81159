"""Session fixture for tests marked ``cluster``: a real local control plane + Kueue.

One cluster per session, shared by ``tests/contract`` (the ``cluster`` backend) and
``tests/integration``. By default the fixture starts a private cluster (state dir
``<cache>/clusters/pytest-<pid>``, removed afterwards unless a test failed) and stops it
at the end of the session. Set ``KUEUE_JF_CLUSTER_REUSE=1`` to run against an already
running cluster started with ``python -m jobframework.testing.cluster up`` (it is left
running); the state dir then comes from ``KUEUE_JF_CLUSTER_DIR`` or the default one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from jobframework.testing.cluster import ClusterInfo, LocalCluster, cache_root, default_state_dir


@pytest.fixture(scope="session")
def cluster_info(request: pytest.FixtureRequest) -> Iterator[ClusterInfo]:
    """The session's real cluster (Kueue's own ``batch/job`` integration on)."""
    if os.environ.get("KUEUE_JF_CLUSTER_REUSE") == "1":
        info = LocalCluster(default_state_dir()).info()
        if info is None:
            pytest.fail("KUEUE_JF_CLUSTER_REUSE=1 but no cluster is running; run `up` first")
        yield info
        return
    state_dir = cache_root() / "clusters" / f"pytest-{os.getpid()}"
    cluster = LocalCluster(state_dir)
    info = cluster.up()
    try:
        yield info
    finally:
        cluster.down()
        if request.session.testsfailed == 0:
            shutil.rmtree(state_dir, ignore_errors=True)
        else:
            print(f"\ncluster logs kept in {state_dir}/logs")


def pytest_addoption(parser: pytest.Parser) -> None:
    """The fault suite's knobs (``nox -s faults -- --seed 21 --lifecycles 300 ...`` passes
    them as these options; see ``tests/faults`` and ``docs/reliability.md``)."""
    group = parser.getgroup("faults", "fault suite (tests marked faults)")
    group.addoption("--faults-seed", type=int, default=2026,
                    help="seed of every random choice of the run (replays its schedule)")
    group.addoption("--faults-lifecycles", type=int, default=40)
    group.addoption("--faults-kills", type=int, default=4, help="manager SIGKILLs")
    group.addoption("--faults-compactions", type=int, default=1, help="etcd compactions")
    group.addoption("--faults-apiserver-restarts", type=int, default=0)
    group.addoption("--faults-hostile", type=float, default=0.3,
                    help="share of JobFlow, DaemonJob and AppWrapper lifecycles the hostile "
                         "tenant attacks (0: none)")
    group.addoption("--faults-integrations", default="",
                    help="comma-separated integrations (default: every registered one)")
    group.addoption("--faults-load", type=int, default=200,
                    help="jobs of the load run (tests marked load)")
    group.addoption("--faults-dir", default="", help="keep logs and the report here")
    group.addoption("--faults-report", default="", help="write the JSON report here")
