"""A key whose reconcile wrote to a cached kind is reconciled again only once the cache
has seen that write (or after ``own_writes_timeout``): the second pass does not act on
the state from before the first pass's write."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from jobframework.runtime import errors
from jobframework.runtime.builder import ControllerBuilder
from jobframework.runtime.client import WatchEvent
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.controller import Controller
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.reconcile import Request, Result
from jobframework.testing import APIServer

from .helpers import settle, until

PARENT = GVK("", "v1", "ConfigMap")
CHILD = GVK("", "v1", "Secret")


class GatedChildWatch:
    """The in-memory client, with watch events of ``CHILD`` held until ``gate`` opens: a
    watch running behind the writes (lists are not held, so caches sync)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.gate = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def watch(self, gvk: GVK, **kw: Any) -> AsyncIterator[WatchEvent]:
        async for event in self._inner.watch(gvk, **kw):
            if gvk == CHILD and event.type != "BOOKMARK":
                await self.gate.wait()
            yield event


class CreateChild:
    """Creates the parent's child Secret unless the cache has it. The first pass also
    re-adds its key, as an event for the parent arriving meanwhile would."""

    def __init__(self, mgr: Manager) -> None:
        self.client = mgr.get_client()
        self.controller: Controller | None = None
        self.calls = 0
        self.creates = 0
        self.already_exists = 0

    async def reconcile(self, request: Request) -> Result:
        self.calls += 1
        if self.calls == 1:
            assert self.controller is not None
            self.controller.queue.add(request)
        try:
            await self.client.get(CHILD, request.name, namespace=request.namespace)
            return Result()
        except errors.NotFound:
            pass
        self.creates += 1
        try:
            await self.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {
                "name": request.name, "namespace": request.namespace}})
        except errors.AlreadyExists:
            self.already_exists += 1
        return Result()


@contextlib.asynccontextmanager
async def started(own_writes_timeout: float | None) -> AsyncIterator[
        tuple[APIServer, GatedChildWatch, CreateChild]]:
    server = APIServer(ManualClock())
    api = GatedChildWatch(server.client())
    mgr = Manager(api, clock=server.clock)
    rec = CreateChild(mgr)
    rec.controller = (ControllerBuilder(mgr).for_(PARENT)
                      .with_options(own_writes_timeout=own_writes_timeout).build(rec))
    await mgr.get_cache().get_informer(CHILD)  # children are read from the cache
    task = asyncio.create_task(mgr.start())
    try:
        await rec.controller.wait_for_sync()
        yield server, api, rec
    finally:
        api.gate.set()
        await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


def parent(name: str) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}}


async def test_the_next_pass_waits_for_the_cache_to_see_the_create() -> None:
    async with started(own_writes_timeout=30.0) as (server, api, rec):
        await server.client().create(parent("p"))
        await until(lambda: rec.creates == 1, turns=2000, what="the first create")
        await settle(300)
        # The key is dirty but held: the cache has not seen the Secret yet.
        assert rec.calls == 1
        api.gate.set()
        await until(lambda: rec.calls == 2, turns=2000, what="the second pass")
        await settle(100)
        assert (rec.creates, rec.already_exists, rec.calls) == (1, 0, 2)


async def test_without_the_hold_the_next_pass_creates_again() -> None:
    # What the hold prevents: the same scenario with it off races the watch and loses.
    async with started(own_writes_timeout=0) as (server, _api, rec):
        await server.client().create(parent("p"))
        await until(lambda: rec.calls == 2, turns=2000, what="the second pass")
        await settle(100)
        assert (rec.creates, rec.already_exists) == (2, 1)


async def test_a_write_the_cache_never_sees_releases_the_key_after_the_timeout() -> None:
    async with started(own_writes_timeout=0.2) as (server, _api, rec):
        loop = asyncio.get_running_loop()
        await server.client().create(parent("p"))
        await until(lambda: rec.creates == 1, turns=2000, what="the first create")
        created_at = loop.time()
        while rec.calls < 2:
            assert loop.time() - created_at < 5, "the key was never released"
            await asyncio.sleep(0.01)
        assert loop.time() - created_at >= 0.15
        assert (rec.creates, rec.already_exists) == (2, 1)


async def test_reads_and_uncached_writes_do_not_hold() -> None:
    server = APIServer(ManualClock())
    mgr = Manager(server.client(), clock=server.clock)
    client = mgr.get_client()
    calls: list[Request] = []

    class Reader:
        async def reconcile(self, request: Request) -> Result:
            calls.append(request)
            # Events are written but not cached: nothing to wait for.
            await client.create({"apiVersion": "v1", "kind": "Event", "metadata": {
                "name": f"e{len(calls)}", "namespace": "default"},
                "involvedObject": {"kind": "ConfigMap", "name": request.name}})
            return Result()

    ctrl = ControllerBuilder(mgr).for_(PARENT).build(Reader())
    task = asyncio.create_task(mgr.start())
    try:
        await ctrl.wait_for_sync()
        await server.client().create(parent("p"))
        await until(lambda: len(calls) == 1, turns=2000, what="a reconcile")
        await settle(50)
        assert not ctrl._holds
        ctrl.queue.add(Request.of("default", "p"))
        await until(lambda: len(calls) == 2, turns=2000, what="the next reconcile")
    finally:
        await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


async def test_shutdown_releases_held_keys() -> None:
    async with started(own_writes_timeout=30.0) as (server, _api, rec):
        await server.client().create(parent("p"))
        await until(lambda: rec.creates == 1, turns=2000, what="the first create")
        await settle(50)
        ctrl = rec.controller
        assert ctrl is not None and len(ctrl._holds) == 1
        # The gate is still shut: only the shutdown can release the key, at once.
        await ctrl._shutdown([])
        assert not ctrl._holds
        assert len(ctrl.queue) == 1  # released dirty; not reconciled while stopping
        await settle(50)
        assert rec.calls == 1
