"""The fault suite's cluster: a private local control plane where Kueue's own ``batch/job``
integration is off, so every integration in the registry (``batchjob`` included) runs
under our manager. Tests here are marked ``faults`` and run by ``nox -s faults``.

``KUEUE_JF_FAULTS_CLUSTER_DIR`` names a cluster already started with this topology
(``python -m jobframework.testing.cluster up`` does not know it; the fixture starts its
own unless told), which is then left running.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobframework.testing.cluster import (
    EXTERNAL_FRAMEWORKS,
    ClusterInfo,
    LocalCluster,
    Topology,
    cache_root,
)

#: Kueue runs only its JobSet integration (a no-op here); batch/v1 Jobs are ours.
FAULTS_TOPOLOGY = Topology(frameworks=("jobset.x-k8s.io/jobset",),
                           external_frameworks=(*EXTERNAL_FRAMEWORKS, "Job.v1.batch"))


@pytest.fixture(scope="session")
def faults_cluster(request: pytest.FixtureRequest) -> Iterator[tuple[LocalCluster, ClusterInfo]]:
    """The fault suite's cluster and how to reach it."""
    reuse = os.environ.get("KUEUE_JF_FAULTS_CLUSTER_DIR")
    if reuse:
        cluster = LocalCluster(Path(reuse), FAULTS_TOPOLOGY)
        info = cluster.info()
        if info is None:
            pytest.fail(f"KUEUE_JF_FAULTS_CLUSTER_DIR={reuse} but no cluster runs there")
        yield cluster, info
        return
    state_dir = cache_root() / "clusters" / f"faults-{os.getpid()}"
    cluster = LocalCluster(state_dir, FAULTS_TOPOLOGY)
    info = cluster.up()
    try:
        yield cluster, info
    finally:
        cluster.down()
        if request.session.testsfailed == 0:
            shutil.rmtree(state_dir, ignore_errors=True)
        else:
            print(f"\nfault-suite cluster logs kept in {state_dir}/logs")


@pytest.fixture
def faults_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Where a run keeps the proxy's and the manager's logs and its report
    (``--faults-report`` names the report's path)."""
    out = request.config.getoption("--faults-dir")
    path = Path(out) if out else tmp_path
    path.mkdir(parents=True, exist_ok=True)
    return path
