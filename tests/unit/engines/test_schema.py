"""Structural schema engine: kube-apiserver's validation messages, pruning and defaulting."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jobframework.runtime import errors
from jobframework.testing._schema import SchemaNode, StructuralSchema, strict_decoding_message

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["queueName"],
            "properties": {
                "queueName": {"type": "string", "minLength": 1, "maxLength": 8,
                              "pattern": "^[a-z]+$"},
                "replicas": {"type": "integer", "format": "int32", "minimum": 1,
                             "maximum": 10, "default": 1},
                "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0,
                          "maximum": 1.5},
                "mode": {"type": "string", "enum": ["Fast", "Slow"], "default": "Fast"},
                "size": {"x-kubernetes-int-or-string": True},
                "suspend": {"type": "boolean"},
                "note": {"type": "string", "nullable": True},
                "when": {"type": "string", "format": "date"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"},
                           "maxProperties": 2},
                "tags": {"type": "array", "items": {"type": "string"},
                         "x-kubernetes-list-type": "set", "maxItems": 3},
                "podSets": {
                    "type": "array",
                    "minItems": 1,
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "required": ["name", "count"],
                        "properties": {
                            "name": {"type": "string", "default": "main"},
                            "count": {"type": "integer", "minimum": 0},
                            "template": {"type": "object",
                                         "x-kubernetes-embedded-resource": True,
                                         "x-kubernetes-preserve-unknown-fields": True},
                        },
                    },
                },
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                          "properties": {"known": {"type": "object",
                                                   "properties": {"a": {"type": "string"}}}}},
                "nested": {"type": "object", "default": {},
                           "properties": {"inner": {"type": "string", "default": "x"}}},
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "conditions": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "required": ["type"], "properties": {
                        "type": {"type": "string"}, "status": {"type": "string"}}},
                },
            },
        },
    },
}


def _obj(**spec: Any) -> dict[str, Any]:
    body = {"queueName": "q", "podSets": [{"name": "main", "count": 1}]}
    body.update(spec)
    return {"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": body}


@pytest.fixture(scope="module")
def schema() -> StructuralSchema:
    return StructuralSchema(SCHEMA)


def _only(causes: list[dict[str, str]]) -> dict[str, str]:
    assert len(causes) == 1, causes
    return causes[0]


class TestValidateMessages:
    def test_valid_object_has_no_causes(self, schema: StructuralSchema) -> None:
        assert schema.validate(_obj()) == []

    def test_type_mismatch(self, schema: StructuralSchema) -> None:
        assert _only(schema.validate(_obj(replicas="3"))) == {
            "reason": "FieldValueTypeInvalid",
            "field": "spec.replicas",
            "message": 'Invalid value: "string": spec.replicas in body must be of type '
                       'integer: "string"',
        }
        cause = _only(schema.validate(_obj(suspend=1)))
        assert cause["message"] == ('Invalid value: "integer": spec.suspend in body must be of '
                                    'type boolean: "integer"')

    def test_integral_float_is_an_integer(self, schema: StructuralSchema) -> None:
        assert schema.validate(_obj(replicas=2.0)) == []

    def test_null_needs_nullable(self, schema: StructuralSchema) -> None:
        assert schema.validate(_obj(note=None)) == []
        assert _only(schema.validate(_obj(suspend=None)))["message"] == (
            'Invalid value: "null": spec.suspend in body must be of type boolean: "null"')

    def test_required(self, schema: StructuralSchema) -> None:
        obj = _obj()
        del obj["spec"]["queueName"]
        assert _only(schema.validate(obj)) == {
            "reason": "FieldValueRequired", "field": "spec.queueName", "message": "Required value",
        }
        obj = _obj(podSets=[{"name": "a"}])
        assert _only(schema.validate(obj))["field"] == "spec.podSets[0].count"

    def test_enum(self, schema: StructuralSchema) -> None:
        assert _only(schema.validate(_obj(mode="Medium"))) == {
            "reason": "FieldValueNotSupported",
            "field": "spec.mode",
            "message": 'Unsupported value: "Medium": supported values: "Fast", "Slow"',
        }

    def test_numeric_enum_values_are_quoted_json(self) -> None:
        s = StructuralSchema({"type": "object", "properties": {
            "n": {"type": "integer", "enum": [1, 2]}}})
        assert _only(s.validate({"n": 3}))["message"] == (
            'Unsupported value: 3: supported values: "1", "2"')
        assert s.validate({"n": 2}) == []

    def test_minimum_maximum(self, schema: StructuralSchema) -> None:
        assert _only(schema.validate(_obj(replicas=0)))["message"] == (
            "Invalid value: 0: spec.replicas in body should be greater than or equal to 1")
        assert _only(schema.validate(_obj(replicas=11)))["message"] == (
            "Invalid value: 11: spec.replicas in body should be less than or equal to 10")
        assert _only(schema.validate(_obj(ratio=0)))["message"] == (
            "Invalid value: 0: spec.ratio in body should be greater than 0")
        assert _only(schema.validate(_obj(ratio=1.75)))["message"] == (
            "Invalid value: 1.75: spec.ratio in body should be less than or equal to 1.5")

    def test_int32_range(self, schema: StructuralSchema) -> None:
        causes = schema.validate(_obj(replicas=2**31))
        assert causes[0] == {
            "reason": "FieldValueInvalid", "field": "<nil>",
            "message": 'Invalid value: "": Checked value must be of type integer with format '
                       "int32 in spec.replicas",
        }

    def test_string_constraints_report_the_first_failure(self, schema: StructuralSchema) -> None:
        assert _only(schema.validate(_obj(queueName="abcdefghij"))) == {
            "reason": "FieldValueTooLong", "field": "spec.queueName",
            "message": "Too long: may not be more than 8 bytes",
        }
        assert _only(schema.validate(_obj(queueName="")))["message"] == (
            'Invalid value: "": spec.queueName in body should be at least 1 chars long')
        assert _only(schema.validate(_obj(queueName="Q1")))["message"] == (
            "Invalid value: \"Q1\": spec.queueName in body should match '^[a-z]+$'")

    def test_items_and_properties_counts(self, schema: StructuralSchema) -> None:
        assert _only(schema.validate(_obj(podSets=[])))["message"] == (
            "Invalid value: 0: spec.podSets in body should have at least 1 items")
        assert _only(schema.validate(_obj(tags=["a", "b", "c", "d"]))) == {
            "reason": "FieldValueTooMany", "field": "spec.tags",
            "message": "Too many: 4: must have at most 3 items",
        }
        cause = _only(schema.validate(_obj(labels={"a": "1", "b": "2", "c": "3"})))
        assert cause["message"] == "Too many: 3: must have at most 2 items"

    def test_additional_properties_schema(self, schema: StructuralSchema) -> None:
        assert _only(schema.validate(_obj(labels={"a": 1})))["field"] == "spec.labels.a"

    def test_int_or_string(self, schema: StructuralSchema) -> None:
        assert schema.validate(_obj(size=3)) == []
        assert schema.validate(_obj(size="50%")) == []
        assert _only(schema.validate(_obj(size=True)))["message"] == (
            'Invalid value: "boolean": spec.size in body must be of type integer,string: '
            '"boolean"')

    def test_format(self, schema: StructuralSchema) -> None:
        assert schema.validate(_obj(when="2024-02-29")) == []
        assert _only(schema.validate(_obj(when="2023-02-29"))) == {
            "reason": "FieldValueTypeInvalid", "field": "spec.when",
            "message": 'Invalid value: "2023-02-29": spec.when in body must be of type date: '
                       '"2023-02-29"',
        }

    def test_unsupported_formats_are_stripped(self) -> None:
        # apiextensions normalizes "date-time" to "datetime" and drops formats it does not
        # know (or that do not fit the type) before validating.
        s = StructuralSchema({"type": "object", "properties": {
            "t": {"type": "string", "format": "date-time"},
            "odd": {"type": "string", "format": "no-such-format"},
            "n": {"type": "integer", "format": "uint8"},
            "b": {"type": "boolean", "format": "date"},
            "d": {"type": "string", "format": "date"}}})
        assert s.validate({"t": "2024-01-02T03:04:05Z", "odd": "x", "n": 2**40,
                           "b": True}) == []
        assert _only(s.validate({"t": "yesterday"}))["message"] == (
            'Invalid value: "yesterday": t in body must be of type date-time: "yesterday"')
        # A kept format is checked like a type for non-strings.
        assert _only(s.validate({"d": 5}))["message"] == (
            'Invalid value: "int64": d in body must be of type date: "int64"')

    def test_list_map_duplicate_key(self, schema: StructuralSchema) -> None:
        obj = _obj(podSets=[{"name": "a", "count": 1}, {"name": "b", "count": 1},
                            {"name": "a", "count": 2}])
        assert _only(schema.validate(obj)) == {
            "reason": "FieldValueDuplicate", "field": "spec.podSets[2]",
            "message": 'Duplicate value: {"name":"a"}',
        }

    def test_additional_properties_entries_are_keys_in_list_errors(self) -> None:
        s = StructuralSchema({"type": "object", "properties": {"m": {
            "type": "object", "additionalProperties": {
                "type": "array", "x-kubernetes-list-type": "set",
                "items": {"type": "string"}}}}})
        assert _only(s.validate({"m": {"k": ["a", "a"]}}))["field"] == "m[k][1]"

    def test_bad_values_quoted_as_go_does(self) -> None:
        s = StructuralSchema({"type": "object", "properties": {
            "e": {"type": "string", "enum": ["a"]},
            "l": {"type": "array", "x-kubernetes-list-type": "set",
                  "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}})
        assert _only(s.validate({"e": "tab\there\x7f\u009e é"}))["message"] == (
            'Unsupported value: "tab\\there\\x7f\\u009e é": supported values: "a"')
        assert _only(s.validate({"l": [{"x": "<&>"}, {"x": "<&>"}]}))["message"] == (
            'Duplicate value: {"x":"\\u003c\\u0026\\u003e"}')

    def test_list_set_duplicate(self, schema: StructuralSchema) -> None:
        assert _only(schema.validate(_obj(tags=["x", "y", "x"]))) == {
            "reason": "FieldValueDuplicate", "field": "spec.tags[2]",
            "message": 'Duplicate value: "x"',
        }

    def test_embedded_resource_needs_api_version_and_kind(
        self, schema: StructuralSchema
    ) -> None:
        obj = _obj(podSets=[{"name": "a", "count": 1, "template": {"spec": {}}}])
        fields = {(c["field"], c["message"]) for c in schema.validate(obj)}
        assert fields == {("spec.podSets[0].template.apiVersion", "Required value"),
                          ("spec.podSets[0].template.kind", "Required value")}
        obj = _obj(podSets=[{"name": "a", "count": 1,
                             "template": {"apiVersion": "a/b/c", "kind": "Pod_x"}}])
        messages = sorted(c["message"] for c in schema.validate(obj))
        assert messages[0] == ('Invalid value: "Pod_x": may have mixed case, but should '
                               "otherwise match: a DNS-1035 label must consist of lower case "
                               "alphanumeric characters or '-', start with an alphabetic "
                               "character, and end with an alphanumeric character (e.g. "
                               "'my-name',  or 'abc-123', regex used for validation is "
                               "'[a-z]([-a-z0-9]*[a-z0-9])?')")
        assert messages[1] == 'Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c'

    def test_status_subresource_validates_status_alone(self, schema: StructuralSchema) -> None:
        # The status strategy validates status with its own schema under field path
        # "status": messages name fields relative to it (as kube-apiserver prints them).
        obj = _obj(replicas="bad")
        obj["status"] = {"conditions": [{"type": 5}]}
        assert schema.validate(obj, subresource="status") == [{
            "reason": "FieldValueTypeInvalid", "field": "status.conditions[0].type",
            "message": 'Invalid value: "integer": conditions[0].type in body must be of type '
                       'string: "integer"'}]
        obj["status"] = None
        assert schema.validate(obj, subresource="status")[0]["message"] == (
            'Invalid value: "null":  in body must be of type object: "null"')

    def test_causes_build_the_apiserver_message(self, schema: StructuralSchema) -> None:
        causes = schema.validate(_obj(replicas="3"))
        err = errors.new_invalid("Thing", "t", causes, group="x.io")
        assert err.message == (
            'Thing.x.io "t" is invalid: spec.replicas: Invalid value: "string": spec.replicas '
            'in body must be of type integer: "string"')

    def test_blocking_error_with_cel_rules_adds_the_not_checked_cause(self) -> None:
        s = StructuralSchema({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.a > 0", "message": "a"}],
            "properties": {"a": {"type": "integer", "minimum": 0},
                           "b": {"type": "string", "maxLength": 2}}}}})
        assert s.has_validation_rules
        # Not blocking (the rules would run; they are not evaluated here).
        assert len(s.validate({"spec": {"a": -1}})) == 1
        causes = s.validate({"spec": {"b": "long"}})
        assert causes[-1] == {
            "reason": "FieldValueInvalid", "field": "<nil>",
            "message": "Invalid value: null: some validation rules were not checked because "
                       "the object was invalid; correct the existing errors to complete "
                       "validation"}
        assert len(causes) == 2

    def test_composition(self) -> None:
        s = StructuralSchema({"type": "object", "properties": {"v": {
            "type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}],
            "not": {"pattern": "^bad$"}}}})
        assert s.validate({"v": "apple"}) == []
        messages = [c["message"] for c in s.validate({"v": "cherry"})]
        assert messages[0] == 'Invalid value: "": v must validate at least one schema (anyOf)'
        assert [c["message"] for c in s.validate({"v": "bad"})] == [
            'Invalid value: "": v must not validate the schema (not)']

    def test_inputs_not_mutated(self, schema: StructuralSchema) -> None:
        obj = _obj(extra={"x": 1}, junk=2)
        before = copy.deepcopy(obj)
        schema.validate(obj)
        schema.prune(obj)
        schema.apply_defaults(obj)
        schema.normalize(obj)
        assert obj == before


class TestPrune:
    def test_unknown_fields_dropped_meta_kept(self, schema: StructuralSchema) -> None:
        obj = _obj(bogus=1, podSets=[{"name": "a", "count": 1, "zzz": 2,
                                      "template": {"apiVersion": "v1", "kind": "Pod",
                                                   "metadata": {"labels": {"a": "b"},
                                                                "anything": 1},
                                                   "spec": {}}}])
        obj["metadata"]["annotations"] = {"a": "b"}
        obj["metadata"]["nonsense"] = True
        obj["other"] = {}
        pruned = schema.prune(obj)
        assert "bogus" not in pruned["spec"] and "other" not in pruned
        # metadata is decoded as ObjectMeta: its own fields stay, anything else goes.
        assert pruned["metadata"] == {"name": "t", "annotations": {"a": "b"}}
        assert pruned["spec"]["podSets"][0] == {
            "name": "a", "count": 1,
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": "b"}},
                         "spec": {}}}
        unknown = schema.unknown_fields(obj)
        # kube-apiserver's order: root metadata, sorted pruned paths, embedded metadata.
        assert unknown == ["metadata.nonsense", "other", "spec.bogus", "spec.podSets[0].zzz",
                           "spec.podSets[0].template.metadata.anything"]
        assert strict_decoding_message(unknown[:2]) == (
            'strict decoding error: unknown field "metadata.nonsense", unknown field "other"')

    def test_preserve_unknown_still_prunes_declared_children(
        self, schema: StructuralSchema
    ) -> None:
        pruned = schema.prune(_obj(extra={"free": {"x": 1}, "known": {"a": "1", "b": 2}}))
        assert pruned["spec"]["extra"] == {"free": {"x": 1}, "known": {"a": "1"}}

    def test_nested_meta_fields_pruned_outside_embedded(self) -> None:
        s = StructuralSchema({"type": "object", "properties": {"spec": {
            "type": "object", "properties": {"a": {"type": "string"}}}}})
        assert s.prune({"kind": "K", "spec": {"kind": "x", "metadata": {}, "a": "1"}}) == {
            "kind": "K", "spec": {"a": "1"}}

    def test_object_without_properties_is_emptied(self) -> None:
        s = StructuralSchema({"type": "object", "properties": {"o": {"type": "object"}}})
        assert s.prune({"o": {"a": 1}}) == {"o": {}}


class TestDefaults:
    def test_defaults_fill_missing_and_nested(self, schema: StructuralSchema) -> None:
        obj = _obj(podSets=[{"count": 1}])
        result = schema.apply_defaults(obj)
        assert result["spec"]["replicas"] == 1
        assert result["spec"]["mode"] == "Fast"
        assert result["spec"]["nested"] == {"inner": "x"}  # default {} gets its own defaults
        assert result["spec"]["podSets"][0]["name"] == "main"
        assert "status" not in result  # no default on status: nothing created

    def test_defaults_do_not_override(self, schema: StructuralSchema) -> None:
        result = schema.apply_defaults(_obj(replicas=5, mode="Slow"))
        assert (result["spec"]["replicas"], result["spec"]["mode"]) == (5, "Slow")

    def test_null_replaced_by_default_unless_nullable(self, schema: StructuralSchema) -> None:
        assert schema.apply_defaults(_obj(replicas=None))["spec"]["replicas"] == 1

    def test_prune_nulls(self, schema: StructuralSchema) -> None:
        result = schema.prune_nulls(_obj(suspend=None, note=None, replicas=None))
        assert "suspend" not in result["spec"]  # not nullable, no default
        assert result["spec"]["note"] is None  # nullable
        assert result["spec"]["replicas"] is None  # defaulted later

    def test_applied_null_is_kept_for_validation(self, schema: StructuralSchema) -> None:
        # Server-side apply results are not decoded again: a null reaches validation.
        result = schema.normalize(_obj(suspend=None), prune_nulls=False)
        assert result["spec"]["suspend"] is None
        assert _only(schema.validate(result))["field"] == "spec.suspend"

    def test_empty_object_meta_fields_dropped(self, schema: StructuralSchema) -> None:
        obj = _obj()
        obj["metadata"].update(labels={}, finalizers=[], generateName="", annotations={"a": ""})
        assert schema.prune(obj)["metadata"] == {"name": "t", "annotations": {"a": ""}}

    def test_normalize_order(self, schema: StructuralSchema) -> None:
        result = schema.normalize(_obj(suspend=None, replicas=None, junk=1))
        assert "suspend" not in result["spec"] and "junk" not in result["spec"]
        assert result["spec"]["replicas"] == 1


class TestLookups:
    def test_list_and_map_types(self, schema: StructuralSchema) -> None:
        assert schema.list_map_keys("spec.podSets") == ("name",)
        assert schema.list_map_keys(("status", "conditions")) == ("type",)
        assert schema.list_type("spec.tags") == "set"
        assert schema.list_map_keys("spec.tags") is None
        assert schema.list_type("spec.nope") is None
        assert schema.list_type("spec.podSets[0].template") is None
        node = schema.node("spec.podSets.count")
        assert isinstance(node, SchemaNode) and node.types == ("integer",)

    def test_from_crd_picks_storage_version(self) -> None:
        crd = {"spec": {"versions": [
            {"name": "v1alpha1", "storage": False,
             "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                 "a": {"type": "string"}}}}},
            {"name": "v1", "storage": True,
             "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                 "b": {"type": "string"}}}}},
        ]}}
        assert StructuralSchema.from_crd(crd).prune({"a": "1", "b": "2"}) == {"b": "2"}
        assert StructuralSchema.from_crd(crd, "v1alpha1").prune({"a": "1", "b": "2"}) == {
            "a": "1"}
        with pytest.raises(ValueError):
            StructuralSchema.from_crd(crd, "v2")


# ---------------------------------------------------------------- properties


def _from_schema(node: SchemaNode, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that satisfy ``node`` (for the constraints this test schema uses)."""
    if node.enum:
        return st.sampled_from(node.enum)
    if node.int_or_string:
        return st.integers(-5, 5) | st.text("abc%", max_size=3)
    kind = node.types[0] if node.types else "object"
    if kind == "string":
        if node.format == "date":
            return st.dates().map(lambda d: d.isoformat())
        if node.pattern:
            # Truncation keeps a match for the "^[x]+$" patterns these schemas use.
            return st.from_regex(node.pattern, fullmatch=True).map(
                lambda s: s[: node.max_length or 8])
        longest = node.max_length if node.max_length is not None else 8
        text = st.text(min_size=node.min_length or 0, max_size=longest)
        return text | st.none() if node.nullable else text
    if kind == "integer":
        lo = int(node.minimum) if node.minimum is not None else -(2**31)
        hi = int(node.maximum) if node.maximum is not None else 2**31 - 1
        return st.integers(lo, hi)
    if kind == "number":
        lo = node.minimum if node.minimum is not None else -1e6
        hi = node.maximum if node.maximum is not None else 1e6
        return st.floats(lo, hi, exclude_min=node.exclusive_minimum, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        assert node.items is not None
        items = _from_schema(node.items, depth + 1)
        lo, hi = node.min_items or 0, node.max_items if node.max_items is not None else 3
        if node.list_type == "map" and node.list_map_keys:
            key = node.list_map_keys[0]
            return st.lists(items, min_size=lo, max_size=hi,
                            unique_by=lambda x: x.get(key))
        if node.list_type == "set":
            return st.lists(items, min_size=lo, max_size=hi, unique=True)
        return st.lists(items, min_size=lo, max_size=hi)
    # object
    if node.embedded:
        return st.fixed_dictionaries({"apiVersion": st.just("v1"), "kind": st.just("Pod")})
    if node.additional is not None:
        return st.dictionaries(st.text("abc", min_size=1, max_size=2),
                               _from_schema(node.additional, depth + 1),
                               max_size=node.max_properties or 2)
    required = {k: _from_schema(v, depth + 1) for k, v in node.properties.items()
                if k in node.required}
    optional = {k: _from_schema(v, depth + 1) for k, v in node.properties.items()
                if k not in node.required and k not in ("metadata",)}
    return st.fixed_dictionaries(required, optional=optional)


_ROOT = StructuralSchema(SCHEMA)
_valid_objects = _from_schema(_ROOT.root)
_junk = st.recursive(st.integers() | st.text(max_size=3) | st.none(),
                     lambda inner: st.dictionaries(st.text("xyz", max_size=2), inner, max_size=2),
                     max_leaves=4)


def _props(n: int) -> Any:
    return settings(max_examples=n, suppress_health_check=[HealthCheck.too_slow], deadline=None)


def _with_junk(obj: Any, node: SchemaNode | None, junk: Any, *, kept_only: bool) -> Any:
    # Add an undeclared member to every object whose schema has no additionalProperties
    # (all of them, or only those that preserve unknown fields when kept_only).
    if isinstance(obj, dict):
        out = {k: _with_junk(v, node.field(k) if node else None, junk, kept_only=kept_only)
               for k, v in obj.items()}
        if node is not None and node.additional is None and (
                node.preserve_unknown or not kept_only):
            out["zz-unknown"] = junk
        return out
    if isinstance(obj, list):
        items = node.items if node else None
        return [_with_junk(v, items, junk, kept_only=kept_only) for v in obj]
    return obj


class TestProperties:
    @given(_valid_objects)
    @_props(100)
    def test_generated_objects_validate(self, obj: dict[str, Any]) -> None:
        assert _ROOT.validate(obj) == []

    @given(_valid_objects)
    @_props(100)
    def test_defaulted_valid_objects_stay_valid(self, obj: dict[str, Any]) -> None:
        assert _ROOT.validate(_ROOT.apply_defaults(obj)) == []

    @given(_valid_objects, _junk)
    @_props(100)
    def test_pruning_keeps_declared_and_is_idempotent(self, obj: dict[str, Any],
                                                      junk: Any) -> None:
        pruned = _ROOT.prune(obj)
        assert pruned == obj  # a schema-generated object declares every field it has
        dirty = _with_junk(obj, _ROOT.root, junk, kept_only=False)
        cleaned = _ROOT.prune(dirty)
        assert _ROOT.prune(cleaned) == cleaned
        assert cleaned == _with_junk(obj, _ROOT.root, junk, kept_only=True)
        assert _ROOT.unknown_fields(cleaned) == []

    @given(_valid_objects)
    @_props(100)
    def test_defaulting_is_idempotent(self, obj: dict[str, Any]) -> None:
        once = _ROOT.apply_defaults(obj)
        assert _ROOT.apply_defaults(once) == once


# Random structural schemas, and values drawn from them.
_leaf_schemas: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.builds(lambda lo, extra: {"type": "string", "minLength": lo, "maxLength": lo + extra},
              st.integers(0, 2), st.integers(0, 4)),
    st.just({"type": "string", "pattern": "^[a-c]+$"}),
    st.lists(st.text("xyz", min_size=1, max_size=3), min_size=1, max_size=3, unique=True).map(
        lambda values: {"type": "string", "enum": values}),
    st.builds(lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
              st.integers(-5, 5), st.integers(0, 10)),
    st.just({"type": "integer", "format": "int32"}),
    st.just({"type": "number", "minimum": 0, "exclusiveMinimum": True}),
    st.just({"type": "boolean"}),
    st.just({"x-kubernetes-int-or-string": True}),
    st.just({"type": "string", "nullable": True}),
    st.just({"type": "string", "format": "date"}),
    st.just({"type": "string", "default": "d"}),
)
_prop_names = st.sampled_from(["a", "b", "c", "name", "kind"])


def _object_schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props,
            "required": sorted(set(required) & set(props))}


def _container_schemas(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    props = st.dictionaries(_prop_names, inner, min_size=1, max_size=3)
    return st.one_of(
        st.builds(_object_schema, props, st.lists(_prop_names, max_size=2)),
        inner.map(lambda i: {"type": "array", "items": i, "maxItems": 3}),
        props.map(lambda p: {
            "type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": _object_schema({**p, "name": {"type": "string", "minLength": 1}},
                                    ["name"])}),
        inner.map(lambda i: {"type": "object", "additionalProperties": i}),
        props.map(lambda p: {"type": "object", "properties": p,
                             "x-kubernetes-preserve-unknown-fields": True}),
    )


_raw_schemas = st.recursive(_leaf_schemas, _container_schemas, max_leaves=6)


@st.composite
def _schemas(draw: st.DrawFn) -> StructuralSchema:
    return StructuralSchema({"type": "object", "required": ["spec"],
                             "properties": {"spec": draw(_raw_schemas)}})


class TestRandomSchemas:
    @given(_schemas(), st.data())
    @_props(100)
    def test_values_drawn_from_a_schema_validate_and_survive_pruning(
        self, schema: StructuralSchema, data: st.DataObject
    ) -> None:
        obj = data.draw(_from_schema(schema.root))
        assert schema.validate(obj) == []
        assert schema.prune(obj) == obj
        normalized = schema.normalize(obj)
        assert schema.validate(normalized) == []
        assert schema.normalize(normalized) == normalized

    @given(_schemas(), st.data())
    @_props(100)
    def test_one_broken_field_gives_one_cause_at_its_path(
        self, schema: StructuralSchema, data: st.DataObject
    ) -> None:
        obj = data.draw(_from_schema(schema.root))
        targets = list(_typed_leaves(obj, schema.root, ""))
        removable = list(_required_members(obj, schema.root, ""))
        assume(targets or removable)
        broken = copy.deepcopy(obj)
        if targets and (not removable or data.draw(st.booleans())):
            path, parent, key, typ = data.draw(st.sampled_from(targets))
            _resolve(broken, parent)[key] = []
            assert schema.validate(broken) == [{
                "reason": "FieldValueTypeInvalid", "field": path,
                "message": f'Invalid value: "array": {path} in body must be of type {typ}: '
                           '"array"'}]
        else:
            path, parent, key = data.draw(st.sampled_from(removable))
            del _resolve(broken, parent)[key]
            assert schema.validate(broken) == [{
                "reason": "FieldValueRequired", "field": path, "message": "Required value"}]


def _members(value: Any, node: SchemaNode, path: str) -> Any:
    # (child value, child schema, child path, accessor) for each member of value.
    if isinstance(value, dict):
        for key, child in value.items():
            sub = node.field(key)
            if sub is not None:
                yield child, sub, f"{path}.{key}" if path else key, key
    elif isinstance(value, list) and node.items is not None:
        for i, child in enumerate(value):
            yield child, node.items, f"{path}[{i}]", i


def _typed_leaves(value: Any, node: SchemaNode, path: str, trail: tuple[Any, ...] = ()) -> Any:
    for child, sub, sub_path, key in _members(value, node, path):
        # (A string with a format accepts lists: kube-openapi skips its type check.)
        if (len(sub.types) == 1 and sub.types[0] in ("string", "integer", "number", "boolean")
                and not sub.enum and not sub.format and not isinstance(child, dict | list)):
            yield sub_path, trail, key, sub.types[0]
        yield from _typed_leaves(child, sub, sub_path, (*trail, key))


def _required_members(value: Any, node: SchemaNode, path: str,
                      trail: tuple[Any, ...] = ()) -> Any:
    if isinstance(value, dict):
        for name in node.required:
            if name in value:
                yield (f"{path}.{name}" if path else name), trail, name
    for child, sub, sub_path, key in _members(value, node, path):
        yield from _required_members(child, sub, sub_path, (*trail, key))


def _resolve(obj: Any, trail: tuple[Any, ...]) -> Any:
    for key in trail:
        obj = obj[key]
    return obj
