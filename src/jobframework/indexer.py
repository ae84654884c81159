"""Field indexes on Workloads (and jobs) the reconciler lists by (Kueue's ``indexer.go``).

- the *owner index*, one per job kind: key ``.metadata.ownerReferences[<group>.<Kind>]``
  (e.g. ``.metadata.ownerReferences[batch.Job]``; the core group gives ``[.Pod]``), values
  the names of every owner reference of that kind;
- the *owner UID index*: key ``metadata.ownerReferences.uid``, values every owner UID.

Register them on a :class:`~jobframework.runtime.cache.Cache` (anything with
``index_field``) before the manager starts. :func:`list_owned_workloads` reads through the
index when the reader supports ``matching_fields`` (the cache, the manager's client) and
otherwise filters a namespace listing, so the reconciler also runs on a bare client.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .runtime.client import Reader
from .runtime.objects import GVK, Object, owner_references_of

#: Index key of the owner-UID index (``indexer.OwnerReferenceUID``).
OWNER_REFERENCE_UID = "metadata.ownerReferences.uid"


class FieldIndexer(Protocol):
    """What registers field indexes (``client.FieldIndexer``; the runtime's ``Cache``)."""

    async def index_field(
        self, gvk: GVK, name: str, fn: Callable[[Object], Iterable[str]]
    ) -> None:
        """Index objects of ``gvk`` under ``name`` by the values ``fn`` returns."""


def owner_reference_index_key(gvk: GVK) -> str:
    """``.metadata.ownerReferences[<group>.<Kind>]`` (``OwnerReferenceIndexKey``)."""
    return f".metadata.ownerReferences[{gvk.group}.{gvk.kind}]"


def owner_reference_index_field_matcher(gvk: GVK, name: str) -> dict[str, str]:
    """``matching_fields`` selecting Workloads owned by the ``gvk`` object ``name``."""
    return {owner_reference_index_key(gvk): name}


def workload_owner_index_func(gvk: GVK) -> Callable[[Object], list[str]]:
    """Names of the owner references of kind ``gvk`` (controller or not)."""

    def index(obj: Object) -> list[str]:
        return [str(ref.get("name", "")) for ref in owner_references_of(obj)
                if ref.get("kind") == gvk.kind and ref.get("apiVersion") == gvk.api_version]

    return index


def owner_uid_index_func(obj: Object) -> list[str]:
    """UIDs of every owner reference."""
    return [str(ref.get("uid", "")) for ref in owner_references_of(obj) if ref.get("uid")]


async def setup_workload_owner_index(indexer: FieldIndexer, gvk: GVK) -> None:
    """Index Workloads by their owners of kind ``gvk`` (``SetupWorkloadOwnerIndex``)."""
    from .workload import WORKLOAD_GVK

    await indexer.index_field(WORKLOAD_GVK, owner_reference_index_key(gvk),
                              workload_owner_index_func(gvk))


async def setup_owner_uid_index(indexer: FieldIndexer, gvk: GVK) -> None:
    """Index objects of ``gvk`` by their owner UIDs (``metadata.ownerReferences.uid``)."""
    await indexer.index_field(gvk, OWNER_REFERENCE_UID, owner_uid_index_func)


#: ``list`` function → whether it takes ``matching_fields`` (its signature, read once:
#: ``inspect.signature`` on every reconcile was a measurable share of one).
_MATCHING_FIELDS: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _supports_matching_fields(reader: Any) -> bool:
    method = reader.list
    func = getattr(method, "__func__", method)
    try:
        return _MATCHING_FIELDS[func]
    except (KeyError, TypeError):
        pass
    try:
        supported = "matching_fields" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        supported = False
    with contextlib.suppress(TypeError):  # not weakly referenceable: asked again next time
        _MATCHING_FIELDS[func] = supported
    return supported


async def list_by_index(
    reader: Reader, gvk: GVK, namespace: str, index_key: str, value: str,
    fallback: Callable[[Object], Iterable[str]],
) -> list[Object]:
    """Objects of ``gvk`` in ``namespace`` whose index ``index_key`` holds ``value``.

    Uses the field index when ``reader`` supports ``matching_fields``; otherwise lists the
    namespace and evaluates ``fallback`` (the index function) on each object.
    """
    if _supports_matching_fields(reader):
        listed = await reader.list(  # type: ignore[call-arg]
            gvk, namespace=namespace, matching_fields={index_key: value})
        return list(listed.items)
    listed = await reader.list(gvk, namespace=namespace)
    return [o for o in listed.items if value in fallback(o)]


async def list_owned_workloads(
    reader: Reader, owner_gvk: GVK, namespace: str, owner_name: str
) -> list[Object]:
    """Workloads in ``namespace`` owned by the ``owner_gvk`` object ``owner_name``."""
    from .workload import WORKLOAD_GVK

    return await list_by_index(reader, WORKLOAD_GVK, namespace,
                               owner_reference_index_key(owner_gvk), owner_name,
                               workload_owner_index_func(owner_gvk))
