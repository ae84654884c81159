"""The batch Job controller run by the Manager on the in-memory API server, the test playing
Kueue's part: it admits the Workload (quota reservation + Admitted, as Kueue's scheduler
applies them under ``kueue-admission``), then evicts it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from integrations.batchjob import CALLBACKS, FRAMEWORK_NAME, setup_indexes
from jobframework import constants as c
from jobframework.constants import FeatureGates, KueueVersion
from jobframework.indexer import owner_reference_index_field_matcher
from jobframework.integrations import IntegrationManager
from jobframework.runtime.clock import rfc3339
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import Object

from .helpers import EVENT, WORKLOAD, World, base_job, controller_ref

JOB_KEY = ("ns", "job")


@contextlib.asynccontextmanager
async def running(mgr: Manager) -> AsyncIterator[None]:
    task = asyncio.create_task(mgr.start())
    try:
        yield
    finally:
        await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


async def eventually(w: World, cond: Callable[[], bool], what: str) -> None:
    """Let the loop run (and time move in small steps, for requeue backoffs) until ``cond``."""
    for i in range(3000):
        if cond():
            return
        await asyncio.sleep(0)
        if i % 20 == 19:
            w.clock.advance(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def admit(w: World, wl: Object) -> None:
    now = rfc3339(w.clock.now())
    await w.client.apply({
        "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
        "metadata": {"name": wl["metadata"]["name"], "namespace": "ns"},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": now},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted", "lastTransitionTime": now}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "spot"}, "count": 10}]},
        }}, field_manager=c.ADMISSION_NAME, force=True, subresource="status")


async def evict(w: World, wl: Object) -> None:
    now = rfc3339(w.clock.now())
    await w.client.apply({
        "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
        "metadata": {"name": wl["metadata"]["name"], "namespace": "ns"},
        "status": {
            "conditions": [
                *[x for x in wl["status"]["conditions"]],
                {"type": "Evicted", "status": "True", "reason": "Preempted",
                 "message": "Preempted to accommodate a workload", "lastTransitionTime": now}],
            "admission": wl["status"]["admission"],
        }}, field_manager=c.ADMISSION_NAME, force=True, subresource="status")


def event_reasons(w: World) -> list[str]:
    events = sorted(w.server.objects(EVENT, "ns"), key=lambda e: e["eventTime"])
    return [e["reason"] for e in events if e["regarding"]["kind"] == "Job"]


async def test_admit_start_evict_stop_with_the_manager() -> None:
    w = World()
    await w.setup()
    await w.client.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                           "metadata": {"name": "spot"},
                           "spec": {"nodeLabels": {"instance": "spot"}}})
    im = IntegrationManager()
    im.register_integration(FRAMEWORK_NAME, CALLBACKS)
    im.enable_integration(FRAMEWORK_NAME)
    mgr = Manager(w.client, clock=w.clock)
    await setup_indexes(mgr.get_cache())
    assert CALLBACKS.new_reconciler is not None
    reconciler = CALLBACKS.new_reconciler(
        mgr.get_client(), mgr.get_cache(),
        mgr.get_event_recorder_for(f"{FRAMEWORK_NAME}-kueue-controller"),
        clock=w.clock, integration_manager=im,
        features=FeatureGates(version=KueueVersion.MAIN))  # asserts main's reasons
    reconciler.setup_with_manager(mgr)

    def wls() -> list[Object]:
        return w.server.objects(WORKLOAD, "ns")

    def job() -> Object:
        return w.job()

    async with running(mgr):
        await w.create_job(base_job())
        await eventually(w, lambda: len(wls()) == 1, "the workload")
        [wl] = wls()
        assert wl["metadata"]["ownerReferences"][0]["name"] == "job"
        # The cache answers owner-index queries for the reconciler.
        assert CALLBACKS.job_type is not None
        matcher = owner_reference_index_field_matcher(CALLBACKS.job_type, "job")
        names: list[str] = []
        for _ in range(200):  # the informer catches up through its watch
            cached = await mgr.get_client().list(WORKLOAD, namespace="ns",
                                                 matching_fields=matcher)
            names = [x["metadata"]["name"] for x in cached.items]
            if names:
                break
            await asyncio.sleep(0)
        assert names == [wl["metadata"]["name"]]

        await admit(w, wl)
        await eventually(w, lambda: job()["spec"]["suspend"] is False, "the job to start")
        template = job()["spec"]["template"]
        assert template["spec"]["nodeSelector"] == {"instance": "spot"}
        assert template["metadata"]["labels"][c.PODSET_LABEL] == "main"

        [wl] = wls()
        await evict(w, wl)
        await eventually(w, lambda: job()["spec"]["suspend"] is True, "the job to stop")
        await eventually(
            w, lambda: "admission" not in (wls()[0].get("status") or {}), "quota release")
        template = job()["spec"]["template"]
        assert not template["spec"].get("nodeSelector")
        assert c.PODSET_LABEL not in template["metadata"].get("labels", {})
        conds = {x["type"]: (x["status"], x["reason"]) for x in wls()[0]["status"]["conditions"]}
        assert conds["Requeued"] == ("True", "Preempted")
        assert conds["QuotaReserved"] == ("False", "PendingEvaluation")
        assert conds["Admitted"] == ("False", "NoReservation")
        await eventually(w, lambda: event_reasons(w)[-1:] == ["Stopped"], "the events")
        assert event_reasons(w) == ["CreatedWorkload", "Started", "Stopped"]
        started = next(e for e in w.server.objects(EVENT, "ns") if e["reason"] == "Started")
        assert started["note"] == "Admitted by clusterQueue cq"
        assert started["type"] == "Normal" and started["action"] == "Started"
        assert started["reportingController"] == "batch/job-kueue-controller"
        assert (started["regarding"]["kind"], started["regarding"]["name"]) == ("Job", "job")


async def test_child_job_released_when_the_parent_workload_is_admitted() -> None:
    w = World(manage_jobs_without_queue_name=False)
    await w.setup()
    im = IntegrationManager()
    im.register_integration(FRAMEWORK_NAME, CALLBACKS)
    im.enable_integration(FRAMEWORK_NAME)
    mgr = Manager(w.client, clock=w.clock)
    await setup_indexes(mgr.get_cache())
    assert CALLBACKS.new_reconciler is not None
    CALLBACKS.new_reconciler(mgr.get_client(), None, w.recorder, clock=w.clock,
                             integration_manager=im).setup_with_manager(mgr)
    async with running(mgr):
        parent = await w.create_job(base_job("parent"), uid="parent-uid")
        await eventually(w, lambda: len(w.workloads()) == 1, "the parent's workload")
        child: dict[str, Any] = base_job("child", queue=None, suspend=False)
        child["metadata"]["ownerReferences"] = [controller_ref(parent)]
        await w.create_job(child, uid="child-uid")
        await eventually(w, lambda: w.job("child")["spec"]["suspend"] is True,
                         "the child to be suspended")
        assert ("Normal", "Suspended", "Kueue managed child job suspended") in w.recorder.events
        assert len(w.workloads()) == 1, "the child gets no workload of its own"
