"""Kueue's job_controller_test.go TestReconciler, case by case (numbers as in
kueue-test-scenarios.md §1), on the in-memory API server: one reconcile, then the Job,
the Workloads and the events are checked."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework import constants as c
from jobframework.constants import FeatureGates, KueueVersion
from jobframework.reconciler import (
    ExtraWorkloadsError,
    NoMatchingWorkloadsError,
    PrebuiltWorkloadNotFoundError,
    WorkloadRetentionPolicy,
)
from jobframework.runtime import errors
from jobframework.runtime.selectors import LabelSelector

from .helpers import (
    World,
    base_job,
    base_wl,
    cond,
    conditions_of,
    controller_ref,
    pod_set,
    template_labels,
)

NORMAL, WARNING = "Normal", "Warning"
OWNER_GONE = ("True", "OwnerNotFound", "The workload's owner no longer exists")


_MERGE_PATCH = [False]
V0_19, MAIN = KueueVersion.V0_19, KueueVersion.MAIN
#: Where v0.19.2 and main answer differently, a case runs under both version profiles and
#: expects each one's answer (v0.19.2's is the Go test's); see also
#: tests/unit/jobframework/test_version_profiles.py.
VERSIONS = pytest.mark.parametrize("version", [V0_19, MAIN], ids=["v0.19", "main"])
#: QuotaReserved's reason once an eviction releases the quota (main has
#: UnadmittedWorkloadsObservability on by default).
QUOTA_RELEASED_REASON = {V0_19: "Pending", MAIN: "PendingEvaluation"}


@pytest.fixture(autouse=True, params=[False, True], ids=["apply", "merge-patch"])
def workload_request_use_merge_patch(request: pytest.FixtureRequest) -> None:
    """Every case runs with status writes as server-side applies and as merge patches."""
    _MERGE_PATCH[0] = bool(request.param)


async def world(**options: Any) -> World:
    features = options.pop("features", FeatureGates())
    options["features"] = features.with_gates(WorkloadRequestUseMergePatch=_MERGE_PATCH[0])
    w = World(**options)
    await w.setup()
    return w


def running(job: dict[str, Any], **status: Any) -> dict[str, Any]:
    job["spec"]["suspend"] = False
    if status:
        job["status"] = status
    return job


def with_cond(wl: dict[str, Any], *conds: dict[str, Any]) -> dict[str, Any]:
    wl.setdefault("status", {}).setdefault("conditions", []).extend(conds)
    return wl


# --- 1-4: orphaned workloads -------------------------------------------------------------


@pytest.mark.kueue_case(
    "TestReconciler/job is not found with FinishOrphanedWorkloads disabled",
    "TestReconciler/job is not found with FinishOrphanedWorkloads enabled",
)
@pytest.mark.parametrize("fow", [False, True])
async def test_01_02_job_not_found(fow: bool) -> None:
    w = await world(features=FeatureGates(FinishOrphanedWorkloads=fow))
    wl = base_wl(reserved=False)
    wl["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job",
                                          "name": "deleted_job", "uid": "deleted_job",
                                          "controller": True}]
    await w.create_workload(wl)
    await w.reconcile("deleted_job")
    got = w.workload("wl")
    assert got["metadata"].get("finalizers") is None
    if fow:
        assert conditions_of(got) == {"Finished": OWNER_GONE}
    else:
        assert conditions_of(got) == {}
    assert w.recorder.events == []


@pytest.mark.kueue_case(
    "TestReconciler/job is deleted with FinishOrphanedWorkloads disabled",
    "TestReconciler/job is deleted with FinishOrphanedWorkloads enabled",
)
@pytest.mark.parametrize("fow", [False, True])
async def test_03_04_job_being_deleted(fow: bool) -> None:
    w = await world(features=FeatureGates(FinishOrphanedWorkloads=fow))
    job = base_job()
    job["metadata"]["finalizers"] = ["example.com/keep"]
    job = await w.create_job(job)
    await w.create_workload(base_wl(reserved=False), owner=job)
    await w.client.delete(job_gvk(), "job", namespace="ns")
    before = w.job()
    await w.reconcile()
    assert w.job() == before
    got = w.workload("wl")
    assert got["metadata"].get("finalizers") is None
    assert conditions_of(got) == ({"Finished": OWNER_GONE} if fow else {})


def job_gvk() -> Any:
    from integrations.batchjob import JOB_GVK
    return JOB_GVK


# --- 5-15: PodsReady ---------------------------------------------------------------------

WAIT_START = ("False", "WaitForStart", "Not all pods are ready or succeeded")
RECOVERING = ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")
READY = "All pods reached readiness and the workload is running"


@pytest.mark.kueue_case(
    "TestReconciler/PodsReady is set to False before Workload is Admitted",
    "TestReconciler/PodsReady is set to False after Workload is Admitted but not all Pods "
    "reached readiness",
    "TestReconciler/PodsReady is set to False after Workload is Admitted, some Pods became ready "
    "but not all Pods reached readiness",
    "TestReconciler/PodsReady is set to True after Workload is Admitted and all Pods reached "
    "readiness",
    "TestReconciler/PodsReady is set to True after Workload is Admitted and all Pods reached "
    "readiness without previous PodsReady condition",
    "TestReconciler/PodsReady is set to False after Workload is running and one pod failed",
    "TestReconciler/PodsReady continues to be False after a pod failed and workload is still "
    "recovering",
    "TestReconciler/PodsReady is set to True after failing pod recovered",
    "TestReconciler/PodsReady=False has the new Reason if there was the old one before (pre "
    "v0.11.0)",
    "TestReconciler/PodsReady=True has the new Reason if there was the old one before (pre "
    "v0.11.0)",
    "TestReconciler/PodsReady is set to False if there's an invalid Reason (pre v0.11.0)",
)
@pytest.mark.parametrize(("case", "job_running", "job_status", "admitted", "previous", "want"), [
    ("05 before admission", False, {}, False, None, WAIT_START),
    ("06 admitted, not ready", False, {}, True, None, WAIT_START),
    ("07 some ready", True, {"ready": 9, "active": 10}, True,
     ("False", "WaitForStart"), None),
    ("08 all ready", False, {"ready": 10}, True, ("False", "WaitForStart"),
     ("True", "Started", READY)),
    ("09 all ready, no previous", False, {"ready": 10}, True, None, ("True", "Started", READY)),
    ("10 one pod failed", True, {"ready": 9, "failed": 1, "active": 9}, True,
     ("True", "Started"), RECOVERING),
    ("11 still recovering", True, {"ready": 9, "failed": 1, "active": 9}, True,
     ("False", "WaitForRecovery"), None),
    ("12 recovered", True, {"ready": 10, "active": 10}, True, ("False", "WaitForRecovery"),
     ("True", "Recovered", READY)),
    ("13 old reason, not ready", False, {}, True, ("False", "PodsReady"), WAIT_START),
    ("14 old reason, ready", True, {"ready": 10, "active": 10}, True, ("True", "PodsReady"),
     ("True", "Started", READY)),
    ("15 invalid reason", False, {}, True, ("False", "InvalidReason"), WAIT_START),
])
async def test_05_15_pods_ready(case: str, job_running: bool, job_status: dict[str, Any],
                                admitted: bool, previous: tuple[str, str] | None,
                                want: tuple[str, str, str] | None) -> None:
    w = await world(wait_for_pods_ready=True)
    job = base_job(suspend=not job_running)
    if job_status:
        job["status"] = job_status
    job = await w.create_job(job)
    wl = base_wl(admitted_at=w.ts() if admitted else None)
    if not admitted:
        with_cond(wl, cond("Admitted", "False", "ByTest", "not admitted", w.ts()))
    if previous is not None:
        with_cond(wl, cond("PodsReady", previous[0], previous[1],
                           READY if previous[0] == "True" else
                           "Not all pods are ready or succeeded", w.ts()))
    created = await w.create_workload(wl, owner=job)
    job_before = w.job()
    await w.reconcile()
    got = w.workload("wl")
    if want is None:
        assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    else:
        assert conditions_of(got)["PodsReady"] == want, case
        pr = next(x for x in got["status"]["conditions"] if x["type"] == "PodsReady")
        assert pr["observedGeneration"] == 1
        managers = {m["manager"] for m in got["metadata"]["managedFields"]}
        assert "kueue-job-controller-PodsReady" in managers
    assert w.job()["spec"] == job_before["spec"], "the job is not started in this pass"
    assert w.recorder.events == []


# --- 16-18, 21, 38, 39, 42: start ----------------------------------------------------------


@pytest.mark.kueue_case(
    "TestReconciler/PodSet label and Workload annotation are set when Job is starting; "
    "TopologyAwareScheduling enabled",
    "TestReconciler/Pod queue labels are not set when AssignQueueLabelsForPods is disabled",
    "TestReconciler/Pod cluster queue label is not set when cluster queue name is too long",
)
@pytest.mark.parametrize(("gates", "cq", "labels", "workload_annotation"), [
    ({"TopologyAwareScheduling": True, "AssignQueueLabelsForPods": True}, "cq",
     {c.PODSET_LABEL: "main", c.LOCAL_QUEUE_LABEL: "foo", c.CLUSTER_QUEUE_LABEL: "cq"}, True),
    ({"TopologyAwareScheduling": False, "AssignQueueLabelsForPods": False}, "cq",
     {c.PODSET_LABEL: "main"}, False),
    ({}, "cq" * 50, {c.PODSET_LABEL: "main", c.LOCAL_QUEUE_LABEL: "foo"}, True),
])
async def test_16_17_18_start_labels(gates: dict[str, bool], cq: str, labels: dict[str, str],
                                     workload_annotation: bool) -> None:
    w = await world(features=FeatureGates(**gates), manage_jobs_without_queue_name=True,
                    managed_jobs_namespace_selector=LabelSelector.parse(""))
    job = await w.create_job(base_job())
    created = await w.create_workload(base_wl(admitted_at=w.ts(), cq=cq), owner=job)
    await w.reconcile()
    got = w.job()
    assert got["spec"]["suspend"] is False
    assert template_labels(got) == labels
    annotations = (got["spec"]["template"].get("metadata") or {}).get("annotations")
    assert annotations == ({c.WORKLOAD_ANNOTATION: "wl"} if workload_annotation else None)
    assert w.workload("wl")["metadata"]["resourceVersion"] == (
        created["metadata"]["resourceVersion"])
    assert w.recorder.events == [(NORMAL, "Started", f"Admitted by clusterQueue {cq}")]


def check(name: str, **updates: Any) -> dict[str, Any]:
    update = {"name": "main", **updates}
    return {"name": name, "state": "Ready", "lastTransitionTime": "2026-01-02T03:04:05Z",
            "message": "", "podSetUpdates": [update]}


@pytest.mark.kueue_case(
    "TestReconciler/when workload is admitted the PodSetUpdates are propagated to job",
)
async def test_21_admission_check_pod_set_updates_propagate() -> None:
    w = await world()
    job = await w.create_job(base_job())
    wl = base_wl(admitted_at=w.ts())
    wl["status"]["admissionChecks"] = [check("check", labels={"ac-key": "ac-value"})]
    await w.create_workload(wl, owner=job)
    await w.reconcile()
    got = w.job()
    assert got["spec"]["suspend"] is False
    assert template_labels(got) == {"ac-key": "ac-value", c.PODSET_LABEL: "main",
                                    c.LOCAL_QUEUE_LABEL: "foo", c.CLUSTER_QUEUE_LABEL: "cq"}
    assert w.recorder.events == [(NORMAL, "Started", "Admitted by clusterQueue cq")]


@pytest.mark.kueue_case(
    "TestReconciler/when workload is admitted the PodSetUpdates values matching for key",
)
async def test_38_matching_pod_set_updates_merge() -> None:
    w = await world()
    job = await w.create_job(base_job())
    wl = base_wl(admitted_at=w.ts())
    wl["status"]["admissionChecks"] = [
        check("check1", labels={"label-key1": "common-value"},
              annotations={"annotation-key1": "common-value",
                           "annotation-key2": "only-in-check1"},
              nodeSelector={"node-selector-key1": "common-value"}),
        check("check2", labels={"label-key1": "common-value"},
              annotations={"annotation-key1": "common-value"},
              nodeSelector={"node-selector-key1": "common-value",
                            "node-selector-key2": "only-in-check2"}),
    ]
    await w.create_workload(wl, owner=job)
    await w.reconcile()
    got = w.job()
    template = got["spec"]["template"]
    assert template["metadata"]["annotations"] == {
        "annotation-key1": "common-value", "annotation-key2": "only-in-check1",
        c.WORKLOAD_ANNOTATION: "wl"}
    assert template_labels(got) == {"label-key1": "common-value", c.LOCAL_QUEUE_LABEL: "foo",
                                    c.CLUSTER_QUEUE_LABEL: "cq", c.PODSET_LABEL: "main"}
    assert template["spec"]["nodeSelector"] == {"node-selector-key1": "common-value",
                                                "node-selector-key2": "only-in-check2"}
    assert w.recorder.events == [(NORMAL, "Started", "Admitted by clusterQueue cq")]


@pytest.mark.kueue_case(
    "TestReconciler/suspended job with partial admission and admitted workload is unsuspended",
)
async def test_42_partial_admission_start_sets_parallelism() -> None:
    w = await world()
    job = base_job()
    job["metadata"]["annotations"] = {c.JOB_MIN_PARALLELISM_ANNOTATION: "5"}
    job = await w.create_job(job)
    await w.create_workload(base_wl("a", admitted_at=w.ts(), assignment_count=8,
                                    pod_sets=[pod_set(10, min_count=5)]), owner=job)
    await w.reconcile()
    got = w.job()
    assert got["spec"]["suspend"] is False
    assert got["spec"]["parallelism"] == 8
    assert template_labels(got) == {c.PODSET_LABEL: "main", c.LOCAL_QUEUE_LABEL: "foo",
                                    c.CLUSTER_QUEUE_LABEL: "cq"}
    assert w.recorder.events == [(NORMAL, "Started", "Admitted by clusterQueue cq")]


@pytest.mark.kueue_case(
    "TestReconciler/unsuspended job with partial admission and non-matching admitted workload is "
    "suspended and workload is deleted",
)
async def test_43_running_partial_job_with_non_matching_workload() -> None:
    w = await world()
    job = base_job(suspend=False)
    job["metadata"]["annotations"] = {c.JOB_MIN_PARALLELISM_ANNOTATION: "5"}
    job = await w.create_job(job)
    # The job runs 10 pods but the admission gave 8: the running shape does not match.
    await w.create_workload(base_wl("a", admitted_at=w.ts(), assignment_count=8,
                                    pod_sets=[pod_set(10, min_count=5)]), owner=job)
    with pytest.raises(NoMatchingWorkloadsError):
        await w.reconcile()
    await w.server.settle()
    got = w.job()
    assert got["spec"]["suspend"] is True
    assert got["spec"]["parallelism"] == 10
    assert w.workloads() == []
    assert w.recorder.events == [
        (NORMAL, "Stopped",
         "No matching Workload; restoring pod templates according to existent Workload"),
        (NORMAL, "DeletedWorkload", "Deleted not matching Workload: ns/a"),
    ]


# --- 22-33: eviction, deactivation, retention ----------------------------------------------


def evicted(w: World, reason: str, message: str, ago: float = 0) -> dict[str, Any]:
    return cond("Evicted", "True", reason, message, w.ts(ago))


@pytest.mark.kueue_case(
    "TestReconciler/when workload is evicted due to pods ready timeout, job gets suspended and "
    "quota is unset",
    "TestReconciler/when workload is evicted due to admission check, job gets suspended",
    "TestReconciler/when workload is evicted due to cluster queue stopped, job gets suspended",
    "TestReconciler/when workload is evicted due to local queue stopped, job gets suspended",
    "TestReconciler/when workload is evicted due to preemption, job gets suspended",
)
@pytest.mark.parametrize(("reason", "message", "requeued"), [
    ("PodsReadyTimeout", "Exceeded the PodsReady timeout", "False"),
    ("AdmissionCheck", "At least one admission check is false", "False"),
    ("ClusterQueueStopped", "The ClusterQueue is stopped", "False"),
    ("LocalQueueStopped", "The LocalQueue is stopped", "False"),
    ("Preempted", "Preempted", "True"),
])
@VERSIONS
async def test_28_32_eviction_reasons(reason: str, message: str, requeued: str,
                                      version: KueueVersion) -> None:
    w = await world(features=FeatureGates(version=version))
    job = await w.create_job(running(base_job()))
    wl = with_cond(base_wl(admitted_at=w.ts(1)), evicted(w, reason, message))
    wl["status"]["admissionChecks"] = [{"name": "check", "state": "Ready",
                                        "lastTransitionTime": w.ts(), "message": ""}]
    await w.create_workload(wl, owner=job)
    await w.reconcile()
    assert w.job()["spec"]["suspend"] is True
    got = w.workload("wl")
    conds = conditions_of(got)
    assert conds["Requeued"] == (requeued, reason, message)
    assert conds["QuotaReserved"] == ("False", QUOTA_RELEASED_REASON[version], message)
    assert conds["Admitted"] == ("False", "NoReservation", "The workload has no reservation")
    assert "admission" not in got["status"]
    assert got["status"]["accumulatedPastExecutionTimeSeconds"] == 1
    assert w.recorder.events == [(NORMAL, "Stopped", message)]


DEACTIVATED = "The workload is deactivated"


@pytest.mark.kueue_case(
    "TestReconciler/when workload is evicted due to spec.active field being false, job gets "
    "suspended and quota is unset",
    "TestReconciler/when workload is active after deactivation; "
    "objectRetentionPolicies.workloads.afterDeactivatedByKueue=0; should not delete the job",
    "TestReconciler/when workload is manually deactivated; "
    "objectRetentionPolicies.workloads.afterDeactivatedByKueue=0; should not delete the job",
    "TestReconciler/when workload is deactivated by kueue; "
    "objectRetentionPolicies.workloads.afterDeactivatedByKueue=0; should delete the job",
    "TestReconciler/when workload is deactivated by kueue; "
    "objectRetentionPolicies.workloads.afterDeactivatedByKueue=60; retention period has not "
    "expired",
    "TestReconciler/when workload is deactivated by kueue; "
    "objectRetentionPolicies.workloads.afterDeactivatedByKueue=60; retention period has expired",
)
@pytest.mark.parametrize(("case", "retention", "active", "reason", "evicted_ago",
                          "admitted_ago", "deleted", "requeue_after"), [
    ("22 manual deactivation, no policy", None, False, "Deactivated", 0, 1, False, None),
    ("23 active after deactivation", 0, True, "DeactivatedDueToRequeuingLimitExceeded", 0, 1,
     False, None),
    ("24 manually deactivated", 0, False, "Deactivated", 0, 1, False, None),
    ("25 deactivated by kueue", 0, False, "DeactivatedDueToRequeuingLimitExceeded", 0, 1,
     True, None),
    ("26 retention not expired", 120, False, "DeactivatedDueToRequeuingLimitExceeded", 60,
     120, False, 60.0),
    ("27 retention expired", 60, False, "DeactivatedDueToRequeuingLimitExceeded", 60, 120,
     True, None),
])
@VERSIONS
async def test_22_27_deactivation_and_retention(
    case: str, retention: float | None, active: bool, reason: str, evicted_ago: float,
    admitted_ago: float, deleted: bool, requeue_after: float | None, version: KueueVersion,
) -> None:
    policy = WorkloadRetentionPolicy(retention) if retention is not None else None
    w = await world(workload_retention_policy=policy, features=FeatureGates(version=version))
    job = await w.create_job(running(base_job()))
    wl = with_cond(base_wl(admitted_at=w.ts(admitted_ago)),
                   evicted(w, reason, DEACTIVATED, evicted_ago))
    wl["spec"]["active"] = active
    await w.create_workload(wl, owner=job)
    result = await w.reconcile()
    await w.server.settle()
    got = w.workload("wl")
    conds = conditions_of(got)
    assert conds["QuotaReserved"] == ("False", QUOTA_RELEASED_REASON[version], DEACTIVATED), case
    assert conds["Requeued"] == ("False", reason, DEACTIVATED)
    assert conds["Admitted"] == ("False", "NoReservation", "The workload has no reservation")
    assert conds["Evicted"] == ("True", reason, DEACTIVATED)
    assert got["status"]["accumulatedPastExecutionTimeSeconds"] == admitted_ago
    events = [(NORMAL, "Stopped", DEACTIVATED)]
    if deleted:
        assert w.jobs() == []
        events.append((NORMAL, "Deleted", "Deleted job: deactivation retention period expired"))
    else:
        assert w.job()["spec"]["suspend"] is True
    assert w.recorder.events == events
    assert result.requeue_after == (requeue_after or 0.0)


@pytest.mark.kueue_case(
    "TestReconciler/when job is initially suspended, the Workload has active=false and it's not "
    "admitted, it should not get an evicted condition, but the job should remain suspended",
)
async def test_33_inactive_unadmitted_workload_changes_nothing() -> None:
    w = await world()
    job = await w.create_job(base_job())
    wl = base_wl(reserved=False)
    wl["spec"]["active"] = False
    with_cond(wl, cond("QuotaReserved", "False", "PendingEvaluation", DEACTIVATED, w.ts()),
              cond("Admitted", "False", "NoReservation", "The workload has no reservation",
                   w.ts()))
    wl["status"]["admissionChecks"] = [{"name": "check", "state": "Ready",
                                        "lastTransitionTime": w.ts(), "message": ""}]
    created = await w.create_workload(wl, owner=job)
    await w.reconcile()
    assert w.job()["spec"]["suspend"] is True
    assert w.workload("wl")["metadata"]["resourceVersion"] == (
        created["metadata"]["resourceVersion"])
    assert w.recorder.events == []


# --- 34-37: FailedToStart -----------------------------------------------------------------


@pytest.mark.kueue_case(
    "TestReconciler/when workload is admitted and PodSetUpdates conflict between admission "
    "checks on labels, the workload is finished with failure",
    "TestReconciler/when workload is admitted and PodSetUpdates conflict between admission "
    "checks on annotations, the workload is finished with failure",
    "TestReconciler/when workload is admitted and PodSetUpdates conflict between admission "
    "checks on nodeSelector, the workload is finished with failure",
)
@pytest.mark.parametrize("field", ["labels", "annotations", "nodeSelector"])
async def test_34_36_conflicting_checks_fail_to_start(field: str) -> None:
    w = await world()
    job = await w.create_job(base_job())
    wl = base_wl(admitted_at=w.ts())
    wl["status"]["admissionChecks"] = [check("check1", **{field: {"ac-key": "ac-value1"}}),
                                       check("check2", **{field: {"ac-key": "ac-value2"}})]
    await w.create_workload(wl, owner=job)
    result = await w.reconcile()
    assert result.is_zero()
    assert w.job()["spec"]["suspend"] is True
    assert conditions_of(w.workload("wl"))["Finished"] == (
        "True", "FailedToStart",
        f'in admission check "check2": invalid admission check PodSetUpdate: conflict for '
        f"{field}: conflict for key=ac-key, value1=ac-value1, value2=ac-value2")
    assert w.recorder.events == []


@pytest.mark.kueue_case(
    "TestReconciler/when workload is admitted and PodSetUpdates conflict between admission check "
    "nodeSelector and current node selector, the workload is finished with failure",
)
async def test_37_check_conflicts_with_job_node_selector() -> None:
    w = await world()
    job = base_job()
    job["spec"]["template"]["spec"]["nodeSelector"] = {"provisioning": "spot"}
    job = await w.create_job(job)
    wl = base_wl(admitted_at=w.ts())
    wl["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {"provisioning": "spot"}
    wl["status"]["admissionChecks"] = [check("check", nodeSelector={"provisioning": "on-demand"})]
    await w.create_workload(wl, owner=job)
    await w.reconcile()
    got = w.job()
    assert got["spec"]["suspend"] is True
    assert got["spec"]["template"]["spec"]["nodeSelector"] == {"provisioning": "spot"}
    assert conditions_of(w.workload("wl"))["Finished"] == (
        "True", "FailedToStart", "invalid admission check PodSetUpdate: conflict for "
        "nodeSelector: conflict for key=provisioning, value1=spot, value2=on-demand")
    assert w.recorder.events == []


# --- 45-49, 56, 69-71: queue name and priority ------------------------------------------------


@pytest.mark.kueue_case(
    "TestReconciler/the workload is updated when queue name has changed for suspended job",
)
async def test_45_queue_name_change_updates_workload() -> None:
    w = await world()
    job = base_job()
    job["metadata"]["labels"][c.QUEUE_LABEL] = "test-queue-new"
    job = await w.create_job(job)
    await w.create_workload(base_wl(reserved=False, queue="test-queue"), owner=job)
    await w.reconcile()
    assert w.workload("wl")["spec"]["queueName"] == "test-queue-new"
    assert w.recorder.events == []


def with_priority(wl: dict[str, Any], group: str, kind: str, name: str,
                  value: int) -> dict[str, Any]:
    wl["spec"]["priorityClassRef"] = {"group": group, "kind": kind, "name": name}
    wl["spec"]["priority"] = value
    return wl


WPC_REF = ("kueue.x-k8s.io", "WorkloadPriorityClass")
PC_REF = ("scheduling.k8s.io", "PriorityClass")
WPC_NOT_FOUND = (WARNING, "WorkloadPriorityClassNotFound",
                 'WorkloadPriorityClass "missing-wpc" not found')


async def test_46_missing_wpc_warns_and_creates_nothing() -> None:
    w = await world(features=FeatureGates(version=MAIN))
    await w.wpc("test-wpc", 100)
    job = base_job()
    job["metadata"]["labels"][c.WORKLOAD_PRIORITY_CLASS_LABEL] = "missing-wpc"
    await w.create_job(job)
    with pytest.raises(errors.NotFound):
        await w.reconcile()
    assert w.workloads() == []
    assert w.recorder.events == [(WARNING, "WorkloadPriorityClassNotFound",
                                  'WorkloadPriorityClass "missing-wpc" not found')]


@pytest.mark.kueue_case(
    "TestReconciler/the workload is updated when priority class has changed for suspended job",
)
@pytest.mark.parametrize(("case", "ref", "label", "want_error", "want", "events"), [
    ("47 pod PriorityClass left alone", (*PC_REF, "pod-high", 2000), "missing-wpc", False,
     None, []),
    ("48 label changed to a missing class", (*WPC_REF, "test-wpc", 100), "missing-wpc", True,
     None, [WPC_NOT_FOUND]),
    ("49 label changed", (*WPC_REF, "test-wpc", 100), "test-wpc-high", False,
     ("test-wpc-high", 200),
     [(NORMAL, "UpdatedWorkload", "Updated workload priority class: ns/job")]),
])
@VERSIONS
async def test_47_49_priority_sync(case: str, ref: tuple[str, str, str, int], label: str,
                                   want_error: bool, want: tuple[str, int] | None,
                                   events: list[tuple[str, str, str]],
                                   version: KueueVersion) -> None:
    if version is V0_19:  # v0.19.2 returns the NotFound without recording an event
        events = [e for e in events if e != WPC_NOT_FOUND]
    w = await world(features=FeatureGates(version=version))
    await w.wpc("test-wpc", 100)
    await w.wpc("test-wpc-high", 200)
    job = base_job()
    job["metadata"]["labels"][c.WORKLOAD_PRIORITY_CLASS_LABEL] = label
    job = await w.create_job(job)
    created = await w.create_workload(with_priority(base_wl("job", reserved=False), *ref),
                                      owner=job)
    if want_error:
        with pytest.raises(Exception, match="prepare workload priority"):
            await w.reconcile()
    else:
        await w.reconcile()
    got = w.workload("job")
    if want is None:
        assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    else:
        assert got["spec"]["priorityClassRef"] == {"group": WPC_REF[0], "kind": WPC_REF[1],
                                                   "name": want[0]}
        assert got["spec"]["priority"] == want[1]
    assert w.recorder.events == events, case


@pytest.mark.kueue_case("TestReconciler/shouldn't update workload when priority class no changes")
async def test_56_unchanged_pod_priority_class() -> None:
    w = await world()
    await w.priority_class("test-pc", 200)
    job = base_job()
    job["spec"]["template"]["spec"]["priorityClassName"] = "test-pc"
    job = await w.create_job(job)
    wl = base_wl(reserved=False)
    wl["spec"]["podSets"][0]["template"]["spec"]["priorityClassName"] = "test-pc"
    created = await w.create_workload(with_priority(wl, *PC_REF, "test-pc", 200), owner=job)
    await w.reconcile()
    assert w.workload("wl")["metadata"]["resourceVersion"] == (
        created["metadata"]["resourceVersion"])
    assert w.recorder.events == []


@pytest.mark.kueue_case(
    "TestReconciler/the workload is created when queue name is set, with workloadPriorityClass",
    "TestReconciler/the workload is created when queue name is set, with PriorityClass",
    "TestReconciler/the workload is created when queue name is set, with workloadPriorityClass "
    "and PriorityClass",
)
@pytest.mark.parametrize(("case", "wpc_label", "pod_pc", "want_ref", "want_priority"), [
    ("69 workloadPriorityClass", "test-wpc", None,
     {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "test-wpc"}, 100),
    ("70 PriorityClass", None, "test-pc",
     {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "test-pc"}, 200),
    ("71 both: WPC wins", "test-wpc", "test-pc",
     {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "test-wpc"}, 100),
])
async def test_69_71_priority_on_creation(case: str, wpc_label: str | None,
                                          pod_pc: str | None, want_ref: dict[str, str],
                                          want_priority: int) -> None:
    w = await world()
    await w.wpc("test-wpc", 100)
    await w.priority_class("test-pc", 200)
    job = running(base_job())
    job["metadata"]["labels"][c.QUEUE_LABEL] = "test-queue"
    if wpc_label:
        job["metadata"]["labels"][c.WORKLOAD_PRIORITY_CLASS_LABEL] = wpc_label
    if pod_pc:
        job["spec"]["template"]["spec"]["priorityClassName"] = pod_pc
    await w.create_job(job)
    await w.reconcile()
    [wl] = w.workloads()
    assert wl["spec"]["priorityClassRef"] == want_ref, case
    assert wl["spec"]["priority"] == want_priority
    if pod_pc:
        assert wl["spec"]["podSets"][0]["template"]["spec"]["priorityClassName"] == pod_pc
    assert w.job()["spec"]["suspend"] is True
    assert w.recorder.events == [
        (NORMAL, "Stopped", "Missing Workload; unable to restore pod templates"),
        (NORMAL, "CreatedWorkload", "Created Workload: ns/job-job-b3219")]


async def test_default_priority_class_is_the_lowest_global_default() -> None:
    w = await world()
    await w.priority_class("high-default", 1000, global_default=True)
    await w.priority_class("low-default", 10, global_default=True)
    await w.create_job(base_job())
    await w.reconcile()
    [wl] = w.workloads()
    assert wl["spec"]["priorityClassRef"] == {"group": "scheduling.k8s.io",
                                              "kind": "PriorityClass", "name": "low-default"}
    assert wl["spec"]["priority"] == 10


# --- 57-58, 72, 82-85: creation conditions ----------------------------------------------------


@pytest.mark.kueue_case(
    "TestReconciler/the workload without uid label is created when job's uid is longer than 63 "
    "characters",
)
async def test_57_long_uid_gets_no_uid_label() -> None:
    w = await world()
    job = running(base_job())
    job["metadata"]["labels"][c.QUEUE_LABEL] = "test-queue"
    await w.create_job(job, uid="long-uid" * 8)
    await w.reconcile()
    [wl] = w.workloads()
    assert wl["metadata"]["name"] == "job-job-bf838"
    assert c.JOB_UID_LABEL not in (wl["metadata"].get("labels") or {})
    assert w.recorder.events == [
        (NORMAL, "Stopped", "Missing Workload; unable to restore pod templates"),
        (NORMAL, "CreatedWorkload", "Created Workload: ns/job-job-bf838")]


@pytest.mark.kueue_case("TestReconciler/the workload is not created when queue name is not set")
async def test_58_no_queue_name_no_workload() -> None:
    w = await world()
    await w.create_job(running(base_job(queue=None)))
    await w.reconcile()
    assert w.workloads() == []
    assert w.job()["spec"]["suspend"] is False
    assert w.recorder.events == []


@pytest.mark.kueue_case("TestReconciler/the workload shouldn't be recreated for the completed job")
async def test_72_completed_job_gets_no_workload() -> None:
    w = await world()
    job = base_job()
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    await w.create_job(job)
    await w.reconcile()
    assert w.workloads() == []
    assert w.recorder.events == []


@pytest.mark.kueue_case(
    "TestReconciler/the maximum execution time is passed to the created workload",
)
async def test_82_max_execution_time_passed_to_workload() -> None:
    w = await world()
    job = base_job()
    job["metadata"]["labels"][c.MAX_EXEC_TIME_SECONDS_LABEL] = "10"
    # Kueue's case uses uid "" (job-job-b3219); an API server rejects an empty owner uid.
    await w.create_job(job)
    await w.reconcile()
    [wl] = w.workloads()
    assert wl["metadata"]["name"] == "job-job-b3219"
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 10
    assert wl["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-uid"}
    assert w.recorder.events == [
        (NORMAL, "CreatedWorkload", "Created Workload: ns/job-job-b3219")]


@pytest.mark.kueue_case("TestReconciler/the maximum execution time is updated in the workload")
async def test_83_max_execution_time_updated() -> None:
    w = await world()
    job = base_job()
    job["metadata"]["labels"][c.MAX_EXEC_TIME_SECONDS_LABEL] = "10"
    job = await w.create_job(job)
    wl = base_wl("job", reserved=False)
    wl["spec"]["maximumExecutionTimeSeconds"] = 5
    await w.create_workload(wl, owner=job)
    await w.reconcile()
    assert w.workload("job")["spec"]["maximumExecutionTimeSeconds"] == 10
    assert w.recorder.events == [
        (NORMAL, "UpdatedWorkload", "Updated not matching Workload for suspended job: ns/job")]


@pytest.mark.kueue_case(
    "TestReconciler/job with queue name is not reconciled in unlabelled namespace when "
    "AlwaysRespected is enabled",
)
async def test_84_unlabelled_namespace_is_ignored_even_with_queue() -> None:
    w = await world(managed_jobs_namespace_selector=LabelSelector.parse("managed-by-kueue=true"))
    await w.create_job(running(base_job()))
    await w.reconcile()
    assert w.workloads() == []
    assert w.job()["spec"]["suspend"] is False
    assert w.recorder.events == []


@pytest.mark.kueue_case(
    "TestReconciler/job with queue name is reconciled in labelled namespace when AlwaysRespected "
    "is enabled",
)
async def test_85_labelled_namespace_is_reconciled() -> None:
    w = await world(managed_jobs_namespace_selector=LabelSelector.parse("managed-by-kueue=true"),
                    manage_jobs_without_queue_name=True)
    job = base_job(namespace="labelled-ns")
    job["metadata"]["labels"][c.QUEUE_LABEL] = "test-queue"
    await w.create_job(job)
    await w.reconcile(namespace="labelled-ns")
    [wl] = w.workloads("labelled-ns")
    assert wl["spec"]["queueName"] == "test-queue"
    assert wl["spec"]["priority"] == 0
    assert wl["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-uid"}
    assert w.recorder.events == [
        (NORMAL, "CreatedWorkload", "Created Workload: labelled-ns/job-job-b3219")]


# --- 59-62: child jobs --------------------------------------------------------------------


async def child_world(*, mjwqn: bool, parent_wl: str | None, admitted: bool,
                      child_queue: str | None = None) -> World:
    w = await world(manage_jobs_without_queue_name=mjwqn)
    parent = base_job("parent", queue="queue")
    parent = await w.create_job(parent, uid="parent")
    child = running(base_job(queue=child_queue))
    child["metadata"]["ownerReferences"] = [controller_ref(parent)]
    await w.create_job(child)
    if parent_wl is not None:
        await w.create_workload(base_wl(parent_wl, reserved=admitted,
                                        admitted_at=w.ts() if admitted else None),
                                owner=parent)
    return w


@pytest.mark.kueue_case(
    "TestReconciler/non-standalone job is suspended if its parent workload is not found",
    "TestReconciler/non-standalone job is not suspended if its parent workload is admitted",
    "TestReconciler/non-standalone job is suspended if its parent workload is found and not "
    "admitted",
    "TestReconciler/non-standalone job is not suspended if its parent workload is admitted and "
    "queue name is set",
)
@pytest.mark.parametrize(("case", "mjwqn", "parent_wl", "admitted", "child_queue", "suspended"), [
    ("59 parent workload not found", False, None, False, None, True),
    ("60 parent workload admitted", True, "unit-test", True, None, False),
    ("61 parent workload not admitted", True, "parent-workload", False, None, True),
    ("62 parent admitted, child has a queue", False, "unit-test", True, "test-queue", False),
])
async def test_59_62_child_jobs(case: str, mjwqn: bool, parent_wl: str | None, admitted: bool,
                                child_queue: str | None, suspended: bool) -> None:
    w = await child_world(mjwqn=mjwqn, parent_wl=parent_wl, admitted=admitted,
                          child_queue=child_queue)
    before = len(w.workloads())
    await w.reconcile("job")
    assert w.job()["spec"]["suspend"] is suspended, case
    assert len(w.workloads()) == before, "a child job never gets its own workload"
    assert w.recorder.events == (
        [(NORMAL, "Suspended", "Kueue managed child job suspended")] if suspended else [])


async def test_job_nesting_too_deep_is_a_warning() -> None:
    w = await world()
    owner = await w.create_job(base_job("ancestor-0", queue="q"), uid="uid-0")
    for i in range(1, 12):
        j = base_job(f"ancestor-{i}", queue=None)
        j["metadata"]["ownerReferences"] = [controller_ref(owner)]
        owner = await w.create_job(j, uid=f"uid-{i}")
    child = base_job("child", queue=None)
    child["metadata"]["ownerReferences"] = [controller_ref(owner)]
    await w.create_job(child, uid="child")
    with pytest.raises(Exception, match="managed owner chain limit reached"):
        await w.reconcile("child")
    assert w.recorder.events == [(WARNING, "JobNestingTooDeep", c.MSG_JOB_NESTING_TOO_DEEP)]


# --- 63-66, 68: matching, restore, finished ----------------------------------------------------


@pytest.mark.kueue_case("TestReconciler/checking a second non-matching workload is deleted")
async def test_63_second_non_matching_workload_is_deleted() -> None:
    w = await world(manage_jobs_without_queue_name=True)
    job = await w.create_job(running(base_job(parallelism=5)))
    first = base_wl("first-workload", count=5, admitted_at=w.ts())
    first["status"]["admission"]["podSetAssignments"] = []
    await w.create_workload(first, owner=job)
    await w.create_workload(base_wl("second-workload", reserved=False,
                                    pod_sets=[pod_set(10, min_count=5)]), owner=job)
    with pytest.raises(ExtraWorkloadsError, match="extra workloads: deleted 1 workloads"):
        await w.reconcile()
    await w.server.settle()
    assert [x["metadata"]["name"] for x in w.workloads()] == ["first-workload"]
    assert w.recorder.events == [
        (NORMAL, "DeletedWorkload", "Deleted not matching Workload: ns/second-workload")]


@pytest.mark.kueue_case(
    "TestReconciler/when workload is evicted, suspend, reset startTime and restore node affinity",
    "TestReconciler/when workload is evicted but suspended, reset startTime and restore node "
    "affinity",
    "TestReconciler/when workload is evicted, suspended and startTime is reset, restore node "
    "affinity",
)
@pytest.mark.parametrize(("case", "suspended", "start_time", "events"), [
    ("64 running", False, True, [(NORMAL, "Stopped", "")]),
    ("65 suspended, startTime set", True, True, []),
    ("66 suspended, no startTime", True, False, []),
])
async def test_64_66_eviction_restores_node_selector(
    case: str, suspended: bool, start_time: bool, events: list[tuple[str, str, str]],
) -> None:
    w = await world()
    job = base_job(suspend=suspended)
    job["spec"]["template"]["spec"]["nodeSelector"] = {"provisioning": "spot"}
    status: dict[str, Any] = {"active": 10}
    if start_time:
        status["startTime"] = w.ts()
    job["status"] = status
    job = await w.create_job(job)
    wl = with_cond(base_wl(admitted_at=w.ts()), cond("Evicted", "True", "", "", w.ts()))
    created = await w.create_workload(wl, owner=job)
    await w.reconcile()
    got = w.job()
    assert got["spec"]["suspend"] is True, case
    assert "startTime" not in got["status"]
    assert got["status"]["active"] == 10
    assert not got["spec"]["template"]["spec"].get("nodeSelector")
    assert c.STOPPING_ANNOTATION not in (got["metadata"].get("annotations") or {})
    # The job is still active: the quota is not released yet.
    assert w.workload("wl")["metadata"]["resourceVersion"] == (
        created["metadata"]["resourceVersion"])
    assert w.recorder.events == events


@pytest.mark.kueue_case("TestReconciler/when the workload is finished, its finalizer is removed")
async def test_68_finished_workload_loses_its_finalizer() -> None:
    w = await world()
    job = await w.create_job(base_job())
    wl = base_wl("a", reserved=False)
    with_cond(wl, cond("QuotaReserved", "False", "Pending", "", w.ts()),
              cond("Finished", "True", "Succeeded", "", w.ts()))
    await w.create_workload(wl, owner=job)
    await w.reconcile()
    assert not w.workload("a")["metadata"].get("finalizers")
    assert w.recorder.events == [(NORMAL, "FinishedWorkload",
                                  "Workload 'ns/a' is declared finished")]


# --- 74-76: prebuilt workloads ------------------------------------------------------------------


def prebuilt(count: int = 10) -> dict[str, Any]:
    wl = base_wl("prebuilt-workload", count=count, reserved=False, queue="test-queue")
    wl["spec"]["podSets"][0]["template"]["spec"]["priorityClassName"] = "test-pc"
    return with_priority(wl, *WPC_REF, "test-wpc", 100)


def prebuilt_job() -> dict[str, Any]:
    job = running(base_job())
    job["metadata"]["labels"][c.QUEUE_LABEL] = "test-queue"
    job["metadata"]["labels"][c.PREBUILT_WORKLOAD_LABEL] = "prebuilt-workload"
    job["spec"]["template"]["spec"]["priorityClassName"] = "test-pc"
    return job


@pytest.mark.kueue_case(
    "TestReconciler/when the prebuilt workload exists its owner info is updated",
)
async def test_74_prebuilt_workload_gets_owner() -> None:
    w = await world()
    await w.create_job(prebuilt_job())
    await w.create_workload(prebuilt())
    await w.reconcile()
    got = w.workload("prebuilt-workload")
    assert got["metadata"]["ownerReferences"] == [{
        "apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "test-uid",
        "controller": True, "blockOwnerDeletion": True}]
    assert got["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-uid"}
    assert w.job()["spec"]["suspend"] is True
    assert w.recorder.events == [(NORMAL, "Stopped", "Not admitted by cluster queue")]


@pytest.mark.kueue_case("TestReconciler/when the prebuilt workload is owned by another object")
async def test_75_prebuilt_workload_owned_by_another_object() -> None:
    w = await world()
    await w.create_job(prebuilt_job())
    wl = prebuilt()
    wl["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job",
                                          "name": "other-job", "uid": "other-uid",
                                          "controller": True}]
    created = await w.create_workload(wl)
    with pytest.raises(PrebuiltWorkloadNotFoundError):
        await w.reconcile()
    assert w.workload("prebuilt-workload")["metadata"]["resourceVersion"] == (
        created["metadata"]["resourceVersion"])
    assert w.job()["spec"]["suspend"] is True
    assert w.recorder.events == [(NORMAL, "Stopped", "missing workload")]


@pytest.mark.kueue_case("TestReconciler/when the prebuilt workload is not equivalent to the job")
async def test_76_prebuilt_workload_out_of_sync_is_finished() -> None:
    w = await world()
    await w.create_job(prebuilt_job())
    await w.create_workload(prebuilt(count=1))
    with pytest.raises(PrebuiltWorkloadNotFoundError):
        await w.reconcile()
    got = w.workload("prebuilt-workload")
    assert got["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-uid"}
    assert got["metadata"]["ownerReferences"][0]["uid"] == "test-uid"
    assert conditions_of(got)["Finished"] == (
        "True", "OutOfSync", "The prebuilt workload is out of sync with its user job")
    assert w.job()["spec"]["suspend"] is True
    assert w.recorder.events == [(NORMAL, "Stopped", "missing workload")]


# --- 77-81: tolerations, admission check events -------------------------------------------------


def toleration(key: str) -> dict[str, str]:
    return {"key": key, "operator": "Exists", "effect": "NoSchedule"}


async def tolerations_world(*, job_running: bool, reserved: bool, admitted: bool) -> World:
    w = await world()
    job = base_job(suspend=not job_running)
    job["spec"]["template"]["spec"]["tolerations"] = [toleration("tolerationkey2")]
    job["spec"]["template"]["spec"]["nodeSelector"] = {"node-label": "value"}
    job = await w.create_job(job)
    wl = base_wl("job-job-b3219", reserved=reserved,
                 admitted_at=w.ts() if admitted else None)
    wl["metadata"]["labels"] = {c.JOB_UID_LABEL: "test-uid"}
    spec = wl["spec"]["podSets"][0]["template"]["spec"]
    spec["tolerations"] = [toleration("tolerationkey1")]
    spec["nodeSelector"] = {"different node-label": "different value"}
    await w.create_workload(wl, owner=job)
    return w


@pytest.mark.kueue_case(
    "TestReconciler/the workload is not admitted, tolerations and node selector change",
)
async def test_77_unadmitted_workload_follows_tolerations() -> None:
    w = await tolerations_world(job_running=False, reserved=False, admitted=False)
    await w.reconcile()
    spec = w.workload("job-job-b3219")["spec"]["podSets"][0]["template"]["spec"]
    assert spec["tolerations"] == [toleration("tolerationkey2")]
    assert spec["nodeSelector"] == {"node-label": "value"}
    assert w.recorder.events == [(NORMAL, "UpdatedWorkload",
                                  "Updated not matching Workload for suspended job: "
                                  "ns/job-job-b3219")]


@pytest.mark.kueue_case(
    "TestReconciler/the workload is admitted, tolerations and node selector change",
)
async def test_78_admitted_workload_ignores_tolerations() -> None:
    w = await tolerations_world(job_running=True, reserved=True, admitted=True)
    before = w.workload("job-job-b3219")
    job_before = w.job()
    await w.reconcile()
    assert w.workload("job-job-b3219") == before
    assert w.job() == job_before
    assert w.recorder.events == []


@pytest.mark.kueue_case(
    "TestReconciler/the workload is admitted, job still suspended and tolerations change",
)
async def test_79_reserved_unadmitted_workload_is_deleted() -> None:
    w = await tolerations_world(job_running=False, reserved=True, admitted=False)
    with pytest.raises(NoMatchingWorkloadsError):
        await w.reconcile()
    await w.server.settle()
    assert w.workloads() == []
    assert w.recorder.events == [(NORMAL, "DeletedWorkload",
                                  "Deleted not matching Workload: ns/job-job-b3219")]


@pytest.mark.kueue_case(
    "TestReconciler/admission check message is emitted as event for job",
    "TestReconciler/multiple admission check messages are emitted as a single event for job",
)
@pytest.mark.parametrize(("checks", "message"), [
    ([("acName", "Not admitted, ETA: 2024-02-22T10:36:40Z.")],
     "acName: Not admitted, ETA: 2024-02-22T10:36:40Z."),
    ([("acName1", "Some message."), ("acName2", "Another message.")],
     "acName1: Some message.; acName2: Another message."),
])
async def test_80_81_admission_check_messages(checks: list[tuple[str, str]],
                                              message: str) -> None:
    w = await world()
    job = await w.create_job(base_job())
    wl = base_wl()
    wl["spec"]["active"] = False
    wl["status"]["conditions"][0]["reason"] = "Reason"
    with_cond(wl, cond("Admitted", "False", "NoChecks", "", w.ts()))
    wl["status"]["admissionChecks"] = [
        {"name": n, "state": "Pending", "lastTransitionTime": w.ts(), "message": m}
        for n, m in checks]
    created = await w.create_workload(wl, owner=job)
    await w.reconcile()
    assert w.workload("wl")["metadata"]["resourceVersion"] == (
        created["metadata"]["resourceVersion"])
    assert w.recorder.events == [(NORMAL, "UpdatedAdmissionCheck", message)]
