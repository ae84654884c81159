"""The cache's copies (a marshal round trip with a deepcopy fallback) and the managedFields
transform the external-framework manager installs."""

from __future__ import annotations

import collections
import datetime as dt

from jobframework.runtime.cache import Cache, strip_managed_fields
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GVK, deep_copy
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
