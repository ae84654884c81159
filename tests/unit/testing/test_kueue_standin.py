"""The Kueue stand-in: admission with flavors and quota, FIFO and priority order,
preemption, and the exact status each helper writes (as Kueue v0.19.2 writes it)."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework import constants as c
from jobframework.runtime.objects import Object
from jobframework.testing import (
    APIServer,
    EventCollector,
    InMemoryClient,
    KueueStandIn,
    ManualClock,
    NotAdmissibleError,
)
from jobframework.testing.kueue import WORKLOAD_GVK

T0 = "2026-01-01T00:00:00Z"


def workload(name: str, cpu: str = "1", count: int = 1, priority: int = 0,
             queue: str = "lq", **extra_spec: Any) -> Object:
    return {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"queueName": queue, "priority": priority, "podSets": [
                {"name": "main", "count": count, "template": {"spec": {"containers": [
                    {"name": "c", "image": "x",
                     "resources": {"requests": {"cpu": cpu}}}]}}}], **extra_spec}}


def conds(obj: Object) -> dict[str, dict[str, Any]]:
    return {x["type"]: {k: v for k, v in x.items() if k != "type"}
            for x in (obj.get("status") or {}).get("conditions") or []}


def managers(obj: Object) -> dict[str, set[str]]:
    """Field manager → top-level status fields it owns."""
    out: dict[str, set[str]] = {}
    for entry in obj["metadata"].get("managedFields") or []:
        status = (entry.get("fieldsV1") or {}).get("f:status") or {}
        out.setdefault(entry["manager"], set()).update(
            k[2:] for k in status if k.startswith("f:"))
    return out


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def events() -> EventCollector:
    return EventCollector()


@pytest.fixture
async def kq(clock: ManualClock, events: EventCollector) -> KueueStandIn:
    k = KueueStandIn(APIServer(clock), recorder=events)
    await k.resource_flavor("on-demand", node_labels={"instance-type": "on-demand"})
    await k.resource_flavor("spot", node_labels={"instance-type": "spot"},
                            node_taints=[{"key": "spot", "value": "true",
                                          "effect": "NoSchedule"}])
    await k.cluster_queue("cq", {"on-demand": {"cpu": "2"}, "spot": {"cpu": "2"}},
                          preemption="LowerPriority")
    await k.local_queue("lq", "cq")
    return k


@pytest.fixture
def api(kq: KueueStandIn) -> InMemoryClient:
    return kq.server.client()


def tolerating(name: str, cpu: str = "1", **kw: Any) -> Object:
    wl = workload(name, cpu, **kw)
    wl["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = [
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    return wl


async def test_admission_status_is_kueues_whole_admission(
        kq: KueueStandIn, api: InMemoryClient, events: EventCollector) -> None:
    await api.create(workload("a", cpu="1500m", count=1))
    result = await kq.schedule()
    assert result.admitted == ("default/a",) and result.pending == {}
    wl = await kq.workload("a")
    assert wl["status"]["admission"] == {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": "on-demand"}, "resourceUsage": {"cpu": "1500m"},
         "count": 1}]}
    assert conds(wl) == {
        "QuotaReserved": {"status": "True", "reason": "QuotaReserved", "observedGeneration": 1,
                          "message": "Quota reserved in ClusterQueue cq",
                          "lastTransitionTime": T0},
        "Admitted": {"status": "True", "reason": "Admitted", "observedGeneration": 1,
                     "message": "The workload is admitted", "lastTransitionTime": T0}}
    assert managers(wl)[c.ADMISSION_NAME] == {"admission", "conditions"}
    assert events.events == [
        ("Normal", "QuotaReserved",
         "Quota reserved in ClusterQueue cq, wait time since queued was 0s"),
        ("Normal", "Admitted", "Admitted by ClusterQueue cq, wait time since reservation was 0s")]
    assert await kq.usage("cq") == {"on-demand": {"cpu": "1500m"}}


async def test_second_flavor_taken_when_first_is_full_and_taints_checked(
        kq: KueueStandIn, api: InMemoryClient, events: EventCollector) -> None:
    await api.create(workload("a", cpu="2"))
    await api.create(workload("b", cpu="1"))   # does not tolerate spot's taint
    await api.create(tolerating("c", cpu="1"))
    result = await kq.schedule()
    assert result.admitted == ("default/a", "default/c")
    message = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu "
               "in flavor on-demand, 1 more needed, untolerated taint "
               "&Taint{Key:spot,Value:true,Effect:NoSchedule,TimeAdded:<nil>,} in flavor spot")
    assert result.pending == {"default/b": message}
    c_wl = await kq.workload("c")
    assert c_wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "spot"}
    b_wl = await kq.workload("b")
    assert conds(b_wl)["QuotaReserved"] == {
        "status": "False", "reason": "Pending", "message": message, "observedGeneration": 1,
        "lastTransitionTime": T0}
    assert b_wl["status"]["resourceRequests"] == [{"name": "main", "resources": {"cpu": "1"}}]
    assert "Admitted" not in conds(b_wl), "v0.19.2 keeps Admitted absent until reserved"
    assert ("Warning", "Pending", message) in events.events
    assert ("Normal", "QuotaReserved", "Quota reserved in ClusterQueue cq, wait time since "
            "queued was 0s; Flavors considered: main: on-demand(NoFit;insufficient unused "
            "quota for cpu in flavor on-demand, 1 more needed)") in events.events
    assert await kq.usage("cq") == {"on-demand": {"cpu": "2"}, "spot": {"cpu": "1"}}


async def test_exceeding_every_flavor_and_missing_queue(
        kq: KueueStandIn, api: InMemoryClient) -> None:
    await api.create(tolerating("huge", cpu="3"))
    await api.create(workload("lost", queue="nope"))
    result = await kq.schedule()
    assert result.pending["default/huge"] == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
        "on-demand, previously considered podsets requests (0) + current podset request (3) "
        "> maximum capacity (2), insufficient quota for cpu in flavor spot, previously "
        "considered podsets requests (0) + current podset request (3) > maximum capacity (2)")
    lost = conds(await kq.workload("lost"))["QuotaReserved"]
    assert (lost["status"], lost["reason"], lost["message"]) == (
        "False", "Inadmissible", "LocalQueue nope doesn't exist")


async def test_fifo_by_priority_then_creation_and_strict_fifo(
        kq: KueueStandIn, api: InMemoryClient, clock: ManualClock) -> None:
    await kq.cluster_queue("strict", {"on-demand": {"cpu": "2"}},
                           queueing_strategy="StrictFIFO")
    await kq.local_queue("slq", "strict")
    for name, cpu, prio in (("old", "2", 0), ("new", "2", 0), ("urgent", "2", 5)):
        await api.create(workload(name, cpu=cpu, priority=prio))
        await api.create(workload(f"s-{name}", cpu="3" if name == "old" else "1",
                                  queue="slq", priority=0))
        clock.advance(1)
    result = await kq.schedule()
    # cq: urgent first (priority), then old (older) on spot... but spot needs a toleration.
    assert result.admitted == ("default/urgent",)
    assert set(result.pending) == {"default/old", "default/new", "default/s-old"}, \
        "StrictFIFO: s-new and s-urgent wait behind s-old that can never fit"
    await kq.finish("urgent")
    assert (await kq.schedule()).admitted == ("default/old",)


async def test_inadmissible_list_is_not_looked_at_until_quota_is_freed(
        kq: KueueStandIn, api: InMemoryClient, clock: ManualClock) -> None:
    # BestEffortFIFO, as real Kueue (tests/integration/test_standin_agreement.py): "b"
    # stays in the inadmissible list while "c" is admitted past it, so its message is
    # the one of the pass that found it did not fit.
    await api.create(tolerating("a", cpu="2"))
    await api.create(tolerating("a2", cpu="1"))
    assert (await kq.schedule()).admitted == ("default/a", "default/a2")
    clock.advance(1)
    await api.create(tolerating("b", cpu="2"))
    assert (await kq.schedule()).pending == {"default/b": (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
        "flavor on-demand, 2 more needed, insufficient unused quota for cpu in flavor spot, "
        "1 more needed")}
    first = conds(await kq.workload("b"))["QuotaReserved"]["message"]
    clock.advance(1)
    await api.create(tolerating("c", cpu="1"))
    result = await kq.schedule()
    assert result.admitted == ("default/c",) and result.pending == {}
    assert conds(await kq.workload("b"))["QuotaReserved"]["message"] == first
    assert (await kq.schedule()).pending == {}, "not looked at without a release"
    # Quota released in the ClusterQueue: "b" is looked at again (and now fits).
    await api.delete(WORKLOAD_GVK, "a", namespace="default")
    assert (await kq.schedule()).admitted == ("default/b",)


async def test_preemption_of_the_lowest_priority_then_admission(
        kq: KueueStandIn, api: InMemoryClient, events: EventCollector,
        clock: ManualClock) -> None:
    await api.create(workload("low", cpu="1", priority=1))
    await api.create(workload("mid", cpu="1", priority=5))
    await kq.schedule()
    clock.advance(10)
    high = await api.create(workload("high", cpu="1", priority=10))
    result = await kq.schedule()
    assert result.admitted == () and result.preempted == ("default/low",)
    assert result.pending == {}, "the preemptor waits without a status update"
    low = await kq.workload("low")
    message = (f"Preempted to accommodate a workload (UID: {high['metadata']['uid']}, "
               "JobUID: UNKNOWN) due to prioritization in the ClusterQueue; preemptor path: "
               "/cq; preemptee path: /cq")
    at = "2026-01-01T00:00:10Z"
    assert conds(low) == {
        "QuotaReserved": {"status": "True", "reason": "QuotaReserved", "observedGeneration": 1,
                          "message": "Quota reserved in ClusterQueue cq",
                          "lastTransitionTime": T0},
        "Admitted": {"status": "True", "reason": "Admitted", "observedGeneration": 1,
                     "message": "The workload is admitted", "lastTransitionTime": T0},
        "Evicted": {"status": "True", "reason": "Preempted", "observedGeneration": 1,
                    "message": message, "lastTransitionTime": at},
        "Preempted": {"status": "True", "reason": "InClusterQueue", "message": message,
                      "lastTransitionTime": at}}
    assert low["status"]["admission"]["clusterQueue"] == "cq", "kept until released"
    assert low["status"]["schedulingStats"] == {
        "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    assert ("Normal", "EvictedDueToPreempted", message) in events.events
    assert ("Normal", "PreemptedWorkload",
            f"Preempted workload default/low (UID: {low['metadata']['uid']}) in ClusterQueue "
            "cq; preemptor effective priority: 10 (base: 10, boost: 0); preemptee effective "
            "priority: 1 (base: 1, boost: 0)") in events.events
    # The preemptor is not admitted while the target holds its quota.
    assert (await kq.schedule()).admitted == ()
    await kq.release("low")
    low = await kq.workload("low")
    assert "admission" not in low["status"]
    assert {t: (v["status"], v["reason"]) for t, v in conds(low).items()} == {
        "QuotaReserved": ("False", "Pending"), "Admitted": ("False", "NoReservation"),
        "Evicted": ("True", "Preempted"), "Preempted": ("True", "InClusterQueue"),
        "Requeued": ("True", "Preempted")}
    assert (await kq.schedule()).admitted == ("default/high",)
    high_wl = await kq.workload("high")
    assert high_wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "cpu": "on-demand"}


async def test_no_preemption_under_never_or_equal_priority(
        kq: KueueStandIn, api: InMemoryClient) -> None:
    await api.create(workload("a", cpu="2", priority=5))
    await kq.schedule()
    await api.create(workload("b", cpu="2", priority=5))
    result = await kq.schedule()
    assert result.preempted == ()
    assert result.pending["default/b"].endswith("in flavor on-demand, 2 more needed, "
                                                "untolerated taint &Taint{Key:spot,Value:true,"
                                                "Effect:NoSchedule,TimeAdded:<nil>,} in flavor "
                                                "spot")


async def test_evict_sends_the_whole_admission_status(kq: KueueStandIn,
                                                      api: InMemoryClient) -> None:
    await api.create(workload("a"))
    await kq.admit("a")
    await kq.evict("a", "NodeFailures", nodes=["n1", "n2"])
    wl = await kq.workload("a")
    assert set(conds(wl)) == {"QuotaReserved", "Admitted", "Evicted"}
    assert conds(wl)["Evicted"]["message"] == (
        "Workload was evicted as there was no replacement for unhealthy node(s): n1,n2")
    assert "admission" in wl["status"]
    # The pitfall the stand-in avoids: applying Evicted alone under kueue-admission.
    await api.apply({"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
                     "metadata": {"name": "a", "namespace": "default"},
                     "status": {"conditions": [dict(conds(wl)["Evicted"], type="Evicted")]}},
                    field_manager=c.ADMISSION_NAME, force=True, subresource="status")
    naive = await kq.workload("a")
    assert set(conds(naive)) == {"Evicted"} and "admission" not in naive["status"]
    with pytest.raises(ValueError, match="needs a message"):
        await kq.evict("a", "AdmissionCheck")


async def test_pods_ready_timeout_backoff_and_requeue(
        kq: KueueStandIn, api: InMemoryClient, clock: ManualClock,
        events: EventCollector) -> None:
    await api.create(workload("a"))
    await kq.schedule()
    clock.advance(5)
    await kq.evict("a", "PodsReadyTimeout")
    wl = await kq.workload("a")
    assert conds(wl)["Evicted"] == {
        "status": "True", "reason": "PodsReadyTimeout", "observedGeneration": 1,
        "message": "Exceeded the PodsReady timeout default/a",
        "lastTransitionTime": "2026-01-01T00:00:05Z"}
    assert wl["status"]["requeueState"] == {"count": 1, "requeueAt": "2026-01-01T00:01:05Z"}
    assert ("Normal", "EvictedDueToPodsReadyTimeout",
            "Exceeded the PodsReady timeout default/a") in events.events
    await kq.release("a")
    assert conds(await kq.workload("a"))["Requeued"]["status"] == "False"
    assert (await kq.schedule()).admitted == ()
    clock.advance(60)
    assert (await kq.schedule()).admitted == ("default/a",)
    wl = await kq.workload("a")
    assert conds(wl)["Requeued"]["reason"] == "BackoffFinished"
    assert conds(wl)["Evicted"]["reason"] == "QuotaReserved"
    assert wl["status"]["requeueState"] == {"count": 1}


async def test_deactivate_with_cause_and_reactivate(
        kq: KueueStandIn, api: InMemoryClient, events: EventCollector) -> None:
    await api.create(workload("a"))
    await kq.schedule()
    await kq.deactivate("a", cause="RequeuingLimitExceeded")
    wl = await kq.workload("a")
    assert wl["spec"]["active"] is False
    message = ("The workload is deactivated due to exceeding the maximum number of "
               "re-queuing retries")
    assert (conds(wl)["Evicted"]["reason"], conds(wl)["Evicted"]["message"]) == (
        "DeactivatedDueToRequeuingLimitExceeded", message)
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Deactivated", "underlyingCause": "RequeuingLimitExceeded", "count": 1}]
    assert ("Normal", "EvictedDueToDeactivatedDueToRequeuingLimitExceeded",
            message) in events.events
    assert await kq.usage("cq") == {}, "an inactive Workload holds no quota"
    await kq.release("a")
    # Kueue's workload controller requeues on reactivation only after a plain
    # deactivation (Requeued reason exactly Deactivated).
    await kq.activate("a")
    assert (conds(await kq.workload("a"))["Requeued"]["status"],
            conds(await kq.workload("a"))["Requeued"]["reason"]) == (
        "False", "DeactivatedDueToRequeuingLimitExceeded")
    await kq.deactivate("a")   # not admitted any more: no new eviction, no event
    await api.create(workload("b"))
    await kq.schedule()
    await kq.deactivate("b")
    b = await kq.workload("b")
    assert (conds(b)["Evicted"]["reason"], conds(b)["Evicted"]["message"]) == (
        "Deactivated", "The workload is deactivated")
    await kq.release("b")
    await kq.activate("b")
    assert conds(await kq.workload("b"))["Requeued"] == {
        "status": "True", "reason": "Reactivated", "message": "The workload was reactivated",
        "observedGeneration": 3, "lastTransitionTime": T0}
    assert (await kq.schedule()).admitted == ("default/b",)


async def test_finish_and_reclaim_release_quota(kq: KueueStandIn,
                                                api: InMemoryClient) -> None:
    await api.create(workload("big", cpu="500m", count=4))
    await api.create(workload("next", cpu="1"))
    result = await kq.schedule()
    assert result.admitted == ("default/big",)
    await kq.reclaim("big", {"main": 2})
    big = await kq.workload("big")
    assert big["status"]["reclaimablePods"] == [{"name": "main", "count": 2}]
    assert managers(big)[c.RECLAIMABLE_PODS_MANAGER] == {"reclaimablePods"}
    assert await kq.usage("cq") == {"on-demand": {"cpu": "1"}}
    assert (await kq.schedule()).admitted == ("default/next",)
    await kq.finish("big", success=False, message="boom")
    big = await kq.workload("big")
    assert conds(big)["Finished"] == {"status": "True", "reason": "Failed", "message": "boom",
                                      "observedGeneration": 1, "lastTransitionTime": T0}
    assert "admission" in big["status"] and conds(big)["Admitted"]["status"] == "True"
    assert await kq.usage("cq") == {"on-demand": {"cpu": "1"}}


async def test_explicit_admit(kq: KueueStandIn, api: InMemoryClient) -> None:
    await api.create(workload("a", cpu="2"))
    await api.create(workload("b", cpu="2"))
    await kq.admit("a")
    with pytest.raises(NotAdmissibleError, match="insufficient unused quota for cpu in "
                                                  "flavor on-demand, 2 more needed"):
        await kq.admit("b")
    await kq.admit("b", flavor="spot")
    assert (await kq.workload("b"))["status"]["admission"]["podSetAssignments"][0][
        "flavors"] == {"cpu": "spot"}
    assert [w["metadata"]["name"] for w in kq.server.objects(WORKLOAD_GVK, "default")] == [
        "a", "b"]


async def test_release_follows_the_version_profile(clock: ManualClock) -> None:
    k = KueueStandIn(APIServer(clock), version=c.KueueVersion.MAIN)
    await k.resource_flavor("f")
    await k.cluster_queue("cq", {"f": {"cpu": "1"}})
    await k.local_queue("lq", "cq")
    await k.server.client().create(workload("a"))
    await k.admit("a")
    await k.evict("a", "Preempted")
    await k.release("a")
    assert conds(await k.workload("a"))["QuotaReserved"]["reason"] == "PendingEvaluation"
