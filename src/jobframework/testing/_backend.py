"""What the in-memory server's helpers need of it: its storage key and its interface.

:class:`~jobframework.testing.client.InMemoryClient`, the fault injector
(:mod:`~jobframework.testing.faults`) and the garbage collector (:mod:`._gc`) reach the
server through :class:`ServerBackend`, which
:class:`~jobframework.testing.server.APIServer` implements; they import this module, not
the server, so the server can import them without an import circle.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Protocol

from ..runtime.client.interface import PatchType, Preconditions, PropagationPolicy, WatchEvent
from ..runtime.clock import Clock
from ..runtime.objects import GVK, Object
from ..runtime.selectors import FieldSelector, LabelSelector
from ._registry import GroupResource, KindInfo, Registry

__all__ = ["Key", "ServerBackend"]

#: Where the server stores an object of one resource: ``(namespace, name)``, the namespace
#: ``""`` for cluster-scoped kinds.
Key = tuple[str, str]


class ServerBackend(Protocol):
    """The server as its client, fault injector and garbage collector use it: the kinds
    it serves, its stores and its verbs (implemented by
    :class:`~jobframework.testing.server.APIServer`)."""

    @property
    def clock(self) -> Clock:
        """The server's clock (timestamps, injected latency)."""

    @property
    def rest_mapper(self) -> Registry:
        """The server's kind→resource mapper."""

    @property
    def _registry(self) -> Registry: ...

    def kind_info(self, gvk: GVK) -> KindInfo:
        """How ``gvk`` is served; ``NoKindMatchError`` when it is not."""

    def _store(self, gr: GroupResource) -> dict[Key, Object]: ...

    def _write_update(self, info: KindInfo, key: Key, old: Object, new: Object) -> Object: ...

    def _delete_now(
        self, info: KindInfo, key: Key, old: Object, policy: PropagationPolicy | None
    ) -> Object | None: ...

    def _drop_watches(self) -> int: ...

    def _compact(self) -> None: ...

    async def _get(self, info: KindInfo, namespace: str | None, name: str) -> Object: ...

    async def _list(
        self, info: KindInfo, namespace: str | None, labels: LabelSelector,
        fields: FieldSelector,
    ) -> tuple[list[Object], str]: ...

    def _watch(
        self, info: KindInfo, namespace: str | None, labels: LabelSelector,
        fields: FieldSelector, resource_version: str | None, allow_bookmarks: bool,
        timeout_seconds: int | None,
    ) -> AsyncGenerator[WatchEvent, None]: ...

    async def _create(
        self, info: KindInfo, obj: Object, *, user: str, field_manager: str | None,
        dry_run: bool, verb: str = "create", tracked: bool = False,
    ) -> Object: ...

    async def _update(
        self, info: KindInfo, obj: Object, *, subresource: str, user: str,
        field_manager: str | None, dry_run: bool, verb: str = "update",
        patcher: Any = None, tracked: bool = False,
    ) -> Object: ...

    async def _patch(
        self, info: KindInfo, namespace: str | None, name: str, patch: Any,
        patch_type: PatchType, *, subresource: str, user: str, field_manager: str | None,
        force: bool | None, dry_run: bool,
    ) -> Object: ...

    async def _delete(
        self, info: KindInfo, namespace: str | None, name: str, *,
        propagation_policy: PropagationPolicy | None, preconditions: Preconditions | None,
        user: str, dry_run: bool,
    ) -> Object | None: ...
