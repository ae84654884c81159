"""Informer convergence under random writes interleaved with dropped watches and 410s."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import event, given, settings, target
from hypothesis import strategies as st

from jobframework.runtime import errors
from jobframework.runtime.cache import DeletedFinalStateUnknown
from jobframework.runtime.objects import Object, ObjectKey
from jobframework.testing import APIServer, ManualClock

from .conftest import Env, store_state


class HandlerView:
    """What a handler believes the cluster holds, checking every call is consistent.

    The informer logs and swallows handler exceptions, so violations are recorded in
    ``violations`` and asserted on at the end.
    """

    def __init__(self) -> None:
        self.view: dict[str, int] = {}
        self.tombstones = 0
        self.violations: list[str] = []

    def on_add(self, obj: Object) -> None:
        self._check(self._add, obj)

    def on_update(self, old: Object, new: Object) -> None:
        self._check(self._update, old, new)

    def on_delete(self, obj: Any) -> None:
        self._check(self._delete, obj)

    def _check(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except AssertionError as err:
            self.violations.append(str(err))

    def _add(self, obj: Object) -> None:
        key = str(ObjectKey.of(obj))
        assert key not in self.view, f"add for {key}, which the handler already has"
        self.view[key] = int(obj["metadata"]["resourceVersion"])

    def _update(self, old: Object, new: Object) -> None:
        key = str(ObjectKey.of(new))
        assert key in self.view, f"update for {key}, which the handler never saw added"
        assert str(ObjectKey.of(old)) == key
        assert int(old["metadata"]["resourceVersion"]) == self.view[key], "old is what we had"
        rv = int(new["metadata"]["resourceVersion"])
        assert rv > self.view[key], "updates move forward"
        self.view[key] = rv

    def _delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self.tombstones += 1
            obj = obj.obj
        key = str(ObjectKey.of(obj))
        assert key in self.view, f"delete for {key}, which the handler does not have"
        del self.view[key]


NAMES = st.sampled_from(["p", "q", "r"])
NSS = st.sampled_from(["a", "b"])
WRITES = st.one_of(
    st.tuples(st.just("create"), NAMES, NSS, st.integers(0, 3)),
    st.tuples(st.just("update"), NAMES, NSS, st.integers(0, 3)),
    st.tuples(st.just("delete"), NAMES, NSS),
)
FAULTS = st.one_of(
    st.tuples(st.just("drop")),
    st.tuples(st.just("gone")),
    # A watch outage: writes while no watch is open, then (maybe) history compaction.
    st.tuples(st.just("outage"), st.lists(WRITES, min_size=1, max_size=4), st.booleans()),
    st.tuples(st.just("expire")),
    st.tuples(st.just("fail_watch")),
    st.tuples(st.just("fail_list")),
)
OTHER = st.one_of(
    st.tuples(st.just("settle")),
    st.tuples(st.just("advance"), st.sampled_from([0.5, 1.0, 5.0])),
    st.tuples(st.just("handler")),
)
# Writes dominate; faults and time are frequent enough to interleave with them.
OPS = st.one_of(WRITES, WRITES, FAULTS, OTHER)


async def _write(env: Env, op: tuple[Any, ...]) -> None:
    try:
        if op[0] == "create":
            await env.cm(op[1], op[2], v=str(op[3]))
        elif op[0] == "update":
            await env.set_data(op[1], op[2], v=str(op[3]))
        elif op[0] == "delete":
            await env.delete(op[1], op[2])
    except (errors.NotFound, errors.AlreadyExists):
        pass


async def _scenario(ops: list[tuple[Any, ...]], yields: list[int], history: int) -> None:
    clock = ManualClock()
    server = APIServer(clock, watch_history=history, bookmark_interval=2.0)
    client = server.client()
    for ns in ("a", "b"):
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    env = Env(clock, server, client)
    informer = env.informer()
    views = [HandlerView()]
    informer.add_event_handler(views[0].on_add, views[0].on_update, views[0].on_delete)
    try:
        for i, op in enumerate(ops):
            # Let the watch deliver some, all or none of what is pending.
            for _ in range(yields[i % len(yields)] if yields else 0):
                await asyncio.sleep(0)
            kind = op[0]
            await _write(env, op)
            if kind == "settle":
                await env.settle()
            elif kind == "advance":
                await env.run_for(op[1], step=0.5)
            elif kind == "drop":
                server.faults.drop_watches()
            elif kind == "outage":
                outage = server.faults.fail("watch", error=500, times=None)
                server.faults.drop_watches()
                await env.settle()
                for write in op[1]:
                    await _write(env, write)
                server.faults.remove(outage)
                if op[2]:
                    server.faults.compact()  # the missed events are gone: relist
            elif kind == "gone":
                server.faults.compact()
                server.faults.drop_watches()
            elif kind == "expire":
                server.faults.expire_next_watch()
                server.faults.drop_watches()
            elif kind == "fail_watch":
                server.faults.fail("watch", error=500)
                server.faults.drop_watches()
            elif kind == "fail_list":
                server.faults.fail("list", error=503)
            elif kind == "handler":
                view = HandlerView()
                informer.add_event_handler(view.on_add, view.on_update, view.on_delete)
                views.append(view)
        # Heal, then give the informer time to converge: every backoff (capped at 30 s,
        # doubled by jitter at most) runs out within 65 s of clock time.
        server.faults.clear()
        expected = await env.server_state()
        for _ in range(65):
            await env.settle()
            if informer.has_synced() and store_state(informer) == expected and all(
                {k: str(rv) for k, rv in v.view.items()} == expected for v in views
            ):
                break
            await env.run_for(1.0, step=1.0)
        assert informer.has_synced()
        assert store_state(informer) == expected
        event(f"relisted: {informer.reflector.lists > 1}")
        event(f"tombstones: {views[0].tombstones > 0}")
        target(float(min(views[0].tombstones, 3)), label="tombstones")
        for view in views:
            assert view.violations == []
            assert {k: str(rv) for k, rv in view.view.items()} == expected
    finally:
        await informer.stop()


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(OPS, min_size=8, max_size=40),
    yields=st.lists(st.integers(0, 6), max_size=8),
    history=st.sampled_from([3, 1000]),
)
def test_informer_converges_to_the_server(
    ops: list[tuple[Any, ...]], yields: list[int], history: int
) -> None:
    asyncio.run(_scenario(ops, yields, history))
