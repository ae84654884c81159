"""An AppWrapper's components are held to what Kueue admitted (issue #27, items 2 and 3).

- A tenant scales a deployed component (a Job's parallelism, a Deployment's replicas):
  the controller sets it back to the count ``status.componentStatus`` froze, which the
  Workload counts, with a Warning event; a component whose count cannot be set back
  (a JobSet: replicas times a Job's pods) fails the AppWrapper, as a missing one does.
- A tenant's own Job names an admitted AppWrapper as its controller: the controller
  suspends it, with a Warning event, in any phase.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.appwrapper.api import APPWRAPPER_GVK, AppWrapperCondition, AppWrapperPhase
from integrations.appwrapper.controller import (
    OWNER_UID_INDEX,
    RESIZED_COMPONENT_REASON,
    AppWrapperReconciler,
    JobSpecChanged,
    owner_uid_values,
)
from jobframework.childguard import ADMITTED_SIZE_RESTORED_REASON, FOREIGN_JOB_SUSPENDED_REASON
from jobframework.runtime.errors import Conflict
from jobframework.runtime.event import CreateEvent, DeleteEvent, UpdateEvent
from jobframework.runtime.objects import GVK, Object

from .controller_helpers import (
    JOB_GVK,
    NS,
    Harness,
    appwrapper,
    harness_fixture,  # noqa: F401  (fixture "h")
    job,
    pod,
    pod_template,
    server_fixture,  # noqa: F401  (fixture "server")
)

DEPLOYMENT_GVK = GVK("apps", "v1", "Deployment")
JOBSET_GVK = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")


def deployment(name: str, replicas: int) -> dict[str, Any]:
    """A Deployment component (PodSet inferred: ``template.spec.template``)."""
    tpl = pod_template(name)
    return {"template": {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": tpl["spec"]}}}}


def jobset(name: str, replicas: int) -> dict[str, Any]:
    """A JobSet component: ``replicas`` Jobs of one pod each."""
    tpl = pod_template(name)
    return {"template": {
        "apiVersion": JOBSET_GVK.api_version, "kind": "JobSet", "metadata": {"name": name},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {
            "spec": {"parallelism": 1, "completions": 1,
                     "template": {"spec": tpl["spec"]}}}}]}}}


async def running(h: Harness, *components: dict[str, Any]) -> None:
    """``aw`` admitted and its components created (phase Running)."""
    await h.advance_to_resuming("aw", *components)
    await h.reconcile()
    assert await h.phase() == AppWrapperPhase.RUNNING


def warnings(h: Harness, reason: str) -> list[str]:
    return [m for t, r, _, m in h.events() if t == "Warning" and r == reason]


async def resize(h: Harness, gvk: GVK, name: str, **spec: Any) -> Object:
    """What a tenant with edit rights on the component does."""
    obj = await h.api.get(gvk, name, namespace=NS)
    obj["spec"].update(spec)
    return await h.api.update(obj)


def claiming(aw: Object, name: str = "tenant", parallelism: int = 100) -> Object:
    """The tenant's own Job naming ``aw`` as its controller."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": name, "namespace": NS, "ownerReferences": [{
            "apiVersion": aw["apiVersion"], "kind": aw["kind"], "name": aw["metadata"]["name"],
            "uid": aw["metadata"]["uid"], "controller": True}]},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": {
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox:1.36"}]}}}}


# --- item 2: resized components -----------------------------------------------------------------


async def test_scaled_job_component_is_set_back_to_its_admitted_count(h: Harness) -> None:
    await running(h, job("j", parallelism=2, completionMode="Indexed"))
    # An elastic Indexed Job: completions change together with parallelism.
    await resize(h, JOB_GVK, "j", parallelism=50, completions=50)
    await h.reconcile()
    j = await h.api.get(JOB_GVK, "j", namespace=NS)
    assert (j["spec"]["parallelism"], j["spec"]["completions"]) == (2, 50)
    assert warnings(h, ADMITTED_SIZE_RESTORED_REASON) == [
        "Job j (template.spec.template: 50 pods where 2 were admitted): set back to the "
        "admitted count"]
    assert await h.phase() == AppWrapperPhase.RUNNING
    pod_sets = (await h.get())["status"]["componentStatus"][0]["podSets"]
    assert [ps["replicas"] for ps in pod_sets] == [2], "what the Workload counts"
    await h.reconcile()
    assert len(warnings(h, ADMITTED_SIZE_RESTORED_REASON)) == 1


async def test_a_failed_set_back_is_retried_with_backoff_not_left_to_the_poll(
        h: Harness) -> None:
    """Found by the fault suite's hostile tenant: a Conflict (a stale cache, a fault)
    left the extra pods running until the next poll, a minute when healthy."""
    await running(h, job("j", parallelism=2, completionMode="Indexed"))
    await resize(h, JOB_GVK, "j", parallelism=50, completions=50)
    h.server.faults.fail("update", error=409, gvk=JOB_GVK, name="j")
    with pytest.raises(Conflict):
        await h.reconcile()  # the runtime requeues the request with backoff
    assert (await h.api.get(JOB_GVK, "j", namespace=NS))["spec"]["parallelism"] == 50
    await h.reconcile()
    assert (await h.api.get(JOB_GVK, "j", namespace=NS))["spec"]["parallelism"] == 2
    assert await h.phase() == AppWrapperPhase.RUNNING


async def test_scaled_deployment_is_set_back(h: Harness) -> None:
    await running(h, deployment("d", 2), pod("p"))
    await resize(h, DEPLOYMENT_GVK, "d", replicas=7)
    await h.reconcile()
    assert (await h.api.get(DEPLOYMENT_GVK, "d", namespace=NS))["spec"]["replicas"] == 2
    assert warnings(h, ADMITTED_SIZE_RESTORED_REASON) == [
        "Deployment d (template.spec.template: 7 pods where 2 were admitted): set back to "
        "the admitted count"]


async def test_a_smaller_component_is_left_as_it_is(h: Harness) -> None:
    await running(h, deployment("d", 3))
    await resize(h, DEPLOYMENT_GVK, "d", replicas=1)
    await h.reconcile()
    assert (await h.api.get(DEPLOYMENT_GVK, "d", namespace=NS))["spec"]["replicas"] == 1
    assert warnings(h, ADMITTED_SIZE_RESTORED_REASON) == []


async def test_a_component_that_cannot_be_set_back_fails_the_appwrapper(h: Harness) -> None:
    h.server.register_kind(JOBSET_GVK, "jobsets", True)
    await running(h, jobset("js", 2))
    await resize(h, JOBSET_GVK, "js", replicatedJobs=[
        {**(await h.api.get(JOBSET_GVK, "js", namespace=NS))["spec"]["replicatedJobs"][0],
         "replicas": 20}])
    await h.reconcile()
    assert await h.phase() == AppWrapperPhase.FAILED
    unhealthy = await h.cond(AppWrapperCondition.UNHEALTHY)
    detail = ("Components make more pods than admitted: JobSet js "
              "(template.spec.replicatedJobs[0].template.spec.template: 20 pods where 2 "
              "were admitted)")
    assert (unhealthy["status"], unhealthy["reason"], unhealthy["message"]) == (
        "True", RESIZED_COMPONENT_REASON, detail)
    assert ("Normal", RESIZED_COMPONENT_REASON, "Unhealthy", detail) in h.events()


# --- item 3: Jobs claiming the AppWrapper ----------------------------------------------------


async def test_a_job_claiming_an_admitted_appwrapper_is_suspended(h: Harness) -> None:
    await running(h, job("j"))
    aw = await h.get()
    await h.api.create(claiming(aw))
    await h.reconcile()
    tenant = await h.api.get(JOB_GVK, "tenant", namespace=NS)
    assert tenant["spec"]["suspend"] is True
    assert tenant["spec"]["parallelism"] == 100, "suspended, not resized"
    message = ("Job tenant names AppWrapper aw as its controller but was not created by it: "
               "suspended, so it does not run on the AppWrapper's admitted quota")
    assert warnings(h, FOREIGN_JOB_SUSPENDED_REASON) == [message, message]
    assert (await h.api.get(JOB_GVK, "j", namespace=NS))["spec"].get("suspend") is not True
    assert await h.phase() == AppWrapperPhase.RUNNING
    assert [cs["name"] for cs in (await h.get())["status"]["componentStatus"]] == ["j"]


async def test_a_failed_suspension_is_retried_with_backoff_after_the_phase(
        h: Harness) -> None:
    """Found by the fault suite's hostile tenant: a Conflict left the claiming Job
    running until the next poll. The pass still runs the AppWrapper's phase, then fails
    so that it is retried."""
    await h.create(appwrapper("aw", pod("p")))
    await h.api.create(claiming(await h.get()))
    h.server.faults.fail("update", error=409, gvk=JOB_GVK, name="tenant")
    with pytest.raises(Conflict):
        await h.reconcile()
    assert await h.phase() == AppWrapperPhase.SUSPENDED, "the phase went on"
    assert (await h.api.get(JOB_GVK, "tenant", namespace=NS))["spec"].get("suspend") \
        is not True
    await h.reconcile()
    assert (await h.api.get(JOB_GVK, "tenant", namespace=NS))["spec"]["suspend"] is True


async def test_a_claiming_job_is_suspended_in_any_phase(h: Harness) -> None:
    await h.create(appwrapper("aw", pod("p")))
    await h.reconcile()
    assert await h.phase() == AppWrapperPhase.SUSPENDED
    await h.api.create(claiming(await h.get()))
    await h.reconcile()
    assert (await h.api.get(JOB_GVK, "tenant", namespace=NS))["spec"]["suspend"] is True


async def test_a_component_the_cache_does_not_know_yet_is_not_foreign(h: Harness) -> None:
    await running(h, job("j"))
    stale = copy.deepcopy(await h.get())
    # The cache still shows the status from before the component was recorded.
    stale["status"]["componentStatus"][0]["name"] = ""
    await h.rec.suspend_foreign_jobs(stale)
    assert (await h.api.get(JOB_GVK, "j", namespace=NS))["spec"].get("suspend") is not True
    assert warnings(h, FOREIGN_JOB_SUSPENDED_REASON) == []


def test_jobs_map_to_their_appwrapper_and_are_indexed_by_its_uid() -> None:
    aw = appwrapper("aw", pod("p"))
    aw["metadata"]["uid"] = "u-1"
    tenant = claiming(aw)
    assert [(r.namespace, r.name) for r in AppWrapperReconciler.job_requests(tenant)] == [
        (NS, "aw")]
    assert owner_uid_values(tenant) == ["u-1"]
    other = copy.deepcopy(tenant)
    other["metadata"]["ownerReferences"][0]["apiVersion"] = "example.com/v1"
    assert AppWrapperReconciler.job_requests(other) == []
    assert owner_uid_values(other) == []
    assert OWNER_UID_INDEX == "workload.codeflare.dev/owner-uid"
    assert APPWRAPPER_GVK.kind == "AppWrapper"


def test_the_job_watch_passes_creations_and_size_or_suspension_changes() -> None:
    pred = JobSpecChanged()
    aw = appwrapper("aw", pod("p"))
    aw["metadata"]["uid"] = "u-1"
    job = claiming(aw)
    status_only = copy.deepcopy(job)
    status_only["status"] = {"active": 3}
    scaled = copy.deepcopy(job)
    scaled["spec"]["parallelism"] = 200
    resumed = copy.deepcopy(job)
    resumed["spec"]["suspend"] = False
    assert pred.create(CreateEvent(job))
    assert not pred.update(UpdateEvent(job, status_only))
    assert pred.update(UpdateEvent(job, scaled))
    assert pred.update(UpdateEvent(job, resumed))
    assert not pred.delete(DeleteEvent(job))
