"""The :class:`~jobframework.runtime.client.Client` of the in-memory API server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..runtime import errors
from ..runtime.client.interface import (
    FieldSel,
    ObjectList,
    PatchType,
    Preconditions,
    PropagationPolicy,
    Selector,
    WatchEvent,
)
from ..runtime.objects import GVK, Object, name_of, namespace_of
from ..runtime.selectors import FieldSelector, LabelSelector
from ._backend import ServerBackend
from ._registry import KindInfo, Registry


def _labels(selector: Selector) -> LabelSelector:
    if selector is None or isinstance(selector, LabelSelector):
        return selector or LabelSelector()
    try:
        return LabelSelector.parse(selector)
    except ValueError as exc:
        raise errors.BadRequest(f"unable to parse requirement: {exc}") from exc


def _fields(selector: FieldSel) -> FieldSelector:
    if selector is None or isinstance(selector, FieldSelector):
        return selector or FieldSelector()
    try:
        return FieldSelector.parse(selector)
    except ValueError as exc:
        raise errors.BadRequest(str(exc)) from exc


class InMemoryClient:
    """A client of an :class:`~jobframework.testing.APIServer`, acting as one user.

    Implements :class:`~jobframework.runtime.client.Client`. Objects passed in are copied
    before use and objects returned are fresh copies, so callers may mutate both freely.
    """

    def __init__(self, server: ServerBackend, *, user: str = "admin") -> None:
        self.server = server
        self.user = user

    @property
    def rest_mapper(self) -> Registry:
        """The server's kind→resource mapper."""
        return self.server.rest_mapper

    def _kind(self, gvk: GVK) -> KindInfo:
        return self.server.kind_info(gvk)

    def _kind_of(self, obj: Object) -> KindInfo:
        try:
            gvk = GVK.of(obj)
        except ValueError as exc:
            raise errors.BadRequest(str(exc)) from exc
        return self._kind(gvk)

    @staticmethod
    def _namespace(info: KindInfo, namespace: str | None) -> str | None:
        return namespace if info.namespaced else None

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        """Fetch one object; ``NotFound`` if absent."""
        info = self._kind(gvk)
        return await self.server._get(info, self._namespace(info, namespace), name)

    async def list(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
    ) -> ObjectList:
        """List objects of a kind (all namespaces when ``namespace`` is None)."""
        info = self._kind(gvk)
        items, rv = await self.server._list(info, self._namespace(info, namespace),
                                            _labels(label_selector), _fields(field_selector))
        return ObjectList(items=items, resource_version=rv)

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
        """Stream changes after ``resource_version`` (see :class:`APIServer` for details).

        Like a request over HTTP, nothing happens until the stream is iterated: an unknown
        kind, a bad selector or an expired resourceVersion raise on the first ``__anext__``.
        """
        return self._watch(gvk, namespace, label_selector, field_selector, resource_version,
                           allow_bookmarks, timeout_seconds)

    async def _watch(
        self, gvk: GVK, namespace: str | None, label_selector: Selector,
        field_selector: FieldSel, resource_version: str | None, allow_bookmarks: bool,
        timeout_seconds: int | None,
    ) -> AsyncIterator[WatchEvent]:
        info = self._kind(gvk)
        stream = self.server._watch(info, self._namespace(info, namespace),
                                    _labels(label_selector), _fields(field_selector),
                                    resource_version, allow_bookmarks, timeout_seconds)
        try:
            async for event in stream:
                yield event
        finally:
            await stream.aclose()

    async def create(
        self, obj: Object, *, field_manager: str | None = None, dry_run: bool = False
    ) -> Object:
        """POST; honours ``metadata.generateName``. ``AlreadyExists`` on a taken name."""
        return await self.server._create(self._kind_of(obj), obj, user=self.user,
                                         field_manager=field_manager, dry_run=dry_run)

    async def update(
        self,
        obj: Object,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> Object:
        """PUT, guarded by ``metadata.resourceVersion`` when set (``Conflict`` if stale)."""
        return await self.server._update(self._kind_of(obj), obj, subresource=subresource or "",
                                         user=self.user, field_manager=field_manager,
                                         dry_run=dry_run)

    async def update_status(self, obj: Object, *, field_manager: str | None = None) -> Object:
        """PUT to the ``status`` subresource."""
        return await self.update(obj, subresource="status", field_manager=field_manager)

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
        info = self._kind(gvk)
        return await self.server._patch(
            info, self._namespace(info, namespace), name, patch, PatchType(patch_type),
            subresource=subresource or "", user=self.user, field_manager=field_manager,
            force=force, dry_run=dry_run)

    async def apply(
        self,
        obj: Object,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
    ) -> Object:
        """Server-side apply ``obj`` (a partial object with apiVersion/kind/name)."""
        info = self._kind_of(obj)
        return await self.server._patch(
            info, namespace_of(obj) or None, name_of(obj), obj, PatchType.APPLY,
            subresource=subresource or "", user=self.user, field_manager=field_manager,
            force=force, dry_run=False)

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
        info = self._kind(gvk)
        return await self.server._delete(
            info, self._namespace(info, namespace), name,
            propagation_policy=propagation_policy, preconditions=preconditions,
            user=self.user, dry_run=dry_run)
