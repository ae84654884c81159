"""JobFlow under MultiKueue (issue #15): ``spec.managedBy`` defaulted by Kueue's webhook and
immutable; on the manager cluster the DAG controller leaves a MultiKueue JobFlow alone
while the generic reconciler keeps its Workload and reads the worker's status that
Kueue's generic adapter copies back; on the worker the copy runs as any JobFlow.

The tests play Kueue's scheduler and MultiKueue (:mod:`.multikueue`) on one in-memory
server per cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.jobflow import (
    FRAMEWORK_NAME,
    JOBFLOW_GVK,
    JobFlowJob,
    JobFlowKueueWebhook,
    JobFlowWebhook,
    load_crds,
    validate_jobflow,
    validate_jobflow_update,
)
from integrations.jobflow.api import (
    JOBFLOW_MANAGED_BY_CONTROLLER,
    POD_SETS_INFO_ANNOTATION,
    managed_elsewhere,
)
from integrations.jobflow.job import pods_ready_from_status
from jobframework import constants as c
from jobframework.constants import FeatureGates
from jobframework.integrations import IntegrationManager
from jobframework.reconciler import create_merge_patch
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import Object
from jobframework.testing import APIServer
from jobframework.webhook import ValidationError

from .helpers import Harness, flow, jobflow
from .multikueue import (
    MK,
    MK_QUEUE,
    PLAIN_QUEUE,
    admission_status,
    queues,
    remote_copy,
    remote_workload,
    sync_status,
)
from .test_kueue import WORKLOAD, Kueue

FOREIGN = "example.com/other-controller"


def queued(name: str = "wf", queue: str = MK_QUEUE, **spec: Any) -> Object:
    """A two-step JobFlow in ``queue`` (a, then b)."""
    wf = jobflow(name, [flow("a", parallelism=2), flow("b", "a")], **spec)
    wf["metadata"]["labels"] = {c.QUEUE_LABEL: queue}
    return wf


def webhook(server: APIServer, *, features: FeatureGates | None = None) -> JobFlowKueueWebhook:
    im = IntegrationManager()
    im.register_external_job_type(FRAMEWORK_NAME)
    kw: dict[str, Any] = {} if features is None else {"features": features}
    return JobFlowKueueWebhook(server.client(), integration_manager=im, queues=queues(), **kw)


def errors(errs: Any) -> list[str]:
    return [str(e) for e in errs]


# --- defaulting (Kueue's ApplyDefaultForManagedBy) ----------------------------------------


async def test_defaulted_to_multikueue_for_a_multikueue_queue(server: APIServer) -> None:
    wf = queued()
    await webhook(server).default(wf)
    assert wf["spec"]["managedBy"] == MK
    assert wf["spec"]["suspend"] is True, "queued: suspended as well"
    assert managed_elsewhere(wf)


async def test_own_controller_value_is_taken_over(server: APIServer) -> None:
    # CanDefaultManagedBy: unset or the kind's own controller.
    wf = queued(managedBy=JOBFLOW_MANAGED_BY_CONTROLLER)
    await webhook(server).default(wf)
    assert wf["spec"]["managedBy"] == MK


@pytest.mark.parametrize("case", ["gate off", "no MultiKueue check", "other controller",
                                  "no queue"])
async def test_not_defaulted(server: APIServer, case: str) -> None:
    wf = queued()
    hook = webhook(server)
    if case == "gate off":
        hook = webhook(server, features=FeatureGates(MultiKueue=False))
    elif case == "no MultiKueue check":
        wf = queued(queue=PLAIN_QUEUE)
    elif case == "other controller":
        wf = queued(managedBy=FOREIGN)
    else:
        del wf["metadata"]["labels"]
    expected = copy.deepcopy(wf.get("spec", {}).get("managedBy"))
    await hook.default(wf)
    assert wf["spec"].get("managedBy") == expected


# --- validation -----------------------------------------------------------------------------


def test_managed_by_format_as_batch_job() -> None:
    assert errors(validate_jobflow(jobflow("wf", [flow("a")], managedBy=MK))) == []
    assert errors(validate_jobflow(jobflow("wf", [flow("a")], managedBy="nope"))) == [
        'spec.managedBy: Invalid value: "nope": must be a domain-prefixed path '
        '(such as "acme.io/foo")']
    long = "example.com/" + "x" * 52
    assert errors(validate_jobflow(jobflow("wf", [flow("a")], managedBy=long))) == [
        "spec.managedBy: Too long: may not be more than 63 bytes"]


@pytest.mark.parametrize("old,new", [(MK, FOREIGN), (None, MK), (MK, None)],
                         ids=["changed", "added", "removed"])
async def test_managed_by_is_immutable(server: APIServer, old: str | None,
                                       new: str | None) -> None:
    before = queued(suspend=True)
    after = queued(suspend=True)
    for obj, value in ((before, old), (after, new)):
        if value is not None:
            obj["spec"]["managedBy"] = value
    shown = "null" if new is None else f'"{new}"'
    expected = f"spec.managedBy: Invalid value: {shown}: field is immutable"
    assert errors(validate_jobflow_update(before, after)) == [expected]
    # Kueue's webhook (the JobFlow rules as custom validation) and the standalone one.
    with pytest.raises(Exception, match=r"spec\.managedBy: Invalid value: .*field is immutable"):
        await webhook(server).validate_update(before, after)
    with pytest.raises(ValidationError, match="field is immutable"):
        await JobFlowWebhook().validate_update(before, after, None)  # type: ignore[arg-type]
    assert errors(validate_jobflow_update(after, copy.deepcopy(after))) == []


def test_crd_declares_managed_by_immutable() -> None:
    (crd,) = [x for x in load_crds() if x["spec"]["names"]["kind"] == "JobFlow"]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    field = spec["properties"]["managedBy"]
    assert (field["type"], field["maxLength"]) == ("string", 63)
    assert field["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "field is immutable"}]
    # A transition rule on the field does not run when it is added or removed.
    assert spec["x-kubernetes-validations"] == [
        {"rule": "has(self.managedBy) == has(oldSelf.managedBy)", "fieldPath": ".managedBy",
         "message": "field is immutable"}]


async def test_schema_keeps_managed_by(server: APIServer) -> None:
    created = await server.client().create(queued(managedBy=MK))
    assert created["spec"]["managedBy"] == MK


# --- the DAG controller on the manager cluster --------------------------------------------


@pytest.mark.parametrize("managed_by", [MK, FOREIGN])
async def test_dag_controller_leaves_a_job_run_elsewhere_alone(h: Harness,
                                                              managed_by: str) -> None:
    # Unsuspended with admission data: what Kueue's reconciler leaves on admission.
    wf = queued(managedBy=managed_by, suspend=False)
    wf["metadata"]["annotations"] = {POD_SETS_INFO_ANNOTATION: "[]"}
    created = await h.api.create(wf)
    await h.reconcile("wf")
    assert await h.jobs() == {}, "no Job on the manager cluster"
    after = await h.get("wf")
    assert "status" not in after, "no status written"
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert "finalizers" not in after["metadata"]
    assert h.recorder.events == []


async def test_own_controller_value_runs_here(h: Harness) -> None:
    await h.api.create(queued(managedBy=JOBFLOW_MANAGED_BY_CONTROLLER, suspend=False))
    await h.reconcile("wf")
    assert list(await h.jobs()) == ["wf-a"]
    assert (await h.get("wf"))["status"]["state"] == "Running"


# --- the whole path: manager and worker -----------------------------------------------------


def worker_status(state: str = "Running") -> dict[str, Any]:
    """A JobFlow status as the worker's DAG controller writes it: step a done, b running
    (or both done), Jobs and their statuses from the worker."""
    b_phase = "Succeeded" if state == "Succeed" else "Running"
    b_status: dict[str, Any] = ({"succeeded": 1, "active": 0} if state == "Succeed"
                                else {"active": 1, "ready": 1})
    status: dict[str, Any] = {
        "state": state,
        "jobStatusList": {"wf-a/default": {"succeeded": 2, "active": 0,
                                           "startTime": "2026-01-01T00:00:00Z"},
                          "wf-b/default": b_status},
        "flows": [{"name": "a", "phase": "Succeeded", "jobName": "wf-a"},
                  {"name": "b", "phase": b_phase, "jobName": "wf-b"}],
        "totalFlows": 2, "completedFlows": 2 if state == "Succeed" else 1,
        "runningFlows": 0 if state == "Succeed" else 1,
        "observedGeneration": 7,
    }
    if state == "Succeed":
        status["conditions"] = [{"type": "Succeeded", "status": "True",
                                 "reason": "AllFlowsCompleted",
                                 "message": "all 2 flows completed", "observedGeneration": 7,
                                 "lastTransitionTime": "2026-01-01T00:05:00Z"}]
    return status


async def mirror(h: Harness, status: dict[str, Any]) -> Object:
    """Kueue's generic adapter: the worker's whole status, merge-patched onto the manager's
    status subresource."""
    local = await h.get("wf")
    updated = copy.deepcopy(local)
    updated["status"] = status
    return await h.api.patch(JOBFLOW_GVK, "wf", create_merge_patch(local, updated),
                             namespace="default", subresource="status")


@pytest.fixture
async def manager(h: Harness) -> Kueue:
    """A MultiKueue JobFlow on the manager: defaulted by the webhook, its Workload created
    and admitted (the MultiKueue check Ready), Kueue's reconciler has unsuspended it."""
    k = Kueue(h)
    await k.flavor("f1", "z1")
    wf = queued()
    await webhook(h.server).default(wf)
    assert wf["spec"]["managedBy"] == MK
    await h.api.create(wf)
    await h.reconcile("wf")
    await k.reconcile()
    wl = await k.workload()
    await k.apply_status(admission_status(wl, "f1", ["multikueue"]))
    await k.reconcile()
    return k


async def test_manager_keeps_the_workload_and_runs_nothing(h: Harness, manager: Kueue) -> None:
    wf = await h.get("wf")
    assert wf["spec"]["suspend"] is False, "Kueue unsuspends it, as a MultiKueue batch Job"
    assert ("Normal", "Started", "Admitted by clusterQueue cq") in manager.recorder.events
    await h.reconcile("wf")
    assert await h.jobs() == {}, "no child Job even once unsuspended"
    assert "status" not in await h.get("wf")
    wl = await manager.workload()
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("a", 2), ("b", 1)]


async def test_mirrored_status_is_kept_and_finishes_the_workload(h: Harness,
                                                                manager: Kueue) -> None:
    wl_uid = (await manager.workload())["metadata"]["uid"]
    running = worker_status("Running")
    await mirror(h, running)
    await h.reconcile("wf")
    await manager.reconcile()
    wf = await h.get("wf")
    assert wf["status"] == running, "not rewritten by the DAG controller"
    assert await h.jobs() == {}
    job = JobFlowJob(wf)
    assert job.is_active(), "the worker's active pods (from the mirrored status)"
    assert await job.pods_ready(h.api), "ready from the mirrored status, not local Jobs"
    wl = await manager.workload()
    assert wl["metadata"]["uid"] == wl_uid, "the Workload is kept, not replaced"
    assert wl["status"]["reclaimablePods"] == [{"name": "a", "count": 2}]
    assert "Finished" not in {x["type"] for x in wl["status"]["conditions"]}

    done = worker_status("Succeed")
    await mirror(h, done)
    await h.reconcile("wf")
    await manager.reconcile()
    assert (await h.get("wf"))["status"] == done
    finished = next(x for x in (await manager.workload())["status"]["conditions"]
                    if x["type"] == "Finished")
    assert (finished["status"], finished["reason"], finished["message"]) == (
        "True", "Succeeded", "all 2 flows completed")
    assert await h.jobs() == {}


async def test_mirrored_failure_finishes_the_workload_as_failed(h: Harness,
                                                               manager: Kueue) -> None:
    status = worker_status("Running")
    status.update(state="Failed", failedFlow="b", conditions=[{
        "type": "Failed", "status": "True", "reason": "FlowFailed",
        "message": "flow b (Job wf-b) failed: BackoffLimitExceeded: boom",
        "lastTransitionTime": "2026-01-01T00:05:00Z"}])
    status["flows"][1]["phase"] = "Failed"
    await mirror(h, status)
    await h.reconcile("wf")
    await manager.reconcile()
    assert (await h.get("wf"))["status"] == status
    finished = next(x for x in (await manager.workload())["status"]["conditions"]
                    if x["type"] == "Finished")
    assert (finished["reason"], finished["message"]) == (
        "Failed", "flow b (Job wf-b) failed: BackoffLimitExceeded: boom")


async def test_pods_ready_from_mirrored_status() -> None:
    wf = queued(managedBy=MK)
    specs = {"a": {"parallelism": 2}, "b": {}}
    job = JobFlowJob(wf)
    assert not pods_ready_from_status(wf, specs), "nothing started on the worker yet"
    wf["status"] = worker_status("Running")
    wf["status"]["jobStatusList"]["wf-b/default"] = {"active": 1, "ready": 0}
    assert not pods_ready_from_status(wf, specs), "b's pod is not ready"
    wf["status"]["jobStatusList"]["wf-b/default"]["ready"] = 1
    assert pods_ready_from_status(wf, specs)
    wf["status"]["jobStatusList"]["wf-b/default"]["ready"] = "garbage"
    assert not pods_ready_from_status(wf, specs), "a foreign value is read as 0"
    assert job.managed_by() == MK


async def test_the_worker_runs_the_copy(h: Harness, manager: Kueue) -> None:
    """The generic adapter's copy runs unchanged on a worker (its own server), against the
    Workload MultiKueue created there; its status, copied back, finishes the manager's."""
    worker_server = APIServer(ManualClock(), builtin_defaults=True)
    for crd in load_crds():
        worker_server.register_crd(crd)
    w = Harness(worker_server)
    wk = Kueue(w)
    await wk.flavor("wf1", "worker-zone")
    local_wl = await manager.workload()
    await w.api.create(remote_workload(local_wl))
    # The manager's JobFlow as it was when MultiKueue created the copy (suspended: the
    # copy is created before the check turns Ready).
    local = await h.get("wf")
    at_dispatch = copy.deepcopy(local)
    at_dispatch["spec"]["suspend"] = True
    at_dispatch["metadata"].get("annotations", {}).pop(POD_SETS_INFO_ANNOTATION, None)
    copy_obj = remote_copy(at_dispatch, local_wl["metadata"]["name"])
    assert "managedBy" not in copy_obj["spec"]
    await w.api.create(copy_obj)

    await wk.reconcile()
    (wl,) = (await w.api.list(WORKLOAD, namespace="default")).items
    assert "Finished" not in {x["type"] for x in wl.get("status", {}).get("conditions", [])}, \
        "the copy is equivalent to its prebuilt Workload"
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "JobFlow"
    await wk.apply_status(admission_status(wl, "wf1"))
    await wk.reconcile()
    await w.reconcile("wf")
    jobs = await w.jobs()
    assert list(jobs) == ["wf-a"], "the worker's DAG controller runs it"
    assert jobs["wf-a"]["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "worker-zone"}
    await w.complete("wf-a")
    await w.reconcile("wf")
    await w.complete("wf-b")
    await w.reconcile("wf")
    worker_wf = await w.get("wf")
    assert worker_wf["status"]["state"] == "Succeed"

    await sync_status(h.api, w.api, JOBFLOW_GVK, "wf")
    await h.reconcile("wf")
    await manager.reconcile()
    assert (await h.get("wf"))["status"] == worker_wf["status"]
    finished = next(x for x in (await manager.workload())["status"]["conditions"]
                    if x["type"] == "Finished")
    assert finished["reason"] == "Succeeded"
    assert await h.jobs() == {}
