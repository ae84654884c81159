"""Merge patch and JSON patch engines: RFC examples, apiserver error mapping, properties."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobframework.runtime import errors
from jobframework.testing._patch import (
    INVALID_JSON_PATCH_MESSAGE,
    apply_json_patch,
    create_json_patch,
    create_merge_patch,
    json_equal,
    merge_patch,
    strategic_merge_patch,
)


def _props(n: int) -> Any:
    # The CI machine is shared with long builds: judge properties by count, not speed.
    return settings(max_examples=n, suppress_health_check=[HealthCheck.too_slow], deadline=None)


# JSON values without null (a null inside a merge-patch value reads as "delete").
_scalars = st.one_of(
    st.booleans(), st.integers(-1000, 1000), st.text(max_size=4),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)
_keys = st.text(alphabet="abcd/~", min_size=0, max_size=3)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)
_objects = st.dictionaries(_keys, _values, max_size=5)
_json_with_null = st.recursive(
    st.none() | _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)


class TestMergePatch:
    # RFC 7386 appendix A, one row per case.
    @pytest.mark.parametrize(
        ("target", "patch", "expected"),
        [
            ({"a": "b"}, {"a": "c"}, {"a": "c"}),
            ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
            ({"a": "b"}, {"a": None}, {}),
            ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
            ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
            ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
            ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
            ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
            ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
            ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
        ],
    )
    def test_rfc_examples(self, target: dict[str, Any], patch: dict[str, Any],
                          expected: dict[str, Any]) -> None:
        assert merge_patch(target, patch) == expected

    def test_does_not_mutate_inputs(self) -> None:
        target = {"spec": {"a": [1, 2], "b": {"c": 1}}}
        patch = {"spec": {"b": {"c": 2}, "d": {"e": 1}}}
        before_t, before_p = copy.deepcopy(target), copy.deepcopy(patch)
        result = merge_patch(target, patch)
        result["spec"]["a"].append(3)
        result["spec"]["d"]["e"] = 9
        assert target == before_t and patch == before_p

    def test_non_object_patch_is_bad_request(self) -> None:
        with pytest.raises(errors.BadRequest) as info:
            merge_patch({"a": 1}, [1, 2])  # type: ignore[arg-type]
        assert "cannot unmarshal array" in info.value.message

    @given(_objects, _objects)
    @_props(75)
    def test_create_then_apply_round_trips(self, a: dict[str, Any], b: dict[str, Any]) -> None:
        patch = create_merge_patch(a, b)
        assert json_equal(merge_patch(a, patch), b)

    @given(_objects)
    @_props(75)
    def test_diff_of_equal_objects_is_empty(self, a: dict[str, Any]) -> None:
        assert create_merge_patch(a, copy.deepcopy(a)) == {}

    def test_create_merge_patch_shape(self) -> None:
        original = {"a": 1, "b": {"c": 1, "d": 2}, "e": [1], "f": True}
        modified = {"a": 1, "b": {"c": 1, "d": 3}, "e": [1, 2], "f": 1, "g": "x"}
        assert create_merge_patch(original, modified) == {
            "b": {"d": 3}, "e": [1, 2], "f": 1, "g": "x",
        }
        assert create_merge_patch({"a": {"b": 1}}, {}) == {"a": None}


class TestJsonEqual:
    def test_bool_is_not_number(self) -> None:
        assert not json_equal(True, 1)
        assert not json_equal({"a": 0}, {"a": False})
        assert json_equal(1, 1.0)
        assert json_equal({"a": [1, "x", None]}, {"a": [1.0, "x", None]})
        assert not json_equal([1], [1, 2])
        assert not json_equal("1", 1)


class TestJsonPatch:
    def test_operations(self) -> None:
        target = {"spec": {"list": [1, 2, 3], "a": "x"}, "status": {}}
        ops = [
            {"op": "add", "path": "/spec/list/1", "value": 9},
            {"op": "remove", "path": "/spec/list/0"},
            {"op": "replace", "path": "/spec/a", "value": "y"},
            {"op": "copy", "from": "/spec/a", "path": "/status/a"},
            {"op": "move", "from": "/spec/list", "path": "/status/list"},
            {"op": "add", "path": "/status/list/-", "value": 4},
            {"op": "test", "path": "/status/a", "value": "y"},
        ]
        before = copy.deepcopy(target)
        assert apply_json_patch(target, ops) == {
            "spec": {"a": "y"}, "status": {"a": "y", "list": [9, 2, 3, 4]},
        }
        assert target == before

    @pytest.mark.parametrize(
        "op",
        [
            {"op": "test", "path": "/spec/a", "value": "other"},
            {"op": "test", "path": "/spec/flag", "value": 1},  # true is not 1 in JSON
            {"op": "test", "path": "/spec/missing", "value": 1},
            {"op": "remove", "path": "/spec/missing"},
            {"op": "replace", "path": "/nope/missing", "value": 1},
            {"op": "replace", "path": "/spec/list/3", "value": 1},
            {"op": "test", "path": "/nope/missing", "value": None},
            {"op": "add", "path": "/nope/deeper", "value": 1},
            {"op": "add", "path": "/spec/list/7", "value": 1},
            {"op": "frobnicate", "path": "/spec/a"},
            {"op": "add", "value": 1},
            {"op": "move", "path": "/spec/b"},
            {"op": "replace", "path": "", "value": [1]},
        ],
    )
    def test_unappliable_patch_is_422_invalid(self, op: dict[str, Any]) -> None:
        target = {"spec": {"a": "x", "flag": True, "list": [1]}}
        with pytest.raises(errors.Invalid) as info:
            apply_json_patch(target, [{"op": "add", "path": "/spec/new", "value": 1}, op])
        assert info.value.code == 422
        assert info.value.message == INVALID_JSON_PATCH_MESSAGE
        assert info.value.causes == []
        assert "new" not in target["spec"]  # all-or-nothing, input untouched

    def test_go_json_patch_leniencies(self) -> None:
        # kube-apiserver's json-patch (v4) lets "replace" create a missing member and lets
        # a missing member "test" equal to null (checked against a real kube-apiserver).
        target = {"spec": {"a": 1}}
        assert apply_json_patch(target, [{"op": "replace", "path": "/spec/b", "value": 2}]) == {
            "spec": {"a": 1, "b": 2}}
        assert apply_json_patch(target, [{"op": "test", "path": "/spec/b", "value": None},
                                         {"op": "add", "path": "/spec/c", "value": 3}]) == {
            "spec": {"a": 1, "c": 3}}
        with pytest.raises(errors.Invalid):
            apply_json_patch(target, [{"op": "test", "path": "/spec/a", "value": None}])

    @pytest.mark.parametrize(("op", "args"), [
        ({"op": "remove", "path": "/a/-1"}, ["x", "y"]),
        ({"op": "replace", "path": "/a/-1", "value": "z"}, ["x", "y", "z"]),
        ({"op": "replace", "path": "/a/01", "value": "z"}, ["x", "z", "z"]),
        ({"op": "replace", "path": "/a/+1", "value": "z"}, ["x", "z", "z"]),
        ({"op": "add", "path": "/a/-1", "value": "w"}, ["x", "y", "z", "w"]),
        ({"op": "add", "path": "/a/-4", "value": "w"}, ["w", "x", "y", "z"]),
        ({"op": "copy", "from": "/a/-1", "path": "/a/0"}, ["z", "x", "y", "z"]),
    ])
    def test_go_array_indexes(self, op: dict[str, Any], args: list[str]) -> None:
        # Recorded from kube-apiserver: Atoi-style indexes, negative ones from the end.
        assert apply_json_patch({"a": ["x", "y", "z"]}, [op]) == {"a": args}

    def test_go_null_leniencies(self) -> None:
        assert apply_json_patch({"m": {}}, [{"op": "add", "path": "/m/x"}]) == {"m": {"x": None}}
        assert apply_json_patch({"m": {}}, [{"op": "copy", "from": "/m/no", "path": "/m/x"}]) == {
            "m": {"x": None}}
        for bad in ({"op": "remove", "path": "/a/-4"}, {"op": "add", "path": "/a/-5", "value": 1},
                    {"op": "move", "from": "/m/no", "path": "/m/x"}):
            with pytest.raises(errors.Invalid):
                apply_json_patch({"a": [1, 2, 3], "m": {}}, [bad])

    def test_decode_errors_read_as_the_apiserver_s(self) -> None:
        with pytest.raises(errors.BadRequest) as info:
            apply_json_patch({}, {"op": "add"})  # type: ignore[arg-type]
        assert info.value.message == (
            "error decoding patch: json: cannot unmarshal object into Go value of type "
            "[]handlers.jsonPatchOp")
        with pytest.raises(errors.BadRequest) as info:
            apply_json_patch({}, [1])  # type: ignore[list-item]
        assert info.value.message == (
            "error decoding patch: json: cannot unmarshal number into Go value of type "
            "handlers.jsonPatchOp")
        with pytest.raises(errors.BadRequest) as info:
            merge_patch({}, [1])  # type: ignore[arg-type]
        assert info.value.message == (
            "error decoding patch: json: cannot unmarshal array into Go value of type "
            "map[string]interface {}")

    @pytest.mark.parametrize("body", [{"op": "add"}, "x", [1], [["op"]]])
    def test_undecodable_patch_is_400(self, body: Any) -> None:
        with pytest.raises(errors.BadRequest) as info:
            apply_json_patch({"a": 1}, body)
        assert info.value.code == 400
        assert "cannot unmarshal" in info.value.message

    @given(_objects, _objects)
    @_props(75)
    def test_create_then_apply_round_trips(self, a: dict[str, Any], b: dict[str, Any]) -> None:
        ops = create_json_patch(a, b)
        assert json_equal(apply_json_patch(a, ops), b)

    @given(st.dictionaries(_keys, _json_with_null, max_size=5),
           st.dictionaries(_keys, _json_with_null, max_size=5))
    @_props(75)
    def test_round_trip_with_nulls(self, a: dict[str, Any], b: dict[str, Any]) -> None:
        # Unlike merge patch, JSON patch can express explicit nulls.
        assert json_equal(apply_json_patch(a, create_json_patch(a, b)), b)


class TestStrategicMergePatch:
    POD = {
        "metadata": {"name": "p", "finalizers": ["a"], "labels": {"x": "1"}},
        "spec": {
            "containers": [
                {"name": "main", "image": "img:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "side:1"},
            ],
            "tolerations": [{"key": "k1"}],
        },
        "status": {"conditions": [{"type": "Ready", "status": "False"}]},
    }

    def test_keyed_lists_merge_by_key(self) -> None:
        patch = {"spec": {"containers": [
            {"name": "main", "image": "img:2", "env": [{"name": "B", "value": "2"}]},
            {"name": "new", "image": "n:1"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        out = strategic_merge_patch(self.POD, patch)
        # Order as kube-apiserver gives it: items the patch names, in patch order, with
        # server-only items interleaved by their live position.
        assert out["spec"]["containers"] == [
            {"name": "main", "image": "img:2",
             "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]},
            {"name": "new", "image": "n:1"},
            {"name": "side", "image": "side:1"}]
        assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
        assert self.POD["spec"]["containers"][0]["image"] == "img:1"

    def test_unkeyed_lists_replace_and_scalar_sets_union(self) -> None:
        out = strategic_merge_patch(self.POD, {"spec": {"tolerations": [{"key": "k2"}]},
                                               "metadata": {"finalizers": ["b", "a"]}})
        assert out["spec"]["tolerations"] == [{"key": "k2"}]
        assert out["metadata"]["finalizers"] == ["b", "a"]
        out = strategic_merge_patch({"f": ["a", "b", "c"]}, {"f": ["b", "d"]},
                                    merge_scalar_lists=frozenset({"f"}))
        assert out["f"] == ["a", "b", "d", "c"]

    def test_directives(self) -> None:
        out = strategic_merge_patch(self.POD, {
            "spec": {"containers": [{"$patch": "delete", "name": "side"}]},
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"],
                         "labels": {"$patch": "replace", "y": "2"}},
        })
        assert [c["name"] for c in out["spec"]["containers"]] == ["main"]
        assert out["metadata"]["finalizers"] == []
        assert out["metadata"]["labels"] == {"y": "2"}
        out = strategic_merge_patch(self.POD, {"spec": {"containers": [
            {"name": "only", "image": "o"}, {"$patch": "replace"}]}})
        assert out["spec"]["containers"] == [{"name": "only", "image": "o"}]
        out = strategic_merge_patch(self.POD, {"status": {"$patch": "delete"}})
        assert "status" not in out

    def test_retain_keys_and_element_order(self) -> None:
        out = strategic_merge_patch(self.POD, {"spec": {
            "$retainKeys": ["containers"],
            "$setElementOrder/containers": [{"name": "side"}, {"name": "main"}]}})
        assert list(out["spec"]) == ["containers"]
        assert [c["name"] for c in out["spec"]["containers"]] == ["side", "main"]

    def test_null_deletes_and_errors(self) -> None:
        out = strategic_merge_patch(self.POD, {"metadata": {"labels": None}})
        assert "labels" not in out["metadata"]
        with pytest.raises(errors.BadRequest, match="merge key"):
            strategic_merge_patch(self.POD, {"spec": {"containers": [{"image": "x"}]}})
        with pytest.raises(errors.BadRequest, match="invalid patch format of retainKeys"):
            strategic_merge_patch(self.POD, {"metadata": {"$retainKeys": ["a"], "b": 1}})
        assert "annotations" not in strategic_merge_patch(
            self.POD, {"metadata": {"annotations": {"$patch": "replace", "q": "1"}}})["metadata"]
        with pytest.raises(errors.BadRequest, match="Unknown patch type"):
            strategic_merge_patch(self.POD, {"spec": {"$patch": "explode"}})

    @given(_objects, _objects)
    @_props(75)
    def test_without_keyed_lists_it_is_a_merge_patch(self, a: dict[str, Any],
                                                      b: dict[str, Any]) -> None:
        # Keys drawn from "abcd/~" never name a keyed list, so SMP reduces to RFC 7386.
        patch = create_merge_patch(a, b)
        assert json_equal(strategic_merge_patch(a, patch), merge_patch(a, patch))
