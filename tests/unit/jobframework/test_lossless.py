"""LosslessDefaulter: Kueue's drop-all-removes rule and controller-runtime's round-trip rule."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from jobframework.lossless import LosslessDefaulter, LosslessMode, create_patch


def set_foo(obj: dict[str, Any]) -> None:
    obj["foo"] = "bar"


def known_only(obj: dict[str, Any]) -> dict[str, Any]:
    """A 'typed model' that knows only metadata and spec.suspend."""
    out: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
    if "spec" in obj:
        out["spec"] = {k: v for k, v in obj["spec"].items() if k == "suspend"}
    return out


async def test_kueue_vector_drop_all_removes() -> None:
    # Kueue's test: raw {"baz": "qux"} + defaulter setting foo=bar, through a model that
    # knows neither field.
    d = LosslessDefaulter(set_foo, round_trip=lambda o: {})
    assert await d.patch({"baz": "qux"}) == [{"op": "add", "path": "/foo", "value": "bar"}]


async def test_unknown_fields_survive_round_trip_through_model() -> None:
    raw = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"parallelism": 3, "template": {"spec": {"containers": []}}}}

    def suspend(obj: dict[str, Any]) -> None:
        obj["spec"]["suspend"] = True

    for mode in LosslessMode:
        d = LosslessDefaulter(suspend, round_trip=known_only, mode=mode)
        patched, ops = await d.default(raw)
        assert ops == [{"op": "add", "path": "/spec/suspend", "value": True}]
        assert patched["spec"] == {"parallelism": 3, "suspend": True,
                                   "template": {"spec": {"containers": []}}}
    # Without the wrapper rule, the plain diff would delete the unknown fields.
    assert {"op": "remove", "path": "/spec/parallelism"} in create_patch(
        raw, {**known_only(raw), "spec": {"suspend": True}})


async def test_intentional_removal_kept_only_with_round_trip_rule() -> None:
    raw = {"metadata": {"labels": {"a": "1", "drop-me": "x"}}, "extra": 1}

    def drop(obj: dict[str, Any]) -> None:
        del obj["metadata"]["labels"]["drop-me"]

    def model(obj: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": copy.deepcopy(obj["metadata"])}

    kueue = LosslessDefaulter(drop, round_trip=model)
    assert await kueue.patch(raw) == []
    cr = LosslessDefaulter(drop, round_trip=model, mode=LosslessMode.DROP_ROUND_TRIP_REMOVES)
    assert await cr.patch(raw) == [{"op": "remove", "path": "/metadata/labels/drop-me"}]


async def test_no_change_no_patch_and_async_defaulter() -> None:
    async def nothing(obj: dict[str, Any]) -> None:
        return None

    raw = {"a": {"b": [1, 2]}}
    for mode in LosslessMode:
        d = LosslessDefaulter(nothing, round_trip=lambda o: {}, mode=mode)
        patched, ops = await d.default(raw)
        assert ops == []
        assert patched == raw
        assert patched is not raw


async def test_replace_is_kept() -> None:
    def bump(obj: dict[str, Any]) -> None:
        obj["spec"]["suspend"] = True

    ops = await LosslessDefaulter(bump).patch({"spec": {"suspend": False}})
    assert ops == [{"op": "replace", "path": "/spec/suspend", "value": True}]


json_leaf = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
json_obj = st.recursive(st.dictionaries(st.text("abc", min_size=1, max_size=2), json_leaf,
                                        max_size=3),
                        lambda inner: st.dictionaries(st.text("abc", min_size=1, max_size=2),
                                                      inner | json_leaf, max_size=3),
                        max_leaves=10)


@settings(max_examples=100, deadline=None)
@given(raw=json_obj, keep=st.sets(st.sampled_from(["a", "b", "c", "aa", "ab"])),
       added=st.dictionaries(st.sampled_from(["x", "y"]), json_leaf, max_size=2))
async def test_patch_never_loses_untouched_fields(raw: dict[str, Any], keep: set[str],
                                                  added: dict[str, Any]) -> None:
    """Whatever the model drops, the patched object keeps every raw field not set by the
    defaulter, and carries every field the defaulter set."""

    def model(obj: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in obj.items() if k in keep}

    def add(obj: dict[str, Any]) -> None:
        obj.update(copy.deepcopy(added))

    for mode in LosslessMode:
        patched, ops = await LosslessDefaulter(add, round_trip=model, mode=mode).default(raw)
        assert all(op["op"] in ("add", "replace") for op in ops)
        assert jsonpatch.apply_patch(raw, ops) == patched
        for k, v in raw.items():
            if k not in added:
                assert patched[k] == v
        for k, v in added.items():
            assert patched[k] == v
