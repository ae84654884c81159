"""Node eligibility (each rule, in the order reported), tolerations, node affinity and the
pinning of a node's pods. Pure functions, no server."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.daemonjob.nodes import (
    Eligibility,
    Ineligible,
    eligible_nodes,
    ineligible_reason,
    is_ready,
    matches_labels,
    pin_to_node,
    requirement_matches,
    term_matches,
    tolerates,
    untolerated_taint,
)

from .helpers import node


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    r: dict[str, Any] = {"key": key, "operator": op}
    if values:
        r["values"] = list(values)
    return r


GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}


# --- each rule ---------------------------------------------------------------------------


def test_a_plain_ready_node_is_eligible() -> None:
    assert ineligible_reason(node("n1"), {}) is None


def test_excluded_node() -> None:
    assert ineligible_reason(node("n1"), {}, ["n0", "n1"]) == Ineligible.EXCLUDED
    assert ineligible_reason(node("n1"), {}, ["n0"]) is None


def test_not_ready_node() -> None:
    assert ineligible_reason(node("n1", ready=False), {}) == Ineligible.NOT_READY
    no_condition = node("n1")
    no_condition["status"] = {"conditions": [{"type": "MemoryPressure", "status": "False"}]}
    assert not is_ready(no_condition)
    assert ineligible_reason(no_condition, {}) == Ineligible.NOT_READY
    unknown = node("n1")
    unknown["status"]["conditions"][0]["status"] = "Unknown"
    assert ineligible_reason(unknown, {}) == Ineligible.NOT_READY


def test_cordoned_node() -> None:
    assert ineligible_reason(node("n1", unschedulable=True), {}) == Ineligible.UNSCHEDULABLE


def test_untolerated_taint() -> None:
    tainted = node("n1", taints=[GPU_TAINT])
    assert ineligible_reason(tainted, {}) == Ineligible.TAINTED
    tolerated = {"tolerations": [{"key": "gpu", "operator": "Equal", "value": "true"}]}
    assert ineligible_reason(tainted, tolerated) is None


def test_node_selector() -> None:
    n = node("n1", disk="ssd")
    assert ineligible_reason(n, {"nodeSelector": {"disk": "hdd"}}) == Ineligible.NODE_SELECTOR
    assert ineligible_reason(n, {"nodeSelector": {"zone": "a"}}) == Ineligible.NODE_SELECTOR
    assert ineligible_reason(n, {"nodeSelector": {"disk": "ssd"}}) is None


def test_required_node_affinity() -> None:
    n = node("n1", disk="ssd")
    assert ineligible_reason(n, affinity({"matchExpressions": [expr("disk", "In", "hdd")]})) \
        == Ineligible.NODE_AFFINITY
    assert ineligible_reason(n, affinity({"matchExpressions": [expr("disk", "In", "ssd")]})) \
        is None
    preferred = {"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [expr("disk", "In", "hdd")]}}]}}}
    assert ineligible_reason(n, preferred) is None, "preferred affinity does not rule out"


def test_first_failing_rule_is_the_reason() -> None:
    everything_wrong = node("n1", ready=False, unschedulable=True, taints=[GPU_TAINT])
    pod = {"nodeSelector": {"disk": "hdd"}}
    assert ineligible_reason(everything_wrong, pod, ["n1"]) == Ineligible.EXCLUDED
    assert ineligible_reason(everything_wrong, pod) == Ineligible.NOT_READY
    cordoned_tainted = node("n1", unschedulable=True, taints=[GPU_TAINT])
    assert ineligible_reason(cordoned_tainted, pod) == Ineligible.UNSCHEDULABLE
    assert ineligible_reason(node("n1", taints=[GPU_TAINT]), pod) == Ineligible.TAINTED
    both = {**pod, **affinity({"matchExpressions": [expr("disk", "In", "hdd")]})}
    assert ineligible_reason(node("n1"), both) == Ineligible.NODE_SELECTOR


# --- tolerations -------------------------------------------------------------------------


@pytest.mark.parametrize("toleration,taint,expected", [
    # Equal (the default operator): key and value must match.
    ({"key": "gpu", "value": "true"}, GPU_TAINT, True),
    ({"key": "gpu", "operator": "Equal", "value": "false"}, GPU_TAINT, False),
    ({"key": "other", "operator": "Equal", "value": "true"}, GPU_TAINT, False),
    ({"key": "gpu", "operator": "Equal"}, {"key": "gpu", "effect": "NoSchedule"}, True),
    # Exists: any value of the key.
    ({"key": "gpu", "operator": "Exists"}, GPU_TAINT, True),
    ({"key": "other", "operator": "Exists"}, GPU_TAINT, False),
    # Exists with an empty key tolerates every taint.
    ({"operator": "Exists"}, GPU_TAINT, True),
    ({"operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
    # Equal with an empty key tolerates nothing.
    ({"operator": "Equal", "value": "true"}, GPU_TAINT, False),
    # Effect: empty matches all, else it must match.
    ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU_TAINT, True),
    ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
    ({"key": "gpu", "operator": "Exists"}, {**GPU_TAINT, "effect": "NoExecute"}, True),
    # An unknown operator tolerates nothing.
    ({"key": "gpu", "operator": "Gt", "value": "true"}, GPU_TAINT, False),
])
def test_toleration_semantics(toleration: dict[str, Any], taint: dict[str, Any],
                              expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_blocking_effects_only() -> None:
    prefer = {"key": "gpu", "value": "true", "effect": "PreferNoSchedule"}
    no_exec = {"key": "maint", "effect": "NoExecute"}
    assert untolerated_taint(node("n1", taints=[prefer]), []) is None, \
        "PreferNoSchedule only steers the scheduler"
    assert ineligible_reason(node("n1", taints=[prefer]), {}) is None
    assert untolerated_taint(node("n1", taints=[prefer, no_exec]), []) == no_exec
    assert ineligible_reason(node("n1", taints=[no_exec]), {}) == Ineligible.TAINTED
    # Every blocking taint needs a toleration, not just one of them.
    two = node("n1", taints=[GPU_TAINT, no_exec])
    only_gpu = [{"key": "gpu", "operator": "Exists"}]
    assert untolerated_taint(two, only_gpu) == no_exec
    assert untolerated_taint(two, [*only_gpu, {"key": "maint", "operator": "Exists"}]) is None


# --- node affinity -----------------------------------------------------------------------


@pytest.mark.parametrize("req,value,expected", [
    (expr("k", "In", "a", "b"), "b", True),
    (expr("k", "In", "a", "b"), "c", False),
    (expr("k", "In", "a"), None, False),
    (expr("k", "NotIn", "a"), "b", True),
    (expr("k", "NotIn", "a"), "a", False),
    (expr("k", "NotIn", "a"), None, True),
    (expr("k", "Exists"), "", True),
    (expr("k", "Exists"), None, False),
    (expr("k", "DoesNotExist"), None, True),
    (expr("k", "DoesNotExist"), "x", False),
    (expr("k", "Gt", "4"), "8", True),
    (expr("k", "Gt", "8"), "8", False),
    (expr("k", "Gt", "4"), "many", False),
    (expr("k", "Gt", "4"), None, False),
    (expr("k", "Gt", "4", "5"), "8", False),
    (expr("k", "Lt", "4"), "2", True),
    (expr("k", "Lt", "4"), "4", False),
    (expr("k", "Lt", "x"), "2", False),
    # Integers as Go's strconv.ParseInt reads them: a sign, no '_' separators, 64 bits.
    (expr("k", "Gt", "-5"), "+3", True),
    (expr("k", "Gt", "500"), "1_000", False),
    (expr("k", "Lt", "2000"), "1_000", False),
    (expr("k", "Gt", "1_0"), "20", False),
    (expr("k", "Gt", "1"), "99999999999999999999", False),
    (expr("k", "Near", "a"), "a", False),
])
def test_requirement_operators(req: dict[str, Any], value: str | None,
                               expected: bool) -> None:
    assert requirement_matches(req, value) is expected


def test_affinity_operators_on_node_labels() -> None:
    n = node("n1", zone="a", cpus="16")
    ok = [expr("zone", "In", "a", "b"), expr("zone", "NotIn", "c"), expr("cpus", "Exists"),
          expr("gpu", "DoesNotExist"), expr("cpus", "Gt", "8"), expr("cpus", "Lt", "32")]
    for req in ok:
        assert ineligible_reason(n, affinity({"matchExpressions": [req]})) is None, req
    bad = [expr("zone", "In", "b"), expr("zone", "NotIn", "a"), expr("gpu", "Exists"),
           expr("cpus", "DoesNotExist"), expr("cpus", "Gt", "16"), expr("cpus", "Lt", "16")]
    for req in bad:
        assert ineligible_reason(n, affinity({"matchExpressions": [req]})) \
            == Ineligible.NODE_AFFINITY, req


def test_term_needs_all_requirements_and_any_term_matches() -> None:
    n = node("n1", zone="a", disk="ssd")
    both = {"matchExpressions": [expr("zone", "In", "a"), expr("disk", "In", "hdd")]}
    assert not term_matches(both, n), "requirements of one term are ANDed"
    other = {"matchExpressions": [expr("disk", "In", "ssd")]}
    assert ineligible_reason(n, affinity(both)) == Ineligible.NODE_AFFINITY
    assert ineligible_reason(n, affinity(both, other)) is None, "terms are ORed"


def test_match_fields_on_the_node_name() -> None:
    n = node("n1")
    assert term_matches({"matchFields": [expr("metadata.name", "In", "n1")]}, n)
    assert not term_matches({"matchFields": [expr("metadata.name", "In", "n2")]}, n)
    assert term_matches({"matchFields": [expr("metadata.name", "NotIn", "n2")]}, n)
    assert not term_matches({"matchFields": [expr("metadata.name", "NotIn", "n1")]}, n)
    # Only metadata.name is a node field: another field is absent.
    assert not term_matches({"matchFields": [expr("metadata.uid", "In", "n1")]}, n)
    # A label named like the field is not the field.
    labelled = node("n2", **{"metadata.name": "n1"})
    assert not term_matches({"matchFields": [expr("metadata.name", "In", "n1")]}, labelled)
    # matchExpressions and matchFields of one term are ANDed.
    mixed = {"matchExpressions": [expr("zone", "In", "a")],
             "matchFields": [expr("metadata.name", "In", "n1")]}
    assert not term_matches(mixed, n)
    assert term_matches(mixed, node("n1", zone="a"))


def test_empty_term_and_no_terms_select_nothing() -> None:
    n = node("n1")
    assert not term_matches({}, n)
    assert not term_matches({"matchExpressions": [], "matchFields": []}, n)
    assert ineligible_reason(n, affinity({})) == Ineligible.NODE_AFFINITY
    assert ineligible_reason(n, affinity()) == Ineligible.NODE_AFFINITY
    no_required = {"affinity": {"nodeAffinity": {}}}
    assert ineligible_reason(n, no_required) is None


def test_matches_flavor_labels() -> None:
    n = node("n1", **{"instance-type": "spot"})
    assert matches_labels(n, None) and matches_labels(n, {})
    assert matches_labels(n, {"instance-type": "spot"})
    assert not matches_labels(n, {"instance-type": "on-demand"})
    assert not matches_labels(n, {"instance-type": "spot", "zone": "a"})


# --- eligible_nodes and the summary --------------------------------------------------------


def test_eligible_nodes_sorted_with_reasons() -> None:
    nodes = [node("n3"), node("n1"), node("n2", ready=False), node("n4"),
             node("n5", taints=[GPU_TAINT])]
    got = eligible_nodes(nodes, {}, ["n4"])
    assert got.eligible == ("n1", "n3")
    assert got.ineligible == {"n2": Ineligible.NOT_READY, "n4": Ineligible.EXCLUDED,
                              "n5": Ineligible.TAINTED}


def test_summary_counts_each_reason_in_rule_order() -> None:
    nodes = [node("a", ready=False), node("b", ready=False), node("c", unschedulable=True),
             node("d"), node("e", taints=[GPU_TAINT]), node("f", disk="ssd"), node("g"),
             node("h", disk="hdd"), node("i", taints=[GPU_TAINT, {"key": "x",
                                                                 "effect": "NoExecute"}])]
    pod = {"nodeSelector": {"disk": "ssd"}}
    got = eligible_nodes(nodes, pod, ["d"])
    assert got.eligible == ("f",)
    assert got.summary() == (
        "of 9 nodes: 1 is excluded by spec.excludeNodeList, 2 are not Ready, "
        "1 is cordoned (spec.unschedulable), 2 have a taint the pod template does not "
        "tolerate, 2 do not match spec.template.spec.nodeSelector")
    one_each = eligible_nodes([node("a", unschedulable=True), node("b", taints=[GPU_TAINT]),
                               node("c")], pod)
    assert one_each.summary() == (
        "of 3 nodes: 1 is cordoned (spec.unschedulable), 1 has a taint the pod template "
        "does not tolerate, 1 does not match spec.template.spec.nodeSelector")


def test_summary_singular_and_empty() -> None:
    assert Eligibility(("n1",), {}).summary() == "of 1 node"
    assert Eligibility((), {}).summary() == "of 0 nodes"
    pod = affinity({"matchExpressions": [expr("x", "Exists")]})
    one = eligible_nodes([node("n1")], pod)
    assert one.summary() == ("of 1 node: 1 does not match the template's required node "
                             "affinity")
    two = eligible_nodes([node("n1"), node("n2")], pod)
    assert two.summary() == ("of 2 nodes: 2 do not match the template's required node "
                             "affinity")


# --- pinning -----------------------------------------------------------------------------


PIN = {"key": "metadata.name", "operator": "In", "values": ["n1"]}


def test_pin_without_terms_adds_one_term() -> None:
    pod: dict[str, Any] = {"containers": []}
    pin_to_node(pod, "n1")
    assert pod["affinity"] == {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [PIN]}]}}}
    assert "nodeName" not in pod, "the scheduler still places the pod"


def test_pin_is_anded_into_every_term() -> None:
    t1 = {"matchExpressions": [expr("zone", "In", "a")]}
    t2 = {"matchExpressions": [expr("zone", "In", "b")],
          "matchFields": [expr("metadata.name", "NotIn", "n9")]}
    preferred = [{"weight": 5, "preference": {"matchExpressions": [expr("x", "Exists")]}}]
    pod: dict[str, Any] = affinity(t1, t2)
    pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = \
        preferred
    pod["affinity"]["podAntiAffinity"] = {"x": 1}
    pin_to_node(pod, "n1")
    na = pod["affinity"]["nodeAffinity"]
    assert na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [expr("zone", "In", "a")], "matchFields": [PIN]},
        {"matchExpressions": [expr("zone", "In", "b")],
         "matchFields": [expr("metadata.name", "NotIn", "n9"), PIN]},
    ]
    assert na["preferredDuringSchedulingIgnoredDuringExecution"] == preferred
    assert pod["affinity"]["podAntiAffinity"] == {"x": 1}
    assert t1 == {"matchExpressions": [expr("zone", "In", "a")]}, "the input terms are copied"
    # The pinned template selects that node only, and only where a term did.
    terms = na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert any(term_matches(t, node("n1", zone="a")) for t in terms)
    assert not any(term_matches(t, node("n2", zone="a")) for t in terms)
    assert not any(term_matches(t, node("n1", zone="c")) for t in terms)


def test_pin_with_empty_required_terms_adds_one_term() -> None:
    pod: dict[str, Any] = affinity()
    pin_to_node(pod, "n1")
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] \
        == {"nodeSelectorTerms": [{"matchFields": [PIN]}]}
