"""A client that records every API request it makes, as RBAC sees them.

The in-memory API server authorizes nothing (it has no RBAC authorizer), so the RBAC
coverage test wraps the manager's client in a :class:`RecordingClient`: each call
becomes an :class:`ApiRequest` (verb, API group, resource or ``resource/subresource``,
namespace, name), what the API server's authorizer would be asked. Reads of the
manager's informer cache reach it as the informers' ``list`` and ``watch``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

import attrs

from jobframework.rbac import PolicyRule
from jobframework.runtime.client import PatchType, Preconditions, PropagationPolicy
from jobframework.runtime.client.interface import FieldSel, ObjectList, Selector, WatchEvent
from jobframework.runtime.objects import GVK, Object, name_of, namespace_of
from jobframework.runtime.selectors import FieldSelector

#: Kinds the in-memory server does not serve but the code sends (resource, namespaced).
UNSERVED: dict[GVK, tuple[str, bool]] = {
    GVK("authorization.k8s.io", "v1", "SubjectAccessReview"): ("subjectaccessreviews", False),
}


@attrs.frozen(order=True)
class ApiRequest:
    """One resource request as the authorizer sees it."""

    verb: str
    group: str
    #: ``plural`` or ``plural/subresource``.
    resource: str
    #: None: a cluster-scoped object, or a list/watch across all namespaces.
    namespace: str | None
    name: str = ""

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else " (cluster-wide)"
        name = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{name}{where}"


def allowed(request: ApiRequest, rules: Iterable[PolicyRule], manager_namespace: str) -> bool:
    """Whether any of ``rules`` grants ``request``."""
    return any(r.allows(request.verb, request.group, request.resource, name=request.name,
                        namespace=request.namespace, manager_namespace=manager_namespace)
               for r in rules)


def _selected_name(selector: FieldSel) -> str:
    """The object a list or watch is restricted to by ``metadata.name=<name>``: the API
    server authorizes such a request against ``resourceNames`` too."""
    parsed = selector if isinstance(selector, FieldSelector) else FieldSelector.parse(selector)
    return next((value for field, equal, value in parsed.terms
                 if field == "metadata.name" and equal), "")


class RecordingClient:
    """Passes every call to ``inner`` and appends what it asked to :attr:`requests`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[ApiRequest] = []

    @property
    def rest_mapper(self) -> Any:
        """The inner client's mapper (discovery is open to every authenticated user)."""
        return self.inner.rest_mapper

    async def _record(self, verb: str, gvk: GVK, namespace: str | None, name: str = "",
                      subresource: str | None = None) -> None:
        if gvk in UNSERVED:
            resource, namespaced = UNSERVED[gvk]
        else:
            mapping = await self.inner.rest_mapper.rest_mapping(gvk)
            resource, namespaced = mapping.resource.resource, mapping.namespaced
        if subresource:
            resource = f"{resource}/{subresource}"
        self.requests.append(ApiRequest(verb, gvk.group, resource,
                                        (namespace or None) if namespaced else None, name))

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        """GET."""
        await self._record("get", gvk, namespace, name)
        result: Object = await self.inner.get(gvk, name, namespace=namespace)
        return result

    async def list(self, gvk: GVK, *, namespace: str | None = None,
                   label_selector: Selector = None, field_selector: FieldSel = None
                   ) -> ObjectList:
        """LIST."""
        await self._record("list", gvk, namespace, _selected_name(field_selector))
        result: ObjectList = await self.inner.list(
            gvk, namespace=namespace, label_selector=label_selector,
            field_selector=field_selector)
        return result

    async def watch(self, gvk: GVK, *, namespace: str | None = None,
                    label_selector: Selector = None, field_selector: FieldSel = None,
                    resource_version: str | None = None, allow_bookmarks: bool = True,
                    timeout_seconds: int | None = None) -> AsyncIterator[WatchEvent]:
        """WATCH."""
        await self._record("watch", gvk, namespace, _selected_name(field_selector))
        async for event in self.inner.watch(
                gvk, namespace=namespace, label_selector=label_selector,
                field_selector=field_selector, resource_version=resource_version,
                allow_bookmarks=allow_bookmarks, timeout_seconds=timeout_seconds):
            yield event

    async def create(self, obj: Object, *, field_manager: str | None = None,
                     dry_run: bool = False) -> Object:
        """POST."""
        await self._record("create", GVK.of(obj), namespace_of(obj))
        result: Object = await self.inner.create(obj, field_manager=field_manager,
                                                 dry_run=dry_run)
        return result

    async def update(self, obj: Object, *, subresource: str | None = None,
                     field_manager: str | None = None, dry_run: bool = False) -> Object:
        """PUT."""
        await self._record("update", GVK.of(obj), namespace_of(obj), name_of(obj),
                           subresource)
        result: Object = await self.inner.update(obj, subresource=subresource,
                                                 field_manager=field_manager, dry_run=dry_run)
        return result

    async def update_status(self, obj: Object, *, field_manager: str | None = None) -> Object:
        """PUT to ``status``."""
        return await self.update(obj, subresource="status", field_manager=field_manager)

    async def patch(self, gvk: GVK, name: str, patch: Any, *, namespace: str | None = None,
                    patch_type: PatchType = PatchType.MERGE, subresource: str | None = None,
                    field_manager: str | None = None, force: bool | None = None,
                    dry_run: bool = False) -> Object:
        """PATCH (server-side apply too: it is a PATCH)."""
        await self._record("patch", gvk, namespace, name, subresource)
        result: Object = await self.inner.patch(
            gvk, name, patch, namespace=namespace, patch_type=patch_type,
            subresource=subresource, field_manager=field_manager, force=force, dry_run=dry_run)
        return result

    async def apply(self, obj: Object, *, field_manager: str, force: bool = False,
                    subresource: str | None = None) -> Object:
        """Server-side apply: a PATCH."""
        await self._record("patch", GVK.of(obj), namespace_of(obj), name_of(obj), subresource)
        result: Object = await self.inner.apply(obj, field_manager=field_manager, force=force,
                                                subresource=subresource)
        return result

    async def delete(self, gvk: GVK, name: str, *, namespace: str | None = None,
                     propagation_policy: PropagationPolicy | None = None,
                     preconditions: Preconditions | None = None,
                     grace_period_seconds: int | None = None,
                     dry_run: bool = False) -> Object | None:
        """DELETE."""
        await self._record("delete", gvk, namespace, name)
        result: Object | None = await self.inner.delete(
            gvk, name, namespace=namespace, propagation_policy=propagation_policy,
            preconditions=preconditions, grace_period_seconds=grace_period_seconds,
            dry_run=dry_run)
        return result
