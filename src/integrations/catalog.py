"""The reference integrations a manager can run, loaded by short name.

Each reference integration is one subpackage of :mod:`integrations` that exports the
same small surface (see ``integrations.jobflow``): ``FRAMEWORK_NAME`` (its entry in
Kueue's ``integrations.externalFrameworks``; ``EXTERNAL_FRAMEWORK_NAME`` when
``FRAMEWORK_NAME`` is Kueue's internal name, as ``batch/job``), ``load_crds()``,
``register()``, ``setup(mgr, *, webhook_server=None, kueue=None)``,
``probe_object(namespace)`` and, for built-in kinds without a CRD,
``webhook_resources()``.
:func:`reference_integration` imports one and returns that surface as a typed
:class:`ReferenceIntegration`; only the integrations a manager runs are imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Protocol

import attrs

from jobframework.integrations import IntegrationManager
from jobframework.reconciler import ReconcilerOptions
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object
from jobframework.webhook import WebhookResource, WebhookServer, crd_webhook_resources

#: Short name → module of every reference integration the manager knows, in the order
#: they are set up.
MODULES: Final = {
    "jobflow": "integrations.jobflow",
    "daemonjob": "integrations.daemonjob",
    "appwrapper": "integrations.appwrapper",
    "batchjob": "integrations.batchjob",
}
#: Short name → the integration's name in Kueue's ``integrations.externalFrameworks``
#: (each module's ``FRAMEWORK_NAME``; known here without importing it).
FRAMEWORK_NAMES: Final = {
    "jobflow": "JobFlow.v1alpha1.api.practice.com",
    "daemonjob": "DaemonJob.v1alpha1.api.practice.com",
    "appwrapper": "AppWrapper.v1beta2.workload.codeflare.dev",
    "batchjob": "Job.v1.batch",
}
#: What ``python -m integrations run`` runs when told nothing else (``batchjob`` only on
#: request: Kueue's own ``batch/job`` integration normally manages Jobs).
DEFAULT_INTEGRATIONS: Final = ("jobflow", "daemonjob", "appwrapper")


class Wiring(Protocol):
    """What an integration's ``setup`` returns (at least)."""

    @property
    def webhook_paths(self) -> tuple[str, ...]:
        """The paths registered on the webhook server."""
        ...


class SetupFunc(Protocol):
    """An integration's ``setup`` coroutine."""

    def __call__(self, mgr: Manager, *, webhook_server: WebhookServer | None = None,
                 kueue: ReconcilerOptions | None = None) -> Awaitable[Wiring]:
        ...


@attrs.frozen(kw_only=True)
class ReferenceIntegration:
    """One reference integration's surface, as the external-framework manager uses it."""

    #: Short name (``jobflow``), the key of :data:`MODULES`.
    name: str
    #: Its name in Kueue's ``integrations.externalFrameworks``
    #: (``Kind.version.group``).
    framework_name: str
    load_crds: Callable[[], list[Object]]
    register: Callable[[IntegrationManager | None], None]
    setup: SetupFunc
    #: A minimal queued object the mutating webhook must suspend (a dry-run probe).
    probe_object: Callable[[str], Object]
    #: Kinds without a CRD of ours that the webhooks intercept (built-in kinds).
    extra_webhook_resources: Callable[[], list[WebhookResource]] = list

    def webhook_resources(self) -> list[WebhookResource]:
        """Every kind its webhooks intercept: its CRDs' and the extra ones."""
        return crd_webhook_resources(self.load_crds()) + self.extra_webhook_resources()

    @property
    def gvk(self) -> GVK:
        """The Kueue-managed kind, from :attr:`framework_name`."""
        kind, version, group = self.framework_name.split(".", 2)
        return GVK(group, version, kind)


def _attr(module: Any, name: str, owner: str) -> Any:
    try:
        return getattr(module, name)
    except AttributeError:
        raise TypeError(f"integration {owner!r} does not export {name!r}") from None


def reference_integration(name: str) -> ReferenceIntegration:
    """Import the reference integration ``name`` (a key of :data:`MODULES`)."""
    try:
        module_name = MODULES[name]
    except KeyError:
        raise ValueError(f"unknown integration {name!r}; known: "
                         f"{', '.join(MODULES)}") from None
    module = importlib.import_module(module_name)
    framework = getattr(module, "EXTERNAL_FRAMEWORK_NAME", None) or _attr(
        module, "FRAMEWORK_NAME", name)
    return ReferenceIntegration(
        name=name,
        framework_name=str(framework),
        load_crds=_attr(module, "load_crds", name),
        register=_attr(module, "register", name),
        setup=_attr(module, "setup", name),
        probe_object=_attr(module, "probe_object", name),
        extra_webhook_resources=getattr(module, "webhook_resources", list),
    )


def reference_integrations(names: Sequence[str]) -> list[ReferenceIntegration]:
    """:func:`reference_integration` for each name, without duplicates, in order."""
    seen: dict[str, ReferenceIntegration] = {}
    for name in names:
        if name not in seen:
            seen[name] = reference_integration(name)
    return list(seen.values())


def by_framework_name(framework_names: Sequence[str]) -> list[str]:
    """The short names of the reference integrations listed in a Kueue Configuration's
    ``integrations.externalFrameworks`` (unknown entries are left to other managers)."""
    wanted = set(framework_names)
    return [name for name, framework in FRAMEWORK_NAMES.items() if framework in wanted]
