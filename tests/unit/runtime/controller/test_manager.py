"""Manager + builder end to end on the in-memory API server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from jobframework.runtime.builder import BuilderError, ControllerBuilder
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.errors import NotFound
from jobframework.runtime.events import EVENT_GVK
from jobframework.runtime.handler import EnqueueRequestsFromMapFunc
from jobframework.runtime.leaderelection import LEASE_GVK, LeaderElectionConfig
from jobframework.runtime.manager import LeaderElectionLost, Manager
from jobframework.runtime.objects import GVK, Object, owner_reference
from jobframework.runtime.predicate import GenerationChangedPredicate
from jobframework.runtime.reconcile import Request
from jobframework.testing import APIServer

from .helpers import ScriptedReconciler, settle, tick, until

JOB = GVK("batch", "v1", "Job")
POD = GVK("", "v1", "Pod")
CM = GVK("", "v1", "ConfigMap")


def job(name: str, **spec: Any) -> Object:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"parallelism": 1, **spec}}


def pod(name: str, owners: list[dict[str, Any]] | None = None) -> Object:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def server() -> APIServer:
    return APIServer(ManualClock())


@contextlib.asynccontextmanager
async def running(mgr: Manager) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(mgr.start())
    try:
        yield task
    finally:
        if not task.done():
            await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


async def wait_calls(rec: ScriptedReconciler, n: int) -> None:
    await until(lambda: len(rec.calls) >= n, turns=2000, what=f"{n} reconciles")


async def test_for_and_owns_map_events_to_the_owner(server: APIServer) -> None:
    api = server.client()
    mgr = Manager(api, clock=server.clock)
    rec = ScriptedReconciler()
    ctrl = ControllerBuilder(mgr).for_(JOB).owns(POD).build(rec)
    assert ctrl.name == "job"
    async with running(mgr):
        j = await api.create(job("j1"))
        await wait_calls(rec, 1)
        assert rec.calls == [Request.of("default", "j1")]
        await api.create(pod("p1", [owner_reference(j)]))
        await wait_calls(rec, 2)
        assert rec.calls[1] == Request.of("default", "j1"), "child event maps to its owner"
        # A non-controller reference, or a controller of another kind, maps to nothing.
        await api.create(pod("p2", [owner_reference(j, controller=False)]))
        cm = await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "c", "namespace": "default"}})
        await api.create(pod("p3", [owner_reference(cm)]))
        await settle(300)
        assert len(rec.calls) == 2


async def test_predicates_filter_status_only_updates(server: APIServer) -> None:
    api = server.client()
    mgr = Manager(api, clock=server.clock)
    rec = ScriptedReconciler()
    ControllerBuilder(mgr).for_(JOB, predicates=[GenerationChangedPredicate()]).complete(rec)
    async with running(mgr):
        j = await api.create(job("j1"))
        await wait_calls(rec, 1)
        j["status"] = {"active": 1}
        j = await api.update_status(j)
        await settle(300)
        assert len(rec.calls) == 1, "status-only update filtered"
        j["spec"]["parallelism"] = 2
        await api.update(j)
        await wait_calls(rec, 2)


async def test_watches_with_map_func_and_event_filter(server: APIServer) -> None:
    api = server.client()
    mgr = Manager(api, clock=server.clock)
    rec = ScriptedReconciler()

    def jobs_named_in(cm: Object) -> list[Request]:
        return [Request.of("default", n) for n in (cm.get("data") or {}).get("jobs", "").split()]

    (ControllerBuilder(mgr).named("mapper").for_(JOB)
     .watches(CM, EnqueueRequestsFromMapFunc(jobs_named_in))
     .complete(rec))
    async with running(mgr):
        await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "c", "namespace": "default"},
                          "data": {"jobs": "a b"}})
        await wait_calls(rec, 2)
        assert sorted(r.name for r in rec.calls) == ["a", "b"]


async def test_cached_client_reads_from_cache_and_writes_to_api(server: APIServer) -> None:
    api = server.client()
    mgr = Manager(api, clock=server.clock)
    client = mgr.get_client()
    async with running(mgr):
        await mgr.elected()  # the cache runs
        created = await client.create(job("j1"))
        got = await client.get(JOB, "j1", namespace="default")
        # The informer for Job started on first read and synced with the object in it.
        assert got["metadata"]["uid"] == created["metadata"]["uid"]
        server.faults.fail("get", gvk=JOB, times=None)
        server.faults.fail("list", gvk=JOB, times=None)
        again = await client.get(JOB, "j1", namespace="default")  # served by the cache
        assert again == got
        again["metadata"]["labels"] = {"mutated": "locally"}
        assert "labels" not in (await client.get(JOB, "j1", namespace="default"))["metadata"]
        server.faults.clear()
        await client.delete(JOB, "j1", namespace="default")
        await server.settle()  # batch/v1 Jobs orphan their pods through a finalizer
        with pytest.raises(NotFound):
            await api.get(JOB, "j1", namespace="default")


async def test_duplicate_controller_names_and_bad_builders(server: APIServer) -> None:
    mgr = Manager(server.client(), clock=server.clock)
    ControllerBuilder(mgr).for_(JOB).complete(ScriptedReconciler())
    with pytest.raises(ValueError):
        ControllerBuilder(mgr).for_(JOB).complete(ScriptedReconciler())
    with pytest.raises(BuilderError):
        ControllerBuilder(mgr).named("x").owns(POD).complete(ScriptedReconciler())
    with pytest.raises(BuilderError):
        ControllerBuilder(mgr).complete(ScriptedReconciler())
    with pytest.raises(BuilderError):
        ControllerBuilder(mgr).for_(JOB).for_(POD)


async def test_metrics_health_and_events_served(server: APIServer) -> None:
    api = server.client()
    mgr = Manager(api, clock=server.clock, metrics_bind_address="127.0.0.1:0",
                  health_probe_bind_address="127.0.0.1:0")
    rec = ScriptedReconciler(RuntimeError("first fails"))
    ControllerBuilder(mgr).for_(JOB).complete(rec)
    ready = {"ok": False}

    def synced() -> None:
        if not ready["ok"]:
            raise RuntimeError("not yet")

    mgr.add_readyz_check("synced", synced)
    mgr.add_healthz_check("ping", lambda: None)
    recorder = mgr.get_event_recorder_for("job-controller")
    async with running(mgr):
        await mgr.elected()
        await api.create(job("j1"))
        await wait_calls(rec, 1)
        clock = server.clock
        assert isinstance(clock, ManualClock)
        clock.advance(0.005)
        await wait_calls(rec, 2)
        recorder.event(job("j1"), "Normal", "Reconciled", "done")
        assert mgr.metrics_server is not None and mgr.health_probe_server is not None
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{mgr.metrics_server.url}/metrics") as r:
                text = await r.text()
            assert 'controller_runtime_reconcile_total{controller="job",result="error"} 1.0' \
                in text
            assert 'controller_runtime_reconcile_errors_total{controller="job"} 1.0' in text
            assert 'workqueue_adds_total{controller="job",name="job"}' in text
            async with s.get(f"{mgr.health_probe_server.url}/healthz") as r:
                assert (r.status, await r.text()) == (200, "ok")
            async with s.get(f"{mgr.health_probe_server.url}/readyz") as r:
                assert r.status == 500
            ready["ok"] = True
            async with s.get(f"{mgr.health_probe_server.url}/readyz") as r:
                assert r.status == 200
        await mgr.event_broadcaster.flush()
        evs = (await api.list(EVENT_GVK, namespace="default")).items
        assert [(e["reportingController"], e["reason"]) for e in evs] == [
            ("job-controller", "Reconciled")]


async def test_failing_runnable_stops_the_manager(server: APIServer) -> None:
    mgr = Manager(server.client(), clock=server.clock)
    stopped: list[str] = []

    async def other() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.append("other")

    async def broken() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("runnable failed")

    mgr.add(other, needs_leader_election=False)
    mgr.add(broken)
    with pytest.raises(RuntimeError, match="runnable failed"):
        await asyncio.wait_for(mgr.start(), 5)
    assert stopped == ["other"]


async def test_cancelling_start_shuts_down_gracefully(server: APIServer) -> None:
    mgr = Manager(server.client(), clock=server.clock)
    rec = ScriptedReconciler()
    ctrl = ControllerBuilder(mgr).for_(JOB).build(rec)
    task = asyncio.create_task(mgr.start())
    await until(lambda: ctrl.started, turns=2000)
    await ctrl.wait_for_sync()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ctrl.queue.shutting_down


# -- leader election ------------------------------------------------------------------


class LeaderWork:
    """A leader-only runnable that records when it runs and who holds the lease on exit."""

    def __init__(self, server: APIServer, name: str) -> None:
        self.server = server
        self.name = name
        self.running = False
        self.holder_at_stop: str | None = None

    async def start(self) -> None:
        self.running = True
        try:
            await asyncio.Event().wait()
        finally:
            self.running = False
            lease = await self.server.client().get(LEASE_GVK, "mgr", namespace="default")
            self.holder_at_stop = lease["spec"]["holderIdentity"]


def le_config(identity: str, **kw: Any) -> LeaderElectionConfig:
    return LeaderElectionConfig(name="mgr", namespace="default", identity=identity, **kw)


async def test_two_managers_only_one_leads_and_failover(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    work: dict[str, LeaderWork] = {}
    everywhere: dict[str, bool] = {}
    mgrs: dict[str, Manager] = {}
    for ident in ("a", "b"):
        mgrs[ident] = Manager(server.client(), clock=clock, leader_election=le_config(ident))
        work[ident] = LeaderWork(server, ident)
        mgrs[ident].add(work[ident])

        async def anywhere(ident: str = ident) -> None:
            everywhere[ident] = True
            await asyncio.Event().wait()

        mgrs[ident].add(anywhere, needs_leader_election=False)
    task_a = asyncio.create_task(mgrs["a"].start())
    await asyncio.wait_for(mgrs["a"].elected(), 5)
    task_b = asyncio.create_task(mgrs["b"].start())
    await tick(clock, 30)
    assert work["a"].running and not work["b"].running
    assert mgrs["a"].is_leader() and not mgrs["b"].is_leader()
    assert everywhere == {"a": True, "b": True}, "non-leader runnables run everywhere"
    assert mgrs["a"].get_metrics().sample("leader_election_master_status",
                                          {"name": "mgr"}) == 1

    await mgrs["a"].stop()
    await task_a
    assert not work["a"].running
    assert work["a"].holder_at_stop == "a", "leader work stopped before the lease was released"
    lease = await server.client().get(LEASE_GVK, "mgr", namespace="default")
    assert lease["spec"]["holderIdentity"] == ""

    await tick(clock, 6, step=0.25)
    assert mgrs["b"].is_leader()
    await until(lambda: work["b"].running)
    await mgrs["b"].stop()
    await task_b


async def test_lost_leadership_stops_leader_work_and_fails_start(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    mgr = Manager(server.client(), clock=clock, leader_election=le_config("a"))
    work = LeaderWork(server, "a")
    mgr.add(work)
    task = asyncio.create_task(mgr.start())
    await asyncio.wait_for(mgr.elected(), 5)
    await until(lambda: work.running)
    server.faults.fail("update", gvk=LEASE_GVK, error=500, times=None)
    await tick(clock, 14, step=0.25)
    with pytest.raises(LeaderElectionLost):
        await asyncio.wait_for(task, 5)
    assert not work.running
    assert mgr.get_metrics().sample("leader_election_master_status", {"name": "mgr"}) == 0


async def test_manager_without_leader_election_is_elected_at_once(server: APIServer) -> None:
    mgr = Manager(server.client(), clock=server.clock)
    started = asyncio.Event()

    async def leader_only() -> None:
        started.set()
        await asyncio.Event().wait()

    mgr.add(leader_only)
    async with running(mgr):
        await asyncio.wait_for(mgr.elected(), 5)
        await asyncio.wait_for(started.wait(), 5)
        # Runnables added after start begin at once.
        late = asyncio.Event()

        async def added_late() -> None:
            late.set()

        mgr.add(added_late)
        await asyncio.wait_for(late.wait(), 5)
    with pytest.raises(RuntimeError):
        await mgr.start()


async def test_cached_client_field_index_and_uncached_kinds(server: APIServer) -> None:
    api = server.client()
    mgr = Manager(api, clock=server.clock, uncached=[CM])
    client = mgr.get_client()
    await mgr.get_cache().index_field(
        POD, "spec.nodeName", lambda o: [o["spec"].get("nodeName", "")])
    async with running(mgr):
        await mgr.elected()
        for name, node in (("a", "n1"), ("b", "n2"), ("c", "n1")):
            p = pod(name)
            p["spec"]["nodeName"] = node
            await api.create(p)
        for _ in range(200):  # the informer catches up with the creates through its watch
            on_n1 = await client.list(POD, namespace="default",
                                      matching_fields={"spec.nodeName": "n1"})
            if len(on_n1.items) == 2:
                break
            await settle(5)
        assert sorted(o["metadata"]["name"] for o in on_n1.items) == ["a", "c"]
        # ConfigMaps are read from the API server: no informer is created for them.
        await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "cfg", "namespace": "default"}})
        assert (await client.get(CM, "cfg", namespace="default"))["metadata"]["name"] == "cfg"
        assert mgr.get_cache().informer_for(CM) is None
        with pytest.raises(ValueError):
            await client.list(CM, matching_fields={"x": "y"})


async def test_channel_source_and_global_event_filter(server: APIServer) -> None:
    from jobframework.runtime.handler import EnqueueRequestForObject
    from jobframework.runtime.predicate import new_predicate_funcs
    from jobframework.runtime.source import Channel, GenericEvent

    mgr = Manager(server.client(), clock=server.clock)
    rec = ScriptedReconciler()
    external: asyncio.Queue[GenericEvent] = asyncio.Queue()
    (ControllerBuilder(mgr).named("ext")
     .watches_raw_source(Channel(external, EnqueueRequestForObject()))
     .for_(JOB)
     .with_event_filter(new_predicate_funcs(lambda o: o["metadata"]["name"] != "ignored"))
     .complete(rec))
    async with running(mgr):
        await mgr.elected()
        await server.client().create(job("ignored"))
        await server.client().create(job("kept"))
        external.put_nowait(GenericEvent(job("from-outside")))
        await wait_calls(rec, 2)
        await settle(200)
        assert sorted(r.name for r in rec.calls) == ["from-outside", "kept"]


async def test_graceful_shutdown_timeout_bounds_a_stuck_runnable(server: APIServer) -> None:
    mgr = Manager(server.client(), clock=server.clock, graceful_shutdown_timeout=0.02)
    release = asyncio.Event()

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await release.wait()  # ignores cancellation until released
                return

    mgr.add(stubborn)
    task = asyncio.create_task(mgr.start())
    await mgr.elected()
    await settle()
    await asyncio.wait_for(mgr.stop(), 2)
    await asyncio.wait_for(task, 2)
    release.set()
    await settle()


def test_group_kind_concurrency_sets_the_default_worker_count(server: APIServer) -> None:
    # controller-runtime's controller.groupKindConcurrency: keyed Kind.group ("Pod" for
    # the core group), used when the builder names no count; an explicit option wins.
    mgr = Manager(server.client(), group_kind_concurrency={"Job.batch": 5, "Pod": 3})
    jobs = ControllerBuilder(mgr).named("jobs").for_(JOB).build(ScriptedReconciler())
    pods = ControllerBuilder(mgr).named("pods").for_(POD).build(ScriptedReconciler())
    explicit = ControllerBuilder(mgr).named("explicit").for_(JOB) \
        .with_options(max_concurrent_reconciles=2).build(ScriptedReconciler())
    other = ControllerBuilder(mgr).named("leases").for_(LEASE_GVK).build(ScriptedReconciler())
    assert (jobs.max_concurrent_reconciles, pods.max_concurrent_reconciles,
            explicit.max_concurrent_reconciles, other.max_concurrent_reconciles) == (5, 3, 2, 1)


async def test_start_runs_until_the_stop_event_is_set(server: APIServer) -> None:
    # mgr.Start(ctx): the event stands for the context (the runner's signal event).
    mgr = Manager(server.client())
    stop = asyncio.Event()
    cancelled = asyncio.Event()

    async def runnable() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    mgr.add(runnable)
    task = asyncio.create_task(mgr.start(stop))
    await asyncio.wait_for(mgr.elected(), 10)
    await settle()
    assert not task.done() and not cancelled.is_set()
    stop.set()
    await asyncio.wait_for(task, 10)
    assert cancelled.is_set(), "the runnables were shut down before start returned"
