"""The hostile-tenant pass without a cluster (not marked ``faults``: runs with the unit
tests): the placement rules' checkers fed states that break them (and their correct
counterparts), the tenant's objects and how it judges what came of its edits."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.daemonjob.api import DaemonJobSpec
from integrations.jobflow.api import JobFlowSpec
from jobframework import constants as c
from jobframework.runtime.errors import Forbidden, InternalError
from jobframework.testing.cluster import COMPLETE_DELAY_ANNOTATION
from jobframework.testing.invariants import (
    AdmittedPodSet,
    admitted_pod_sets,
    pods_off_flavor,
    pods_over_admission,
)

from .harness import hostile_lifecycles, lifecycle_object
from .tenant import (
    ELSEWHERE,
    HOSTILE_KINDS,
    POD_CPU,
    claiming_job,
    classify_claim,
    classify_refusal,
    classify_scaled,
    elsewhere,
    hostile_objects,
)

FLAVORS = {"on-demand": {"instance-type": "on-demand"}, "spot": {"instance-type": "spot"},
           "anywhere": {}}
NODES = {"od-0": {"instance-type": "on-demand", "zone": "a"},
         "spot-0": {"instance-type": "spot", "zone": "a"},
         "bare": {"zone": "a"}}


def pod(name: str, node: str | None = "od-0", podset: str | None = "main") -> dict[str, Any]:
    labels = {c.PODSET_LABEL: podset} if podset is not None else {}
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def admitted(*sets: tuple[str, int, str]) -> list[AdmittedPodSet]:
    return [AdmittedPodSet(name=n, count=k, flavors=(f,)) for n, k, f in sets]


# --- the Workload's admission, as the rules read it ---------------------------------------------


def test_the_admitted_pod_sets_come_from_the_workloads_admission() -> None:
    wl = {"spec": {"podSets": [{"name": "a", "count": 4}, {"name": "b", "count": 2}]},
          "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
              {"name": "a", "count": 3, "flavors": {"cpu": "on-demand",
                                                   "memory": "on-demand"}},
              # No count: the PodSet's own (Kueue reads it so).
              {"name": "b", "flavors": {"cpu": "spot", "nvidia.com/gpu": "gpu"}}]}}}
    assert admitted_pod_sets(wl) == [
        AdmittedPodSet(name="a", count=3, flavors=("on-demand",)),
        AdmittedPodSet(name="b", count=2, flavors=("gpu", "spot"))]
    assert admitted_pod_sets({"spec": {}, "status": {}}) == []


# --- pods-off-flavor -----------------------------------------------------------------------------


def test_a_pod_on_a_node_of_another_flavor_is_off_its_flavor() -> None:
    [(found, why)] = pods_off_flavor([pod("p", "spot-0")], admitted(("main", 1, "on-demand")),
                                     NODES, FLAVORS)
    assert found["metadata"]["name"] == "p"
    assert why == ("pod p runs on node spot-0: PodSet main was admitted on flavor on-demand "
                   "(instance-type=on-demand), the node has instance-type=spot")
    [(_, why)] = pods_off_flavor([pod("p", "bare")], admitted(("main", 1, "on-demand")),
                                 NODES, FLAVORS)
    assert why.endswith("the node has no instance-type label")


def test_a_pod_is_held_to_its_own_pod_sets_flavor() -> None:
    sets = admitted(("a", 1, "on-demand"), ("b", 1, "spot"))
    # b's pod on on-demand nodes is off its flavor although a's flavor is on-demand.
    off = pods_off_flavor([pod("a-0", "od-0", "a"), pod("b-0", "od-0", "b")], sets,
                          NODES, FLAVORS)
    assert [p["metadata"]["name"] for p, _ in off] == ["b-0"]
    # Without a PodSet label (the tenant's own pods) any admitted PodSet's flavor fits.
    assert pods_off_flavor([pod("x", "spot-0", None)], sets, NODES, FLAVORS) == []
    assert len(pods_off_flavor([pod("x", "bare", None)], sets, NODES, FLAVORS)) == 1


@pytest.mark.parametrize("case", ["right node", "not scheduled", "node unknown",
                                  "flavor unknown", "flavor without labels"])
def test_pods_that_cannot_be_off_their_flavor_are_not_flagged(case: str) -> None:
    flavor = {"flavor unknown": "gone", "flavor without labels": "anywhere"}.get(
        case, "on-demand")
    node = {"not scheduled": None, "node unknown": "elsewhere",
            "right node": "od-0"}.get(case, "spot-0")
    assert pods_off_flavor([pod("p", node)], admitted(("main", 1, flavor)),
                           NODES, FLAVORS) == []


# --- pods-over-admission -------------------------------------------------------------------------


def test_more_pods_than_admitted_are_counted_per_pod_set_and_in_all() -> None:
    sets = admitted(("a", 1, "on-demand"), ("b", 2, "on-demand"))
    # A step scaled to 3: over its PodSet, over the whole admission too.
    scaled = [pod(f"a-{i}", podset="a") for i in range(3)] + [pod("b-0", podset="b")]
    assert pods_over_admission(scaled, sets) == [
        "3 pods of PodSet a where 1 was admitted", "4 pods in all where 3 were admitted"]
    # Pods without a PodSet label (a Job claiming the parent) count in all.
    assert pods_over_admission([pod("a-0", podset="a")]
                               + [pod(f"x-{i}", podset=None) for i in range(3)], sets) == [
        "4 pods in all where 3 were admitted"]


def test_pods_within_the_admission_are_fine() -> None:
    sets = admitted(("a", 1, "on-demand"), ("b", 2, "on-demand"))
    assert pods_over_admission([pod("a-0", podset="a"), pod("b-0", podset="b"),
                                pod("b-1", podset="b")], sets) == []
    assert pods_over_admission([pod("x")], []) == []  # nothing admitted: another rule's


# --- the tenant's lifecycles ---------------------------------------------------------------------


def test_the_tenant_takes_a_share_of_each_attacked_kind_and_nothing_else() -> None:
    kinds = ["jobflow", "daemonjob", "appwrapper", "batchjob"] * 10
    chosen = hostile_lifecycles(kinds, 0.3, seed=2026)
    by_kind = {k: sum(1 for i in chosen if kinds[i] == k) for k in set(kinds)}
    assert by_kind == {"jobflow": 3, "daemonjob": 3, "appwrapper": 3, "batchjob": 0}
    assert hostile_lifecycles(kinds, 0.3, seed=2026) == chosen  # the seed's
    assert hostile_lifecycles(kinds, 0.0, seed=2026) == set()
    # At least one of each kind, however small the share.
    few = hostile_lifecycles(kinds, 0.01, seed=1)
    assert sorted(kinds[i] for i in few) == sorted(HOSTILE_KINDS)


def runs_for(template: dict[str, Any]) -> str:
    return str(template["metadata"]["annotations"][COMPLETE_DELAY_ANNOTATION])


def test_the_tenants_jobflow_has_a_later_step_from_a_jobtemplate() -> None:
    base = lifecycle_object("jobflow", "jobflow-0003", "ns", "q", "faults-low")
    template, flow = hostile_objects("jobflow", base, 25.0)
    assert (template["kind"], template["metadata"]["name"]) == ("JobTemplate",
                                                               "jobflow-0003-t")
    flows = JobFlowSpec.of(flow).flows
    assert [(f.name, f.dependencies, f.job_template_ref) for f in flows] == [
        ("a", (), ""), ("b", ("a",), "jobflow-0003-t")]
    step = flow["spec"]["flows"][0]["jobTemplate"]
    # A work queue of one pod at once: a larger parallelism really runs more pods.
    assert (step["parallelism"], step.get("completions"), step["backoffLimit"]) == (1, None, 6)
    assert runs_for(step["template"]) == "25s"
    assert template["spec"]["jobTemplate"]["parallelism"] == 1
    assert "annotations" not in template["spec"]["jobTemplate"]["template"].get("metadata", {})


def test_the_tenants_daemonjob_and_appwrapper_have_children_with_a_size() -> None:
    [dj] = hostile_objects("daemonjob", lifecycle_object(
        "daemonjob", "daemonjob-0001", "ns", "q", "faults-low"), 25.0)
    spec = DaemonJobSpec.of(dj)
    assert (spec.job_spec["parallelism"], spec.job_spec["backoffLimit"]) == (1, 6)
    assert runs_for(dj["spec"]["template"]) == "25s"
    # Its run is the admitted flavor's nodes: the Workload counts those only.
    assert dj["spec"]["template"]["spec"]["nodeSelector"] == {"instance-type": "on-demand"}
    assert dj["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": POD_CPU}}
    [aw] = hostile_objects("appwrapper", lifecycle_object(
        "appwrapper", "appwrapper-0002", "ns", "q", "faults-low"), 25.0)
    [component] = aw["spec"]["components"]
    job = component["template"]
    assert (job["kind"], job["metadata"]["name"], job["spec"]["parallelism"]) == (
        "Job", "appwrapper-0002-0", 1)
    assert runs_for(job["spec"]["template"]) == "25s"
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": POD_CPU}}


def test_the_tenants_edits_point_elsewhere() -> None:
    infos = [{"name": "a", "nodeSelector": {"instance-type": "on-demand"}}]
    assert elsewhere(infos) == [{"name": "a", "nodeSelector": ELSEWHERE,
                                 "tolerations": [{"operator": "Exists"}]}]
    assert infos[0]["nodeSelector"] == {"instance-type": "on-demand"}  # a copy
    parent = {"apiVersion": "api.practice.com/v1alpha1", "kind": "JobFlow",
              "metadata": {"name": "f", "namespace": "ns", "uid": "u-1"}}
    job = claiming_job(parent, 25.0, {"containers": [{"name": "c"}]})
    assert job["metadata"]["name"] == "f-claim"
    assert job["metadata"]["ownerReferences"] == [{
        "apiVersion": "api.practice.com/v1alpha1", "kind": "JobFlow", "name": "f",
        "uid": "u-1", "controller": True}]
    assert job["spec"]["template"]["spec"]["nodeSelector"] == ELSEWHERE
    assert "suspend" not in job["spec"] and "labels" not in job["metadata"]


# --- judging the outcomes ----------------------------------------------------------------------


def test_a_refusal_is_our_webhooks_denial_and_transient_errors_are_tried_again() -> None:
    field = "metadata.annotations[jobflow.api.practice.com/pod-sets-info]"
    denied = Forbidden(f'admission webhook "v.jobflow" denied the request: {field}: '
                       "Forbidden: holds the admission Kueue granted")
    assert classify_refusal(denied, field) == "refused"
    # Refused, but not by the rule under test: the pass would prove nothing.
    frozen = Forbidden('admission webhook "v.jobflow" denied the request: spec.flows: '
                       "Forbidden: may not be changed")
    assert classify_refusal(frozen, field) == "refused-elsewhere"
    assert classify_refusal(None) == "accepted"
    assert classify_refusal(InternalError("failed calling webhook ...")) is None
    assert classify_refusal(ConnectionResetError()) is None
    with pytest.raises(AssertionError, match="unexpectedly"):  # RBAC's, not the webhook's
        classify_refusal(Forbidden('jobflows "f" is forbidden: User cannot patch'))


def job(parallelism: int, *, suspend: bool = False, done: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Complete", "status": "True"}] if done else []
    return {"spec": {"parallelism": parallelism, "suspend": suspend},
            "status": {"conditions": conditions}}


def test_a_scaled_child_is_judged_by_its_size_and_state() -> None:
    assert classify_scaled(job(3), 1) is None  # not yet
    assert classify_scaled(job(1), 1) == "set-back"
    assert classify_scaled(job(3, suspend=True), 1) == "stopped"
    assert classify_scaled(None, 1) == "stopped"
    assert classify_scaled(job(3, done=True), 1) == "kept"


def test_a_claiming_job_must_be_suspended() -> None:
    assert classify_claim(job(2)) is None
    assert classify_claim(job(2, suspend=True)) == "suspended"
    assert classify_claim(job(2, done=True)) == "ran"
