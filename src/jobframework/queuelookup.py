"""The queues the webhooks consult, kept current from a manager's informers.

Kueue's webhooks answer "which ClusterQueue does this LocalQueue feed, and which
admission checks does it require" from the queue manager's memory, with no API call per
admission. :class:`CachedQueueLookup` is that memory for our webhooks: it follows the
LocalQueues, ClusterQueues and AdmissionChecks through the manager's cache (informers
shared with everything else the manager reads) and answers the
:class:`~jobframework.defaults.QueueLookup` questions synchronously, so that
``apply_default_for_managed_by`` hands a job to MultiKueue when its queue requires
MultiKueue's admission check, and the
:class:`~jobframework.defaults.DefaultLocalQueueLookup` one, so that a job without a
queue name in a namespace with a LocalQueue named ``default`` is labelled with it.

As Kueue's queue manager, it holds only active LocalQueues: one whose ``stopPolicy`` is
``Hold`` or ``HoldAndDrain`` is forgotten until it is resumed.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from . import constants as c
from .defaults import local_queue_is_active
from .metrics import LOCAL_QUEUE_GVK
from .multikueue import ADMISSION_CHECK_GVK
from .runtime.cache import Cache, DeletedFinalStateUnknown
from .runtime.objects import GVK, Object, name_of, namespace_of

__all__ = ["CLUSTER_QUEUE_GVK", "CachedQueueLookup"]

CLUSTER_QUEUE_GVK = GVK(LOCAL_QUEUE_GVK.group, LOCAL_QUEUE_GVK.version, "ClusterQueue")


class CachedQueueLookup:
    """A :class:`~jobframework.defaults.QueueLookup` over a cache's informers.

    Build it with :meth:`for_cache` while setting up a manager (before it starts or after:
    informers created later start at once); it knows what the informers have seen.
    """

    def __init__(self) -> None:
        self._local: dict[tuple[str, str], str] = {}
        self._cluster: dict[str, list[str]] = {}
        self._checks: dict[str, str] = {}

    @classmethod
    async def shared(cls, cache: Cache) -> CachedQueueLookup:
        """The lookup of ``cache``, made by :meth:`for_cache` on the first call and
        returned by every later one, so that integrations set up one by one on a manager
        share one set of handlers."""
        lookup = _SHARED.get(cache)
        if lookup is None:
            lookup = await cls.for_cache(cache)
            # Another caller may have finished first while this one awaited.
            lookup = _SHARED.setdefault(cache, lookup)
        return lookup

    @classmethod
    async def for_cache(cls, cache: Cache) -> CachedQueueLookup:
        """A lookup following ``cache``'s LocalQueue, ClusterQueue and AdmissionCheck
        informers (created if needed)."""
        lookup = cls()
        # Every informer first, handlers after: a caller may repeat a call that failed
        # half-way (discovery over a lossy connection) without doubling a handler.
        informers = [await cache.get_informer(gvk)
                     for gvk in (LOCAL_QUEUE_GVK, CLUSTER_QUEUE_GVK, ADMISSION_CHECK_GVK)]
        for informer, (put, drop) in zip(informers, (
                (lookup._put_local, lookup._drop_local),
                (lookup._put_cluster, lookup._drop_cluster),
                (lookup._put_check, lookup._drop_check)), strict=True):
            informer.add_event_handler(put, _on_update(put), _on_delete(drop))
        return lookup

    # -- QueueLookup -------------------------------------------------------------------

    def cluster_queue_for_local_queue(self, namespace: str, name: str) -> str | None:
        """The ClusterQueue a LocalQueue points at, or None when unknown."""
        return self._local.get((namespace, name))

    def admission_check_controllers(self, cluster_queue: str) -> list[str]:
        """``spec.controllerName`` of each known admission check the ClusterQueue names."""
        return [self._checks[n] for n in self._cluster.get(cluster_queue, [])
                if n in self._checks]

    # -- DefaultLocalQueueLookup -------------------------------------------------------

    def default_local_queue_exist(self, namespace: str) -> bool:
        """Whether ``namespace`` has an active LocalQueue named ``default``
        (``DefaultLocalQueueExist``)."""
        return (namespace, c.DEFAULT_LOCAL_QUEUE_NAME) in self._local

    # -- informer events ---------------------------------------------------------------

    def _put_local(self, obj: Object) -> None:
        if not local_queue_is_active(obj):
            # Kueue's LocalQueue controller takes a stopped queue out of its manager.
            self._drop_local(obj)
            return
        self._local[(namespace_of(obj), name_of(obj))] = str(
            (obj.get("spec") or {}).get("clusterQueue") or "")

    def _drop_local(self, obj: Object) -> None:
        self._local.pop((namespace_of(obj), name_of(obj)), None)

    def _put_cluster(self, obj: Object) -> None:
        rules = ((obj.get("spec") or {}).get("admissionChecksStrategy") or {}).get(
            "admissionChecks") or []
        self._cluster[name_of(obj)] = [str(r.get("name") or "") for r in rules]

    def _drop_cluster(self, obj: Object) -> None:
        self._cluster.pop(name_of(obj), None)

    def _put_check(self, obj: Object) -> None:
        self._checks[name_of(obj)] = str((obj.get("spec") or {}).get("controllerName") or "")

    def _drop_check(self, obj: Object) -> None:
        self._checks.pop(name_of(obj), None)


def _on_update(put: Callable[[Object], None]) -> Callable[[Object, Object], None]:
    def handler(_old: Object, new: Object) -> None:
        put(new)
    return handler


def _on_delete(drop: Callable[[Object], None]) -> Callable[[Any], None]:
    def handler(obj: Any) -> None:
        drop(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)
    return handler


#: One lookup per cache (:meth:`CachedQueueLookup.shared`); gone with its cache.
_SHARED: weakref.WeakKeyDictionary[Cache, CachedQueueLookup] = weakref.WeakKeyDictionary()
