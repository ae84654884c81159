"""Sources of events for a controller.

- :class:`Kind` turns an informer's add/update/delete notifications for one kind into
  :class:`CreateEvent` / :class:`UpdateEvent` / :class:`DeleteEvent`, filters them through
  predicates and hands them to an event handler (which enqueues requests);
- :class:`Channel` does the same for :class:`GenericEvent` objects put on an asyncio queue
  by code outside the cluster (controller-runtime's ``source.Channel``).

The event types live in :mod:`.event` (below this module, :mod:`.handler` and
:mod:`.predicate`) and are re-exported here.

The objects in events are the informer's: handlers and predicates must not mutate them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from .objects import GVK, Object
from .reconcile import Request

if TYPE_CHECKING:
    from .handler import EventHandler
    from .predicate import Predicate
    from .workqueue import RateLimitingQueue

__all__ = [
    "Channel",
    "CreateEvent",
    "DeleteEvent",
    "GenericEvent",
    "Kind",
    "Source",
    "SyncingSource",
    "UpdateEvent",
]

log = logging.getLogger(__name__)


@runtime_checkable
class Source(Protocol):
    """Feeds requests into a controller's queue once started."""

    async def start(self, queue: RateLimitingQueue[Request]) -> None:
        """Begin delivering; returns once delivery is set up (not when it ends)."""


@runtime_checkable
class SyncingSource(Source, Protocol):
    """A source backed by a cache that must sync before workers start."""

    async def wait_for_sync(self) -> None:
        """Return once the backing cache has listed everything."""


class _Dispatch:
    """Runs predicates then the handler, never letting an exception reach the informer."""

    def __init__(self, handler: EventHandler, predicates: Sequence[Predicate]) -> None:
        self.handler = handler
        self.predicates = tuple(predicates)

    def create(self, event: CreateEvent, queue: RateLimitingQueue[Request]) -> None:
        try:
            if all(p.create(event) for p in self.predicates):
                self.handler.create(event, queue)
        except Exception:
            log.exception("event handler failed on create")

    def update(self, event: UpdateEvent, queue: RateLimitingQueue[Request]) -> None:
        try:
            if all(p.update(event) for p in self.predicates):
                self.handler.update(event, queue)
        except Exception:
            log.exception("event handler failed on update")

    def delete(self, event: DeleteEvent, queue: RateLimitingQueue[Request]) -> None:
        try:
            if all(p.delete(event) for p in self.predicates):
                self.handler.delete(event, queue)
        except Exception:
            log.exception("event handler failed on delete")

    def generic(self, event: GenericEvent, queue: RateLimitingQueue[Request]) -> None:
        try:
            if all(p.generic(event) for p in self.predicates):
                self.handler.generic(event, queue)
        except Exception:
            log.exception("event handler failed on generic event")


def _unwrap_tombstone(obj: Any) -> tuple[Object, bool]:
    """An informer's delete payload: the object, or a tombstone carrying the last state."""
    if isinstance(obj, dict):
        return obj, False
    inner = getattr(obj, "obj", None)
    if inner is None:
        inner = getattr(obj, "object", None)
    if isinstance(inner, dict):
        return inner, True
    raise TypeError(f"unexpected delete payload {type(obj).__name__}")


def _reads_only(part: object) -> bool:
    """Whether a handler or predicate never changes the objects of the events it is
    given: its own class sets ``reads_events_only = True`` (a subclass overriding its
    methods does not inherit the promise), or the instance was built saying so (a map
    function handler's ``read_only``)."""
    own = getattr(part, "__dict__", {})
    return (vars(type(part)).get("reads_events_only", False) is True
            or own.get("reads_events_only", False) is True)


class Kind:
    """Events for every object of ``gvk`` in ``cache``, through ``predicates`` to ``handler``.

    ``cache`` needs ``get_informer(gvk)`` (sync or async) returning an informer with
    ``add_event_handler(on_add, on_update, on_delete)`` and ``wait_for_sync()``.
    """

    def __init__(
        self, cache: Any, gvk: GVK, handler: EventHandler, *predicates: Predicate
    ) -> None:
        self.cache = cache
        self.gvk = gvk
        self.handler = handler
        self.predicates = predicates
        self._informer: Any = None
        self._started = asyncio.Event()

    def __repr__(self) -> str:
        return f"Kind({self.gvk.group}/{self.gvk.version}/{self.gvk.kind})"

    async def start(self, queue: RateLimitingQueue[Request]) -> None:
        """Register the handler on the kind's informer."""
        informer = self.cache.get_informer(self.gvk)
        if inspect.isawaitable(informer):
            informer = await informer
        self._informer = informer
        dispatch = _Dispatch(self.handler, self.predicates)

        def on_add(obj: Object, *_: Any) -> None:
            dispatch.create(CreateEvent(obj), queue)

        def on_update(old: Object, new: Object) -> None:
            dispatch.update(UpdateEvent(old, new), queue)

        def on_delete(obj: Any) -> None:
            try:
                unwrapped, unknown = _unwrap_tombstone(obj)
            except TypeError:
                log.exception("informer delivered an unknown delete payload")
                return
            dispatch.delete(DeleteEvent(unwrapped, unknown), queue)

        if _reads_only(self.handler) and all(_reads_only(p) for p in self.predicates):
            # Nothing on the way mutates the objects: no copy per event.
            informer.add_event_handler(on_add, on_update, on_delete, read_only=True)
        else:
            informer.add_event_handler(on_add, on_update, on_delete)
        self._started.set()

    async def wait_for_sync(self) -> None:
        """Wait until started and the informer has synced."""
        await self._started.wait()
        result = self._informer.wait_for_sync()
        if inspect.isawaitable(result):
            result = await result
        if result is False:
            raise RuntimeError(f"{self!r}: informer stopped before it synced")


class Channel:
    """:class:`GenericEvent` objects read from ``events``, through predicates to ``handler``.

    Put events with ``events.put_nowait(GenericEvent(obj))``; the reader task lives as long
    as the controller's queue is not shut down.
    """

    def __init__(
        self,
        events: asyncio.Queue[GenericEvent],
        handler: EventHandler,
        *predicates: Predicate,
    ) -> None:
        self.events = events
        self.handler = handler
        self.predicates = predicates
        self._task: asyncio.Task[None] | None = None

    async def start(self, queue: RateLimitingQueue[Request]) -> None:
        """Start reading events in a background task."""
        dispatch = _Dispatch(self.handler, self.predicates)

        async def pump() -> None:
            while not queue.shutting_down:
                event = await self.events.get()
                dispatch.generic(event, queue)

        self._task = asyncio.get_running_loop().create_task(pump())

    async def stop(self) -> None:
        """Stop the reader task."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
