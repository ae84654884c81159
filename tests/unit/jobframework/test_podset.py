"""PodSetInfo: merge / restore / from_assignment, after Kueue's podset_test.go."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobframework.api import PodSet, PodSetAssignment, Workload
from jobframework.constants import FeatureGates
from jobframework.podset import (
    InvalidPodsetInfoError,
    InvalidPodSetUpdateError,
    PodSetInfo,
    TopologyRequestError,
    bad_pod_sets_info_len_error,
    from_assignment,
    is_permanent,
    merge_into_template,
    pod_set_topology_request,
    pod_sets_info_from_status,
    restore_pod_spec,
    sanitize_pod_set,
    sanitize_pod_sets,
)
from jobframework.runtime.errors import NotFound, new_not_found
from jobframework.runtime.objects import GVK, Object

T0 = {"key": "t0", "operator": "Equal", "value": "t0v", "effect": "NoSchedule"}
T1 = {"key": "t1", "operator": "Equal", "value": "t1v", "effect": "NoSchedule"}


def base_template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"l0": "l0v"}, "annotations": {"a0": "a0v"}},
        "spec": {"nodeSelector": {"ns0": "ns0v"}, "tolerations": [dict(T0)],
                 "containers": [{"name": "c"}]},
    }


ELASTIC_ON = FeatureGates(ElasticJobsViaWorkloadSlices=True)
ELASTIC_OFF = FeatureGates(ElasticJobsViaWorkloadSlices=False)
SLICE = "kueue.x-k8s.io/workload-slice-name"
WL = "kueue.x-k8s.io/workload"


def ann_template(ann: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"annotations": dict(ann)}, "spec": {}}


CASES: list[tuple[str, dict[str, Any], PodSetInfo, FeatureGates, dict[str, Any] | None, bool]] = [
    ("empty info", base_template(), PodSetInfo(), FeatureGates(), base_template(), False),
    ("no conflicts", base_template(),
     PodSetInfo(annotations={"a1": "a1v"}, labels={"l1": "l1v"}, node_selector={"ns1": "ns1v"},
                tolerations=[dict(T1)]), FeatureGates(),
     {"metadata": {"labels": {"l0": "l0v", "l1": "l1v"},
                   "annotations": {"a0": "a0v", "a1": "a1v"}},
      "spec": {"nodeSelector": {"ns0": "ns0v", "ns1": "ns1v"}, "tolerations": [T0, T1],
               "containers": [{"name": "c"}]}}, True),
    ("don't duplicate tolerations", base_template(),
     PodSetInfo(annotations={"a1": "a1v"}, labels={"l1": "l1v"}, node_selector={"ns1": "ns1v"},
                tolerations=[dict(T0)]), FeatureGates(),
     {"metadata": {"labels": {"l0": "l0v", "l1": "l1v"},
                   "annotations": {"a0": "a0v", "a1": "a1v"}},
      "spec": {"nodeSelector": {"ns0": "ns0v", "ns1": "ns1v"}, "tolerations": [T0],
               "containers": [{"name": "c"}]}}, True),
    ("tolerations differing only by empty vs Equal operator", base_template(),
     PodSetInfo(tolerations=[{"key": "t0", "value": "t0v", "effect": "NoSchedule"}]),
     FeatureGates(), base_template(), False),
    ("podset with scheduling gate; empty info",
     {"spec": {"schedulingGates": [{"name": "example.com/gate"}]}}, PodSetInfo(), FeatureGates(),
     {"spec": {"schedulingGates": [{"name": "example.com/gate"}]}}, False),
    ("podset with scheduling gate; info re-adds the same",
     {"spec": {"schedulingGates": [{"name": "example.com/gate"}]}},
     PodSetInfo(scheduling_gates=[{"name": "example.com/gate"}]), FeatureGates(),
     {"spec": {"schedulingGates": [{"name": "example.com/gate"}]}}, False),
    ("podset with scheduling gate; info adds another",
     {"spec": {"schedulingGates": [{"name": "example.com/gate"}]}},
     PodSetInfo(scheduling_gates=[{"name": "example.com/gate2"}]), FeatureGates(),
     {"spec": {"schedulingGates": [{"name": "example.com/gate"},
                                   {"name": "example.com/gate2"}]}}, True),
    ("template without metadata; info adds labels", {"spec": {"containers": [{"name": "c"}]}},
     PodSetInfo(labels={"kueue.x-k8s.io/podset": "main"}, node_selector={"ns1": "ns1v"}),
     FeatureGates(),
     {"metadata": {"labels": {"kueue.x-k8s.io/podset": "main"}},
      "spec": {"containers": [{"name": "c"}], "nodeSelector": {"ns1": "ns1v"}}}, True),
    ("updated workload slice annotation", ann_template({SLICE: "old-slice"}),
     PodSetInfo(annotations={SLICE: "new-slice"}), ELASTIC_ON,
     ann_template({SLICE: "new-slice"}), True),
    ("updated workload and slice annotations for an elastic admission",
     ann_template({WL: "old-slice", SLICE: "old-slice"}),
     PodSetInfo(annotations={WL: "new-slice", SLICE: "new-slice"}), ELASTIC_ON,
     ann_template({WL: "new-slice", SLICE: "new-slice"}), True),
]


@pytest.mark.parametrize(("name", "template", "info", "features", "want", "restore_changes"),
                         CASES, ids=[c[0] for c in CASES])
def test_merge_and_restore(name: str, template: dict[str, Any], info: PodSetInfo,
                           features: FeatureGates, want: dict[str, Any] | None,
                           restore_changes: bool) -> None:
    orig = copy.deepcopy(template)
    restore_info = PodSetInfo.from_pod_set({"name": "main", "count": 1, "template": orig})
    merge_into_template(template, info, features=features)
    assert template == want
    assert restore_pod_spec(template, restore_info) is restore_changes
    assert template == orig, "the round trip gives back the template exactly"


@pytest.mark.parametrize(
    ("template", "info", "features", "message"),
    [
        (base_template(), PodSetInfo(labels={"l0": "l0v1"}), FeatureGates(),
         "invalid admission check PodSetUpdate: conflict for labels: "
         "conflict for key=l0, value1=l0v, value2=l0v1"),
        (base_template(), PodSetInfo(annotations={"a0": "a0v1"}), FeatureGates(),
         "invalid admission check PodSetUpdate: conflict for annotations: "
         "conflict for key=a0, value1=a0v, value2=a0v1"),
        (base_template(), PodSetInfo(node_selector={"ns0": "ns0v1"}), FeatureGates(),
         "invalid admission check PodSetUpdate: conflict for nodeSelector: "
         "conflict for key=ns0, value1=ns0v, value2=ns0v1"),
        (ann_template({SLICE: "old-slice"}), PodSetInfo(annotations={SLICE: "new-slice"}),
         ELASTIC_OFF, "invalid admission check PodSetUpdate: conflict for annotations: "
         f"conflict for key={SLICE}, value1=old-slice, value2=new-slice"),
        (ann_template({WL: "old-workload"}), PodSetInfo(annotations={WL: "new-workload"}),
         ELASTIC_ON, "invalid admission check PodSetUpdate: conflict for annotations: "
         f"conflict for key={WL}, value1=old-workload, value2=new-workload"),
    ],
)
def test_merge_conflicts(template: dict[str, Any], info: PodSetInfo, features: FeatureGates,
                         message: str) -> None:
    before = copy.deepcopy(template)
    with pytest.raises(InvalidPodSetUpdateError) as exc:
        merge_into_template(template, info, features=features)
    assert str(exc.value) == message
    assert is_permanent(exc.value)
    assert template == before


def test_annotations_checked_before_labels() -> None:
    info = PodSetInfo(annotations={"a": "1"}, labels={"l": "1"})
    with pytest.raises(InvalidPodSetUpdateError, match="conflict for annotations"):
        info.merge(PodSetInfo(annotations={"a": "2"}, labels={"l": "2"}))


def test_info_merge_and_labels() -> None:
    info = PodSetInfo(name="main", count=3)
    info.merge(PodSetInfo(name="other", count=9, labels={"x": "y"},
                          tolerations=[dict(T0)], scheduling_gates=[{"name": "g"}]))
    assert (info.name, info.count) == ("main", 3)
    assert info.labels == {"x": "y"}
    assert info.tolerations == [T0]
    info.merge(PodSetInfo(tolerations=[dict(T0), dict(T1)], scheduling_gates=[{"name": "g"}]))
    assert info.tolerations == [T0, T1]
    assert info.scheduling_gates == [{"name": "g"}]
    fresh = PodSetInfo()
    fresh.add_or_update_label("k", "v")
    fresh.add_or_update_label("k", "w")
    assert fresh.labels == {"k": "w"}


def test_from_pod_set_and_update() -> None:
    ps = PodSet.from_dict({"name": "main", "count": 4, "template": {
        "metadata": {"labels": {"a": "b"}},
        "spec": {"affinity": {"nodeAffinity": {}}, "schedulingGates": [{"name": "g"}]}}})
    info = PodSetInfo.from_pod_set(ps)
    assert info == PodSetInfo(name="main", count=4, labels={"a": "b"},
                              affinity={"nodeAffinity": {}}, scheduling_gates=[{"name": "g"}])
    # A clone: editing the info leaves the Workload spec alone.
    assert info.labels is not None
    info.labels["x"] = "y"
    assert ps.template["metadata"]["labels"] == {"a": "b"}
    upd = PodSetInfo.from_update({"name": "main", "labels": {"l": "v"},
                                  "tolerations": [dict(T1)]})
    assert upd == PodSetInfo(labels={"l": "v"}, tolerations=[T1])


def test_restore_treats_absent_and_empty_alike() -> None:
    template: dict[str, Any] = {"metadata": {"labels": {}}, "spec": {"tolerations": []}}
    assert not restore_pod_spec(template, PodSetInfo())
    template = {"metadata": {"labels": {"kueue.x-k8s.io/podset": "main"}}, "spec": {}}
    assert restore_pod_spec(template, PodSetInfo())
    assert template == {"spec": {}}, "a metadata the restore empties is removed"
    template = {"metadata": {"name": "x", "labels": {"kueue.x-k8s.io/podset": "main"}}}
    assert restore_pod_spec(template, PodSetInfo())
    assert template == {"metadata": {"name": "x"}}, "other metadata stays"
    template = {"metadata": {}}
    assert not restore_pod_spec(template, PodSetInfo())
    assert template == {"metadata": {}}, "an empty metadata the restore did not empty stays"


@pytest.mark.parametrize("template", [
    {"spec": {"containers": [{"name": "c"}]}},
    {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}},
    {"metadata": {"labels": {"app": "a"}}, "spec": {"tolerations": [T0]}},
    {},
], ids=["no metadata", "metadata without labels", "labels and tolerations", "empty"])
def test_admission_round_trip_is_exact(template: dict[str, Any]) -> None:
    """What the reconciler does to a pod template: inject the admission (flavor, labels,
    tolerations, scheduling gate), then restore it from the Workload's copy."""
    orig = copy.deepcopy(template)
    restore_info = PodSetInfo.from_pod_set({"name": "main", "count": 1, "template": orig})
    merge_into_template(template, PodSetInfo(
        labels={"kueue.x-k8s.io/podset": "main"}, annotations={"a": "b"},
        node_selector={"instance-type": "spot"}, tolerations=[dict(T1)],
        scheduling_gates=[{"name": "kueue.x-k8s.io/topology"}]))
    assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "main"
    assert template["spec"]["nodeSelector"] == {"instance-type": "spot"}
    assert restore_pod_spec(template, restore_info)
    assert template == orig
    assert not restore_pod_spec(template, restore_info), "a second restore changes nothing"


def test_len_error() -> None:
    err = bad_pod_sets_info_len_error(1, 2)
    assert isinstance(err, InvalidPodsetInfoError)
    assert str(err) == "invalid podset infos: expecting 1 podset, got 2"
    assert is_permanent(err)
    assert not is_permanent(ValueError("x"))


class FlavorReader:
    """A minimal reader serving ResourceFlavors."""

    def __init__(self, *flavors: Object) -> None:
        self.objects = {f["metadata"]["name"]: f for f in flavors}
        self.gets: list[str] = []

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        assert gvk.kind == "ResourceFlavor"
        self.gets.append(name)
        if name not in self.objects:
            raise new_not_found("resourceflavors", name, "kueue.x-k8s.io")
        return copy.deepcopy(self.objects[name])

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def flavor(name: str, labels: dict[str, str], tolerations: list[Object] | None = None) -> Object:
    spec: dict[str, Any] = {"nodeLabels": labels}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": name}, "spec": spec}


async def test_from_assignment_single_and_multiple_flavors() -> None:
    reader = FlavorReader(flavor("flavor1", {"f1l1": "f1v1"}, [dict(T0)]),
                          flavor("flavor2", {"f2l1": "f2v1"}, [dict(T1)]))
    ps = PodSet(name="main", count=2)
    one = await from_assignment(reader, PodSetAssignment(name="main", flavors={"cpu": "flavor1"}),
                                ps)
    assert one == PodSetInfo(name="main", count=2, annotations={}, labels={},
                             node_selector={"f1l1": "f1v1"}, tolerations=[T0])
    reader.gets.clear()
    both = await from_assignment(reader, PodSetAssignment(
        name="main", count=1, flavors={"cpu": "flavor1", "mem": "flavor2", "gpu": "flavor1"}), ps)
    assert both.count == 1
    assert both.node_selector == {"f1l1": "f1v1", "f2l1": "f2v1"}
    assert both.tolerations == [T0, T1]
    assert reader.gets == ["flavor1", "flavor2"]  # duplicates read once


async def test_from_assignment_flavor_not_found() -> None:
    with pytest.raises(NotFound) as exc:
        await from_assignment(FlavorReader(), PodSetAssignment(name="main",
                                                               flavors={"cpu": "flavor1"}),
                              PodSet(name="main", count=1))
    assert str(exc.value) == 'resourceflavors.kueue.x-k8s.io "flavor1" not found'


@pytest.mark.parametrize("tas", [True, False])
async def test_from_assignment_topology(tas: bool) -> None:
    features = FeatureGates(TopologyAwareScheduling=tas)
    a = PodSetAssignment.from_dict({"name": "main", "topologyAssignment": {"levels": ["h"]}})
    info = await from_assignment(FlavorReader(), a, PodSet(name="main", count=1),
                                 features=features)
    if tas:
        assert info.scheduling_gates == [{"name": "kueue.x-k8s.io/topology"}]
        assert info.annotations == {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}
    else:
        assert info.scheduling_gates is None
        assert info.annotations == {}
    # A pod set with its own topology request gets no unconstrained annotation.
    ps = PodSet.from_dict({"name": "main", "count": 1, "topologyRequest": {"required": "rack"}})
    info2 = await from_assignment(FlavorReader(), a, ps, features=features)
    assert info2.annotations == {}


def env(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"name": n, "value": v} for n, v in pairs]


@pytest.mark.kueue_case("TestSanitizePodSets/init containers and containers")
def test_sanitize_pod_sets_init_and_containers() -> None:
    ps = PodSet.from_dict({"name": "main", "count": 1, "template": {"spec": {
        "containers": [{"name": "c1", "env": env(("ENV1", "value1"), ("X", "x"),
                                                 ("ENV1", "value2"))}],
        "initContainers": [{"name": "init1", "env": env(("ENV2", "value3"), ("ENV2", "value4"))}],
    }}})
    sanitize_pod_sets([ps])
    spec = ps.template["spec"]
    assert spec["containers"][0]["env"] == env(("ENV1", "value2"), ("X", "x"))
    assert spec["initContainers"][0]["env"] == env(("ENV2", "value4"))


@pytest.mark.kueue_case("TestSanitizePodSets/empty podsets")
def test_sanitize_pod_sets_edge_cases() -> None:
    sanitize_pod_sets([])
    ps = PodSet.from_dict({"name": "main", "count": 1,
                           "template": {"spec": {"containers": [{"name": "c"}]}}})
    sanitize_pod_set(ps)
    assert ps.template == {"spec": {"containers": [{"name": "c"}]}}


# --- TAS topology request (tas_test.go) ------------------------------------------------------

REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
UNC = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQ = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"
IDX = "batch.kubernetes.io/job-completion-index"


@pytest.mark.kueue_case(
    "TestPodSetTopologyRequestBuilder/required annotation",
    "TestPodSetTopologyRequestBuilder/required annotation with pod index label",
    "TestPodSetTopologyRequestBuilder/pod index label only",
    "TestPodSetTopologyRequestBuilder/required annotation with sub group",
    "TestPodSetTopologyRequestBuilder/required annotation with sub group and pod set group name "
    "annotation",
    "TestPodSetTopologyRequestBuilder/preferred annotation",
    "TestPodSetTopologyRequestBuilder/unconstrained annotation (true)",
    "TestPodSetTopologyRequestBuilder/unconstrained annotation (false)",
    "TestPodSetTopologyRequestBuilder/slice-only topology",
    "TestPodSetTopologyRequestBuilder/slice-only topology - only slice required annotation",
    "TestPodSetTopologyRequestBuilder/slice-only topology - only slice size annotation",
    "TestPodSetTopologyRequestBuilder/slice-only topology with sub group and pod set group name "
    "annotation",
    "TestPodSetTopologyRequestBuilder/multi-layer: three constraint layers with feature gate",
    "TestPodSetTopologyRequestBuilder/multi-layer: two constraint layers with feature gate",
)
@pytest.mark.parametrize(
    ("annotations", "kwargs", "want"),
    [
        ({REQ: "cloud.com/block"}, {}, {"required": "cloud.com/block"}),
        ({REQ: "cloud.com/block"}, {"pod_index_label": IDX},
         {"required": "cloud.com/block", "podIndexLabel": IDX}),
        ({}, {"pod_index_label": IDX}, {"podIndexLabel": IDX}),
        ({REQ: "cloud.com/block", GROUP: "block"},
         {"sub_group_index_label": "jobset.sigs.k8s.io/job-index", "sub_group_count": 1},
         {"required": "cloud.com/block", "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
          "subGroupCount": 1, "podSetGroupName": "block"}),
        ({PREF: "cloud.com/block"}, {}, {"preferred": "cloud.com/block"}),
        ({UNC: "true"}, {}, {"unconstrained": True}),
        ({UNC: "false"}, {}, {"unconstrained": False}),
        ({SLICE_REQ: "cloud.com/block", SLICE_SIZE: "1"}, {},
         {"podSetSliceRequiredTopology": "cloud.com/block", "podSetSliceSize": 1}),
        ({SLICE_REQ: "cloud.com/block"}, {}, None),
        ({SLICE_SIZE: "1"}, {}, None),
        ({SLICE_REQ: "cloud.com/block", SLICE_SIZE: "1", GROUP: "block"},
         {"sub_group_index_label": "jobset.sigs.k8s.io/job-index", "sub_group_count": 1},
         {"podSetSliceRequiredTopology": "cloud.com/block", "podSetSliceSize": 1,
          "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index", "subGroupCount": 1}),
        ({REQ: "cloud.com/block", CONSTRAINTS:
          '[{"topology":"rack","size":16},{"topology":"sub-rack","size":4},'
          '{"topology":"hostname","size":2}]'}, {},
         {"required": "cloud.com/block", "podsetSliceRequiredTopologyConstraints": [
             {"topology": "rack", "size": 16}, {"topology": "sub-rack", "size": 4},
             {"topology": "hostname", "size": 2}]}),
        ({REQ: "cloud.com/block", CONSTRAINTS: '[{"topology":"rack","size":8,"x":1},'
          '{"topology":"hostname","size":2}]'}, {},
         {"required": "cloud.com/block", "podsetSliceRequiredTopologyConstraints": [
             {"topology": "rack", "size": 8}, {"topology": "hostname", "size": 2}]}),
        ({}, {}, None),
    ],
)
def test_topology_request(annotations: dict[str, str], kwargs: dict[str, Any],
                          want: dict[str, Any] | None) -> None:
    got = pod_set_topology_request({"annotations": annotations}, **kwargs)
    assert (got.to_dict() if got is not None else None) == want


@pytest.mark.kueue_case(
    "TestPodSetTopologyRequestBuilder/multi-layer: ignored without feature gate",
)
def test_topology_constraints_ignored_without_gate() -> None:
    meta = {"annotations": {REQ: "cloud.com/block", SLICE_REQ: "cloud.com/rack",
                            SLICE_SIZE: "16", CONSTRAINTS: "[]"}}
    got = pod_set_topology_request(meta, features=FeatureGates(TASMultiLayerTopology=False))
    assert got is not None
    assert got.to_dict() == {"required": "cloud.com/block",
                             "podSetSliceRequiredTopology": "cloud.com/rack",
                             "podSetSliceSize": 16}


@pytest.mark.kueue_case(
    "TestPodSetTopologyRequestBuilder/invalid unconstrained topology annotation value",
    "TestPodSetTopologyRequestBuilder/invalid podset slice size annotation value",
    "TestPodSetTopologyRequestBuilder/multi-layer: zero constraint layers with feature gate",
    "TestPodSetTopologyRequestBuilder/multi-layer: four constraint layers with feature gate",
    "TestPodSetTopologyRequestBuilder/multi-layer: invalid JSON in constraints annotation",
    "TestPodSetTopologyRequestBuilder/multi-layer: invalid JSON in constraints annotation - "
    "expect size as integer",
)
@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({UNC: "invalid"}, 'strconv.ParseBool: parsing "invalid": invalid syntax'),
        ({SLICE_REQ: "b", SLICE_SIZE: "invalid"},
         'strconv.ParseInt: parsing "invalid": invalid syntax'),
        ({REQ: "b", CONSTRAINTS: "[]"},
         "topology constraints must contain between 1 and 3 entries: got 0"),
        ({REQ: "b", CONSTRAINTS: '[{"topology":"a","size":1},{"topology":"b","size":1},'
          '{"topology":"c","size":1},{"topology":"d","size":1}]'},
         "topology constraints must contain between 1 and 3 entries: got 4"),
        ({REQ: "b", CONSTRAINTS: "invalid-json"},
         "failed to parse multi-layer topology constraints annotation: "),
        ({REQ: "b", CONSTRAINTS: '[{"topology":"rack","size":"8"}]'},
         "failed to parse multi-layer topology constraints annotation: "),
    ],
)
def test_topology_request_errors(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(TopologyRequestError) as exc:
        pod_set_topology_request({"annotations": annotations})
    assert str(exc.value).startswith(message)


# --- pod_sets_info_from_status (getPodSetsInfoFromStatus) -------------------------------------


def admitted_workload(**extra: Any) -> Workload:
    wl: dict[str, Any] = {
        "metadata": {"name": "job-a-1b2c3", "namespace": "ns"},
        "spec": {"queueName": "lq", "podSets": [
            {"name": "main", "count": 3, "template": {}},
            {"name": "aux", "count": 1, "template": {}}]},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "flavor1"}, "count": 2},
            {"name": "aux"}]}},
    }
    for key, value in extra.items():
        section, _, field = key.partition("__")
        wl[section][field] = value
    return Workload.from_dict(wl)


async def test_pod_sets_info_from_status() -> None:
    reader = FlavorReader(flavor("flavor1", {"zone": "a"}, [dict(T0)]))
    infos = await pod_sets_info_from_status(reader, admitted_workload())
    assert infos is not None
    main, aux = infos
    assert (main.name, main.count, aux.name, aux.count) == ("main", 2, "aux", 1)
    assert main.node_selector == {"zone": "a"}
    assert main.tolerations == [T0]
    assert main.labels == {"kueue.x-k8s.io/podset": "main",
                           "kueue.x-k8s.io/local-queue-name": "lq",
                           "kueue.x-k8s.io/cluster-queue-name": "cq"}
    assert main.annotations == {"kueue.x-k8s.io/workload": "job-a-1b2c3"}


async def test_pod_sets_info_from_status_gates_and_labels() -> None:
    features = FeatureGates(TopologyAwareScheduling=False, AssignQueueLabelsForPods=False)
    wl = admitted_workload(metadata__labels={"kueue.x-k8s.io/multikueue-origin": "o"},
                           metadata__annotations={"kueue.x-k8s.io/elastic-job": "true"})
    infos = await pod_sets_info_from_status(FlavorReader(flavor("flavor1", {})), wl,
                                            features=features)
    assert infos is not None
    assert infos[0].labels == {"kueue.x-k8s.io/podset": "main",
                               "kueue.x-k8s.io/multikueue-worker-workload-pod": "true"}
    assert infos[0].annotations == {"kueue.x-k8s.io/workload-slice-name": "job-a-1b2c3"}


async def test_invalid_cluster_queue_name_is_not_a_label() -> None:
    wl = admitted_workload()
    assert wl.status is not None and wl.status.admission is not None
    wl.status.admission.cluster_queue = "Not_A_Label"
    infos = await pod_sets_info_from_status(FlavorReader(flavor("flavor1", {})), wl)
    assert infos is not None
    assert "kueue.x-k8s.io/cluster-queue-name" not in (infos[0].labels or {})


async def test_pod_sets_info_from_status_admission_checks() -> None:
    checks = [
        {"name": "prov", "state": "Ready", "message": "", "podSetUpdates": [
            {"name": "main", "labels": {"x": "1"}, "nodeSelector": {"pool": "p"}},
            {"name": "main", "labels": {"ignored": "second entry"}}]},
        {"name": "other", "state": "Ready", "message": "", "podSetUpdates": [
            {"name": "aux", "annotations": {"a": "b"}}]},
    ]
    infos = await pod_sets_info_from_status(FlavorReader(flavor("flavor1", {})),
                                            admitted_workload(status__admissionChecks=checks))
    assert infos is not None
    assert infos[0].labels is not None and infos[0].labels["x"] == "1"
    assert "ignored" not in infos[0].labels
    assert infos[0].node_selector == {"pool": "p"}
    assert infos[1].annotations is not None and infos[1].annotations["a"] == "b"
    conflict = [{"name": "prov", "state": "Ready", "message": "", "podSetUpdates": [
        {"name": "main", "labels": {"kueue.x-k8s.io/podset": "other"}}]}]
    with pytest.raises(InvalidPodSetUpdateError) as exc:
        await pod_sets_info_from_status(FlavorReader(flavor("flavor1", {})),
                                        admitted_workload(status__admissionChecks=conflict))
    assert str(exc.value) == (
        'in admission check "prov": invalid admission check PodSetUpdate: conflict for labels: '
        "conflict for key=kueue.x-k8s.io/podset, value1=main, value2=other")
    assert is_permanent(exc.value)


async def test_no_admission_no_info() -> None:
    wl = Workload.from_dict({"metadata": {"name": "w"}, "spec": {"podSets": []}})
    assert await pod_sets_info_from_status(FlavorReader(), wl) is None
