"""Property: under any sequence of writes, the server's invariants hold.

A hypothesis state machine drives creates, spec and status updates, stale updates,
deletes and finalizer removals on a few names, against a simple model, while a watch
started at the beginning records every event. Invariants checked after every step:

* every successful write returns a strictly larger resourceVersion, no-op writes none;
* replaying the watch stream reproduces the stored objects exactly (what an informer
  relies on), with strictly increasing resourceVersions; so does replaying a watch with
  a label selector for the selected objects (objects that stop matching arrive as
  DELETED);
* ``metadata.generation`` changes exactly when ``spec`` changes or deletion starts.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Coroutine
from typing import Any, TypeVar

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from jobframework.runtime import errors
from jobframework.runtime.client import WatchEvent
from jobframework.testing import APIServer, ManualClock

from .conftest import WIDGET, WIDGET_CRD, widget

T = TypeVar("T")
NAMES = st.sampled_from(["a", "b", "c"])


class ServerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.server = APIServer(ManualClock(), watch_history=10_000)
        self.server.register_crd(copy.deepcopy(WIDGET_CRD))
        self.client = self.server.client()
        self.events: list[WatchEvent] = []
        self.picked: list[WatchEvent] = []
        self.last_rv = int(self.server.resource_version)
        #: name -> (spec, generation) as the model expects it.
        self.model: dict[str, tuple[dict[str, Any], int]] = {}
        stream = self.client.watch(WIDGET, resource_version=self.server.resource_version,
                                   allow_bookmarks=False)

        picked = self.client.watch(WIDGET, resource_version=self.server.resource_version,
                                   allow_bookmarks=False, label_selector="pick=yes")

        async def consume(source: Any, into: list[WatchEvent]) -> None:
            async for event in source:
                into.append(event)

        self.consumers = [self.loop.create_task(consume(stream, self.events)),
                          self.loop.create_task(consume(picked, self.picked))]
        self.run(asyncio.sleep(0))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        result = self.loop.run_until_complete(coro)
        for _ in range(5):
            self.loop.run_until_complete(asyncio.sleep(0))
        return result

    def teardown(self) -> None:
        self.server.faults.drop_watches()
        self.run(asyncio.sleep(0))
        for task in self.consumers:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*self.consumers, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def wrote(self, obj: dict[str, Any] | None) -> None:
        if obj is None:
            self.last_rv = int(self.server.resource_version)
            return
        rv = int(obj["metadata"]["resourceVersion"])
        assert rv > self.last_rv
        self.last_rv = rv

    def get(self, name: str) -> dict[str, Any] | None:
        try:
            return self.run(self.client.get(WIDGET, name, namespace="default"))
        except errors.NotFound:
            return None

    @rule(name=NAMES, size=st.integers(0, 3), finalizer=st.booleans())
    def create(self, name: str, size: int, finalizer: bool) -> None:
        obj = widget(name, size=size)
        if finalizer:
            obj["metadata"]["finalizers"] = ["test/hold"]
        try:
            created = self.run(self.client.create(obj))
        except errors.AlreadyExists:
            assert name in self.model
            return
        assert name not in self.model
        assert created["metadata"]["generation"] == 1
        self.wrote(created)
        self.model[name] = ({"size": size}, 1)

    @rule(name=NAMES, size=st.integers(0, 3))
    def update_spec(self, name: str, size: int) -> None:
        current = self.get(name)
        if current is None:
            assert name not in self.model
            return
        spec, generation = self.model[name]
        rv_before = current["metadata"]["resourceVersion"]
        current["spec"] = {"size": size}
        updated = self.run(self.client.update(current))
        if spec == {"size": size}:
            assert updated["metadata"]["resourceVersion"] == rv_before
        else:
            self.wrote(updated)
            generation += 1
        assert updated["metadata"]["generation"] == generation
        self.model[name] = ({"size": size}, generation)

    @rule(name=NAMES, phase=st.sampled_from(["A", "B"]))
    def update_status(self, name: str, phase: str) -> None:
        current = self.get(name)
        if current is None:
            return
        changed = (current.get("status") or {}).get("phase") != phase
        current["status"] = {"phase": phase}
        current["spec"] = {"size": 99}  # ignored by the status subresource
        updated = self.run(self.client.update_status(current))
        if changed:
            self.wrote(updated)
        assert updated["spec"] == self.model[name][0]
        assert updated["metadata"]["generation"] == self.model[name][1]

    @rule(name=NAMES, pick=st.booleans())
    def relabel(self, name: str, pick: bool) -> None:
        current = self.get(name)
        if current is None:
            return
        before = (current["metadata"].get("labels") or {}).get("pick")
        current["metadata"]["labels"] = {"pick": "yes" if pick else "no"}
        updated = self.run(self.client.update(current))
        if before != ("yes" if pick else "no"):
            self.wrote(updated)
        assert updated["metadata"]["generation"] == self.model[name][1]

    @rule(data=st.data())
    def resume_watch(self, data: st.DataObject) -> None:
        """A watch resumed from any delivered event's rv replays exactly what followed."""
        if not self.events:
            return
        k = data.draw(st.integers(0, len(self.events) - 1))
        expected = [(e.type, e.object["metadata"]["resourceVersion"])
                    for e in self.events[k + 1:]]
        stream = self.client.watch(
            WIDGET, resource_version=self.events[k].object["metadata"]["resourceVersion"],
            allow_bookmarks=False)

        async def take(n: int) -> list[tuple[str, str]]:
            got = []
            for _ in range(n):
                event = await asyncio.wait_for(stream.__anext__(), timeout=1)
                got.append((event.type, event.object["metadata"]["resourceVersion"]))
            await stream.aclose()  # type: ignore[attr-defined]
            return got

        assert self.run(take(len(expected))) == expected

    @rule(name=NAMES)
    def stale_update(self, name: str) -> None:
        current = self.get(name)
        if current is None:
            return
        current["metadata"]["resourceVersion"] = str(int(
            current["metadata"]["resourceVersion"]) - 1)
        try:
            self.run(self.client.update(current))
        except errors.Conflict:
            return
        raise AssertionError("a stale update succeeded")

    @rule(name=NAMES)
    def delete(self, name: str) -> None:
        try:
            remaining = self.run(self.client.delete(WIDGET, name, namespace="default"))
        except errors.NotFound:
            assert name not in self.model
            return
        spec, generation = self.model[name]
        if remaining is None:
            del self.model[name]
            self.wrote(None)
        else:
            if generation != remaining["metadata"]["generation"]:
                self.wrote(remaining)
            self.model[name] = (spec, remaining["metadata"]["generation"])

    @rule(name=NAMES)
    def release(self, name: str) -> None:
        current = self.get(name)
        if current is None or not current["metadata"].get("finalizers"):
            return
        current["metadata"]["finalizers"] = []
        self.run(self.client.update(current))
        self.wrote(None)
        if current["metadata"].get("deletionTimestamp"):
            assert self.get(name) is None
            del self.model[name]

    @staticmethod
    def replay(events: list[WatchEvent]) -> dict[str, dict[str, Any]]:
        replayed: dict[str, dict[str, Any]] = {}
        last = 0
        for event in events:
            rv = int(event.object["metadata"]["resourceVersion"])
            assert rv > last
            last = rv
            if event.type == "DELETED":
                replayed.pop(event.object["metadata"]["name"], None)
            else:
                replayed[event.object["metadata"]["name"]] = event.object
        return replayed

    @invariant()
    def watch_replay_matches_store(self) -> None:
        stored = {o["metadata"]["name"]: o for o in self.server.objects(WIDGET)}
        assert self.replay(self.events) == stored
        assert self.replay(self.picked) == {
            name: o for name, o in stored.items()
            if (o["metadata"].get("labels") or {}).get("pick") == "yes"}
        assert set(stored) == set(self.model)
        for name, (spec, generation) in self.model.items():
            assert stored[name]["spec"] == spec
            assert stored[name]["metadata"]["generation"] == generation


TestServerMachine = ServerMachine.TestCase
TestServerMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
