"""Contract: informers and the informer cache over any backend.

Only behaviour a real kube-apiserver shares is asserted here (list then watch, event
order per object, status updates, selectors, cache reads and field indexes). Fault
injection (dropped watches, 410 Gone, relists) lives in ``tests/unit/runtime/cache``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.runtime.cache import ByObject, Cache, SharedInformer
from jobframework.runtime.objects import GVK, ObjectKey

from .conftest import CONFIGMAP, WIDGET, Backend


class Seen:
    """Handler calls as ``(type, name, spec or data)``, for one namespace."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.events: list[tuple[str, str, Any]] = []

    def _keep(self, obj: dict[str, Any]) -> bool:
        return bool(obj["metadata"].get("namespace") == self.namespace)

    def on_add(self, obj: dict[str, Any]) -> None:
        if self._keep(obj):
            self.events.append(("add", obj["metadata"]["name"], _payload(obj)))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if self._keep(new):
            self.events.append(("update", new["metadata"]["name"], _payload(new)))

    def on_delete(self, obj: Any) -> None:
        inner = obj if isinstance(obj, dict) else obj.obj
        if self._keep(inner):
            self.events.append(("delete", inner["metadata"]["name"], _payload(inner)))

    def of(self, name: str) -> list[tuple[str, Any]]:
        return [(t, p) for t, n, p in self.events if n == name]


def _payload(obj: dict[str, Any]) -> Any:
    return obj.get("spec", obj.get("data"))


@pytest.fixture
async def informers(backend: Backend) -> AsyncIterator[list[SharedInformer]]:
    started: list[SharedInformer] = []
    yield started
    for informer in started:
        await informer.stop()


def start(backend: Backend, started: list[SharedInformer], gvk: GVK,
          **kw: Any) -> SharedInformer:
    informer = SharedInformer(backend.client, gvk, namespace=backend.namespace, **kw)
    started.append(informer)
    informer.start()
    return informer


async def test_informer_lists_then_follows_changes(
    widgets: Backend, informers: list[SharedInformer]
) -> None:
    await widgets.client.create(widgets.widget("before", size=1))
    seen = Seen(widgets.namespace)
    informer = start(widgets, informers, WIDGET)
    informer.add_event_handler(seen.on_add, seen.on_update, seen.on_delete)
    assert await informer.wait_for_sync()
    assert seen.of("before") == [("add", {"size": 1})]

    w = await widgets.client.create(widgets.widget("w", size=1))
    w["spec"]["size"] = 2
    w = await widgets.client.update(w)
    w["status"] = {"phase": "Running"}
    await widgets.client.update_status(w)
    await widgets.client.delete(WIDGET, "w", namespace=widgets.namespace)

    async def check() -> None:
        assert [t for t, _ in seen.of("w")] == ["add", "update", "update", "delete"]

    await widgets.eventually(check)
    assert seen.of("w")[0] == ("add", {"size": 1})
    assert seen.of("w")[1] == ("update", {"size": 2})
    stored = informer.indexer.list()
    assert [o["metadata"]["name"] for o in stored] == ["before"]


async def test_store_matches_a_list_after_writes(
    backend: Backend, informers: list[SharedInformer]
) -> None:
    informer = start(backend, informers, CONFIGMAP)
    assert await informer.wait_for_sync()
    for i in range(5):
        await backend.client.create(backend.configmap(f"cm{i}", v=str(i)))
    await backend.client.delete(CONFIGMAP, "cm3", namespace=backend.namespace)
    cm = await backend.client.get(CONFIGMAP, "cm1", namespace=backend.namespace)
    cm["data"] = {"v": "changed"}
    await backend.client.update(cm)

    async def check() -> None:
        listed = await backend.client.list(CONFIGMAP, namespace=backend.namespace)
        expected = {str(ObjectKey.of(o)): o["metadata"]["resourceVersion"]
                    for o in listed.items}
        actual = {k: o["metadata"]["resourceVersion"] for k in informer.indexer.list_keys()
                  if (o := informer.indexer.get_by_key(k)) is not None}
        assert actual == expected

    await backend.eventually(check)


async def test_label_selector_informer(
    backend: Backend, informers: list[SharedInformer]
) -> None:
    seen = Seen(backend.namespace)
    informer = start(backend, informers, CONFIGMAP, label_selector="team=blue")
    informer.add_event_handler(seen.on_add, seen.on_update, seen.on_delete)
    assert await informer.wait_for_sync()
    blue = backend.configmap("blue")
    blue["metadata"]["labels"] = {"team": "blue"}
    await backend.client.create(blue)
    await backend.client.create(backend.configmap("red"))
    # Relabelling out of the selector is a delete for this informer.
    obj = await backend.client.get(CONFIGMAP, "blue", namespace=backend.namespace)
    obj["metadata"]["labels"] = {"team": "red"}
    await backend.client.update(obj)

    async def check() -> None:
        assert [t for t, _ in seen.of("blue")] == ["add", "delete"]

    await backend.eventually(check)
    assert seen.of("red") == []
    assert informer.indexer.list() == []


async def test_late_handler_gets_current_objects(
    backend: Backend, informers: list[SharedInformer]
) -> None:
    await backend.client.create(backend.configmap("one"))
    informer = start(backend, informers, CONFIGMAP)
    assert await informer.wait_for_sync()
    seen = Seen(backend.namespace)
    informer.add_event_handler(seen.on_add)
    assert "one" in [n for t, n, _ in seen.events]

    # A real cluster's controller-manager also publishes ``kube-root-ca.crt`` into every
    # namespace, at a time of its choosing: the handler sees each listed object once.
    async def check() -> None:
        listed = await backend.client.list(CONFIGMAP, namespace=backend.namespace)
        assert sorted(n for t, n, _ in seen.events) == sorted(
            o["metadata"]["name"] for o in listed.items)

    await backend.eventually(check)


@pytest.fixture
async def cache(widgets: Backend) -> AsyncIterator[Cache]:
    c = Cache(widgets.client, by_object={WIDGET: ByObject(namespaces=[widgets.namespace])})
    yield c
    await c.stop()


async def test_cache_reads_and_field_index(widgets: Backend, cache: Cache) -> None:
    await cache.index_field(WIDGET, "spec.color", lambda o: [o["spec"].get("color", "")])
    cache.start()
    await widgets.client.create(widgets.widget("r1", color="red"))
    await widgets.client.create(widgets.widget("r2", color="red", size=3))
    await widgets.client.create(widgets.widget("b1", color="blue"))

    async def check() -> None:
        reds = await cache.list(WIDGET, namespace=widgets.namespace,
                                matching_fields={"spec.color": "red"})
        assert [o["metadata"]["name"] for o in reds.items] == ["r1", "r2"]

    await widgets.eventually(check)
    everywhere = await cache.list(WIDGET, matching_fields={"spec.color": "blue"})
    assert [o["metadata"]["name"] for o in everywhere.items] == ["b1"]
    got = await cache.get(WIDGET, "r2", namespace=widgets.namespace)
    assert got["spec"] == {"color": "red", "size": 3}
    got["spec"]["color"] = "mutated"
    again = await cache.get(WIDGET, "r2", namespace=widgets.namespace)
    assert again["spec"]["color"] == "red"
    with pytest.raises(errors.NotFound):
        await cache.get(WIDGET, "absent", namespace=widgets.namespace)
