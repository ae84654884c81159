"""The fixture world of Kueue's job_controller_test.go on the in-memory API server."""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any
from unittest import mock

from integrations.batchjob import CALLBACKS, FRAMEWORK_NAME, JOB_GVK, BatchJob
from jobframework import constants as c
from jobframework.constants import FeatureGates
from jobframework.integrations import IntegrationManager
from jobframework.reconciler import JobReconciler, ReconcilerOptions
from jobframework.runtime.clock import ManualClock, rfc3339
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.reconcile import Request, Result
from jobframework.testing import APIServer, InMemoryClient

WORKLOAD = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")
WPC = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "WorkloadPriorityClass")
RESOURCE_FLAVOR = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "ResourceFlavor")
LOCAL_QUEUE = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "LocalQueue")
CLUSTER_QUEUE = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "ClusterQueue")
EVENT = GVK("events.k8s.io", "v1", "Event")
START = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def register_kueue_kinds(server: APIServer) -> None:
    """Serve the Kueue kinds the reconciler touches (no CRD schemas)."""
    server.register_kind(WORKLOAD, "workloads", True)
    server.register_kind(WPC, "workloadpriorityclasses", False, status_subresource=False)
    server.register_kind(RESOURCE_FLAVOR, "resourceflavors", False, status_subresource=False)
    server.register_kind(LOCAL_QUEUE, "localqueues", True)
    server.register_kind(CLUSTER_QUEUE, "clusterqueues", False)


class Recorder:
    """Captures events as ``(type, reason, message)`` in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.objects: list[str] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message))
        meta = obj.get("metadata") or {}
        self.objects.append(f"{obj.get('kind')}/{meta.get('namespace')}/{meta.get('name')}")


@contextlib.contextmanager
def fixed_uid(uid: str) -> Iterator[None]:
    """Objects created inside get ``uid`` (Kueue's fixtures set UIDs by hand)."""
    with mock.patch("jobframework.testing.server.uuid.uuid4", return_value=uid):
        yield


class World:
    """Server, clients, reconciler and builders for one test."""

    def __init__(self, **options: Any) -> None:
        self.clock = ManualClock(START)
        self.server = APIServer(self.clock, builtin_defaults=True)
        register_kueue_kinds(self.server)
        self.client: InMemoryClient = self.server.client()
        self.recorder = Recorder()
        self.features: FeatureGates = options.pop("features", FeatureGates())
        self.im = IntegrationManager()
        self.im.register_integration(FRAMEWORK_NAME, CALLBACKS)
        self.im.enable_integration(FRAMEWORK_NAME)
        self.options = ReconcilerOptions(clock=self.clock, integration_manager=self.im,
                                         features=self.features, **options)
        self.reconciler = JobReconciler(self.client, self.recorder, self.options)

    @property
    def now(self) -> dt.datetime:
        return self.clock.now()

    def ts(self, seconds_ago: float = 0) -> str:
        return rfc3339(self.now - dt.timedelta(seconds=seconds_ago))

    async def setup(self) -> None:
        await self.client.create({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "ns"}})
        await self.client.create({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "labelled-ns",
                                               "labels": {"managed-by-kueue": "true"}}})
        await self.client.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                                  "metadata": {"name": "default"}, "spec": {}})

    async def wpc(self, name: str, value: int) -> None:
        await self.client.create({"apiVersion": c.KUEUE_API_VERSION,
                                  "kind": "WorkloadPriorityClass",
                                  "metadata": {"name": name}, "value": value})

    async def priority_class(self, name: str, value: int, global_default: bool = False) -> None:
        pc: Object = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                      "metadata": {"name": name}, "value": value}
        if global_default:
            pc["globalDefault"] = True
        await self.client.create(pc)

    async def create_job(self, job: Object, *, uid: str = "test-uid") -> Object:
        """Create the Job (status written through the status subresource)."""
        status = job.pop("status", None)
        with fixed_uid(uid):
            created = await self.client.create(job)
        if status:
            created["status"] = status
            created = await self.client.update_status(created)
        return created

    async def create_workload(self, wl: Object, *, owner: Object | None = None) -> Object:
        """Create a Workload; its status is applied as Kueue's admission does."""
        wl = copy.deepcopy(wl)
        status = wl.pop("status", None)
        if owner is not None and not wl["metadata"].get("ownerReferences"):
            wl["metadata"]["ownerReferences"] = [controller_ref(owner)]
        created = await self.client.create(wl)
        if status:
            applied = {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
                       "metadata": {"name": created["metadata"]["name"],
                                    "namespace": created["metadata"]["namespace"]},
                       "status": status}
            created = await self.client.apply(applied, field_manager=c.ADMISSION_NAME,
                                              force=True, subresource="status")
        return created

    async def reconcile(self, name: str = "job", namespace: str = "ns") -> Result:
        return await self.reconciler.reconcile_generic_job(Request.of(namespace, name),
                                                           BatchJob(features=self.features))

    def job(self, name: str = "job", namespace: str = "ns") -> Object:
        found = [j for j in self.server.objects(JOB_GVK, namespace)
                 if j["metadata"]["name"] == name]
        assert found, f"job {namespace}/{name} is gone"
        return found[0]

    def jobs(self, namespace: str = "ns") -> list[Object]:
        return self.server.objects(JOB_GVK, namespace)

    def workloads(self, namespace: str = "ns") -> list[Object]:
        return self.server.objects(WORKLOAD, namespace)

    def workload(self, name: str, namespace: str = "ns") -> Object:
        found = [w for w in self.workloads(namespace) if w["metadata"]["name"] == name]
        assert found, f"workload {namespace}/{name} is gone"
        return found[0]


def controller_ref(owner: Object) -> dict[str, Any]:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


def base_job(name: str = "job", namespace: str = "ns", *, queue: str | None = "foo",
             parallelism: int = 10, suspend: bool = True) -> Object:
    """Kueue's ``baseJob``: suspended, queue ``foo``, 10 pods of one container asking 1 CPU."""
    labels = {c.QUEUE_LABEL: queue} if queue else {}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
        "spec": {
            "suspend": suspend, "parallelism": parallelism,
            "template": {"spec": {
                "restartPolicy": "Never", "nodeSelector": {},
                "containers": [{"name": "c", "image": "",
                                "resources": {"requests": {"cpu": "1"}}}],
            }},
        },
    }


def pod_set(count: int = 10, *, name: str = "main", min_count: int | None = None,
            template_spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    spec = dict(template_spec or {
        "restartPolicy": "Never", "nodeSelector": {},
        "containers": [{"name": "c", "image": "", "resources": {"requests": {"cpu": "1"}}}]})
    ps: dict[str, Any] = {"name": name, "count": count, "template": {"spec": spec}}
    if min_count is not None:
        ps["minCount"] = min_count
    return ps


def cond(type_: str, status: str, reason: str, message: str, ltt: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": ltt}


def base_wl(name: str = "wl", namespace: str = "ns", *, count: int = 10, queue: str = "foo",
            reserved: bool = True, admitted_at: str | None = None, cq: str = "cq",
            assignment_count: int | None = None, ltt: str = "2026-01-02T03:04:05Z",
            pod_sets: list[dict[str, Any]] | None = None) -> Object:
    """Kueue's ``baseWl``: quota reserved in ``cq`` (optionally Admitted at ``admitted_at``)."""
    wl: Object = {
        "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace,
                     "finalizers": [c.RESOURCE_IN_USE_FINALIZER_NAME]},
        "spec": {"queueName": queue, "podSets": pod_sets or [pod_set(count)]},
    }
    conditions: list[dict[str, Any]] = []
    if reserved:
        conditions.append(cond(c.WORKLOAD_QUOTA_RESERVED, "True", "AdmittedByTest",
                               f"Admitted by ClusterQueue {cq}", ltt))
        assignment: dict[str, Any] = {"name": "main", "flavors": {"cpu": "default"},
                                      "count": assignment_count if assignment_count is not None
                                      else count}
        wl["status"] = {"conditions": conditions,
                        "admission": {"clusterQueue": cq, "podSetAssignments": [assignment]}}
    if admitted_at is not None:
        conditions.append(cond(c.WORKLOAD_ADMITTED, "True", "ByTest",
                               f"Admitted by ClusterQueue {cq}", admitted_at))
        wl.setdefault("status", {"conditions": conditions})
    return wl


def conditions_of(obj: Object) -> dict[str, tuple[str, str, str]]:
    """``type -> (status, reason, message)``."""
    return {x["type"]: (x["status"], x.get("reason", ""), x.get("message", ""))
            for x in (obj.get("status") or {}).get("conditions") or []}


def template_labels(job: Object) -> dict[str, str]:
    labels: dict[str, str] = dict(
        (job["spec"]["template"].get("metadata") or {}).get("labels") or {})
    for k in ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name",
              "batch.kubernetes.io/job-name"):
        labels.pop(k, None)
    return labels
