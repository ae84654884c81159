"""Kueue API models: lossless round trips and condition helpers."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobframework.api import (
    ClusterQueue,
    Condition,
    LocalQueue,
    ObjectMeta,
    PodSet,
    ResourceFlavor,
    Workload,
    WorkloadList,
    WorkloadPriorityClass,
    WorkloadSpec,
    find_condition,
    has_condition_with_type_and_reason,
    is_condition_true,
    remove_condition,
    set_condition,
)

# A Workload as Kueue writes it after admission and a preemption (shape from a real cluster).
REAL_WORKLOAD: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {
        "name": "job-sample-job-ce737",
        "namespace": "default",
        "uid": "4f2f3c1e-6d0a-4d43-9c1f-9a9f0b3c2d11",
        "resourceVersion": "12345",
        "generation": 2,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"kueue.x-k8s.io/job-uid": "a1b2"},
        "annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "60"},
        "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": "sample-job", "uid": "a1b2",
            "controller": True, "blockOwnerDeletion": True,
        }],
        "managedFields": [{"manager": "kueue-admission", "operation": "Apply",
                           "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}],
    },
    "spec": {
        "active": True,
        "queueName": "user-queue",
        "priority": 100,
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                             "name": "high"},
        "maximumExecutionTimeSeconds": 3600,
        "podSets": [{
            "name": "main",
            "count": 3,
            "minCount": 1,
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "c", "image": "busybox", "args": ["sleep", "30"],
                        "resources": {"requests": {"cpu": "1", "memory": "200Mi"}},
                    }],
                    "someFutureField": {"nested": [1, 2, 3]},
                },
            },
            "topologyRequest": {"podIndexLabel": "batch.kubernetes.io/job-completion-index"},
        }],
    },
    "status": {
        "conditions": [
            {"type": "QuotaReserved", "status": "False", "reason": "PendingEvaluation",
             "message": "Preempted", "lastTransitionTime": "2026-01-01T00:01:00Z",
             "observedGeneration": 2},
            {"type": "Evicted", "status": "True", "reason": "Preempted",
             "message": "Preempted to accommodate a higher priority Workload",
             "lastTransitionTime": "2026-01-01T00:01:00Z", "observedGeneration": 2},
            {"type": "Requeued", "status": "True", "reason": "Preempted", "message": "",
             "lastTransitionTime": "2026-01-01T00:01:00Z"},
        ],
        "admission": {
            "clusterQueue": "cluster-queue",
            "podSetAssignments": [{
                "name": "main", "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
                "resourceUsage": {"cpu": "3", "memory": "600Mi"}, "count": 3,
                "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": [
                    {"domainCount": 1, "valuesPerLevel": [{"universal": "node-1"}],
                     "podCounts": {"universal": 3}}]},
            }],
        },
        "requeueState": {"count": 1, "requeueAt": "2026-01-01T00:02:00Z"},
        "reclaimablePods": [{"name": "main", "count": 1}],
        "admissionChecks": [{
            "name": "prov", "state": "Ready", "lastTransitionTime": "2026-01-01T00:00:30Z",
            "message": "", "podSetUpdates": [{"name": "main", "labels": {"a": "b"},
                                              "tolerations": [{"key": "k", "operator": "Exists"}]}],
        }],
        "resourceRequests": [{"name": "main", "resources": {"cpu": "1"}}],
        "accumulatedPastExecutionTimeSeconds": 60,
        "schedulingStats": {"evictions": [{"reason": "Preempted", "underlyingCause": "",
                                           "count": 1}]},
        "unknownStatusField": "kept",
    },
}


def test_real_workload_round_trips() -> None:
    original = copy.deepcopy(REAL_WORKLOAD)
    wl = Workload.model_validate(REAL_WORKLOAD)
    assert wl.to_dict() == original
    assert Workload.from_dict(original).to_dict() == original
    assert original == REAL_WORKLOAD  # validation does not mutate its input
    assert wl.spec.pod_sets[0].template["spec"]["someFutureField"] == {"nested": [1, 2, 3]}
    assert wl.status is not None and wl.status.admission is not None
    assert wl.status.admission.pod_set_assignments[0].flavors == {
        "cpu": "default-flavor", "memory": "default-flavor"}


def test_workload_helpers() -> None:
    wl = Workload.from_dict(REAL_WORKLOAD)
    assert wl.is_evicted()
    assert not wl.has_quota_reservation()
    assert not wl.is_admitted()
    assert not wl.is_finished()
    assert wl.is_active()
    assert wl.can_be_partially_admitted()
    assert wl.key == "default/job-sample-job-ce737"
    assert wl.metadata.controller_ref() is not None
    wl.spec.active = False
    assert not wl.is_active()
    assert wl.to_dict()["spec"]["active"] is False


def test_assignment_is_dumped() -> None:
    wl = Workload.from_dict({"spec": {"podSets": [{"name": "main", "count": 1}]}})
    wl.spec.queue_name = "q"
    assert wl.to_dict() == {"spec": {"podSets": [{"name": "main", "count": 1}], "queueName": "q"}}


def test_built_in_code_carries_type_meta() -> None:
    wl = Workload(metadata=ObjectMeta(name="w", namespace="ns"),
                  spec=WorkloadSpec(pod_sets=[PodSet(name="main", count=2, template={})]))
    assert wl.to_dict() == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podSets": [{"name": "main", "count": 2, "template": {}}]},
    }


def test_list_items_without_type_meta_round_trip() -> None:
    data = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadList",
            "metadata": {"resourceVersion": "9"}, "items": [{"metadata": {"name": "a"}}]}
    assert WorkloadList.model_validate(data).to_dict() == data


def test_strict_validation_rejects_coercion() -> None:
    with pytest.raises(pydantic.ValidationError):
        Workload.model_validate({"spec": {"podSets": [{"name": "main", "count": "1"}]}})
    with pytest.raises(pydantic.ValidationError):
        Workload.model_validate({"spec": {"active": 1}})


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (LocalQueue, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                      "metadata": {"name": "user-queue", "namespace": "default"},
                      "spec": {"clusterQueue": "cq", "stopPolicy": "None"},
                      "status": {"pendingWorkloads": 0, "admittedWorkloads": 1,
                                 "reservingWorkloads": 1, "flavorsUsage": [{"name": "f"}]}}),
        (ClusterQueue, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                        "metadata": {"name": "cq"},
                        "spec": {"namespaceSelector": {}, "resourceGroups": [{
                            "coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [
                                {"name": "cpu", "nominalQuota": 9}]}]}],
                            "admissionChecksStrategy": {"admissionChecks": [{"name": "mk"}]}}}),
        (ResourceFlavor, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                          "metadata": {"name": "f"},
                          "spec": {"nodeLabels": {"zone": "a"},
                                   "tolerations": [{"key": "k", "effect": "NoSchedule"}]}}),
        (WorkloadPriorityClass, {"apiVersion": "kueue.x-k8s.io/v1beta2",
                                 "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
                                 "value": 1000, "description": "d"}),
    ],
)
def test_queue_models_round_trip(model: type[Any], data: dict[str, Any]) -> None:
    assert model.model_validate(data).to_dict() == data


def test_cluster_queue_admission_check_names() -> None:
    cq = ClusterQueue.from_dict({"spec": {"admissionChecksStrategy": {
        "admissionChecks": [{"name": "a"}, {"name": "b", "onFlavors": ["f"]}]}}})
    assert cq.admission_check_names() == ["a", "b"]


# --- hypothesis: generated valid Workloads survive the round trip -------------------------

names = st.text(alphabet="abcdefgh-.0123", min_size=1, max_size=8)
text = st.text(max_size=12)
json_leaf = st.none() | st.booleans() | st.integers(-(2**31), 2**31) | text
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
# Keys that are not fields of the model they are added to (camelCase, as the API would add).
extra_keys = st.text(alphabet="ABCxyz", min_size=1, max_size=6).map(lambda s: "x" + s.upper())


def with_extras(base: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.tuples(base, st.dictionaries(extra_keys, json_value, max_size=2)).map(
        lambda t: {**t[0], **t[1]})


def optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


conditions = st.lists(with_extras(st.fixed_dictionaries(
    {"type": st.sampled_from(["Admitted", "QuotaReserved", "Evicted", "Finished", "PodsReady"]),
     "status": st.sampled_from(["True", "False", "Unknown"])},
    optional={"reason": text, "message": text, "observedGeneration": st.integers(0, 10),
              "lastTransitionTime": st.just("2026-01-01T00:00:00Z")})), max_size=3)
pod_set = with_extras(st.fixed_dictionaries(
    {"name": names, "count": st.integers(0, 1000)},
    optional={"minCount": st.integers(1, 10) | st.none(),
              "template": st.dictionaries(text, json_value, max_size=3),
              "topologyRequest": with_extras(optional(
                  required=names, unconstrained=st.booleans(), subGroupCount=st.integers(0, 9),
                  podsetSliceRequiredTopologyConstraints=st.lists(optional(
                      topology=names, size=st.integers(1, 9)), max_size=3)))}))
assignment = with_extras(st.fixed_dictionaries(
    {"name": names},
    optional={"flavors": st.dictionaries(names, names, max_size=2),
              "resourceUsage": st.dictionaries(names, st.sampled_from(["1", "100m", 2]),
                                               max_size=2),
              "count": st.integers(0, 9) | st.none(),
              "topologyAssignment": optional(levels=st.lists(names, max_size=2))}))
status = with_extras(optional(
    conditions=conditions,
    admission=with_extras(st.fixed_dictionaries(
        {"clusterQueue": names, "podSetAssignments": st.lists(assignment, max_size=2)})),
    requeueState=optional(count=st.integers(0, 9), requeueAt=st.just("2026-01-01T00:00:00Z")),
    reclaimablePods=st.lists(st.fixed_dictionaries({"name": names,
                                                    "count": st.integers(0, 9)}), max_size=2),
    admissionChecks=st.lists(with_extras(optional(
        name=names, state=st.sampled_from(["Pending", "Ready", "Retry", "Rejected"]),
        message=text, podSetUpdates=st.lists(st.fixed_dictionaries(
            {"name": names}, optional={"labels": st.dictionaries(names, names, max_size=2)}),
            max_size=2))), max_size=2),
    accumulatedPastExecutionTimeSeconds=st.integers(0, 999),
))
workload = with_extras(st.fixed_dictionaries(
    {"spec": with_extras(st.fixed_dictionaries(
        {"podSets": st.lists(pod_set, min_size=1, max_size=3)},
        optional={"queueName": names, "priority": st.integers(-5, 5) | st.none(),
                  "active": st.booleans() | st.none(),
                  "priorityClassRef": optional(group=names, kind=names, name=names),
                  "maximumExecutionTimeSeconds": st.integers(1, 99)}))},
    optional={"apiVersion": st.just("kueue.x-k8s.io/v1beta2"), "kind": st.just("Workload"),
              "metadata": with_extras(optional(
                  name=names, namespace=names, labels=st.dictionaries(names, names, max_size=2),
                  finalizers=st.lists(names, max_size=2), generation=st.integers(1, 9))),
              "status": status}))


@settings(max_examples=60, deadline=None)
@given(workload)
def test_generated_workloads_round_trip(data: dict[str, Any]) -> None:
    original = copy.deepcopy(data)
    assert Workload.model_validate(data).to_dict() == original


# --- conditions -----------------------------------------------------------------------------

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)


@pytest.mark.parametrize("as_dict", [False, True])
def test_set_condition_semantics(as_dict: bool) -> None:
    def mk(status: str, reason: str, message: str = "m", gen: int = 1) -> Any:
        if as_dict:
            return {"type": "PodsReady", "status": status, "reason": reason,
                    "message": message, "observedGeneration": gen}
        return Condition(type="PodsReady", status=status, reason=reason, message=message,
                         observed_generation=gen)

    def get(c: Any, key: str) -> Any:
        return c[key] if as_dict else c.model_dump(by_alias=True)[key]

    conds: list[Any] = []
    assert set_condition(conds, mk("False", "WaitForStart"), now=T0)
    c = find_condition(conds, "PodsReady")
    assert c is not None
    assert get(c, "lastTransitionTime") == "2026-01-01T00:00:00Z"
    # Same status, new reason: updated in place, transition time kept.
    assert set_condition(conds, mk("False", "WaitForRecovery"), now=T1)
    assert get(c, "reason") == "WaitForRecovery"
    assert get(c, "lastTransitionTime") == "2026-01-01T00:00:00Z"
    # Nothing differs: no change.
    assert not set_condition(conds, mk("False", "WaitForRecovery"), now=T1)
    # observedGeneration alone is a change.
    assert set_condition(conds, mk("False", "WaitForRecovery", gen=2), now=T1)
    assert get(c, "observedGeneration") == 2
    # Status flips: the transition time moves.
    assert set_condition(conds, mk("True", "Started", "ok"), now=T1)
    assert get(c, "lastTransitionTime") == "2026-01-01T00:05:00Z"
    assert get(c, "status") == "True"
    assert is_condition_true(conds, "PodsReady")
    assert has_condition_with_type_and_reason(conds, mk("True", "Started", "other"))
    assert not has_condition_with_type_and_reason(conds, mk("True", "Recovered"))
    assert len(conds) == 1
    assert remove_condition(conds, "PodsReady")
    assert not remove_condition(conds, "PodsReady")
    assert conds == []


def test_new_condition_serializes_required_fields() -> None:
    conds: list[Condition] = []
    set_condition(conds, Condition(type="Finished", status="True"), now=T0)
    assert conds[0].to_dict() == {"type": "Finished", "status": "True", "reason": "",
                                  "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}


def test_explicit_transition_time_wins() -> None:
    conds: list[Condition] = []
    set_condition(conds, Condition(type="A", status="True", reason="r", message="",
                                   last_transition_time="2020-01-01T00:00:00Z"), now=T0)
    assert conds[0].last_transition_time == "2020-01-01T00:00:00Z"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["A", "B"]), st.sampled_from(["True", "False"]),
                          st.sampled_from(["r1", "r2"])), max_size=12))
def test_set_condition_transition_time_tracks_status_changes(
        updates: list[tuple[str, str, str]]) -> None:
    conds: list[Condition] = []
    last_change: dict[str, str] = {}
    current: dict[str, tuple[str, str]] = {}
    for i, (type_, status, reason) in enumerate(updates):
        now = T0 + dt.timedelta(seconds=i)
        changed = set_condition(conds, Condition(type=type_, status=status, reason=reason,
                                                 message=""), now=now)
        assert changed == (current.get(type_) != (status, reason))
        if type_ not in current or current[type_][0] != status:
            last_change[type_] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        current[type_] = (status, reason)
    assert sorted(c.type for c in conds) == sorted(current)
    for c in conds:
        assert (c.status, c.reason) == current[c.type]
        assert c.last_transition_time == last_change[c.type]


@pytest.mark.parametrize("as_dict", [False, True])
def test_zero_observed_generation_is_omitted(as_dict: bool) -> None:
    existing: Any = {"type": "A", "status": "True", "reason": "r", "message": "",
                     "observedGeneration": 3, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    conds: list[Any] = [existing if as_dict else Condition.from_dict(existing)]
    new: Any = {"type": "A", "status": "True", "reason": "r", "message": ""}
    assert set_condition(conds, new if as_dict else Condition(**new), now=T1)
    dumped = conds[0] if as_dict else conds[0].to_dict()
    assert dumped == {"type": "A", "status": "True", "reason": "r", "message": "",
                      "lastTransitionTime": "2026-01-01T00:00:00Z"}
