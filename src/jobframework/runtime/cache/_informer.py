"""The shared informer: a reflector, an indexed store, and event handlers fanned out to.

Like client-go's ``SharedIndexInformer``, but on one asyncio event loop: the reflector
applies each list and watch event to the store and notifies every handler at once,
in order, so no DeltaFIFO is needed. Handlers are synchronous (they enqueue work) and
an exception in one is logged, never allowed to stop the informer or the other handlers.

Object ownership: the store keeps the objects the client returned (nobody else holds
them). A handler receives a copy of the stored object (one copy per event, shared by
the handlers of that event), or an object that has just left the store (the ``old`` of
an update, the object of a delete). So handlers can never corrupt the cache, but must
not mutate what they receive either, since sibling handlers may see the same copy.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..client.interface import Client, FieldSel, Selector, WatchEvent
from ..clock import Clock, RealClock
from ..objects import GVK, Object, deep_copy, json_copy, resource_version_of
from ._reflector import Backoff, Reflector
from ._store import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    Indexer,
    IndexFunc,
    index_by_namespace,
    object_key,
)

log = logging.getLogger(__name__)

OnAdd = Callable[[Object], None]
OnUpdate = Callable[[Object, Object], None]
#: Receives the deleted object, or a :class:`DeletedFinalStateUnknown` wrapping it.
OnDelete = Callable[[Any], None]
TransformFunc = Callable[[Object], Object]

#: Transforms known to leave JSON values only (they delete keys, reuse equal strings):
#: the objects they store are copied with :func:`~..objects.json_copy`.
_JSON_PRESERVING: weakref.WeakSet[TransformFunc] = weakref.WeakSet()


def preserves_json(transform: TransformFunc | None) -> bool:
    """Whether objects stored through ``transform`` hold JSON values only, as decoded:
    true for no transform, :func:`strip_managed_fields`, :func:`intern_strings` and
    their :func:`compose_transforms`; false for any other function, which may store
    values JSON has no form for (so cache copies of its objects take the slower, exact
    :func:`~..objects.deep_copy`)."""
    return transform is None or transform in _JSON_PRESERVING


def strip_managed_fields(obj: Object) -> Object:
    """A transform dropping ``metadata.managedFields`` (client-go's
    ``TransformStripManagedFields``): often a third of an object, and read by no reconciler.

    Safe for writers too: an update without ``managedFields`` keeps the stored ones, and
    a merge patch computed between two stripped objects does not touch them.
    """
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


#: Longest string value :func:`intern_strings` interns (names, UIDs, label values, enum
#: values; not long free text such as messages).
INTERN_MAX_LENGTH = 64


def _interned(value: Any, _intern: Callable[[str], str] = sys.intern,
              _max: int = INTERN_MAX_LENGTH) -> Any:
    # Every event goes through here: the members are dispatched inline on their exact
    # type rather than by a call each (numbers, booleans and None are returned as is).
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            t = type(v)
            if t is str:
                if len(v) <= _max:
                    v = _intern(v)
            elif t is dict or t is list or (t is not int and t is not bool and v is not None
                                            and t is not float):
                v = _interned(v)
            out[_intern(k) if type(k) is str else k] = v
        return out
    if isinstance(value, list):
        items: list[Any] = []
        for v in value:
            t = type(v)
            if t is str:
                if len(v) <= _max:
                    v = _intern(v)
            elif t is dict or t is list or (t is not int and t is not bool and v is not None
                                            and t is not float):
                v = _interned(v)
            items.append(v)
        return items
    if type(value) is str and len(value) <= _max:
        return _intern(value)
    return value


def intern_strings(obj: Object) -> Object:
    """A transform that shares equal keys and short string values between cached objects.

    JSON decoding gives every object its own copy of every key (``metadata``, ``name``,
    ``resources`` ...) and of repeated values (``True``, ``batch/v1``, label values);
    interned, a cached Job takes about half the memory. The copies handed out by the
    cache (a marshal round trip) keep the sharing.
    """
    out: Object = _interned(obj)
    return out


_JSON_PRESERVING.update((strip_managed_fields, intern_strings))


def compose_transforms(*transforms: TransformFunc) -> TransformFunc:
    """One transform applying ``transforms`` in order."""
    def apply(obj: Object) -> Object:
        for t in transforms:
            obj = t(obj)
        return obj
    if all(preserves_json(t) for t in transforms):
        _JSON_PRESERVING.add(apply)
    return apply


def _rv_reached(stored: str, wanted: str) -> bool:
    if stored == wanted:
        return True
    if stored.isascii() and wanted.isascii() and stored.isdigit() and wanted.isdigit():
        return int(stored) >= int(wanted)
    return False


class HandlerRegistration:
    """A handle on handlers added with :meth:`SharedInformer.add_event_handler`."""

    def __init__(
        self,
        on_add: OnAdd | None,
        on_update: OnUpdate | None,
        on_delete: OnDelete | None,
        synced: bool,
        read_only: bool = False,
    ) -> None:
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete
        self.read_only = read_only
        self._synced = synced

    def has_synced(self) -> bool:
        """True once the handler has been told about every object of the initial list."""
        return self._synced


class SharedInformer:
    """Watches one kind into an :class:`Indexer` and notifies handlers of changes.

    Args:
        client: the API client to list and watch with.
        gvk: the kind.
        namespace: watch only this namespace (None: all namespaces).
        label_selector / field_selector: watch only matching objects.
        resync_period: if set, every period each handler gets ``on_update(obj, obj)``
            for every object in the store (controller-runtime's ``SyncPeriod``).
        indexers: named index functions to start with (``namespace`` is always present).
        transform: applied to each object before it is stored (e.g. to drop
            ``managedFields``); it may mutate and return its argument.
        clock: drives backoff, watch deadlines and resyncs.
        backoff / rng / min_watch_timeout: passed to the :class:`Reflector`.
    """

    def __init__(
        self,
        client: Client,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
        resync_period: float | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: TransformFunc | None = None,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        min_watch_timeout: float = 300.0,
        on_watch_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.gvk = gvk
        self.namespace = namespace
        self.resync_period = resync_period
        self._clock: Clock = clock or RealClock()
        self._transform = transform
        self._copy = json_copy if preserves_json(transform) else deep_copy
        self.indexer = Indexer({NAMESPACE_INDEX: index_by_namespace})
        if indexers:
            self.indexer.add_indexers(indexers)
        self.reflector = Reflector(
            client,
            gvk,
            self,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            clock=self._clock,
            backoff=backoff,
            rng=rng,
            min_watch_timeout=min_watch_timeout,
            on_error=on_watch_error,
        )
        self._handlers: list[HandlerRegistration] = []
        self._synced = asyncio.Event()
        self._stopped = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Selectors the API server filters by: a written object may never reach the store.
        self._filtered = label_selector is not None or field_selector is not None
        #: key -> (resourceVersion, future) for :meth:`observed`.
        self._rv_waiters: dict[str, list[tuple[str, asyncio.Future[None]]]] = {}

    def __repr__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"SharedInformer({self.gvk}{where})"

    # -- handlers and indexers -------------------------------------------------------

    def add_event_handler(
        self,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
        *,
        read_only: bool = False,
    ) -> HandlerRegistration:
        """Register handlers; they are told at once about every object already stored.

        Handlers get a copy of each object, shared by all of them, so that a handler that
        changes it cannot corrupt the cache. With ``read_only`` the handlers promise never
        to change what they are given and get the stored object itself, as
        controller-runtime's handlers always do (the built-in request handlers use it:
        they read a name or the owner references, and a copy per event is a third of an
        event's cost).
        """
        reg = HandlerRegistration(on_add, on_update, on_delete, self.has_synced(), read_only)
        self._handlers.append(reg)
        if on_add is not None:
            for obj in self.indexer.list():
                self._call(on_add, obj if read_only else self._copy(obj))
        return reg

    def copy_of(self, stored: Object) -> Object:
        """A deep copy of an object of the store, as handlers and cache readers get it
        (:func:`~..objects.json_copy` when the transform keeps objects JSON, else
        :func:`~..objects.deep_copy`)."""
        return self._copy(stored)

    def remove_event_handler(self, registration: HandlerRegistration) -> None:
        """Stop notifying ``registration``'s handlers."""
        if registration in self._handlers:
            self._handlers.remove(registration)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add index functions; stored objects are indexed at once."""
        self.indexer.add_indexers(indexers)

    # -- lifecycle -------------------------------------------------------------------

    def has_synced(self) -> bool:
        """True once the first list has been stored and announced to the handlers."""
        return self._synced.is_set()

    async def wait_for_sync(self) -> bool:
        """Wait until synced (True) or until the informer stops first (False)."""
        if self._synced.is_set():
            return True
        synced = asyncio.ensure_future(self._synced.wait())
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            synced.cancel()
            stopped.cancel()
        return self._synced.is_set()

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion the store is at."""
        return self.reflector.last_sync_resource_version

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Run the informer in a background task (idempotent)."""
        if self._task is not None:
            return
        self._task = asyncio.get_running_loop().create_task(
            self.run(), name=f"informer {self.gvk.kind} {self.namespace or ''}".rstrip()
        )

    async def stop(self) -> None:
        """Cancel the background task and wait for it to end."""
        task = self._task
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def run(self) -> None:
        """List and watch (and resync) until cancelled."""
        resync: asyncio.Task[None] | None = None
        if self.resync_period:
            resync = asyncio.ensure_future(self._resync_loop(self.resync_period))
        try:
            await self.reflector.run()
        finally:
            if resync is not None:
                resync.cancel()
            self._release_all()  # nobody is to wait on a stopped informer
            self._stopped.set()

    # -- read your writes -------------------------------------------------------------

    def observed(self, key: str, resource_version: str) -> asyncio.Future[None] | None:
        """A future done once the store holds ``key`` at ``resource_version`` or later (or
        has seen it deleted, or relisted); None if it does already, or if this informer's
        selectors may keep the object out of the store.

        Resource versions are compared as integers when both are (etcd's revisions, as
        client-go's mutation cache compares them), else only for equality. A caller that
        stops waiting cancels the future.
        """
        if self._filtered or not resource_version:
            return None
        stored = self.indexer.get_by_key(key)
        if stored is not None and _rv_reached(resource_version_of(stored), resource_version):
            return None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = self._rv_waiters.setdefault(key, [])
        waiting[:] = [w for w in waiting if not w[1].done()]
        waiting.append((resource_version, future))
        return future

    def _release(self, key: str, stored_rv: str | None) -> None:
        # stored_rv None: the key was deleted; every waiter on it is done.
        waiting = self._rv_waiters.get(key)
        if not waiting:
            return
        left = []
        for rv, future in waiting:
            if future.done():
                continue
            if stored_rv is None or _rv_reached(stored_rv, rv):
                future.set_result(None)
            else:
                left.append((rv, future))
        if left:
            self._rv_waiters[key] = left
        else:
            del self._rv_waiters[key]

    def _release_all(self) -> None:
        waiters, self._rv_waiters = self._rv_waiters, {}
        for waiting in waiters.values():
            for _, future in waiting:
                if not future.done():
                    future.set_result(None)

    # -- the reflector's store interface --------------------------------------------

    def replace(self, items: list[Object], resource_version: str) -> None:
        """Store a list result: adds, updates (changed rv), and synthetic deletes."""
        previous = {key: obj for key in self.indexer.list_keys()
                    if (obj := self.indexer.get_by_key(key)) is not None}
        fresh: dict[str, Object] = {}
        for item in items:
            obj = self._transformed(item)
            fresh[object_key(obj)] = obj
        try:
            self.indexer.replace(fresh.values())
        except Exception:
            log.exception("%r: an index function failed; keeping the previous contents", self)
            return
        for key, obj in fresh.items():
            old = previous.get(key)
            if old is None:
                self._notify_add(obj)
            elif resource_version_of(old) != resource_version_of(obj):
                self._notify_update(old, obj)
        for key, old in previous.items():
            if key not in fresh:
                # Deleted while we were not watching: the last state we saw may be stale.
                self._notify_delete(DeletedFinalStateUnknown(key, old))
        if not self._synced.is_set():
            self._synced.set()
            for reg in self._handlers:
                reg._synced = True
        if self._rv_waiters:
            # A fresh list is at least as new as any write that was answered before it.
            self._release_all()

    def apply(self, event: WatchEvent) -> None:
        """Store one watch event and notify the handlers."""
        obj = self._transformed(event.object)
        key = object_key(obj)
        old = self.indexer.get_by_key(key)
        try:
            if event.type == "DELETED":
                self.indexer.delete_key(key)
            else:
                self.indexer.add(obj)
        except Exception:
            log.exception("%r: an index function failed on %s; event dropped", self, key)
            return
        if event.type == "DELETED":
            # A delete for an object never seen (e.g. already relisted away) says nothing.
            if old is not None:
                self._notify_delete(obj)
        elif old is None:
            self._notify_add(obj)
        else:
            self._notify_update(old, obj)
        if self._rv_waiters:
            self._release(key, None if event.type == "DELETED" else resource_version_of(obj))

    # -- internals -------------------------------------------------------------------

    def _transformed(self, obj: Object) -> Object:
        if self._transform is None:
            return obj
        try:
            return self._transform(obj)
        except Exception:
            log.exception("%r: transform failed; storing the object as received", self)
            return obj

    def _deliveries(self, stored: Object, which: str) -> Iterator[tuple[Any, Object]]:
        """Each registered ``which`` handler with what it is given: the stored object for
        read-only registrations, else one copy shared by the others, made when needed."""
        out: Object | None = None
        for reg in self._handlers:
            if (fn := getattr(reg, which)) is None:
                continue
            if reg.read_only:
                yield fn, stored
                continue
            if out is None:
                out = self._copy(stored)
            yield fn, out

    def _notify_add(self, stored: Object) -> None:
        for fn, obj in self._deliveries(stored, "on_add"):
            self._call(fn, obj)

    def _notify_update(self, old: Object, stored: Object) -> None:
        for fn, obj in self._deliveries(stored, "on_update"):
            self._call(fn, old, obj)

    def _notify_delete(self, gone: Object | DeletedFinalStateUnknown) -> None:
        for reg in list(self._handlers):
            if reg.on_delete is not None:
                self._call(reg.on_delete, gone)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("%r: event handler %r failed", self, fn)

    async def _resync_loop(self, period: float) -> None:
        await self._synced.wait()
        while True:
            await self._clock.sleep(period)
            for stored in self.indexer.list():
                self._notify_update(stored, stored)
