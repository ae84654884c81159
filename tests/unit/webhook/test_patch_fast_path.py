"""``create_patch``'s own diff of objects whose arrays did not change: the operations
``jsonpatch`` would emit (without moves), only faster; anything else is left to jsonpatch."""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from jobframework.webhook.admission import _diff_objects, create_patch

scalars = (st.none() | st.booleans() | st.integers(-2, 2)
           | st.sampled_from([0.0, -0.0, 1.0, 1.5]) | st.sampled_from(["", "a", "b", "~/"]))
keys = st.sampled_from(["a", "b", "c", "x/y", "~0", "metadata", "spec"])
values = st.recursive(scalars, lambda children: st.lists(children, max_size=3)
                      | st.dictionaries(keys, children, max_size=4), max_leaves=14)
objects = st.dictionaries(keys, values, max_size=5)


@st.composite
def edited(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """An object and a copy of it with members added, removed or replaced (arrays kept
    as they are, mostly: a defaulting webhook's edits)."""
    src = draw(objects)
    dst = copy.deepcopy(src)

    def edit(obj: dict[str, Any]) -> None:
        for key in list(obj):
            choice = draw(st.integers(0, 9))
            if choice == 0:
                del obj[key]
            elif choice == 1:
                obj[key] = draw(values)
            elif isinstance(obj[key], dict):
                edit(obj[key])
        if draw(st.booleans()):
            obj[draw(keys)] = draw(values)

    edit(dst)
    return src, dst


def reference(src: Any, dst: Any) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = jsonpatch.JsonPatch.from_diff(src, dst, optimization=False).patch
    return ops


def canonical(ops: list[dict[str, Any]]) -> list[str]:
    # jsonpatch releases before 1.48 walk members in set order: compare as a multiset.
    return sorted(json.dumps(op, sort_keys=True) for op in ops)


@settings(max_examples=300, deadline=None)
@given(edited())
def test_the_fast_diff_emits_what_jsonpatch_emits(pair: tuple[dict[str, Any], dict[str, Any]]
                                                  ) -> None:
    src, dst = pair
    fast = _diff_objects(src, dst)
    ref = reference(src, dst)
    if fast is not None:
        assert canonical(fast) == canonical(ref)
        assert json.dumps(jsonpatch.apply_patch(src, fast), sort_keys=True) == json.dumps(
            dst, sort_keys=True)
    assert canonical(create_patch(src, dst)) == canonical(ref)


def test_a_defaulted_job_is_one_replace() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"suspend": False, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    defaulted = copy.deepcopy(job)
    defaulted["spec"]["suspend"] = True
    assert _diff_objects(job, defaulted) == [
        {"op": "replace", "path": "/spec/suspend", "value": True}]


def test_json_types_are_told_apart_as_jsonpatch_does() -> None:
    # Python's == says 1 == True == 1.0 and 0.0 == -0.0; JSON does not.
    for old, new in ((1, True), (1, 1.0), (0.0, -0.0), ({"a": 1}, {"a": True})):
        ops = _diff_objects({"k": old}, {"k": new})
        assert ops == reference({"k": old}, {"k": new}) and ops


def test_changed_arrays_are_left_to_jsonpatch() -> None:
    src = {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    dst = {"spec": {"containers": [{"name": "b"}]}}
    assert _diff_objects(src, dst) is None
    assert create_patch(src, dst) == reference(src, dst)


def test_unchanged_arrays_are_skipped() -> None:
    src = {"spec": {"containers": [{"name": "a"}]}, "n": 1}
    dst = {"spec": {"containers": [{"name": "a"}]}, "n": 2}
    assert _diff_objects(src, dst) == [{"op": "replace", "path": "/n", "value": 2}]


def test_added_values_are_copies() -> None:
    dst: dict[str, Any] = {"spec": {"template": {"labels": {"a": "b"}}}}
    ops = _diff_objects({}, dst)
    dst["spec"]["template"]["labels"]["a"] = "changed"
    assert ops == [{"op": "add", "path": "/spec",
                    "value": {"template": {"labels": {"a": "b"}}}}]


def test_members_that_are_no_json_names_go_to_jsonpatch() -> None:
    assert _diff_objects({1: "a"}, {1: "b"}) is None
    assert _diff_objects({"a": {1: "x"}}, {"a": {1: "x"}}) == []


def test_pointers_escape_tilde_and_slash() -> None:
    assert _diff_objects({}, {"a/b~c": 1}) == [{"op": "add", "path": "/a~1b~0c", "value": 1}]


def test_equal_arrays_are_skipped_however_their_strings_are_shared() -> None:
    # A review decoded from the API server's JSON against a defaulted copy: equal strings,
    # but one object shares them (or holds interned ones) and the other does not.
    raw = json.dumps({"spec": {"suspend": False, "template": {"spec": {"containers": [
        {"name": "main", "image": "main", "args": ["main", "main"]}]}}}})
    src = json.loads(raw)
    dst = json.loads(raw)
    container = dst["spec"]["template"]["spec"]["containers"][0]
    container["image"] = sys.intern("".join(["ma", "in"]))
    container["args"] = ["".join(["ma", "in"]), "".join(["m", "ain"])]
    dst["spec"]["suspend"] = True
    assert _diff_objects(src, dst) == [
        {"op": "replace", "path": "/spec/suspend", "value": True}]
