"""The invariant watcher on the in-memory API server: each rule staged with objects written
by hand (and its correct counterpart staying quiet), watch cuts, the end-of-run checks, and
one whole batch/v1 Job lifecycle run by the manager with the Kueue stand-in."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import integrations.appwrapper as appwrapper
import integrations.batchjob as batchjob
import integrations.jobflow as jobflow
from jobframework import constants as c
from jobframework.integrations import IntegrationManager
from jobframework.runtime.client import PropagationPolicy
from jobframework.runtime.clock import rfc3339
from jobframework.runtime.errors import Conflict
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object, owner_reference
from jobframework.testing import (
    APIServer,
    InMemoryClient,
    KueueStandIn,
    ManualClock,
    register_kueue_kinds,
)
from jobframework.testing import _gc as gc_module
from jobframework.testing.invariants import (
    POD_GVK,
    RULE_EVICTION_NOT_REFLECTED,
    RULE_LEFTOVER_FINALIZER,
    RULE_NOT_TERMINAL,
    RULE_ORPHANED_WORKLOAD,
    RULE_PODS_OFF_FLAVOR,
    RULE_PODS_OVER_ADMISSION,
    RULE_PODS_WITHOUT_ADMISSION,
    RULE_TERMINAL_STATE_LOST,
    RULE_TWO_WORKLOADS,
    InvariantWatcher,
    Violation,
    WatchedKind,
)
from jobframework.testing.running import running
from jobframework.workload import WORKLOAD_GVK

NS = "ns"
START = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
JOB_GVK = batchjob.JOB_GVK
BATCH = WatchedKind.from_callbacks(batchjob.CALLBACKS)
FLOW = WatchedKind.from_callbacks(jobflow.CALLBACKS)
WRAPPER = WatchedKind.from_callbacks(appwrapper.CALLBACKS)
GRACE = 0.2
CONTAINERS = [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]


# --- the world --------------------------------------------------------------------------------


class World:
    """A server whose clock stamps the objects (moved by hand), and object builders."""

    def __init__(self) -> None:
        self.clock = ManualClock(START)
        self.server = APIServer(self.clock, builtin_defaults=True)
        register_kueue_kinds(self.server)
        for crd in [*jobflow.load_crds(), *appwrapper.load_crds()]:
            self.server.register_crd(crd)
        self.client: InMemoryClient = self.server.client()

    def ts(self, later: float = 0.0) -> str:
        return rfc3339(self.clock.now() + dt.timedelta(seconds=later))

    async def namespace(self) -> None:
        await self.client.create({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": NS}})

    async def job(self, name: str = "job", *, suspend: bool = False,
                  owner: Object | None = None, labels: dict[str, str] | None = None) -> Object:
        meta: dict[str, Any] = {"name": name, "namespace": NS,
                                "labels": {c.QUEUE_LABEL: "lq", **(labels or {})}}
        if owner is not None:
            meta["ownerReferences"] = [owner_reference(owner)]
        return await self.client.create({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"suspend": suspend, "parallelism": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": CONTAINERS}}}})

    async def jobflow(self, name: str = "flow") -> Object:
        return await self.client.create({
            "apiVersion": jobflow.JOBFLOW_GVK.api_version, "kind": "JobFlow",
            "metadata": {"name": name, "namespace": NS, "labels": {c.QUEUE_LABEL: "lq"}},
            "spec": {"flows": [{"name": "a", "jobTemplate": {"template": {"spec": {
                "restartPolicy": "Never", "containers": CONTAINERS}}}}]}})

    async def appwrapper(self, name: str = "aw") -> Object:
        return await self.client.create({
            "apiVersion": appwrapper.APPWRAPPER_GVK.api_version, "kind": "AppWrapper",
            "metadata": {"name": name, "namespace": NS, "labels": {c.QUEUE_LABEL: "lq"}},
            "spec": {"components": [{"template": {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"restartPolicy": "Never", "containers": CONTAINERS}}}]}})

    async def workload(self, owner: Object, name: str = "wl", *, finalizer: bool = True,
                       status: dict[str, Any] | None = None) -> Object:
        meta: dict[str, Any] = {"name": name, "namespace": NS,
                                "ownerReferences": [owner_reference(owner)],
                                "labels": {c.JOB_UID_LABEL: owner["metadata"]["uid"]}}
        if finalizer:
            meta["finalizers"] = [c.RESOURCE_IN_USE_FINALIZER_NAME]
        created = await self.client.create({
            "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload", "metadata": meta,
            "spec": {"queueName": "lq", "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": CONTAINERS}}}]}})
        if status is not None:
            created = await self.wl_status(name, status)
        return created

    async def wl_status(self, name: str, status: dict[str, Any]) -> Object:
        return await self.client.patch(WORKLOAD_GVK, name, {"status": status}, namespace=NS,
                                       subresource="status")

    def admitted(self, *, at: str | None = None, evicted: bool = False) -> dict[str, Any]:
        """An admitted Workload's status (QuotaReserved since ``at``), optionally evicted."""
        at = at or self.ts()
        conds = [cond(c.WORKLOAD_QUOTA_RESERVED, "True", "QuotaReserved", at),
                 cond(c.WORKLOAD_ADMITTED, "True", "Admitted", at)]
        if evicted:
            conds.append(cond(c.WORKLOAD_EVICTED, "True", "Preempted", self.ts()))
        return {"conditions": conds, "admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "count": 1}]}}

    def pending(self) -> dict[str, Any]:
        return {"conditions": [cond(c.WORKLOAD_QUOTA_RESERVED, "False", "Pending", self.ts())],
                "admission": None}

    async def pod(self, owner: Object, name: str = "pod", *, phase: str = "Running",
                  finalizers: list[str] | None = None, node: str | None = None,
                  podset: str | None = None) -> Object:
        meta: dict[str, Any] = {"name": name, "namespace": NS,
                                "ownerReferences": [owner_reference(owner)]}
        if finalizers:
            meta["finalizers"] = finalizers
        if podset is not None:
            meta["labels"] = {c.PODSET_LABEL: podset}
        spec: dict[str, Any] = {"containers": CONTAINERS}
        if node is not None:
            spec["nodeName"] = node
        await self.client.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                  "spec": spec})
        return await self.client.patch(POD_GVK, name, {"status": {"phase": phase}},
                                       namespace=NS, subresource="status")

    async def flavors_and_nodes(self) -> None:
        """The ``default`` flavor (the admission's) on nodes ``pool=a``: node ``n-a`` is
        one of them, ``n-b`` is not."""
        await self.client.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                                  "metadata": {"name": "default"},
                                  "spec": {"nodeLabels": {"pool": "a"}}})
        for name, pool in (("n-a", "a"), ("n-b", "b")):
            await self.client.create({"apiVersion": "v1", "kind": "Node",
                                      "metadata": {"name": name, "labels": {"pool": pool}}})

    async def delete_job(self, name: str) -> None:
        # Background, as kubectl: batch/v1 Jobs default to orphaning their dependents.
        await self.client.delete(JOB_GVK, name, namespace=NS,
                                 propagation_policy=PropagationPolicy.BACKGROUND)

    async def patch(self, gvk: GVK, name: str, body: dict[str, Any], *,
                    status: bool = False) -> Object:
        return await self.client.patch(gvk, name, body, namespace=NS,
                                       subresource="status" if status else None)


def cond(type_: str, status: str, reason: str, at: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": reason,
            "lastTransitionTime": at}


@pytest.fixture
async def world() -> World:
    w = World()
    await w.namespace()
    return w


@contextlib.asynccontextmanager
async def watching(w: World, *kinds: WatchedKind, **options: Any) -> AsyncIterator[
        InvariantWatcher]:
    options.setdefault("grace", GRACE)
    options.setdefault("tick", 0.02)
    watcher = InvariantWatcher(w.client, list(kinds or (BATCH,)), namespace=NS, **options)
    async with watcher:
        yield watcher


async def until(check: Callable[[], bool], what: str, within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def quiet(watcher: InvariantWatcher, seconds: float = 3 * GRACE) -> None:
    """Let several graces pass; nothing may be recorded."""
    await asyncio.sleep(seconds)
    assert watcher.violations == []


def rules(watcher: InvariantWatcher) -> list[str]:
    return [v.rule for v in watcher.violations]


# --- pods without admission ----------------------------------------------------------------------


async def test_running_pod_of_an_unadmitted_workload_is_flagged_after_grace(
        world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job()
        await world.workload(job, status=world.pending())
        await world.pod(job)
        await until(lambda: bool(watcher.violations), "the violation")
        [v] = watcher.violations
        assert (v.rule, v.kind, v.namespace, v.name) == (
            RULE_PODS_WITHOUT_ADMISSION, "Job", NS, "job")
        assert "pods pod run while its Workload wl (QuotaReserved=False/Pending)" in v.message
        await asyncio.sleep(4 * GRACE)  # once per problem, although the pod keeps running
        assert len(watcher.violations) == 1
        assert watcher.stats["pods_seen"] == 1 and watcher.stats["jobs_seen"] == 1


async def test_pods_of_an_admitted_workload_are_fine(world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job()
        # Admitted one second after the pod's creation stamp: within the clock skew.
        await world.workload(job, status=world.admitted(at=world.ts(1)))
        await world.pod(job)
        await world.pod(job, "done", phase="Succeeded")
        await quiet(watcher)


async def test_a_pod_created_before_the_first_admission_is_flagged_at_once(
        world: World) -> None:
    async with watching(world, grace=60.0) as watcher:
        job = await world.job()
        await world.workload(job, status=world.pending())
        await world.pod(job)
        world.clock.advance(5)
        await world.wl_status("wl", world.admitted())
        await until(lambda: bool(watcher.violations), "the violation", within=2.0)
        [v] = watcher.violations
        assert v.rule == RULE_PODS_WITHOUT_ADMISSION and v.name == "job"
        assert "pod pod was created at 2026-01-02T03:04:05Z, before its Workload wl " \
               "was first admitted (at 2026-01-02T03:04:10Z)" in v.message


async def test_a_pod_created_before_any_workload_is_flagged_at_once(world: World) -> None:
    async with watching(world, grace=60.0) as watcher:
        job = await world.job()
        await world.pod(job)
        world.clock.advance(3)
        await world.workload(job)
        await until(lambda: bool(watcher.violations), "the violation", within=2.0)
        assert "before the job had a Workload (the first, wl," in watcher.violations[0].message


async def test_a_pod_of_a_job_owned_by_a_jobflow_counts_for_the_jobflow(world: World) -> None:
    async with watching(world, BATCH, FLOW) as watcher:
        flow = await world.jobflow()
        await world.workload(flow, status=world.pending())
        child = await world.job("flow-a", owner=flow)
        await world.pod(child)
        await until(lambda: bool(watcher.violations), "the violation")
        [v] = watcher.violations
        assert (v.rule, v.kind, v.name) == (RULE_PODS_WITHOUT_ADMISSION, "JobFlow", "flow")
        # The child Job is followed as an intermediate owner, not as a job.
        assert watcher.stats["jobs_seen"] == 1 and watcher.stats["pods_seen"] == 1


async def test_a_pod_of_an_admitted_jobflow_is_fine(world: World) -> None:
    async with watching(world, BATCH, FLOW) as watcher:
        flow = await world.jobflow()
        await world.workload(flow, status=world.admitted())
        child = await world.job("flow-a", owner=flow)
        await world.pod(child)
        await quiet(watcher)
        assert watcher.stats["pods_seen"] == 1


async def test_the_label_selector_limits_the_jobs_followed(world: World) -> None:
    async with watching(world, label_selector="run=this") as watcher:
        other = await world.job("other")
        await world.workload(other, "other-wl", status=world.pending())
        await world.pod(other, "other-pod")
        mine = await world.job("mine", labels={"run": "this"})
        await world.workload(mine, "mine-wl", status=world.pending())
        await world.pod(mine, "mine-pod")
        await until(lambda: bool(watcher.violations), "the violation")
        await asyncio.sleep(3 * GRACE)
        assert [v.name for v in watcher.violations] == ["mine"]
        assert watcher.stats["jobs_seen"] == 1 and watcher.stats["workloads_seen"] == 1


# --- placement: flavors and counts -----------------------------------------------------------


async def test_a_pod_of_the_admission_off_its_flavor_is_flagged_at_once(world: World) -> None:
    await world.flavors_and_nodes()
    async with watching(world, grace=60.0, overrun_grace=60.0) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.pod(job, node="n-b", podset="main")
        await until(lambda: bool(watcher.violations), "the violation")
        [v] = watcher.violations
        assert (v.rule, v.kind, v.name) == (RULE_PODS_OFF_FLAVOR, "Job", "job")
        assert v.message == ("pod pod runs on node n-b: PodSet main was admitted on flavor "
                             "default (pool=a), the node has pool=b")


async def test_pods_on_their_flavor_are_fine(world: World) -> None:
    await world.flavors_and_nodes()
    async with watching(world, overrun_grace=GRACE) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.pod(job, node="n-a", podset="main")
        await world.pod(job, "unscheduled", phase="Pending", podset="main", finalizers=["x/y"])
        await world.client.delete(POD_GVK, "unscheduled", namespace=NS)  # terminating
        await quiet(watcher)
        assert watcher.stats["pods_placement_checked"] == 1


async def test_a_pod_of_no_admitted_pod_set_off_its_flavor_gets_the_overrun_grace(
        world: World) -> None:
    """A Job claiming the job's controller runs until the controller's next pass."""
    await world.flavors_and_nodes()
    async with watching(world, grace=60.0, overrun_grace=60.0) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.pod(job, "claimed", node="n-b")
        await quiet(watcher)
    async with watching(world, grace=60.0, overrun_grace=GRACE) as watcher:
        await until(lambda: bool(watcher.violations), "the violation")
        assert [v.rule for v in watcher.violations] == [RULE_PODS_OFF_FLAVOR]
        assert "pod claimed runs on node n-b" in watcher.violations[0].message


async def test_more_pods_than_admitted_are_flagged_after_the_overrun_grace(
        world: World) -> None:
    async with watching(world, grace=60.0, overrun_grace=GRACE) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.pod(job, "p-0", podset="main")
        await world.pod(job, "p-1", phase="Pending", podset="main")
        await world.pod(job, "done", phase="Succeeded", podset="main")
        await until(lambda: bool(watcher.violations), "the violation")
        [v] = watcher.violations
        assert (v.rule, v.kind, v.name) == (RULE_PODS_OVER_ADMISSION, "Job", "job")
        assert v.message.startswith("2 pods of PodSet main where 1 was admitted; 2 pods in "
                                    "all where 1 was admitted, for ")
        assert v.message.endswith("(pods p-0, p-1)")


async def test_no_overrun_is_judged_while_the_controllers_are_down(world: World) -> None:
    """Their correction comes with their next pass: none while their manager is down."""
    async with watching(world, grace=60.0, overrun_grace=GRACE) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        async with watcher.controllers_down():
            await world.pod(job, "p-0", podset="main")
            await world.pod(job, "p-1", podset="main")
            await until(lambda: watcher.stats["overruns_seen"] == 1, "the overrun seen")
            await quiet(watcher)
        await until(lambda: bool(watcher.violations), "the violation once they are back")
        assert [v.rule for v in watcher.violations] == [RULE_PODS_OVER_ADMISSION]


async def test_an_overrun_ended_within_the_grace_is_counted_not_flagged(
        world: World) -> None:
    async with watching(world, grace=60.0, overrun_grace=60.0) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.pod(job, "p-0", podset="main")
        await world.pod(job, "p-1", podset="main")
        await until(lambda: watcher.stats["overruns_seen"] == 1, "the overrun seen")
        await world.client.patch(POD_GVK, "p-1", {"status": {"phase": "Succeeded"}},
                                 namespace=NS, subresource="status")
        await until(lambda: watcher.stats["overruns_corrected"] == 1, "the overrun ended")
        await quiet(watcher)
        assert watcher.stats["overrun_longest_ms"] < 60_000


# --- two workloads --------------------------------------------------------------------------------


async def test_two_workloads_of_one_job_are_flagged(world: World) -> None:
    async with watching(world, duplicate_grace=0.1) as watcher:
        job = await world.job(suspend=True)
        await world.workload(job, "wl-1")
        await world.workload(job, "wl-2")
        await until(lambda: bool(watcher.violations), "the violation")
        [v] = watcher.violations
        assert (v.rule, v.name) == (RULE_TWO_WORKLOADS, "job")
        assert "2 Workloads at once" in v.message and "wl-1, wl-2" in v.message


async def test_a_duplicate_removed_at_once_is_fine(world: World) -> None:
    async with watching(world, duplicate_grace=0.3) as watcher:
        job = await world.job(suspend=True)
        await world.workload(job, "wl-1")
        await world.workload(job, "wl-2", finalizer=False)
        await world.client.delete(WORKLOAD_GVK, "wl-2", namespace=NS)
        await quiet(watcher)
        assert watcher.stats["workloads_seen"] == 2


# --- orphaned workloads and finalizers ---------------------------------------------------------


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_workload_outliving_its_owner_is_flagged(
        world: World, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc_module, "collect", lambda server: False)  # the GC does not run
    async with watching(world) as watcher:
        job = await world.job(suspend=True)
        await world.workload(job, finalizer=False)
        await world.delete_job("job")
        if how == "replaced":
            await world.job(suspend=True)
        await until(lambda: bool(watcher.violations), "the violation")
        [v] = watcher.violations
        assert (v.rule, v.kind, v.name) == (RULE_ORPHANED_WORKLOAD, "Workload", "wl")
        assert f"after its owner Job job (uid {job['metadata']['uid']}) " \
               f"{'was deleted' if how == 'deleted' else 'was replaced'}" in v.message


async def test_an_outage_restarts_the_grace_of_what_it_held_up(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """During a planned API server outage nothing grace-based is judged, and the grace
    starts again when it ends: controllers get their whole grace to recover."""
    monkeypatch.setattr(gc_module, "collect", lambda server: False)  # the GC does not run
    async with watching(world) as watcher:
        job = await world.job(suspend=True)
        await world.workload(job, finalizer=False)
        await world.delete_job("job")
        async with watcher.outage():
            await asyncio.sleep(GRACE * 3)
            assert watcher.violations == [], "nothing judged during the outage"
        ended = time.monotonic()
        await until(lambda: bool(watcher.violations), "the violation")
        assert time.monotonic() - ended >= GRACE * 0.9, "a whole grace after the outage"
        [v] = watcher.violations
        assert v.rule == RULE_ORPHANED_WORKLOAD


async def test_a_workload_held_by_its_finalizer_after_the_owner_went(world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job(suspend=True)
        await world.workload(job)
        await world.delete_job("job")  # the GC deletes the Workload
        await until(lambda: len(watcher.violations) == 2, "both violations")
        by_rule = {v.rule: v for v in watcher.violations}
        assert "held by finalizers ['kueue.x-k8s.io/resource-in-use']" in \
               by_rule[RULE_ORPHANED_WORKLOAD].message
        assert "still carries kueue.x-k8s.io/resource-in-use" in \
               by_rule[RULE_LEFTOVER_FINALIZER].message
        assert "after its Job went" in by_rule[RULE_LEFTOVER_FINALIZER].message


async def test_a_workload_collected_with_its_owner_is_fine(world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job(suspend=True)
        await world.workload(job, finalizer=False)
        await world.delete_job("job")
        await until(lambda: not world.server.objects(WORKLOAD_GVK, NS), "the GC")
        await quiet(watcher)


async def test_a_finished_workload_keeping_its_finalizer_is_flagged(world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job()
        status = world.admitted()
        status["conditions"].append(cond(c.WORKLOAD_FINISHED, "True", "Succeeded", world.ts()))
        await world.workload(job, status=status)
        await until(lambda: bool(watcher.violations), "the violation")
        [v] = watcher.violations
        assert (v.rule, v.kind, v.name) == (RULE_LEFTOVER_FINALIZER, "Workload", "wl")
        assert "after the Workload finished" in v.message


async def test_a_finalizer_removed_in_time_is_fine(world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.patch(JOB_GVK, "job", {"status": {"conditions": [
            {"type": "Complete", "status": "True"}]}}, status=True)
        await world.patch(WORKLOAD_GVK, "wl", {"metadata": {"finalizers": None}})
        await quiet(watcher)
        assert watcher.stats["terminal_jobs"] == 1


async def test_a_finished_pod_keeping_a_kueue_finalizer_is_flagged(world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.pod(job, phase="Succeeded", finalizers=[c.MANAGED_BY_KUEUE_LABEL_KEY])
        await world.pod(job, "clean", phase="Succeeded")
        await until(lambda: bool(watcher.violations), "the violation")
        [v] = watcher.violations
        assert (v.rule, v.kind, v.name) == (RULE_LEFTOVER_FINALIZER, "Pod", "pod")
        assert "ended Succeeded" in v.message


# --- evictions ----------------------------------------------------------------------------------


async def test_an_eviction_the_job_ignores_is_flagged(world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.wl_status("wl", world.admitted(evicted=True))
        await until(lambda: bool(watcher.violations), "the violation")
        [v] = watcher.violations
        assert (v.rule, v.kind, v.name) == (RULE_EVICTION_NOT_REFLECTED, "Job", "job")
        assert "after its Workload wl was evicted (Evicted=True/Preempted" in v.message
        assert "the Job is not stopped" in v.message
        assert watcher.stats["evictions_seen"] == 1
        assert watcher.stats["evictions_reflected"] == 0


@pytest.mark.parametrize("how", ["evicted", "deactivated"])
async def test_an_eviction_the_job_follows_is_counted_as_reflected(
        world: World, how: str) -> None:
    async with watching(world) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        if how == "evicted":
            await world.wl_status("wl", world.admitted(evicted=True))
        else:
            await world.patch(WORKLOAD_GVK, "wl", {"spec": {"active": False}})
        await until(lambda: watcher.stats["evictions_seen"] == 1, "the eviction")
        await world.patch(JOB_GVK, "job", {"spec": {"suspend": True}})
        await world.wl_status("wl", world.pending())  # the quota released: the same eviction
        await quiet(watcher)
        assert watcher.stats["evictions_seen"] == 1
        assert watcher.stats["evictions_reflected"] == 1


async def test_an_eviction_superseded_by_a_readmission_is_not_flagged(world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.wl_status("wl", world.admitted(evicted=True))
        await world.wl_status("wl", world.pending())
        world.clock.advance(2)
        await world.wl_status("wl", world.admitted())
        await quiet(watcher)
        assert watcher.stats["evictions_seen"] == 1
        assert watcher.stats["evictions_superseded"] == 1


# --- terminal states ------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "done", "undone"), [
    (FLOW, {"state": "Succeed"}, {"state": "Running"}),
    (WRAPPER, {"phase": "Succeeded"}, {"phase": "Running"}),
])
async def test_a_finished_job_seen_unfinished_again_is_flagged_at_once(
        world: World, kind: WatchedKind, done: dict[str, str], undone: dict[str, str]) -> None:
    async with watching(world, kind, grace=60.0) as watcher:
        obj = await (world.jobflow() if kind is FLOW else world.appwrapper())
        name = obj["metadata"]["name"]
        await world.patch(kind.gvk, name, {"status": done}, status=True)
        await until(lambda: watcher.stats["terminal_jobs"] == 1, "the job finished")
        await world.patch(kind.gvk, name, {"status": undone}, status=True)
        await until(lambda: bool(watcher.violations), "the violation", within=2.0)
        [v] = watcher.violations
        assert (v.rule, v.kind, v.name) == (RULE_TERMINAL_STATE_LOST, kind.gvk.kind, name)


async def test_a_job_leaving_its_terminal_state_while_deleted_is_not_flagged(
        world: World) -> None:
    """Upstream's AppWrapper goes Succeeded -> Terminating when deleted with its
    components still deployed (found by the fault suite): deletion, not a lost state."""
    async with watching(world, WRAPPER, grace=60.0) as watcher:
        obj = await world.appwrapper()
        name = obj["metadata"]["name"]
        await world.client.patch(WRAPPER.gvk, name, {"metadata": {"finalizers": [
            "workload.codeflare.dev/finalizer"]}}, namespace=NS)
        await world.patch(WRAPPER.gvk, name, {"status": {"phase": "Succeeded"}}, status=True)
        await until(lambda: watcher.stats["terminal_jobs"] == 1, "the job finished")
        await world.client.delete(WRAPPER.gvk, name, namespace=NS)
        await world.patch(WRAPPER.gvk, name, {"status": {"phase": "Terminating"}}, status=True)
        await until(lambda: watcher.stats["jobs_seen"] == 1 and _deleting(watcher),
                    "the deletion seen")
        for _ in range(50):
            await asyncio.sleep(0)
        assert watcher.violations == []


def _deleting(watcher: InvariantWatcher) -> bool:
    return any(job.deleting for job in watcher._jobs.values())


async def test_wait_terminal_reports_the_jobs_left_running(world: World) -> None:
    async with watching(world) as watcher:
        await world.job("done")
        await world.job("stuck")
        await world.patch(JOB_GVK, "done", {"status": {"conditions": [
            {"type": "Failed", "status": "True"}]}}, status=True)
        assert await watcher.wait_terminal(0.3) == [("Job", NS, "stuck")]
        [v] = watcher.violations
        assert (v.rule, v.name) == (RULE_NOT_TERMINAL, "stuck")
        assert "(running)" in v.message
        await world.delete_job("stuck")
        assert await watcher.wait_terminal(1.0) == []


async def test_final_check_waits_for_cleanup_then_flags_what_is_left(world: World) -> None:
    async with watching(world, grace=60.0) as watcher:
        for name in ("tidy", "messy"):
            job = await world.job(name)
            status = world.admitted()
            status["conditions"].append(cond(c.WORKLOAD_FINISHED, "True", "Succeeded",
                                             world.ts()))
            await world.workload(job, f"{name}-wl", status=status)

        async def tidy_up() -> None:
            await asyncio.sleep(0.2)
            await world.patch(WORKLOAD_GVK, "tidy-wl", {"metadata": {"finalizers": None}})

        cleaner = asyncio.create_task(tidy_up())
        found = await watcher.final_check(settle=0.6)
        await cleaner
        assert [(v.rule, v.name) for v in found] == [(RULE_LEFTOVER_FINALIZER, "messy-wl")]
        assert "after the Workload finished (1s after the run)" in found[0].message


# --- watch cuts ---------------------------------------------------------------------------------


async def test_cut_and_expired_watches_lose_nothing_and_invent_nothing(world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.pod(job)
        for _ in range(3):
            world.server.faults.drop_watches()
            await asyncio.sleep(0.05)
        # While the watches are down and their history gone, the job is evicted and ignores it.
        world.server.faults.compact()
        world.server.faults.drop_watches()
        await world.wl_status("wl", world.admitted(evicted=True))
        other = await world.job("other")
        await world.workload(other, "other-wl", status=world.pending())
        await world.pod(other, "other-pod")
        await until(lambda: len(watcher.violations) == 2, "both violations")
        assert sorted((v.rule, v.name) for v in watcher.violations) == [
            (RULE_EVICTION_NOT_REFLECTED, "job"), (RULE_PODS_WITHOUT_ADMISSION, "other")]
        assert watcher.stats["relists"] >= 1


async def test_a_lagging_informer_is_not_taken_for_a_violation(world: World) -> None:
    async with watching(world) as watcher:
        job = await world.job()
        await world.workload(job, status=world.pending())
        await until(lambda: watcher.stats["workloads_seen"] == 1, "the Workload")
        # The Workload watch lags (events held until the server clock moves 30 s): the
        # watcher sees the pod run under a Workload it still believes unadmitted.
        world.server.faults.delay_events(30, gvk=WORKLOAD_GVK)
        await world.wl_status("wl", world.admitted())
        await world.pod(job)
        await asyncio.sleep(4 * GRACE)
        world.server.faults.delay_events(0, gvk=WORKLOAD_GVK)
        world.clock.advance(30)
        await until(lambda: watcher._job_admitted(job["metadata"]["uid"]), "the admission")
        # Now the Job watch lags: the job stops in time, the watcher learns it late.
        world.server.faults.delay_events(30, gvk=JOB_GVK)
        await world.wl_status("wl", world.admitted(evicted=True))
        await world.patch(JOB_GVK, "job", {"spec": {"suspend": True}})
        await quiet(watcher)
        assert watcher.stats["evictions_reflected"] == 1


async def test_an_eviction_of_a_job_not_delivered_yet_is_still_checked(world: World) -> None:
    world.server.faults.delay_events(30, gvk=JOB_GVK)  # the watcher never sees the job
    async with watching(world) as watcher:
        job = await world.job()
        await world.workload(job, status=world.admitted())
        await world.wl_status("wl", world.admitted(evicted=True))
        await until(lambda: bool(watcher.violations), "the violation")
        [v] = watcher.violations
        assert (v.rule, v.kind, v.name) == (RULE_EVICTION_NOT_REFLECTED, "Job", "job")


async def test_on_violation_callbacks_get_each_violation_once(world: World) -> None:
    seen: list[Violation] = []
    async with watching(world) as watcher:
        watcher.on_violation(seen.append)

        def failing(v: Violation) -> None:
            raise RuntimeError(v.rule)

        watcher.on_violation(failing)  # a failing callback stops nobody
        job = await world.job()
        await world.workload(job, status=world.pending())
        await world.pod(job)
        await until(lambda: bool(seen), "the callback")
        await asyncio.sleep(3 * GRACE)
        assert seen == watcher.violations and len(seen) == 1


# --- a whole lifecycle, run by the manager -------------------------------------------------------


async def eventually(clock: ManualClock, check: Callable[[], Awaitable[bool]],
                     what: str) -> None:
    """Let the loop run, moving the manager's clock in small steps (requeue backoffs)."""
    for i in range(5000):
        if await check():
            return
        await asyncio.sleep(0)
        if i % 20 == 19:
            clock.advance(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def job_status(client: InMemoryClient, **status: Any) -> None:
    """Write Job status as the Job controller would (retried on conflicts)."""
    for _ in range(20):
        job = await client.get(JOB_GVK, "job", namespace=NS)
        job["status"] = {**(job.get("status") or {}), **status}
        with contextlib.suppress(Conflict):
            await client.update_status(job)
            return
    raise AssertionError("could not write the Job status")


async def test_a_lifecycle_with_an_eviction_run_by_the_manager_breaks_nothing(
        world: World) -> None:
    clock, client = world.clock, world.client
    kueue = KueueStandIn(world.server)
    await kueue.resource_flavor("default")
    await kueue.cluster_queue("cq", {"default": {"cpu": "4"}})
    await kueue.local_queue("lq", "cq", namespace=NS)
    im = IntegrationManager()
    im.register_integration(batchjob.FRAMEWORK_NAME, batchjob.CALLBACKS)
    im.enable_integration(batchjob.FRAMEWORK_NAME)
    mgr = Manager(client, clock=clock)
    await batchjob.setup_indexes(mgr.get_cache())
    assert batchjob.CALLBACKS.new_reconciler is not None
    batchjob.CALLBACKS.new_reconciler(
        mgr.get_client(), mgr.get_cache(), mgr.get_event_recorder_for("batch/job-kueue"),
        clock=clock, integration_manager=im).setup_with_manager(mgr)

    async def job() -> Object:
        return await client.get(JOB_GVK, "job", namespace=NS)

    async def workload() -> Object | None:
        items = world.server.objects(WORKLOAD_GVK, NS)
        return items[0] if items else None

    async def start_pods(job_obj: Object, names: list[str]) -> None:
        for name in names:
            await world.pod(job_obj, name)
        await job_status(client, active=len(names))

    async with running(mgr), watching(world, grace=0.5) as watcher:
        await world.job(suspend=True)
        await eventually(clock, lambda: workload_exists(world), "the Workload")
        await kueue.schedule()
        await eventually(clock, lambda: unsuspended(job), "the job to start")
        await start_pods(await job(), ["p1", "p2"])

        wl = await workload()
        assert wl is not None
        await kueue.evict(wl, c.EVICTED_BY_PREEMPTION)
        await eventually(clock, lambda: suspended(job), "the job to stop")
        for name in ("p1", "p2"):  # the Job controller removes the pods of a suspended Job
            await client.delete(POD_GVK, name, namespace=NS)
        await job_status(client, active=0)
        await eventually(clock, lambda: released(workload), "the quota released")

        await kueue.schedule()
        await eventually(clock, lambda: unsuspended(job), "the job to start again")
        await start_pods(await job(), ["p3", "p4"])
        for name in ("p3", "p4"):
            await world.patch(POD_GVK, name, {"status": {"phase": "Succeeded"}}, status=True)
        await job_status(client, active=0, succeeded=2, conditions=[
            {"type": "Complete", "status": "True", "message": "done"}])
        await eventually(clock, lambda: finalizer_gone(workload), "the Workload released")

        assert await watcher.wait_terminal(5.0) == []
        assert await watcher.final_check(settle=2.0) == []
        await asyncio.sleep(2 * 0.5)  # past every grace
        assert watcher.violations == []
        stats = watcher.stats
        assert (stats["jobs_seen"], stats["workloads_seen"], stats["pods_seen"]) == (1, 1, 4)
        assert (stats["evictions_seen"], stats["evictions_reflected"]) == (1, 1)
        assert stats["terminal_jobs"] == 1


async def workload_exists(w: World) -> bool:
    return bool(w.server.objects(WORKLOAD_GVK, NS))


async def unsuspended(job: Callable[[], Awaitable[Object]]) -> bool:
    return (await job())["spec"].get("suspend") is False


async def suspended(job: Callable[[], Awaitable[Object]]) -> bool:
    obj = await job()
    return bool(obj["spec"].get("suspend")) and c.STOPPING_ANNOTATION not in (
        obj["metadata"].get("annotations") or {})


async def released(workload: Callable[[], Awaitable[Object | None]]) -> bool:
    wl = await workload()
    return wl is not None and "admission" not in (wl.get("status") or {})


async def finalizer_gone(workload: Callable[[], Awaitable[Object | None]]) -> bool:
    wl = await workload()
    return wl is not None and not wl["metadata"].get("finalizers")
