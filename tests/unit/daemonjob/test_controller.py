"""The DaemonJob controller, called directly on the in-memory server (the test plays the
Job controller by writing Job conditions, and the cluster by adding and removing Nodes)."""

from __future__ import annotations

import copy
import json

from integrations.daemonjob import (
    DAEMONJOB_GVK,
    JOB_GVK,
    NODE_GVK,
    NODES_ANNOTATION,
    load_samples,
)
from integrations.daemonjob.controller import OWNER_UID_INDEX, node_changed
from integrations.daemonjob.webhook import default_daemonjob
from jobframework.runtime.reconcile import Request

from .helpers import Harness, cond, daemonjob, node, phases


def sample() -> dict:
    dj = copy.deepcopy(load_samples()["example.yaml"][0])
    dj["metadata"]["namespace"] = "default"
    default_daemonjob(dj)
    return dj


async def test_sample_runs_one_job_per_eligible_node(h: Harness) -> None:
    await h.add_nodes("node1", "node2", "node3", "node4")
    await h.api.create(sample())
    await h.reconcile("daemonjob-example")
    jobs = await h.jobs()
    assert set(jobs) == {"daemonjob-example-node3", "daemonjob-example-node4"}
    dj = await h.get("daemonjob-example")
    assert json.loads(dj["metadata"]["annotations"][NODES_ANNOTATION]) == ["node3", "node4"]
    st = dj["status"]
    assert st["state"] == "Running"
    assert (st["desired"], st["running"], st["succeeded"], st["failed"]) == (2, 2, 0, 0)
    assert st["nodes"] == [
        {"name": "node3", "phase": "Running", "jobName": "daemonjob-example-node3"},
        {"name": "node4", "phase": "Running", "jobName": "daemonjob-example-node4"}]
    assert set(st["jobStatusList"]) == {"daemonjob-example-node3/default",
                                        "daemonjob-example-node4/default"}
    pod = jobs["daemonjob-example-node3"]["spec"]["template"]
    assert pod["spec"]["restartPolicy"] == "OnFailure", "an explicit OnFailure is kept"
    assert {"name": "FOO", "value": "bar"} in pod["spec"]["containers"][0]["env"]
    assert pod["metadata"]["labels"]["key1"] == "value1"
    assert h.recorder.events == [("Normal", "Created", "Created 2 Jobs: "
                                  "daemonjob-example-node3, daemonjob-example-node4")]

    await h.complete("daemonjob-example-node3")
    await h.reconcile("daemonjob-example")
    st = (await h.get("daemonjob-example"))["status"]
    assert st["state"] == "Running", "Succeed only once every node Job completed"
    assert (st["running"], st["succeeded"]) == (1, 1)
    await h.complete("daemonjob-example-node4")
    await h.reconcile("daemonjob-example")
    dj = await h.get("daemonjob-example")
    assert dj["status"]["state"] == "Succeed"
    assert dj["status"]["succeeded"] == 2
    succeeded = cond(dj, "Succeeded")
    assert succeeded is not None
    assert (succeeded["status"], succeeded["reason"], succeeded["message"]) == (
        "True", "AllNodesSucceeded", "the Jobs of all 2 nodes completed")
    await h.reconcile("daemonjob-example")
    assert h.recorder.events[1:] == [
        ("Normal", "Succeeded", "the Jobs of all 2 nodes of DaemonJob daemonjob-example "
         "completed")], "sent once"


async def test_every_node_job_is_created_in_one_reconcile(h: Harness) -> None:
    names = [f"n{i:02d}" for i in range(12)]
    await h.add_nodes(*names)
    await h.api.create(daemonjob())
    await h.reconcile()
    assert set(await h.jobs()) == {f"dj-{n}" for n in names}
    assert h.recorder.events == [("Normal", "Created", "Created 12 Jobs: dj-n00, dj-n01, "
                                  "dj-n02, dj-n03, dj-n04 and 7 more")]
    assert phases(await h.get()) == dict.fromkeys(names, "Running")
    # A second pass creates nothing more and recognises each node's Job.
    await h.reconcile()
    assert len(await h.jobs()) == 12
    assert h.recorder.reasons() == ["Created"]


async def test_a_job_named_like_the_daemonjob_changes_nothing(h: Harness) -> None:
    await h.add_nodes("n1", "n2")
    stray = await h.api.create({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "dj",
                                                             "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox"}]}}}})
    await h.api.create(daemonjob())
    await h.reconcile()
    jobs = await h.jobs()
    assert set(jobs) == {"dj", "dj-n1", "dj-n2"}
    assert jobs["dj"] == stray, "not adopted, not changed"
    dj = await h.get()
    assert set(dj["status"]["jobStatusList"]) == {"dj-n1/default", "dj-n2/default"}
    assert dj["status"]["desired"] == 2


async def test_children_are_matched_by_owner_uid(h: Harness) -> None:
    await h.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    await h.add_nodes("n1")
    mine = await h.api.create(daemonjob())
    await h.api.create(daemonjob(namespace="other"))
    await h.reconcile()
    await h.reconcile("dj", "other")
    await h.complete("dj-n1", "other")
    await h.reconcile()
    await h.reconcile("dj", "other")
    assert (await h.get())["status"]["state"] == "Running"
    assert (await h.get("dj", "other"))["status"]["state"] == "Succeed"
    assert list((await h.get())["status"]["jobStatusList"]) == ["dj-n1/default"]
    job_lists = [x for x in h.reader.lists if x[0] == JOB_GVK]
    assert job_lists and all(fields is not None and set(fields) == {OWNER_UID_INDEX}
                             for _, _, fields in job_lists), "never a namespace-wide scan"
    assert ("default", {OWNER_UID_INDEX: mine["metadata"]["uid"]}) in [
        (ns, fields) for _, ns, fields in job_lists]


async def test_a_job_of_another_owner_with_the_node_name_is_not_a_child(h: Harness) -> None:
    # A DaemonJob deleted and created again: the old Job (old owner UID) is not adopted.
    await h.add_nodes("n1")
    await h.api.create(daemonjob())
    await h.reconcile()
    old = (await h.jobs())["dj-n1"]
    await h.api.update_status({**old, "status": {"active": 0, "conditions": [
        {"type": "Complete", "status": "True"}]}})
    await h.api.delete(DAEMONJOB_GVK, "dj", namespace="default")
    h.reader.hidden.add("dj-n1")  # garbage collection has not run in the cache yet
    await h.api.create(daemonjob())
    result = await h.reconcile()
    assert result.requeue, "the name is taken: retried once the old Job is gone"
    assert "status" not in await h.get(), \
        "the old owner's completed Job does not count for the new DaemonJob"
    await h.server.settle()     # the garbage collector deletes the old Job
    h.reader.hidden.clear()
    await h.reconcile()
    job = (await h.jobs())["dj-n1"]
    assert job["metadata"]["uid"] != old["metadata"]["uid"]
    dj = await h.get()
    assert job["metadata"]["ownerReferences"][0]["uid"] == dj["metadata"]["uid"]
    assert dj["status"]["state"] == "Running"


async def test_completions_are_judged_by_conditions(h: Harness) -> None:
    await h.add_nodes("n1", "n2")
    await h.api.create(daemonjob(completions=3, parallelism=3))
    await h.reconcile()
    await h.set_job_status("dj-n1", {"succeeded": 1, "active": 2})
    await h.set_job_status("dj-n2", {"failed": 1, "active": 3})
    await h.reconcile()
    assert phases(await h.get()) == {"n1": "Running", "n2": "Running"}
    await h.set_job_status("dj-n1", {"succeeded": 3, "active": 0})
    await h.reconcile()
    assert (await h.get())["status"]["state"] == "Running", "counts alone are not completion"
    await h.complete("dj-n1")
    await h.reconcile()
    dj = await h.get()
    assert phases(dj) == {"n1": "Succeeded", "n2": "Running"}
    assert dj["status"]["state"] == "Running"
    await h.complete("dj-n2")
    await h.reconcile()
    assert (await h.get())["status"]["state"] == "Succeed"


async def test_fail_fast_fails_at_once_and_stops_the_others(h: Harness) -> None:
    await h.add_nodes("n1", "n2", "n3")
    await h.api.create(daemonjob())
    await h.reconcile()
    await h.fail("dj-n2", reason="BackoffLimitExceeded", message="boom")
    await h.complete("dj-n3")
    await h.reconcile()
    dj = await h.get()
    jobs = await h.jobs()
    assert jobs["dj-n1"]["spec"]["suspend"] is True, "the running Job is stopped"
    assert dj["status"]["state"] == "Failed"
    assert dj["status"]["failedNode"] == "n2"
    assert phases(dj) == {"n1": "Stopped", "n2": "Failed", "n3": "Succeeded"}
    assert (dj["status"]["running"], dj["status"]["succeeded"], dj["status"]["failed"]) == \
        (0, 1, 1)
    failed = cond(dj, "Failed")
    assert failed is not None
    message = "node n2 (Job dj-n2) failed: BackoffLimitExceeded: boom"
    assert (failed["status"], failed["reason"], failed["message"]) == ("True", "NodeFailed",
                                                                       message)
    assert ("Warning", "Failed", message) in h.recorder.events
    assert cond(dj, "Succeeded") is None


async def test_fail_fast_skips_nodes_not_started(h: Harness) -> None:
    await h.add_nodes("n1", "n2")
    await h.api.create(daemonjob())
    await h.reconcile()
    await h.fail("dj-n1")
    # n2's Job is deleted by hand: under FailFast it is not created again.
    await h.api.delete(JOB_GVK, "dj-n2", namespace="default")
    await h.server.settle()
    await h.reconcile()
    dj = await h.get()
    assert set(await h.jobs()) == {"dj-n1"}
    assert phases(dj) == {"n1": "Failed", "n2": "Skipped"}


async def test_continue_runs_every_node_then_fails(h: Harness) -> None:
    await h.add_nodes("n1", "n2", "n3")
    await h.api.create(daemonjob(failurePolicy="Continue"))
    await h.reconcile()
    await h.fail("dj-n1")
    await h.reconcile()
    dj = await h.get()
    assert dj["status"]["state"] == "Running"
    assert dj["status"]["failedNode"] == "n1"
    jobs = await h.jobs()
    assert jobs["dj-n2"]["spec"]["suspend"] is False, "the others keep running"
    assert cond(dj, "Failed") is None
    await h.complete("dj-n2")
    await h.complete("dj-n3")
    await h.reconcile()
    dj = await h.get()
    assert dj["status"]["state"] == "Failed"
    assert (dj["status"]["succeeded"], dj["status"]["failed"]) == (2, 1)
    assert cond(dj, "Failed")["status"] == "True"  # type: ignore[index]
    assert h.recorder.reasons() == ["Created", "Failed"]


async def test_no_eligible_nodes_waits_then_starts(h: Harness) -> None:
    await h.add_node(node("n1", ready=False))
    await h.add_node(node("n2", unschedulable=True))
    await h.add_nodes("n3")
    await h.api.create(daemonjob(excludeNodeList="n3"))
    await h.reconcile()
    dj = await h.get()
    assert await h.jobs() == {}
    assert dj["status"]["state"] == "Pending" and dj["status"]["desired"] == 0
    assert NODES_ANNOTATION not in dj["metadata"].get("annotations", {}), "nothing to fix"
    empty = cond(dj, "NoEligibleNodes")
    assert empty is not None
    assert (empty["status"], empty["reason"]) == ("True", "NoEligibleNodes")
    assert empty["message"] == ("no node is eligible, of 3 nodes: 1 is excluded by "
                                "spec.excludeNodeList, 1 is not Ready, 1 is cordoned "
                                "(spec.unschedulable)")
    await h.set_ready("n1", True)
    await h.reconcile()
    dj = await h.get()
    assert set(await h.jobs()) == {"dj-n1"}
    found = cond(dj, "NoEligibleNodes")
    assert found is not None
    assert (found["status"], found["reason"]) == ("False", "EligibleNodesFound")


async def test_nodes_follow_eligibility_until_started_then_are_fixed(h: Harness) -> None:
    await h.add_nodes("n1", "n2")
    await h.api.create(daemonjob(suspend=True))
    await h.reconcile()
    dj = await h.get()
    assert phases(dj) == {"n1": "Pending", "n2": "Pending"}
    assert await h.jobs() == {}
    assert cond(dj, "Suspended")["status"] == "True"  # type: ignore[index]
    # Before the start the run follows the eligible nodes.
    await h.add_nodes("n3")
    await h.set_ready("n1", False)
    await h.reconcile()
    assert phases(await h.get()) == {"n2": "Pending", "n3": "Pending"}
    # Started: the list is fixed.
    dj = await h.get()
    dj["spec"]["suspend"] = False
    await h.api.update(dj)
    await h.reconcile()
    dj = await h.get()
    assert json.loads(dj["metadata"]["annotations"][NODES_ANNOTATION]) == ["n2", "n3"]
    assert set(await h.jobs()) == {"dj-n2", "dj-n3"}
    assert cond(dj, "Suspended")["status"] == "False"  # type: ignore[index]
    # Nodes that join (or become Ready) later are not part of the run.
    await h.add_nodes("n4")
    await h.set_ready("n1", True)
    await h.reconcile()
    assert set(await h.jobs()) == {"dj-n2", "dj-n3"}
    assert phases(await h.get()) == {"n2": "Running", "n3": "Running"}
    assert (await h.get())["status"]["desired"] == 2


async def test_deleted_node_loses_its_job_and_is_not_waited_for(h: Harness) -> None:
    await h.add_nodes("n1", "n2", "n3")
    await h.api.create(daemonjob())
    await h.reconcile()
    await h.complete("dj-n1")
    await h.delete_node("n1")   # finished: its Job stays
    await h.delete_node("n2")   # unfinished: its Job goes
    await h.reconcile()
    await h.server.settle()
    assert set(await h.jobs()) == {"dj-n1", "dj-n3"}
    dj = await h.get()
    assert phases(dj) == {"n1": "Succeeded", "n2": "NodeDeleted", "n3": "Running"}
    entry = dj["status"]["nodes"][1]
    assert (entry["reason"], entry["message"]) == (
        "NodeDeleted", "the node was deleted before its Job finished")
    assert ("Normal", "DeletedJob", "Deleted Job dj-n2: node n2 was deleted") \
        in h.recorder.events
    assert dj["status"]["desired"] == 3
    await h.complete("dj-n3")
    await h.reconcile()
    assert (await h.get())["status"]["state"] == "Succeed"


async def test_suspend_and_resume_standalone(h: Harness) -> None:
    await h.add_nodes("n1", "n2")
    await h.api.create(daemonjob())
    await h.reconcile()
    await h.complete("dj-n2")
    await h.set_job_status("dj-n1", {"active": 1, "startTime": "2026-01-01T00:00:00Z"})
    dj = await h.get()
    dj["spec"]["suspend"] = True
    await h.api.update(dj)
    await h.reconcile()
    jobs = await h.jobs()
    assert jobs["dj-n1"]["spec"]["suspend"] is True
    assert "startTime" not in jobs["dj-n1"]["status"]
    dj = await h.get()
    assert phases(dj) == {"n1": "Suspended", "n2": "Succeeded"}
    assert dj["status"]["state"] == "Running"
    suspended = cond(dj, "Suspended")
    assert suspended is not None
    assert (suspended["status"], suspended["reason"]) == ("True", "DaemonJobSuspended")
    dj["spec"]["suspend"] = False
    await h.api.update(dj)
    await h.reconcile()
    jobs = await h.jobs()
    assert jobs["dj-n1"]["spec"]["suspend"] is False
    n2_uid = jobs["dj-n2"]["metadata"]["uid"]
    assert phases(await h.get()) == {"n1": "Running", "n2": "Succeeded"}
    assert (await h.jobs())["dj-n2"]["metadata"]["uid"] == n2_uid, "not re-run"


async def test_observed_generation_follows_the_spec(h: Harness) -> None:
    await h.add_nodes("n1")
    await h.api.create(daemonjob(suspend=True))
    await h.reconcile()
    dj = await h.get()
    gen = dj["metadata"]["generation"]
    assert dj["status"]["observedGeneration"] == gen
    dj["spec"]["suspend"] = False
    await h.api.update(dj)
    await h.reconcile()
    dj = await h.get()
    assert dj["metadata"]["generation"] > gen
    assert dj["status"]["observedGeneration"] == dj["metadata"]["generation"]
    assert cond(dj, "Suspended")["observedGeneration"] == dj["metadata"]["generation"]  # type: ignore[index]


async def test_lagging_cache_does_not_regress_status(h: Harness) -> None:
    await h.add_nodes("n1", "n2")
    await h.api.create(daemonjob())
    assert (await h.reconcile()).is_zero()
    before = (await h.get())["status"]
    h.reader.hidden.add("dj-n1")     # the informer has not delivered the Job yet
    result = await h.reconcile()
    assert result.requeue, "retried once the cache catches up"
    assert (await h.get())["status"] == before, "no Pending flash"
    assert len(await h.jobs()) == 2


async def test_terminating_creates_nothing(h: Harness) -> None:
    await h.add_nodes("n1")
    dj = daemonjob(suspend=True)
    dj["metadata"]["finalizers"] = ["example.com/hold"]
    await h.api.create(dj)
    await h.reconcile()
    dj = await h.get()
    dj["spec"]["suspend"] = False
    await h.api.update(dj)
    await h.api.delete(DAEMONJOB_GVK, "dj", namespace="default")
    await h.reconcile()
    assert await h.jobs() == {}
    dj = await h.get()
    assert dj["status"]["state"] == "Terminating"
    assert NODES_ANNOTATION not in dj["metadata"].get("annotations", {})


async def test_missing_daemonjob_is_ignored(h: Harness) -> None:
    assert (await h.reconcile("missing")).is_zero()
    assert await h.jobs() == {}


async def test_node_events_map_to_unfinished_daemonjobs(h: Harness) -> None:
    await h.add_nodes("n1")
    for name in ("a", "b"):
        await h.api.create(daemonjob(name))
        await h.reconcile(name)
    await h.complete("a-n1")
    await h.reconcile("a")
    n1 = await h.api.get(NODE_GVK, "n1")
    assert await h.rec.unfinished_daemonjobs(n1) == [Request.of("default", "b")]


class _Update:
    def __init__(self, old: dict, new: dict) -> None:
        self.object_old, self.object_new = old, new


def test_node_update_predicate_ignores_heartbeats() -> None:
    old = node("n1")
    beat = copy.deepcopy(old)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:10Z"
    beat["metadata"]["resourceVersion"] = "7"
    assert not node_changed(_Update(old, beat))
    for change in (node("n1", ready=False), node("n1", unschedulable=True),
                   node("n1", zone="a"),
                   node("n1", taints=[{"key": "k", "effect": "NoSchedule"}])):
        assert node_changed(_Update(old, change))
