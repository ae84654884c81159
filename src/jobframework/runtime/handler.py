"""Event handlers: turn object events into reconcile requests on a controller's queue.

As controller-runtime's ``handler`` package:

- :class:`EnqueueRequestForObject`: the object itself (``For``);
- :class:`EnqueueRequestForOwner`: the owner named in the object's owner references
  (``Owns``; by default only the ``controller: true`` reference);
- :class:`EnqueueRequestsFromMapFunc`: whatever a function maps the object to.

Handlers are synchronous: they run inside the informer's notification and only enqueue.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import ClassVar, Protocol, runtime_checkable

from .client.interface import RESTMapper
from .event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from .objects import GVK, Object, ObjectKey, name_of, namespace_of, owner_references_of
from .reconcile import Request
from .workqueue import RateLimitingQueue

__all__ = [
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventHandler",
    "MapFunc",
    "RESTMapperAware",
]

log = logging.getLogger(__name__)

Queue = RateLimitingQueue[Request]
#: Maps an object to the requests to enqueue; may be a coroutine function.
MapFunc = Callable[[Object], Iterable[Request] | Awaitable[Iterable[Request]]]


@runtime_checkable
class EventHandler(Protocol):
    """Enqueues requests in response to object events."""

    def create(self, event: CreateEvent, queue: Queue) -> None:
        """Handle a create."""

    def update(self, event: UpdateEvent, queue: Queue) -> None:
        """Handle an update."""

    def delete(self, event: DeleteEvent, queue: Queue) -> None:
        """Handle a delete."""

    def generic(self, event: GenericEvent, queue: Queue) -> None:
        """Handle a generic event."""


@runtime_checkable
class RESTMapperAware(Protocol):
    """A handler that needs the REST mapper before its source starts."""

    async def resolve(self, mapper: RESTMapper) -> None:
        """Look up what the handler needs (called once, before events flow)."""


def _request_for(obj: Object) -> Request | None:
    name = name_of(obj)
    if not name:
        log.error("event for an object without a name: %r", obj.get("kind"))
        return None
    return Request(ObjectKey(namespace_of(obj), name))


class EnqueueRequestForObject:
    """Enqueues the object's own key."""

    #: Reads the name only: informers hand it their stored objects, uncopied.
    reads_events_only: ClassVar[bool] = True

    def create(self, event: CreateEvent, queue: Queue) -> None:
        """Enqueue the created object."""
        if (req := _request_for(event.object)) is not None:
            queue.add(req)

    def update(self, event: UpdateEvent, queue: Queue) -> None:
        """Enqueue the new object (or the old one if the new one has no name)."""
        obj = event.object_new if name_of(event.object_new) else event.object_old
        if (req := _request_for(obj)) is not None:
            queue.add(req)

    def delete(self, event: DeleteEvent, queue: Queue) -> None:
        """Enqueue the deleted object."""
        if (req := _request_for(event.object)) is not None:
            queue.add(req)

    def generic(self, event: GenericEvent, queue: Queue) -> None:
        """Enqueue the object."""
        if (req := _request_for(event.object)) is not None:
            queue.add(req)


class EnqueueRequestForOwner:
    """Enqueues the owners of type ``owner_gvk`` named in the object's owner references.

    Owners match on API group and kind (any version), as controller-runtime. With
    ``only_controller`` (the default, what ``Owns`` uses) only the reference marked
    ``controller: true`` counts. The owner's namespace is the object's, unless the owner
    kind is cluster-scoped: pass ``owner_namespaced=False``, or leave it ``None`` to have
    it looked up with the REST mapper when the controller starts.
    """

    #: Reads the owner references only: informers hand it their stored objects, uncopied.
    reads_events_only: ClassVar[bool] = True

    def __init__(
        self,
        owner_gvk: GVK,
        *,
        only_controller: bool = True,
        owner_namespaced: bool | None = None,
    ) -> None:
        self.owner_gvk = owner_gvk
        self.only_controller = only_controller
        self.owner_namespaced = owner_namespaced

    async def resolve(self, mapper: RESTMapper) -> None:
        """Learn whether the owner kind is namespaced (when not given)."""
        if self.owner_namespaced is None:
            self.owner_namespaced = (await mapper.rest_mapping(self.owner_gvk)).namespaced

    def owners(self, obj: Object) -> list[Request]:
        """The requests for ``obj``'s matching owners."""
        out: list[Request] = []
        for ref in owner_references_of(obj):
            if self.only_controller and not ref.get("controller"):
                continue
            try:
                ref_gvk = GVK.from_api_version(str(ref.get("apiVersion") or ""),
                                               str(ref.get("kind") or ""))
            except ValueError:
                continue
            if ref_gvk.group != self.owner_gvk.group or ref_gvk.kind != self.owner_gvk.kind:
                continue
            name = str(ref.get("name") or "")
            if not name:
                continue
            namespace = namespace_of(obj) if self.owner_namespaced is not False else ""
            out.append(Request(ObjectKey(namespace, name)))
        return out

    def _add(self, obj: Object, queue: Queue) -> None:
        for req in self.owners(obj):
            queue.add(req)

    def create(self, event: CreateEvent, queue: Queue) -> None:
        """Enqueue the created object's owners."""
        self._add(event.object, queue)

    def update(self, event: UpdateEvent, queue: Queue) -> None:
        """Enqueue the owners of the old and of the new object (owners may change)."""
        self._add(event.object_old, queue)
        self._add(event.object_new, queue)

    def delete(self, event: DeleteEvent, queue: Queue) -> None:
        """Enqueue the deleted object's owners."""
        self._add(event.object, queue)

    def generic(self, event: GenericEvent, queue: Queue) -> None:
        """Enqueue the object's owners."""
        self._add(event.object, queue)


class EnqueueRequestsFromMapFunc:
    """Enqueues what ``fn`` maps the object to (both old and new objects on update).

    ``fn`` may be a coroutine function (e.g. to read the cache); its requests are then
    enqueued when it completes. Exceptions from ``fn`` are logged. Pass ``read_only`` when
    ``fn`` never changes the object it is given: informers then hand it their stored
    objects instead of a copy per event.
    """

    def __init__(self, fn: MapFunc, *, read_only: bool = False) -> None:
        self.fn = fn
        self.reads_events_only = read_only
        self._tasks: set[asyncio.Task[None]] = set()

    def _map(self, objs: Iterable[Object], queue: Queue) -> None:
        for obj in objs:
            try:
                result = self.fn(obj)
            except Exception:
                log.exception("map function failed")
                continue
            if inspect.isawaitable(result):
                self._spawn(result, queue)
            else:
                for req in result:
                    queue.add(req)

    def _spawn(self, awaitable: Awaitable[Iterable[Request]], queue: Queue) -> None:
        async def run() -> None:
            try:
                for req in await awaitable:
                    queue.add(req)
            except Exception:
                log.exception("map function failed")

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def create(self, event: CreateEvent, queue: Queue) -> None:
        """Enqueue the mapped requests."""
        self._map([event.object], queue)

    def update(self, event: UpdateEvent, queue: Queue) -> None:
        """Enqueue the requests of the old and the new object."""
        self._map([event.object_old, event.object_new], queue)

    def delete(self, event: DeleteEvent, queue: Queue) -> None:
        """Enqueue the mapped requests."""
        self._map([event.object], queue)

    def generic(self, event: GenericEvent, queue: Queue) -> None:
        """Enqueue the mapped requests."""
        self._map([event.object], queue)
