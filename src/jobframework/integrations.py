"""The integration registry: which job kinds a manager knows, enables and owns.

A port of Kueue's ``IntegrationManager`` (``integrationmanager.go``) and the parts of
``setup.go`` that do not need a running manager: registration with Kueue's validation
errors, enabling from a configuration (``integrations.frameworks`` and
``integrations.externalFrameworks`` in ``Kind.version.group`` form), lookups by name and
GVK, owner classification, and the ancestor walk ``find_ancestor_job_managed_by_kueue``.

There is no hidden global state: each :class:`IntegrationManager` is independent. The one
shared instance is :data:`DEFAULT_INTEGRATION_MANAGER`, which the module-level
:func:`register_integration` fills, for integrations that register themselves on import
(as Kueue's do in ``init()``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, runtime_checkable

import attrs

from . import constants as c
from .admittedstate import DEFAULT_PRIVILEGED_USERS, PrivilegedUsers
from .constants import DEFAULT_FEATURES, FeatureGates
from .field import go_quote
from .interface import GenericJob
from .metrics import JobMetrics, LocalQueueMetricsConfig
from .multikueue import MultiKueueAdapter
from .runtime.client import Client, Reader
from .runtime.clock import Clock, RealClock
from .runtime.objects import (
    GVK,
    Object,
    controller_of,
    labels_of,
    namespace_of,
    uid_of,
)
from .runtime.selectors import LabelSelector
from .webhook.server import WebhookServer

if TYPE_CHECKING:
    from typing_extensions import Unpack

REPLICA_SET_GVK = GVK("apps", "v1", "ReplicaSet")


# --- errors (messages as Kueue's) ----------------------------------------------------------


class IntegrationError(ValueError):
    """Base of the registry's errors."""


class DuplicateFrameworkNameError(IntegrationError):
    """``duplicate framework name "<name>"``."""


class MissingMandatoryFieldError(IntegrationError):
    """``mandatory field missing "<Field>" for "<name>"``."""


class FrameworkNameFormatError(IntegrationError):
    """``misformatted external framework name "<arg>"``."""


class IntegrationNotFoundError(IntegrationError):
    """``"<name>" integration not found``."""


class DependencyIntegrationNotEnabledError(IntegrationError):
    """``"<name>" integration not enabled "<dependency>"``."""


class CyclicOwnershipError(Exception):
    """``ErrCyclicOwnership``: the owner chain loops."""

    def __init__(self) -> None:
        super().__init__("cyclic ownership")


class WorkloadOwnerNotFoundError(Exception):
    """``ErrWorkloadOwnerNotFound`` joined with the read error (``errors.Join``)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"workload owner not found\n{cause}")
        self.cause = cause


class ManagedOwnersChainLimitReachedError(Exception):
    """``ErrManagedOwnersChainLimitReached``: more than 10 ancestors."""

    def __init__(self) -> None:
        super().__init__("managed owner chain limit reached")


# --- options ----------------------------------------------------------------------------------

# Kueue's ``Options`` live here, beside the callbacks that take them and the manager they
# name (one cycle of types: options -> integration manager -> callbacks -> options), so that
# no two modules import each other; :mod:`jobframework.options` re-exports them.


@attrs.frozen
class WorkloadRetentionPolicy:
    """``objectRetentionPolicies.workloads``: seconds after a deactivation by Kueue before
    the job is deleted (None: never)."""

    after_deactivated_by_kueue: float | None = None


def _frozen(values: Any) -> frozenset[str]:
    return frozenset(values or ())


@attrs.frozen(kw_only=True)
class ReconcilerOptions:
    """Kueue's ``Options`` for job reconcilers and webhooks, in Python style."""

    manage_jobs_without_queue_name: bool = False
    #: Only namespaces whose labels match are managed (None: every namespace).
    managed_jobs_namespace_selector: LabelSelector | None = None
    #: Write the ``PodsReady`` condition (``waitForPodsReady`` configured).
    wait_for_pods_ready: bool = False
    kube_server_version: str | None = None
    #: Per-integration options keyed ``"<group>/<version>, Kind=<Kind>"``.
    integration_options: Mapping[str, Any] = attrs.field(factory=dict)
    enabled_frameworks: frozenset[str] | None = None
    enabled_external_frameworks: frozenset[str] | None = None
    manager_name: str = c.KUEUE_NAME
    #: Job labels copied to new Workloads.
    label_keys_to_copy: frozenset[str] = attrs.field(default=frozenset(), converter=_frozen)
    #: Job annotations copied to new Workloads (with the ``CustomMetricLabels`` gate).
    annotations_to_copy: frozenset[str] = attrs.field(default=frozenset(), converter=_frozen)
    clock: Clock = attrs.field(factory=RealClock)
    workload_retention_policy: WorkloadRetentionPolicy | None = None
    integration_manager: IntegrationManager | None = None
    features: FeatureGates = DEFAULT_FEATURES
    #: Queue lookups for managedBy defaulting and default LocalQueues (webhooks).
    queues: Any = None
    #: Register a no-op webhook (for disabled integrations).
    noop_webhook: bool = False
    #: Kueue's job metrics (None: the manager's registry once set up with a manager, else
    #: a registry of the reconciler's own).
    metrics: JobMetrics | None = None
    #: ``metrics.localQueueMetrics`` for the metrics the reconciler creates (None: every
    #: LocalQueue); ignored when ``metrics`` is given.
    local_queue_metrics: LocalQueueMetricsConfig | None = None
    #: Who may change the admission stored on a job: the update rule of the webhooks of
    #: kinds that keep it on the object (JobFlow, DaemonJob, AppWrapper); see
    #: :mod:`jobframework.admittedstate`. Not one of Kueue's options.
    privileged_users: PrivilegedUsers = DEFAULT_PRIVILEGED_USERS


class ReconcilerOptionOverrides(TypedDict, total=False):
    """The keyword overrides :func:`process_options` and the factories accept: exactly
    :class:`ReconcilerOptions`' fields, so a type checker catches a misspelt option."""

    manage_jobs_without_queue_name: bool
    managed_jobs_namespace_selector: LabelSelector | None
    wait_for_pods_ready: bool
    kube_server_version: str | None
    integration_options: Mapping[str, Any]
    enabled_frameworks: frozenset[str] | None
    enabled_external_frameworks: frozenset[str] | None
    manager_name: str
    label_keys_to_copy: frozenset[str]
    annotations_to_copy: frozenset[str]
    clock: Clock
    workload_retention_policy: WorkloadRetentionPolicy | None
    integration_manager: IntegrationManager | None
    features: FeatureGates
    queues: Any
    noop_webhook: bool
    metrics: JobMetrics | None
    local_queue_metrics: LocalQueueMetricsConfig | None
    privileged_users: PrivilegedUsers


# --- callbacks --------------------------------------------------------------------------------
#
# The callback types are Protocols carrying exactly the parameters the framework passes, so a
# type checker rejects a callback that would fail when it is called (a misspelt keyword, a
# missing parameter). The call sites: ``setup_controllers`` and ``setup_integration`` in
# :mod:`jobframework.reconciler`, :meth:`IntegrationManager.configure` and
# :meth:`IntegrationManager.setup_indexes`.


class EventRecorderLike(Protocol):
    """What the reconciler records events with (the runtime's ``EventRecorder`` is one)."""

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Record an event about ``obj``."""


@runtime_checkable
class JobReconcilerInterface(Protocol):
    """What a reconciler factory returns: a reconciler that can wire itself to a manager."""

    async def reconcile(self, request: Any) -> Any:
        """Reconcile one object key."""

    def setup_with_manager(self, mgr: Any) -> None:
        """Register the controller (watches, indexes) with the manager."""


class ReconcilerFactory(Protocol):
    """``ReconcilerFactory`` (``IntegrationCallbacks.new_reconciler`` and each of
    ``new_additional_reconcilers``): ``(client, indexer, recorder, options=None,
    **overrides) -> JobReconcilerInterface``; the overrides are :class:`ReconcilerOptions`
    fields (:class:`ReconcilerOptionOverrides`).

    Called by ``setup_controllers`` once per enabled framework whose API is served (or, for
    a framework whose API appears later, when it appears), with the manager's client, its
    cache as the indexer, an event recorder reporting as
    ``<framework>-<manager name>-controller`` and ``options=`` the manager's
    :class:`ReconcilerOptions`; ``setup_integration`` passes the same four positionally.
    It must return the reconciler without wiring it: the caller calls its
    ``setup_with_manager(mgr)``. :func:`~jobframework.reconciler.new_generic_reconciler_factory`
    builds one.
    """

    def __call__(self, client: Client, indexer: Any, recorder: EventRecorderLike,
                 options: ReconcilerOptions | None = None,
                 **overrides: Unpack[ReconcilerOptionOverrides]) -> JobReconcilerInterface:
        ...


class SetupWebhook(Protocol):
    """``SetupWebhook`` (``IntegrationCallbacks.setup_webhook``): ``(server, client, *,
    integration_manager=, manage_jobs_without_queue_name=, managed_jobs_namespace_selector=,
    queues=, features=, noop_webhook=) -> paths``.

    Registers the framework's admission webhooks on ``server`` and returns the paths it
    registered. Called by ``setup_controllers`` once per registered framework with a
    webhook server: for an enabled framework with the manager's queue settings (every
    keyword but ``noop_webhook``), before its reconciler when its API is not served yet;
    for a disabled one with ``noop_webhook=True`` only, when it must serve a webhook that
    allows everything unchanged. ``setup_integration`` passes the same keywords plus its
    ``webhook_options`` (integration-specific keywords, such as AppWrapper's
    ``default_queue_name``). ``server`` and ``client`` are passed positionally; every
    keyword may be absent, so each needs a default.
    """

    def __call__(self, server: WebhookServer, client: Any, /, *,
                 integration_manager: IntegrationManager | None = None,
                 manage_jobs_without_queue_name: bool = False,
                 managed_jobs_namespace_selector: LabelSelector | None = None,
                 queues: Any = None,
                 features: FeatureGates = DEFAULT_FEATURES,
                 noop_webhook: bool = False) -> list[str]:
        ...


class SetupIndexes(Protocol):
    """``SetupIndexes`` (``IntegrationCallbacks.setup_indexes``): ``(indexer) -> None``,
    or an awaitable the caller awaits.

    Adds the framework's field indexes (typically the Workload owner index of its kind) to
    ``indexer``, the manager's cache, passed positionally. Called before any reconciler is
    built: by ``setup_controllers`` (through :meth:`IntegrationManager.setup_indexes`) for
    every enabled and implicitly enabled framework, and by ``setup_integration``. An
    exception fails the setup (``jobFrameworkName "<name>": <err>``).
    """

    def __call__(self, indexer: Any, /) -> Awaitable[None] | None:
        ...


class CanSupportIntegration(Protocol):
    """``CanSupportIntegration`` (``IntegrationCallbacks.can_support_integration``):
    ``(**options) -> bool``.

    Called by :meth:`IntegrationManager.configure` for each enabled framework with the
    keyword options given to ``configure`` (:class:`ReconcilerOptionOverrides`; none from
    ``setup_controllers``). False or an exception fails the configuration
    (``failed to configure reconcilers: ...``).
    """

    def __call__(self, **options: Unpack[ReconcilerOptionOverrides]) -> bool:
        ...


def _factories(values: Iterable[ReconcilerFactory] | None) -> tuple[ReconcilerFactory, ...]:
    return tuple(values or ())


def _names(values: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(values or ())


@attrs.frozen(kw_only=True)
class IntegrationCallbacks:
    """How a framework plugs in (Kueue's ``IntegrationCallbacks``).

    ``new_reconciler``, ``setup_webhook`` and ``job_type`` are mandatory. The first two are
    required in the type (a type checker rejects leaving them out or passing None); at run
    time both default to None and :meth:`IntegrationManager.register_integration` rejects a
    None in any of the three with Kueue's ``mandatory field missing`` error, as Kueue does.
    ``job_type`` is the GVK of the object used for owner lookups. The framework's GVK comes
    from ``new_job().gvk()``, else ``gvk``, else ``job_type``.

    The callbacks (see each Protocol for when it is called and with what):

    - ``new_reconciler``: a :class:`ReconcilerFactory`, building the framework's
      reconciler; ``new_additional_reconcilers``: more of them, built and wired the same
      way after it;
    - ``setup_webhook``: a :class:`SetupWebhook`, registering its webhooks and returning
      their paths;
    - ``setup_indexes``: a :class:`SetupIndexes`, adding its cache indexes;
    - ``can_support_integration``: a :class:`CanSupportIntegration`, whether the
      framework can be enabled with the given options;
    - ``new_job``: ``() -> GenericJob``, an empty job adapter, called whenever the
      framework's kind is needed (:meth:`get_gvk`).
    """

    new_reconciler: ReconcilerFactory
    setup_webhook: SetupWebhook
    job_type: GVK | None = None
    new_job: Callable[[], GenericJob] | None = None
    gvk: GVK | None = None
    new_additional_reconcilers: tuple[ReconcilerFactory, ...] = attrs.field(
        default=(), converter=_factories)
    setup_indexes: SetupIndexes | None = None
    can_support_integration: CanSupportIntegration | None = None
    multikueue_adapter: MultiKueueAdapter | None = None
    #: Deprecated in Kueue: names that must be enabled too.
    dependency_list: tuple[str, ...] = attrs.field(default=(), converter=_names)
    implicitly_enabled_framework_names: tuple[str, ...] = attrs.field(
        default=(), converter=_names)

    def get_gvk(self) -> GVK | None:
        """The framework's job kind."""
        if self.new_job is not None:
            return self.new_job().gvk()
        return self.gvk if self.gvk is not None else self.job_type

    def matches_owner(self, owner_ref: Mapping[str, Any]) -> bool:
        """Whether an owner reference points at this framework's kind."""
        gvk = self.get_gvk()
        return gvk is not None and owner_reference_matches_gvk(owner_ref, gvk)


# Required in the type only: at run time leaving them out still gives None, so that
# IntegrationManager.register_integration reports Kueue's "mandatory field missing" error
# for an untyped caller, as before they were typed.
_init_defaults = IntegrationCallbacks.__init__.__kwdefaults__ or {}
_init_defaults.update(new_reconciler=None, setup_webhook=None)
IntegrationCallbacks.__init__.__kwdefaults__ = _init_defaults
del _init_defaults


def owner_reference_matches_gvk(owner_ref: Mapping[str, Any], gvk: GVK) -> bool:
    """Owner reference ``apiVersion``/``kind`` equal the GVK's."""
    return owner_ref.get("apiVersion") == gvk.api_version and owner_ref.get("kind") == gvk.kind


def parse_kind_arg(arg: str) -> GVK | None:
    """apimachinery's ``schema.ParseKindArg`` for ``Kind.version.group``; None if unparsable."""
    if arg.count(".") < 2:
        return None
    kind, version, group = arg.split(".", 2)
    return GVK(group, version, kind)


# --- the manager ------------------------------------------------------------------------------


class IntegrationManager:
    """The integrations configured for one manager (Kueue's ``IntegrationManager``)."""

    def __init__(self) -> None:
        self._names: list[str] = []
        self._integrations: dict[str, IntegrationCallbacks] = {}
        self._enabled: set[str] = set()
        self._external: dict[str, GVK] = {}
        self._implicitly_enabled: set[str] = set()
        self._gvk_to_name: dict[GVK, str] = {}

    # registration

    def register_integration(self, name: str, callbacks: IntegrationCallbacks) -> None:
        """Register a framework; raises :class:`IntegrationError` like Kueue's ``register``."""
        q = go_quote(name)
        if name in self._integrations:
            raise DuplicateFrameworkNameError(f"duplicate framework name {q}")
        # The type forbids None; untyped callers may still pass it.
        if callbacks.new_reconciler is None:
            raise MissingMandatoryFieldError(f'mandatory field missing "NewReconciler" for {q}')
        if callbacks.setup_webhook is None:
            raise MissingMandatoryFieldError(f'mandatory field missing "SetupWebhook" for {q}')
        if callbacks.job_type is None:
            # Kueue's message names the field "WebhookType".
            raise MissingMandatoryFieldError(f'mandatory field missing "WebhookType" for {q}')
        self._integrations[name] = callbacks
        self._names.append(name)
        gvk = callbacks.get_gvk()
        if gvk is not None:
            self._gvk_to_name[gvk] = name

    def register_external_job_type(self, kind_arg: str) -> None:
        """Register an externally managed kind given as ``Kind.version.group``."""
        gvk = parse_kind_arg(kind_arg)
        if gvk is None:
            raise FrameworkNameFormatError(
                f"misformatted external framework name {go_quote(kind_arg)}")
        self._external[kind_arg] = gvk

    def enable_integration(self, name: str) -> None:
        """Mark a framework enabled."""
        self._enabled.add(name)

    # lookups

    def for_each_integration(self, f: Callable[[str, IntegrationCallbacks], None]) -> None:
        """Call ``f`` in registration order; the first exception stops the loop."""
        for name in list(self._names):
            f(name, self._integrations[name])

    def get_integration(self, name: str) -> IntegrationCallbacks | None:
        """The callbacks of a framework, or None."""
        return self._integrations.get(name)

    def get_integration_by_gvk(self, gvk: GVK) -> IntegrationCallbacks | None:
        """The first framework, in name order, whose kind is ``gvk``."""
        for name in self.get_integrations_list():
            cb = self._integrations[name]
            if cb.get_gvk() == gvk:
                return cb
        return None

    def get_integrations_list(self) -> list[str]:
        """Registered framework names, sorted."""
        return sorted(self._names)

    def enabled_integrations(self) -> frozenset[str]:
        """Names enabled so far."""
        return frozenset(self._enabled)

    def external_job_types(self) -> dict[str, GVK]:
        """Registered external kinds by their ``Kind.version.group`` name."""
        return dict(self._external)

    def implicitly_enabled_integrations(self) -> frozenset[str]:
        """Frameworks enabled only because another one needs them."""
        return frozenset(self._implicitly_enabled)

    def has_implicitly_enabled_framework(self, gvk: GVK) -> bool:
        """``gvk`` belongs to an implicitly enabled framework."""
        name = self._gvk_to_name.get(gvk)
        return name is not None and name in self._implicitly_enabled

    def is_known_owner(self, owner_ref: Mapping[str, Any]) -> bool:
        """Any registered (even disabled) or external kind, or ``apps/v1 ReplicaSet``."""
        if any(cb.matches_owner(owner_ref) for cb in self._integrations.values()):
            return True
        if any(owner_reference_matches_gvk(owner_ref, g) for g in self._external.values()):
            return True
        # ReplicaSet sits between Pods and Deployments; users need not list it.
        return owner_reference_matches_gvk(owner_ref, REPLICA_SET_GVK)

    def get_job_type_for_owner(self, owner_ref: Mapping[str, Any]) -> GVK | None:
        """The lookup kind for an *enabled* or external owner, else None."""
        for name in sorted(self._enabled):
            cb = self._integrations.get(name)
            if cb is not None and cb.matches_owner(owner_ref):
                return cb.job_type
        for gvk in self._external.values():
            if owner_reference_matches_gvk(owner_ref, gvk):
                return gvk
        return None

    def get_empty_owner_object(self, owner_ref: Mapping[str, Any]) -> GVK | None:
        """Alias of :meth:`get_job_type_for_owner` (Go returns an empty typed object)."""
        return self.get_job_type_for_owner(owner_ref)

    def is_owner_managed_by_kueue_for_object(self, obj: Mapping[str, Any]) -> bool:
        """The object's controller owner is an enabled integration or an external kind."""
        owner = controller_of(obj)
        return owner is not None and self.get_job_type_for_owner(owner) is not None

    def get_multikueue_adapters(self, enabled: Iterable[str]) -> dict[str, MultiKueueAdapter]:
        """Adapters of the given enabled frameworks, keyed by ``str(gvk)``."""
        wanted = set(enabled)
        out: dict[str, MultiKueueAdapter] = {}
        for name in self._names:
            adapter = self._integrations[name].multikueue_adapter
            if adapter is None or name not in wanted:
                continue
            key = str(adapter.gvk())
            if key in out:
                raise IntegrationError(f"multiple adapters for GVK: {go_quote(key)}")
            out[key] = adapter
        return out

    # enabling from configuration

    def collect_implicitly_enabled_integrations(self, enabled: Iterable[str]) -> set[str]:
        """One level of ``implicitly_enabled_framework_names`` not already enabled."""
        enabled_set = set(enabled)
        result: set[str] = set()
        for name in enabled_set:
            cb = self._integrations.get(name)
            if cb is None:
                continue
            result.update(n for n in cb.implicitly_enabled_framework_names
                          if n not in enabled_set)
        return result

    def check_enabled_list_dependencies(self, enabled: Iterable[str]) -> None:
        """Every enabled name is registered and its ``dependency_list`` is enabled too."""
        enabled_set = set(enabled)
        for name in sorted(enabled_set):
            cb = self._integrations.get(name)
            if cb is None:
                raise IntegrationNotFoundError(f"{go_quote(name)} integration not found")
            for dep in cb.dependency_list:
                if dep not in enabled_set:
                    raise DependencyIntegrationNotEnabledError(
                        f"{go_quote(name)} integration not enabled {go_quote(dep)}")

    def configure(
        self,
        enabled_frameworks: Iterable[str] = (c.DEFAULT_FRAMEWORK,),
        external_frameworks: Iterable[str] = (),
        *,
        mark_enabled: bool = True,
        **options: Any,
    ) -> frozenset[str]:
        """Enable frameworks from a configuration, as ``SetupControllers`` decides them.

        Adds implicitly enabled frameworks, checks dependencies (``check enabled frameworks
        list: ...``), registers external kinds, asks each enabled framework's
        ``can_support_integration(**options)`` and marks it enabled. Building reconcilers
        and webhooks is left to the manager. Returns all enabled names.

        ``options`` are Kueue's options by :class:`ReconcilerOptions` field name (the keys
        of :class:`ReconcilerOptionOverrides`, which :class:`CanSupportIntegration` takes);
        they are not typed as such here because ``enabled_frameworks`` is both a parameter
        and an option.

        With ``mark_enabled=False`` nothing is marked: the caller marks each framework
        once its controller is set up, as Kueue does (a framework whose API appears
        later, see ``WaitForAPI``, is not enabled until then).
        """
        requested = set(enabled_frameworks)
        implicit = self.collect_implicitly_enabled_integrations(requested)
        self._implicitly_enabled = set(implicit)
        all_enabled = requested | implicit
        try:
            self.check_enabled_list_dependencies(all_enabled)
        except IntegrationError as err:
            raise type(err)(f"check enabled frameworks list: {err}") from err
        for kind_arg in external_frameworks:
            self.register_external_job_type(kind_arg)
        for name in self._names:
            if name not in all_enabled:
                continue
            cb = self._integrations[name]
            if cb.can_support_integration is not None:
                try:
                    ok = cb.can_support_integration(**options)
                except Exception as err:
                    raise IntegrationError(f"failed to configure reconcilers: {err}") from err
                if not ok:
                    # Go wraps a nil error here, which prints as %!w(<nil>).
                    raise IntegrationError("failed to configure reconcilers: %!w(<nil>)")
            if mark_enabled:
                self.enable_integration(name)
        return frozenset(all_enabled)

    async def setup_indexes(self, indexer: Any, enabled_frameworks: Iterable[str]) -> None:
        """Call ``setup_indexes(indexer)`` of every enabled (and implicitly enabled) framework."""
        requested = set(enabled_frameworks)
        all_enabled = requested | self.collect_implicitly_enabled_integrations(requested)
        for name in list(self._names):
            cb = self._integrations[name]
            if name not in all_enabled or cb.setup_indexes is None:
                continue
            try:
                result = cb.setup_indexes(indexer)
                if result is not None:
                    await result
            except Exception as err:
                raise IntegrationError(f"jobFrameworkName {go_quote(name)}: {err}") from err

    # ancestors

    async def find_ancestor_job_managed_by_kueue(
        self, reader: Reader, obj: Object, manage_jobs_without_queue_name: bool
    ) -> Object | None:
        """The top-most Kueue-managed ancestor of ``obj`` (``FindAncestorJobManagedByKueue``).

        Walks controller owner references while they point at known kinds, in the job's
        namespace. Raises :class:`CyclicOwnershipError`, :class:`WorkloadOwnerNotFoundError`
        (an owner could not be read) or :class:`ManagedOwnersChainLimitReachedError`.
        """
        seen: set[str] = set()
        current = obj
        namespace = namespace_of(obj)
        top: Object | None = None
        while True:
            uid = uid_of(current)
            if uid in seen:
                raise CyclicOwnershipError()
            seen.add(uid)
            owner = controller_of(current)
            if owner is None or not self.is_known_owner(owner):
                return top
            job_type = self.get_empty_owner_object(owner)
            managed = job_type is not None
            gvk = job_type or GVK.from_api_version(str(owner.get("apiVersion", "")),
                                                   str(owner.get("kind", "")))
            try:
                parent = await reader.get(gvk, str(owner.get("name", "")), namespace=namespace)
            except Exception as err:
                raise WorkloadOwnerNotFoundError(err) from err
            if uid_of(parent) != owner.get("uid", ""):
                # A stale or forged reference: stop here.
                return top
            if managed and (manage_jobs_without_queue_name
                            or labels_of(parent).get(c.QUEUE_LABEL, "")):
                top = parent
            current = parent
            if len(seen) > c.MANAGED_OWNERS_CHAIN_LIMIT:
                raise ManagedOwnersChainLimitReachedError()


#: The process-wide manager that :func:`register_integration` fills (Kueue's global one).
DEFAULT_INTEGRATION_MANAGER = IntegrationManager()


def register_integration(
    name: str,
    callbacks: IntegrationCallbacks,
    *,
    manager: IntegrationManager | None = None,
) -> None:
    """Register a framework with ``manager`` (default: :data:`DEFAULT_INTEGRATION_MANAGER`)."""
    (manager or DEFAULT_INTEGRATION_MANAGER).register_integration(name, callbacks)


def register_integration_once(
    name: str,
    callbacks: IntegrationCallbacks,
    *,
    manager: IntegrationManager | None = None,
) -> None:
    """Register a framework with ``manager`` (default: :data:`DEFAULT_INTEGRATION_MANAGER`)
    unless one is already registered under ``name``: what an integration's own
    ``register()`` does, so calling it twice is harmless."""
    target = manager or DEFAULT_INTEGRATION_MANAGER
    if target.get_integration(name) is None:
        target.register_integration(name, callbacks)
