"""JobFlow under Kueue: the generic reconciler drives the Workload, the DAG controller the
Jobs; the test plays Kueue's scheduler (admission, eviction) and the Job controller."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.batchjob import CALLBACKS as BATCH_CALLBACKS
from integrations.jobflow import (
    CALLBACKS,
    FRAMEWORK_NAME,
    JOBFLOW_GVK,
    JobFlowJob,
    JobFlowKueueWebhook,
)
from integrations.jobflow.api import INJECTED_INFO_ANNOTATION, POD_SETS_INFO_ANNOTATION
from jobframework import constants as c
from jobframework.integrations import IntegrationManager
from jobframework.podset import InvalidPodsetInfoError, PodSetInfo
from jobframework.reconciler import JobReconciler, ReconcilerOptions
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.reconcile import Request
from jobframework.testing import APIServer

from .helpers import FakeRecorder, Harness, finish, flow, jobflow, jobtemplate

WORKLOAD = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")
FLAVOR = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "ResourceFlavor")
TS = "2026-01-01T00:00:00Z"


class Kueue:
    """The generic reconciler for JobFlows, and the scheduler's writes."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        server = h.server
        server.register_kind(WORKLOAD, "workloads", True)
        server.register_kind(FLAVOR, "resourceflavors", False, status_subresource=False)
        for kind, plural, namespaced in (("LocalQueue", "localqueues", True),
                                         ("ClusterQueue", "clusterqueues", False),
                                         ("WorkloadPriorityClass", "workloadpriorityclasses",
                                          False)):
            server.register_kind(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, kind), plural, namespaced,
                                 status_subresource=kind != "WorkloadPriorityClass")
        self.im = IntegrationManager()
        self.im.register_integration("batch/job", BATCH_CALLBACKS)
        self.im.enable_integration("batch/job")
        self.im.register_external_job_type(FRAMEWORK_NAME)
        self.recorder = FakeRecorder()
        self.reconciler = JobReconciler(h.api, self.recorder, ReconcilerOptions(
            clock=server.clock, integration_manager=self.im))

    async def reconcile(self, name: str = "wf") -> None:
        await self.reconciler.reconcile_generic_job(Request.of("default", name), JobFlowJob())

    async def flavor(self, name: str, zone: str) -> None:
        await self.h.api.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                                 "metadata": {"name": name},
                                 "spec": {"nodeLabels": {"zone": zone}, "tolerations": [
                                     {"key": "zone", "operator": "Equal", "value": zone,
                                      "effect": "NoSchedule"}]}})

    async def workload(self) -> Object:
        (wl,) = (await self.h.api.list(WORKLOAD, namespace="default")).items
        return wl

    async def apply_status(self, status: dict[str, Any]) -> None:
        wl = await self.workload()
        await self.h.api.apply({"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
                                "metadata": {"name": wl["metadata"]["name"],
                                             "namespace": "default"},
                                "status": status},
                               field_manager=c.ADMISSION_NAME, force=True,
                               subresource="status")

    async def admit(self, flavor: str) -> None:
        wl = await self.workload()
        assignments = [{"name": ps["name"], "flavors": {"cpu": flavor}, "count": ps["count"]}
                       for ps in wl["spec"]["podSets"]]
        await self.apply_status({
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": TS},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted", "lastTransitionTime": TS}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": assignments}})

    async def evict(self) -> None:
        wl = await self.workload()
        conds = [x for x in wl["status"]["conditions"] if x["type"] != "Evicted"]
        conds.append({"type": "Evicted", "status": "True", "reason": "Preempted",
                      "message": "Preempted to accommodate a higher priority Workload",
                      "lastTransitionTime": TS})
        await self.apply_status({"conditions": conds,
                                 "admission": wl["status"]["admission"]})


def conds(obj: Object) -> dict[str, tuple[str, str]]:
    return {x["type"]: (x["status"], x.get("reason", ""))
            for x in obj.get("status", {}).get("conditions", [])}


def queued(name: str, flows: list[dict[str, Any]], **spec: Any) -> Object:
    wf = jobflow(name, flows, suspend=True, **spec)
    wf["metadata"]["labels"] = {c.QUEUE_LABEL: "user-queue"}
    return wf


@pytest.fixture
async def k(h: Harness) -> Kueue:
    kq = Kueue(h)
    await kq.flavor("f1", "z1")
    await kq.flavor("f2", "z2")
    return kq


async def test_workload_has_one_pod_set_per_step(h: Harness, k: Kueue) -> None:
    await h.api.create(queued("wf", [flow("a", parallelism=3, completions=2),
                                     flow("b", "a", parallelism=4)],
                              globalParams={"env": [{"name": "FOO", "value": "bar"}]}))
    await k.reconcile()
    wl = await k.workload()
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("a", 2), ("b", 4)]
    tpl = wl["spec"]["podSets"][1]["template"]
    assert tpl["spec"]["containers"][0]["env"] == [{"name": "FOO", "value": "bar"}]
    assert tpl["spec"]["restartPolicy"] == "Never"
    assert tpl["metadata"]["labels"]["jobflow.api.practice.com/flow"] == "b"
    assert wl["spec"]["queueName"] == "user-queue"
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "JobFlow"
    await h.reconcile("wf")
    assert await h.jobs() == {}, "a queued flow creates no Job before admission"


async def test_admission_eviction_readmission_and_finish(h: Harness, k: Kueue) -> None:
    await h.api.create(queued("wf", [flow("a", parallelism=2), flow("b", "a"),
                                     flow("c", "a")]))
    await k.reconcile()
    await k.admit("f1")
    await k.reconcile()
    wf = await h.get("wf")
    assert wf["spec"]["suspend"] is False
    assert POD_SETS_INFO_ANNOTATION in wf["metadata"]["annotations"]
    assert ("Normal", "Started", "Admitted by clusterQueue cq") in k.recorder.events

    await h.reconcile("wf")
    job_a = (await h.jobs())["wf-a"]
    tpl = job_a["spec"]["template"]
    assert tpl["spec"]["nodeSelector"] == {"zone": "z1"}
    assert tpl["metadata"]["labels"][c.PODSET_LABEL] == "a"
    assert c.QUEUE_LABEL not in job_a["metadata"].get("labels", {}), "not queued twice"
    # Kueue's ancestor walk (as its batch/job reconciler does) finds the queued JobFlow.
    ancestor = await k.im.find_ancestor_job_managed_by_kueue(h.api, job_a, False)
    assert ancestor is not None and ancestor["kind"] == "JobFlow"

    await h.complete("wf-a")
    await h.reconcile("wf")
    jobs = await h.jobs()
    for name, podset in (("wf-b", "b"), ("wf-c", "c")):
        t = jobs[name]["spec"]["template"]
        assert t["spec"]["nodeSelector"] == {"zone": "z1"}, "later steps get the admission"
        assert t["metadata"]["labels"][c.PODSET_LABEL] == podset
    # wf-b has started: the API server now forbids template changes until it is suspended
    # and its startTime cleared (as kube-apiserver's Job validation does).
    await h.set_job_status("wf-b", {"active": 1, "startTime": "2026-01-01T00:00:00Z"})
    await h.reconcile("wf")
    await k.reconcile()
    wl = await k.workload()
    assert wl["status"]["reclaimablePods"] == [{"name": "a", "count": 2}]

    # Preemption: the flow is suspended, its running Jobs stop and lose the injection.
    await k.evict()
    await k.reconcile()
    wf = await h.get("wf")
    assert wf["spec"]["suspend"] is True
    assert POD_SETS_INFO_ANNOTATION not in wf["metadata"].get("annotations", {})
    await h.reconcile("wf")
    jobs = await h.jobs()
    assert "startTime" not in jobs["wf-b"].get("status", {}), "cleared before the restore"
    for name in ("wf-b", "wf-c"):
        assert jobs[name]["spec"]["suspend"] is True
        assert "nodeSelector" not in jobs[name]["spec"]["template"]["spec"]
        assert INJECTED_INFO_ANNOTATION not in jobs[name]["metadata"].get("annotations", {})
    assert jobs["wf-a"]["status"]["conditions"][-1]["type"] == "Complete", "a is kept"
    await h.set_job_status("wf-b", {"active": 0})   # the Job controller removed the pods
    await h.reconcile("wf")
    await k.reconcile()
    assert conds(await k.workload())["QuotaReserved"][0] == "False", "quota released"

    # Re-admitted elsewhere: the stopped steps resume there; the completed one is not rerun.
    await k.apply_status({"conditions": [
        x for x in (await k.workload())["status"]["conditions"] if x["type"] != "Evicted"]})
    await k.admit("f2")
    await k.reconcile()
    assert (await h.get("wf"))["spec"]["suspend"] is False
    await h.reconcile("wf")
    jobs = await h.jobs()
    for name in ("wf-b", "wf-c"):
        assert jobs[name]["spec"]["suspend"] is False
        assert jobs[name]["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "z2"}
    assert "nodeSelector" in jobs["wf-a"]["spec"]["template"]["spec"]
    assert jobs["wf-a"]["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "z1"}

    await h.complete("wf-b")
    await h.complete("wf-c")
    await h.reconcile("wf")
    await k.reconcile()
    finished = conds(await k.workload())["Finished"]
    assert finished == ("True", "Succeeded")


async def test_failed_step_finishes_the_workload_as_failed(h: Harness, k: Kueue) -> None:
    await h.api.create(queued("wf", [flow("a"), flow("b", "a")]))
    await k.reconcile()
    await k.admit("f1")
    await k.reconcile()
    await h.reconcile("wf")
    await h.fail("wf-a", reason="BackoffLimitExceeded", message="boom")
    await h.reconcile("wf")
    await k.reconcile()
    wl = await k.workload()
    finished = next(x for x in wl["status"]["conditions"] if x["type"] == "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "Failed")
    assert finished["message"] == "flow a (Job wf-a) failed: BackoffLimitExceeded: boom"


async def test_adapter_contract(h: Harness) -> None:
    wf = await h.api.create(jobflow("wf", [flow("a", parallelism=2), flow("b", "a")],
                                    suspend=True))
    job = JobFlowJob(wf)
    assert job.gvk() == JOBFLOW_GVK and job.is_suspended()
    with pytest.raises(InvalidPodsetInfoError, match="expecting 2 podset, got 1"):
        await job.run_with_pod_sets_info(h.api, [PodSetInfo(name="a")])
    infos = [PodSetInfo(name="a", count=2, node_selector={"zone": "z"}),
             PodSetInfo(name="b", count=1)]
    await job.run_with_pod_sets_info(h.api, infos)
    assert not job.is_suspended()
    pod_sets = await job.pod_sets(h.api)
    assert pod_sets[0].template["spec"]["nodeSelector"] == {"zone": "z"}, \
        "while running, the PodSets carry the admission like a Job's template"
    assert job.restore_pod_sets_info(infos) and not job.restore_pod_sets_info(infos)
    job.suspend()
    assert "nodeSelector" not in (await job.pod_sets(h.api))[0].template["spec"]
    assert job.finished().finished is False
    # Status-driven answers.
    job.obj["status"] = {"state": "Running",
                         "jobStatusList": {"wf-a/default": {"active": 1}},
                         "flows": [{"name": "a", "phase": "Succeeded", "jobName": "wf-a"},
                                   {"name": "b", "phase": "Running", "jobName": "wf-b"}]}
    assert job.is_active()
    assert [(p.name, p.count) for p in await job.reclaimable_pods(h.api)] == [("a", 2)]
    job.obj["status"]["jobStatusList"] = {"wf-a/default": {"active": 0}}
    assert not job.is_active()


@pytest.mark.parametrize(("job_spec", "count"), [
    ({"parallelism": 4, "completions": 2}, 2),
    ({"parallelism": 2, "completions": 4}, 2),
    ({"parallelism": 3, "completions": 3}, 3),
    ({"parallelism": 4}, 4),
    ({"completions": 3}, 1),
], ids=["capped-by-completions", "parallelism-below-completions", "equal", "no-completions",
        "default-parallelism"])
@pytest.mark.parametrize("by_ref", [False, True], ids=["inline", "jobTemplateRef"])
async def test_reclaimable_pods_are_the_completed_steps_pod_set_count(
        h: Harness, job_spec: dict[str, Any], count: int, by_ref: bool) -> None:
    """A completed step gives back its whole PodSet: parallelism (default 1) capped by
    completions, the count the Workload reserved for it (inline or from a JobTemplate)."""
    if by_ref:
        await h.api.create(jobtemplate("tpl", **job_spec))
    step = flow("a", ref="tpl") if by_ref else flow("a", **job_spec)
    wf = await h.api.create(jobflow("wf", [step, flow("b", "a")], suspend=True))
    job = JobFlowJob(wf)
    assert [(p.name, p.count) for p in await job.pod_sets(h.api)] == [("a", count), ("b", 1)]
    job.obj["status"] = {"flows": [{"name": "a", "phase": "Succeeded", "jobName": "wf-a"},
                                   {"name": "b", "phase": "Running", "jobName": "wf-b"}]}
    assert [(p.name, p.count) for p in await job.reclaimable_pods(h.api)] == [("a", count)]


async def test_pods_ready_from_children(h: Harness) -> None:
    await h.api.create(jobflow("wf", [flow("a", parallelism=2), flow("b")]))
    await h.reconcile("wf")
    job = JobFlowJob(await h.get("wf"))
    assert not await job.pods_ready(h.api)
    await h.set_job_status("wf-a", {"ready": 2})
    assert not await job.pods_ready(h.api), "b is not ready"
    await h.set_job_status("wf-b", {"ready": 1})
    assert await job.pods_ready(h.api)
    await h.api.update_status(finish(await h.api.get(GVK("batch", "v1", "Job"), "wf-a",
                                                     namespace="default")))
    assert await job.pods_ready(h.api), "a completed step counts as ready"


async def test_pods_ready_between_steps(h: Harness) -> None:
    await h.api.create(jobflow("wf", [flow("a"), flow("b", "a")]))
    job = JobFlowJob(await h.get("wf"))
    assert not await job.pods_ready(h.api), "nothing started yet"
    await h.reconcile("wf")
    assert not await job.pods_ready(h.api), "a's pod is not ready"
    await h.complete("wf-a")
    assert await job.pods_ready(h.api), "a done, b not created yet: nothing is waiting"
    await h.reconcile("wf")
    assert not await job.pods_ready(h.api), "b's pod is starting"


async def test_kueue_webhook_defaults_suspend_and_validates(server: APIServer) -> None:
    im = IntegrationManager()
    im.register_external_job_type(FRAMEWORK_NAME)
    hook = JobFlowKueueWebhook(server.client(), integration_manager=im)
    wf = queued("wf", [flow("a")])
    wf["spec"]["suspend"] = False
    await hook.default(wf)
    assert wf["spec"]["suspend"] is True
    bad = queued("wf", [flow("a", "a")])
    with pytest.raises(Exception, match="dependency cycle: a -> a"):
        await hook.validate_create(bad)
    assert CALLBACKS.get_gvk() == JOBFLOW_GVK
