"""Cache: informers on demand, cache-backed reads, field indexes, ByObject restrictions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.runtime.cache import (
    ByObject,
    Cache,
    CacheNotStarted,
    MultiNamespaceInformer,
    ResourceNotCached,
    SharedInformer,
    UnknownNamespace,
)
from jobframework.runtime.client import Reader
from jobframework.runtime.objects import GVK, ObjectKey

from .conftest import CONFIGMAP, NAMESPACE, Env, Recorder


def names(items: list[dict[str, Any]]) -> list[str]:
    return [str(ObjectKey.of(o)) for o in items]


@pytest.fixture
async def cache(env: Env) -> AsyncIterator[Cache]:
    c = Cache(env.client, clock=env.clock)
    yield c
    await c.stop()


def owner_of(o: dict[str, Any]) -> list[str]:
    owner = (o.get("metadata", {}).get("annotations") or {}).get("owner")
    return [owner] if owner else []


async def with_owner(env: Env, name: str, owner: str, ns: str = "a") -> None:
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": name, "namespace": ns,
                                          "annotations": {"owner": owner}}})


async def test_cache_is_a_reader(env: Env, cache: Cache) -> None:
    assert isinstance(cache, Reader)
    await env.cm("one", x="1")
    await env.cm("two", "b")
    cache.start()
    got = await cache.get(CONFIGMAP, "one", namespace="a")
    assert got["data"] == {"x": "1"}
    listed = await cache.list(CONFIGMAP)
    assert names(listed.items) == ["a/one", "b/two"]
    assert listed.resource_version == (await cache.get_informer(CONFIGMAP)
                                       ).last_sync_resource_version  # type: ignore[attr-defined]
    assert names((await cache.list(CONFIGMAP, namespace="b")).items) == ["b/two"]


async def test_reads_see_writes_after_the_watch_delivers(env: Env, cache: Cache) -> None:
    cache.start()
    await cache.list(CONFIGMAP)
    await env.cm("one")
    await env.settle()
    assert names((await cache.list(CONFIGMAP)).items) == ["a/one"]
    await env.delete("one")
    await env.settle()
    with pytest.raises(errors.NotFound, match='configmaps "one" not found'):
        await cache.get(CONFIGMAP, "one", namespace="a")


async def test_mutating_what_was_read_does_not_reach_the_cache(env: Env, cache: Cache) -> None:
    await env.cm("one", x="1")
    cache.start()
    got = await cache.get(CONFIGMAP, "one", namespace="a")
    got["data"]["x"] = "changed"
    got["metadata"]["labels"] = {"evil": "1"}
    listed = await cache.list(CONFIGMAP)
    listed.items[0]["data"]["x"] = "changed too"
    again = await cache.get(CONFIGMAP, "one", namespace="a")
    assert again["data"] == {"x": "1"}
    assert "labels" not in again["metadata"]
    assert names((await cache.list(CONFIGMAP, label_selector="evil=1")).items) == []


async def test_label_and_field_selectors(env: Env, cache: Cache) -> None:
    await env.cm("web", labels={"app": "web", "tier": "front"})
    await env.cm("db", labels={"app": "db"})
    await env.cm("other", "b", labels={"app": "web"})
    cache.start()
    assert names((await cache.list(CONFIGMAP, label_selector="app=web")).items) == [
        "a/web", "b/other"]
    assert names((await cache.list(CONFIGMAP, label_selector="app in (db),!tier")).items) == [
        "a/db"]
    by_name = await cache.list(CONFIGMAP, field_selector="metadata.name=db")
    assert names(by_name.items) == ["a/db"]
    assert names((await cache.list(CONFIGMAP, field_selector="metadata.namespace!=a")).items
                 ) == ["b/other"]


async def test_index_field_before_start(env: Env, cache: Cache) -> None:
    await with_owner(env, "w1", "job-1")
    await with_owner(env, "w2", "job-1", ns="b")
    await with_owner(env, "w3", "job-2")
    await cache.index_field(CONFIGMAP, "owner", owner_of)
    cache.start()
    everywhere = await cache.list(CONFIGMAP, matching_fields={"owner": "job-1"})
    assert names(everywhere.items) == ["a/w1", "b/w2"]
    in_a = await cache.list(CONFIGMAP, namespace="a", matching_fields={"owner": "job-1"})
    assert names(in_a.items) == ["a/w1"]
    # A field selector on an indexed field uses the index too.
    assert names((await cache.list(CONFIGMAP, field_selector="owner=job-2")).items) == ["a/w3"]
    with pytest.raises(KeyError):
        await cache.list(CONFIGMAP, matching_fields={"unindexed": "x"})


async def test_index_field_after_start_reindexes(env: Env, cache: Cache) -> None:
    await with_owner(env, "w1", "job-1")
    cache.start()
    assert await cache.list(CONFIGMAP)  # informer running and synced
    await cache.index_field(CONFIGMAP, "owner", owner_of)
    assert names((await cache.list(CONFIGMAP, matching_fields={"owner": "job-1"})).items) == [
        "a/w1"]
    await with_owner(env, "w2", "job-1")
    await env.settle()
    assert names((await cache.list(CONFIGMAP, matching_fields={"owner": "job-1"})).items) == [
        "a/w1", "a/w2"]
    with pytest.raises(ValueError):
        await cache.index_field(CONFIGMAP, "owner", owner_of)


async def test_matching_fields_combine_with_labels_and_other_indexes(
    env: Env, cache: Cache
) -> None:
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "x", "namespace": "a", "labels": {"keep": "y"},
        "annotations": {"owner": "o", "queue": "q1"}}})
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "y", "namespace": "a", "annotations": {"owner": "o", "queue": "q2"}}})
    await cache.index_field(CONFIGMAP, "owner", owner_of)
    await cache.index_field(
        CONFIGMAP, "queue", lambda o: [o["metadata"].get("annotations", {}).get("queue", "")])
    cache.start()
    both = await cache.list(CONFIGMAP, matching_fields={"owner": "o", "queue": "q2"})
    assert names(both.items) == ["a/y"]
    labelled = await cache.list(CONFIGMAP, matching_fields={"owner": "o"}, label_selector="keep")
    assert names(labelled.items) == ["a/x"]


async def test_reads_before_start_fail(env: Env, cache: Cache) -> None:
    with pytest.raises(CacheNotStarted):
        await cache.get(CONFIGMAP, "one", namespace="a")


async def test_reader_fail_on_missing_informer(env: Env) -> None:
    cache = Cache(env.client, clock=env.clock, reader_fail_on_missing_informer=True)
    cache.start()
    try:
        with pytest.raises(ResourceNotCached):
            await cache.list(CONFIGMAP)
        await cache.get_informer(CONFIGMAP)
        assert (await cache.list(CONFIGMAP)).items == []
    finally:
        await cache.stop()


async def test_informers_created_after_start_start_at_once(env: Env, cache: Cache) -> None:
    cache.start()
    informer = await cache.get_informer(CONFIGMAP)
    assert await asyncio.wait_for(informer.wait_for_sync(), 1)
    rec = Recorder()
    informer.add_event_handler(rec.on_add, rec.on_update, rec.on_delete)
    await env.cm("one")
    await env.settle()
    assert rec.kinds() == [("add", "a/one")]
    assert await cache.get_informer(CONFIGMAP) is informer, "one informer per kind"
    assert await cache.wait_for_cache_sync()


async def test_concurrent_get_informer_creates_one(env: Env, cache: Cache) -> None:
    a, b = await asyncio.gather(cache.get_informer(CONFIGMAP), cache.get_informer(CONFIGMAP))
    assert a is b


async def test_unknown_kind_is_an_error(env: Env, cache: Cache) -> None:
    with pytest.raises(LookupError):
        await cache.get_informer(GVK("example.com", "v1", "Nope"))
    with pytest.raises(LookupError):
        await cache.get_informer(GVK("example.com", "v1", "Nope"))


async def test_by_object_namespaces(env: Env) -> None:
    await env.client.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": "c"}})
    await env.cm("one", "a")
    await env.cm("two", "b")
    await env.cm("three", "c")
    cache = Cache(env.client, clock=env.clock,
                  by_object={CONFIGMAP: ByObject(namespaces=["a", "b"])})
    cache.start()
    try:
        informer = await cache.get_informer(CONFIGMAP)
        assert isinstance(informer, MultiNamespaceInformer)
        assert sorted(informer.informers) == ["a", "b"]
        assert names((await cache.list(CONFIGMAP)).items) == ["a/one", "b/two"]
        assert names((await cache.list(CONFIGMAP, namespace="b")).items) == ["b/two"]
        assert (await cache.get(CONFIGMAP, "two", namespace="b"))["metadata"]["name"] == "two"
        with pytest.raises(UnknownNamespace):
            await cache.get(CONFIGMAP, "three", namespace="c")
        rec = Recorder()
        regs = informer.add_event_handler(rec.on_add)
        assert sorted(rec.kinds()) == [("add", "a/one"), ("add", "b/two")]
        await env.cm("four", "c")
        await env.cm("five", "b")
        await env.settle()
        assert rec.kinds()[-1] == ("add", "b/five")
        informer.remove_event_handler(regs)
        await env.cm("six", "a")
        await env.settle()
        assert rec.kinds()[-1] == ("add", "b/five")
        # Namespaces are cluster-scoped: the restriction does not apply to them.
        ns_informer = await cache.get_informer(NAMESPACE)
        assert isinstance(ns_informer, SharedInformer)
        assert "c" in names((await cache.list(NAMESPACE)).items)
    finally:
        await cache.stop()


async def test_default_namespaces_and_label_selector(env: Env) -> None:
    await env.cm("one", "a", labels={"managed": "yes"})
    await env.cm("two", "a")
    await env.cm("three", "b", labels={"managed": "yes"})
    cache = Cache(env.client, clock=env.clock, namespaces=["a"], label_selector="managed=yes")
    cache.start()
    try:
        assert names((await cache.list(CONFIGMAP)).items) == ["a/one"]
        with pytest.raises(errors.NotFound):
            await cache.get(CONFIGMAP, "two", namespace="a")
    finally:
        await cache.stop()


async def test_by_object_overrides_and_transform(env: Env) -> None:
    await env.cm("one", "a", labels={"managed": "yes"})
    await env.cm("two", "b")

    def mark(o: dict[str, Any]) -> dict[str, Any]:
        o["metadata"]["annotations"] = {"transformed": "1"}
        return o

    cache = Cache(env.client, clock=env.clock, namespaces=["a"], label_selector="managed=yes",
                  by_object={CONFIGMAP: ByObject(namespaces=(), label_selector="",
                                                 transform=mark)})
    cache.start()
    try:
        listed = await cache.list(CONFIGMAP)
        assert names(listed.items) == ["a/one", "b/two"], "all namespaces, no selector"
        assert all(o["metadata"]["annotations"] == {"transformed": "1"} for o in listed.items)
    finally:
        await cache.stop()


async def test_run_stops_informers_when_cancelled(env: Env) -> None:
    cache = Cache(env.client, clock=env.clock)
    informer = await cache.get_informer(CONFIGMAP)
    task = asyncio.create_task(cache.run())
    assert await asyncio.wait_for(informer.wait_for_sync(), 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert isinstance(informer, SharedInformer) and not informer.running
    with pytest.raises(RuntimeError):
        cache.start()
    # A kind first read after the cache stopped can never sync: fail, do not hang.
    with pytest.raises(CacheNotStarted):
        await asyncio.wait_for(cache.list(NAMESPACE), 1)


async def test_field_index_on_a_multi_namespace_informer(env: Env) -> None:
    await with_owner(env, "x1", "o", "a")
    await with_owner(env, "x2", "o", "b")
    await with_owner(env, "x3", "p", "b")
    cache = Cache(env.client, clock=env.clock, namespaces=["a", "b"])
    await cache.index_field(CONFIGMAP, "owner", owner_of)
    cache.start()
    try:
        owned = await cache.list(CONFIGMAP, matching_fields={"owner": "o"})
        assert names(owned.items) == ["a/x1", "b/x2"]
        assert owned.resource_version == "", "no single resourceVersion across informers"
        in_b = await cache.list(CONFIGMAP, namespace="b", matching_fields={"owner": "o"})
        assert names(in_b.items) == ["b/x2"]
    finally:
        await cache.stop()
