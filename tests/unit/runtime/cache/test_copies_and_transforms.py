"""The cache's copies (an orjson round trip for JSON objects, else a marshal round trip
with a deepcopy fallback) and the transforms the external-framework manager installs."""

from __future__ import annotations

import collections
import datetime as dt
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from jobframework.runtime.cache import (
    Cache,
    compose_transforms,
    intern_strings,
    preserves_json,
    strip_managed_fields,
)
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GVK, Object, deep_copy, json_copy
from jobframework.testing import APIServer

CM = GVK("", "v1", "ConfigMap")


def test_deep_copy_shares_nothing_mutable() -> None:
    obj = {"metadata": {"name": "a", "labels": {"x": "y"}},
           "spec": {"items": [{"n": 1, "f": 2.5, "b": True, "z": None}]}}
    out = deep_copy(obj)
    assert out == obj
    out["metadata"]["labels"]["x"] = "changed"
    out["spec"]["items"][0]["n"] = 2
    assert obj["metadata"]["labels"]["x"] == "y" and obj["spec"]["items"][0]["n"] == 1


def test_deep_copy_falls_back_for_values_json_does_not_produce() -> None:
    when = dt.datetime(2026, 1, 1)
    ordered = collections.OrderedDict(a={"b": when})
    out = deep_copy(ordered)
    assert type(out) is collections.OrderedDict
    assert out == ordered and out["a"] is not ordered["a"]


def test_strip_managed_fields_keeps_everything_else() -> None:
    obj = {"metadata": {"name": "a", "managedFields": [{"manager": "m"}], "labels": {"k": "v"}},
           "data": {"x": "1"}}
    assert strip_managed_fields(obj) == {"metadata": {"name": "a", "labels": {"k": "v"}},
                                         "data": {"x": "1"}}
    assert strip_managed_fields({"kind": "List"}) == {"kind": "List"}


async def test_a_cache_with_the_transform_stores_no_managed_fields() -> None:
    server = APIServer(ManualClock())
    api = server.client()
    await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "a", "namespace": "default"}, "data": {"x": "1"}})
    assert (await api.get(CM, "a", namespace="default"))["metadata"].get("managedFields")
    cache = Cache(api, clock=server.clock, transform=strip_managed_fields)
    cache.start()
    try:
        got = await cache.get(CM, "a", namespace="default")
    finally:
        await cache.stop()
    assert "managedFields" not in got["metadata"] and got["data"] == {"x": "1"}


def test_intern_strings_shares_keys_and_short_values_between_objects() -> None:
    import json

    from jobframework.runtime.cache import compose_transforms, intern_strings

    raw = json.dumps({"metadata": {"name": "job-a", "managedFields": [{"m": 1}],
                                   "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                      "status": {"conditions": [{"type": "Complete", "status": "True",
                                                 "message": "x" * 100}]}})
    transform = compose_transforms(strip_managed_fields, intern_strings)
    a, b = transform(json.loads(raw)), transform(json.loads(raw))
    assert a == b == {"metadata": {"name": "job-a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                      "status": {"conditions": [{"type": "Complete", "status": "True",
                                                 "message": "x" * 100}]}}
    key_a = next(iter(a["metadata"]["labels"]))
    key_b = next(iter(b["metadata"]["labels"]))
    assert key_a is key_b
    assert a["status"]["conditions"][0]["status"] is b["status"]["conditions"][0]["status"]
    # Long free text is left alone (interning it would only grow the intern table).
    assert a["status"]["conditions"][0]["message"] is not b["status"]["conditions"][0]["message"]
    # Copies handed out keep the sharing.
    copied = deep_copy(a)
    assert next(iter(copied["metadata"]["labels"])) is key_a


# --- json_copy: the cache's fast copy of JSON objects ------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.text(max_size=10)
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=4),
    max_leaves=25)


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value), value)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_json_copy_of_a_json_object_is_an_exact_independent_copy(obj: dict[str, Any]) -> None:
    out = json_copy(obj)
    assert _typed(out) == _typed(obj)
    assert list(out) == list(obj)  # key order kept
    out["added"] = {}
    assert "added" not in obj or obj["added"] is not out["added"]
    for key, value in obj.items():
        if isinstance(value, dict | list):
            assert out[key] is not value


def test_json_copy_falls_back_where_orjson_would_not_be_exact() -> None:
    class Name(str):
        pass

    when = dt.datetime(2026, 1, 1)
    obj = {"spec": {"big": 2**64, "name": Name("n"), "at": when, 3: "int key"}}
    out = json_copy(obj)
    assert out == obj
    assert type(out["spec"]["name"]) is Name and out["spec"]["at"] == when
    assert out["spec"] is not obj["spec"]


def test_which_transforms_keep_objects_json() -> None:
    def user(obj: Object) -> Object:
        return obj

    assert preserves_json(None)
    assert preserves_json(strip_managed_fields) and preserves_json(intern_strings)
    assert preserves_json(compose_transforms(strip_managed_fields, intern_strings))
    assert not preserves_json(user)
    assert not preserves_json(compose_transforms(strip_managed_fields, user))


async def test_cache_copies_keep_what_a_user_transform_stored() -> None:
    # A transform of the user's may store values JSON has no form for: the cache's copies
    # of them are exact (a tuple stays a tuple), where the JSON fast copy would not be.
    def tag(obj: Object) -> Object:
        obj["data"]["pair"] = ("a", 1)
        return obj

    server = APIServer(ManualClock())
    api = server.client()
    await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "a", "namespace": "default"}, "data": {"x": "1"}})
    for transform, pair in ((tag, ("a", 1)), (compose_transforms(strip_managed_fields, tag),
                                              ("a", 1))):
        cache = Cache(api, transform=transform)
        cache.start()
        try:
            got = await cache.get(CM, "a", namespace="default")
            listed = (await cache.list(CM, namespace="default")).items
        finally:
            await cache.stop()
        assert got["data"]["pair"] == pair and type(got["data"]["pair"]) is tuple
        assert type(listed[0]["data"]["pair"]) is tuple


async def test_cache_copies_of_json_objects_are_independent() -> None:
    server = APIServer(ManualClock())
    api = server.client()
    await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "a", "namespace": "default", "labels": {"k": "v"}},
                      "data": {"x": "1"}})
    cache = Cache(api, transform=compose_transforms(strip_managed_fields, intern_strings))
    cache.start()
    try:
        got = await cache.get(CM, "a", namespace="default")
        got["metadata"]["labels"]["k"] = "changed"
        got["data"]["x"] = "2"
        again = await cache.get(CM, "a", namespace="default")
        listed = (await cache.list(CM, namespace="default")).items[0]
    finally:
        await cache.stop()
    assert again["metadata"]["labels"] == {"k": "v"} and again["data"] == {"x": "1"}
    assert listed == again and listed is not again
