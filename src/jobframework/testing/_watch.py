"""Watch machinery: a bounded per-resource event history and the open watchers.

Mirrors the apiserver's watch cache: each group/resource keeps its last N events; a watch
from a resourceVersion replays the events after it, or fails with 410 ``Expired`` when
they were already evicted. Selectors are applied to both the new and the previous state
of each event, so an object that starts matching is ``ADDED`` and one that stops matching
is ``DELETED`` (with its previous state and the event's resourceVersion), as
``cacheWatcher.convertToWatchEvent`` does.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any, Literal

import attrs

from ..runtime import errors
from ..runtime.client.interface import WatchEvent
from ..runtime.objects import Object, deep_copy
from ..runtime.selectors import FieldSelector, LabelSelector
from ._registry import GroupResource, KindInfo

StoredEventType = Literal["ADDED", "MODIFIED", "DELETED"]


@attrs.frozen
class StoredEvent:
    """One write as the history keeps it. ``obj``/``old`` are never mutated once stored."""

    rv: int
    type: StoredEventType
    #: The new state (for DELETED: the last state, stamped with the delete's rv).
    obj: Object
    #: The previous state (None for ADDED).
    old: Object | None


class History:
    """The last ``capacity`` events of one group/resource."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self.events: collections.deque[StoredEvent] = collections.deque()
        #: Events at or below this resourceVersion are no longer available.
        self.floor = 0

    def append(self, event: StoredEvent) -> None:
        """Record ``event``, evicting the oldest when full."""
        self.events.append(event)
        while len(self.events) > self.capacity:
            self.floor = self.events.popleft().rv

    def compact(self, current_rv: int) -> None:
        """Forget every event up to ``current_rv`` (as an etcd compaction does)."""
        self.events.clear()
        self.floor = max(self.floor, current_rv)

    def since(self, rv: int) -> list[StoredEvent]:
        """Events after ``rv``; :class:`Gone` when some of them were evicted."""
        if rv < self.floor:
            oldest = self.events[0].rv - 1 if self.events else self.floor
            raise errors.Gone(f"too old resource version: {rv} ({oldest})")
        return [e for e in self.events if e.rv > rv]


def _with_rv(obj: Object, rv: int) -> Object:
    out = deep_copy(obj)
    out.setdefault("metadata", {})["resourceVersion"] = str(rv)
    return out


@attrs.frozen
class Pending:
    """A queued event: deliverable once the clock reaches ``deliver_at``."""

    deliver_at: float
    rv: int
    event: WatchEvent


class Watcher:
    """One open watch: a filter and a queue of events to deliver."""

    def __init__(
        self,
        kind: KindInfo,
        namespace: str | None,
        label_selector: LabelSelector,
        field_selector: FieldSelector,
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.queue: collections.deque[Pending] = collections.deque()
        self.closed = False
        #: Events at or below this resourceVersion are not delivered (the watch's start).
        self.after = 0
        self._wake: asyncio.Event | None = None

    @property
    def gr(self) -> GroupResource:
        """The watched resource."""
        return self.kind.gr

    def matches(self, obj: Object | None) -> bool:
        """Whether ``obj`` passes the namespace, label and field filters."""
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return self.label_selector.matches(meta.get("labels")) and self.field_selector.matches(
            obj)

    def convert(self, event: StoredEvent) -> WatchEvent | None:
        """The event this watcher sees for ``event`` (None when filtered out)."""
        cur = event.type != "DELETED" and self.matches(event.obj)
        old_obj = event.obj if event.type == "DELETED" else event.old
        old = self.matches(old_obj)
        if cur and not old:
            return WatchEvent("ADDED", self._out(event.obj))
        if cur and old:
            return WatchEvent("MODIFIED", self._out(event.obj))
        if old and old_obj is not None:
            return WatchEvent("DELETED", self._out(_with_rv(old_obj, event.rv)))
        return None

    def _out(self, obj: Object) -> Object:
        out = deep_copy(obj)
        out["apiVersion"] = self.kind.gvk.api_version
        return out

    def push(self, event: StoredEvent, deliver_at: float = 0.0) -> None:
        """Queue ``event`` if it passes the filters, to be delivered from ``deliver_at``."""
        if self.closed or event.rv <= self.after:
            return
        converted = self.convert(event)
        if converted is not None:
            self.queue.append(Pending(deliver_at, event.rv, converted))
            self.wake()

    def push_initial(self, obj: Object) -> None:
        """Queue a synthetic ADDED for an object existing when the watch started."""
        if self.matches(obj):
            rv = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
            self.queue.append(Pending(0.0, rv, WatchEvent("ADDED", self._out(obj))))

    def ready(self, now: float) -> bool:
        """Whether the next queued event may be delivered at ``now``."""
        return bool(self.queue) and self.queue[0].deliver_at <= now

    def bookmark_rv(self, current: int) -> int:
        """The rv a bookmark may claim: below every event still queued."""
        if self.queue:
            return min(current, min(p.rv for p in self.queue) - 1)
        return current

    def close(self) -> None:
        """End the stream; undelivered events are lost, as with a broken connection."""
        self.closed = True
        self.queue.clear()
        self.wake()

    def wake(self) -> None:
        """Wake the stream's consumer."""
        if self._wake is not None:
            self._wake.set()

    async def wait(self, timer: asyncio.Future[Any] | None, now: float) -> None:
        """Wait until woken or until ``timer`` completes."""
        if self._wake is None:
            self._wake = asyncio.Event()
        if self.ready(now) or self.closed:
            return
        self._wake.clear()
        if timer is None:
            await self._wake.wait()
            return
        waiter = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({waiter, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not waiter.done():
                waiter.cancel()


def bookmark(kind: KindInfo, rv: int) -> WatchEvent:
    """A BOOKMARK event: the kind with only ``metadata.resourceVersion``."""
    return WatchEvent("BOOKMARK", {
        "apiVersion": kind.gvk.api_version,
        "kind": kind.gvk.kind,
        "metadata": {"resourceVersion": str(rv)},
    })


RVSource = Callable[[], int]
