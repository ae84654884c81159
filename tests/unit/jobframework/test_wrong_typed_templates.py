"""Pod templates the API server keeps as sent (a CRD with
``x-kubernetes-preserve-unknown-fields``) may hold any JSON where a list or an object
belongs. The webhooks refuse them naming the field, but past a bypassed webhook the
shared helpers that read them (Kueue's pod sets, child Jobs, node pinning) must not fail
with a Python error: parts of the wrong type are never read as what they should be."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.daemonjob.nodes import (
    Ineligible,
    eligible_nodes,
    ineligible_reason,
    pin_to_node,
    required_terms,
    term_matches,
)
from jobframework.api.workload import PodSet
from jobframework.childjobs import merge_pod_template_params
from jobframework.podset import sanitize_pod_set

NODE = {"metadata": {"name": "n1", "labels": {"zone": "a"}}, "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
ENV = [{"name": "A", "value": "1"}]


def pod_set(spec: Any) -> PodSet:
    return PodSet(name="main", count=1, template={"spec": spec})


@pytest.mark.parametrize("spec", [
    "pods", {"containers": 576}, {"containers": ["main", None]},
    {"containers": [{"name": "c", "env": "A=1"}]},
    {"containers": [{"name": "c", "env": [True, {"name": ["x"]}, {"name": "A"}]}]},
], ids=repr)
def test_sanitize_leaves_wrong_types_as_sent(spec: Any) -> None:
    ps = pod_set(copy.deepcopy(spec))
    sanitize_pod_set(ps)
    assert ps.template["spec"] == spec


def test_sanitize_still_deduplicates_names_around_wrong_items() -> None:
    ps = pod_set({"containers": [{"name": "c", "env": [
        {"name": "A", "value": "1"}, True, {"name": "A", "value": "2"}]}]})
    sanitize_pod_set(ps)
    assert ps.template["spec"]["containers"][0]["env"] == [{"name": "A", "value": "2"}, True]


@pytest.mark.parametrize("template", [
    {"metadata": {"labels": "x", "annotations": ["y"]}, "spec": {"containers": 576}},
    {"metadata": "meta", "spec": "pods"},
    {"spec": {"containers": "main", "initContainers": [7]}},
], ids=repr)
def test_merge_params_never_reads_wrong_types(template: Any) -> None:
    job_spec = {"template": copy.deepcopy(template)}
    merge_pod_template_params(job_spec, labels={"l": "v"}, annotations={"a": "b"}, env=ENV)
    meta = job_spec["template"]["metadata"]
    assert (meta["labels"], meta["annotations"]) == ({"l": "v"}, {"a": "b"})


def test_merge_params_keeps_env_items_of_the_wrong_type_for_the_api_server() -> None:
    job_spec = {"template": {"spec": {"containers": [{"name": "c", "env": [
        True, {"name": ["x"]}, {"name": "A", "value": "own"}, {"name": "B"}]}]}}}
    merge_pod_template_params(job_spec, env=ENV)
    assert job_spec["template"]["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "1"}, True, {"name": ["x"]}, {"name": "B"}]


@pytest.mark.parametrize("affinity", [
    None, "any", {"nodeAffinity": None}, {"nodeAffinity": 1},
    {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": None}},
    {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": 3}}},
    {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [None, "t"]}}},
], ids=repr)
def test_pin_to_node_reads_null_and_wrong_types_as_unset(affinity: Any) -> None:
    pod: dict[str, Any] = {"affinity": affinity}
    pin_to_node(pod, "n1")
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] \
        == {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}


def test_pin_to_node_keeps_other_affinity_and_ands_into_terms() -> None:
    pod: dict[str, Any] = {"affinity": {"podAffinity": {"x": 1}, "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
             "matchFields": None}]}}}}
    pin_to_node(pod, "n1")
    assert pod["affinity"]["podAffinity"] == {"x": 1}
    (term,) = pod["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In",
                                    "values": ["n1"]}]


@pytest.mark.parametrize("pod", [
    {"tolerations": ["NoSchedule", 3]}, {"tolerations": "all"}, {"nodeSelector": "zone=a"},
    {"affinity": "x"}, {"affinity": {"nodeAffinity": 1}},
], ids=repr)
def test_eligibility_reads_wrong_types_as_unset(pod: dict[str, Any]) -> None:
    assert ineligible_reason(NODE, pod) is None
    assert eligible_nodes([NODE], pod).eligible == ("n1",)


def test_required_affinity_without_a_list_of_terms_selects_no_node() -> None:
    pod = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": 3}}}}
    assert required_terms(pod) == []
    assert ineligible_reason(NODE, pod) == Ineligible.NODE_AFFINITY


def test_terms_with_wrong_typed_requirements_match_nothing() -> None:
    term = {"matchExpressions": ["zone"], "matchFields": 3}
    assert not term_matches(term, NODE)
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": 7}]}
    assert not term_matches(term, NODE)
    assert required_terms({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            "t", {"matchFields": []}]}}}}) == [{"matchFields": []}]
