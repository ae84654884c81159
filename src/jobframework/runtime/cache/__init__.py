"""Informers, indexers and the informer cache (client-go ``tools/cache``, controller-runtime
``pkg/cache``).

- :class:`Indexer` — the ``namespace/name`` store with named index functions;
- :class:`Reflector` — lists, then watches from the list's resourceVersion (bookmarks
  on), re-watches after a broken stream, relists after 410 Gone;
- :class:`SharedInformer` — a reflector, an indexer and event handlers;
- :class:`Cache` — informers per kind created on demand, field indexes, and a
  cache-backed :class:`~jobframework.runtime.client.Reader` (deep copies out).

See ``docs/runtime-cache-and-queue.md`` for the design.
"""

from ._cache import (
    ALL_NAMESPACES_KEY,
    ByObject,
    Cache,
    CacheNotStarted,
    FieldIndexFunc,
    Informer,
    MultiNamespaceInformer,
    ResourceNotCached,
    UnknownNamespace,
    field_index_name,
    namespaced_index_key,
)
from ._informer import (
    HandlerRegistration,
    OnAdd,
    OnDelete,
    OnUpdate,
    SharedInformer,
    TransformFunc,
    compose_transforms,
    intern_strings,
    preserves_json,
    strip_managed_fields,
)
from ._reflector import Backoff, Reflector, ReflectorStore
from ._store import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    Indexer,
    IndexFunc,
    index_by_namespace,
    object_key,
)

__all__ = [
    "ALL_NAMESPACES_KEY",
    "NAMESPACE_INDEX",
    "Backoff",
    "ByObject",
    "Cache",
    "CacheNotStarted",
    "DeletedFinalStateUnknown",
    "FieldIndexFunc",
    "HandlerRegistration",
    "IndexFunc",
    "Indexer",
    "Informer",
    "MultiNamespaceInformer",
    "OnAdd",
    "OnDelete",
    "OnUpdate",
    "Reflector",
    "ReflectorStore",
    "ResourceNotCached",
    "SharedInformer",
    "TransformFunc",
    "UnknownNamespace",
    "compose_transforms",
    "field_index_name",
    "index_by_namespace",
    "intern_strings",
    "namespaced_index_key",
    "object_key",
    "preserves_json",
    "strip_managed_fields",
]
