"""TAS annotation validation, after Kueue's tas_validation_test.go (plus exact messages)."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.api import PodSet
from jobframework.constants import FeatureGates
from jobframework.field import new_path
from jobframework.validation import (
    is_qualified_name,
    quantity_value,
    semantic_equal,
    validate_immutable_pod_group_pod_spec,
    validate_label_name,
    validate_pod_set_grouping_topology,
    validate_slice_size_annotation_upper_bound,
    validate_tas_pod_set_request,
)

REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
UNC = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQ = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"
REPLICA = new_path("spec", "template", "metadata")
ANN = "spec.template.metadata.annotations"
GATE_OFF = FeatureGates(TASMultiLayerTopology=False)


@pytest.mark.kueue_case(
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/valid: single constraint layer",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/valid: two constraint layers",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/valid: three constraint layers",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/invalid: not valid JSON",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/invalid: empty array",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/invalid: more than 3 entries",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/invalid: size less than 1",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/invalid: size does not divide parent",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/invalid: mutual exclusivity with "
    "podset-slice-required-topology",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/invalid: with podset-group-name",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/invalid: feature gate disabled",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/invalid: duplicate topology labels",
    "TestValidateSliceRequiredTopologyConstraintsAnnotation/invalid: duplicate topology label "
    "among three entries",
)
@pytest.mark.parametrize(
    ("constraints", "extra", "features", "count"),
    [
        ('[{"topology":"cloud.com/rack","size":16}]', {}, None, 0),
        ('[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname",'
         '"size":4}]', {}, None, 0),
        ('[{"topology":"cloud.com/rack","size":16},{"topology":"cloud.com/sub-rack","size":4},'
         '{"topology":"kubernetes.io/hostname","size":2}]', {}, None, 0),
        ("invalid-json", {}, None, 1),
        ("[]", {}, None, 1),
        ('[{"topology":"a","size":64},{"topology":"b","size":16},{"topology":"c","size":4},'
         '{"topology":"d","size":1}]', {}, None, 1),
        ('[{"topology":"cloud.com/rack","size":0}]', {}, None, 1),
        ('[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname",'
         '"size":5}]', {}, None, 1),
        ('[{"topology":"cloud.com/rack","size":16}]',
         {SLICE_REQ: "cloud.com/rack", SLICE_SIZE: "16"}, None, 2),
        ('[{"topology":"cloud.com/rack","size":16}]', {GROUP: "group1"}, None, 1),
        ('[{"topology":"cloud.com/rack","size":16}]', {}, GATE_OFF, 1),
        ('[{"topology":"cloud.com/rack","size":16},{"topology":"cloud.com/rack","size":4}]',
         {}, None, 1),
        ('[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname",'
         '"size":4},{"topology":"cloud.com/rack","size":2}]', {}, None, 1),
    ],
)
def test_constraints_error_counts(constraints: str, extra: dict[str, str],
                                  features: FeatureGates | None, count: int) -> None:
    meta = {"annotations": {REQ: "cloud.com/block", CONSTRAINTS: constraints, **extra}}
    kw = {"features": features} if features else {}
    assert len(validate_tas_pod_set_request(REPLICA, meta, **kw)) == count


def test_constraint_messages() -> None:
    def errs(constraints: str) -> list[str]:
        meta = {"annotations": {REQ: "cloud.com/block", CONSTRAINTS: constraints}}
        return [str(e) for e in validate_tas_pod_set_request(REPLICA, meta)]

    base = f"{ANN}[{CONSTRAINTS}]"
    assert errs('[{"topology":"r","size":16},{"topology":"h","size":5}]') == [
        f"{base}[1].size: Invalid value: 5: must evenly divide the parent layer size 16"]
    assert errs('[{"topology":"r","size":16},{"topology":"r","size":4}]') == [
        f'{base}[1].topology: Duplicate value: "r (also at index 0)"']
    assert errs("[]") == [
        f'{base}: Invalid value: "[]": topology constraints must contain between 1 and 3 '
        "entries"]
    assert errs('[{"topology":"r","size":0}]') == [
        f"{base}[0].size: Invalid value: 0: must be greater than or equal to 1"]
    meta = {"annotations": {REQ: "b", CONSTRAINTS: "[]"}}
    assert [str(e) for e in validate_tas_pod_set_request(REPLICA, meta, features=GATE_OFF)] == [
        f"{base}: Forbidden: the TASMultiLayerTopology feature gate must be enabled to use "
        "this annotation"]


@pytest.mark.parametrize(
    ("annotations", "messages"),
    [
        ({REQ: "cloud.com/block"}, []),
        ({REQ: "a", PREF: "b"}, [
            f'{ANN}: Invalid value: must not contain more than one topology annotation: '
            f'["{REQ}", "{PREF}", "{UNC}"]']),
        ({UNC: "yes"}, [f'{ANN}[{UNC}]: Invalid value: "yes": must be a boolean value']),
        ({UNC: "True"}, []),
        ({SLICE_REQ: "cloud.com/rack"}, [
            f"{ANN}[{SLICE_SIZE}]: Required value: must be set when '{SLICE_REQ}' is "
            "specified"]),
        ({SLICE_SIZE: "2"}, [
            f"{ANN}[{SLICE_SIZE}]: Forbidden: may not be set when '{SLICE_REQ}' is not "
            "specified"]),
        ({SLICE_REQ: "r", SLICE_SIZE: "x"}, [
            f'{ANN}[{SLICE_SIZE}]: Invalid value: "x": must be a numeric value']),
        ({SLICE_REQ: "r", SLICE_SIZE: "0"}, [
            f'{ANN}[{SLICE_SIZE}]: Invalid value: "0": must be greater than or equal to 1']),
        ({REQ: "b", GROUP: "123"}, [f'{ANN}[{GROUP}]: Invalid value: "123": must not be a number']),
        ({GROUP: "g"}, [
            f"{ANN}[{GROUP}]: Forbidden: may not be set when neither '{PREF}' nor '{REQ}' is "
            "specified"]),
        ({REQ: "b", GROUP: "g", SLICE_REQ: "r", SLICE_SIZE: "1"}, [
            f"{ANN}[{GROUP}]: Forbidden: may not be set when '{SLICE_SIZE}' is specified",
            f"{ANN}[{GROUP}]: Forbidden: may not be set when '{SLICE_REQ}' is specified"]),
        ({REQ: "bad value"}, [
            f'{ANN}[{REQ}]: Invalid value: "bad value": name part must consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]),
    ],
)
def test_tas_request_messages(annotations: dict[str, str], messages: list[str]) -> None:
    got = validate_tas_pod_set_request(REPLICA, {"annotations": annotations})
    assert [str(e) for e in got] == messages


@pytest.mark.kueue_case(
    "TestValidateSliceSizeAnnotationUpperBound/valid: PodSetSliceSizeAnnotation within bound",
    "TestValidateSliceSizeAnnotationUpperBound/invalid: PodSetSliceSizeAnnotation exceeds pod "
    "count",
    "TestValidateSliceSizeAnnotationUpperBound/valid: multi-layer outermost size within bound",
    "TestValidateSliceSizeAnnotationUpperBound/invalid: multi-layer outermost size exceeds pod "
    "count",
)
@pytest.mark.parametrize(
    ("annotations", "count", "want"),
    [
        ({SLICE_SIZE: "16", SLICE_REQ: "cloud.com/rack", REQ: "cloud.com/block"}, 20, []),
        ({SLICE_SIZE: "20", SLICE_REQ: "cloud.com/rack", REQ: "cloud.com/block"}, 16, [
            f'{ANN}[{SLICE_SIZE}]: Invalid value: "20": must not be greater than pod set '
            "count 16"]),
        ({REQ: "cloud.com/block", CONSTRAINTS: '[{"topology":"cloud.com/rack","size":16},'
          '{"topology":"kubernetes.io/hostname","size":4}]'}, 20, []),
        ({REQ: "cloud.com/block", CONSTRAINTS: '[{"topology":"cloud.com/rack","size":16},'
          '{"topology":"kubernetes.io/hostname","size":4}]'}, 10, [
            f"{ANN}[{CONSTRAINTS}]: Invalid value: 16: must not be greater than pod set count "
            "10"]),
    ],
)
def test_slice_size_upper_bound(annotations: dict[str, str], count: int,
                                want: list[str]) -> None:
    got = validate_slice_size_annotation_upper_bound(
        REPLICA, {"annotations": annotations}, PodSet(name="main", count=count))
    assert [str(e) for e in got] == want
    assert validate_slice_size_annotation_upper_bound(REPLICA, {}, None) == []


def test_qualified_names() -> None:
    assert is_qualified_name("example.com/MyName") == []
    assert is_qualified_name("a/b/c")[0].startswith("a valid label key must consist of")
    assert is_qualified_name("/x") == ["prefix part must be non-empty"]
    assert is_qualified_name("x/")[0] == "name part must be non-empty"
    assert is_qualified_name("Bad_Prefix/x")[0].startswith(
        "prefix part a lowercase RFC 1123 subdomain")
    assert "name part must be no more than 63 characters" in is_qualified_name("a" * 64)
    assert [str(e) for e in validate_label_name("ok", "p")] == []


# --- ValidateImmutablePodGroupPodSpec (validation_test.go TestValidateImmutablePodSpec) -------

SPEC = new_path("spec")


def container(image: str = "busybox", cpu: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": image}
    if cpu is not None:
        c["resources"] = {"requests": {"cpu": cpu}}
    return c


@pytest.mark.kueue_case(
    "TestValidateImmutablePodSpec/add container",
    "TestValidateImmutablePodSpec/remove container",
    "TestValidateImmutablePodSpec/change image on container",
    "TestValidateImmutablePodSpec/change request on container",
    "TestValidateImmutablePodSpec/add init container",
    "TestValidateImmutablePodSpec/remove init container",
    "TestValidateImmutablePodSpec/change request on init container",
    "TestValidateImmutablePodSpec/change nodeTemplate",
    "TestValidateImmutablePodSpec/add toleration",
    "TestValidateImmutablePodSpec/change toleration",
    "TestValidateImmutablePodSpec/delete toleration",
    "TestValidateImmutablePodSpec/change runtimeClassName",
    "TestValidateImmutablePodSpec/change priority",
)
@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        ({}, {"containers": [container()]}, [
            'spec.containers: Invalid value: [{"ports":null,"resources":{"requests":null}}]: '
            "field is immutable"]),
        ({"containers": [container()]}, {},
         ["spec.containers: Invalid value: null: field is immutable"]),
        ({"containers": [container("other")]}, {"containers": [container("busybox")]}, []),
        ({"containers": [container(cpu="100m")]}, {"containers": [container(cpu="200m")]}, [
            'spec.containers[0].resources.requests: Invalid value: {"cpu":"200m"}: field is '
            "immutable"]),
        ({"containers": [container(cpu="1")]}, {"containers": [container(cpu="1000m")]}, []),
        ({}, {"initContainers": [container()]}, [
            'spec.initContainers: Invalid value: [{"ports":null,"resources":{"requests":null}}]: '
            "field is immutable"]),
        ({"initContainers": [container()]}, {}, [
            "spec.initContainers: Invalid value: null: field is immutable"]),
        ({"initContainers": [container(cpu="100m")]}, {"initContainers": [container()]}, [
            "spec.initContainers[0].resources.requests: Invalid value: null: field is "
            "immutable"]),
        ({}, {"nodeSelector": {"k": "v"}}, [
            'spec.nodeSelector: Invalid value: {"k":"v"}: field is immutable']),
        ({}, {"tolerations": [{"key": "k"}]}, [
            'spec.tolerations: Invalid value: [{"key":"k"}]: field is immutable']),
        ({"tolerations": [{"key": "k"}]}, {"tolerations": [{"key": "k2"}]}, [
            'spec.tolerations: Invalid value: [{"key":"k2"}]: field is immutable']),
        ({"tolerations": [{"key": "k"}]}, {}, [
            "spec.tolerations: Invalid value: null: field is immutable"]),
        ({}, {"runtimeClassName": "gvisor"}, [
            'spec.runtimeClassName: Invalid value: "gvisor": field is immutable']),
        ({"priority": 1}, {"priority": 2}, ["spec.priority: Invalid value: 2: field is immutable"]),
        ({"tolerations": []}, {}, []),
        ({"containers": [container()]}, {"containers": [container()],
                                         "resources": {"requests": {"cpu": "1"}}}, [
            'spec.resources: Invalid value: {"cpu":"1"}: field is immutable']),
    ],
)
def test_immutable_pod_group_pod_spec(old: dict[str, Any], new: dict[str, Any],
                                      want: list[str]) -> None:
    got = validate_immutable_pod_group_pod_spec(new, old, SPEC)
    assert [str(e) for e in got] == want


def test_quantities() -> None:
    assert quantity_value("100m") == quantity_value("0.1")
    assert quantity_value("1Gi") == 2**30
    assert quantity_value("1e3") == 1000
    assert quantity_value(2) == 2
    assert quantity_value("abc") is None
    assert semantic_equal({"cpu": "1"}, {"cpu": "1000m"}, quantities=True)
    assert not semantic_equal({"cpu": "1"}, {"cpu": "1000m"})
    assert semantic_equal(None, {})
    assert not semantic_equal([1], [1, 2])


def grouped(name: str, count: int, group: str, **req: str) -> PodSet:
    return PodSet.from_dict({"name": name, "count": count,
                             "topologyRequest": {"podSetGroupName": group, **req}})


def paths(*names: str) -> dict[str, Any]:
    return {n: new_path("spec", "replicatedJobs").key(n).child("annotations") for n in names}


def test_pod_set_grouping_topology() -> None:
    ok = [grouped("leader", 1, "g", required="rack"), grouped("workers", 4, "g", required="rack")]
    assert validate_pod_set_grouping_topology(ok, paths("leader", "workers")) == []
    lone = [grouped("a", 1, "g", required="rack"), PodSet(name="b", count=2)]
    assert [str(e) for e in validate_pod_set_grouping_topology(lone, paths("a", "b"))] == [
        'spec.replicatedJobs[a].annotations[kueue.x-k8s.io/podset-group-name]: Invalid value: '
        '"g": can only define groups of exactly 2 pod sets, got: 1 pod set(s)']
    big = [grouped("a", 2, "g", required="rack"), grouped("b", 3, "g", preferred="rack")]
    got = [str(e) for e in validate_pod_set_grouping_topology(big, paths("a", "b"))]
    assert got == [
        'spec.replicatedJobs[a].annotations[kueue.x-k8s.io/podset-group-name]: Invalid value: '
        '"g": can only define groups where at least one pod set has only 1 replica, got: 2 '
        "replica(s) and 3 replica(s) in the group",
        'spec.replicatedJobs[b].annotations[kueue.x-k8s.io/podset-group-name]: Invalid value: '
        '"g": can only define groups where at least one pod set has only 1 replica, got: 2 '
        "replica(s) and 3 replica(s) in the group",
        "spec.replicatedJobs[a].annotations: Invalid value: must specify "
        "'kueue.x-k8s.io/podset-required-topology' or 'kueue.x-k8s.io/podset-preferred-topology'"
        " topology consistent with 'spec.replicatedJobs[b].annotations' in group 'g'",
        "spec.replicatedJobs[b].annotations: Invalid value: must specify "
        "'kueue.x-k8s.io/podset-required-topology' or 'kueue.x-k8s.io/podset-preferred-topology'"
        " topology consistent with 'spec.replicatedJobs[a].annotations' in group 'g'",
    ]
