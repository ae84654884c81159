"""The pure rules: graph, rendering of child Jobs, outcomes, planning, admission data."""

from __future__ import annotations

import json
from typing import Any

import pytest

from integrations.jobflow.api import (
    CREATED_BY_TEMPLATE_ANNOTATION,
    FLOW_NAME_LABEL,
    INJECTED_INFO_ANNOTATION,
    JOBFLOW_NAME_LABEL,
    Flow,
    FlowPhase,
    JobFlowSpec,
    State,
    parse_template_annotation,
)
from integrations.jobflow.dag import (
    build_child_job,
    find_cycle,
    inject_info,
    injected_info,
    job_outcome,
    plan,
    pod_count,
    render_job_spec,
    restore_info,
    topological_order,
)
from jobframework.podset import InvalidPodSetUpdateError, PodSetInfo

from .helpers import container, finish, flow, job_template, jobflow


def flows(*pairs: tuple[str, list[str]]) -> list[Flow]:
    return [Flow(name=n, dependencies=tuple(d)) for n, d in pairs]


def test_find_cycle_names_the_cycle_in_dependency_direction() -> None:
    assert find_cycle(flows(("a", ["b"]), ("b", ["c"]), ("c", ["a"]))) == ["a", "b", "c", "a"]
    assert find_cycle(flows(("a", ["a"]))) == ["a", "a"]
    assert find_cycle(flows(("a", []), ("b", ["a"]), ("c", ["a", "b"]))) is None
    # Unknown names are not cycles.
    assert find_cycle(flows(("a", ["zzz"]))) is None


def test_topological_order_puts_dependencies_first_and_rejects_cycles() -> None:
    order = topological_order(flows(("c", ["a", "b"]), ("b", ["a"]), ("a", []), ("d", [])))
    assert order.index("a") < order.index("b") < order.index("c")
    assert set(order) == {"a", "b", "c", "d"}
    with pytest.raises(ValueError, match="a -> b -> a"):
        topological_order(flows(("a", ["b"]), ("b", ["a"])))
    # Among the flows ready at a time, the first listed: b as soon as a is placed.
    assert topological_order(flows(("b", ["a"]), ("a", []), ("c", []))) == ["a", "b", "c"]


def reverse_chain(n: int) -> list[Flow]:
    """``s0`` depends on ``s1``, ``s1`` on ``s2``...: a search from ``s0`` goes ``n`` deep."""
    return [Flow(name=f"s{i}", dependencies=(f"s{i + 1}",) if i + 1 < n else ())
            for i in range(n)]


def test_find_cycle_walks_a_chain_longer_than_the_recursion_limit() -> None:
    """Stored past the CRD's maxItems, a JobFlow can hold any number of steps; the search
    keeps its own stack (the recursive one raised RecursionError from ~1,000 steps)."""
    chain = reverse_chain(5000)
    assert find_cycle(chain) is None
    order = topological_order(chain)
    assert order[0] == "s4999" and order[-1] == "s0" and len(order) == 5000
    closed = [*chain[:-1], Flow(name="s4999", dependencies=("s0",))]
    cycle = find_cycle(closed)
    assert cycle == [*(f"s{i}" for i in range(5000)), "s0"]


def test_find_cycle_reports_the_first_cycle_met_in_list_order() -> None:
    # a -> b -> c -> b: the cycle is b, c (a only leads to it); d's own cycle comes later.
    got = find_cycle(flows(("a", ["x", "b"]), ("b", ["c"]), ("c", ["b"]), ("d", ["d"])))
    assert got == ["b", "c", "b"]
    # A finished branch (b, all its dependencies done) is not walked again from c.
    assert find_cycle(flows(("a", ["b", "c"]), ("b", ["d"]), ("c", ["b", "d"]),
                            ("d", []))) is None


def test_template_annotation_splits_at_the_first_dot() -> None:
    assert parse_template_annotation("ns.my.template") == ("ns", "my.template")
    assert parse_template_annotation("nodot") is None


GLOBALS = {
    "env": [{"name": "FOO", "value": "global"}, {"name": "QUE", "value": "pasa"}],
    "labels": {"key1": "g1", "shared": "global"},
    "annotations": {"a1": "g1", "shared": "global"},
    "nodeName": "node-7",
}


def test_globals_merge_into_pod_template_and_win_conflicts() -> None:
    base = job_template()
    pod = base["template"]
    pod["metadata"] = {"labels": {"own": "x", "shared": "mine"},
                       "annotations": {"own": "y", "shared": "mine"}}
    pod["spec"]["containers"] = [container("c1", env=[{"name": "FOO", "value": "mine"},
                                                      {"name": "OWN", "value": "1"}]),
                                 container("c2")]
    pod["spec"]["initContainers"] = [container("init")]
    pod["spec"]["restartPolicy"] = "OnFailure"
    spec = JobFlowSpec.from_dict({"globalParams": GLOBALS})
    out = render_job_spec(spec, Flow(name="s"), base)
    meta, ps = out["template"]["metadata"], out["template"]["spec"]
    assert meta["labels"] == {"own": "x", "shared": "global", "key1": "g1"}
    assert meta["annotations"] == {"own": "y", "shared": "global", "a1": "g1"}
    c1, c2 = ps["containers"]
    assert c1["env"] == [{"name": "FOO", "value": "global"}, {"name": "QUE", "value": "pasa"},
                         {"name": "OWN", "value": "1"}]
    assert c2["env"] == GLOBALS["env"]
    assert ps["initContainers"][0]["env"] == GLOBALS["env"], "init containers get env too"
    assert ps["nodeName"] == "node-7"
    assert ps["restartPolicy"] == "Never", "forced"
    assert out["backoffLimit"] == 0, "defaulted when unset"
    assert base["template"]["spec"]["restartPolicy"] == "OnFailure", "input not mutated"


def test_forced_fields_keep_explicit_backoff_and_drop_ttl_and_suspend() -> None:
    spec = JobFlowSpec.from_dict({})
    out = render_job_spec(spec, Flow(name="s"),
                          job_template(backoffLimit=3, ttlSecondsAfterFinished=0, suspend=True))
    assert out["backoffLimit"] == 3
    assert "ttlSecondsAfterFinished" not in out
    assert "suspend" not in out
    assert "env" not in out["template"]["spec"]["containers"][0], "no globals, no env"


def test_shared_volumes_only_for_flows_that_mount_them() -> None:
    spec = JobFlowSpec.from_dict({
        "shareVolumes": [{"name": "mypvc", "persistentVolumeClaim": {"claimName": "c"}},
                         {"name": "other", "emptyDir": {}}],
    })
    mounts = ({"name": "mypvc", "mountPath": "/data"},)
    base = job_template()
    base["template"]["spec"]["volumes"] = [{"name": "mypvc", "emptyDir": {}},
                                           {"name": "own", "emptyDir": {}}]
    base["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "own", "mountPath": "/data"}, {"name": "own", "mountPath": "/keep"}]
    base["template"]["spec"]["initContainers"] = [container("init")]
    out = render_job_spec(spec, Flow(name="s", share_volume_mounts=mounts), base)
    ps = out["template"]["spec"]
    assert ps["volumes"] == [{"name": "own", "emptyDir": {}},
                             {"name": "mypvc", "persistentVolumeClaim": {"claimName": "c"}}]
    assert ps["containers"][0]["volumeMounts"] == [{"name": "own", "mountPath": "/keep"},
                                                   {"name": "mypvc", "mountPath": "/data"}]
    assert ps["initContainers"][0]["volumeMounts"] == [{"name": "mypvc", "mountPath": "/data"}]
    plain = render_job_spec(spec, Flow(name="t"), job_template())
    assert "volumes" not in plain["template"]["spec"]


def test_child_job_shape() -> None:
    jf = jobflow("wf", [flow("step")], globalParams={"labels": {"k": "v"},
                                                      "annotations": {"a": "b"}})
    jf["metadata"]["uid"] = "uid-1"
    job = build_child_job(jf, JobFlowSpec.of(jf).flows[0], job_template(), template_ref="tpl")
    meta = job["metadata"]
    assert meta["name"] == "wf-step" and meta["namespace"] == "default"
    assert meta["labels"] == {"k": "v", JOBFLOW_NAME_LABEL: "wf", FLOW_NAME_LABEL: "step"}
    assert meta["annotations"] == {"a": "b", CREATED_BY_TEMPLATE_ANNOTATION: "default.tpl"}
    assert meta["ownerReferences"] == [{
        "apiVersion": "api.practice.com/v1alpha1", "kind": "JobFlow", "name": "wf",
        "uid": "uid-1", "controller": True, "blockOwnerDeletion": True}]
    assert job["spec"]["suspend"] is False
    assert job["spec"]["template"]["metadata"]["labels"][FLOW_NAME_LABEL] == "step"
    assert "kueue.x-k8s.io/queue-name" not in meta["labels"]


def test_pod_count_is_parallelism_capped_by_completions() -> None:
    assert pod_count({}) == 1
    assert pod_count({"parallelism": 4}) == 4
    assert pod_count({"parallelism": 4, "completions": 2}) == 2
    assert pod_count({"parallelism": 0}) == 0


def test_job_outcome_reads_conditions_not_counts() -> None:
    job = {"spec": {"completions": 3}, "status": {"succeeded": 1}}
    assert job_outcome(job).phase == FlowPhase.RUNNING, "succeeded == 1 is not done"
    assert job_outcome(finish(job)).phase == FlowPhase.SUCCEEDED
    failed = job_outcome(finish(job, False, "DeadlineExceeded", "too slow"))
    assert (failed.phase, failed.reason, failed.message) == (
        FlowPhase.FAILED, "DeadlineExceeded", "too slow")
    interim = {"spec": {}, "status": {"conditions": [
        {"type": "FailureTarget", "status": "True"}]}}
    assert job_outcome(interim).phase == FlowPhase.RUNNING
    assert job_outcome({"spec": {"suspend": True}}).phase == FlowPhase.SUSPENDED


def _job(phase: str) -> dict[str, Any]:
    base: dict[str, Any] = {"spec": {}, "status": {}}
    if phase == "done":
        return finish(base)
    if phase == "failed":
        return finish(base, False)
    return base


def test_plan_ready_flows_need_all_dependencies_completed() -> None:
    jf = jobflow("wf", [flow("a"), flow("b", "a"), flow("c", "a", "b"), flow("d")])
    p = plan(jf, {"a": None, "b": None, "c": None, "d": None})
    assert p.ready == ("a", "d") and p.state == State.PENDING
    p = plan(jf, {"a": _job("done"), "b": _job("running"), "c": None, "d": None})
    assert p.ready == ("d",) and p.state == State.RUNNING
    assert p.phase("b") == FlowPhase.RUNNING and p.phase("c") == FlowPhase.PENDING
    p = plan(jf, {"a": _job("done"), "b": _job("done"), "c": _job("done"), "d": _job("done")})
    assert p.ready == () and p.state == State.SUCCEED


def test_plan_failure_skips_and_stops_the_rest() -> None:
    jf = jobflow("wf", [flow("a"), flow("b", "a"), flow("c"), flow("d", "c")])
    p = plan(jf, {"a": _job("failed"), "b": None, "c": _job("running"), "d": None})
    assert p.state == State.FAILED and p.failed_flow == "a"
    assert p.ready == (), "nothing new starts after a failure"
    assert p.stop == ("c",)
    assert [f.phase for f in p.flows] == [FlowPhase.FAILED, FlowPhase.SKIPPED,
                                          FlowPhase.STOPPED, FlowPhase.SKIPPED]
    assert p.failure_message == ("flow a (Job wf-a) failed: BackoffLimitExceeded: "
                                 "Job has reached the specified backoff limit")


def test_plan_terminating_while_deleted() -> None:
    jf = jobflow("wf", [flow("a")])
    jf["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert plan(jf, {"a": _job("done")}).state == State.TERMINATING


def test_inject_and_restore_info_round_trip() -> None:
    jf = jobflow("wf", [flow("a")])
    jf["metadata"]["uid"] = "u"
    job = build_child_job(jf, JobFlowSpec.of(jf).flows[0], job_template())
    job["spec"]["template"]["metadata"]["labels"]["pre"] = "same"
    original = json.loads(json.dumps(job))
    info = PodSetInfo(name="a", count=1, labels={"flavor": "x", "pre": "same"},
                      annotations={"kueue.x-k8s.io/workload": "wl"},
                      node_selector={"zone": "z1"},
                      tolerations=[{"key": "k", "operator": "Exists"}])
    inject_info(job, info)
    tpl = job["spec"]["template"]
    assert tpl["spec"]["nodeSelector"] == {"zone": "z1"}
    assert tpl["metadata"]["labels"]["flavor"] == "x"
    assert injected_info(job) == info
    # A label added later by someone else (the Job controller's selector) survives.
    tpl["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = "c"
    assert restore_info(job)
    assert INJECTED_INFO_ANNOTATION not in job["metadata"].get("annotations", {})
    del job["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/controller-uid"]
    assert job == original
    assert not restore_info(job)


def test_inject_conflict_leaves_job_unchanged() -> None:
    jf = jobflow("wf", [flow("a")])
    job = build_child_job(jf, JobFlowSpec.of(jf).flows[0], job_template())
    before = json.loads(json.dumps(job))
    with pytest.raises(InvalidPodSetUpdateError):
        inject_info(job, PodSetInfo(name="a", labels={FLOW_NAME_LABEL: "other"}))
    assert job == before
