"""SharedInformer and Reflector against the in-memory API server, with fault injection."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.runtime.cache import Backoff, DeletedFinalStateUnknown, SharedInformer
from jobframework.runtime.client import WatchEvent
from jobframework.runtime.objects import GVK
from jobframework.testing import ManualClock

from .conftest import CONFIGMAP, Env, Recorder, store_state


async def test_initial_list_then_watch_events(env: Env) -> None:
    await env.cm("one", x="1")
    await env.cm("two", namespace="b")
    rec = Recorder()
    informer = env.informer()
    informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    assert await asyncio.wait_for(informer.wait_for_sync(), 1)
    assert informer.has_synced()
    assert sorted(rec.kinds()) == [("add", "a/one"), ("add", "b/two")]
    assert store_state(informer) == await env.server_state()

    rec.clear()
    await env.cm("three")
    await env.set_data("one", x="2")
    await env.delete("two", "b")
    await env.settle()
    assert rec.kinds() == [("add", "a/three"), ("update", "a/one"), ("delete", "b/two")]
    old, new = rec.events[1][3]
    assert old["data"] == {"x": "1"} and new["data"] == {"x": "2"}
    assert store_state(informer) == await env.server_state()
    assert informer.last_sync_resource_version == env.server.resource_version
    assert informer.reflector.lists == 1


async def test_handler_added_late_gets_synthetic_adds(env: Env) -> None:
    await env.cm("one")
    informer = env.informer()
    await informer.wait_for_sync()
    rec = Recorder()
    reg = informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    assert reg.has_synced()
    assert rec.kinds() == [("add", "a/one")]
    await env.cm("two")
    await env.settle()
    assert rec.kinds() == [("add", "a/one"), ("add", "a/two")]
    informer.remove_event_handler(reg)
    await env.cm("three")
    await env.settle()
    assert len(rec.events) == 2


async def test_registration_before_sync_reports_sync_later(env: Env) -> None:
    rule = env.server.faults.fail("list", error=500)
    informer = env.informer()
    reg = informer.add_event_handler(lambda o: None)
    await env.settle()
    assert not reg.has_synced() and not informer.has_synced()
    assert rule.hits == 1
    await env.run_for(1.0)  # the backoff (0.8 s) passes: the list is retried
    assert reg.has_synced() and informer.has_synced()


async def test_bookmarks_advance_the_resource_version(env: Env) -> None:
    env.server.bookmark_interval = 1.0
    informer = env.informer()
    await informer.wait_for_sync()
    synced_rv = informer.last_sync_resource_version
    # Writes to another kind move the server's resourceVersion, not the ConfigMaps.
    await env.client.create({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "s", "namespace": "a"}})
    await env.settle()
    assert informer.last_sync_resource_version == synced_rv
    await env.run_for(1.0)
    assert informer.last_sync_resource_version == env.server.resource_version
    assert int(informer.last_sync_resource_version) > int(synced_rv)


async def test_dropped_watch_resumes_from_last_rv_without_relisting(env: Env) -> None:
    await env.cm("one")
    rec = Recorder()
    informer = env.informer()
    informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    await informer.wait_for_sync()
    await env.cm("two")
    await env.settle()
    watches = informer.reflector.watches
    assert env.server.faults.drop_watches() == 1
    # Writes while no watch is open are replayed from the server's history.
    await env.cm("three")
    await env.delete("one")
    rec.clear()
    await env.settle()
    assert informer.reflector.watches == watches + 1
    assert informer.reflector.lists == 1
    # Exactly the missed events: nothing from before the drop is replayed.
    assert rec.kinds() == [("add", "a/three"), ("delete", "a/one")]
    assert informer.last_sync_resource_version == env.server.resource_version
    assert isinstance(rec.events[-1][3], dict), "a watched delete is not a tombstone"
    assert store_state(informer) == await env.server_state()


async def test_gone_relists_and_replaces_with_synthetic_events(env: Env) -> None:
    await env.cm("keep", v="1")
    await env.cm("change", v="1")
    await env.cm("vanish", v="1")
    rec = Recorder()
    informer = env.informer()
    informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    await informer.wait_for_sync()
    rec.clear()
    # Stop watching, change things, and make the history too short to resume.
    env.server.faults.drop_watches()
    env.server.faults.fail("watch", error=500, times=None)
    await env.settle()
    await env.set_data("change", v="2")
    await env.delete("vanish")
    await env.cm("new")
    env.server.faults.clear()
    env.server.faults.compact()
    await env.run_for(30)
    assert informer.reflector.lists == 2
    assert sorted(rec.kinds()) == [("add", "a/new"), ("delete", "a/vanish"),
                                   ("update", "a/change")]
    tombstone = next(e[3] for e in rec.events if e[0] == "delete")
    assert isinstance(tombstone, DeletedFinalStateUnknown)
    assert tombstone.key == "a/vanish"
    assert tombstone.obj["data"] == {"v": "1"}, "the last state the cache knew"
    old, new = next(e[3] for e in rec.events if e[0] == "update")
    assert (old["data"], new["data"]) == ({"v": "1"}, {"v": "2"})
    assert store_state(informer) == await env.server_state()


async def test_expired_watch_start_relists(env: Env) -> None:
    await env.cm("one")
    informer = env.informer()
    await informer.wait_for_sync()
    env.server.faults.expire_next_watch()
    env.server.faults.drop_watches()
    await env.settle()
    # Backoff after the very short watch (0.8 s), then after the 410 (1.6 s).
    await env.run_for(2.3)
    assert informer.reflector.lists == 1
    await env.run_for(0.2)
    assert informer.reflector.lists == 2
    await env.cm("two")
    await env.settle()
    assert "a/two" in store_state(informer)


async def test_failures_back_off_on_the_clock(env: Env) -> None:
    errors_seen: list[BaseException] = []
    env.server.faults.fail("list", error=503, times=3)
    informer = env.informer(on_watch_error=errors_seen.append)
    await env.settle()
    assert informer.reflector.lists == 0 and len(errors_seen) == 1
    await env.run_for(0.7)
    assert len(errors_seen) == 1, "first retry after 0.8 s"
    await env.run_for(0.2)
    assert len(errors_seen) == 2
    await env.run_for(1.4)
    assert len(errors_seen) == 2, "second retry 1.6 s after the first"
    await env.run_for(0.2)
    assert len(errors_seen) == 3
    await env.run_for(3.0)
    assert not informer.has_synced(), "third retry 3.2 s after the second"
    await env.run_for(0.2)
    assert informer.has_synced()
    assert all(isinstance(e, errors.ServiceUnavailable) for e in errors_seen)


async def test_stream_ending_without_events_at_once_backs_off(env: Env) -> None:
    informer = env.informer()
    await informer.wait_for_sync()
    watches = informer.reflector.watches
    env.server.faults.drop_watches()
    await env.settle()
    assert informer.reflector.watches == watches, "very short watch: wait before re-watching"
    await env.run_for(1.0)
    assert informer.reflector.watches == watches + 1


async def test_handler_exceptions_do_not_stop_the_informer(env: Env) -> None:
    rec = Recorder()
    informer = env.informer()

    def boom(*_: Any) -> None:
        raise RuntimeError("handler bug")

    informer.add_event_handler(boom, boom, boom)
    informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    await informer.wait_for_sync()
    await env.cm("one")
    await env.set_data("one", x="1")
    await env.delete("one")
    await env.settle()
    assert rec.kinds() == [("add", "a/one"), ("update", "a/one"), ("delete", "a/one")]
    assert informer.running


async def test_handlers_cannot_mutate_the_store(env: Env) -> None:
    await env.cm("one", x="1")
    informer = env.informer()

    def vandal(obj: dict[str, Any], *rest: Any) -> None:
        target = rest[0] if rest else obj
        target["data"]["x"] = "vandalised"
        target["metadata"]["labels"] = {"bad": "yes"}

    informer.add_event_handler(vandal, vandal)
    await informer.wait_for_sync()
    await env.set_data("one", x="2")
    await env.settle()
    stored = informer.indexer.get_by_key("a/one")
    assert stored is not None
    assert stored["data"] == {"x": "2"}
    assert "labels" not in stored["metadata"]


async def test_read_only_handlers_get_the_stored_objects_and_the_others_copies(
        env: Env) -> None:
    await env.cm("one", x="1")
    informer = env.informer()
    seen: list[tuple[str, str, bool]] = []

    def reader(name: str) -> Any:
        def on_event(obj: dict[str, Any], *rest: Any) -> None:
            got = rest[0] if rest else obj
            seen.append((name, got["data"]["x"], got is informer.indexer.get_by_key("a/one")))
        return on_event

    def vandal(obj: dict[str, Any], *rest: Any) -> None:
        (rest[0] if rest else obj)["data"]["x"] = "vandalised"

    informer.add_event_handler(reader("before"), reader("before"))
    informer.add_event_handler(reader("ro"), reader("ro"), read_only=True)
    informer.add_event_handler(vandal, vandal)
    informer.add_event_handler(reader("ro-after"), reader("ro-after"), read_only=True)
    await informer.wait_for_sync()
    await env.set_data("one", x="2")
    await env.settle()
    # The handler that writes got a copy: the store, and what the read-only handlers
    # after it are handed, are untouched.
    assert seen == [("before", "1", False), ("ro", "1", True), ("ro-after", "1", True),
                    ("before", "2", False), ("ro", "2", True), ("ro-after", "2", True)]
    stored = informer.indexer.get_by_key("a/one")
    assert stored is not None and stored["data"] == {"x": "2"}
    # The synthetic adds of a late registration follow the same rule.
    late: list[bool] = []
    informer.add_event_handler(lambda obj: late.append(obj is stored), read_only=True)
    informer.add_event_handler(lambda obj: late.append(obj is stored))
    assert late == [True, False]


async def test_resync_delivers_updates_for_every_object(env: Env) -> None:
    await env.cm("one")
    await env.cm("two")
    rec = Recorder()
    informer = env.informer(resync_period=10)
    informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    await informer.wait_for_sync()
    rec.clear()
    await env.run_for(9.5, step=0.5)
    assert rec.events == []
    await env.run_for(0.5)
    assert sorted(rec.kinds()) == [("update", "a/one"), ("update", "a/two")]
    old, new = rec.events[0][3]
    assert old == new


async def test_transform_applies_before_storing(env: Env) -> None:
    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"].pop("managedFields", None)
        obj["metadata"].setdefault("annotations", {})["seen"] = "yes"
        return obj

    await env.cm("one")
    informer = env.informer(transform=strip)
    await informer.wait_for_sync()
    await env.cm("two")
    await env.settle()
    for key in ("a/one", "a/two"):
        stored = informer.indexer.get_by_key(key)
        assert stored is not None
        assert stored["metadata"]["annotations"] == {"seen": "yes"}
        assert "managedFields" not in stored["metadata"]


async def test_label_selector_informer_sees_objects_leave_and_enter(env: Env) -> None:
    await env.cm("in", labels={"app": "x"})
    await env.cm("out", labels={"app": "y"})
    rec = Recorder()
    informer = env.informer(label_selector="app=x")
    informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    await informer.wait_for_sync()
    assert rec.kinds() == [("add", "a/in")]
    obj = await env.client.get(CONFIGMAP, "in", namespace="a")
    obj["metadata"]["labels"] = {"app": "y"}
    await env.client.update(obj)
    obj = await env.client.get(CONFIGMAP, "out", namespace="a")
    obj["metadata"]["labels"] = {"app": "x"}
    await env.client.update(obj)
    await env.settle()
    assert rec.kinds()[1:] == [("delete", "a/in"), ("add", "a/out")]
    assert list(store_state(informer)) == ["a/out"]


async def test_namespace_informer_sees_only_its_namespace(env: Env) -> None:
    await env.cm("one", "a")
    await env.cm("two", "b")
    informer = env.informer(namespace="b")
    await informer.wait_for_sync()
    await env.cm("three", "a")
    await env.cm("four", "b")
    await env.settle()
    assert sorted(store_state(informer)) == ["b/four", "b/two"]


async def test_indexers_follow_updates(env: Env) -> None:
    informer = env.informer(indexers={"by-x": lambda o: [o.get("data", {}).get("x", "")]})
    await informer.wait_for_sync()
    await env.cm("one", x="1")
    await env.cm("two", x="1")
    await env.settle()
    assert informer.indexer.index_keys("by-x", "1") == ["a/one", "a/two"]
    await env.set_data("one", x="2")
    await env.delete("two")
    await env.settle()
    assert informer.indexer.index_keys("by-x", "1") == []
    assert informer.indexer.index_keys("by-x", "2") == ["a/one"]
    informer.add_indexers({"by-name": lambda o: [o["metadata"]["name"]]})
    assert [o["metadata"]["name"] for o in informer.indexer.by_index("by-name", "one")] == [
        "one"]
    assert informer.indexer.by_index("namespace", "a")[0]["metadata"]["name"] == "one"


async def test_wait_for_sync_returns_false_when_stopped_first(env: Env) -> None:
    env.server.faults.fail("list", error=500, times=None)
    informer = env.informer()
    waiter = asyncio.create_task(informer.wait_for_sync())
    await env.settle()
    assert not waiter.done()
    await informer.stop()
    assert await asyncio.wait_for(waiter, 1) is False
    assert not informer.running


class _StallingClient:
    """Wraps a client so watches never end on their own (a silently dead connection)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.watch_timeouts: list[int | None] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _stall(self, **kw: Any) -> AsyncIterator[WatchEvent]:
        self.watch_timeouts.append(kw.get("timeout_seconds"))
        await asyncio.Event().wait()
        yield WatchEvent("BOOKMARK", {})  # pragma: no cover - never reached

    def watch(self, gvk: GVK, **kw: Any) -> AsyncIterator[WatchEvent]:
        return self._stall(**kw)


async def test_stalled_watch_is_abandoned_after_its_timeout(env: Env) -> None:
    client = _StallingClient(env.client)
    informer = SharedInformer(client, CONFIGMAP, clock=env.clock,  # type: ignore[arg-type]
                              backoff=Backoff(jitter=0, clock=env.clock), min_watch_timeout=10)
    env.informers.append(informer)
    informer.start()
    await informer.wait_for_sync()
    await env.settle()
    assert informer.reflector.watches == 1
    timeout = client.watch_timeouts[0]
    assert timeout is not None and 10 <= timeout <= 20
    await env.run_for(timeout + 29, step=1)
    assert informer.reflector.watches == 1
    await env.run_for(2, step=1)
    assert informer.reflector.watches == 2


@pytest.mark.parametrize("bad", ["list", "watch"])
async def test_stop_while_retrying_is_clean(env: Env, bad: str) -> None:
    env.server.faults.fail(bad, error=500, times=None)
    informer = env.informer()
    await env.run_for(2)
    await informer.stop()
    assert not informer.running


def test_backoff_doubles_caps_jitters_and_resets() -> None:
    clock = ManualClock()
    backoff = Backoff(0.8, 30.0, jitter=0, reset_after=120, clock=clock)
    assert [backoff.next() for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    clock.advance(120)
    assert backoff.next() == 30.0, "not yet quiet for longer than reset_after"
    clock.advance(120.5)
    assert backoff.next() == 0.8
    jittery = Backoff(1.0, 8.0, jitter=1.0, clock=clock, rng=random.Random(7))
    delays = [jittery.next() for _ in range(6)]
    for delay, step in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert step <= delay <= 2 * step


async def test_failed_rewatch_retries_from_last_rv_without_relisting(env: Env) -> None:
    rec = Recorder()
    informer = env.informer()
    informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    await informer.wait_for_sync()
    await env.cm("one")
    await env.settle()
    rule = env.server.faults.fail("watch", error=500, times=2)
    env.server.faults.drop_watches()
    await env.cm("two")
    await env.settle()
    assert rule.hits == 1
    await env.run_for(3.0)  # backoffs 0.8 s and 1.6 s, then a watch succeeds
    assert rule.hits == 2
    assert informer.reflector.lists == 1, "a failed watch is retried, not relisted"
    assert rec.kinds() == [("add", "a/one"), ("add", "a/two")]


async def test_field_selector_informer(env: Env) -> None:
    await env.cm("wanted")
    await env.cm("other")
    informer = env.informer(field_selector="metadata.name=wanted")
    await informer.wait_for_sync()
    await env.cm("wanted", "b")
    await env.cm("third")
    await env.settle()
    assert sorted(store_state(informer)) == ["a/wanted", "b/wanted"]
