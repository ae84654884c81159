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
