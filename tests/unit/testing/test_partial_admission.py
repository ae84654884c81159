"""Partial admission of a custom kind under the Kueue stand-in.

``SparkApp`` (a driver and ``executors`` executors, of which ``minExecutors`` suffice) is
what a user writes: its executors pod set has a ``minCount``. Admitted partially, it
starts with the admitted count (``PodSetInfo.count``); evicted, it gets its original
count back (the Workload's pod set count). The stand-in writes the admission as Kueue
does: ``podSetAssignments[].count`` and a ``resourceUsage`` for that many pods.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from jobframework import constants as c
from jobframework.api import PodSet
from jobframework.constants import FeatureGates
from jobframework.interface import FinishedResult, GenericJob
from jobframework.podset import PodSetInfo, merge_into_template, restore_pod_spec
from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import (
    APIServer,
    EventCollector,
    InMemoryClient,
    KueueStandIn,
    NotAdmissibleError,
)
from jobframework.testing.kueue import WORKLOAD_GVK
from jobframework.testing.pytest_plugin import KueueManagerFactory, RunningIntegration

SPARKAPP = GVK("analytics.example.com", "v1", "SparkApp")


class SparkApp(GenericJob):
    """One driver and ``spec.executors`` executors; ``spec.minExecutors`` are enough."""

    def __init__(self, obj: Object | None = None) -> None:
        self.obj: Object = obj if obj is not None else {}

    def object(self) -> Object:
        return self.obj

    def gvk(self) -> GVK:
        return SPARKAPP

    def is_suspended(self) -> bool:
        return bool(self.obj.get("spec", {}).get("suspend"))

    def suspend(self) -> None:
        self.obj.setdefault("spec", {})["suspend"] = True

    def is_active(self) -> bool:
        return int((self.obj.get("status") or {}).get("running", 0)) > 0

    async def pod_sets(self, client: Client) -> list[PodSet]:
        spec = self.obj["spec"]
        # The executors' count as it runs: while partially admitted, the admitted one,
        # which the reconciler compares with the admission's.
        executors = PodSet(name="executors", count=spec["executors"],
                           template=copy.deepcopy(spec["executor"]))
        if "minExecutors" in spec:  # left unset otherwise: no "minCount": null
            executors.min_count = spec["minExecutors"]
        return [PodSet(name="driver", count=1, template=copy.deepcopy(spec["driver"])),
                executors]

    async def run_with_pod_sets_info(self, client: Client,
                                     pod_sets_info: Sequence[PodSetInfo]) -> None:
        driver, executors = pod_sets_info
        spec = self.obj["spec"]
        spec["suspend"] = False
        merge_into_template(spec["driver"], driver)
        merge_into_template(spec["executor"], executors)
        spec["executors"] = executors.count          # the admitted count

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        driver, executors = pod_sets_info
        spec = self.obj["spec"]
        changed = restore_pod_spec(spec["driver"], driver)
        changed = restore_pod_spec(spec["executor"], executors) or changed
        if spec["executors"] != executors.count:     # the original count
            spec["executors"] = executors.count
            changed = True
        return changed

    def finished(self) -> FinishedResult:
        phase = (self.obj.get("status") or {}).get("phase")
        return FinishedResult(f"SparkApp {phase}", phase == "Succeeded",
                              phase in ("Succeeded", "Failed"))

    async def pods_ready(self, client: Client) -> bool:
        return self.is_active()


def pod(cpu: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "spark:4",
                                     "resources": {"requests": {"cpu": cpu}}}]}}


def sparkapp(name: str, executors: int = 5, min_executors: int | None = 2) -> Object:
    spec: dict[str, Any] = {"executors": executors, "driver": pod("1"), "executor": pod("1")}
    if min_executors is not None:
        spec["minExecutors"] = min_executors
    return {"apiVersion": "analytics.example.com/v1", "kind": "SparkApp",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {c.QUEUE_LABEL: "user-queue"}},
            "spec": spec}


async def start(kueue: KueueStandIn, kueue_manager: KueueManagerFactory,
                cpu: str = "4") -> RunningIntegration:
    kueue.server.register_kind(SPARKAPP, "sparkapps", True)
    await kueue.resource_flavor("on-demand", node_labels={"instance-type": "on-demand"})
    await kueue.cluster_queue("cq", {"on-demand": {"cpu": cpu}})
    await kueue.local_queue("user-queue", "cq")
    return await kueue_manager(SparkApp)


async def get(client: InMemoryClient, name: str) -> Object:
    return await client.get(SPARKAPP, name, namespace="default")


async def test_admitted_partially_it_starts_with_the_admitted_count_and_gets_its_own_back(
    kueue: KueueStandIn, kueue_manager: KueueManagerFactory, kueue_client: InMemoryClient,
    event_recorder: EventCollector,
) -> None:
    run = await start(kueue, kueue_manager, cpu="6")
    created = await kueue_client.create(sparkapp("etl"))
    await run.settle()
    wl = await kueue.workload_for(created)
    assert [(ps["name"], ps["count"], ps.get("minCount")) for ps in wl["spec"]["podSets"]] \
        == [("driver", 1, None), ("executors", 5, 2)]

    wl = await kueue.admit(wl, counts={"executors": 3})
    assert wl["status"]["admission"]["podSetAssignments"] == [
        {"name": "driver", "flavors": {"cpu": "on-demand"}, "resourceUsage": {"cpu": "1"},
         "count": 1},
        {"name": "executors", "flavors": {"cpu": "on-demand"}, "resourceUsage": {"cpu": "3"},
         "count": 3}]
    assert await kueue.usage("cq") == {"on-demand": {"cpu": "4"}}
    await run.settle()
    job = await get(kueue_client, "etl")
    assert job["spec"]["suspend"] is False
    assert job["spec"]["executors"] == 3, "started with the admitted count"
    assert job["spec"]["executor"]["spec"]["nodeSelector"] == {"instance-type": "on-demand"}
    assert ("Normal", "Started", "Admitted by clusterQueue cq") in event_recorder.events
    # The running job still matches its Workload (compared with the admitted counts),
    # which keeps the original count.
    after = await kueue.workload(wl)
    assert after["metadata"]["uid"] == wl["metadata"]["uid"]
    assert [ps["count"] for ps in after["spec"]["podSets"]] == [1, 5]
    assert [w["metadata"]["name"] for w in await kueue.workloads()] == [
        wl["metadata"]["name"]]

    await kueue.evict(wl, "Preempted")
    await run.settle()
    job = await get(kueue_client, "etl")
    assert job["spec"]["suspend"] is True
    assert job["spec"]["executors"] == 5, "the original count is restored"
    assert job["spec"]["executor"] == pod("1"), "the template is restored exactly"
    assert job["spec"]["driver"] == pod("1")
    after = await kueue.workload(wl)
    assert after["metadata"]["uid"] == wl["metadata"]["uid"], "the same Workload, requeued"
    assert "admission" not in after["status"]

    # Readmitted whole this time: it starts with all five.
    await kueue.admit(wl)
    await run.settle()
    assert (await get(kueue_client, "etl"))["spec"]["executors"] == 5


async def test_schedule_admits_the_largest_count_that_fits(
    kueue: KueueStandIn, kueue_manager: KueueManagerFactory, kueue_client: InMemoryClient,
) -> None:
    run = await start(kueue, kueue_manager, cpu="5")
    await kueue_client.create(sparkapp("first", executors=2, min_executors=None))
    await run.settle()
    await kueue.schedule()                          # 3 cpus used, 2 left
    await run.settle()
    second = await kueue_client.create(sparkapp("second", executors=5, min_executors=1))
    await run.settle()
    name = (await kueue.workload_for(second))["metadata"]["name"]
    assert (await kueue.schedule()).admitted == (f"default/{name}",)
    wl = await kueue.workload(name)
    assert [(a["name"], a["count"], a["resourceUsage"]) for a in
            wl["status"]["admission"]["podSetAssignments"]] == [
        ("driver", 1, {"cpu": "1"}), ("executors", 1, {"cpu": "1"})]
    await run.settle()
    assert (await get(kueue_client, "second"))["spec"]["executors"] == 1
    assert (await get(kueue_client, "first"))["spec"]["executors"] == 2
    first = await kueue.workload_for(await get(kueue_client, "first"))
    assert "minCount" not in first["spec"]["podSets"][1]


async def test_schedule_leaves_pending_what_does_not_fit_even_at_its_min_count(
    kueue: KueueStandIn, kueue_manager: KueueManagerFactory, kueue_client: InMemoryClient,
) -> None:
    run = await start(kueue, kueue_manager, cpu="2")
    created = await kueue_client.create(sparkapp("big", executors=4, min_executors=2))
    await run.settle()
    name = (await kueue.workload_for(created))["metadata"]["name"]
    result = await kueue.schedule()
    assert result.admitted == ()
    # Kueue reports why the whole Workload does not fit.
    assert result.pending[f"default/{name}"] == (
        "couldn't assign flavors to pod set executors: insufficient quota for cpu in flavor "
        "on-demand, previously considered podsets requests (1) + current podset request (4) "
        "> maximum capacity (2)")
    assert (await get(kueue_client, "big"))["spec"]["suspend"] is True


# --- admit(counts=...) validation, on Workloads written directly ---------------------------


def workload(name: str, *, min_count: int | None = 2) -> Object:
    executors: dict[str, Any] = {"name": "executors", "count": 5, "template": pod("1")}
    if min_count is not None:
        executors["minCount"] = min_count
    return {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"queueName": "lq", "podSets": [
                {"name": "driver", "count": 1, "template": pod("1")}, executors]}}


async def standin(features: FeatureGates | None = None) -> KueueStandIn:
    kueue = KueueStandIn(APIServer(), features=features)
    await kueue.resource_flavor("on-demand")
    await kueue.cluster_queue("cq", {"on-demand": {"cpu": "4"}})
    await kueue.local_queue("lq", "cq")
    await kueue.client.create(workload("wl"))
    return kueue


@pytest.mark.parametrize(("counts", "message"), [
    ({"workers": 3}, "counts: pod set 'workers' is not one of Workload default/wl's "
                     "('driver', 'executors')"),
    ({"driver": 0}, "counts: pod set 'driver' of Workload default/wl has no minCount, so it "
                    "is admitted whole (1 pods), not 0"),
    ({"executors": 1}, "counts: pod set 'executors' of Workload default/wl takes 2 to 5 pods "
                       "(minCount to count), not 1"),
    ({"executors": 6}, "counts: pod set 'executors' of Workload default/wl takes 2 to 5 pods "
                       "(minCount to count), not 6"),
], ids=["unknown pod set", "no minCount", "below minCount", "above count"])
async def test_counts_kueue_could_not_admit_are_refused(counts: dict[str, int],
                                                       message: str) -> None:
    kueue = await standin()
    with pytest.raises(ValueError) as info:
        await kueue.admit("wl", counts=counts)
    assert str(info.value) == message
    assert "admission" not in ((await kueue.workload("wl")).get("status") or {})


async def test_partial_counts_need_the_partial_admission_gate() -> None:
    kueue = await standin(FeatureGates(PartialAdmission=False))
    with pytest.raises(ValueError, match=r"'executors'.*PartialAdmission feature gate"):
        await kueue.admit("wl", counts={"executors": 3})
    # The whole count is no partial admission.
    wl = await kueue.admit("wl", "on-demand", counts={"executors": 5, "driver": 1})
    assert [a["count"] for a in wl["status"]["admission"]["podSetAssignments"]] == [1, 5]


async def test_admit_with_counts_checks_the_quota_for_those_counts() -> None:
    kueue = await standin()
    with pytest.raises(NotAdmissibleError, match=r"current podset request \(5\)"):
        await kueue.admit("wl")                     # 6 cpus do not fit in 4
    wl = await kueue.admit("wl", counts={"executors": 3})
    assert [(a["count"], a["resourceUsage"]) for a in
            wl["status"]["admission"]["podSetAssignments"]] == [
        (1, {"cpu": "1"}), (3, {"cpu": "3"})]
    assert await kueue.usage("cq") == {"on-demand": {"cpu": "4"}}


async def test_forced_flavor_with_counts() -> None:
    kueue = await standin()
    wl = await kueue.admit("wl", "on-demand", counts={"executors": 4})
    assert [(a["count"], a["resourceUsage"]) for a in
            wl["status"]["admission"]["podSetAssignments"]] == [
        (1, {"cpu": "1"}), (4, {"cpu": "4"})]
    assert (await kueue.server.client().get(WORKLOAD_GVK, "wl", namespace="default"))[
        "status"]["admission"]["podSetAssignments"][1]["count"] == 4


async def test_schedule_preempts_for_the_largest_count_that_fits_by_preempting() -> None:
    kueue = KueueStandIn(APIServer())
    await kueue.resource_flavor("on-demand")
    await kueue.cluster_queue("cq", {"on-demand": {"cpu": "4"}}, preemption="LowerPriority")
    await kueue.local_queue("lq", "cq")
    low = workload("low", min_count=None)
    low["spec"]["podSets"] = [{"name": "main", "count": 3, "template": pod("1")}]
    await kueue.client.create(low)
    assert (await kueue.schedule()).admitted == ("default/low",)
    high = workload("high")                          # 1 + 5 cpus: more than the queue has
    high["spec"]["priority"] = 100
    await kueue.client.create(high)
    result = await kueue.schedule()
    # Even 1 + 2 do not fit beside "low": it is preempted for the largest count that
    # fits once it is gone, 1 + 3.
    assert (result.admitted, result.preempted) == ((), ("default/low",))
    await kueue.release("low")                       # what its job reconciler does
    assert (await kueue.schedule()).admitted == ("default/high",)
    wl = await kueue.workload("high")
    assert [a["count"] for a in wl["status"]["admission"]["podSetAssignments"]] == [1, 3]
