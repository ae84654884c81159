"""Kueue's TestReconciler cases for the batch Job: creation, start, stop, finish."""

from __future__ import annotations

import pytest

from jobframework import constants as c
from jobframework.constants import FeatureGates, KueueVersion
from jobframework.reconciler import NoMatchingWorkloadsError, PrebuiltWorkloadNotFoundError

from .helpers import World, base_job, base_wl, conditions_of, pod_set, template_labels

NORMAL = "Normal"


async def world(**options: object) -> World:
    w = World(**options)
    await w.setup()
    return w


@pytest.mark.kueue_case(
    "TestReconciler/when workload is created, it has its owner ProvReq annotations",
)
async def test_19_workload_created_with_prov_req_annotations() -> None:
    w = await world()
    job = base_job()
    job["metadata"]["annotations"] = {"provreq.kueue.x-k8s.io/test-annotation": "test-val",
                                      "invalid-provreq-prefix/test-annotation-2": "test-val-2"}
    await w.create_job(job)
    await w.reconcile()
    [wl] = w.workloads()
    assert wl["metadata"]["name"] == "job-job-b3219"
    assert wl["metadata"]["annotations"] == {"provreq.kueue.x-k8s.io/test-annotation": "test-val"}
    assert wl["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-uid"}
    assert wl["metadata"]["finalizers"] == [c.RESOURCE_IN_USE_FINALIZER_NAME]
    assert wl["metadata"]["ownerReferences"] == [{
        "apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "test-uid",
        "controller": True, "blockOwnerDeletion": True}]
    assert wl["spec"]["queueName"] == "foo"
    assert wl["spec"]["priority"] == 0
    assert "priorityClassRef" not in wl["spec"]
    [ps] = wl["spec"]["podSets"]
    assert ps["name"] == "main" and ps["count"] == 10
    assert ps["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert "controller-uid" not in ps["template"]["metadata"]["labels"]
    assert w.job()["spec"]["suspend"] is True
    assert w.recorder.events == [(NORMAL, "CreatedWorkload", "Created Workload: ns/job-job-b3219")]


@pytest.mark.kueue_case("TestReconciler/when workload is created, it has correct labels set")
async def test_20_workload_created_with_labels_to_copy() -> None:
    w = await world(label_keys_to_copy={"toCopyKey", "redundantToCopyKey"})
    job = base_job()
    job["metadata"]["labels"].update({"toCopyKey": "toCopyValue", "dontCopyKey": "dontCopyValue"})
    await w.create_job(job)
    await w.reconcile()
    [wl] = w.workloads()
    assert wl["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-uid", "toCopyKey": "toCopyValue"}


@pytest.mark.kueue_case(
    "TestReconciler/suspended job with matching admitted workload is unsuspended",
)
async def test_39_suspended_job_with_admitted_workload_is_unsuspended() -> None:
    w = await world()
    job = await w.create_job(base_job())
    await w.create_workload(base_wl(admitted_at=w.ts()), owner=job)
    await w.reconcile()
    got = w.job()
    assert got["spec"]["suspend"] is False
    assert template_labels(got) == {c.PODSET_LABEL: "main", c.LOCAL_QUEUE_LABEL: "foo",
                                    c.CLUSTER_QUEUE_LABEL: "cq"}
    assert got["spec"]["template"]["metadata"]["annotations"] == {c.WORKLOAD_ANNOTATION: "wl"}
    assert w.recorder.events == [(NORMAL, "Started", "Admitted by clusterQueue cq")]


@pytest.mark.kueue_case("TestReconciler/the workload is created when queue name is set")
async def test_44_workload_created_for_running_job_after_stopping_it() -> None:
    w = await world()
    job = base_job(suspend=False)
    job["metadata"]["labels"][c.QUEUE_LABEL] = "test-queue"
    await w.create_job(job)
    await w.reconcile()
    assert w.job()["spec"]["suspend"] is True
    [wl] = w.workloads()
    assert wl["spec"]["queueName"] == "test-queue"
    assert w.recorder.events == [
        (NORMAL, "Stopped", "Missing Workload; unable to restore pod templates"),
        (NORMAL, "CreatedWorkload", "Created Workload: ns/job-job-b3219"),
    ]


async def test_28_eviction_suspends_job_and_releases_quota() -> None:
    # Main's reasons; v0.19.2's (the Go case) are asserted by test_28_32_eviction_reasons in
    # test_reconciler_scenarios.py and in tests/unit/jobframework/test_version_profiles.py.
    w = await world(features=FeatureGates(version=KueueVersion.MAIN))
    job = base_job(suspend=False)
    job = await w.create_job(job)
    wl = base_wl(admitted_at=w.ts(1))
    wl["status"]["conditions"].append({
        "type": "Evicted", "status": "True", "reason": "PodsReadyTimeout",
        "message": "Exceeded the PodsReady timeout", "lastTransitionTime": w.ts()})
    await w.create_workload(wl, owner=job)
    await w.reconcile()
    assert w.job()["spec"]["suspend"] is True
    got = w.workload("wl")
    assert "admission" not in got["status"]
    assert got["status"]["accumulatedPastExecutionTimeSeconds"] == 1
    conds = conditions_of(got)
    assert conds["Admitted"] == ("False", "NoReservation", "The workload has no reservation")
    assert conds["QuotaReserved"] == ("False", "PendingEvaluation",
                                      "Exceeded the PodsReady timeout")
    assert conds["Requeued"] == ("False", "PodsReadyTimeout", "Exceeded the PodsReady timeout")
    assert conds["Evicted"] == ("True", "PodsReadyTimeout", "Exceeded the PodsReady timeout")
    assert w.recorder.events == [(NORMAL, "Stopped", "Exceeded the PodsReady timeout")]


@pytest.mark.kueue_case("TestReconciler/when job completes, workload is marked as finished")
async def test_67_job_completion_finishes_workload() -> None:
    w = await world()
    job = base_job(suspend=False)
    job["status"] = {"conditions": [{"type": "Complete", "status": "True",
                                     "message": "Job finished successfully"}]}
    job = await w.create_job(job)
    await w.create_workload(base_wl(admitted_at=w.ts()), owner=job)
    await w.reconcile()
    got = w.workload("wl")
    fin = next(x for x in got["status"]["conditions"] if x["type"] == "Finished")
    assert (fin["status"], fin["reason"], fin["message"]) == (
        "True", "Succeeded", "Job finished successfully")
    assert fin["observedGeneration"] == 1
    assert got["metadata"]["finalizers"] == [c.RESOURCE_IN_USE_FINALIZER_NAME]
    assert w.recorder.events == [
        (NORMAL, "FinishedWorkload", "Workload 'ns/wl' is declared finished")]


@pytest.mark.kueue_case("TestReconciler/non-matching admitted workload is deleted")
async def test_40_non_matching_admitted_workload_is_deleted() -> None:
    w = await world(manage_jobs_without_queue_name=True)
    job = await w.create_job(base_job())
    await w.create_workload(base_wl(count=5, admitted_at=w.ts()), owner=job)
    with pytest.raises(NoMatchingWorkloadsError,
                       match="no matching workloads: deleted 1 workloads"):
        await w.reconcile()
    await w.server.settle()
    assert w.workloads() == []
    assert w.recorder.events == [
        (NORMAL, "DeletedWorkload", "Deleted not matching Workload: ns/wl")]


@pytest.mark.kueue_case(
    "TestReconciler/when the prebuilt workload is missing, no new one is created, the job is "
    "suspended and prebuilt workload not found error is returned",
)
async def test_73_missing_prebuilt_workload() -> None:
    w = await world()
    job = base_job(suspend=False)
    job["metadata"]["labels"][c.PREBUILT_WORKLOAD_LABEL] = "missing-workload"
    await w.create_job(job)
    with pytest.raises(PrebuiltWorkloadNotFoundError):
        await w.reconcile()
    assert w.job()["spec"]["suspend"] is True
    assert w.workloads() == []
    assert w.recorder.events == [(NORMAL, "Stopped", "missing workload")]


@pytest.mark.kueue_case("TestReconciler/non-matching non-admitted workload is updated")
async def test_41_non_matching_unreserved_workload_is_updated() -> None:
    w = await world(manage_jobs_without_queue_name=True)
    job = await w.create_job(base_job())
    wl = base_wl("a", count=5, reserved=False)
    del wl["spec"]["queueName"]
    wl["spec"]["priority"] = 0
    await w.create_workload(wl, owner=job)
    await w.reconcile()
    got = w.workload("a")
    assert got["spec"]["podSets"][0]["count"] == 10
    assert got["spec"]["queueName"] == "foo"
    assert got["spec"]["priority"] == 0
    assert "labels" not in got["metadata"]
    assert w.recorder.events == [
        (NORMAL, "UpdatedWorkload", "Updated not matching Workload for suspended job: ns/a")]
    assert pod_set  # shared builder imported for other modules
