"""Write semantics of the generic reconciler against Kueue v0.19.2 (issue #10).

- every status write is strict (carries the Workload's resourceVersion), as Kueue's
  ``patching.PatchStatus``/``PatchAdmissionStatus`` are by default: a write computed from a
  stale read fails with a Conflict and succeeds on the retried reconcile;
- the ``kueue-admission`` body is Kueue's ``admissionStatusPatch`` field for field, so the
  ``resourceRequests`` the scheduler wrote to a pending Workload survive a finish;
- a failed on-hold write fails the reconcile;
- among several workload slices the one Kueue's ``normalizeActiveSlices`` picks is kept.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from tests.unit.batchjob import helpers as bj

from jobframework import constants as c
from jobframework import workload as wlpkg
from jobframework.api import Condition, ReclaimablePod, Workload
from jobframework.api.workload import RequeueState
from jobframework.constants import FeatureGate, FeatureGates
from jobframework.interface import FinishedResult
from jobframework.podset import InvalidPodsetInfoError, PodSetInfo
from jobframework.reconciler import ReconcileError
from jobframework.runtime import errors
from jobframework.runtime.client import Client, PatchType
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import APIServer, InMemoryClient

from .helpers import (
    WORKLOAD,
    ConditionsJob,
    MockJob,
    OnHoldJob,
    World,
    admitted_status,
)

WL_NAME = "job-test-job-1"
OTHER_WRITER = "other-writer"


# --- a concurrent writer between the reconciler's read and its write ----------------------


class RacingClient(InMemoryClient):
    """Right after the reconciler first reads the Workload ``target``, another writer
    changes it, so the reconciler's copy is stale (as an informer cache can be).

    The server then rejects the reconciler's status write, which carries the stale
    ``resourceVersion``, with a Conflict, as kube-apiserver does.
    """

    def __init__(self, server: APIServer, target: str, *, armed: bool = True) -> None:
        super().__init__(server)
        self.target = target
        self.armed = armed

    async def list(self, gvk: GVK, **kwargs: Any) -> Any:
        listed = await super().list(gvk, **kwargs)
        if gvk == WORKLOAD and any(o["metadata"]["name"] == self.target for o in listed.items):
            await self._race()
        return listed

    async def _race(self) -> None:
        if not self.armed:
            return
        self.armed = False
        await self.server.client().patch(
            WORKLOAD, self.target, {"metadata": {"labels": {"touched-by": OTHER_WRITER}}},
            namespace="default", patch_type=PatchType.MERGE)


def racing(w: World) -> RacingClient:
    """Swap the reconciler's client for a racing one."""
    client = RacingClient(w.server, WL_NAME)
    w.reconciler.client = client
    return client


def conditions(wl: Object) -> dict[str, tuple[str, str]]:
    return {x["type"]: (x["status"], x.get("reason", ""))
            for x in (wl.get("status") or {}).get("conditions") or []}


def stored(w: World) -> Object:
    [wl] = w.workloads()
    return wl


class Reclaiming(MockJob):
    async def reclaimable_pods(self, client: Client) -> list[ReclaimablePod]:
        return [ReclaimablePod(name="main", count=1)]


class FailingStart(MockJob):
    async def run_with_pod_sets_info(self, client: Client,
                                     pod_sets_info: Sequence[PodSetInfo]) -> None:
        raise InvalidPodsetInfoError("bad node selector")


def _finished(job_cls: type[MockJob] = MockJob) -> Callable[[], MockJob]:
    return lambda: job_cls(finished=FinishedResult("done", True, True))


# Each site: world options, job and workload set-up, the job of each pass, the error the
# stale write surfaces as, and what the written Workload shows once the retry succeeds.
Setup = Callable[[World], Awaitable[None]]


async def _pending(w: World) -> None:
    await w.create_job()
    await w.create_workload()


async def _admitted(w: World) -> None:
    await w.create_job()
    await w.create_workload(status=admitted_status(w))


async def _running(w: World) -> None:
    await w.create_job(suspend=False, status={"ready": 1, "active": 1})
    await w.create_workload(status=admitted_status(w))


async def _evicted(w: World) -> None:
    await w.create_job()
    await w.create_workload(status=admitted_status(w, evicted=("Preempted", "Preempted")))


async def _orphan(w: World) -> None:
    await w.create_workload()  # its owner, the Job, does not exist


SITES: dict[str, tuple[dict[str, Any], Setup, Callable[[], MockJob], str | None,
                       Callable[[Object], bool]]] = {
    "custom conditions": ({}, _pending, ConditionsJob, None,
                          lambda wl: conditions(wl).get("Custom") == ("True", "Because")),
    "on hold": ({}, _admitted, OnHoldJob, "putting workload on hold",
                lambda wl: conditions(wl)["QuotaReserved"] == ("False", "OnHold")),
    "job finished": ({}, _admitted, _finished(), None,
                     lambda wl: conditions(wl).get("Finished") == ("True", "Succeeded")),
    "reclaimable pods": ({}, _running, Reclaiming, None,
                         lambda wl: wl["status"].get("reclaimablePods") == [
                             {"name": "main", "count": 1}]),
    "PodsReady": ({"wait_for_pods_ready": True}, _running, MockJob, None,
                  lambda wl: conditions(wl).get("PodsReady") == ("True", "Started")),
    "eviction clearing": ({}, _evicted, MockJob, "clearing admission",
                          lambda wl: conditions(wl)["QuotaReserved"] == ("False", "Pending")),
    "failed to start": ({}, _admitted, FailingStart, None,
                        lambda wl: conditions(wl).get("Finished") == ("True", "FailedToStart")),
    "orphan finished": ({}, _orphan, MockJob, None,
                        lambda wl: conditions(wl).get("Finished") == ("True", "OwnerNotFound")),
}


@pytest.mark.parametrize("site", list(SITES))
async def test_status_write_from_a_stale_read_conflicts_and_the_retry_writes(site: str) -> None:
    options, setup, new_job, wrapped, written = SITES[site]
    w = World(**options)
    await setup(w)
    client = racing(w)
    if wrapped is None:
        with pytest.raises(errors.Conflict):
            await w.reconcile(new_job())
    else:
        with pytest.raises(ReconcileError, match=rf"^{wrapped}: ") as raised:
            await w.reconcile(new_job())
        assert isinstance(raised.value.__cause__, errors.Conflict)
    assert client.armed is False
    # The other writer's change is there, the stale write is not.
    assert stored(w)["metadata"]["labels"]["touched-by"] == OTHER_WRITER
    assert not written(stored(w))
    # The retried reconcile reads the current Workload and its write goes through.
    await w.reconcile(new_job())
    assert written(stored(w))


async def test_loose_apply_overwrites_a_stale_version() -> None:
    # Kueue's WithLooseOnApply: the write carries no resourceVersion.
    w = World()
    await _admitted(w)
    client = RacingClient(w.server, WL_NAME, armed=False)
    wl = wlpkg.from_object(stored(w))
    await w.client.patch(WORKLOAD, WL_NAME, {"metadata": {"labels": {"x": "y"}}},
                         namespace="default", patch_type=PatchType.MERGE)
    wlpkg.set_finished_condition(wl, "Because", "m", w.clock.now())
    with pytest.raises(errors.Conflict):
        await wlpkg.apply_admission_status(client, wl)
    assert "Finished" not in conditions(stored(w))
    await wlpkg.apply_admission_status(client, wl, strict=False)
    assert conditions(stored(w))["Finished"] == ("True", "Because")


# --- the kueue-admission body ------------------------------------------------------------


def _owned_status_fields(wl: Object, manager: str) -> set[str]:
    [entry] = [m for m in wl["metadata"]["managedFields"]
               if m["manager"] == manager and m.get("subresource") == "status"]
    return {k[2:] for k in entry["fieldsV1"]["f:status"]}


REQUESTS = [{"name": "main", "resources": {"cpu": "2"}}]


async def test_finishing_a_pending_workload_keeps_the_scheduler_resource_requests() -> None:
    w = World()
    await w.create_job()
    # The scheduler left the Workload pending and recorded its requests, as kueue-admission.
    await w.create_workload(status={
        "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                        "message": "couldn't assign flavors", "lastTransitionTime": w.ts()}],
        "resourceRequests": REQUESTS})
    await w.reconcile(_finished()())
    wl = stored(w)
    assert conditions(wl)["Finished"] == ("True", "Succeeded")
    assert wl["status"]["resourceRequests"] == REQUESTS
    assert _owned_status_fields(wl, c.ADMISSION_NAME) == {"conditions", "resourceRequests"}


async def test_releasing_the_admission_carries_the_resource_requests() -> None:
    w = World()
    await w.create_job()
    status = admitted_status(w)
    status["resourceRequests"] = REQUESTS
    await w.create_workload(status=status)
    await w.reconcile(OnHoldJob())
    wl = stored(w)
    assert "admission" not in wl["status"]
    # With no admission left, the requests are part of the admission's body again.
    assert wl["status"]["resourceRequests"] == REQUESTS


def test_admission_body_is_kueues_field_for_field() -> None:
    ltt = "2026-01-02T03:04:05Z"

    def cnd(type_: str) -> dict[str, Any]:
        return {"type": type_, "status": "True", "reason": "R", "message": "m",
                "lastTransitionTime": ltt}

    admission = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main"}]}
    check = {"name": "ac", "state": "Pending", "message": "", "lastTransitionTime": ltt}
    wl = wlpkg.from_object({
        "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "default"},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {}}]},
        "status": {
            "conditions": [cnd("Custom"), cnd("Finished"), cnd("Admitted"),
                           cnd("QuotaReserved")],
            "admission": admission,
            "requeueState": {"count": 2},
            "reclaimablePods": [{"name": "main", "count": 1}],
            "admissionChecks": [check],
            "resourceRequests": REQUESTS,
            "accumulatedPastExecutionTimeSeconds": 0,
            "schedulingStats": {"evictions": []},
            "nominatedClusterNames": [],
            "clusterName": "",
            "unhealthyNodes": [{"name": "n1"}],
        },
    })
    assert wlpkg.admission_status_body(wl) == {
        "admission": admission,
        "requeueState": {"count": 2},
        # Admission-managed conditions only, in Kueue's order.
        "conditions": [cnd("QuotaReserved"), cnd("Admitted"), cnd("Finished")],
        "accumulatedPastExecutionTimeSeconds": 0,
        "schedulingStats": {},
        "clusterName": "",
        "unhealthyNodes": [{"name": "n1"}],
        "admissionChecks": [check],
    }
    # No admission: the requests are carried; an empty requeue state is left out.
    assert wl.status is not None
    wl.status.admission = None
    wl.status.requeue_state = RequeueState()
    body = wlpkg.admission_status_body(wl)
    assert body["resourceRequests"] == REQUESTS
    assert "requeueState" not in body and "admission" not in body


# --- on hold -------------------------------------------------------------------------------


async def test_on_hold_write_error_fails_the_reconcile() -> None:
    w = World()
    await _admitted(w)
    w.server.faults.fail("patch", error=errors.InternalError("etcd is down"), gvk=WORKLOAD,
                         subresource="status")
    with pytest.raises(ReconcileError, match=r"^putting workload on hold: ") as raised:
        await w.reconcile(OnHoldJob())
    assert isinstance(raised.value.__cause__, errors.InternalError)
    assert conditions(stored(w))["QuotaReserved"] == ("True", "QuotaReserved")
    await w.reconcile(OnHoldJob())
    assert conditions(stored(w))["QuotaReserved"] == ("False", "OnHold")


# --- workload slices -----------------------------------------------------------------------


def _slice(name: str, *, count: int = 10, replaces: str | None = None, reserved: bool = False,
           evicted: bool = False, ltt: str) -> Object:
    wl = bj.base_wl(name, count=count, reserved=reserved, ltt=ltt)
    wl["metadata"]["annotations"] = {c.ELASTIC_JOB_ANNOTATION: "true"}
    if replaces is not None:
        wl["metadata"]["annotations"][c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION] = (
            f"ns/{replaces}")
    if evicted:
        status = wl.setdefault("status", {"conditions": []})
        status["conditions"].append(bj.cond(c.WORKLOAD_EVICTED, "True", "Preempted",
                                            "Preempted", ltt))
    return wl


async def _slices(*specs: dict[str, Any]) -> bj.World:
    w = bj.World()
    await w.setup()
    job = bj.base_job()
    job["metadata"]["annotations"] = {c.ELASTIC_JOB_ANNOTATION: "true"}
    job = await w.create_job(job)
    for spec in specs:  # oldest first, one second apart
        await w.create_workload(_slice(ltt=w.ts(), **spec), owner=job)
        w.clock.advance(1)
    return w


def _finish_reasons(w: bj.World) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for wl in w.workloads():
        fin = bj.conditions_of(wl).get(c.WORKLOAD_FINISHED)
        out[wl["metadata"]["name"]] = fin[1] if fin else None
    return out


async def test_two_pending_replacements_keep_the_oldest() -> None:
    w = await _slices({"name": "a", "count": 5, "reserved": True},
                      {"name": "b", "replaces": "a"},
                      {"name": "c", "replaces": "a"})
    await w.reconcile()
    assert _finish_reasons(w) == {"a": None, "b": None, "c": "OutOfSync"}


async def test_an_evicted_replacement_is_not_the_pending_one() -> None:
    w = await _slices({"name": "a", "reserved": True},
                      {"name": "b", "replaces": "a", "evicted": True})
    await w.reconcile()
    assert _finish_reasons(w) == {"a": None, "b": "OutOfSync"}


async def test_an_evicted_reserved_replacement_does_not_retire_its_target() -> None:
    w = await _slices({"name": "a", "count": 5, "reserved": True},
                      {"name": "b", "replaces": "a", "reserved": True, "evicted": True},
                      {"name": "c", "replaces": "a"})
    await w.reconcile()
    assert _finish_reasons(w) == {"a": None, "b": "OutOfSync", "c": None}


async def test_a_slice_replaced_only_by_an_evicted_one_is_out_of_sync() -> None:
    w = await _slices({"name": "a"},
                      {"name": "b", "replaces": "a", "evicted": True},
                      {"name": "c"})
    await w.reconcile()
    assert _finish_reasons(w) == {"a": "OutOfSync", "b": "OutOfSync", "c": None}


async def test_a_slice_replaced_by_a_live_one_is_replaced() -> None:
    w = await _slices({"name": "a", "count": 5, "reserved": True},
                      {"name": "b", "replaces": "a", "reserved": True})
    await w.reconcile()
    assert _finish_reasons(w) == {"a": c.WORKLOAD_SLICE_REPLACED, "b": None}



# --- what a status write sends (Kueue's baseSSAWorkload and the update functions) --------


class RecordingClient(InMemoryClient):
    """Records the body of every write to the Workload's status subresource."""

    def __init__(self, server: APIServer) -> None:
        super().__init__(server)
        self.sent: list[tuple[str, Object]] = []

    async def apply(self, obj: Object, *, field_manager: str, force: bool = False,
                    subresource: str | None = None) -> Object:
        if subresource == "status":
            self.sent.append(("apply", copy.deepcopy(obj)))
        return await super().apply(obj, field_manager=field_manager, force=force,
                                   subresource=subresource)

    async def patch(self, gvk: GVK, name: str, patch: Any, **kwargs: Any) -> Object:
        if kwargs.get("subresource") == "status":
            kind = "merge" if kwargs.get("patch_type") == PatchType.MERGE else "other"
            self.sent.append((kind, copy.deepcopy(patch)))
        return await super().patch(gvk, name, patch, **kwargs)


def recording(w: World) -> RecordingClient:
    client = RecordingClient(w.server)
    w.reconciler.client = client
    return client


MERGE = FeatureGates({FeatureGate.WORKLOAD_REQUEST_USE_MERGE_PATCH: True})


@pytest.mark.parametrize("site", ["custom conditions", "job finished", "reclaimable pods",
                                  "PodsReady", "eviction clearing", "orphan finished"])
async def test_status_apply_identifies_the_workload_as_kueues_base(site: str) -> None:
    # baseSSAWorkload: uid, name, namespace, generation, annotations, labels (and the
    # resourceVersion of a strict write) besides apiVersion and kind.
    options, setup, new_job, _, written = SITES[site]
    w = World(**options)
    await setup(w)
    await w.client.patch(WORKLOAD, WL_NAME, {"metadata": {"annotations": {"note": "kept"}}},
                         namespace="default", patch_type=PatchType.MERGE)
    before = stored(w)
    client = recording(w)
    await w.reconcile(new_job())
    assert written(stored(w))
    [(kind, body)] = client.sent
    assert kind == "apply"
    assert (body["apiVersion"], body["kind"]) == (c.KUEUE_API_VERSION, "Workload")
    meta = before["metadata"]
    assert body["metadata"] == {
        "uid": meta["uid"], "name": WL_NAME, "namespace": "default",
        "generation": meta["generation"], "annotations": {"note": "kept"},
        "labels": meta["labels"], "resourceVersion": meta["resourceVersion"]}
    assert set(body) == {"apiVersion", "kind", "metadata", "status"}


def test_status_apply_base_leaves_out_empty_metadata() -> None:
    wl = wlpkg.from_object({"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
                            "metadata": {"name": "a", "namespace": "ns", "labels": {},
                                         "annotations": {}, "generation": 0}})
    assert wlpkg._base(wl) == {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
                               "metadata": {"name": "a", "namespace": "ns"}}


async def _pods_ready_was_recovering(w: World) -> None:
    # Not admitted (any more) while PodsReady=False waits for a recovery since T0.
    await w.create_job()
    await w.create_workload(status={"conditions": [
        {"type": "PodsReady", "status": "False", "reason": "WaitForRecovery",
         "message": "At least one pod has failed, waiting for recovery",
         "lastTransitionTime": w.ts(ago=100)}]})


@pytest.mark.parametrize(("features", "fresh"), [(FeatureGates(), True), (MERGE, False)])
async def test_pods_ready_condition_is_sent_with_a_fresh_transition_time(
        features: FeatureGates, fresh: bool) -> None:
    # SetConditionAndUpdate stamps now; the apply starts from an empty status, so the time
    # is sent even though the status (False) does not change; a merge patch sets the
    # condition on the Workload's own, whose time then stays.
    w = World(wait_for_pods_ready=True, features=features)
    await _pods_ready_was_recovering(w)
    w.clock.advance(5)
    await w.reconcile(MockJob())
    [pods_ready] = [x for x in stored(w)["status"]["conditions"] if x["type"] == "PodsReady"]
    assert (pods_ready["status"], pods_ready["reason"]) == ("False", "WaitForStart")
    assert pods_ready["observedGeneration"] == 1
    assert pods_ready["lastTransitionTime"] == (w.ts() if fresh else w.ts(ago=105))


class ReportsCustomAgain(MockJob):
    """Reports ``Custom=True`` again, with a new reason and the time it was given."""

    def __init__(self, transition: str | None) -> None:
        super().__init__()
        self.transition = transition

    def custom_workload_conditions(self, wl: Workload) -> tuple[list[Condition], bool]:
        cond = Condition(type="Custom", status="True", reason="Again", message="m")
        if self.transition is not None:
            cond.last_transition_time = self.transition
        return [cond], True


@pytest.mark.parametrize(("features", "given", "expected"), [
    (FeatureGates(), None, "now"),
    (FeatureGates(), "2026-01-01T00:00:00Z", "given"),
    (MERGE, None, "stored"),
    (MERGE, "2026-01-01T00:00:00Z", "stored"),
])
async def test_custom_condition_is_sent_with_its_own_time_or_now(
        features: FeatureGates, given: str | None, expected: str) -> None:
    w = World(features=features)
    await w.create_job()
    t0 = w.ts(ago=100)
    await w.create_workload(status={"conditions": [
        {"type": "Custom", "status": "True", "reason": "Because", "message": "m",
         "lastTransitionTime": t0}]})
    await w.reconcile(ReportsCustomAgain(given))
    [custom] = [x for x in stored(w)["status"]["conditions"] if x["type"] == "Custom"]
    assert (custom["status"], custom["reason"]) == ("True", "Again")
    assert custom["lastTransitionTime"] == {"now": w.ts(), "given": given, "stored": t0}[
        expected]


class ReclaimsNothing(MockJob):
    async def reclaimable_pods(self, client: Client) -> list[ReclaimablePod]:
        return []


@pytest.mark.parametrize(("features", "kind", "sent"), [
    (FeatureGates(), "apply", {}),
    (MERGE, "merge", {"reclaimablePods": None}),
], ids=["apply", "merge"])
async def test_no_reclaimable_pods_left_leaves_the_field_out(
        features: FeatureGates, kind: str, sent: dict[str, Any]) -> None:
    # UpdateReclaimablePods with none: omitempty drops the field from the applied status
    # (the apply then removes what the manager owned); a merge patch nulls it.
    w = World(features=features)
    await _running(w)
    await w.reconcile(Reclaiming())
    assert stored(w)["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]
    client = recording(w)
    await w.reconcile(ReclaimsNothing())
    [(sent_kind, body)] = client.sent
    assert (sent_kind, body["status"]) == (kind, sent)
    assert "reclaimablePods" not in stored(w)["status"]
