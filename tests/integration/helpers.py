"""Shared helpers of the tests on the real control plane: polling, conditions, cleanup,
and a ClusterQueue/LocalQueue pair of a test's own."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from integrations.demo.follow import CLUSTER_QUEUE_GVK
from jobframework.runtime.client import PropagationPolicy
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import NotFound
from jobframework.runtime.objects import GVK, Object
from jobframework.workload import WORKLOAD_GVK

NS = "default"
TIMEOUT = 120.0
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
LOCAL_QUEUE_GVK = GVK("kueue.x-k8s.io", "v1beta2", "LocalQueue")
WPC_GVK = GVK("kueue.x-k8s.io", "v1beta2", "WorkloadPriorityClass")
POD_GVK = GVK("", "v1", "Pod")
JOB_GVK = GVK("batch", "v1", "Job")

#: Objects a test deletes when it ends: (kind, name, namespace).
Cleanup = list[tuple[GVK, str, str | None]]

__all__ = [
    "CLUSTER_QUEUE_GVK",
    "JOB_GVK",
    "LOCAL_QUEUE_GVK",
    "NS",
    "POD_GVK",
    "PRIORITY_LABEL",
    "QUEUE_LABEL",
    "TIMEOUT",
    "WORKLOAD_GVK",
    "WPC_GVK",
    "Cleanup",
    "Queue",
    "condition",
    "controller_uid",
    "delete",
    "eventually",
    "get_or_none",
    "is_true",
    "own_queue",
    "workload_of",
]


async def eventually(what: str, probe: Callable[[], Awaitable[Any]],
                     limit: float = TIMEOUT) -> Any:
    """Poll ``probe`` until it returns something truthy; fail after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit:.0f}s waiting for {what}")
        await asyncio.sleep(0.25)


def condition(obj: Object | None, ctype: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(obj: Object | None, ctype: str) -> bool:
    cond = condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def controller_uid(obj: Object) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref["uid"])
    return None


async def workload_of(client: RestClient, owner: Object) -> Object | None:
    """The Workload whose controller is ``owner`` (by UID)."""
    uid = owner["metadata"]["uid"]
    for wl in (await client.list(WORKLOAD_GVK, namespace=NS)).items:
        if controller_uid(wl) == uid:
            return wl
    return None


async def get_or_none(client: RestClient, gvk: GVK, name: str,
                      namespace: str | None = NS) -> Object | None:
    try:
        return await client.get(gvk, name, namespace=namespace)
    except NotFound:
        return None


async def delete(client: RestClient, gvk: GVK, name: str, namespace: str | None = NS) -> None:
    try:
        await client.delete(gvk, name, namespace=namespace,
                            propagation_policy=PropagationPolicy.BACKGROUND)
    except NotFound:
        return
    await eventually(f"{gvk.kind} {name} deleted",
                     lambda: _gone(client, gvk, name, namespace), 60)


async def _gone(client: RestClient, gvk: GVK, name: str, namespace: str | None) -> bool:
    return await get_or_none(client, gvk, name, namespace) is None


class Queue:
    """A ClusterQueue of its own (one flavor) with a LocalQueue of the same name."""

    def __init__(self, client: RestClient, prefix: str, cpu: str,
                 preemption: dict[str, Any] | None = None) -> None:
        self.client = client
        self.name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.cpu = cpu
        self.preemption = preemption

    async def create(self) -> None:
        spec: dict[str, Any] = {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{
                "name": "on-demand", "resources": [
                    {"name": "cpu", "nominalQuota": self.cpu},
                    {"name": "memory", "nominalQuota": "8Gi"}]}]}],
        }
        if self.preemption:
            spec["preemption"] = self.preemption
        await self.client.create({"apiVersion": CLUSTER_QUEUE_GVK.api_version,
                                  "kind": "ClusterQueue", "metadata": {"name": self.name},
                                  "spec": spec})
        await self.client.create({"apiVersion": LOCAL_QUEUE_GVK.api_version,
                                  "kind": "LocalQueue",
                                  "metadata": {"name": self.name, "namespace": NS},
                                  "spec": {"clusterQueue": self.name}})

        async def active() -> bool:
            cq = await self.client.get(CLUSTER_QUEUE_GVK, self.name)
            return is_true(cq, "Active")

        await eventually(f"ClusterQueue {self.name} Active", active, 60)

    async def cluster_queue(self) -> Object:
        return await self.client.get(CLUSTER_QUEUE_GVK, self.name)

    async def delete(self) -> None:
        await delete(self.client, LOCAL_QUEUE_GVK, self.name)
        await delete(self.client, CLUSTER_QUEUE_GVK, self.name, None)




async def own_queue(client: RestClient, cleanup: Cleanup, prefix: str, cpu: str,
                    preemption: dict[str, Any] | None = None) -> Queue:
    """A :class:`Queue` of the test's own, deleted (LocalQueue first) when it ends."""
    queue = Queue(client, prefix, cpu=cpu, preemption=preemption)
    await queue.create()
    cleanup.append((LOCAL_QUEUE_GVK, queue.name, NS))
    cleanup.append((CLUSTER_QUEUE_GVK, queue.name, None))
    return queue
