"""The informer cache: one informer per kind, and a :class:`Reader` served from them.

This is controller-runtime's ``cache.Cache``. Informers are created on demand (the first
``get_informer``, ``index_field``, ``get`` or ``list`` of a kind) and run while the cache
runs. Reads wait for the kind's informer to sync, then answer from memory with deep
copies, so a caller mutating what it read never changes the cache.

Restrictions by kind (controller-runtime's ``Options.ByObject``) limit what an informer
lists and watches: namespaces (one informer per namespace, presented as one), a label
selector, a field selector. Restricting what is cached is how a controller keeps memory
bounded and works with namespace-scoped RBAC.

Field indexes (controller-runtime's ``FieldIndexer.IndexField``) are stored under the
index name ``field:<name>`` with the values ``<namespace>/<value>`` and
``__all_namespaces/<value>``, so ``list(matching_fields=...)`` is one dict lookup with or
without a namespace.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from .. import errors
from ..client.interface import Client, FieldSel, ObjectList, RESTMapping, Selector
from ..clock import Clock, RealClock
from ..objects import GVK, Object, ObjectKey, labels_of, namespace_of, resource_version_of
from ..selectors import FieldSelector, LabelSelector
from ._informer import HandlerRegistration, OnAdd, OnDelete, OnUpdate, SharedInformer
from ._informer import TransformFunc as TransformFunc
from ._store import NAMESPACE_INDEX, Indexer, IndexFunc, object_key

log = logging.getLogger(__name__)

#: Extracts the values an object is indexed under for a field index.
FieldIndexFunc = Callable[[Object], Iterable[str]]

ALL_NAMESPACES_KEY = "__all_namespaces"


def field_index_name(field: str) -> str:
    """The store index name behind a field index (``field:<field>``)."""
    return f"field:{field}"


def namespaced_index_key(namespace: str | None, value: str) -> str:
    """The index value of ``value`` within ``namespace`` (or across all namespaces)."""
    return f"{namespace or ALL_NAMESPACES_KEY}/{value}"


class CacheNotStarted(RuntimeError):
    """A read needed an informer that cannot sync because the cache is not running."""


class ResourceNotCached(LookupError):
    """A read of a kind with no informer, from a cache told not to create one."""


class UnknownNamespace(LookupError):
    """A read in a namespace the kind's informers do not cover."""


@runtime_checkable
class Informer(Protocol):
    """What :meth:`Cache.get_informer` returns (one namespace or several)."""

    def add_event_handler(
        self,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
        *,
        read_only: bool = False,
    ) -> Any:
        """Register handlers; they hear about objects already cached at once. With
        ``read_only`` (a promise never to change them) they get the cached objects
        themselves instead of copies."""

    def remove_event_handler(self, registration: Any) -> None:
        """Unregister what :meth:`add_event_handler` returned."""

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add index functions (existing objects are indexed at once)."""

    def has_synced(self) -> bool:
        """True once the initial list is in the store."""

    async def wait_for_sync(self) -> bool:
        """Wait for sync; False if the informer stopped first."""


def _tuple_or_none(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return tuple(value) if value is not None else None


@attrs.frozen
class ByObject:
    """Cache restrictions for one kind (controller-runtime's ``cache.ByObject``).

    ``namespaces`` None means the cache's default; an empty tuple means all namespaces.
    Selectors and transform replace the cache-wide defaults when set.
    """

    namespaces: tuple[str, ...] | None = attrs.field(default=None, converter=_tuple_or_none)
    label_selector: Selector = None
    field_selector: FieldSel = None
    transform: TransformFunc | None = None


class MultiNamespaceInformer:
    """One informer per namespace, presented as a single :class:`Informer`."""

    def __init__(self, informers: Mapping[str, SharedInformer]) -> None:
        self.informers: dict[str, SharedInformer] = dict(informers)

    def add_event_handler(
        self,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
        *,
        read_only: bool = False,
    ) -> list[HandlerRegistration]:
        """Register on every namespace's informer; returns their registrations."""
        return [i.add_event_handler(on_add, on_update, on_delete, read_only=read_only)
                for i in self.informers.values()]

    def remove_event_handler(self, registration: Any) -> None:
        """Unregister registrations returned by :meth:`add_event_handler`."""
        for informer, reg in zip(self.informers.values(), registration, strict=True):
            informer.remove_event_handler(reg)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add index functions to every namespace's store."""
        for informer in self.informers.values():
            informer.add_indexers(indexers)

    def has_synced(self) -> bool:
        """True when every namespace's informer has synced."""
        return all(i.has_synced() for i in self.informers.values())

    async def wait_for_sync(self) -> bool:
        """Wait for every namespace's informer."""
        results = await asyncio.gather(*(i.wait_for_sync() for i in self.informers.values()))
        return all(results)


class _Entry:
    """The informers of one kind, and what the reader needs to know about them."""

    def __init__(self, gvk: GVK, mapping: RESTMapping, informers: dict[str | None, SharedInformer]):
        self.gvk = gvk
        self.mapping = mapping
        # Keyed by namespace; None for the one informer covering all namespaces.
        self.informers = informers
        self.public: Informer = (
            informers[None] if None in informers
            else MultiNamespaceInformer({ns or "": i for ns, i in informers.items()})
        )

    def informers_for(self, namespace: str | None) -> list[SharedInformer]:
        if None in self.informers or not self.mapping.namespaced:
            return list(self.informers.values())
        if namespace is None:
            return list(self.informers.values())
        informer = self.informers.get(namespace)
        if informer is None:
            raise UnknownNamespace(
                f"unable to read {self.gvk.kind} in namespace {namespace!r}: "
                "unknown namespace for the cache"
            )
        return [informer]


class Cache:
    """Informers per kind, started with the cache, and a cache-backed reader.

    Args:
        client: lists and watches (and maps kinds to resources).
        namespaces: default namespaces for namespaced kinds (None: all).
        label_selector / field_selector / transform: defaults for every kind.
        by_object: per-kind restrictions overriding the defaults.
        resync_period: informers' resync period (None: no resync).
        reader_fail_on_missing_informer: reads of an uncached kind raise
            :class:`ResourceNotCached` instead of starting an informer.
        clock: drives informers' backoff, watch deadlines and resyncs.
        informer_options: extra keyword arguments for every :class:`SharedInformer`.
    """

    def __init__(
        self,
        client: Client,
        *,
        namespaces: Sequence[str] | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
        transform: TransformFunc | None = None,
        by_object: Mapping[GVK, ByObject] | None = None,
        resync_period: float | None = None,
        reader_fail_on_missing_informer: bool = False,
        clock: Clock | None = None,
        informer_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.namespaces = tuple(namespaces) if namespaces else ()
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.transform = transform
        self.by_object = dict(by_object or {})
        self.resync_period = resync_period
        self.reader_fail_on_missing_informer = reader_fail_on_missing_informer
        self._clock: Clock = clock or RealClock()
        self._informer_options = dict(informer_options or {})
        self._entries: dict[GVK, _Entry] = {}
        self._creating: dict[GVK, asyncio.Future[_Entry]] = {}
        self._started = False
        self._stopped = False

    # -- informers -------------------------------------------------------------------

    async def get_informer(self, gvk: GVK) -> Informer:
        """The informer for ``gvk``, created (and started, if the cache runs) on demand."""
        return (await self._entry(gvk)).public

    async def index_field(self, gvk: GVK, name: str, fn: FieldIndexFunc) -> None:
        """Index ``gvk`` objects by the values ``fn`` extracts, for ``matching_fields``.

        May be called before or after the cache starts: objects already cached are
        indexed at once. ``ValueError`` if ``name`` is already indexed for ``gvk``.
        """
        entry = await self._entry(gvk)

        def index(obj: Object) -> list[str]:
            values = list(fn(obj))
            ns = namespace_of(obj)
            keys = [namespaced_index_key(ns, v) for v in values]
            if ns:
                keys += [namespaced_index_key(None, v) for v in values]
            return keys

        entry.public.add_indexers({field_index_name(name): index})

    def informer_for(self, gvk: GVK) -> Informer | None:
        """The informer for ``gvk`` if it exists already (never creates one)."""
        entry = self._entries.get(gvk)
        return entry.public if entry is not None else None

    def observed(self, gvk: GVK, obj: Mapping[str, Any]) -> asyncio.Future[None] | None:
        """A future done once the cache holds ``obj`` (a write's answer) at its
        resourceVersion or later; None if it does, or if nothing caches ``gvk`` there
        (see :meth:`SharedInformer.observed`). Never starts an informer."""
        entry = self._entries.get(gvk)
        if entry is None:
            return None
        ns = namespace_of(obj) if entry.mapping.namespaced else None
        informer = entry.informers.get(None) or (entry.informers.get(ns) if ns else None)
        if informer is None:
            return None
        return informer.observed(object_key(obj), resource_version_of(obj))

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start every informer; informers created later start at once."""
        if self._stopped:
            raise RuntimeError("a stopped cache cannot be restarted")
        self._started = True
        for entry in self._entries.values():
            for informer in entry.informers.values():
                informer.start()

    async def stop(self) -> None:
        """Stop every informer."""
        self._stopped = True
        await asyncio.gather(*(i.stop() for e in self._entries.values()
                               for i in e.informers.values()))

    async def run(self) -> None:
        """Start, then run until cancelled; stops the informers on the way out."""
        self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    @property
    def started(self) -> bool:
        """True once :meth:`start` was called."""
        return self._started

    async def wait_for_cache_sync(self) -> bool:
        """Wait until every informer created so far has synced."""
        entries = list(self._entries.values())
        results = await asyncio.gather(*(e.public.wait_for_sync() for e in entries))
        return all(results)

    # -- reads -----------------------------------------------------------------------

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        """A copy of the cached object; ``NotFound`` if the cache does not hold it."""
        entry = await self._synced_entry(gvk)
        ns = namespace if entry.mapping.namespaced else None
        key = str(ObjectKey(ns or "", name))
        for informer in entry.informers_for(ns):
            obj = informer.indexer.get_by_key(key)
            if obj is not None:
                return informer.copy_of(obj)
        raise errors.new_not_found(entry.mapping.resource.resource, name, gvk.group)

    async def get_read_only(
        self, gvk: GVK, name: str, *, namespace: str | None = None
    ) -> Mapping[str, Any]:
        """The cached object itself, not a copy: for callers that only read it (a copy is
        a marshal round trip of the whole object). Never modify what it returns."""
        entry = await self._synced_entry(gvk)
        ns = namespace if entry.mapping.namespaced else None
        key = str(ObjectKey(ns or "", name))
        for informer in entry.informers_for(ns):
            obj = informer.indexer.get_by_key(key)
            if obj is not None:
                return obj
        raise errors.new_not_found(entry.mapping.resource.resource, name, gvk.group)

    async def list(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
        matching_fields: Mapping[str, str] | None = None,
    ) -> ObjectList:
        """Copies of the cached objects that match, in ``namespace/name`` order.

        ``matching_fields`` (controller-runtime's ``client.MatchingFields``) looks values
        up in field indexes registered with :meth:`index_field`; an unknown index is a
        ``KeyError``. An equality term of ``field_selector`` uses a field index of that
        name when there is one, and is otherwise evaluated on each object.
        """
        entry = await self._synced_entry(gvk)
        ns = namespace if entry.mapping.namespaced else None
        labels = _label_selector(label_selector)
        fields = _field_selector(field_selector)
        exact: dict[str, str] = dict(matching_fields or {})
        remaining: builtins.list[tuple[str, bool, str]] = []
        informers = entry.informers_for(ns)
        for field, equal, value in fields.terms:
            indexed = informers and field_index_name(field) in informers[0].indexer.indexers
            if equal and indexed and field not in exact:
                exact[field] = value
            else:
                remaining.append((field, equal, value))
        rest = FieldSelector(tuple(remaining))
        items: builtins.list[tuple[Object, SharedInformer]] = []
        for informer in informers:
            for obj in _candidates(informer.indexer, ns, exact):
                if labels.matches(labels_of(obj)) and rest.matches(obj):
                    items.append((obj, informer))
        items.sort(key=lambda o: (namespace_of(o[0]), o[0]["metadata"].get("name", "")))
        rv = informers[0].last_sync_resource_version if len(informers) == 1 else ""
        return ObjectList([informer.copy_of(o) for o, informer in items], rv)

    # -- internals -------------------------------------------------------------------

    async def _synced_entry(self, gvk: GVK) -> _Entry:
        entry = self._entries.get(gvk)
        if entry is None:
            if self.reader_fail_on_missing_informer:
                raise ResourceNotCached(f"{gvk} is not cached and the cache may not add it")
            entry = await self._entry(gvk)
        if not entry.public.has_synced():
            if not self._started or self._stopped:
                raise CacheNotStarted(f"the cache is not running, cannot read {gvk}")
            if not await entry.public.wait_for_sync():
                raise CacheNotStarted(f"the informer for {gvk} stopped before it synced")
        return entry

    async def _entry(self, gvk: GVK) -> _Entry:
        entry = self._entries.get(gvk)
        if entry is not None:
            return entry
        pending = self._creating.get(gvk)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[_Entry] = asyncio.get_running_loop().create_future()
        self._creating[gvk] = fut
        try:
            mapping = await self.client.rest_mapper.rest_mapping(gvk)
            entry = self._new_entry(gvk, mapping)
        except BaseException as err:
            fut.set_exception(err)
            fut.exception()  # retrieved: concurrent waiters re-raise it themselves
            raise
        finally:
            del self._creating[gvk]
        self._entries[gvk] = entry
        fut.set_result(entry)
        if self._started and not self._stopped:
            for informer in entry.informers.values():
                informer.start()
        return entry

    def _new_entry(self, gvk: GVK, mapping: RESTMapping) -> _Entry:
        opts = self.by_object.get(gvk, ByObject())
        namespaces = opts.namespaces if opts.namespaces is not None else self.namespaces
        label_selector = (opts.label_selector if opts.label_selector is not None
                          else self.label_selector)
        field_selector = (opts.field_selector if opts.field_selector is not None
                          else self.field_selector)
        transform = opts.transform or self.transform

        def make(namespace: str | None) -> SharedInformer:
            return SharedInformer(
                self.client, gvk, namespace=namespace, label_selector=label_selector,
                field_selector=field_selector, resync_period=self.resync_period,
                transform=transform, clock=self._clock, **self._informer_options,
            )

        if not mapping.namespaced or not namespaces:
            informers: dict[str | None, SharedInformer] = {None: make(None)}
        else:
            informers = {ns: make(ns) for ns in namespaces}
        return _Entry(gvk, mapping, informers)


def _candidates(indexer: Indexer, namespace: str | None, exact: Mapping[str, str]) -> list[Object]:
    if not exact:
        if namespace:
            return indexer.by_index(NAMESPACE_INDEX, namespace)
        return indexer.list()
    keys: set[str] | None = None
    for field, value in exact.items():
        found = set(indexer.index_keys(field_index_name(field),
                                       namespaced_index_key(namespace, value)))
        keys = found if keys is None else keys & found
    return [o for k in sorted(keys or ()) if (o := indexer.get_by_key(k)) is not None]


def _label_selector(sel: Selector) -> LabelSelector:
    if isinstance(sel, LabelSelector):
        return sel
    return LabelSelector.parse(sel)


def _field_selector(sel: FieldSel) -> FieldSelector:
    if isinstance(sel, FieldSelector):
        return sel
    return FieldSelector.parse(sel)
