"""jsonshape: the JSON type checks a webhook runs on what the API server keeps as sent."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.field import Path
from jobframework.jsonshape import POD_TEMPLATE_SHAPE, QUANTITY, MapOf, json_type, shape_errors

TEMPLATE = Path.new("spec", "template")


def errors_of(value: Any, shape: Any = POD_TEMPLATE_SHAPE) -> list[str]:
    return [str(e) for e in shape_errors(value, shape, TEMPLATE)]


def test_a_valid_pod_template_has_no_errors() -> None:
    assert errors_of({
        "metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "A"}],
                                 "resources": {"requests": {"cpu": "100m", "memory": 1024}}}],
                 "nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}],
                 "affinity": {"nodeAffinity": {
                     "requiredDuringSchedulingIgnoredDuringExecution": {
                         "nodeSelectorTerms": [{"matchExpressions": [
                             {"key": "k", "operator": "In", "values": ["v"]}]}]}}},
                 "unknownField": [1, "anything"]}}) == []


def test_absent_and_null_members_are_unset() -> None:
    assert errors_of(None) == []
    assert errors_of({"spec": {"affinity": None, "containers": None}}) == []


@pytest.mark.parametrize(("template", "expected"), [
    ({"spec": "pods"},
     'spec.template.spec: Invalid value: "string": must be an object'),
    ({"spec": {"containers": {"name": "c"}}},
     'spec.template.spec.containers: Invalid value: "object": must be an array'),
    ({"spec": {"containers": [None]}},
     'spec.template.spec.containers[0]: Invalid value: "null": must be an object'),
    ({"spec": {"containers": [{"env": [True]}]}},
     'spec.template.spec.containers[0].env[0]: Invalid value: "boolean": must be an object'),
    ({"spec": {"nodeSelector": {"zone": 1}}},
     'spec.template.spec.nodeSelector[zone]: Invalid value: "integer": must be a string'),
    ({"spec": {"containers": [{"resources": {"limits": {"cpu": "lots"}}}]}},
     'spec.template.spec.containers[0].resources.limits[cpu]: Invalid value: "lots": '
     "must be a quantity (e.g. 100m, 1Gi, 2)"),
    ({"metadata": {"labels": []}},
     'spec.template.metadata.labels: Invalid value: "array": must be an object'),
])
def test_each_wrong_type_is_named_by_its_field(template: Any, expected: str) -> None:
    assert errors_of(template) == [expected]


def test_every_wrong_member_is_reported() -> None:
    assert errors_of({"spec": {"tolerations": ["x", {}], "volumes": 3}}) == [
        'spec.template.spec.volumes: Invalid value: "integer": must be an array',
        'spec.template.spec.tolerations[0]: Invalid value: "string": must be an object',
    ]


def test_a_boolean_is_no_integer_and_a_quantity_may_be_a_number() -> None:
    assert errors_of(True, int) == [
        'spec.template: Invalid value: "boolean": must be an integer']
    assert errors_of(3, int) == []
    assert errors_of(2.5, QUANTITY) == []
    assert errors_of(False, QUANTITY) == [
        'spec.template: Invalid value: "boolean": must be a quantity (e.g. 100m, 1Gi, 2)']


def test_map_values_and_type_unions() -> None:
    assert errors_of({"a": "x", "b": None}, MapOf(str)) == [
        'spec.template[b]: Invalid value: "null": must be a string']
    assert errors_of(["x", 1, 1.5], [(str, int)]) == [
        'spec.template[2]: Invalid value: "number": must be a string or an integer']


@pytest.mark.parametrize(("value", "name"), [
    (None, "null"), (True, "boolean"), (1, "integer"), (1.5, "number"), ("", "string"),
    ([], "array"), ({}, "object")])
def test_json_type_names(value: Any, name: str) -> None:
    assert json_type(value) == name
