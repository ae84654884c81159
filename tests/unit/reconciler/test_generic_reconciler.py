"""Kueue's reconciler_test.go (§3) and the optional GenericJob capabilities, on the
in-memory API server with a mock job."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework import constants as c
from jobframework.api import PodSet
from jobframework.constants import FeatureGates
from jobframework.integrations import IntegrationManager
from jobframework.interface import FinishedResult
from jobframework.reconciler import (
    JobReconciler,
    ReconcilerOptions,
    UnretryableError,
    new_reconciler,
    process_options,
)
from jobframework.runtime import errors
from jobframework.runtime.clock import ManualClock, RealClock

from .helpers import (
    WORKLOAD,
    ActivationJob,
    ConditionsJob,
    FinalizeJob,
    MockJob,
    OnHoldJob,
    SkipJob,
    World,
    admitted_status,
)

GATED = c.ADMISSION_GATED_BY_ANNOTATION


@pytest.mark.kueue_case(
    "TestReconcileGenericJob/handle job with no workload (elasticJobsViaWorkloadSlicesEnabled = "
    "false)",
)
async def test_r1_creates_the_workload() -> None:
    w = World(features=FeatureGates(ElasticJobsViaWorkloadSlices=False))
    await w.create_job()
    await w.reconcile(MockJob())
    [wl] = w.workloads()
    assert wl["metadata"]["name"] == "job-test-job-ce737"
    assert wl["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-job"}
    assert wl["metadata"]["finalizers"] == [c.RESOURCE_IN_USE_FINALIZER_NAME]
    assert wl["metadata"]["ownerReferences"][0]["uid"] == "test-job"
    assert wl["spec"] == {"queueName": "test-lq", "priority": 0,
                          "podSets": [{"name": "main", "count": 1, "template": {}}]}
    assert "annotations" not in wl["metadata"]


# The first case is not Go's "update workload to match job (one existing workload)": that one
# is an elastic Job (tests/unit/batchjob/test_elastic.py).
@pytest.mark.kueue_case(
    "TestReconcileGenericJob/update workload to match job preserves active=true",
    "TestReconcileGenericJob/update workload to match job preserves active=false",
    "TestReconcileGenericJob/update workload to match job with changed parallelism preserves "
    "active=false",
)
@pytest.mark.parametrize(("active", "count"), [(None, 1), (True, 1), (False, 1), (False, 5)])
async def test_r5_r8_update_to_match_preserves_active(active: bool | None, count: int) -> None:
    w = World()
    await w.create_job()
    spec: dict[str, Any] = {} if active is None else {"active": active}
    created = await w.create_workload(pod_set_name="old" if count == 1 else "main",
                                      count=2 if count == 1 else 1, **spec)
    await w.reconcile(MockJob([PodSet(name="main", count=count)]))
    [wl] = w.workloads()
    assert wl["metadata"]["name"] == "job-test-job-1"
    assert int(wl["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", count)]
    assert wl["spec"].get("active") == active
    assert w.recorder.events == [("Normal", "UpdatedWorkload",
                                  "Updated not matching Workload for suspended job: "
                                  "default/job-test-job-1")]


@pytest.mark.kueue_case(
    "TestReconcileGenericJob/job with AdmissionGatedBy annotation should create workload with "
    "annotation",
    "TestReconcileGenericJob/job with multiple AdmissionGatedBy gates should create workload "
    "with annotation",
    "TestReconcileGenericJob/job with AdmissionGatedBy annotation when feature gate disabled "
    "should not propagate annotation",
)
@pytest.mark.parametrize(("gate", "value"), [
    (True, "example.com/controller1"),
    (True, "example.com/controller1,example.com/controller2"),
    (False, None),
])
async def test_r9_r11_r12_admission_gated_by_on_create(gate: bool, value: str | None) -> None:
    w = World(features=FeatureGates(AdmissionGatedBy=gate))
    await w.create_job(annotations={GATED: "example.com/controller1"
                                    if value is None else value})
    await w.reconcile(MockJob())
    [wl] = w.workloads()
    assert (wl["metadata"].get("annotations") or {}).get(GATED) == value


@pytest.mark.kueue_case(
    "TestReconcileGenericJob/job with AdmissionGatedBy annotation removed should update workload",
    "TestReconcileGenericJob/job with AdmissionGatedBy annotation unchanged should not emit event",
    "TestReconcileGenericJob/job with AdmissionGatedBy annotation changed should emit event",
    "TestReconcileGenericJob/job with AdmissionGatedBy annotation changed when feature disabled "
    "should not emit event",
)
@pytest.mark.parametrize(("gate", "job_value", "wl_value", "written", "events"), [
    (True, None, "example.com/controller1", True,
     [("Normal", "UpdatedWorkload", 'Updated workload AdmissionGatedBy to ""')]),
    (True, "example.com/controller1", "example.com/controller1", False, []),
    (True, "example.com/controller1,example.com/controller2", "example.com/controller1", True,
     [("Normal", "UpdatedWorkload", 'Updated workload AdmissionGatedBy to '
                                    '"example.com/controller1,example.com/controller2"')]),
    (False, "example.com/controller1,example.com/controller2", "example.com/controller1",
     False, []),
])
async def test_r10_r13_r14_r15_admission_gated_by_sync(
    gate: bool, job_value: str | None, wl_value: str, written: bool,
    events: list[tuple[str, str, str]],
) -> None:
    w = World(features=FeatureGates(AdmissionGatedBy=gate))
    await w.create_job(annotations={GATED: job_value} if job_value else None)
    created = await w.create_workload(annotations={GATED: wl_value})
    await w.reconcile(MockJob())
    [wl] = w.workloads()
    changed = wl["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    assert changed is written
    want = job_value if written else wl_value
    assert (wl["metadata"].get("annotations") or {}).get(GATED) == want
    assert w.recorder.events == events


@pytest.mark.kueue_case(
    "TestReconcileGenericJob/MultiKueue worker pod label is propagated to PodTemplate if "
    "workload has Multikueue origin label",
)
async def test_r16_multikueue_worker_label_in_pod_set_info() -> None:
    w = World()
    await w.create_job(labels={c.MULTIKUEUE_ORIGIN_LABEL: "origin",
                               c.PREBUILT_WORKLOAD_LABEL: "job-test-job-1"})
    wl = await w.create_workload(status=admitted_status(w))
    wl["metadata"]["labels"][c.MULTIKUEUE_ORIGIN_LABEL] = "origin"
    wl = await w.client.update(wl)
    job = MockJob()
    await w.reconcile(job)
    assert job.run_infos is not None
    [info] = job.run_infos
    assert (info.name, info.count) == ("main", 1)
    assert info.annotations == {c.WORKLOAD_ANNOTATION: "job-test-job-1"}
    assert info.labels == {c.CLUSTER_QUEUE_LABEL: "default-cq", c.LOCAL_QUEUE_LABEL: "test-lq",
                           c.MULTIKUEUE_WORKER_WORKLOAD_POD_LABEL: "true",
                           c.PODSET_LABEL: "main"}
    assert info.node_selector == {}
    assert info.tolerations is None and info.scheduling_gates is None
    assert w.job()["spec"]["suspend"] is False
    assert w.workloads()[0]["metadata"]["resourceVersion"] == wl["metadata"]["resourceVersion"]


@pytest.mark.kueue_case("TestReconcileGenericJob/handle job with annotations to copy")
async def test_r17_annotations_to_copy() -> None:
    w = World(features=FeatureGates(CustomMetricLabels=True),
              label_keys_to_copy={"toCopyKey"}, annotations_to_copy={"toCopyAnnotation"})
    await w.create_job(labels={"toCopyKey": "toCopyValue", "dontCopyKey": "x"},
                       annotations={"toCopyAnnotation": "toCopyAnnValue",
                                    "dontCopyAnnotation": "x"})
    await w.reconcile(MockJob())
    [wl] = w.workloads()
    assert wl["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-job", "toCopyKey": "toCopyValue"}
    assert wl["metadata"]["annotations"] == {"toCopyAnnotation": "toCopyAnnValue"}


@pytest.mark.kueue_case(
    "TestReconcileGenericJobWithCustomWorkloadActivation/marks workload inactive when job requests",
    "TestReconcileGenericJobWithCustomWorkloadActivation/marks workload active when job requests",
)
@pytest.mark.parametrize(("initial", "job_says"), [(None, False), (False, True)])
async def test_r18_r19_custom_workload_activation(initial: bool | None, job_says: bool) -> None:
    w = World()
    await w.create_job()
    await w.create_workload(**({} if initial is None else {"active": initial}))
    job = ActivationJob()
    job.active = job_says
    await w.reconcile(job)
    assert w.workloads()[0]["spec"]["active"] is job_says


@pytest.mark.kueue_case(
    "TestProcessOptions/all options are passed",
    "TestProcessOptions/a single option is passed",
    "TestProcessOptions/no options are passed",
)
def test_r20_r23_options() -> None:
    clock = ManualClock()
    opts = process_options(manage_jobs_without_queue_name=True, wait_for_pods_ready=True,
                           kube_server_version="v1.36", label_keys_to_copy={"toCopyKey"},
                           annotations_to_copy={"toCopyAnnotation"}, clock=clock)
    assert opts.manage_jobs_without_queue_name and opts.wait_for_pods_ready
    assert opts.label_keys_to_copy == frozenset({"toCopyKey"})
    assert opts.annotations_to_copy == frozenset({"toCopyAnnotation"})
    assert opts.clock is clock
    single = process_options(manage_jobs_without_queue_name=True)
    assert single.manage_jobs_without_queue_name and not single.wait_for_pods_ready
    assert isinstance(single.clock, RealClock)
    default = process_options()
    assert default == ReconcilerOptions(clock=default.clock)
    im = IntegrationManager()
    assert process_options(integration_manager=im).integration_manager is im


def test_r24_new_reconciler_creates_an_integration_manager() -> None:
    r = new_reconciler(None, None)  # type: ignore[arg-type]
    assert isinstance(r, JobReconciler)
    assert isinstance(r.integration_manager, IntegrationManager)


def test_disable_wait_for_pods_ready_gate_wins() -> None:
    r = new_reconciler(None, None, wait_for_pods_ready=True,  # type: ignore[arg-type]
                       features=FeatureGates(DisableWaitForPodsReady=True))
    assert r.wait_for_pods_ready is False


@pytest.mark.kueue_case(
    "TestReconcileGenericJobWithWaitForPodsReady/update podready condition failed",
    "TestReconcileGenericJobWithWaitForPodsReady/update podready condition success",
)
@pytest.mark.parametrize("fail", [True, False])
async def test_r25_r26_pods_ready_write(fail: bool) -> None:
    w = World(wait_for_pods_ready=True)
    await w.create_job(suspend=False, status={"ready": 1, "active": 1})
    await w.create_workload(status=admitted_status(w, extra=[{
        "type": "PodsReady", "status": "False", "reason": "WaitForStart",
        "message": "Not all pods are ready or succeeded", "lastTransitionTime": w.ts()}]))
    if fail:
        w.server.faults.fail("patch", error=errors.InternalError("failed calling webhook"),
                             gvk=WORKLOAD, subresource="status")
        with pytest.raises(errors.InternalError, match="failed calling webhook"):
            await w.reconcile(MockJob())
    else:
        await w.reconcile(MockJob())
        conds = {x["type"]: x for x in w.workloads()[0]["status"]["conditions"]}
        assert (conds["PodsReady"]["status"], conds["PodsReady"]["reason"]) == ("True",
                                                                               "Started")


@pytest.mark.kueue_case("TestReconcileGenericJob_EvictionClearsQuotaReservation")
@pytest.mark.parametrize(("observability", "reason"), [(False, "Pending"),
                                                       (True, "PendingEvaluation")])
async def test_r27_r28_eviction_clears_quota_reservation(observability: bool,
                                                         reason: str) -> None:
    w = World(features=FeatureGates(UnadmittedWorkloadsObservability=observability))
    await w.create_job()
    await w.create_workload(status=admitted_status(w, evicted=("Preempted", "Preempted")))
    await w.reconcile(MockJob())
    [wl] = w.workloads()
    conds = {x["type"]: x for x in wl["status"]["conditions"]}
    assert (conds["QuotaReserved"]["status"], conds["QuotaReserved"]["reason"]) == ("False",
                                                                                   reason)
    assert "admission" not in wl["status"]


async def test_merge_patch_gate_also_clears_admission() -> None:
    w = World(features=FeatureGates(WorkloadRequestUseMergePatch=True))
    await w.create_job()
    await w.create_workload(status=admitted_status(w, evicted=("Preempted", "Preempted")))
    await w.reconcile(MockJob())
    [wl] = w.workloads()
    assert "admission" not in wl["status"] or wl["status"]["admission"] is None
    conds = {x["type"]: x["status"] for x in wl["status"]["conditions"]}
    assert conds["Requeued"] == "True" and conds["QuotaReserved"] == "False"


async def test_custom_workload_conditions_are_applied_under_the_kind_manager() -> None:
    w = World()
    await w.create_job()
    await w.create_workload()
    await w.reconcile(ConditionsJob())
    [wl] = w.workloads()
    assert [(x["type"], x["status"], x["reason"]) for x in wl["status"]["conditions"]] == [
        ("Custom", "True", "Because")]
    assert "kueue-job-controller" in {m["manager"] for m in wl["metadata"]["managedFields"]}


async def test_on_hold_releases_the_quota() -> None:
    w = World()
    await w.create_job()
    await w.create_workload(status=admitted_status(w))
    await w.reconcile(OnHoldJob())
    [wl] = w.workloads()
    conds = {x["type"]: (x["status"], x["reason"], x["message"])
             for x in wl["status"]["conditions"]}
    assert conds["QuotaReserved"] == ("False", "OnHold", "Job is on hold")
    assert conds["Admitted"] == ("False", "NoReservation", "The workload has no reservation")
    assert "admission" not in wl["status"]


async def test_finished_job_finalizes_and_finishes_failed() -> None:
    w = World()
    await w.create_job()
    await w.create_workload(status=admitted_status(w))
    FinalizeJob.finalized = 0
    await w.reconcile(FinalizeJob(finished=FinishedResult("boom", False, True)))
    [wl] = w.workloads()
    fin = next(x for x in wl["status"]["conditions"] if x["type"] == "Finished")
    assert (fin["status"], fin["reason"], fin["message"]) == ("True", "Failed", "boom")
    assert FinalizeJob.finalized == 1
    assert w.recorder.events == [("Normal", "FinishedWorkload",
                                  "Workload 'default/job-test-job-1' is declared finished")]


async def test_skip_ends_the_reconcile() -> None:
    w = World()
    await w.create_job()
    await w.reconcile(SkipJob())
    assert w.workloads() == []


async def test_workload_being_deleted_stops_the_job_and_releases_it() -> None:
    w = World()
    await w.create_job(suspend=False)
    await w.create_workload(status=admitted_status(w))
    await w.client.delete(WORKLOAD, "job-test-job-1", namespace="default")
    await w.reconcile(MockJob())
    await w.server.settle()
    assert w.job()["spec"]["suspend"] is True
    assert w.workloads() == []
    assert w.recorder.events == [("Normal", "Stopped", "Workload is deleted")]


async def test_reclaimable_pods_applied_under_their_manager() -> None:
    from jobframework.api import ReclaimablePod

    class Reclaiming(MockJob):
        async def reclaimable_pods(self, client: Any) -> list[ReclaimablePod]:
            return [ReclaimablePod(name="main", count=5)]

    w = World()
    await w.create_job(suspend=False)
    await w.create_workload(count=3, status=admitted_status(w))
    await w.reconcile(Reclaiming([PodSet(name="main", count=3)]))
    [wl] = w.workloads()
    assert wl["status"]["reclaimablePods"] == [{"name": "main", "count": 3}]
    assert "kueue-reclaimable-pods" in {m["manager"] for m in wl["metadata"]["managedFields"]}


async def test_unretryable_errors_are_swallowed() -> None:
    class Failing(MockJob):
        async def pod_sets(self, client: Any) -> list[PodSet]:
            raise UnretryableError("cannot build pod sets")

    w = World()
    await w.create_job()
    result = await w.reconcile(Failing())
    assert result.is_zero()
    assert w.workloads() == []


async def test_top_level_job_ignores_its_owners() -> None:
    class TopLevel(MockJob):
        def is_top_level(self) -> bool:
            return True

    w = World()
    job = await w.create_job()
    job["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                           "name": "missing", "uid": "x", "controller": True}]
    await w.client.update(job)
    await w.reconcile(TopLevel())
    assert len(w.workloads()) == 1


async def test_orphan_without_controller_reference_is_released_not_finished() -> None:
    w = World()
    await w.create_job()
    created = await w.create_workload()
    created["metadata"]["ownerReferences"][0]["controller"] = False
    await w.client.update(created)
    # The reconciler reads the job as gone (a cache that saw the delete first).
    w.server.faults.fail("get", error=errors.new_not_found("jobs", "test-job", "batch"),
                         gvk=job_gvk(), name="test-job", times=1)
    await w.reconcile(MockJob())
    [wl] = w.workloads()
    assert not wl["metadata"].get("finalizers")
    assert "Finished" not in {x["type"] for x in
                              (wl.get("status") or {}).get("conditions") or []}


async def test_deleted_job_is_finalized() -> None:
    w = World()
    await w.create_job()
    job = w.job()
    job["metadata"]["finalizers"] = ["example.com/cleanup"]
    await w.client.update(job)
    await w.client.delete(job_gvk(), "test-job", namespace="default")
    FinalizeJob.finalized = 0
    await w.reconcile(FinalizeJob())
    assert FinalizeJob.finalized == 1


def job_gvk() -> Any:
    from .helpers import JOB_GVK

    return JOB_GVK


async def test_workload_already_exists_requeues_quietly(
        caplog: pytest.LogCaptureFixture) -> None:
    """The create/cache race: the Workload the job needs exists but the reconciler's
    lookup does not see it yet (here: not owned by the job, as a lagging owner index
    would hide it). Go returns the AlreadyExists error and controller-runtime logs it; we
    requeue with backoff and log one info line, no error and no event."""
    w = World()
    await w.create_job()
    await w.client.create({
        "apiVersion": f"{c.KUEUE_GROUP}/{c.KUEUE_VERSION}", "kind": "Workload",
        "metadata": {"name": "job-test-job-ce737", "namespace": "default"},
        "spec": {"queueName": "test-lq",
                 "podSets": [{"name": "main", "count": 1, "template": {}}]}})
    with caplog.at_level("INFO"):
        result = await w.reconcile(MockJob())
    assert result.requeue and result.requeue_after == 0
    assert w.recorder.events == []
    assert [r.levelname for r in caplog.records if "already exists" in r.getMessage()] \
        == ["INFO"]
    assert not [r for r in caplog.records if r.levelno >= 40]
