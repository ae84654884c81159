"""A DaemonJob's node Jobs are held to what Kueue admitted (issue #27, items 2 and 3).

- A tenant with Job edit rights scales an admitted node Job up: the controller sets its
  ``parallelism`` back to one node's share of the admitted PodSet, with a Warning event.
- A tenant's own Job names an admitted DaemonJob as its controller: the controller
  suspends it, with a Warning event, and never counts it (not even when it carries a
  node's annotation).
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.jobflow.test_children_held import scale, tenant_job, warnings

from integrations.batchjob.job import BatchJob
from integrations.daemonjob import DaemonJobJob
from integrations.daemonjob.api import DAEMONJOB_NAME_LABEL, NODE_ANNOTATION
from jobframework.childguard import ADMITTED_SIZE_RESTORED_REASON, FOREIGN_JOB_SUSPENDED_REASON
from jobframework.runtime.objects import Object
from jobframework.runtime.reconcile import Request

from .helpers import WORKLOAD, Harness, Kueue, queued

ON_DEMAND = {"instance-type": "on-demand"}


@pytest.fixture
async def k(h: Harness) -> Kueue:
    kq = Kueue(h)
    await kq.flavor("on-demand", "on-demand")
    return kq


async def started(h: Harness, k: Kueue, **spec: Any) -> None:
    """Two on-demand nodes; a queued DaemonJob admitted, its node Jobs created."""
    await h.add_nodes("od1", "od2", **ON_DEMAND)
    await h.api.create(queued(**spec))
    await h.reconcile()
    await k.reconcile()
    await k.admit("on-demand")
    await k.reconcile()
    await h.reconcile()
    assert set(await h.jobs()) == {"dj-od1", "dj-od2"}


def claiming(dj: Object, name: str, node: str | None = None, **labels: str) -> Object:
    """The tenant's Job naming ``dj`` as its controller (with a node's annotation)."""
    meta: dict[str, Any] = {}
    if node is not None:
        meta["annotations"] = {NODE_ANNOTATION: node}
    if labels:
        meta["labels"] = dict(labels)
    return tenant_job(dj, name=name, **meta)


# --- item 2: resized node Jobs ------------------------------------------------------------------


async def test_scaled_node_job_is_set_back_to_its_share_of_the_admission(
        h: Harness, k: Kueue) -> None:
    await started(h, k, parallelism=2)
    count = (await k.workload())["spec"]["podSets"][0]["count"]
    await scale(h, "dj-od1", 50)
    await h.reconcile()
    jobs = await h.jobs()
    assert jobs["dj-od1"]["spec"]["parallelism"] == 2
    assert jobs["dj-od2"]["spec"]["parallelism"] == 2
    assert warnings(h, ADMITTED_SIZE_RESTORED_REASON) == [
        "Job dj-od1 was set to run 50 pods at once where 2 were admitted for node od1: "
        "parallelism set back to 2"]
    await k.reconcile()
    assert (await k.workload())["spec"]["podSets"][0]["count"] == count == 4


async def test_a_node_job_scaled_while_suspended_resumes_at_its_share(
        h: Harness, k: Kueue) -> None:
    await started(h, k, parallelism=1)
    # A work-queue Job (no completions): its parallelism is the pods it runs at once.
    assert (await h.jobs())["dj-od2"]["spec"].get("completions") is None
    await k.evict()
    await k.reconcile()
    await h.reconcile()
    assert (await h.jobs())["dj-od2"]["spec"]["suspend"] is True
    await scale(h, "dj-od2", 10)
    await k.readmit("on-demand")
    await k.reconcile()
    await h.reconcile()
    job = (await h.jobs())["dj-od2"]
    assert (job["spec"]["suspend"], job["spec"]["parallelism"]) == (False, 1)
    assert len(warnings(h, ADMITTED_SIZE_RESTORED_REASON)) == 1


# --- item 3: Jobs claiming the DaemonJob ------------------------------------------------------


async def test_a_job_claiming_an_admitted_daemonjob_is_suspended_and_not_counted(
        h: Harness, k: Kueue) -> None:
    await started(h, k)
    dj = await h.get()
    # With a node's annotation but not the node Job's name; with a node Job's name for a
    # node outside the run; with nothing at all.
    for job in (claiming(dj, "zzz", "od1"), claiming(dj, "dj-elsewhere", "elsewhere"),
                claiming(dj, "plain")):
        await h.api.create(job)
    await k.reconciler.reconcile_generic_job(Request.of("default", "plain"), BatchJob())
    assert (await h.jobs())["plain"]["spec"].get("suspend") is not True, \
        "Kueue's child rule lets it run on the DaemonJob's admission"
    assert len((await h.api.list(WORKLOAD, namespace="default")).items) == 1

    await h.reconcile()
    jobs = await h.jobs()
    for name in ("zzz", "dj-elsewhere", "plain"):
        assert jobs[name]["spec"]["suspend"] is True, name
    for name in ("dj-od1", "dj-od2"):
        assert jobs[name]["spec"]["suspend"] is False, name
    assert len(warnings(h, FOREIGN_JOB_SUSPENDED_REASON)) == 6
    status = (await h.get())["status"]
    assert set(status["jobStatusList"]) == {"dj-od1/default", "dj-od2/default"}
    assert {n["name"]: n["jobName"] for n in status["nodes"]} == {"od1": "dj-od1",
                                                                 "od2": "dj-od2"}
    assert status["running"] == 2


async def test_a_claiming_job_is_not_counted_as_ready_pods(h: Harness, k: Kueue) -> None:
    await started(h, k)
    for name in ("dj-od1", "dj-od2"):
        await h.set_job_status(name, {"active": 1, "ready": 1})
    dj = await h.get()
    # Labelled as a node Job's, running, none of its pods ready; the controller has not
    # suspended it yet.
    await h.api.create(claiming(dj, "zzz", "od1", **{DAEMONJOB_NAME_LABEL: "dj"}))
    assert await DaemonJobJob(dj).pods_ready(h.api)
