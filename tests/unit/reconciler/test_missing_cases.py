"""Rules of Kueue v0.19.2's jobframework that no other test pinned down.

Each test here fails when its rule is dropped from the reconciler or from
``jobframework.workload`` (checked by breaking the code on purpose): the Admitted condition
while a delayed topology request is pending, clearing the Workload's queue name under
``manageJobsWithoutQueueName``, requeuing after a ``NodeFailures`` eviction, the
``SkipReassignmentForPodOwnedWorkloads`` rule, and the pod templates a stopped job gets
back.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Sequence
from typing import Any

import pytest

from jobframework import constants as c
from jobframework import workload as wlpkg
from jobframework.api import PodSet, Workload
from jobframework.constants import FeatureGates
from jobframework.podset import PodSetInfo, restore_pod_spec
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.reconcile import Request

from .helpers import START, MockJob, World, admitted_status, fixed_uid

NOW = START + dt.timedelta(minutes=5)
TOPOLOGY_MESSAGE = "There are pending delayed topology requests"


def conditions_of(wl: Object) -> dict[str, tuple[str, str, str]]:
    return {x["type"]: (x["status"], x["reason"], x["message"])
            for x in (wl.get("status") or {}).get("conditions") or []}


# --- SyncAdmittedCondition with delayed topology requests ------------------------------------


def reserved_workload(*assignments: dict[str, Any], admitted: bool = False,
                      checks: Sequence[str] = ()) -> Workload:
    """Quota reserved at START (optionally Admitted then), with ``assignments``."""
    ltt = "2026-01-02T03:04:05Z"
    conds = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
              "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": ltt}]
    if admitted:
        conds.append({"type": "Admitted", "status": "True", "reason": "Admitted",
                      "message": "The workload is admitted", "lastTransitionTime": ltt})
    return wlpkg.from_object({
        "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "default", "generation": 1},
        "spec": {"queueName": "lq", "podSets": [
            {"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
        "status": {
            "conditions": conds,
            "admission": {"clusterQueue": "cq", "podSetAssignments": list(assignments)},
            "admissionChecks": [{"name": ch, "state": "Pending", "message": "",
                                 "lastTransitionTime": ltt} for ch in checks],
        },
    })


def admitted_condition(wl: Workload) -> tuple[str, str, str] | None:
    cond = wl.find_condition(c.WORKLOAD_ADMITTED)
    return None if cond is None else (cond.status, cond.reason or "", cond.message or "")


PENDING_TOPOLOGY = {"name": "main", "delayedTopologyRequest": "Pending"}
TOPOLOGY_ASSIGNMENT = {"levels": ["kubernetes.io/hostname"], "slices": [{
    "domainCount": 1, "valuesPerLevel": [{"universal": "node-1"}],
    "podCounts": {"universal": 1}}]}


@pytest.mark.parametrize("version", list(c.KueueVersion))
def test_admitted_workload_with_a_pending_request_loses_admission_and_accumulates_time(
        version: c.KueueVersion) -> None:
    wl = reserved_workload(PENDING_TOPOLOGY, admitted=True)
    assert wlpkg.sync_admitted_condition(wl, NOW, features=FeatureGates(version=version))
    assert admitted_condition(wl) == ("False", "PendingDelayedTopologyRequests",
                                      TOPOLOGY_MESSAGE)
    assert not wl.is_admitted()
    assert wl.status is not None
    assert wl.status.accumulated_past_execution_time_seconds == 300


def test_reserved_workload_with_a_pending_request_is_not_admitted_yet() -> None:
    """v0.19 (UnadmittedWorkloadsObservability off): Admitted only changes when its status
    must flip, and a pending request keeps it from becoming True."""
    wl = reserved_workload(PENDING_TOPOLOGY)
    assert not wlpkg.sync_admitted_condition(wl, NOW)
    assert admitted_condition(wl) is None


def test_observability_writes_the_pending_topology_reason_before_admission() -> None:
    """v0.19.2 with UnadmittedWorkloadsObservability on re-derives Admitted once
    QuotaReserved exists: the pending request is named even though nothing flips."""
    wl = reserved_workload(PENDING_TOPOLOGY)
    gates = FeatureGates(UnadmittedWorkloadsObservability=True)
    assert wlpkg.sync_admitted_condition(wl, NOW, features=gates)
    assert admitted_condition(wl) == ("False", "PendingDelayedTopologyRequests",
                                      TOPOLOGY_MESSAGE)


def test_observability_rederivation_reports_no_change_when_nothing_changed() -> None:
    """v0.19.2 returns what ``SetStatusCondition`` reports: re-deriving the same Admitted
    condition again is no change (so no status write follows)."""
    wl = reserved_workload(PENDING_TOPOLOGY)
    gates = FeatureGates(UnadmittedWorkloadsObservability=True)
    assert wlpkg.sync_admitted_condition(wl, NOW, features=gates)
    assert not wlpkg.sync_admitted_condition(wl, NOW + dt.timedelta(seconds=1),
                                             features=gates)


def test_ready_delayed_topology_request_admits() -> None:
    wl = reserved_workload({"name": "main", "delayedTopologyRequest": "Ready"})
    assert wlpkg.sync_admitted_condition(wl, NOW)
    assert admitted_condition(wl) == ("True", "Admitted", "The workload is admitted")


def test_pending_request_with_a_topology_assignment_already_admits() -> None:
    """v0.19.2's ``HasTopologyAssignmentsPending`` only counts a pod set still without a
    topology assignment; one already assigned does not hold admission back."""
    wl = reserved_workload({**PENDING_TOPOLOGY, "topologyAssignment": TOPOLOGY_ASSIGNMENT})
    assert wlpkg.sync_admitted_condition(wl, NOW)
    assert admitted_condition(wl) == ("True", "Admitted", "The workload is admitted")


def test_unready_checks_take_precedence_over_pending_topology() -> None:
    """Under v0.19 (UnadmittedWorkloadsObservability off) the checks' reason wins."""
    wl = reserved_workload(PENDING_TOPOLOGY, admitted=True, checks=["prov"])
    assert wlpkg.sync_admitted_condition(wl, NOW)
    assert admitted_condition(wl) == ("False", "UnsatisfiedChecks",
                                      "The workload has not all checks ready")


# --- queue name cleared under manageJobsWithoutQueueName --------------------------------------


async def create_job(w: World, *, labels: dict[str, str], suspend: bool = True,
                     template: dict[str, Any] | None = None,
                     status: dict[str, Any] | None = None) -> Object:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "test-job", "namespace": "default", "labels": labels},
           "spec": {"suspend": suspend,
                    "template": template or {"spec": {"containers": []}}}}
    with fixed_uid("test-job"):
        created = await w.client.create(job)
    if status:
        created["status"] = status
        created = await w.client.update_status(created)
    return created


async def test_removed_queue_label_clears_the_workload_queue_name() -> None:
    w = World(manage_jobs_without_queue_name=True)
    await create_job(w, labels={})
    await w.create_workload()
    await w.reconcile(MockJob())
    [wl] = w.workloads()
    # Go sets ``spec.queueName`` to "" and omits the empty field when it writes.
    assert "queueName" not in wl["spec"], wl["spec"]
    assert w.recorder.events == []


async def test_queue_label_still_set_keeps_the_workload_queue_name() -> None:
    w = World(manage_jobs_without_queue_name=True)
    await create_job(w, labels={c.QUEUE_LABEL: "test-lq"})
    created = await w.create_workload()
    await w.reconcile(MockJob())
    [wl] = w.workloads()
    assert wl["spec"]["queueName"] == "test-lq"
    assert wl["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


# --- eviction reasons that requeue -------------------------------------------------------------


async def test_node_failures_eviction_requeues() -> None:
    w = World()
    await create_job(w, labels={c.QUEUE_LABEL: "test-lq"}, suspend=False)
    message = "Workload was evicted as there was no replacement for a failed node: node-1"
    await w.create_workload(status=admitted_status(w, evicted=("NodeFailures", message)))
    await w.reconcile(MockJob())
    assert w.job()["spec"]["suspend"] is True
    [wl] = w.workloads()
    conds = conditions_of(wl)
    assert conds["Requeued"] == ("True", "NodeFailures", message)
    assert conds["QuotaReserved"] == ("False", "Pending", message)
    assert conds["Admitted"] == ("False", "NoReservation", "The workload has no reservation")
    assert "admission" not in wl["status"]
    assert w.recorder.events == [("Normal", "Stopped", message)]


# --- SkipReassignmentForPodOwnedWorkloads -------------------------------------------------------

POD_GVK = GVK("", "v1", "Pod")


class PodJob(MockJob):
    """A job adapter over a Pod, held back by a scheduling gate (never "suspended" by spec)."""

    def is_suspended(self) -> bool:
        return True

    def gvk(self) -> GVK:
        return POD_GVK


async def preempted_workload(w: World, owner: Object, *, owners: int = 1,
                             group: bool = False) -> None:
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
           "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    refs = [ref] + [{"apiVersion": "v1", "kind": "Pod", "name": f"other-{i}",
                     "uid": f"other-{i}"} for i in range(1, owners)]
    wl: Object = {
        "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "default",
                     "finalizers": [c.RESOURCE_IN_USE_FINALIZER_NAME],
                     "ownerReferences": refs},
        "spec": {"queueName": "test-lq", "priority": 0, "podSets": [
            {"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
    }
    if group:
        wl["metadata"]["annotations"] = {c.IS_GROUP_WORKLOAD_ANNOTATION_KEY: "true"}
    await w.client.create(wl)
    await w.client.apply(
        {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
         "metadata": {"name": "wl", "namespace": "default"},
         "status": admitted_status(w, evicted=("Preempted", "Preempted by a test"))},
        field_manager=c.ADMISSION_NAME, force=True, subresource="status")


@pytest.mark.parametrize(("case", "gate", "owners", "group", "requeued"), [
    ("single pod", True, 1, False, "False"),
    ("single pod, gate off", False, 1, False, "True"),
    ("pod group annotation", True, 1, True, "True"),
    ("several pod owners", True, 2, False, "True"),
])
async def test_preempted_pod_owned_workload_is_not_requeued(
        case: str, gate: bool, owners: int, group: bool, requeued: str) -> None:
    w = World(features=FeatureGates(SkipReassignmentForPodOwnedWorkloads=gate))
    with fixed_uid("test-job"):
        pod = await w.client.create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "test-job", "namespace": "default",
                         "labels": {c.QUEUE_LABEL: "test-lq"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    await preempted_workload(w, pod, owners=owners, group=group)
    await w.reconciler.reconcile_generic_job(Request.of("default", "test-job"), PodJob())
    [wl] = w.workloads()
    conds = conditions_of(wl)
    assert conds["Requeued"] == (requeued, "Preempted", "Preempted by a test"), case
    # The quota is released either way.
    assert conds["QuotaReserved"] == ("False", "Pending", "Preempted by a test"), case
    assert "admission" not in wl["status"], case


async def test_preempted_job_owned_workload_is_requeued() -> None:
    w = World()
    job = await create_job(w, labels={c.QUEUE_LABEL: "test-lq"})
    await preempted_workload(w, job)
    await w.reconcile(MockJob())
    [wl] = w.workloads()
    assert conditions_of(wl)["Requeued"] == ("True", "Preempted", "Preempted by a test")


# --- restore on stop ---------------------------------------------------------------------------

ORIGINAL_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "demo"}},
    "spec": {"containers": [], "nodeSelector": {"disk": "ssd"}},
}
#: The template as Kueue started the job: the admission's flavor and pod-set label merged in.
STARTED_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "demo", c.PODSET_LABEL: "main"}},
    "spec": {"containers": [], "nodeSelector": {"disk": "ssd", "flavor": "on-demand"}},
}


#: A custom job kind: the generic stop path (suspend and restore in one patch) is what it
#: gets; batch/v1 Jobs forbid that patch and have their own stop.
TEST_JOB_GVK = GVK("example.com", "v1", "TestJob")


class RestoringJob(MockJob):
    """A job with one pod template that puts back what the Workload stored."""

    def __init__(self) -> None:
        super().__init__([PodSet(name="main", count=1,
                                 template=copy.deepcopy(ORIGINAL_TEMPLATE))])
        self.restored: list[PodSetInfo] = []

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        self.restored = list(pod_sets_info)
        return restore_pod_spec(self.obj["spec"]["template"], pod_sets_info[0])

    def gvk(self) -> GVK:
        return TEST_JOB_GVK


async def running_job_and_workload(w: World, status: dict[str, Any] | None) -> Object:
    w.server.register_kind(TEST_JOB_GVK, "testjobs", True)
    job: Object = {"apiVersion": TEST_JOB_GVK.api_version, "kind": TEST_JOB_GVK.kind,
                   "metadata": {"name": "test-job", "namespace": "default",
                                "labels": {c.QUEUE_LABEL: "test-lq"}},
                   "spec": {"suspend": False, "template": copy.deepcopy(STARTED_TEMPLATE)}}
    with fixed_uid("test-job"):
        created = await w.client.create(job)
    created["status"] = {"active": 1}
    created = await w.client.update_status(created)
    wl = await w.create_workload(podSets=[{"name": "main", "count": 1,
                                           "template": copy.deepcopy(ORIGINAL_TEMPLATE)}],
                                 status=status)
    wl["metadata"]["ownerReferences"] = [{
        "apiVersion": TEST_JOB_GVK.api_version, "kind": TEST_JOB_GVK.kind,
        "name": "test-job", "uid": "test-job", "controller": True,
        "blockOwnerDeletion": True}]
    await w.client.update(wl)
    return created


@pytest.mark.parametrize("stop", ["evicted", "not admitted"])
async def test_stopped_job_gets_its_original_pod_templates_back(stop: str) -> None:
    w = World()
    status = (admitted_status(w, evicted=("Preempted", "Preempted by a test"))
              if stop == "evicted" else None)
    await running_job_and_workload(w, status)
    job = RestoringJob()
    await w.reconciler.reconcile_generic_job(Request.of("default", "test-job"), job)
    [stopped] = w.server.objects(TEST_JOB_GVK, "default")
    assert stopped["spec"]["suspend"] is True, stop
    assert stopped["spec"]["template"] == ORIGINAL_TEMPLATE, stop
    assert [(i.name, i.count, i.labels, i.node_selector) for i in job.restored] == [
        ("main", 1, {"app": "demo"}, {"disk": "ssd"})], stop
    message = "Preempted by a test" if stop == "evicted" else c.MSG_NOT_ADMITTED
    assert w.recorder.events == [("Normal", "Stopped", message)], stop
