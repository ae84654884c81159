"""The client contract every backend implements (real API server or in-memory).

Objects are plain JSON dicts (see :mod:`jobframework.runtime.objects`). Every call
returns a fresh object the caller owns; errors are :mod:`jobframework.runtime.errors`.
A watch whose resourceVersion is too old raises :class:`~jobframework.runtime.errors.Gone`
(whether the server said so with HTTP 410 or with an ``ERROR`` event in the stream).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import attrs

from ..objects import GVK, GVR, Object
from ..selectors import FieldSelector, LabelSelector


class PatchType(enum.StrEnum):
    """Patch content types."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    APPLY = "application/apply-patch+yaml"
    STRATEGIC = "application/strategic-merge-patch+json"


class PropagationPolicy(enum.StrEnum):
    """``DeleteOptions.propagationPolicy``."""

    BACKGROUND = "Background"
    FOREGROUND = "Foreground"
    ORPHAN = "Orphan"


@attrs.frozen
class Preconditions:
    """``DeleteOptions.preconditions``: delete only if uid/resourceVersion still match."""

    uid: str | None = None
    resource_version: str | None = None


WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]


@attrs.frozen
class WatchEvent:
    """One event of a watch stream. BOOKMARK objects carry only ``metadata.resourceVersion``."""

    type: WatchEventType
    object: Object


@attrs.frozen
class ObjectList:
    """A list response: items plus the collection's resourceVersion to watch from."""

    items: list[Object]
    resource_version: str
    continue_token: str | None = None


@attrs.frozen
class RESTMapping:
    """How a kind is served: its resource path and scope."""

    gvk: GVK
    resource: GVR
    namespaced: bool
    subresources: frozenset[str] = frozenset()


@runtime_checkable
class RESTMapper(Protocol):
    """Maps kinds to resources (discovery, cached)."""

    async def rest_mapping(self, gvk: GVK) -> RESTMapping:
        """The mapping for ``gvk``; raises ``NotFound``-like ``LookupError`` if unknown."""


Selector = str | LabelSelector | None
FieldSel = str | FieldSelector | None


@runtime_checkable
class Reader(Protocol):
    """Reads: implemented by clients and by the informer cache."""

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        """Fetch one object; ``NotFound`` if absent."""

    async def list(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
    ) -> ObjectList:
        """List objects of a kind (all namespaces when ``namespace`` is None)."""


@runtime_checkable
class Client(Reader, Protocol):
    """The full client: reads, watch, writes, subresources, discovery."""

    @property
    def rest_mapper(self) -> RESTMapper:
        """The client's kind→resource mapper."""

    def watch(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
        resource_version: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Stream changes after ``resource_version``; ends when the server closes it.

        Raises ``Gone`` when ``resource_version`` is older than the server's history.
        """

    async def create(
        self, obj: Object, *, field_manager: str | None = None, dry_run: bool = False
    ) -> Object:
        """POST; honours ``metadata.generateName``. ``AlreadyExists`` on a taken name."""

    async def update(
        self,
        obj: Object,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> Object:
        """PUT, guarded by ``metadata.resourceVersion`` when set (``Conflict`` if stale)."""

    async def update_status(self, obj: Object, *, field_manager: str | None = None) -> Object:
        """PUT to the ``status`` subresource."""

    async def patch(
        self,
        gvk: GVK,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
    ) -> Object:
        """PATCH with the given type (merge, JSON, strategic, or apply)."""

    async def apply(
        self,
        obj: Object,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
    ) -> Object:
        """Server-side apply ``obj`` (a partial object with apiVersion/kind/name)."""

    async def delete(
        self,
        gvk: GVK,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: PropagationPolicy | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> Object | None:
        """DELETE. Returns the object when it remains (finalizers), else None."""


async def get_read_only(
    reader: Reader, gvk: GVK, name: str, *, namespace: str | None = None
) -> Mapping[str, Any]:
    """``reader.get`` for a caller that only reads the object and never modifies it.

    A reader with a ``get_read_only`` method (the manager's cached client) answers from
    its cache without copying the object; any other reader's ``get`` is used as is.
    """
    fast = getattr(reader, "get_read_only", None)
    if fast is not None:
        found: Mapping[str, Any] = await fast(gvk, name, namespace=namespace)
        return found
    return await reader.get(gvk, name, namespace=namespace)
