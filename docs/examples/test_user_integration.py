"""Testing your own integration with the jobframework's pytest plugin (no conftest.py).

``RenderJob`` (``render.example.org/v1``) renders frames with ``spec.workers`` pods while
``spec.suspend`` is false. Its adapter is a few lines; the test starts it under a manager
(``kueue_manager``), lets the stand-in Kueue (``kueue``) admit, preempt and evict its
Workloads, and checks what the RenderJob and its Workload look like, as Kueue's own
integration tests do. Run it with ``pytest docs/examples/test_user_integration.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from jobframework import constants as c
from jobframework.api import PodSet
from jobframework.interface import FinishedResult, GenericJob
from jobframework.podset import PodSetInfo, merge_into_template, restore_pod_spec
from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import EventCollector, InMemoryClient, KueueStandIn, ManualClock
from jobframework.testing.pytest_plugin import KueueManagerFactory, RunningIntegration

# Async tests run under pytest-asyncio in both its strict and auto modes.
pytestmark = pytest.mark.asyncio

RENDERJOB = GVK("render.example.org", "v1", "RenderJob")

RENDERJOB_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "renderjobs.render.example.org"},
    "spec": {"group": "render.example.org", "scope": "Namespaced",
             "names": {"plural": "renderjobs", "singular": "renderjob",
                       "kind": "RenderJob", "listKind": "RenderJobList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {
                                   "suspend": {"type": "boolean"},
                                   "workers": {"type": "integer", "minimum": 1},
                                   "template": {"type": "object",
                                                "x-kubernetes-preserve-unknown-fields": True}}},
                               "status": {"type": "object", "properties": {
                                   "running": {"type": "integer"},
                                   "phase": {"type": "string"}}}}}}}]}}


class RenderJob(GenericJob):
    """How Kueue sees a RenderJob: one pod set of ``workers`` pods."""

    def __init__(self, obj: Object | None = None) -> None:
        self.obj: Object = obj if obj is not None else {}

    def object(self) -> Object:
        return self.obj

    def gvk(self) -> GVK:
        return RENDERJOB

    def is_suspended(self) -> bool:
        return bool(self.obj.get("spec", {}).get("suspend"))

    def suspend(self) -> None:
        self.obj.setdefault("spec", {})["suspend"] = True

    def is_active(self) -> bool:
        return int((self.obj.get("status") or {}).get("running", 0)) > 0

    async def pod_sets(self, client: Client) -> list[PodSet]:
        spec = self.obj["spec"]
        return [PodSet(name="render", count=spec["workers"],
                       template=copy.deepcopy(spec["template"]))]

    async def run_with_pod_sets_info(self, client: Client,
                                     pod_sets_info: Sequence[PodSetInfo]) -> None:
        self.obj["spec"]["suspend"] = False
        merge_into_template(self.obj["spec"]["template"], pod_sets_info[0])

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        return restore_pod_spec(self.obj["spec"]["template"], pod_sets_info[0])

    def finished(self) -> FinishedResult:
        phase = (self.obj.get("status") or {}).get("phase")
        return FinishedResult(f"RenderJob {phase}", phase == "Succeeded",
                              phase in ("Succeeded", "Failed"))

    async def pods_ready(self, client: Client) -> bool:
        return self.is_active()


def renderjob(name: str, workers: int, cpu: str, priority_class: str = "") -> Object:
    """A RenderJob in LocalQueue ``user-queue``, created unsuspended: the webhook
    suspends it."""
    labels = {c.QUEUE_LABEL: "user-queue"}
    if priority_class:
        labels[c.WORKLOAD_PRIORITY_CLASS_LABEL] = priority_class
    return {"apiVersion": "render.example.org/v1", "kind": "RenderJob",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"workers": workers, "template": {"spec": {"containers": [
                {"name": "render", "image": "blender:4",
                 "resources": {"requests": {"cpu": cpu}}}]}}}}


def condition(obj: Object, type_: str) -> tuple[str, str, str]:
    """``(status, reason, message)`` of a condition (empty strings when absent)."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == type_:
            return (cond["status"], cond["reason"], cond["message"])
    return ("", "", "")


async def set_status(client: InMemoryClient, name: str, **status: Any) -> None:
    """Play the RenderJob's own controller: write its status."""
    job = await client.get(RENDERJOB, name, namespace="default")
    job["status"] = {**job.get("status", {}), **status}
    await client.update_status(job)


async def start(kueue: KueueStandIn, kueue_manager: KueueManagerFactory) -> RunningIntegration:
    """Two flavors of 2 cpus each, a ClusterQueue that preempts by priority, and the
    RenderJob integration running."""
    await kueue.resource_flavor("on-demand", node_labels={"instance-type": "on-demand"})
    await kueue.resource_flavor("spot", node_labels={"instance-type": "spot"})
    await kueue.cluster_queue("cq", {"on-demand": {"cpu": "2"}, "spot": {"cpu": "2"}},
                              preemption="LowerPriority")
    await kueue.local_queue("user-queue", "cq")
    await kueue.priority_class("low", 100)
    await kueue.priority_class("high", 1000)
    return await kueue_manager(RenderJob, crds=[RENDERJOB_CRD])


async def test_admitted_runs_on_the_flavor_and_finishes(
    kueue: KueueStandIn, kueue_manager: KueueManagerFactory, kueue_client: InMemoryClient,
    event_recorder: EventCollector, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO")
    run = await start(kueue, kueue_manager)
    created = await kueue_client.create(renderjob("frames", workers=2, cpu="1"))
    assert created["spec"]["suspend"] is True, "the webhook suspends queued jobs"
    await run.settle()
    wl = await kueue.workload_for(created)
    assert wl["spec"]["queueName"] == "user-queue"
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("render", 2)]

    result = await kueue.schedule()
    assert result.admitted == (f"default/{wl['metadata']['name']}",)
    await run.settle()
    job = await kueue_client.get(RENDERJOB, "frames", namespace="default")
    assert job["spec"]["suspend"] is False
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"instance-type": "on-demand"}
    assert ("Normal", "Started", "Admitted by clusterQueue cq") in event_recorder.events
    wl = await kueue.workload(wl)
    assert condition(wl, "Admitted") == ("True", "Admitted", "The workload is admitted")
    assert wl["status"]["admission"]["podSetAssignments"] == [
        {"name": "render", "flavors": {"cpu": "on-demand"}, "resourceUsage": {"cpu": "2"},
         "count": 2}]

    await set_status(kueue_client, "frames", running=0, phase="Succeeded")
    await run.settle()
    wl = await kueue.workload(wl)
    assert condition(wl, "Finished") == ("True", "Succeeded", "RenderJob Succeeded")
    assert c.RESOURCE_IN_USE_FINALIZER_NAME not in wl["metadata"].get("finalizers", [])
    assert await kueue.usage("cq") == {}, "a finished Workload holds no quota"
    # A normal lifecycle logs no error (a Workload created but not yet in the cache is
    # an info line and a quiet requeue).
    assert [r.getMessage() for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")] \
        == []


async def test_preempted_by_a_higher_priority_job_and_readmitted(
    kueue: KueueStandIn, kueue_manager: KueueManagerFactory, kueue_client: InMemoryClient,
    event_recorder: EventCollector,
) -> None:
    run = await start(kueue, kueue_manager)
    low = await kueue_client.create(renderjob("low", workers=2, cpu="1", priority_class="low"))
    await run.settle()
    await kueue.schedule()
    await run.settle()
    await set_status(kueue_client, "low", running=2)
    low_wl = await kueue.workload_for(low)
    assert low_wl["spec"]["priority"] == 100
    assert low_wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "cpu": "on-demand"}

    # A high-priority job takes spot; the next one fits nowhere, so it preempts the low one.
    filler = await kueue_client.create(renderjob("filler", workers=1, cpu="2",
                                                 priority_class="high"))
    await run.settle()
    high = await kueue_client.create(renderjob("high", workers=2, cpu="1",
                                               priority_class="high"))
    await run.settle()
    result = await kueue.schedule()
    filler_wl = await kueue.workload_for(filler)
    assert result.admitted == (f"default/{filler_wl['metadata']['name']}",)
    assert result.preempted == (f"default/{low_wl['metadata']['name']}",)
    await run.settle()
    job = await kueue_client.get(RENDERJOB, "low", namespace="default")
    assert job["spec"]["suspend"] is True
    assert "nodeSelector" not in job["spec"]["template"]["spec"], "template restored"
    await set_status(kueue_client, "low", running=0)   # its pods are gone
    await run.settle()
    low_wl = await kueue.workload(low_wl)
    assert condition(low_wl, "Evicted")[:2] == ("True", "Preempted")
    assert condition(low_wl, "Preempted")[:2] == ("True", "InClusterQueue")
    assert condition(low_wl, "QuotaReserved")[:2] == ("False", "Pending")
    assert condition(low_wl, "Requeued")[:2] == ("True", "Preempted")
    assert "admission" not in low_wl["status"]
    assert ("Normal", "Stopped") in [(t, r) for t, r, _ in event_recorder.events]

    await kueue.schedule()
    await run.settle()
    high_wl = await kueue.workload_for(high)
    assert condition(high_wl, "Admitted")[0] == "True"
    assert (await kueue_client.get(RENDERJOB, "high", namespace="default"))["spec"][
        "suspend"] is False

    await set_status(kueue_client, "high", phase="Succeeded")
    await run.settle()
    result = await kueue.schedule()
    assert result.admitted == (f"default/{low_wl['metadata']['name']}",)
    await run.settle()
    low_wl = await kueue.workload(low_wl)
    evicted = condition(low_wl, "Evicted")
    assert evicted[:2] == ("False", "QuotaReserved")
    assert evicted[2].startswith("Previously: Preempted to accommodate a workload (UID: ")
    assert condition(low_wl, "Preempted") == evicted
    assert (await kueue_client.get(RENDERJOB, "low", namespace="default"))["spec"][
        "suspend"] is False


async def test_evicted_after_the_pods_ready_timeout(
    kueue: KueueStandIn, kueue_manager: KueueManagerFactory, kueue_client: InMemoryClient,
    kueue_clock: ManualClock,
) -> None:
    run = await start(kueue, kueue_manager)
    job = await kueue_client.create(renderjob("slow", workers=1, cpu="1"))
    await run.settle()
    await kueue.schedule()
    await run.settle()
    wl = await kueue.workload_for(job)
    await kueue.evict(wl, "PodsReadyTimeout")
    await run.settle()
    wl = await kueue.workload(wl)
    name = wl["metadata"]["name"]
    assert condition(wl, "Evicted") == (
        "True", "PodsReadyTimeout", f"Exceeded the PodsReady timeout default/{name}")
    assert condition(wl, "Requeued")[:2] == ("False", "PodsReadyTimeout")
    assert wl["status"]["requeueState"]["count"] == 1
    assert (await kueue_client.get(RENDERJOB, "slow", namespace="default"))["spec"][
        "suspend"] is True
    assert (await kueue.schedule()).admitted == (), "backing off for 60 s"
    kueue_clock.advance(60)
    assert (await kueue.schedule()).admitted == (f"default/{name}",)
    wl = await kueue.workload(wl)
    assert condition(wl, "Requeued") == ("True", "BackoffFinished",
                                         "The workload backoff was finished")
