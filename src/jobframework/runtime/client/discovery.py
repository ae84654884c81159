"""A caching RESTMapper fed by the API server's discovery endpoints.

Discovery is read with one request per root when the server offers *aggregated
discovery* (``apidiscovery.k8s.io/v2``, GA in Kubernetes 1.30; ``v2beta1`` accepted too),
falling back to the classic walk (``/api``, ``/apis``, then one ``APIResourceList`` per
group-version) when it answers with the classic documents. The result is cached; a kind
that is not in the cache triggers one refresh (a CRD may have been installed since), and
is then reported as :class:`NoKindMatchError`. Concurrent misses share one refresh.

:class:`NoKindMatchError` is a :class:`LookupError` (the
:class:`~jobframework.runtime.client.RESTMapper` contract, and what the in-memory server's
mapper raises), not an :class:`~jobframework.runtime.errors.ApiError`: like
controller-runtime's ``meta.NoKindMatchError``, which ``apierrors.IsNotFound`` does not
match, "this kind is not served" is a configuration problem, not a missing object.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from ..objects import GVK, GVR
from .interface import RESTMapping

log = logging.getLogger(__name__)

#: The ``Accept`` header client-go sends to ask for aggregated discovery, classic as fallback.
AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


class NoKindMatchError(LookupError):
    """No served resource has this kind (``meta.NoKindMatchError``)."""

    def __init__(self, gvk: GVK) -> None:
        super().__init__(f'no matches for kind "{gvk.kind}" in version "{gvk.api_version}"')
        self.gvk = gvk


class DiscoveryTransport(Protocol):
    """What discovery needs from a client: GET a path and decode its JSON."""

    async def request_json(self, method: str, path: str, *, accept: str = ...) -> Any:
        """Send a request and return the decoded JSON body."""


def _mappings_from_resource_list(group: str, version: str, doc: Any) -> list[RESTMapping]:
    """Mappings from a classic ``APIResourceList`` (subresources are ``"<res>/<sub>"``)."""
    resources = (doc.get("resources") or []) if isinstance(doc, dict) else []
    subs: dict[str, set[str]] = {}
    mains: list[dict[str, Any]] = []
    for r in resources:
        name = str(r.get("name") or "")
        base, sep, sub = name.partition("/")
        if sep:
            subs.setdefault(base, set()).add(sub)
        elif name:
            mains.append(r)
    return [
        RESTMapping(
            gvk=GVK(group, version, str(r.get("kind") or "")),
            resource=GVR(group, version, str(r["name"])),
            namespaced=bool(r.get("namespaced")),
            subresources=frozenset(subs.get(str(r["name"]), ())),
        )
        for r in mains
    ]


def _mappings_from_aggregated(doc: Any) -> list[RESTMapping]:
    """Mappings from an ``APIGroupDiscoveryList`` (every version of every group)."""
    out: list[RESTMapping] = []
    for group_doc in doc.get("items") or []:
        group = str((group_doc.get("metadata") or {}).get("name") or "")
        for version_doc in group_doc.get("versions") or []:
            version = str(version_doc.get("version") or "")
            for r in version_doc.get("resources") or []:
                kind = str((r.get("responseKind") or {}).get("kind") or "")
                resource = str(r.get("resource") or "")
                if not kind or not resource:
                    continue
                out.append(RESTMapping(
                    gvk=GVK(group, version, kind),
                    resource=GVR(group, version, resource),
                    namespaced=r.get("scope") == "Namespaced",
                    subresources=frozenset(
                        str(s.get("subresource")) for s in r.get("subresources") or []
                        if s.get("subresource")
                    ),
                ))
    return out


def _is_aggregated(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == "APIGroupDiscoveryList"


class DiscoveryRESTMapper:
    """A :class:`~jobframework.runtime.client.RESTMapper` over discovery, cached.

    ``aggregated=False`` forces the classic walk (for servers or proxies that mishandle
    the aggregated ``Accept`` header).
    """

    def __init__(self, transport: DiscoveryTransport, *, aggregated: bool = True) -> None:
        self._transport = transport
        self._aggregated = aggregated
        self._by_kind: dict[GVK, RESTMapping] | None = None
        self._by_resource: dict[GVR, RESTMapping] = {}
        self._generation = 0
        self._lock = asyncio.Lock()

    async def rest_mapping(self, gvk: GVK) -> RESTMapping:
        """The mapping for ``gvk``; refreshes once on a miss, then :class:`NoKindMatchError`."""
        if self._by_kind is not None and gvk in self._by_kind:
            return self._by_kind[gvk]
        await self._refresh_after(self._generation)
        assert self._by_kind is not None
        found = self._by_kind.get(gvk)
        if found is None:
            raise NoKindMatchError(gvk)
        return found

    async def kind_for(self, gvr: GVR) -> GVK:
        """The kind served at ``gvr`` (refresh once on a miss, then :class:`LookupError`)."""
        if self._by_kind is None or gvr not in self._by_resource:
            await self._refresh_after(self._generation)
        found = self._by_resource.get(gvr)
        if found is None:
            raise LookupError(f"no kind is served at {gvr.resource!r} in {gvr.api_version!r}")
        return found.gvk

    async def mappings(self) -> list[RESTMapping]:
        """Every mapping discovery knows (loading it if needed)."""
        if self._by_kind is None:
            await self._refresh_after(self._generation)
        assert self._by_kind is not None
        return list(self._by_kind.values())

    def invalidate(self) -> None:
        """Forget the cache; the next lookup re-reads discovery."""
        self._by_kind = None
        self._by_resource = {}

    async def refresh(self) -> None:
        """Re-read discovery now."""
        await self._refresh_after(self._generation)

    async def _refresh_after(self, seen_generation: int) -> None:
        async with self._lock:
            if self._generation != seen_generation and self._by_kind is not None:
                return  # another task refreshed while we waited: use its result
            mappings = await self._discover()
            by_kind: dict[GVK, RESTMapping] = {}
            by_resource: dict[GVR, RESTMapping] = {}
            for m in mappings:
                by_kind.setdefault(m.gvk, m)  # first resource serving a kind wins
                by_resource.setdefault(m.resource, m)
            self._by_kind, self._by_resource = by_kind, by_resource
            self._generation += 1

    async def _discover(self) -> list[RESTMapping]:
        accept = AGGREGATED_ACCEPT if self._aggregated else "application/json"
        core = await self._transport.request_json("GET", "/api", accept=accept)
        groups = await self._transport.request_json("GET", "/apis", accept=accept)
        out: list[RESTMapping] = []
        if _is_aggregated(core) and _is_aggregated(groups):
            out.extend(_mappings_from_aggregated(core))
            out.extend(_mappings_from_aggregated(groups))
            return out
        # Classic discovery: re-ask in the classic format where the server mixed them.
        if _is_aggregated(core):
            core = await self._transport.request_json("GET", "/api", accept="application/json")
        if _is_aggregated(groups):
            groups = await self._transport.request_json("GET", "/apis",
                                                        accept="application/json")
        versions: list[tuple[str, str, str]] = [
            ("", str(v), f"/api/{v}") for v in core.get("versions") or []
        ]
        for g in groups.get("groups") or []:
            for v in g.get("versions") or []:
                versions.append((str(g.get("name") or ""), str(v.get("version") or ""),
                                 f"/apis/{v.get('groupVersion')}"))
        results = await asyncio.gather(
            *(self._transport.request_json("GET", path) for _, _, path in versions),
            return_exceptions=True,
        )
        for (group, version, path), res in zip(versions, results, strict=True):
            if isinstance(res, BaseException):
                if not isinstance(res, Exception):
                    raise res
                # client-go's ErrGroupDiscoveryFailed: one broken API (say an unavailable
                # aggregated server) must not hide every other kind.
                log.warning("discovery of %s failed: %s", path, res)
                continue
            out.extend(_mappings_from_resource_list(group, version, res))
        return out


__all__ = [
    "AGGREGATED_ACCEPT",
    "DiscoveryRESTMapper",
    "DiscoveryTransport",
    "NoKindMatchError",
]
