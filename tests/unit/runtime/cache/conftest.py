"""Fixtures for informer and cache tests: an in-memory API server on a manual clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from jobframework.runtime.cache import Backoff, SharedInformer
from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK, Object, ObjectKey
from jobframework.testing import APIServer, ManualClock

CONFIGMAP = GVK("", "v1", "ConfigMap")
NAMESPACE = GVK("", "v1", "Namespace")


@attrs.define
class Recorder:
    """Records handler calls as ``(type, key, resourceVersion, payload)``."""

    events: list[tuple[str, str, str, Any]] = attrs.Factory(list)

    def on_add(self, obj: Object) -> None:
        self.events.append(("add", str(ObjectKey.of(obj)), _rv(obj), obj))

    def on_update(self, old: Object, new: Object) -> None:
        self.events.append(("update", str(ObjectKey.of(new)), _rv(new), (old, new)))

    def on_delete(self, obj: Any) -> None:
        inner = obj if isinstance(obj, dict) else obj.obj
        self.events.append(("delete", str(ObjectKey.of(inner)), _rv(inner), obj))

    def kinds(self) -> list[tuple[str, str]]:
        return [(t, k) for t, k, _, _ in self.events]

    def clear(self) -> None:
        self.events.clear()


def _rv(obj: Object) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))


@attrs.define
class Env:
    """A server, a client and helpers to drive time and objects."""

    clock: ManualClock
    server: APIServer
    client: Client
    informers: list[SharedInformer] = attrs.Factory(list)

    async def settle(self) -> None:
        """Let watches deliver and handlers run (no clock time passes)."""
        for _ in range(3):
            await self.server.settle()
            for _ in range(20):
                await asyncio.sleep(0)

    async def run_for(self, seconds: float, step: float = 0.1) -> None:
        """Let ``seconds`` of clock time pass in small steps, settling after each.

        A final nanosecond absorbs float rounding so deadlines at exactly the end fire.
        """
        steps = max(1, round(seconds / step))
        for i in range(steps):
            self.clock.advance(seconds / steps + (1e-9 if i == steps - 1 else 0.0))
            for _ in range(10):
                await asyncio.sleep(0)
        await self.settle()

    def informer(self, gvk: GVK = CONFIGMAP, **kw: Any) -> SharedInformer:
        """A started informer with deterministic backoff (jitter off)."""
        kw.setdefault("backoff", Backoff(jitter=0, clock=self.clock))
        informer = SharedInformer(self.client, gvk, clock=self.clock, **kw)
        self.informers.append(informer)
        informer.start()
        return informer

    async def cm(self, name: str, namespace: str = "a", labels: dict[str, str] | None = None,
                 **data: str) -> Object:
        """Create a ConfigMap."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if labels:
            meta["labels"] = labels
        return await self.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": meta, "data": dict(data)})

    async def set_data(self, name: str, namespace: str = "a", **data: str) -> Object:
        """Replace a ConfigMap's data."""
        obj = await self.client.get(CONFIGMAP, name, namespace=namespace)
        obj["data"] = dict(data)
        return await self.client.update(obj)

    async def delete(self, name: str, namespace: str = "a") -> None:
        """Delete a ConfigMap."""
        await self.client.delete(CONFIGMAP, name, namespace=namespace)

    async def server_state(self, namespace: str | None = None) -> dict[str, str]:
        """``key -> resourceVersion`` of the server's ConfigMaps."""
        listed = await self.client.list(CONFIGMAP, namespace=namespace)
        return {str(ObjectKey.of(o)): _rv(o) for o in listed.items}


def store_state(informer: SharedInformer) -> dict[str, str]:
    """``key -> resourceVersion`` of an informer's store."""
    return {k: _rv(o) for k in informer.indexer.list_keys()
            if (o := informer.indexer.get_by_key(k)) is not None}


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    """Namespaces ``a`` and ``b`` exist; informers started via ``env.informer`` are stopped."""
    clock = ManualClock()
    server = APIServer(clock, bookmark_interval=0)
    client = server.client()
    for ns in ("a", "b"):
        await client.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": ns}})
    e = Env(clock, server, client)
    yield e
    for informer in e.informers:
        await informer.stop()
