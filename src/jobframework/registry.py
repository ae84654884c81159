"""Kueue's package-level integration-registry functions (``integrationmanager.go``,
``reconciler.go``, ``setup.go``), as thin wrappers over an
:class:`~jobframework.integrations.IntegrationManager`.

Kueue keeps one process-global manager; here each function takes ``manager=`` and
defaults to :data:`~jobframework.integrations.DEFAULT_INTEGRATION_MANAGER`, the one shared
instance :func:`~jobframework.integrations.register_integration` fills.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .integrations import (
    DEFAULT_INTEGRATION_MANAGER,
    IntegrationCallbacks,
    IntegrationManager,
)
from .multikueue import MultiKueueAdapter
from .runtime.client import Reader
from .runtime.objects import GVK, Object

__all__ = [
    "enable_integration",
    "find_ancestor_job_managed_by_kueue",
    "for_each_integration",
    "get_empty_owner_object",
    "get_integration",
    "get_integration_by_gvk",
    "get_integrations_list",
    "get_multikueue_adapters",
    "has_implicitly_enabled_framework",
    "is_owner_managed_by_kueue_for_object",
    "register_external_job_type",
    "setup_indexes",
]


def _m(manager: IntegrationManager | None) -> IntegrationManager:
    return manager if manager is not None else DEFAULT_INTEGRATION_MANAGER


def register_external_job_type(kind_arg: str, *, manager: IntegrationManager | None = None
                               ) -> None:
    """Register an externally managed kind ``Kind.version.group`` (``RegisterExternalJobType``);
    a misformatted name raises ``FrameworkNameFormatError``."""
    _m(manager).register_external_job_type(kind_arg)


def for_each_integration(
    f: Callable[[str, IntegrationCallbacks], None], *, manager: IntegrationManager | None = None
) -> None:
    """Call ``f(name, callbacks)`` for each framework in registration order; the first
    exception stops the loop and propagates (``ForEachIntegration``)."""
    _m(manager).for_each_integration(f)


def enable_integration(name: str, *, manager: IntegrationManager | None = None) -> None:
    """Mark a framework enabled (``EnableIntegration``)."""
    _m(manager).enable_integration(name)


def get_integration(name: str, *, manager: IntegrationManager | None = None
                    ) -> IntegrationCallbacks | None:
    """The callbacks registered under ``name``, or None (``GetIntegration``)."""
    return _m(manager).get_integration(name)


def get_integration_by_gvk(gvk: GVK, *, manager: IntegrationManager | None = None
                           ) -> IntegrationCallbacks | None:
    """The framework whose job kind is ``gvk``, or None (``GetIntegrationByGVK``)."""
    return _m(manager).get_integration_by_gvk(gvk)


def has_implicitly_enabled_framework(gvk: GVK, *, manager: IntegrationManager | None = None
                                     ) -> bool:
    """Whether ``gvk`` is the kind of a framework enabled only as another's dependency
    (``HasImplicitlyEnabledFramework``)."""
    return _m(manager).has_implicitly_enabled_framework(gvk)


def get_integrations_list(*, manager: IntegrationManager | None = None) -> list[str]:
    """Registered framework names, sorted (``GetIntegrationsList``)."""
    return _m(manager).get_integrations_list()


def is_owner_managed_by_kueue_for_object(
    obj: Mapping[str, Any], *, manager: IntegrationManager | None = None
) -> bool:
    """Whether the object's controller is an enabled framework's or an external kind
    (``IsOwnerManagedByKueueForObject``)."""
    return _m(manager).is_owner_managed_by_kueue_for_object(obj)


def get_empty_owner_object(
    owner_ref: Mapping[str, Any], *, manager: IntegrationManager | None = None
) -> GVK | None:
    """The kind to read an owner as, when it is an enabled framework's or external kind
    (``GetEmptyOwnerObject``; Go returns an empty object of that kind)."""
    return _m(manager).get_empty_owner_object(owner_ref)


def get_multikueue_adapters(
    enabled: Iterable[str], *, manager: IntegrationManager | None = None
) -> dict[str, MultiKueueAdapter]:
    """The MultiKueue adapters of the ``enabled`` frameworks keyed by ``str(gvk)``; two for
    one kind raise ``IntegrationError`` (``GetMultiKueueAdapters``)."""
    return _m(manager).get_multikueue_adapters(enabled)


async def find_ancestor_job_managed_by_kueue(
    reader: Reader,
    obj: Object,
    manage_jobs_without_queue_name: bool,
    *,
    manager: IntegrationManager | None = None,
) -> Object | None:
    """The top-most Kueue-managed ancestor of ``obj`` following controller references, or
    None (``FindAncestorJobManagedByKueue``); see
    :meth:`IntegrationManager.find_ancestor_job_managed_by_kueue`."""
    return await _m(manager).find_ancestor_job_managed_by_kueue(
        reader, obj, manage_jobs_without_queue_name)


async def setup_indexes(
    indexer: Any, enabled: Iterable[str], *, manager: IntegrationManager | None = None
) -> None:
    """Set up the field indexes of the ``enabled`` frameworks (``SetupIndexes``)."""
    await _m(manager).setup_indexes(indexer, enabled)
