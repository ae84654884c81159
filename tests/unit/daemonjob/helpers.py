"""Helpers for the DaemonJob tests: node and DaemonJob builders, a controller harness and
Kueue's side (the generic reconciler plus the scheduler's writes).

The JobFlow test helpers are reused: the indexed reader (with the DaemonJob owner-UID
index added), the event recorder, the container builder and ``finish`` (the test plays the
batch/v1 Job controller by writing ``Complete``/``Failed`` conditions on Job status).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.unit.jobflow.helpers import FakeRecorder, IndexedClient, container, finish
from tests.unit.jobflow.test_kueue import TS, WORKLOAD
from tests.unit.jobflow.test_kueue import Kueue as JobFlowKueue

from integrations.daemonjob import (
    DAEMONJOB_GVK,
    FRAMEWORK_NAME,
    JOB_GVK,
    NODE_GVK,
    DaemonJobJob,
)
from integrations.daemonjob.controller import (
    OWNER_UID_INDEX,
    DaemonJobReconciler,
    owner_uid_values,
)
from jobframework import constants as c
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import Object
from jobframework.runtime.reconcile import Request, Result
from jobframework.testing import APIServer

__all__ = [
    "WORKLOAD",
    "FakeRecorder",
    "Harness",
    "Kueue",
    "cond",
    "container",
    "daemonjob",
    "finish",
    "node",
    "phases",
    "queued",
]


def node(name: str, *, ready: bool = True, unschedulable: bool = False,
         taints: list[dict[str, Any]] | None = None, **labels: str) -> Object:
    """A Node with ``kubernetes.io/hostname`` and ``labels`` (status included: the server
    ignores it on create, :meth:`Harness.add_node` writes it afterwards)."""
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": spec,
            "status": {"conditions": [{"type": "Ready",
                                       "status": "True" if ready else "False"}]}}


def daemonjob(name: str = "dj", *, namespace: str = "default",
              pod: dict[str, Any] | None = None, **spec: Any) -> Object:
    """A DaemonJob; ``pod`` is merged into its pod template's spec."""
    pod_spec: dict[str, Any] = {"containers": [container()], **(pod or {})}
    body: dict[str, Any] = {"template": {"spec": pod_spec}}
    body.update(spec)
    return {"apiVersion": "api.practice.com/v1alpha1", "kind": "DaemonJob",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}


def queued(name: str = "dj", **kw: Any) -> Object:
    """A DaemonJob in ``user-queue``, suspended as Kueue's webhook leaves it."""
    dj = daemonjob(name, suspend=True, **kw)
    dj["metadata"]["labels"] = {c.QUEUE_LABEL: "user-queue"}
    return dj


class Harness:
    """A DaemonJob reconciler on an in-memory server, called directly."""

    def __init__(self, server: APIServer) -> None:
        self.server = server
        self.api = server.client()
        self.reader = IndexedClient(self.api)
        self.reader.indexes[(JOB_GVK, OWNER_UID_INDEX)] = owner_uid_values
        self.recorder = FakeRecorder()
        assert isinstance(server.clock, ManualClock)
        self.rec = DaemonJobReconciler(self.reader, self.api, self.recorder,
                                       clock=server.clock)

    async def reconcile(self, name: str = "dj", namespace: str = "default") -> Result:
        return await self.rec.reconcile(Request.of(namespace, name))

    async def get(self, name: str = "dj", namespace: str = "default") -> Object:
        return await self.api.get(DAEMONJOB_GVK, name, namespace=namespace)

    async def jobs(self, namespace: str = "default") -> dict[str, Object]:
        return {j["metadata"]["name"]: j
                for j in (await self.api.list(JOB_GVK, namespace=namespace)).items}

    async def add_node(self, obj: Object) -> Object:
        """Create ``obj`` and then write its status (create ignores it)."""
        created = await self.api.create(copy.deepcopy(obj))
        created["status"] = copy.deepcopy(obj["status"])
        return await self.api.update_status(created)

    async def add_nodes(self, *names: str, **labels: str) -> None:
        for name in names:
            await self.add_node(node(name, **labels))

    async def set_ready(self, name: str, ready: bool) -> Object:
        n = await self.api.get(NODE_GVK, name)
        n["status"] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
        return await self.api.update_status(n)

    async def delete_node(self, name: str) -> None:
        await self.api.delete(NODE_GVK, name)
        await self.server.settle()

    async def set_job_status(self, name: str, status: dict[str, Any],
                             namespace: str = "default") -> Object:
        job = await self.api.get(JOB_GVK, name, namespace=namespace)
        job["status"] = {**job.get("status", {}), **status}
        return await self.api.update_status(job)

    async def complete(self, name: str, namespace: str = "default") -> Object:
        job = await self.api.get(JOB_GVK, name, namespace=namespace)
        return await self.api.update_status(finish(job))

    async def fail(self, name: str, namespace: str = "default", **kw: str) -> Object:
        job = await self.api.get(JOB_GVK, name, namespace=namespace)
        return await self.api.update_status(finish(job, False, **kw))


def phases(obj: Object) -> dict[str, str]:
    """node → phase, from ``status.nodes``."""
    return {n["name"]: n["phase"] for n in obj["status"]["nodes"]}


def cond(obj: Object, type_: str) -> dict[str, Any] | None:
    for x in obj.get("status", {}).get("conditions", []):
        if x["type"] == type_:
            return dict(x)
    return None


class Kueue(JobFlowKueue):
    """The JobFlow tests' Kueue (the generic reconciler and the scheduler's writes: admit,
    evict), driving :class:`DaemonJobJob`; flavors select nodes by ``instance-type``."""

    def __init__(self, h: Harness) -> None:
        super().__init__(h)  # type: ignore[arg-type]
        self.im.register_external_job_type(FRAMEWORK_NAME)

    async def reconcile(self, name: str = "dj") -> None:
        await self.reconciler.reconcile_generic_job(Request.of("default", name),
                                                    DaemonJobJob())

    async def flavor(self, name: str, zone: str) -> None:
        """A ResourceFlavor for nodes labelled ``instance-type: <zone>``, tolerating their
        ``instance-type`` NoSchedule taint."""
        await self.h.api.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                                 "metadata": {"name": name},
                                 "spec": {"nodeLabels": {"instance-type": zone},
                                          "tolerations": [
                                              {"key": "instance-type", "operator": "Equal",
                                               "value": zone, "effect": "NoSchedule"}]}})

    async def admit(self, flavor: str) -> None:
        """Admit the Workload in ``flavor``. As Kueue's flavor assigner (v0.19.2), each
        PodSet's assigned count is its count minus its reclaimable pods."""
        wl = await self.workload()
        reclaimable = {rp["name"]: rp["count"]
                       for rp in wl.get("status", {}).get("reclaimablePods") or []}
        assignments = [{"name": ps["name"], "flavors": {"cpu": flavor},
                        "count": ps["count"] - min(reclaimable.get(ps["name"], 0), ps["count"])}
                       for ps in wl["spec"]["podSets"]]
        await self.apply_status({
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": TS},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted", "lastTransitionTime": TS}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": assignments}})

    async def readmit(self, flavor: str) -> None:
        """Drop the Evicted condition and admit again in ``flavor``."""
        await self.apply_status({"conditions": [
            x for x in (await self.workload())["status"]["conditions"]
            if x["type"] != "Evicted"]})
        await self.admit(flavor)
