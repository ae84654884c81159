"""Which kinds the in-memory server serves: built-ins, registered kinds and CRDs.

One :class:`KindInfo` per served group/version/kind. Every version of a group/resource
shares one store (as every served version of a CRD shares one etcd key prefix), so an
object written through ``v1`` reads back through ``v1beta1`` with only ``apiVersion``
changed (the CRD ``None`` conversion strategy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

# One error type for "kind not served", whichever client raises it.
from ..runtime.client.discovery import NoKindMatchError
from ..runtime.client.interface import RESTMapping
from ..runtime.objects import GVK, GVR

__all__ = ["GroupResource", "KindInfo", "NoKindMatchError", "Registry"]

#: Default propagation when a delete names none (``DefaultGarbageCollectionPolicy``).
GCPolicy = Literal["Background", "Orphan"]


@attrs.frozen
class GroupResource:
    """A resource in a group, all versions (the storage identity)."""

    group: str
    resource: str

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


@attrs.frozen
class KindInfo:
    """How one version of a kind is served."""

    gvk: GVK
    plural: str
    namespaced: bool
    status_subresource: bool = True
    #: A CRD version's ``openAPIV3Schema`` (or a ready ``StructuralSchema``), else None.
    schema: Any = None
    #: Whether the strategy stamps ``metadata.generation`` (CRDs and workload kinds do).
    generation: bool = True
    default_gc: GCPolicy = "Background"
    #: The CRD's ``metadata.name`` when the kind came from a CRD.
    crd: str | None = None
    #: ``AllowUnconditionalUpdate``: whether a PUT may omit ``metadata.resourceVersion``
    #: (built-ins mostly allow it; custom resources and CRDs do not).
    unconditional_update: bool = True

    @property
    def gr(self) -> GroupResource:
        """The storage identity."""
        return GroupResource(self.gvk.group, self.plural)

    @property
    def gvr(self) -> GVR:
        """The resource in this version."""
        return GVR(self.gvk.group, self.gvk.version, self.plural)

    @property
    def qualified_resource(self) -> str:
        """``plural.group`` as error messages name it (``widgets.example.com``, ``pods``)."""
        return str(self.gr)

    def mapping(self) -> RESTMapping:
        """The discovery view of this kind."""
        subs = frozenset({"status"}) if self.status_subresource else frozenset()
        return RESTMapping(self.gvk, self.gvr, self.namespaced, subs)


def _core(kind: str, plural: str, namespaced: bool, **kw: Any) -> KindInfo:
    return KindInfo(GVK("", "v1", kind), plural, namespaced, **kw)


def builtin_kinds() -> list[KindInfo]:
    """The built-in kinds a fresh server serves."""
    ar = "admissionregistration.k8s.io"
    return [
        _core("Namespace", "namespaces", False, generation=False),
        _core("Pod", "pods", True),
        _core("Node", "nodes", False, generation=False),
        _core("ConfigMap", "configmaps", True, status_subresource=False, generation=False),
        _core("Secret", "secrets", True, status_subresource=False, generation=False),
        _core("ServiceAccount", "serviceaccounts", True, status_subresource=False,
              generation=False),
        _core("Event", "events", True, status_subresource=False, generation=False),
        KindInfo(GVK("events.k8s.io", "v1", "Event"), "events", True,
                 status_subresource=False, generation=False),
        # batch/v1 keeps the pre-GC default for back compatibility (jobStrategy).
        KindInfo(GVK("batch", "v1", "Job"), "jobs", True, default_gc="Orphan"),
        KindInfo(GVK("apps", "v1", "Deployment"), "deployments", True),
        KindInfo(GVK("coordination.k8s.io", "v1", "Lease"), "leases", True,
                 status_subresource=False, generation=False),
        KindInfo(GVK("scheduling.k8s.io", "v1", "PriorityClass"), "priorityclasses", False,
                 status_subresource=False, generation=False),
        KindInfo(GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
                 "customresourcedefinitions", False, unconditional_update=False),
        KindInfo(GVK(ar, "v1", "MutatingWebhookConfiguration"),
                 "mutatingwebhookconfigurations", False, status_subresource=False),
        KindInfo(GVK(ar, "v1", "ValidatingWebhookConfiguration"),
                 "validatingwebhookconfigurations", False, status_subresource=False),
    ]


CRD_GVK = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
NAMESPACE_GVK = GVK("", "v1", "Namespace")


def kinds_from_crd(crd: Mapping[str, Any]) -> list[KindInfo]:
    """The served versions of an ``apiextensions.k8s.io/v1`` CRD manifest.

    Raises ``ValueError`` naming what is missing from the manifest.
    """
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        raise ValueError("spec: Required value")
    group = spec.get("group")
    names = spec.get("names") or {}
    kind = names.get("kind")
    plural = names.get("plural")
    if not group or not kind or not plural:
        raise ValueError("spec.group, spec.names.kind and spec.names.plural are required")
    name = (crd.get("metadata") or {}).get("name")
    if name and name != f"{plural}.{group}":
        raise ValueError(f"metadata.name: Invalid value: {name!r}: must be spec.names.plural"
                         "+\".\"+spec.group")
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    out: list[KindInfo] = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        out.append(KindInfo(
            GVK(group, version["name"], kind), plural, namespaced,
            status_subresource="status" in subresources, schema=schema,
            crd=f"{plural}.{group}", unconditional_update=False))
    if not out:
        raise ValueError("spec.versions: Invalid value: must have at least one served version")
    return out


class Registry:
    """The served kinds, by GVK and by resource; also the server's :class:`RESTMapper`."""

    def __init__(self) -> None:
        self._by_gvk: dict[GVK, KindInfo] = {}

    def add(self, info: KindInfo) -> None:
        """Serve ``info`` (replacing an earlier registration of the same GVK)."""
        self._by_gvk[info.gvk] = info

    def remove_crd(self, crd_name: str) -> list[KindInfo]:
        """Stop serving every version registered from CRD ``crd_name``; returns them."""
        gone = [i for i in self._by_gvk.values() if i.crd == crd_name]
        for info in gone:
            del self._by_gvk[info.gvk]
        return gone

    def kind(self, gvk: GVK) -> KindInfo:
        """The kind's serving info; :class:`NoKindMatchError` when not served."""
        info = self._by_gvk.get(gvk)
        if info is None:
            raise NoKindMatchError(gvk)
        return info

    def find(self, gvk: GVK) -> KindInfo | None:
        """The kind's serving info, or None."""
        return self._by_gvk.get(gvk)

    def by_resource(self, gvr: GVR) -> KindInfo | None:
        """The kind served at ``gvr``, or None."""
        for info in self._by_gvk.values():
            if info.gvr == gvr:
                return info
        return None

    def for_owner(self, api_version: str, kind: str) -> KindInfo | None:
        """The kind an owner reference names (None when not served)."""
        return self._by_gvk.get(GVK.from_api_version(api_version, kind))

    def all(self) -> list[KindInfo]:
        """Every served kind, sorted by GVK."""
        return sorted(self._by_gvk.values(), key=lambda i: i.gvk)

    async def rest_mapping(self, gvk: GVK) -> RESTMapping:
        """The :class:`RESTMapping` of ``gvk``; :class:`NoKindMatchError` when not served."""
        return self.kind(gvk).mapping()
