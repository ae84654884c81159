"""Names, the node Jobs' shape and the pure planning: phases, actions and state."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from integrations.daemonjob.api import (
    DAEMONJOB_NAME_LABEL,
    HASH_LENGTH,
    NODE_ANNOTATION,
    NODE_LABEL,
    NODES_ANNOTATION,
    DaemonJobSpec,
    NodePhase,
    State,
    child_job_name,
    frozen_nodes,
    job_status_key,
    node_label_value,
    nodes_annotation_value,
    parse_exclude_list,
    shorten,
)
from integrations.daemonjob.plan import (
    build_node_job,
    node_of_job,
    plan,
    pods_per_node,
    render_job_spec,
    run_nodes,
)
from jobframework.podset import PodSetInfo
from jobframework.runtime.objects import Object

from .helpers import container, daemonjob, finish, node

#: A label value (and, lowercase, a DNS-1123 label).
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


# --- names -------------------------------------------------------------------------------


def test_child_job_name_is_daemonjob_dash_node() -> None:
    assert child_job_name("daemonjob-example", "node3") == "daemonjob-example-node3"
    exact = "n" * (63 - len("dj-"))
    assert child_job_name("dj", exact) == f"dj-{exact}", "63 characters are not shortened"


def test_long_names_are_shortened_deterministically() -> None:
    long_node = "ip-10-0-0-1." + "x" * 70
    name = child_job_name("dj", long_node)
    assert len(name) == 63
    assert name == child_job_name("dj", long_node), "deterministic"
    prefix, digest = name.rsplit("-", 1)
    assert len(digest) == HASH_LENGTH and re.fullmatch(r"[0-9a-f]+", digest)
    assert f"dj-{long_node}".startswith(prefix)
    assert LABEL_VALUE.match(name)
    # Distinct long nodes sharing the kept prefix stay distinct.
    others = {child_job_name("dj", "z" * 80 + str(i)) for i in range(20)}
    assert len(others) == 20
    assert all(len(n) <= 63 for n in others)


def test_shortened_prefix_does_not_end_with_a_separator() -> None:
    # The cut falls just after a '.': the prefix loses it so the name stays valid.
    cut = 63 - HASH_LENGTH - 1
    node_name = "a" * (cut - len("dj-") - 1) + "." + "b" * 40
    name = child_job_name("dj", node_name)
    assert not re.search(r"[-._]-", name)
    assert name == "dj-" + "a" * (cut - 4) + "-" + name[-HASH_LENGTH:]
    assert LABEL_VALUE.match(name)
    assert shorten("a" * 52 + "--" + "b" * 20).count("--") == 0


def test_node_label_is_shortened_and_the_annotation_exact() -> None:
    assert node_label_value("node1") == "node1"
    long_node = "worker-" + "0123456789" * 8 + ".example.com"
    dj = daemonjob("dj")
    dj["metadata"]["uid"] = "uid-1"
    job = build_node_job(dj, long_node)
    label = job["metadata"]["labels"][NODE_LABEL]
    assert len(label) <= 63 and LABEL_VALUE.match(label)
    assert label == node_label_value(long_node) != long_node
    assert job["spec"]["template"]["metadata"]["labels"][NODE_LABEL] == label
    assert job["metadata"]["annotations"][NODE_ANNOTATION] == long_node
    assert node_of_job(job) == long_node
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                       "values": [long_node]}]}], "pinned to the exact name"


def test_status_keys_and_nodes_annotation() -> None:
    assert job_status_key("dj-n1", "default") == "dj-n1/default"
    assert nodes_annotation_value(["n2", "n1"]) == '["n1", "n2"]'
    dj = daemonjob()
    assert frozen_nodes(dj) is None
    dj["metadata"]["annotations"] = {NODES_ANNOTATION: '["n1", "n2"]'}
    assert frozen_nodes(dj) == ["n1", "n2"]
    dj["metadata"]["annotations"] = {NODES_ANNOTATION: "[]"}
    assert frozen_nodes(dj) == []
    for bad in ("not json", '{"n1": 1}'):
        dj["metadata"]["annotations"] = {NODES_ANNOTATION: bad}
        assert frozen_nodes(dj) is None


def test_exclude_list_parsing() -> None:
    assert parse_exclude_list("node1, node2") == ["node1", "node2"]
    assert parse_exclude_list("  ") == []
    assert parse_exclude_list("a,,b") == ["a", "", "b"]
    spec = DaemonJobSpec.from_dict({"excludeNodeList": "node1, node2,"})
    assert spec.exclude_nodes == ("node1", "node2")
    assert spec.fail_fast and spec.failure_policy == "FailFast"
    assert not DaemonJobSpec.from_dict({"failurePolicy": "Continue"}).fail_fast


# --- the node Jobs -----------------------------------------------------------------------


def test_render_job_spec_defaults_and_globals() -> None:
    dj = daemonjob("dj", suspend=True, ttlSecondsAfterFinished=10, completions=2,
                   excludeNodeList="n9", failurePolicy="Continue",
                   globalParams={"env": [{"name": "FOO", "value": "bar"}],
                                 "labels": {"team": "a"}, "annotations": {"note": "x"}},
                   pod={"initContainers": [container("init", env=[
                       {"name": "FOO", "value": "own"}, {"name": "OWN", "value": "1"}])]})
    js = render_job_spec(DaemonJobSpec.of(dj), "dj")
    assert "suspend" not in js, "the DaemonJob decides"
    assert "ttlSecondsAfterFinished" not in js, "finished node Jobs are the record"
    for key in ("globalParams", "excludeNodeList", "failurePolicy"):
        assert key not in js
    assert js["completions"] == 2
    assert js["backoffLimit"] == 0
    tpl = js["template"]
    assert tpl["spec"]["restartPolicy"] == "Never"
    assert tpl["metadata"]["labels"] == {"team": "a", DAEMONJOB_NAME_LABEL: "dj"}
    assert tpl["metadata"]["annotations"] == {"note": "x"}
    assert tpl["spec"]["containers"][0]["env"] == [{"name": "FOO", "value": "bar"}]
    assert tpl["spec"]["initContainers"][0]["env"] == [
        {"name": "FOO", "value": "bar"}, {"name": "OWN", "value": "1"}], "globals win"
    assert "affinity" not in tpl["spec"], "not pinned"
    assert dj["spec"]["suspend"] is True, "the DaemonJob is not changed"


def test_render_keeps_explicit_backoff_and_on_failure() -> None:
    dj = daemonjob(backoffLimit=3, pod={"restartPolicy": "OnFailure"})
    js = render_job_spec(DaemonJobSpec.of(dj), "dj")
    assert js["backoffLimit"] == 3
    assert js["template"]["spec"]["restartPolicy"] == "OnFailure"


def test_pods_per_node() -> None:
    assert pods_per_node(DaemonJobSpec.of(daemonjob())) == 1
    assert pods_per_node(DaemonJobSpec.of(daemonjob(parallelism=3))) == 3
    assert pods_per_node(DaemonJobSpec.of(daemonjob(parallelism=3, completions=2))) == 2
    assert pods_per_node(DaemonJobSpec.of(daemonjob(completions=5))) == 1


def test_build_node_job() -> None:
    dj = daemonjob("dj", namespace="ns1", globalParams={"labels": {"team": "a"},
                                                       "annotations": {"note": "x"}},
                   pod={"nodeSelector": {"disk": "ssd"}})
    dj["metadata"]["uid"] = "uid-1"
    job = build_node_job(dj, "node1")
    meta = job["metadata"]
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert meta["name"] == "dj-node1" and meta["namespace"] == "ns1"
    assert meta["labels"] == {"team": "a", DAEMONJOB_NAME_LABEL: "dj", NODE_LABEL: "node1"}
    assert meta["annotations"] == {"note": "x", NODE_ANNOTATION: "node1"}
    assert meta["ownerReferences"] == [{
        "apiVersion": "api.practice.com/v1alpha1", "kind": "DaemonJob", "name": "dj",
        "uid": "uid-1", "controller": True, "blockOwnerDeletion": True}]
    assert job["spec"]["suspend"] is False
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"][NODE_LABEL] == "node1"
    assert pod["metadata"]["labels"][DAEMONJOB_NAME_LABEL] == "dj"
    assert pod["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert "nodeName" not in pod["spec"]
    assert pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node1"]}]}]


# --- the run's nodes ---------------------------------------------------------------------


def test_run_nodes_follow_eligible_nodes_until_fixed() -> None:
    nodes = [node("n2"), node("n1"), node("n3", ready=False), node("n4")]
    dj = daemonjob(excludeNodeList="n4")
    assert run_nodes(dj, nodes) == ["n1", "n2"]
    assert run_nodes(dj, [*nodes, node("n5")]) == ["n1", "n2", "n5"]
    dj["metadata"]["annotations"] = {NODES_ANNOTATION: nodes_annotation_value(["n1", "n2"])}
    assert run_nodes(dj, [node("n1"), node("n5")]) == ["n1", "n2"], \
        "fixed: a deleted node stays, a new one does not join"


# --- planning ----------------------------------------------------------------------------


def started(dj: Object, nodes: list[str]) -> Object:
    dj = copy.deepcopy(dj)
    dj["metadata"].setdefault("annotations", {})[NODES_ANNOTATION] = json.dumps(nodes)
    dj["metadata"]["uid"] = "uid-1"
    return dj


def live(*names: str, **labels: str) -> dict[str, Object]:
    return {n: node(n, **labels) for n in names}


def child(dj: Object, node_name: str, *, suspend: bool = False,
          status: dict[str, Any] | None = None) -> Object:
    job = build_node_job(dj, node_name)
    job["spec"]["suspend"] = suspend
    job["status"] = dict(status or {})
    return job


NODES = ["n1", "n2", "n3"]


def test_every_node_job_is_created_in_one_plan() -> None:
    dj = started(daemonjob(), NODES)
    p = plan(dj, NODES, live(*NODES), {}, None)
    assert p.create == ("n1", "n2", "n3")
    assert {n.phase for n in p.nodes} == {NodePhase.PENDING}
    assert [n.job_name for n in p.nodes] == ["dj-n1", "dj-n2", "dj-n3"]
    assert p.state == State.PENDING


def test_not_started_or_suspended_creates_nothing() -> None:
    dj = daemonjob()
    p = plan(dj, NODES, live(*NODES), {}, None)
    assert p.create == () and p.state == State.PENDING
    held = started(daemonjob(suspend=True), NODES)
    assert plan(held, NODES, live(*NODES), {}, None).create == ()


def test_phases_come_from_conditions_not_counts() -> None:
    dj = started(daemonjob(completions=3, parallelism=3), NODES)
    children = {
        # Some pods succeeded, some still run: not done.
        "n1": child(dj, "n1", status={"succeeded": 1, "active": 2}),
        # A pod failed but the Job retries (no Failed condition): not failed.
        "n2": child(dj, "n2", status={"failed": 1, "active": 3}),
        # All pods succeeded but the Job controller has not written Complete yet.
        "n3": child(dj, "n3", status={"succeeded": 3, "active": 0}),
    }
    p = plan(dj, NODES, live(*NODES), children, None)
    assert [n.phase for n in p.nodes] == [NodePhase.RUNNING] * 3
    assert p.state == State.RUNNING and p.create == () and p.stop == ()
    children["n3"] = finish(children["n3"])
    p = plan(dj, NODES, live(*NODES), children, None)
    assert p.phase("n3") == NodePhase.SUCCEEDED
    assert p.state == State.RUNNING, "Succeed only when every node Job completed"
    children["n1"] = finish(children["n1"])
    assert plan(dj, NODES, live(*NODES), children, None).state == State.RUNNING
    children["n2"] = finish(children["n2"])
    p = plan(dj, NODES, live(*NODES), children, None)
    assert p.state == State.SUCCEED
    assert p.count(NodePhase.SUCCEEDED) == 3


def test_fail_fast_stops_running_and_skips_unstarted() -> None:
    dj = started(daemonjob(), [*NODES, "n4"])
    children = {"n1": finish(child(dj, "n1"), False, "BackoffLimitExceeded", "boom"),
                "n2": child(dj, "n2"),
                "n3": finish(child(dj, "n3"))}
    p = plan(dj, [*NODES, "n4"], live(*NODES, "n4"), children, None)
    assert [(n.name, n.phase) for n in p.nodes] == [
        ("n1", NodePhase.FAILED), ("n2", NodePhase.STOPPED), ("n3", NodePhase.SUCCEEDED),
        ("n4", NodePhase.SKIPPED)]
    assert p.stop == ("n2",) and p.create == ()
    assert p.state == State.FAILED and p.failed_node == "n1"
    assert p.failure_message == "node n1 (Job dj-n1) failed: BackoffLimitExceeded: boom"
    n1 = p.nodes[0]
    assert (n1.reason, n1.message) == ("BackoffLimitExceeded", "boom")
    assert p.nodes[1].message == "stopped: node n1 failed"
    assert p.nodes[3].to_dict() == {"name": "n4", "phase": "Skipped", "jobName": "dj-n4",
                                    "reason": "NodeFailed", "message": "not run: node n1 failed"}


def test_continue_runs_everything_then_fails() -> None:
    dj = started(daemonjob(failurePolicy="Continue"), NODES)
    children = {"n1": finish(child(dj, "n1"), False), "n2": child(dj, "n2")}
    p = plan(dj, NODES, live(*NODES), children, None)
    assert p.create == ("n3",) and p.stop == ()
    assert p.phase("n2") == NodePhase.RUNNING
    assert p.state == State.RUNNING and p.failed_node == "n1"
    children["n3"] = finish(child(dj, "n3"))
    children["n2"] = finish(children["n2"])
    p = plan(dj, NODES, live(*NODES), children, None)
    assert p.state == State.FAILED
    assert p.count(NodePhase.SUCCEEDED) == 2 and p.count(NodePhase.FAILED) == 1
    assert p.failure_message == ("node n1 (Job dj-n1) failed: BackoffLimitExceeded: Job has "
                                 "reached the specified backoff limit")


def test_deleted_node_loses_its_job_and_is_not_waited_for() -> None:
    dj = started(daemonjob(), NODES)
    children = {"n1": finish(child(dj, "n1")), "n2": child(dj, "n2")}
    p = plan(dj, NODES, live("n1", "n3"), children, None)
    assert p.delete == ("n2",)
    assert p.phase("n2") == NodePhase.NODE_DELETED
    assert p.create == ("n3",)
    # A finished node's Job stays, even once its node is gone.
    p = plan(dj, NODES, live("n3"), children, None)
    assert p.phase("n1") == NodePhase.SUCCEEDED and p.delete == ("n2",)
    # A deleted node without a Job is not created.
    p = plan(dj, NODES, live("n1", "n2"), {}, None)
    assert p.phase("n3") == NodePhase.NODE_DELETED and p.create == ("n1", "n2")
    # Once the others finish, the DaemonJob succeeds without the deleted node.
    children["n3"] = finish(child(dj, "n3"))
    del children["n2"]
    p = plan(dj, NODES, live("n1", "n3"), children, None)
    assert p.state == State.SUCCEED


def test_every_node_deleted_fails() -> None:
    dj = started(daemonjob(), NODES)
    p = plan(dj, NODES, {}, {}, None)
    assert p.state == State.FAILED
    assert "every node of the run was deleted" in p.failure_message


def test_outside_flavor_nodes_get_no_job() -> None:
    dj = started(daemonjob(), NODES)
    nodes = {**live("n1", "n2", **{"instance-type": "on-demand"}),
             **live("n3", **{"instance-type": "spot"})}
    info = PodSetInfo(name="main", count=3, node_selector={"instance-type": "on-demand"})
    p = plan(dj, NODES, nodes, {}, info)
    assert p.create == ("n1", "n2")
    assert p.phase("n3") == NodePhase.OUTSIDE_FLAVOR
    n3 = p.nodes[2]
    assert n3.reason == "NotInAdmittedFlavor"
    assert n3.message == "the node does not have the admitted flavor's labels " \
        "(instance-type=on-demand)"
    # A running Job on a node that lost the labels is suspended.
    children = {"n1": child(dj, "n1"), "n2": child(dj, "n2")}
    nodes["n2"] = node("n2", **{"instance-type": "spot"})
    p = plan(dj, NODES, nodes, children, info)
    assert p.suspend == ("n2",) and p.phase("n2") == NodePhase.OUTSIDE_FLAVOR
    # Finished in-flavor nodes and outside ones: Succeed.
    children = {"n1": finish(child(dj, "n1")), "n2": finish(child(dj, "n2"))}
    nodes["n2"] = node("n2", **{"instance-type": "on-demand"})
    assert plan(dj, NODES, nodes, children, info).state == State.SUCCEED
    # Every node outside the flavor: nothing can run.
    spot = PodSetInfo(name="main", count=3, node_selector={"instance-type": "gpu"})
    p = plan(dj, NODES, nodes, {}, spot)
    assert p.state == State.FAILED and p.create == ()


def test_suspended_daemonjob_suspends_running_and_resume_follows() -> None:
    dj = started(daemonjob(suspend=True), NODES)
    children = {"n1": child(dj, "n1"), "n2": child(dj, "n2", suspend=True),
                "n3": finish(child(dj, "n3"))}
    p = plan(dj, NODES, live(*NODES), children, None)
    assert "n1" in p.suspend and "n3" not in p.suspend, "finished Jobs are left alone"
    assert p.resume == () and p.create == ()
    assert [n.phase for n in p.nodes] == [NodePhase.SUSPENDED, NodePhase.SUSPENDED,
                                          NodePhase.SUCCEEDED]
    assert p.state == State.RUNNING
    dj["spec"]["suspend"] = False
    children["n1"]["spec"]["suspend"] = True
    p = plan(dj, NODES, live(*NODES), children, None)
    assert p.resume == ("n1", "n2"), "finished nodes are not re-run"
    assert p.create == ()


def test_terminating() -> None:
    dj = started(daemonjob(), NODES)
    dj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert plan(dj, NODES, live(*NODES), {}, None).state == State.TERMINATING
