"""MultiKueue on loopback: a manager cluster and worker clusters side by side.

Each cluster is a whole :class:`~jobframework.testing.cluster.LocalCluster` (its own
kube-apiserver, etcd, controller-manager, scheduler, kwok nodes and Kueue manager) in a
state directory of its own. The manager cluster's Kueue runs MultiKueue with the generic
adapter for external frameworks (``multiKueue.externalFrameworks``); :func:`configure`
then connects it to the workers as a Kueue administrator would:

- on the manager: a kubeconfig Secret per worker (in Kueue's namespace, inline
  credentials only, as Kueue requires), a ``MultiKueueCluster`` per worker, a
  ``MultiKueueConfig`` listing them, an ``AdmissionCheck`` of MultiKueue's controller,
  and a ClusterQueue that requires it with its LocalQueue;
- on each worker: a ClusterQueue and a LocalQueue of the same names, with quota.

A job created on the manager in that LocalQueue is admitted there, then dispatched to
one worker, where it runs; Kueue mirrors its status back. ::

    env = MultiKueueEnvironment(cache_root() / "clusters" / "mk")
    clusters = env.up()                  # manager + worker-1 + worker-2
    async with clients(clusters) as (manager, workers):
        await configure(manager, clusters.workers, workers)
    env.down()
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import yaml

from jobframework.runtime.client import Client
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import AlreadyExists, NotFound
from jobframework.runtime.objects import GVK, Object

from .binaries import module_source
from .cluster import ClusterInfo, LocalCluster
from .manifests import EXTERNAL_FRAMEWORKS, Topology

#: MultiKueue's AdmissionCheck controller (``kueue.MultiKueueControllerName``).
MULTIKUEUE_CONTROLLER: Final = "kueue.x-k8s.io/multikueue"
KUEUE_NAMESPACE: Final = "kueue-system"
#: The names :func:`configure` gives the objects it creates.
ADMISSION_CHECK: Final = "multikueue"
MULTIKUEUE_CONFIG: Final = "multikueue"
CLUSTER_QUEUE: Final = "mk-cluster-queue"
LOCAL_QUEUE: Final = "mk-queue"
DEFAULT_WORKERS: Final = ("worker-1", "worker-2")

_KUEUE = "kueue.x-k8s.io/v1beta2"
SECRET_GVK: Final = GVK("", "v1", "Secret")
CRD_GVK: Final = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
MULTIKUEUE_CLUSTER_GVK: Final = GVK("kueue.x-k8s.io", "v1beta2", "MultiKueueCluster")
MULTIKUEUE_CONFIG_GVK: Final = GVK("kueue.x-k8s.io", "v1beta2", "MultiKueueConfig")
ADMISSION_CHECK_GVK: Final = GVK("kueue.x-k8s.io", "v1beta2", "AdmissionCheck")
CLUSTER_QUEUE_GVK: Final = GVK("kueue.x-k8s.io", "v1beta2", "ClusterQueue")
LOCAL_QUEUE_GVK: Final = GVK("kueue.x-k8s.io", "v1beta2", "LocalQueue")


def manager_topology(external_frameworks: Sequence[str] = EXTERNAL_FRAMEWORKS, *,
                     frameworks: Sequence[str] = ("batch/job",),
                     origin: str = "kueue-jf-manager",
                     worker_lost_timeout: str = "30s",
                     gc_interval: str = "10s") -> Topology:
    """The manager cluster: Kueue's MultiKueue with the generic adapter for
    ``external_frameworks`` (``Kind.version.group``; also Kueue's
    ``integrations.externalFrameworks``), Kueue's built-in ``frameworks`` on. The
    worker-lost timeout is short (Kueue's default is 15 minutes) so that a test can
    watch a job move to another worker."""
    return Topology(
        frameworks=tuple(frameworks), external_frameworks=tuple(external_frameworks),
        extra_kueue_config={"multiKueue": {
            "origin": origin, "gcInterval": gc_interval,
            "workerLostTimeout": worker_lost_timeout,
            "externalFrameworks": [{"name": name} for name in external_frameworks]}})


def worker_topology(external_frameworks: Sequence[str] = EXTERNAL_FRAMEWORKS, *,
                    frameworks: Sequence[str] = ("batch/job",)) -> Topology:
    """A worker cluster: Kueue with the same built-in and external frameworks."""
    return Topology(frameworks=tuple(frameworks),
                    external_frameworks=tuple(external_frameworks))


def jobset_crds() -> list[Object]:
    """JobSet's CRDs, from the module Kueue's pins use (in Go's module cache). Kueue
    watches the kinds of its built-in frameworks on every worker too, so a cluster that
    keeps ``jobset.x-k8s.io/jobset`` on (to switch ``batch/job`` off) needs them there."""
    source = module_source("kueue", "sigs.k8s.io/jobset").dir
    out: list[Object] = []
    for path in sorted((source / "config" / "components" / "crd" / "bases").glob("*.yaml")):
        out.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return out


def inline_kubeconfig(info: ClusterInfo, name: str) -> str:
    """A kubeconfig for ``info``'s cluster with its credentials inline (MultiKueue
    refuses file references)."""
    def data(path: str) -> str:
        return base64.b64encode(Path(path).read_bytes()).decode()

    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {
            "server": info.server, "certificate-authority-data": data(info.ca_cert)}}],
        "users": [{"name": name, "user": {
            "client-certificate-data": data(info.admin_cert),
            "client-key-data": data(info.admin_key)}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    })


@attrs.frozen
class MultiKueueClusters:
    """The running clusters: the manager and each worker by name."""

    manager: ClusterInfo
    workers: Mapping[str, ClusterInfo]


class MultiKueueEnvironment:
    """Starts and stops a manager cluster and worker clusters under ``root``."""

    def __init__(self, root: Path, *, workers: Sequence[str] = DEFAULT_WORKERS,
                 manager: Topology | None = None, worker: Topology | None = None) -> None:
        self.root = root
        self.manager = LocalCluster(root / "manager", manager or manager_topology())
        self.workers = {name: LocalCluster(root / name, worker or worker_topology())
                        for name in workers}

    def up(self) -> MultiKueueClusters:
        """Start every cluster (one after the other: they share the machine)."""
        try:
            manager = self.manager.up()
            workers = {name: cluster.up() for name, cluster in self.workers.items()}
        except BaseException:
            self.down()
            raise
        return MultiKueueClusters(manager, workers)

    def down(self) -> None:
        """Stop every cluster started."""
        for cluster in (*self.workers.values(), self.manager):
            with contextlib.suppress(Exception):
                cluster.down()


@contextlib.asynccontextmanager
async def clients(clusters: MultiKueueClusters
                  ) -> AsyncIterator[tuple[RestClient, dict[str, RestClient]]]:
    """Admin clients of the manager and of each worker."""
    async with contextlib.AsyncExitStack() as stack:
        manager = await stack.enter_async_context(
            await RestClient.from_kubeconfig(clusters.manager.kubeconfig))
        workers = {name: await stack.enter_async_context(
            await RestClient.from_kubeconfig(info.kubeconfig))
            for name, info in clusters.workers.items()}
        yield manager, workers


async def _create(client: Client, obj: Object) -> None:
    with contextlib.suppress(AlreadyExists):
        await client.create(obj)


def _cluster_queue(cpu: str, flavor: str, admission_check: str | None) -> Object:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{
            "name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu},
                                          {"name": "memory", "nominalQuota": "64Gi"}]}]}],
    }
    if admission_check:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    return {"apiVersion": _KUEUE, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
            "spec": spec}


def _local_queue(namespace: str) -> Object:
    return {"apiVersion": _KUEUE, "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": CLUSTER_QUEUE}}


async def _until(what: str, probe: Callable[[], Awaitable[bool]], limit: float) -> None:
    deadline = time.monotonic() + limit
    while True:
        with contextlib.suppress(NotFound):
            if await probe():
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {limit:.0f}s waiting for {what}")
        await asyncio.sleep(0.5)


def _condition_true(obj: Object, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


async def configure(manager: Client, workers: Mapping[str, ClusterInfo],
                    worker_clients: Mapping[str, Client], *, namespace: str = "default",
                    cpu: str = "16", flavor: str = "on-demand",
                    crds: Sequence[Object] = (), wait_limit: float = 120.0) -> None:
    """Connect the manager cluster's Kueue to ``workers`` (see the module docstring) and
    wait until every MultiKueueCluster, the AdmissionCheck and the queues are active.

    ``crds``: the external frameworks' CRDs, installed on every cluster first: Kueue
    watches each external kind on every worker, and a worker without the kind's CRD
    stays inactive (retried after a growing backoff).
    """
    for client in (manager, *worker_clients.values()):
        for crd in crds:
            await client.apply(crd, field_manager="kueue-jf-multikueue", force=True)
    for label, client in (("manager", manager), *worker_clients.items()):
        for crd in crds:
            async def established(client: Client = client, crd: Object = crd) -> bool:
                return _condition_true(
                    await client.get(CRD_GVK, crd["metadata"]["name"]), "Established")

            await _until(f"CRD {crd['metadata']['name']} on {label}", established,
                         wait_limit)
    for name, info in workers.items():
        await _create(manager, {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": f"{name}-kubeconfig", "namespace": KUEUE_NAMESPACE},
            "stringData": {"kubeconfig": inline_kubeconfig(info, name)}})
        await _create(manager, {
            "apiVersion": _KUEUE, "kind": "MultiKueueCluster", "metadata": {"name": name},
            "spec": {"clusterSource": {"kubeConfig": {
                "locationType": "Secret", "location": f"{name}-kubeconfig"}}}})
    await _create(manager, {"apiVersion": _KUEUE, "kind": "MultiKueueConfig",
                            "metadata": {"name": MULTIKUEUE_CONFIG},
                            "spec": {"clusters": list(workers)}})
    await _create(manager, {
        "apiVersion": _KUEUE, "kind": "AdmissionCheck", "metadata": {"name": ADMISSION_CHECK},
        "spec": {"controllerName": MULTIKUEUE_CONTROLLER, "parameters": {
            "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
            "name": MULTIKUEUE_CONFIG}}})
    await _create(manager, _cluster_queue(cpu, flavor, ADMISSION_CHECK))
    await _create(manager, _local_queue(namespace))
    for client in worker_clients.values():
        await _create(client, _cluster_queue(cpu, flavor, None))
        await _create(client, _local_queue(namespace))

    for name in workers:
        async def connected(name: str = name) -> bool:
            return _condition_true(await manager.get(MULTIKUEUE_CLUSTER_GVK, name), "Active")

        await _until(f"MultiKueueCluster {name} to be Active", connected, wait_limit)

    async def check_active() -> bool:
        return _condition_true(await manager.get(ADMISSION_CHECK_GVK, ADMISSION_CHECK),
                               "Active")

    await _until("the MultiKueue AdmissionCheck to be Active", check_active, wait_limit)
    for label, client in (("manager", manager), *worker_clients.items()):
        async def queue_active(client: Client = client) -> bool:
            return _condition_true(await client.get(CLUSTER_QUEUE_GVK, CLUSTER_QUEUE),
                                   "Active")

        await _until(f"ClusterQueue {CLUSTER_QUEUE} on {label} to be Active", queue_active,
                     wait_limit)
