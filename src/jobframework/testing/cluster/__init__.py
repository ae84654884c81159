"""A real local Kubernetes control plane with a real Kueue manager, for tests.

Built from pinned Go modules (``tests/cluster``) and launched as local processes
on 127.0.0.1. Command line::

    python -m jobframework.testing.cluster build|up|down|status|env

From Python::

    from jobframework.testing.cluster import LocalCluster
    info = LocalCluster().up()      # ClusterInfo: kubeconfig, server, ports, ...
    ...
    LocalCluster().down()

See ``docs/cluster.md``.
"""

from __future__ import annotations

from jobframework.testing.cluster.binaries import BuildError, bin_dir, build, cache_root
from jobframework.testing.cluster.cluster import (
    ClusterInfo,
    LocalCluster,
    default_state_dir,
    running_cluster,
)
from jobframework.testing.cluster.manifests import (
    COMPLETE_DELAY_ANNOTATION,
    EXTERNAL_FRAMEWORKS,
    FAIL_ANNOTATION,
    FLAVOR_LABEL,
    QUEUE_LABEL,
    READY_DELAY_ANNOTATION,
    FlavorSpec,
    Topology,
)

__all__ = [
    "COMPLETE_DELAY_ANNOTATION",
    "EXTERNAL_FRAMEWORKS",
    "FAIL_ANNOTATION",
    "FLAVOR_LABEL",
    "QUEUE_LABEL",
    "READY_DELAY_ANNOTATION",
    "BuildError",
    "ClusterInfo",
    "FlavorSpec",
    "LocalCluster",
    "Topology",
    "bin_dir",
    "build",
    "cache_root",
    "default_state_dir",
    "running_cluster",
]
