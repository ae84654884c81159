"""A JobFlow's children are held to what Kueue admitted (issue #27, items 2 and 3).

- A tenant with Job edit rights scales an admitted step's Job up: the controller sets its
  ``parallelism`` back to the count admitted for the step, with a Warning event, and the
  Workload keeps counting what it admitted.
- A tenant's own Job names an admitted JobFlow as its controller: Kueue's child rule never
  suspends it and creates no Workload for it, so the controller suspends it, with a
  Warning event, and never counts it.
"""

from __future__ import annotations

import copy
from typing import Any

from integrations.batchjob.job import BatchJob
from integrations.jobflow import JOB_GVK
from integrations.jobflow.api import FLOW_NAME_LABEL
from jobframework import constants as c
from jobframework.childguard import ADMITTED_SIZE_RESTORED_REASON, FOREIGN_JOB_SUSPENDED_REASON
from jobframework.runtime.objects import Object
from jobframework.runtime.reconcile import Request

from .helpers import Harness, flow, jobflow
from .test_kueue import WORKLOAD, Kueue, k, queued

__all__ = ["k"]  # the fixture, imported for pytest


async def admitted(h: Harness, k: Kueue, *flows: dict[str, Any]) -> None:
    """``wf`` queued, admitted in f1 and its ready steps created."""
    await h.api.create(queued("wf", list(flows)))
    await k.reconcile()
    await k.admit("f1")
    await k.reconcile()
    await h.reconcile("wf")


async def scale(h: Harness, name: str, parallelism: int, completions: int | None = None,
                ) -> Object:
    """What a tenant with Job edit rights does: change the Job's size."""
    job = await h.api.get(JOB_GVK, name, namespace="default")
    job["spec"]["parallelism"] = parallelism
    if completions is not None:
        job["spec"]["completions"] = completions
    return await h.api.update(job)


def warnings(h: Harness, reason: str) -> list[str]:
    return [m for t, r, m in h.recorder.events if t == "Warning" and r == reason]


def tenant_job(owner: Object, name: str = "tenant", parallelism: int = 100,
               **meta: Any) -> Object:
    """The tenant's own Job naming ``owner`` as its controller."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", **meta, "ownerReferences": [{
                "apiVersion": owner["apiVersion"], "kind": owner["kind"],
                "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                "controller": True}]},
            "spec": {"parallelism": parallelism, "completions": parallelism,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [
                         {"name": "main", "image": "busybox:1.36"}]}}}}


# --- item 2: resized children ------------------------------------------------------------------


async def test_scaled_step_is_set_back_to_its_admitted_parallelism(h: Harness,
                                                                   k: Kueue) -> None:
    await admitted(h, k, flow("a", parallelism=1), flow("b", "a"))
    await scale(h, "wf-a", 50)
    await h.reconcile("wf")
    job = (await h.jobs())["wf-a"]
    assert job["spec"]["parallelism"] == 1
    assert job["spec"]["suspend"] is False, "set back, not stopped"
    assert warnings(h, ADMITTED_SIZE_RESTORED_REASON) == [
        "Job wf-a was set to run 50 pods at once where 1 was admitted for flow a: "
        "parallelism set back to 1"]
    await k.reconcile()
    assert [(ps["name"], ps["count"]) for ps in (await k.workload())["spec"]["podSets"]] \
        == [("a", 1), ("b", 1)], "the Workload still counts what it admitted"
    await h.reconcile("wf")
    assert len(warnings(h, ADMITTED_SIZE_RESTORED_REASON)) == 1, "nothing more to set back"


async def test_elastic_indexed_step_runs_no_more_pods_at_once(h: Harness, k: Kueue) -> None:
    await admitted(h, k, flow("a", parallelism=2, completions=2, completionMode="Indexed"))
    await scale(h, "wf-a", 50, completions=50)
    await h.reconcile("wf")
    job = (await h.jobs())["wf-a"]
    # completions may change only together with parallelism: kept, the pods at once are 2.
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (2, 50)
    assert warnings(h, ADMITTED_SIZE_RESTORED_REASON) == [
        "Job wf-a was set to run 50 pods at once where 2 were admitted for flow a: "
        "parallelism set back to 2"]


async def test_a_smaller_step_is_left_as_it_is(h: Harness, k: Kueue) -> None:
    await admitted(h, k, flow("a", parallelism=3))
    await scale(h, "wf-a", 1)
    await h.reconcile("wf")
    assert (await h.jobs())["wf-a"]["spec"]["parallelism"] == 1
    assert warnings(h, ADMITTED_SIZE_RESTORED_REASON) == []


async def test_a_step_scaled_while_suspended_resumes_at_its_admitted_size(
        h: Harness, k: Kueue) -> None:
    await admitted(h, k, flow("a", parallelism=2))
    await k.evict()
    await k.reconcile()
    await h.reconcile("wf")
    assert (await h.jobs())["wf-a"]["spec"]["suspend"] is True
    await scale(h, "wf-a", 40)
    await k.apply_status({"conditions": [
        x for x in (await k.workload())["status"]["conditions"] if x["type"] != "Evicted"]})
    await k.admit("f2")
    await k.reconcile()
    await h.reconcile("wf")
    job = (await h.jobs())["wf-a"]
    assert (job["spec"]["suspend"], job["spec"]["parallelism"]) == (False, 2)
    assert len(warnings(h, ADMITTED_SIZE_RESTORED_REASON)) == 1


async def test_without_an_admission_nothing_is_held(h: Harness) -> None:
    # Not queued by Kueue: nothing was admitted, the size is the user's.
    await h.api.create(jobflow("wf", [flow("a", parallelism=1)]))
    await h.reconcile("wf")
    await scale(h, "wf-a", 5)
    await h.reconcile("wf")
    assert (await h.jobs())["wf-a"]["spec"]["parallelism"] == 5
    assert warnings(h, ADMITTED_SIZE_RESTORED_REASON) == []


# --- item 3: Jobs claiming the JobFlow -------------------------------------------------------


async def test_a_job_claiming_an_admitted_jobflow_is_suspended_and_not_counted(
        h: Harness, k: Kueue) -> None:
    await admitted(h, k, flow("a"), flow("b", "a"))
    wf = await h.get("wf")
    await h.api.create(tenant_job(wf))
    # Kueue's child rule: the admitted JobFlow is the Job's ancestor, so Kueue's Job
    # reconciler leaves it running and creates no Workload for it.
    await k.reconciler.reconcile_generic_job(Request.of("default", "tenant"), BatchJob())
    assert (await h.jobs())["tenant"]["spec"].get("suspend") is not True
    assert len((await h.api.list(WORKLOAD, namespace="default")).items) == 1

    await h.reconcile("wf")
    tenant = (await h.jobs())["tenant"]
    assert tenant["spec"]["suspend"] is True
    assert tenant["spec"]["parallelism"] == 100, "suspended, not resized"
    assert tenant["metadata"]["ownerReferences"][0]["uid"] == wf["metadata"]["uid"], \
        "its owner reference is its owner's to remove"
    message = ("Job tenant names JobFlow wf as its controller but was not created by it: "
               "suspended, so it does not run on the JobFlow's admitted quota")
    assert warnings(h, FOREIGN_JOB_SUSPENDED_REASON) == [message, message], \
        "one event on the JobFlow, one on the Job"
    status = (await h.get("wf"))["status"]
    assert set(status["jobStatusList"]) == {"wf-a/default"}
    assert [f["name"] for f in status["flows"]] == ["a", "b"]
    assert status["runningFlows"] == 1

    # Kueue's reconciler does not resume it: the admitted ancestor's rule only suspends.
    await k.reconciler.reconcile_generic_job(Request.of("default", "tenant"), BatchJob())
    assert (await h.jobs())["tenant"]["spec"]["suspend"] is True
    # Resumed by the tenant, suspended again on the next pass.
    job = (await h.jobs())["tenant"]
    job["spec"]["suspend"] = False
    await h.api.update(job)
    await h.reconcile("wf")
    assert (await h.jobs())["tenant"]["spec"]["suspend"] is True
    assert len(warnings(h, FOREIGN_JOB_SUSPENDED_REASON)) == 4
    # Already suspended: nothing more to say.
    await h.reconcile("wf")
    assert len(warnings(h, FOREIGN_JOB_SUSPENDED_REASON)) == 4


async def test_the_flows_own_jobs_are_not_foreign_whatever_their_labels(
        h: Harness, k: Kueue) -> None:
    await admitted(h, k, flow("a"))
    job = (await h.jobs())["wf-a"]
    job["metadata"]["labels"].pop(FLOW_NAME_LABEL)
    await h.api.update(job)
    await h.reconcile("wf")
    assert (await h.jobs())["wf-a"]["spec"]["suspend"] is False
    assert warnings(h, FOREIGN_JOB_SUSPENDED_REASON) == []


async def test_a_finished_claiming_job_is_left_alone(h: Harness, k: Kueue) -> None:
    await admitted(h, k, flow("a"))
    await h.api.create(tenant_job(await h.get("wf")))
    await h.complete("tenant")
    await h.reconcile("wf")
    assert (await h.jobs())["tenant"]["spec"].get("suspend") is not True
    assert warnings(h, FOREIGN_JOB_SUSPENDED_REASON) == []


async def test_every_job_claiming_a_jobflow_run_elsewhere_is_foreign(h: Harness) -> None:
    # Under MultiKueue the manager cluster's JobFlow has no local Job: even one named like
    # a flow's was not created here.
    wf = jobflow("wf", [flow("a")], managedBy=c.MULTIKUEUE_CONTROLLER_NAME, suspend=False)
    await h.api.create(wf)
    await h.api.create(tenant_job(await h.get("wf"), name="wf-a"))
    before = copy.deepcopy(await h.get("wf"))
    await h.reconcile("wf")
    assert (await h.jobs())["wf-a"]["spec"]["suspend"] is True
    assert len(warnings(h, FOREIGN_JOB_SUSPENDED_REASON)) == 2
    assert await h.get("wf") == before, "the JobFlow itself is still left alone"
