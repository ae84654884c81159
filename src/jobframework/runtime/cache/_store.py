"""The indexed object store behind an informer (client-go's ``cache.Indexer``).

Objects are kept by ``namespace/name`` (``name`` for cluster-scoped ones). Named index
functions map an object to the values it is indexed under, so a lookup like "workloads
owned by this job UID" is a dict access instead of a scan.

The store keeps the objects it is given and never copies them: the informer gives it
objects nobody else holds, and the readers above copy what they hand out.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from ..objects import Object, ObjectKey

#: An index function: the values an object is indexed under (may be empty).
IndexFunc = Callable[[Object], list[str]]


def object_key(obj: Mapping[str, Any] | DeletedFinalStateUnknown) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object (``MetaNamespaceKeyFunc``).

    A :class:`DeletedFinalStateUnknown` is keyed by the key it carries.
    """
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    # str(ObjectKey.of(obj)) without building the key object: twice per watch event.
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    name = meta.get("name") or ""
    return f"{namespace}/{name}" if namespace else f"{name}"


@attrs.frozen
class DeletedFinalStateUnknown:
    """The delete payload for an object whose deletion the informer did not see.

    When a relist no longer contains an object, it was deleted while the watch was
    down; ``obj`` is the last state the cache knew, which may be stale. Delete handlers
    receive either an object or one of these (client-go's type of the same name).
    """

    key: str
    obj: Object


def index_by_namespace(obj: Object) -> list[str]:
    """Index function keying objects by ``metadata.namespace`` (``MetaNamespaceIndexFunc``)."""
    return [ObjectKey.of(obj).namespace]


#: Name of the namespace index every informer store has.
NAMESPACE_INDEX = "namespace"


class Indexer:
    """A ``key -> object`` store with named secondary indexes.

    Index functions can be added at any time; existing objects are indexed at once.
    """

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, Object] = {}
        self._indexers: dict[str, IndexFunc] = {}
        # index name -> index value -> keys of the objects indexed under that value
        self._indices: dict[str, dict[str, set[str]]] = {}
        if indexers:
            self.add_indexers(indexers)

    # -- writes --------------------------------------------------------------------

    def add(self, obj: Object) -> None:
        """Insert or replace ``obj`` under its key."""
        key = object_key(obj)
        old = self._items.get(key)
        # Index functions are user code: evaluate them all before changing anything.
        old_values = self._values(old)
        new_values = self._values(obj)
        self._items[key] = obj
        self._update_indices(old_values, new_values, key)

    update = add

    def delete(self, obj: Object | DeletedFinalStateUnknown) -> None:
        """Remove the object with ``obj``'s key (absent keys are ignored)."""
        self.delete_key(object_key(obj))

    def delete_key(self, key: str) -> Object | None:
        """Remove and return the object stored under ``key``."""
        old = self._items.get(key)
        if old is not None:
            old_values = self._values(old)
            del self._items[key]
            self._update_indices(old_values, {}, key)
        return old

    def replace(self, objs: Iterable[Object]) -> None:
        """Make the store hold exactly ``objs`` (indices rebuilt)."""
        items = {object_key(o): o for o in objs}
        self._indices = self._build(items, self._indexers)
        self._items = items

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add named index functions; ``ValueError`` if a name is taken."""
        taken = set(indexers) & set(self._indexers)
        if taken:
            raise ValueError(f"indexer conflict: {sorted(taken)}")
        self._indices.update(self._build(self._items, indexers))
        self._indexers.update(indexers)

    # -- reads ---------------------------------------------------------------------

    def get_by_key(self, key: str) -> Object | None:
        """The stored object (not a copy: do not mutate it) or None."""
        return self._items.get(key)

    def get(self, obj: Mapping[str, Any]) -> Object | None:
        """The stored object with ``obj``'s key, or None."""
        return self._items.get(object_key(obj))

    def list(self) -> builtins.list[Object]:
        """Every stored object (not copies)."""
        return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        """Every key."""
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def indexers(self) -> dict[str, IndexFunc]:
        """The registered index functions (a copy of the mapping)."""
        return dict(self._indexers)

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        """Keys of the objects indexed under ``value`` in ``index_name``, sorted."""
        return sorted(self._index(index_name).get(value, ()))

    def by_index(self, index_name: str, value: str) -> builtins.list[Object]:
        """Objects indexed under ``value`` in ``index_name`` (by key order; not copies)."""
        return [self._items[k] for k in self.index_keys(index_name, value)]

    def index(self, index_name: str, obj: Object) -> builtins.list[Object]:
        """Objects sharing at least one ``index_name`` value with ``obj``."""
        fn = self._indexers.get(index_name)
        if fn is None:
            raise KeyError(f"index with name {index_name} does not exist")
        keys: set[str] = set()
        for value in fn(obj):
            keys |= self._index(index_name).get(value, set())
        return [self._items[k] for k in sorted(keys)]

    def list_index_func_values(self, index_name: str) -> builtins.list[str]:
        """Every value present in ``index_name``."""
        return sorted(self._index(index_name))

    # -- internals -----------------------------------------------------------------

    def _index(self, name: str) -> dict[str, set[str]]:
        index = self._indices.get(name)
        if index is None:
            raise KeyError(f"index with name {name} does not exist")
        return index

    def _values(self, obj: Object | None) -> dict[str, set[str]]:
        if obj is None:
            return {}
        return {name: set(fn(obj)) for name, fn in self._indexers.items()}

    def _update_indices(
        self, old_values: dict[str, set[str]], new_values: dict[str, set[str]], key: str
    ) -> None:
        for name, index in self._indices.items():
            old = old_values.get(name, set())
            new = new_values.get(name, set())
            for value in old - new:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in new - old:
                index.setdefault(value, set()).add(key)

    @staticmethod
    def _build(
        items: Mapping[str, Object], indexers: Mapping[str, IndexFunc]
    ) -> dict[str, dict[str, set[str]]]:
        indices: dict[str, dict[str, set[str]]] = {}
        for name, fn in indexers.items():
            index: dict[str, set[str]] = {}
            for key, obj in items.items():
                for value in fn(obj):
                    index.setdefault(value, set()).add(key)
            indices[name] = index
        return indices
