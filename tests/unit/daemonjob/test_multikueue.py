"""DaemonJob under MultiKueue (issue #15): ``spec.managedBy`` defaulted by Kueue's webhook
and immutable; on the manager cluster the per-node controller leaves a MultiKueue
DaemonJob alone while the generic reconciler keeps its Workload, sized from the declared
worker nodes, and reads the worker's status that Kueue's generic adapter copies back; on
the worker the copy runs as any DaemonJob.

The tests play Kueue's scheduler and MultiKueue (``tests/unit/jobflow/multikueue.py``) on
one in-memory server per cluster."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from tests.unit.jobflow.multikueue import (
    MK,
    MK_QUEUE,
    PLAIN_QUEUE,
    admission_status,
    queues,
    remote_copy,
    remote_workload,
    sync_status,
)

from integrations.daemonjob import (
    DAEMONJOB_GVK,
    FRAMEWORK_NAME,
    NODES_ANNOTATION,
    DaemonJobJob,
    DaemonJobKueueWebhook,
    DaemonJobWebhook,
    load_crds,
    validate_daemonjob,
    validate_daemonjob_update,
)
from integrations.daemonjob.api import (
    DAEMONJOB_MANAGED_BY_CONTROLLER,
    POD_SETS_INFO_ANNOTATION,
    managed_elsewhere,
)
from integrations.daemonjob.job import pods_ready_from_status
from integrations.daemonjob.plan import build_node_job
from jobframework import constants as c
from jobframework.constants import FeatureGates
from jobframework.integrations import IntegrationManager
from jobframework.reconcile_errors import PrebuiltWorkloadNotFoundError
from jobframework.reconciler import create_merge_patch
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import Object
from jobframework.testing import APIServer
from jobframework.webhook import (
    ValidationError,
    admission_hook,
    with_custom_defaulter,
    with_custom_validator,
)

from .helpers import WORKLOAD, Harness, Kueue, daemonjob, node

FOREIGN = "example.com/other-controller"
DECLARED = ["worker-a", "worker-b"]
NODES_PATH = f"metadata.annotations[{NODES_ANNOTATION}]"
ON_DEMAND = {"instance-type": "on-demand"}


def queued(name: str = "dj", queue: str = MK_QUEUE, nodes: list[str] | None = None,
           **spec: Any) -> Object:
    """A DaemonJob in ``queue`` (two pods per node), declaring ``nodes`` when given."""
    dj = daemonjob(name, parallelism=2, **spec)
    dj["metadata"]["labels"] = {c.QUEUE_LABEL: queue}
    if nodes is not None:
        dj["metadata"]["annotations"] = {NODES_ANNOTATION: json.dumps(nodes)}
    return dj


def webhook(server: APIServer, *,
            features: FeatureGates | None = None) -> DaemonJobKueueWebhook:
    im = IntegrationManager()
    im.register_external_job_type(FRAMEWORK_NAME)
    kw: dict[str, Any] = {} if features is None else {"features": features}
    return DaemonJobKueueWebhook(server.client(), integration_manager=im, queues=queues(),
                                 **kw)


def errors(errs: Any) -> list[str]:
    return [str(e) for e in errs]


# --- defaulting (Kueue's ApplyDefaultForManagedBy) ----------------------------------------


async def test_defaulted_to_multikueue_for_a_multikueue_queue(server: APIServer) -> None:
    dj = queued(nodes=DECLARED)
    await webhook(server).default(dj)
    assert dj["spec"]["managedBy"] == MK
    assert dj["spec"]["suspend"] is True, "queued: suspended as well"
    assert managed_elsewhere(dj)


async def test_own_controller_value_is_taken_over(server: APIServer) -> None:
    dj = queued(nodes=DECLARED, managedBy=DAEMONJOB_MANAGED_BY_CONTROLLER)
    await webhook(server).default(dj)
    assert dj["spec"]["managedBy"] == MK


@pytest.mark.parametrize("case", ["gate off", "no MultiKueue check", "other controller",
                                  "no queue"])
async def test_not_defaulted(server: APIServer, case: str) -> None:
    dj = queued()
    hook = webhook(server)
    if case == "gate off":
        hook = webhook(server, features=FeatureGates(MultiKueue=False))
    elif case == "no MultiKueue check":
        dj = queued(queue=PLAIN_QUEUE)
    elif case == "other controller":
        dj = queued(managedBy=FOREIGN)
    else:
        del dj["metadata"]["labels"]
    expected = dj["spec"].get("managedBy")
    await hook.default(dj)
    assert dj["spec"].get("managedBy") == expected


# --- validation -----------------------------------------------------------------------------


def test_multikueue_needs_the_declared_nodes() -> None:
    assert errors(validate_daemonjob(queued(nodes=DECLARED, managedBy=MK))) == []
    assert errors(validate_daemonjob(queued(managedBy=MK))) == [
        f"{NODES_PATH}: Required value: a DaemonJob run by MultiKueue (spec.managedBy: "
        f"{MK}) must declare the worker nodes of its run as a JSON list "
        '(["node-a","node-b"]): Kueue counts them on this manager cluster, which cannot '
        "see the worker's nodes"]
    assert errors(validate_daemonjob(queued(managedBy=FOREIGN))) == [], \
        "only MultiKueue's sizing needs them"
    bad = queued(managedBy=MK)
    bad["metadata"]["annotations"] = {NODES_ANNOTATION: "worker-a"}
    assert errors(validate_daemonjob(bad)) == [
        f'{NODES_PATH}: Invalid value: "worker-a": must be a JSON list of node names '
        '(["node-a","node-b"])']
    assert errors(validate_daemonjob(queued(managedBy=MK, nodes=[]))) == [
        f'{NODES_PATH}: Invalid value: "[]": must name at least one node']
    assert [e.split(": ", 2)[2] for e in errors(validate_daemonjob(
        queued(managedBy=MK, nodes=["a", "a", "B"])))] == [
        '"[\\"a\\", \\"a\\", \\"B\\"]": entry 2 ("a") is repeated',
        '"[\\"a\\", \\"a\\", \\"B\\"]": entry 3 ("B") is not a node name: '
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
        "characters, '-' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]


@pytest.mark.parametrize("old,new", [(MK, FOREIGN), (None, MK), (MK, None)],
                         ids=["changed", "added", "removed"])
async def test_managed_by_is_immutable(server: APIServer, old: str | None,
                                       new: str | None) -> None:
    before = queued(nodes=DECLARED, suspend=True)
    after = queued(nodes=DECLARED, suspend=True)
    for obj, value in ((before, old), (after, new)):
        if value is not None:
            obj["spec"]["managedBy"] = value
    shown = "null" if new is None else f'"{new}"'
    expected = f"spec.managedBy: Invalid value: {shown}: field is immutable"
    # Started (nodes declared): still one error for the field, not a second "frozen" one.
    assert errors(validate_daemonjob_update(before, after)) == [expected]
    with pytest.raises(Exception, match=r"spec\.managedBy: Invalid value: .*immutable"):
        await webhook(server).validate_update(before, after)
    with pytest.raises(ValidationError, match=r"spec\.managedBy: .*field is immutable"):
        await DaemonJobWebhook().validate_update(before, after, None)  # type: ignore[arg-type]
    assert errors(validate_daemonjob_update(after, copy.deepcopy(after))) == []


def test_declared_nodes_are_immutable_under_multikueue() -> None:
    old = queued(nodes=DECLARED, managedBy=MK, suspend=True)
    new = copy.deepcopy(old)
    new["metadata"]["annotations"][NODES_ANNOTATION] = '["worker-a"]'
    assert errors(validate_daemonjob_update(old, new)) == [
        f'{NODES_PATH}: Invalid value: "[\\"worker-a\\"]": field is immutable']
    # Kueue's adapter's writes are allowed: unsuspend and the admission annotation.
    kueue = copy.deepcopy(old)
    kueue["spec"]["suspend"] = False
    kueue["metadata"]["annotations"][POD_SETS_INFO_ANNOTATION] = "[]"
    assert errors(validate_daemonjob_update(old, kueue)) == []


def test_crd_declares_managed_by_immutable() -> None:
    (crd,) = load_crds()
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    field = spec["properties"]["managedBy"]
    assert (field["type"], field["maxLength"]) == ("string", 63)
    assert field["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "field is immutable"}]
    assert spec["x-kubernetes-validations"] == [
        {"rule": "has(self.managedBy) == has(oldSelf.managedBy)", "fieldPath": ".managedBy",
         "message": "field is immutable"}]


def test_managed_by_is_not_copied_to_the_node_jobs() -> None:
    dj = daemonjob(managedBy=DAEMONJOB_MANAGED_BY_CONTROLLER)
    dj["metadata"]["uid"] = "u1"
    job = build_node_job(dj, "n1")
    assert "managedBy" not in job["spec"], "the node Jobs are the Job controller's"


async def test_manager_nodes_are_not_checked_for_a_multikueue_daemonjob(h: Harness) -> None:
    await h.add_node(node("manager-control-plane", ready=False))
    hook = webhook(h.server)
    dj = queued(nodes=DECLARED)
    await hook.default(dj)
    assert await hook.validate_create(dj) is None, "the manager's nodes are irrelevant"
    with pytest.raises(ValidationError, match="no node is eligible"):
        await hook.validate_create(queued(queue=PLAIN_QUEUE))


async def test_through_the_api_server(h: Harness) -> None:
    """Kueue's webhook in the in-memory API server's admission chain: defaulted on create,
    immutable on update, and a mirrored status patch is not refused."""
    rules: list[dict[str, Any]] = [{"operations": ["CREATE", "UPDATE"],
                                    "apiGroups": ["api.practice.com"],
                                    "apiVersions": ["v1alpha1"], "resources": ["daemonjobs"]}]
    hook = webhook(h.server)
    h.server.add_mutating_webhook(admission_hook(with_custom_defaulter(hook)),
                                  name="mdaemonjob.api.practice.com", rules=rules)
    h.server.add_validating_webhook(admission_hook(with_custom_validator(hook)),
                                    name="vdaemonjob.api.practice.com", rules=rules)
    created = await h.api.create(queued(nodes=DECLARED))
    assert (created["spec"]["managedBy"], created["spec"]["suspend"]) == (MK, True)
    with pytest.raises(ApiError) as info:
        await h.api.create(queued("undeclared"))
    assert f"{NODES_PATH}: Required value" in str(info.value)
    changed = copy.deepcopy(created)
    changed["spec"]["managedBy"] = FOREIGN
    with pytest.raises(ApiError) as info:
        await h.api.update(changed)
    assert f'spec.managedBy: Invalid value: "{FOREIGN}": field is immutable' \
        in str(info.value)
    patched = await mirror(h, worker_status("Running"))
    assert patched["status"] == worker_status("Running")


# --- the per-node controller on the manager cluster ---------------------------------------


@pytest.mark.parametrize("managed_by", [MK, FOREIGN])
async def test_controller_leaves_a_job_run_elsewhere_alone(h: Harness, managed_by: str) -> None:
    await h.add_nodes("n1", "n2")
    # Unsuspended with admission data, no nodes fixed: it would run on n1 and n2 here.
    dj = queued(managedBy=managed_by, suspend=False)
    dj["metadata"]["annotations"] = {POD_SETS_INFO_ANNOTATION: "[]"}
    created = await h.api.create(dj)
    await h.reconcile()
    assert await h.jobs() == {}, "no Job on the manager cluster"
    after = await h.get()
    assert "status" not in after, "no status written"
    assert NODES_ANNOTATION not in after["metadata"]["annotations"], "no nodes fixed"
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert "finalizers" not in after["metadata"]
    if managed_by == MK:
        # Written past the webhook without its declared nodes: said, status untouched.
        assert [(t, r) for t, r, _ in h.recorder.events] == [("Warning", "InvalidSpec")]
        assert f"{NODES_PATH}: Required value" in h.recorder.events[0][2]
    else:
        assert h.recorder.events == []
    await h.reconcile()
    assert len(h.recorder.events) == (managed_by == MK), "reported once"


async def test_own_controller_value_runs_here(h: Harness) -> None:
    await h.add_nodes("n1")
    await h.api.create(queued(managedBy=DAEMONJOB_MANAGED_BY_CONTROLLER, suspend=False))
    await h.reconcile()
    assert list(await h.jobs()) == ["dj-n1"]


# --- the whole path: manager and worker -----------------------------------------------------


def worker_status(state: str = "Running") -> dict[str, Any]:
    """A DaemonJob status as the worker's controller writes it: nodes and Jobs that do not
    exist on the manager cluster, worker-a done, worker-b running (or both done)."""
    done = state == "Succeed"
    status: dict[str, Any] = {
        "state": state,
        "jobStatusList": {
            "dj-worker-a/default": {"succeeded": 2, "active": 0},
            "dj-worker-b/default": ({"succeeded": 2, "active": 0} if done
                                    else {"active": 2, "ready": 2})},
        "nodes": [{"name": "worker-a", "phase": "Succeeded", "jobName": "dj-worker-a"},
                  {"name": "worker-b", "phase": "Succeeded" if done else "Running",
                   "jobName": "dj-worker-b"}],
        "desired": 2, "running": 0 if done else 1, "succeeded": 2 if done else 1, "failed": 0,
        "observedGeneration": 9,
    }
    if done:
        status["conditions"] = [{"type": "Succeeded", "status": "True",
                                 "reason": "AllNodesSucceeded",
                                 "message": "the Jobs of all 2 nodes completed",
                                 "observedGeneration": 9,
                                 "lastTransitionTime": "2026-01-01T00:05:00Z"}]
    return status


async def mirror(h: Harness, status: dict[str, Any]) -> Object:
    """Kueue's generic adapter: the worker's whole status, merge-patched onto the manager's
    status subresource."""
    local = await h.get()
    updated = copy.deepcopy(local)
    updated["status"] = status
    return await h.api.patch(DAEMONJOB_GVK, "dj", create_merge_patch(local, updated),
                             namespace="default", subresource="status")


@pytest.fixture
async def manager(h: Harness) -> Kueue:
    """A MultiKueue DaemonJob on a manager cluster with one node of its own: defaulted by
    the webhook, its Workload created and admitted (the MultiKueue check Ready), Kueue's
    reconciler has unsuspended it."""
    await h.add_nodes("manager-node", **ON_DEMAND)
    k = Kueue(h)
    await k.flavor("on-demand", "on-demand")
    dj = queued(nodes=DECLARED)
    await webhook(h.server).default(dj)
    assert dj["spec"]["managedBy"] == MK
    await h.api.create(dj)
    await h.reconcile()
    await k.reconcile()
    wl = await k.workload()
    await k.apply_status(admission_status(wl, "on-demand", ["multikueue"]))
    await k.reconcile()
    return k


async def test_manager_keeps_the_workload_and_runs_nothing(h: Harness, manager: Kueue) -> None:
    wl = await manager.workload()
    (ps,) = wl["spec"]["podSets"]
    assert ps["count"] == 4, "the 2 declared worker nodes x 2 pods, not the manager's node"
    dj = await h.get()
    assert dj["spec"]["suspend"] is False, "Kueue unsuspends it, as a MultiKueue batch Job"
    assert json.loads(dj["metadata"]["annotations"][NODES_ANNOTATION]) == DECLARED, \
        "no manager node written into the run"
    await h.reconcile()
    assert await h.jobs() == {}, "no node Job even once unsuspended"
    assert "status" not in await h.get()


async def test_mirrored_status_is_kept_and_finishes_the_workload(h: Harness,
                                                                manager: Kueue) -> None:
    wl_uid = (await manager.workload())["metadata"]["uid"]
    running = worker_status("Running")
    await mirror(h, running)
    await h.reconcile()
    await manager.reconcile()
    dj = await h.get()
    assert dj["status"] == running, "not rewritten by the controller"
    assert await h.jobs() == {}
    job = DaemonJobJob(dj)
    assert job.is_active()
    assert await job.pods_ready(h.api), "ready from the mirrored status, not local Jobs"
    wl = await manager.workload()
    assert wl["metadata"]["uid"] == wl_uid, "the Workload is kept, not replaced"
    assert wl["spec"]["podSets"][0]["count"] == 4
    assert wl["status"]["reclaimablePods"] == [{"name": "main", "count": 2}], \
        "worker-a is done"

    done = worker_status("Succeed")
    await mirror(h, done)
    await h.reconcile()
    await manager.reconcile()
    assert (await h.get())["status"] == done
    finished = next(x for x in (await manager.workload())["status"]["conditions"]
                    if x["type"] == "Finished")
    assert (finished["status"], finished["reason"], finished["message"]) == (
        "True", "Succeeded", "the Jobs of all 2 nodes completed")
    assert await h.jobs() == {}


async def test_mirrored_status_never_sizes_the_workload(h: Harness) -> None:
    """Without declared nodes (the webhook bypassed) the Workload is held: a copied
    ``status.nodes`` names the worker's nodes and must not size (or resize) it."""
    dj = queued(managedBy=MK, suspend=True)
    dj["metadata"]["name"] = "dj"
    dj["status"] = worker_status("Running")
    job = DaemonJobJob(dj)
    assert job.run_nodes() is None and job.skip()
    assert (await job.pod_sets(h.api))[0].count == 0
    local = queued(suspend=True)
    local["status"] = worker_status("Running")
    assert DaemonJobJob(local).run_nodes() == DECLARED, "a local one reads its status"


async def test_pods_ready_from_mirrored_status() -> None:
    dj = queued(managedBy=MK, nodes=DECLARED)
    assert not pods_ready_from_status(dj, 2), "nothing started on the worker yet"
    dj["status"] = worker_status("Running")
    assert pods_ready_from_status(dj, 2)
    dj["status"]["jobStatusList"]["dj-worker-b/default"]["ready"] = 1
    assert not pods_ready_from_status(dj, 2), "one of worker-b's pods is not ready"
    dj["status"]["jobStatusList"]["dj-worker-b/default"]["ready"] = None
    assert not pods_ready_from_status(dj, 2), "a foreign value is read as 0"


async def worker(h: Harness, manager: Kueue, *, keep_declared: bool = True
                 ) -> tuple[Harness, Kueue, Object]:
    """A worker cluster (its own server) with nodes worker-a, -b and -c, the Workload
    MultiKueue created there from the manager's, and the generic adapter's copy of the
    manager's DaemonJob (without the declared nodes when not ``keep_declared``); returns
    the worker's harness, its Kueue and its Workload after one pass of each."""
    worker_server = APIServer(ManualClock(), builtin_defaults=True)
    for crd in load_crds():
        worker_server.register_crd(crd)
    w = Harness(worker_server)
    await w.add_nodes("worker-a", "worker-b", "worker-c", **ON_DEMAND)
    wk = Kueue(w)
    await wk.flavor("on-demand", "on-demand")
    local_wl = await manager.workload()
    await w.api.create(remote_workload(local_wl))
    # The manager's DaemonJob as it was when MultiKueue created the copy (suspended: the
    # copy is created before the check turns Ready).
    at_dispatch = copy.deepcopy(await h.get())
    at_dispatch["spec"]["suspend"] = True
    at_dispatch["metadata"]["annotations"].pop(POD_SETS_INFO_ANNOTATION, None)
    copy_obj = remote_copy(at_dispatch, local_wl["metadata"]["name"])
    assert "managedBy" not in copy_obj["spec"]
    assert copy_obj["metadata"]["annotations"][NODES_ANNOTATION] == json.dumps(DECLARED)
    if not keep_declared:
        del copy_obj["metadata"]["annotations"][NODES_ANNOTATION]
    await w.api.create(copy_obj)
    await w.reconcile()
    try:
        await wk.reconcile()
    except PrebuiltWorkloadNotFoundError:
        assert not keep_declared
    (wl,) = (await w.api.list(WORKLOAD, namespace="default")).items
    return w, wk, wl


async def test_the_worker_runs_the_copy(h: Harness, manager: Kueue) -> None:
    """The generic adapter's copy runs unchanged on a worker (its own server, its own
    nodes), against the Workload MultiKueue created there: the declared nodes travel with
    it (an annotation) so both Workloads have one size; its status, copied back, finishes
    the manager's Workload."""
    w, wk, wl = await worker(h, manager)
    assert "Finished" not in {x["type"] for x in wl.get("status", {}).get("conditions", [])}, \
        "the copy is equivalent to its prebuilt Workload (same size)"
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "DaemonJob"
    await wk.apply_status(admission_status(wl, "on-demand"))
    await wk.reconcile()
    await w.reconcile()
    jobs = await w.jobs()
    assert sorted(jobs) == ["dj-worker-a", "dj-worker-b"], \
        "the worker's controller runs the declared nodes"
    for name in jobs:
        await w.complete(name)
    await w.reconcile()
    worker_dj = await w.get()
    assert worker_dj["status"]["state"] == "Succeed"

    await sync_status(h.api, w.api, DAEMONJOB_GVK, "dj")
    await h.reconcile()
    await manager.reconcile()
    assert (await h.get())["status"] == worker_dj["status"]
    finished = next(x for x in (await manager.workload())["status"]["conditions"]
                    if x["type"] == "Finished")
    assert finished["reason"] == "Succeeded"
    assert await h.jobs() == {}


async def test_a_worker_counting_its_own_nodes_is_out_of_sync(h: Harness,
                                                             manager: Kueue) -> None:
    """Why the nodes are declared: a copy that counted the worker's own eligible nodes
    (3 here, against the manager's 2) does not match the Workload MultiKueue sized on the
    manager, and the worker finishes that Workload as out of sync (Kueue would then
    dispatch it again, for ever)."""
    w, _, wl = await worker(h, manager, keep_declared=False)
    assert (await w.get())["status"]["desired"] == 3
    assert wl["spec"]["podSets"][0]["count"] == 4
    finished = next(x for x in wl["status"]["conditions"] if x["type"] == "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "OutOfSync")
    assert await w.jobs() == {}
