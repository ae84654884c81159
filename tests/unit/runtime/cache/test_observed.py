"""SharedInformer.observed / Cache.observed: when the store has caught up with a write."""

from __future__ import annotations

import asyncio
from typing import Any

from jobframework.runtime.cache import Cache, SharedInformer
from jobframework.runtime.client import WatchEvent
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer, ManualClock

CONFIGMAP = GVK("", "v1", "ConfigMap")
SECRET = GVK("", "v1", "Secret")


def cm(name: str, rv: str, namespace: str = "a") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}}


def bare(**kw: Any) -> SharedInformer:
    # Never started: events are applied by hand.
    return SharedInformer(APIServer(ManualClock()).client(), CONFIGMAP, **kw)


async def test_none_when_the_store_has_that_version_or_a_later_one() -> None:
    inf = bare()
    inf.apply(WatchEvent("ADDED", cm("x", "12")))
    assert inf.observed("a/x", "12") is None
    assert inf.observed("a/x", "9") is None  # integers: 12 is later than 9
    assert inf.observed("a/x", "100") is not None  # not "12" > "100" as strings


async def test_done_when_an_event_brings_that_version() -> None:
    inf = bare()
    inf.apply(WatchEvent("ADDED", cm("x", "5")))
    wanted = inf.observed("a/x", "7")
    other = inf.observed("a/y", "7")
    assert wanted is not None and other is not None
    inf.apply(WatchEvent("MODIFIED", cm("x", "6")))  # older than the write
    assert not wanted.done()
    inf.apply(WatchEvent("MODIFIED", cm("x", "8")))  # later than it: the write is in
    assert wanted.done() and not other.done()
    inf.apply(WatchEvent("ADDED", cm("y", "7")))
    assert other.done()


async def test_done_when_deleted_or_relisted() -> None:
    inf = bare()
    deleted = inf.observed("a/x", "3")
    assert deleted is not None
    inf.apply(WatchEvent("ADDED", cm("x", "2")))
    inf.apply(WatchEvent("DELETED", cm("x", "2")))
    assert deleted.done()

    relisted = inf.observed("a/z", "50")
    assert relisted is not None
    inf.replace([cm("q", "40")], "60")
    assert relisted.done()


async def test_done_when_the_informer_stops() -> None:
    server = APIServer(ManualClock())
    inf = SharedInformer(server.client(), CONFIGMAP, clock=server.clock)
    inf.start()
    assert await asyncio.wait_for(inf.wait_for_sync(), 5)
    waiting = inf.observed("a/never", "99")
    assert waiting is not None
    await inf.stop()
    assert waiting.done()


async def test_opaque_versions_compare_only_for_equality() -> None:
    inf = bare()
    inf.apply(WatchEvent("ADDED", cm("x", "b")))
    assert inf.observed("a/x", "b") is None
    waiting = inf.observed("a/x", "a")
    assert waiting is not None
    inf.apply(WatchEvent("MODIFIED", cm("x", "c")))
    assert not waiting.done()
    inf.apply(WatchEvent("MODIFIED", cm("x", "a")))
    assert waiting.done()
    # Non-ASCII digits are not integers either (int() would reject them).
    inf.apply(WatchEvent("MODIFIED", cm("x", "\u00b2")))
    assert inf.observed("a/x", "1") is not None


async def test_selected_informers_never_promise_a_write() -> None:
    # The server may filter the written object out: there is nothing to wait for.
    assert bare(label_selector="app=a").observed("a/x", "3") is None
    assert bare().observed("a/x", "") is None


async def test_cancelled_waiters_are_dropped() -> None:
    inf = bare()
    first = inf.observed("a/x", "3")
    assert first is not None
    first.cancel()
    second = inf.observed("a/x", "4")
    assert second is not None
    assert [f for _, f in inf._rv_waiters["a/x"]] == [second]
    inf.apply(WatchEvent("ADDED", cm("x", "4")))
    assert second.done() and "a/x" not in inf._rv_waiters


async def test_cache_asks_the_informer_of_the_kind_and_namespace() -> None:
    server = APIServer(ManualClock())
    await server.client().create({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "a"}})
    cache = Cache(server.client(), clock=server.clock, namespaces=["a"])
    cache.start()
    try:
        await cache.get_informer(CONFIGMAP)
        assert cache.observed(SECRET, cm("x", "3")) is None  # no informer for the kind
        assert cache.observed(CONFIGMAP, cm("x", "3", namespace="b")) is None  # not cached
        created = await server.client().create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a"}})
        waiting = cache.observed(CONFIGMAP, created)
        if waiting is not None:  # the watch may already have delivered it
            await asyncio.wait_for(waiting, 5)
        assert cache.observed(CONFIGMAP, created) is None
    finally:
        await cache.stop()
