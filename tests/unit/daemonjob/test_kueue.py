"""DaemonJob under Kueue: the generic reconciler drives the Workload, the DaemonJob
controller the node Jobs; the test plays Kueue's scheduler (admission into a flavor,
eviction) and the Job controller."""

from __future__ import annotations

import json

import pytest

from integrations.daemonjob import (
    CALLBACKS,
    DAEMONJOB_GVK,
    FRAMEWORK_NAME,
    JOB_GVK,
    DaemonJobJob,
)
from integrations.daemonjob.api import (
    DAEMONJOB_NAME_LABEL,
    INJECTED_INFO_ANNOTATION,
    NODE_LABEL,
    NODES_ANNOTATION,
    POD_SETS_INFO_ANNOTATION,
)
from integrations.daemonjob.job import NodesChangedError
from jobframework import constants as c
from jobframework.podset import InvalidPodsetInfoError, InvalidPodSetUpdateError, PodSetInfo
from jobframework.runtime.objects import Object

from .helpers import WORKLOAD, Harness, Kueue, cond, daemonjob, finish, phases, queued

ON_DEMAND = {"instance-type": "on-demand"}
SPOT = {"instance-type": "spot"}


@pytest.fixture
async def k(h: Harness) -> Kueue:
    kq = Kueue(h)
    await kq.flavor("on-demand", "on-demand")
    await kq.flavor("spot", "spot")
    return kq


async def workloads(h: Harness) -> list[Object]:
    return (await h.api.list(WORKLOAD, namespace="default")).items


def wl_conds(wl: Object) -> dict[str, tuple[str, str]]:
    return {x["type"]: (x["status"], x.get("reason", ""))
            for x in wl.get("status", {}).get("conditions", [])}


def reclaimable(wl: Object) -> list[dict[str, object]]:
    return list(wl.get("status", {}).get("reclaimablePods") or [])


async def started(h: Harness, k: Kueue, flavor: str = "on-demand", **spec: object) -> None:
    """Two on-demand nodes and one spot node; a queued DaemonJob admitted in ``flavor``,
    its node Jobs created."""
    await h.add_nodes("od1", "od2", **ON_DEMAND)
    await h.add_nodes("sp1", **SPOT)
    await h.api.create(queued(**spec))
    await h.reconcile()
    await k.reconcile()
    await k.admit(flavor)
    await k.reconcile()
    await h.reconcile()


# --- the Workload --------------------------------------------------------------------------


async def test_workload_counts_nodes_times_pods_per_node(h: Harness, k: Kueue) -> None:
    await h.add_nodes("n1", "n2", "n3")
    await h.api.create(queued(parallelism=2, globalParams={
        "env": [{"name": "FOO", "value": "bar"}], "labels": {"team": "a"}}))
    await k.reconcile()
    assert await workloads(h) == [], "skipped before the controller listed the nodes"
    await h.reconcile()
    assert await h.jobs() == {}, "a queued DaemonJob creates no Job before admission"
    assert NODES_ANNOTATION not in (await h.get())["metadata"].get("annotations", {}), \
        "the run is fixed by the admission, not before"
    await k.reconcile()
    wl = await k.workload()
    (ps,) = wl["spec"]["podSets"]
    assert (ps["name"], ps["count"]) == ("main", 6)
    tpl = ps["template"]
    assert tpl["spec"]["containers"][0]["env"] == [{"name": "FOO", "value": "bar"}]
    assert tpl["spec"]["restartPolicy"] == "Never"
    assert tpl["metadata"]["labels"] == {"team": "a", DAEMONJOB_NAME_LABEL: "dj"}
    assert "affinity" not in tpl["spec"], "the PodSet is not pinned to a node"
    assert NODE_LABEL not in tpl["metadata"]["labels"]
    assert wl["spec"]["queueName"] == "user-queue"
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("DaemonJob", "dj")


async def test_skipped_while_no_node_is_eligible(h: Harness, k: Kueue) -> None:
    await h.add_nodes("n1")
    await h.api.create(queued(excludeNodeList="n1"))
    await h.reconcile()
    dj = await h.get()
    assert dj["status"]["desired"] == 0
    await k.reconcile()
    assert await workloads(h) == [], "no Workload of count 0"
    assert DaemonJobJob(dj).skip()
    await h.add_nodes("n2")
    await h.reconcile()
    await k.reconcile()
    assert (await k.workload())["spec"]["podSets"][0]["count"] == 1


async def test_node_added_before_start_updates_the_workload(h: Harness, k: Kueue) -> None:
    await h.add_nodes("n1", "n2")
    await h.api.create(queued())
    await h.reconcile()
    await k.reconcile()
    wl = await k.workload()
    assert wl["spec"]["podSets"][0]["count"] == 2
    await h.add_nodes("n3")
    await h.reconcile()
    await k.reconcile()
    updated = await k.workload()
    assert updated["spec"]["podSets"][0]["count"] == 3
    assert updated["metadata"]["uid"] == wl["metadata"]["uid"], "updated in place"
    assert "UpdatedWorkload" in k.recorder.reasons()
    await k.admit("on-demand")
    await k.reconcile()
    dj = await h.get()
    assert json.loads(dj["metadata"]["annotations"][NODES_ANNOTATION]) == ["n1", "n2", "n3"]


# --- admission into a flavor ---------------------------------------------------------------


async def test_only_nodes_of_the_admitted_flavor_get_jobs(h: Harness, k: Kueue) -> None:
    await h.add_nodes("od1", "od2", **ON_DEMAND)
    await h.add_nodes("sp1", **SPOT)
    await h.api.create(queued(parallelism=2))
    await h.reconcile()
    await k.reconcile()
    assert (await k.workload())["spec"]["podSets"][0]["count"] == 6
    await k.admit("on-demand")
    await k.reconcile()
    dj = await h.get()
    assert dj["spec"]["suspend"] is False
    assert json.loads(dj["metadata"]["annotations"][NODES_ANNOTATION]) == ["od1", "od2", "sp1"]
    assert json.loads(dj["metadata"]["annotations"][POD_SETS_INFO_ANNOTATION])[0][
        "nodeSelector"] == ON_DEMAND
    assert ("Normal", "Started", "Admitted by clusterQueue cq") in k.recorder.events

    await h.reconcile()
    jobs = await h.jobs()
    assert set(jobs) == {"dj-od1", "dj-od2"}
    for name, n in (("dj-od1", "od1"), ("dj-od2", "od2")):
        pod = jobs[name]["spec"]["template"]
        assert pod["spec"]["nodeSelector"] == ON_DEMAND
        assert pod["spec"]["tolerations"] == [{"key": "instance-type", "operator": "Equal",
                                               "value": "on-demand", "effect": "NoSchedule"}]
        assert pod["metadata"]["labels"][c.PODSET_LABEL] == "main"
        assert pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]}]
        assert INJECTED_INFO_ANNOTATION in jobs[name]["metadata"]["annotations"]
        assert c.QUEUE_LABEL not in jobs[name]["metadata"].get("labels", {}), "not queued twice"
    dj = await h.get()
    assert phases(dj) == {"od1": "Running", "od2": "Running", "sp1": "OutsideFlavor"}
    sp1 = dj["status"]["nodes"][2]
    assert (sp1["reason"], sp1["message"]) == (
        "NotInAdmittedFlavor",
        "the node does not have the admitted flavor's labels (instance-type=on-demand)")
    # Kueue's ancestor walk (as its batch/job reconciler does) finds the queued DaemonJob.
    ancestor = await k.im.find_ancestor_job_managed_by_kueue(h.api, jobs["dj-od1"], False)
    assert ancestor is not None and ancestor["kind"] == "DaemonJob"

    # The pods of the spot node are given back, then those of each finished node.
    await k.reconcile()
    assert reclaimable(await k.workload()) == [{"name": "main", "count": 2}]
    await h.complete("dj-od1")
    await h.reconcile()
    await k.reconcile()
    assert reclaimable(await k.workload()) == [{"name": "main", "count": 4}]
    assert "Finished" not in wl_conds(await k.workload())
    await h.complete("dj-od2")
    await h.reconcile()
    dj = await h.get()
    assert dj["status"]["state"] == "Succeed"
    await k.reconcile()
    assert wl_conds(await k.workload())["Finished"] == ("True", "Succeeded")


async def test_eviction_suspends_and_readmission_resumes(h: Harness, k: Kueue) -> None:
    await started(h, k)
    jobs = await h.jobs()
    uids = {n: j["metadata"]["uid"] for n, j in jobs.items()}
    await h.complete("dj-od1")
    await h.set_job_status("dj-od2", {"active": 1, "startTime": "2026-01-01T00:00:00Z"})
    await h.reconcile()
    await k.reconcile()
    assert reclaimable(await k.workload()) == [{"name": "main", "count": 2}]

    # Preemption: the DaemonJob is suspended, its running Job stops and loses the injection.
    await k.evict()
    await k.reconcile()
    dj = await h.get()
    assert dj["spec"]["suspend"] is True
    assert POD_SETS_INFO_ANNOTATION not in dj["metadata"]["annotations"]
    assert json.loads(dj["metadata"]["annotations"][NODES_ANNOTATION]) == ["od1", "od2", "sp1"]
    await h.reconcile()
    jobs = await h.jobs()
    od2 = jobs["dj-od2"]
    assert od2["spec"]["suspend"] is True
    assert "startTime" not in od2["status"], "cleared before the restore"
    assert "nodeSelector" not in od2["spec"]["template"]["spec"]
    assert "tolerations" not in od2["spec"]["template"]["spec"]
    assert c.PODSET_LABEL not in od2["spec"]["template"]["metadata"]["labels"]
    assert INJECTED_INFO_ANNOTATION not in od2["metadata"].get("annotations", {})
    assert od2["spec"]["template"]["spec"]["affinity"]["nodeAffinity"] == \
        jobs["dj-od1"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"] | {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In",
                                  "values": ["od2"]}]}]}}, "the pinning stays"
    assert jobs["dj-od1"]["spec"]["suspend"] is False, "the finished Job is left alone"
    dj = await h.get()
    assert phases(dj) == {"od1": "Succeeded", "od2": "Suspended", "sp1": "Pending"}
    assert cond(dj, "Suspended")["status"] == "True"  # type: ignore[index]
    await h.set_job_status("dj-od2", {"active": 0})   # the Job controller removed the pods
    await h.reconcile()
    await k.reconcile()
    wl = await k.workload()
    assert wl_conds(wl)["QuotaReserved"][0] == "False", "quota released"
    await k.reconcile()
    assert reclaimable(await k.workload()) == [{"name": "main", "count": 1}], \
        "without quota, only the finished node's pod stays reclaimable"

    # Admitted again: the stopped Job resumes there; the completed node is not re-run.
    await k.readmit("on-demand")
    await k.reconcile()
    dj = await h.get()
    assert dj["spec"]["suspend"] is False
    await h.reconcile()
    jobs = await h.jobs()
    assert set(jobs) == {"dj-od1", "dj-od2"}
    assert {n: j["metadata"]["uid"] for n, j in jobs.items()} == uids, "same Jobs"
    assert jobs["dj-od2"]["spec"]["suspend"] is False
    assert jobs["dj-od2"]["spec"]["template"]["spec"]["nodeSelector"] == ON_DEMAND
    assert phases(await h.get()) == {"od1": "Succeeded", "od2": "Running",
                                     "sp1": "OutsideFlavor"}
    await h.complete("dj-od2")
    await h.reconcile()
    await k.reconcile()
    assert wl_conds(await k.workload())["Finished"] == ("True", "Succeeded")


async def test_readmission_into_the_other_flavor(h: Harness, k: Kueue) -> None:
    await started(h, k)
    await h.complete("dj-od1")
    await h.reconcile()
    await k.evict()
    await k.reconcile()
    await h.reconcile()
    await k.reconcile()
    await k.reconcile()
    await k.readmit("spot")
    await k.reconcile()
    await h.reconcile()
    jobs = await h.jobs()
    assert set(jobs) == {"dj-od1", "dj-od2", "dj-sp1"}
    sp1 = jobs["dj-sp1"]["spec"]["template"]["spec"]
    assert sp1["nodeSelector"] == SPOT
    assert sp1["tolerations"][0]["value"] == "spot"
    assert jobs["dj-od2"]["spec"]["suspend"] is True, "outside the new flavor: stays stopped"
    assert "nodeSelector" not in jobs["dj-od2"]["spec"]["template"]["spec"]
    dj = await h.get()
    assert phases(dj) == {"od1": "Succeeded", "od2": "OutsideFlavor", "sp1": "Running"}
    assert json.loads(dj["metadata"]["annotations"][NODES_ANNOTATION]) == ["od1", "od2", "sp1"]
    await k.reconcile()
    assert reclaimable(await k.workload()) == [{"name": "main", "count": 2}]
    await h.complete("dj-sp1")
    await h.reconcile()
    assert (await h.get())["status"]["state"] == "Succeed"


async def test_node_added_after_start_is_not_in_the_run(h: Harness, k: Kueue) -> None:
    await started(h, k)
    wl = await k.workload()
    await h.add_nodes("od3", **ON_DEMAND)
    await h.reconcile()
    await k.reconcile()
    assert set(await h.jobs()) == {"dj-od1", "dj-od2"}
    assert "od3" not in phases(await h.get())
    after = await k.workload()
    assert after["metadata"]["uid"] == wl["metadata"]["uid"]
    assert after["spec"]["podSets"][0]["count"] == 3
    assert wl_conds(after)["Admitted"][0] == "True", "the admission holds"


async def test_node_deleted_after_start(h: Harness, k: Kueue) -> None:
    await started(h, k)
    await h.delete_node("od2")
    await h.reconcile()
    await h.server.settle()
    assert set(await h.jobs()) == {"dj-od1"}
    dj = await h.get()
    assert phases(dj) == {"od1": "Running", "od2": "NodeDeleted", "sp1": "OutsideFlavor"}
    await k.reconcile()
    assert reclaimable(await k.workload()) == [{"name": "main", "count": 2}]
    await h.complete("dj-od1")
    await h.reconcile()
    assert (await h.get())["status"]["state"] == "Succeed", "the deleted node is not waited for"
    await k.reconcile()
    assert wl_conds(await k.workload())["Finished"] == ("True", "Succeeded")


async def test_failed_node_finishes_the_workload_as_failed(h: Harness, k: Kueue) -> None:
    await started(h, k)
    await h.fail("dj-od1", reason="BackoffLimitExceeded", message="boom")
    await h.reconcile()
    assert (await h.jobs())["dj-od2"]["spec"]["suspend"] is True
    await k.reconcile()
    wl = await k.workload()
    finished = next(x for x in wl["status"]["conditions"] if x["type"] == "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "Failed")
    assert finished["message"] == "node od1 (Job dj-od1) failed: BackoffLimitExceeded: boom"


# --- the adapter on its own ----------------------------------------------------------------


async def test_adapter_contract(h: Harness, k: Kueue) -> None:
    await h.add_nodes("n1", "n2")
    dj = await h.api.create(daemonjob(suspend=True, parallelism=2))
    job = DaemonJobJob(dj)
    assert job.gvk() == DAEMONJOB_GVK and job.is_suspended()
    assert job.run_nodes() is None and job.skip(), "before the controller's first pass"
    assert (await job.pod_sets(h.api))[0].count == 0
    await h.reconcile()
    job = DaemonJobJob(await h.get())
    assert job.run_nodes() == ["n1", "n2"] and not job.skip()
    with pytest.raises(InvalidPodsetInfoError, match="expecting 1 podset, got 2"):
        await job.run_with_pod_sets_info(h.api, [PodSetInfo(name="main", count=4),
                                                 PodSetInfo(name="x", count=1)])
    with pytest.raises(InvalidPodSetUpdateError):
        await job.run_with_pod_sets_info(h.api, [PodSetInfo(name="other", count=4)])
    with pytest.raises(NodesChangedError, match=r"admitted 2 pods but the run has 4 \(2 nodes\)"):
        await job.run_with_pod_sets_info(h.api, [PodSetInfo(name="main", count=2)])
    assert job.is_suspended() and NODES_ANNOTATION not in job.obj["metadata"].get(
        "annotations", {}), "a refused start changes nothing"
    info = PodSetInfo(name="main", count=4, node_selector={"zone": "z"})
    await job.run_with_pod_sets_info(h.api, [info])
    assert not job.is_suspended()
    assert json.loads(job.obj["metadata"]["annotations"][NODES_ANNOTATION]) == ["n1", "n2"]
    pod_sets = await job.pod_sets(h.api)
    assert pod_sets[0].template["spec"]["nodeSelector"] == {"zone": "z"}, \
        "while running, the PodSet carries the admission like a Job's template"
    assert job.restore_pod_sets_info([info]) and not job.restore_pod_sets_info([info])
    job.suspend()
    assert job.is_suspended()
    assert "nodeSelector" not in (await job.pod_sets(h.api))[0].template["spec"]
    assert NODES_ANNOTATION in job.obj["metadata"]["annotations"], "the run stays fixed"
    assert job.finished().finished is False
    # Status-driven answers.
    job.obj["status"] = {"state": "Running",
                         "jobStatusList": {"dj-n1/default": {"active": 1}},
                         "nodes": [{"name": "n1", "phase": "Succeeded"},
                                   {"name": "n2", "phase": "Running"}]}
    assert job.is_active()
    assert [(p.name, p.count) for p in await job.reclaimable_pods(h.api)] == [("main", 2)]
    job.obj["status"]["jobStatusList"] = {"dj-n1/default": {"active": 0}}
    assert not job.is_active()
    job.obj["status"].update(state="Failed", failedNode="n2", conditions=[
        {"type": "Failed", "status": "True", "message": "node n2 (Job dj-n2) failed"}])
    assert tuple(job.finished()) == ("node n2 (Job dj-n2) failed", False, True)
    job.obj["status"] = {"state": "Succeed", "succeeded": 2}
    assert tuple(job.finished()) == ("the Jobs of all 2 nodes completed", True, True)


async def test_conflicting_admission_is_refused(h: Harness) -> None:
    await h.add_nodes("n1")
    await h.api.create(daemonjob(suspend=True, pod={"nodeSelector": {"zone": "a"}}))
    await h.add_nodes("n2", zone="a")
    await h.reconcile()
    job = DaemonJobJob(await h.get())
    with pytest.raises(InvalidPodSetUpdateError):
        await job.run_with_pod_sets_info(h.api, [PodSetInfo(name="main", count=1,
                                                            node_selector={"zone": "b"})])
    assert job.is_suspended()


async def test_pods_ready_from_children(h: Harness) -> None:
    await h.add_nodes("n1", "n2")
    await h.api.create(daemonjob(parallelism=2))
    job = DaemonJobJob(await h.get())
    assert not await job.pods_ready(h.api), "nothing started yet"
    await h.reconcile()
    job = DaemonJobJob(await h.get())
    assert not await job.pods_ready(h.api)
    await h.set_job_status("dj-n1", {"ready": 2})
    assert not await job.pods_ready(h.api), "n2 is not ready"
    await h.set_job_status("dj-n2", {"ready": 1, "succeeded": 1})
    assert await job.pods_ready(h.api)
    await h.api.update_status(finish(await h.api.get(JOB_GVK, "dj-n1", namespace="default")))
    assert await job.pods_ready(h.api), "a completed node counts as ready"


def test_callbacks() -> None:
    assert CALLBACKS.get_gvk() == DAEMONJOB_GVK
    assert FRAMEWORK_NAME == "DaemonJob.v1alpha1.api.practice.com"


async def test_restart_may_count_fewer_pods_than_the_run(h: Harness, k: Kueue) -> None:
    # Kueue admits a Workload's count less its reclaimable pods: once the run is fixed, a
    # readmission after some nodes finished counts fewer pods, never more.
    await h.add_nodes("n1", "n2")
    await h.api.create(daemonjob(suspend=True))
    await h.reconcile()
    job = DaemonJobJob(await h.get())
    with pytest.raises(NodesChangedError):
        await job.run_with_pod_sets_info(h.api, [PodSetInfo(name="main", count=1)])
    await job.run_with_pod_sets_info(h.api, [PodSetInfo(name="main", count=2)])
    job.suspend()
    job.restore_pod_sets_info([])
    await job.run_with_pod_sets_info(h.api, [PodSetInfo(name="main", count=1)])
    assert not job.is_suspended()
    job.suspend()
    with pytest.raises(NodesChangedError, match="admitted 3 pods but the run has 2"):
        await job.run_with_pod_sets_info(h.api, [PodSetInfo(name="main", count=3)])
