"""Integrations as plugins: the contract an integration package exports, and its loader.

An installed distribution declares its integration with an entry point in the group
:data:`ENTRY_POINT_GROUP`; the entry point's name is the integration's short name (what
``python -m integrations run --integrations`` and ``deploy render --integrations`` take)
and its value a module (or any object) with the surface of :class:`IntegrationModule`::

    [project.entry-points."kueue_jobframework.integrations"]
    sparkapp = "sparkapp_integration"

This project's reference integrations (``jobflow``, ``daemonjob``, ``appwrapper``,
``batchjob``) are declared the same way in its own ``pyproject.toml``; nothing knows them
by another list. :func:`installed_integrations` lists what is installed without importing
it; :func:`load_integration` imports one and returns its :class:`Integration`, with an
error naming the distribution when the import fails, and the installed names when the
name is unknown.
"""

from __future__ import annotations

import importlib.metadata
import types
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Final, Protocol

import attrs

from .integrations import IntegrationCallbacks, IntegrationManager
from .rbac import PolicyRule
from .reconciler import ReconcilerOptions
from .runtime.manager import Manager
from .runtime.objects import GVK, Object
from .webhook import WebhookResource, WebhookServer, crd_webhook_resources

__all__ = [
    "ENTRY_POINT_GROUP",
    "Integration",
    "IntegrationEntry",
    "IntegrationLoadError",
    "IntegrationModule",
    "SetupFunc",
    "UnknownIntegrationError",
    "Wiring",
    "by_framework_name",
    "check_names",
    "installed_integrations",
    "integration_from_module",
    "load_integration",
    "load_integrations",
]

#: The entry-point group an integration package declares itself in.
ENTRY_POINT_GROUP: Final = "kueue_jobframework.integrations"


class Wiring(Protocol):
    """What an integration's ``setup`` returns (at least)."""

    @property
    def webhook_paths(self) -> tuple[str, ...]:
        """The paths registered on the webhook server."""
        ...


class SetupFunc(Protocol):
    """An integration's ``setup`` coroutine function."""

    def __call__(self, mgr: Manager, *, webhook_server: WebhookServer | None = None,
                 kueue: ReconcilerOptions | None = None) -> Awaitable[Wiring]:
        ...


class IntegrationModule(Protocol):
    """What the object an entry point names exports (usually the integration's package).

    Besides these, it may export ``EXTERNAL_FRAMEWORK_NAME`` (its entry in Kueue's
    ``integrations.externalFrameworks`` when ``FRAMEWORK_NAME`` is one of Kueue's own
    framework names, as ``batch/job``: Kueue must then drop that built-in) and
    ``webhook_resources()`` (the kinds without a CRD of its own that its webhooks
    intercept, such as ``batch/v1`` Jobs).

    A module can be checked against this protocol by ``mypy``::

        import sparkapp_integration
        _: IntegrationModule = sparkapp_integration
    """

    @property
    def FRAMEWORK_NAME(self) -> str:
        """Its name in Kueue's ``integrations.externalFrameworks``: ``Kind.version.group``."""
        ...

    @property
    def RBAC(self) -> tuple[PolicyRule, ...]:
        """What its controllers and Kueue adapter need from the API server (the generic
        reconciler's own rules are added by the deployment)."""
        ...

    @property
    def CALLBACKS(self) -> IntegrationCallbacks:
        """Its Kueue callbacks (:class:`~jobframework.integrations.IntegrationCallbacks`)."""
        ...

    def load_crds(self) -> list[Object]:
        """Its CustomResourceDefinitions (none for built-in kinds)."""
        ...

    def register(self, manager: IntegrationManager | None = None) -> None:
        """Register :attr:`CALLBACKS` in ``manager`` (default: the process-wide one)."""
        ...

    @property
    def setup(self) -> SetupFunc:
        """Set it up on a manager: its controllers, and with ``kueue`` options the generic
        reconciler and the Kueue webhook."""
        ...

    def probe_object(self, namespace: str) -> Object:
        """A minimal queued object of its kind that the mutating webhook must suspend."""
        ...


class UnknownIntegrationError(ValueError):
    """No installed distribution declares an integration of that name."""


class IntegrationLoadError(ImportError):
    """An installed integration failed to import, or does not export the contract."""


@attrs.frozen
class IntegrationEntry:
    """One installed integration, known from its distribution's metadata (not imported)."""

    #: Its short name (the entry point's name).
    name: str
    #: The entry point's value: ``module`` or ``module:attribute``.
    value: str
    #: The distribution that declares it (``None`` when unknown).
    distribution: str | None


@attrs.frozen(kw_only=True)
class Integration:
    """One integration's surface, as a manager and ``deploy render`` use it."""

    #: Short name (``jobflow``): the entry point's name.
    name: str
    #: Its name in Kueue's ``integrations.externalFrameworks`` (``Kind.version.group``).
    framework_name: str
    #: The Kueue built-in framework this one replaces (``batch/job``), if any: Kueue must
    #: not run it beside ours.
    replaces_builtin: str | None = None
    load_crds: Callable[[], list[Object]]
    register: Callable[[IntegrationManager | None], None]
    setup: SetupFunc
    #: A minimal queued object the mutating webhook must suspend (a dry-run probe).
    probe_object: Callable[[str], Object]
    #: Its own RBAC rules (the manager's and the generic reconciler's are added apart).
    rbac: tuple[PolicyRule, ...]
    callbacks: IntegrationCallbacks
    #: Kinds without a CRD of ours that the webhooks intercept (built-in kinds).
    extra_webhook_resources: Callable[[], list[WebhookResource]] = list
    #: The distribution that declares it, when loaded from an entry point.
    distribution: str | None = None

    def webhook_resources(self) -> list[WebhookResource]:
        """Every kind its webhooks intercept: its CRDs' and the extra ones."""
        return crd_webhook_resources(self.load_crds()) + self.extra_webhook_resources()

    def webhook_paths(self) -> list[str]:
        """The paths its Kueue webhook setup registers (run on a server that never
        listens)."""
        if self.callbacks.setup_webhook is None:
            return []
        return list(self.callbacks.setup_webhook(WebhookServer(), None))

    @property
    def gvk(self) -> GVK:
        """The Kueue-managed kind, from :attr:`framework_name`."""
        kind, version, group = self.framework_name.split(".", 2)
        return GVK(group, version, kind)


def _attr(obj: Any, name: str, owner: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        raise IntegrationLoadError(
            f"integration {owner!r} does not export {name!r} (see "
            "jobframework.plugins.IntegrationModule)") from None


def integration_from_module(name: str, module: Any, *, distribution: str | None = None
                            ) -> Integration:
    """The :class:`Integration` of ``module`` (an :class:`IntegrationModule`), as ``name``.

    Raises :class:`IntegrationLoadError` naming the first export it lacks or has of the
    wrong type.
    """
    builtin = str(_attr(module, "FRAMEWORK_NAME", name))
    external = getattr(module, "EXTERNAL_FRAMEWORK_NAME", None)
    framework = str(external) if external else builtin
    if framework.count(".") < 2:
        raise IntegrationLoadError(
            f"integration {name!r}: FRAMEWORK_NAME {framework!r} is not Kind.version.group "
            "(a built-in framework name needs EXTERNAL_FRAMEWORK_NAME beside it)")
    rbac = _attr(module, "RBAC", name)
    if not isinstance(rbac, tuple) or not all(isinstance(r, PolicyRule) for r in rbac):
        raise IntegrationLoadError(f"integration {name!r}: RBAC is not a tuple of "
                                   "jobframework.rbac.PolicyRule")
    callbacks = _attr(module, "CALLBACKS", name)
    if not isinstance(callbacks, IntegrationCallbacks):
        raise IntegrationLoadError(f"integration {name!r}: CALLBACKS is not a "
                                   "jobframework.integrations.IntegrationCallbacks")
    functions = {attr: _attr(module, attr, name)
                 for attr in ("load_crds", "register", "setup", "probe_object")}
    for attr, value in functions.items():
        if not callable(value):
            raise IntegrationLoadError(f"integration {name!r}: {attr} is not callable")
    return Integration(
        name=name, framework_name=framework,
        replaces_builtin=getattr(module, "REPLACES_BUILTIN", None) or (
            builtin if external else None),
        rbac=rbac, callbacks=callbacks, distribution=distribution,
        extra_webhook_resources=getattr(module, "webhook_resources", list),
        **functions)


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _distribution(ep: importlib.metadata.EntryPoint) -> str | None:
    dist = ep.dist
    return None if dist is None else str(dist.metadata["Name"])


def installed_integrations() -> dict[str, IntegrationEntry]:
    """Every installed integration by short name, sorted, without importing any.

    Raises :class:`IntegrationLoadError` when two distributions declare the same name.
    """
    out: dict[str, IntegrationEntry] = {}
    for ep in _entry_points():
        entry = IntegrationEntry(ep.name, ep.value, _distribution(ep))
        seen = out.get(ep.name)
        if seen is not None and seen != entry:
            first, second = sorted((seen, entry), key=lambda e: (e.distribution or "", e.value))
            raise IntegrationLoadError(
                f"integration {ep.name!r} is declared twice: by {first.distribution} "
                f"({first.value}) and by {second.distribution} ({second.value})")
        out[ep.name] = entry
    return dict(sorted(out.items()))


def _load(entry: IntegrationEntry) -> Integration:
    module_name, _, attr = entry.value.partition(":")
    origin = f"distribution {entry.distribution}" if entry.distribution else "its entry point"
    try:
        obj: Any = importlib.import_module(module_name.strip())
        for part in filter(None, attr.strip().split(".")):
            obj = getattr(obj, part)
    except Exception as err:
        raise IntegrationLoadError(
            f"integration {entry.name!r} ({origin}, {entry.value}) failed to load: "
            f"{type(err).__name__}: {err}") from err
    if isinstance(obj, Integration):
        return attrs.evolve(obj, name=entry.name, distribution=entry.distribution)
    if not isinstance(obj, types.ModuleType) and callable(obj):
        # A factory: ``module:make_integration``.
        obj = obj()
        if isinstance(obj, Integration):
            return attrs.evolve(obj, name=entry.name, distribution=entry.distribution)
    return integration_from_module(entry.name, obj, distribution=entry.distribution)


def _unknown(names: Iterable[str], installed: dict[str, IntegrationEntry]) -> str:
    return (f"unknown integration(s) {', '.join(names) or '(none given)'}; installed: "
            f"{', '.join(installed) or '(none)'}")


def check_names(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` without duplicates, in order, once each is installed; raises
    :class:`UnknownIntegrationError` listing what is installed otherwise (or when
    ``names`` is empty)."""
    wanted = tuple(dict.fromkeys(names))
    installed = installed_integrations()
    unknown = [n for n in wanted if n not in installed]
    if unknown or not wanted:
        raise UnknownIntegrationError(_unknown(unknown, installed))
    return wanted


def load_integration(name: str) -> Integration:
    """Import the installed integration ``name``."""
    installed = installed_integrations()
    try:
        entry = installed[name]
    except KeyError:
        raise UnknownIntegrationError(_unknown([name], installed)) from None
    return _load(entry)


def load_integrations(names: Sequence[str]) -> list[Integration]:
    """:func:`load_integration` for each name, without duplicates, in order."""
    return [load_integration(name) for name in check_names(names)]


def by_framework_name(framework_names: Iterable[str]) -> list[str]:
    """The short names of the installed integrations whose framework names are listed in
    ``framework_names`` (a Kueue Configuration's ``integrations.externalFrameworks``), in
    that list's order; entries of no installed integration are left to other managers.

    Imports every installed integration: one that fails to load raises
    :class:`IntegrationLoadError` rather than being skipped, since its kind would then be
    left to no one.
    """
    by_framework = {_load(entry).framework_name: name
                    for name, entry in installed_integrations().items()}
    listed = dict.fromkeys(framework_names)
    return [by_framework[f] for f in listed if f in by_framework]
