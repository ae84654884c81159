"""A configurable GenericJob over batch/v1 Job objects (Kueue's reconciler_test mock)."""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from unittest import mock

from jobframework import constants as c
from jobframework.api import Condition, PodSet, Workload
from jobframework.constants import FeatureGates
from jobframework.integrations import IntegrationManager
from jobframework.interface import FinishedResult, GenericJob
from jobframework.podset import PodSetInfo
from jobframework.reconciler import JobReconciler, ReconcilerOptions
from jobframework.runtime.client import Client
from jobframework.runtime.clock import ManualClock, rfc3339
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.reconcile import Request, Result
from jobframework.testing import APIServer, InMemoryClient

JOB_GVK = GVK("batch", "v1", "Job")
WORKLOAD = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")
NOT_FINISHED = FinishedResult("", False, False)
START = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def register_kueue_kinds(server: APIServer) -> None:
    server.register_kind(WORKLOAD, "workloads", True)
    for kind, plural in (("WorkloadPriorityClass", "workloadpriorityclasses"),
                         ("ResourceFlavor", "resourceflavors")):
        server.register_kind(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, kind), plural, False,
                             status_subresource=False)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message))


class MockJob(GenericJob):
    """A job whose pod sets, activity and finish state the test decides."""

    def __init__(self, pod_sets: Sequence[PodSet] | None = None, *,
                 finished: FinishedResult = NOT_FINISHED) -> None:
        self.obj: Object = {}
        self._pod_sets = list(pod_sets or [PodSet(name="main", count=1)])
        self._finished = finished
        self.run_infos: list[PodSetInfo] | None = None

    def object(self) -> Object:
        return self.obj

    def is_suspended(self) -> bool:
        return bool(self.obj.get("spec", {}).get("suspend"))

    def suspend(self) -> None:
        self.obj.setdefault("spec", {})["suspend"] = True

    async def run_with_pod_sets_info(self, client: Client,
                                     pod_sets_info: Sequence[PodSetInfo]) -> None:
        self.run_infos = list(pod_sets_info)
        self.obj["spec"]["suspend"] = False

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        return False

    def finished(self) -> FinishedResult:
        return self._finished

    async def pod_sets(self, client: Client) -> list[PodSet]:
        return [ps.model_copy(deep=True) for ps in self._pod_sets]

    def is_active(self) -> bool:
        return bool((self.obj.get("status") or {}).get("active"))

    async def pods_ready(self, client: Client) -> bool:
        status = self.obj.get("status") or {}
        return bool(status.get("ready", 0) >= sum(ps.count for ps in self._pods_sets_view()))

    def _pods_sets_view(self) -> list[PodSet]:
        return self._pod_sets

    def gvk(self) -> GVK:
        return JOB_GVK


class ActivationJob(MockJob):
    """JobWithCustomWorkloadActivation."""

    active = True

    def is_workload_active(self) -> bool:
        return self.active


class ConditionsJob(MockJob):
    """JobWithCustomWorkloadConditions: reports a ``Custom`` condition once."""

    def custom_workload_conditions(self, wl: Workload) -> tuple[list[Condition], bool]:
        if wl.find_condition("Custom") is not None:
            return [], False
        return [Condition(type="Custom", status="True", reason="Because", message="m")], True


class OnHoldJob(MockJob):
    def is_on_hold(self) -> bool:
        return True


class FinalizeJob(MockJob):
    finalized = 0

    async def finalize(self, client: Client) -> None:
        type(self).finalized += 1


class SkipJob(MockJob):
    def skip(self) -> bool:
        return True


@contextlib.contextmanager
def fixed_uid(uid: str) -> Iterator[None]:
    with mock.patch("jobframework.testing.server.uuid.uuid4", return_value=uid):
        yield


class World:
    def __init__(self, **options: Any) -> None:
        self.clock = ManualClock(START)
        self.server = APIServer(self.clock, builtin_defaults=True)
        register_kueue_kinds(self.server)
        self.client: InMemoryClient = self.server.client()
        self.recorder = Recorder()
        self.features: FeatureGates = options.pop("features", FeatureGates())
        self.options = ReconcilerOptions(clock=self.clock, features=self.features,
                                         integration_manager=IntegrationManager(), **options)
        self.reconciler = JobReconciler(self.client, self.recorder, self.options)

    def ts(self, ago: float = 0) -> str:
        return rfc3339(self.clock.now() - dt.timedelta(seconds=ago))

    async def create_job(self, *, labels: Mapping[str, str] | None = None,
                         annotations: Mapping[str, str] | None = None, suspend: bool = True,
                         status: Mapping[str, Any] | None = None) -> Object:
        meta: dict[str, Any] = {"name": "test-job", "namespace": "default",
                                "labels": {c.QUEUE_LABEL: "test-lq", **(labels or {})}}
        if annotations:
            meta["annotations"] = dict(annotations)
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
               "spec": {"suspend": suspend, "template": {"spec": {"containers": []}}}}
        with fixed_uid("test-job"):
            created = await self.client.create(job)
        if status:
            created["status"] = dict(status)
            created = await self.client.update_status(created)
        return created

    async def create_workload(self, name: str = "job-test-job-1", *, count: int = 1,
                              pod_set_name: str = "main", status: Mapping[str, Any] | None = None,
                              **spec: Any) -> Object:
        wl: Object = {
            "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
            "metadata": {"name": name, "namespace": "default",
                         "finalizers": [c.RESOURCE_IN_USE_FINALIZER_NAME],
                         "labels": {c.JOB_UID_LABEL: "test-job"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": "test-job", "uid": "test-job",
                                              "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"queueName": "test-lq", "priority": 0,
                     "podSets": [{"name": pod_set_name, "count": count,
                                  "template": {"spec": {"containers": []}}}], **spec},
        }
        annotations = spec.pop("annotations", None)
        if annotations:
            wl["metadata"]["annotations"] = annotations
            wl["spec"].pop("annotations")
        created = await self.client.create(wl)
        if status:
            created = await self.client.apply(
                {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
                 "metadata": {"name": name, "namespace": "default"}, "status": dict(status)},
                field_manager=c.ADMISSION_NAME, force=True, subresource="status")
        return created

    async def reconcile(self, job: MockJob) -> Result:
        return await self.reconciler.reconcile_generic_job(Request.of("default", "test-job"), job)

    def workloads(self) -> list[Object]:
        return self.server.objects(WORKLOAD, "default")

    def job(self) -> Object:
        return self.server.objects(JOB_GVK, "default")[0]


def admitted_status(w: World, *, cq: str = "default-cq", evicted: tuple[str, str] | None = None,
                    extra: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    conds: list[dict[str, Any]] = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
         "message": f"Quota reserved in ClusterQueue {cq}", "lastTransitionTime": w.ts()},
        {"type": "Admitted", "status": "True", "reason": "Admitted",
         "message": "The workload is admitted", "lastTransitionTime": w.ts()},
    ]
    if evicted is not None:
        conds.append({"type": "Evicted", "status": "True", "reason": evicted[0],
                      "message": evicted[1], "lastTransitionTime": w.ts()})
    conds.extend(copy.deepcopy(list(extra)))
    return {"conditions": conds,
            "admission": {"clusterQueue": cq, "podSetAssignments": [{"name": "main"}]}}
