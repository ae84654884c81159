"""Property: whatever Kueue and the Job controller do, in any order, one reconcile leaves a
batch Job and its Workload consistent (hypothesis state machine on the in-memory server)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from jobframework import constants as c
from jobframework.reconciler import ReconcileError
from jobframework.runtime import errors
from jobframework.runtime.clock import rfc3339
from jobframework.runtime.objects import Object

from .helpers import World, base_job

T = TypeVar("T")


def conds(wl: Object) -> dict[str, dict[str, Any]]:
    return {x["type"]: x for x in (wl.get("status") or {}).get("conditions") or []}


def is_true(wl: Object, type_: str) -> bool:
    return conds(wl).get(type_, {}).get("status") == "True"


class JobLifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.w = World()
        self.run(self.w.setup())
        self.run(self.w.create_job(base_job(parallelism=2)))
        self.reconciled = False
        #: Reconciles since the last change made by someone else (steady state at 2).
        self.quiet_reconciles = 0

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.loop.close()

    # -- helpers ----------------------------------------------------------------------

    def live_workloads(self) -> list[Object]:
        return [w for w in self.w.workloads() if not w["metadata"].get("deletionTimestamp")]

    def workload(self) -> Object | None:
        wls = self.live_workloads()
        return wls[0] if wls else None

    def job(self) -> Object:
        return self.w.job()

    def finished_job(self) -> bool:
        return any(x["type"] in ("Complete", "Failed") and x["status"] == "True"
                   for x in (self.job().get("status") or {}).get("conditions") or [])

    async def apply_status(self, wl: Object, status: dict[str, Any]) -> None:
        await self.w.client.apply({
            "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
            "metadata": {"name": wl["metadata"]["name"], "namespace": "ns"},
            "status": status}, field_manager=c.ADMISSION_NAME, force=True,
            subresource="status")

    # -- the reconciler ------------------------------------------------------------------

    @rule()
    def reconcile(self) -> None:
        # A failed reconcile is retried by the next one, as the controller would.
        with contextlib.suppress(ReconcileError, errors.ApiError):
            self.run(self.w.reconcile())
        self.run(self.w.server.settle())
        self.reconciled = True
        self.quiet_reconciles += 1

    # -- Kueue's scheduler ---------------------------------------------------------------

    @precondition(lambda self: (wl := self.workload()) is not None
                  and not is_true(wl, "QuotaReserved") and not is_true(wl, "Finished"))
    @rule()
    def admit(self) -> None:
        wl = self.workload()
        assert wl is not None
        now = rfc3339(self.w.clock.now())
        kept = [x for t, x in conds(wl).items() if t not in (
            "QuotaReserved", "Admitted", "Evicted")]
        self.run(self.apply_status(wl, {
            "conditions": [
                *kept,
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": now},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted", "lastTransitionTime": now},
                {"type": "Evicted", "status": "False", "reason": "QuotaReserved",
                 "message": "Previously", "lastTransitionTime": now}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "count": 2}]}}))
        self.reconciled = False
        self.quiet_reconciles = 0

    @precondition(lambda self: (wl := self.workload()) is not None
                  and is_true(wl, "Admitted") and not is_true(wl, "Evicted"))
    @rule(reason=st.sampled_from(["Preempted", "PodsReadyTimeout", "NodeFailures"]))
    def evict(self, reason: str) -> None:
        wl = self.workload()
        assert wl is not None
        now = rfc3339(self.w.clock.now())
        kept = [x for t, x in conds(wl).items() if t != "Evicted"]
        self.run(self.apply_status(wl, {
            "conditions": [*kept, {"type": "Evicted", "status": "True", "reason": reason,
                                   "message": f"evicted: {reason}",
                                   "lastTransitionTime": now}],
            "admission": wl["status"]["admission"]}))
        self.reconciled = False
        self.quiet_reconciles = 0

    # -- the Job controller ----------------------------------------------------------------

    @rule()
    def job_controller(self) -> None:
        job = self.job()
        if self.finished_job():
            return
        active = 0 if job["spec"].get("suspend") else 2
        status = dict(job.get("status") or {})
        if status.get("active", 0) != active:
            status["active"] = active
            job["status"] = status
            self.run(self.w.client.update_status(job))
            self.reconciled = False
            self.quiet_reconciles = 0

    @precondition(lambda self: not self.job()["spec"].get("suspend"))
    @rule(success=st.booleans())
    def job_ends(self, success: bool) -> None:
        job = self.job()
        job["status"] = {"active": 0, "conditions": [{
            "type": "Complete" if success else "Failed", "status": "True",
            "message": "done"}]}
        self.run(self.w.client.update_status(job))
        self.reconciled = False
        self.quiet_reconciles = 0

    # -- what must hold after a reconcile ----------------------------------------------------

    @invariant()
    def consistent_after_reconcile(self) -> None:
        if not self.reconciled:
            return
        job = self.job()
        live = self.live_workloads()
        unfinished = [w for w in live if not is_true(w, "Finished")]
        assert len(unfinished) <= 1, "one workload per job"
        for wl in live:
            assert wl["metadata"]["ownerReferences"][0]["name"] == "job"
        if self.finished_job():
            assert all(is_true(w, "Finished") for w in live), "a finished job finishes its wl"
            return
        if not job["spec"].get("suspend"):
            assert unfinished and is_true(unfinished[0], "Admitted") and not is_true(
                unfinished[0], "Evicted"), "only an admitted job runs"
        for wl in unfinished:
            if is_true(wl, "Evicted") and not (job.get("status") or {}).get("active"):
                assert not is_true(wl, "QuotaReserved")
                assert "admission" not in (wl.get("status") or {})
                assert conds(wl)["Requeued"]["reason"] == conds(wl)["Evicted"]["reason"]

    @invariant()
    def resource_in_use_finalizer_only_on_unfinished(self) -> None:
        # Finishing and releasing the finalizer are two reconciles, as in Kueue.
        if self.quiet_reconciles < 2:
            return
        for wl in self.live_workloads():
            if is_true(wl, "Finished"):
                assert c.RESOURCE_IN_USE_FINALIZER_NAME not in (
                    wl["metadata"].get("finalizers") or [])


JobLifecycle.TestCase.settings = settings(
    max_examples=20, stateful_step_count=12, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestJobLifecycle = JobLifecycle.TestCase
