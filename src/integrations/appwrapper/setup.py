"""Wiring the AppWrapper integration into a manager and a webhook server.

Two ways to run it:

- standalone (no Kueue): :func:`setup` with ``kueue=None`` registers the AppWrapper
  framework controller and upstream's own webhook (user labels, default queue label,
  invariants, RBAC check). As upstream without Kueue, nothing suspends an AppWrapper:
  one created with ``suspend`` unset runs at once;
- as a Kueue *external framework* (``integrations.externalFrameworks:
  ["AppWrapper.v1beta2.workload.codeflare.dev"]`` in Kueue's configuration): pass
  ``kueue=ReconcilerOptions(...)``; the generic job reconciler then creates and follows
  each AppWrapper's Workload, and the webhook serves upstream's rules and Kueue's base
  webhook together (which suspends queued AppWrappers). :data:`CALLBACKS` /
  :func:`register` offer the same to an
  :class:`~jobframework.integrations.IntegrationManager`.

The framework controller (phases, component creation, fault tolerance) is
:func:`~.controller.setup_controllers`; see ``docs/appwrapper-lifecycle.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs

from jobframework.admittedstate import DEFAULT_PRIVILEGED_USERS, PrivilegedUsers
from jobframework.admittedworkload import AdmissionGuard
from jobframework.base_webhook import NoopWebhook, setup_base_webhook
from jobframework.constants import DEFAULT_FEATURES, QUEUE_LABEL, FeatureGates
from jobframework.defaults import QueueLookup
from jobframework.indexer import setup_workload_owner_index
from jobframework.integrations import (
    IntegrationCallbacks,
    IntegrationManager,
    register_integration_once,
)
from jobframework.reconciler import (
    GenericReconciler,
    ReconcilerOptions,
    new_generic_reconciler_factory,
    setup_integration,
)
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import Object
from jobframework.runtime.selectors import LabelSelector
from jobframework.webhook import WebhookBuilder, WebhookServer

from .api import APPWRAPPER_GVK
from .job import AppWrapperJob
from .webhook import AppWrapperKueueWebhook, AppWrapperWebhook

if TYPE_CHECKING:
    from .config import AppWrapperConfig
    from .controller import AppWrapperReconciler

__all__ = [
    "CALLBACKS",
    "FRAMEWORK_NAME",
    "KUEUE_CONTROLLER_NAME",
    "REPLACES_BUILTIN",
    "AppWrapperSetup",
    "probe_object",
    "register",
    "setup",
    "setup_indexes",
    "setup_kueue_webhook",
    "setup_webhook",
]

#: The name Kueue's configuration uses for this kind in ``integrations.externalFrameworks``.
FRAMEWORK_NAME: Final = f"{APPWRAPPER_GVK.kind}.{APPWRAPPER_GVK.version}.{APPWRAPPER_GVK.group}"
#: Kueue's own built-in framework for AppWrappers, which must be switched off where this
#: integration runs (``deploy`` drops it from ``integrations.frameworks``).
REPLACES_BUILTIN: Final = "workload.codeflare.dev/appwrapper"
#: The reporting controller of the Kueue-side events.
KUEUE_CONTROLLER_NAME: Final = "appwrapper-kueue-controller"


@attrs.frozen
class AppWrapperSetup:
    """What :func:`setup` registered."""

    appwrapper_reconciler: AppWrapperReconciler
    kueue_reconciler: GenericReconciler | None = None
    webhook_paths: tuple[str, ...] = ()


def _new_job_for(features: FeatureGates) -> Any:
    def new_job() -> AppWrapperJob:
        return AppWrapperJob(features=features)
    return new_job


def setup_webhook(server: WebhookServer, client: Any = None, *, default_queue_name: str = "",
                  user_rbac_admission_check: bool = True) -> list[str]:
    """Serve upstream's AppWrapper webhook alone (no Kueue); returns the paths."""
    webhook = AppWrapperWebhook(client, default_queue_name=default_queue_name,
                                user_rbac_admission_check=user_rbac_admission_check)
    return WebhookBuilder(server).for_(APPWRAPPER_GVK).with_defaulter(webhook) \
        .with_validator(webhook).complete()


def setup_kueue_webhook(
    server: WebhookServer,
    client: Any = None,
    *,
        integration_manager: IntegrationManager | None = None,
        manage_jobs_without_queue_name: bool = False,
        managed_jobs_namespace_selector: LabelSelector | None = None,
        queues: QueueLookup | None = None,
        features: FeatureGates = DEFAULT_FEATURES,
        noop_webhook: bool = False,
        default_local_queue_exist: Callable[[str], bool] | None = None,
    default_queue_name: str = "",
    user_rbac_admission_check: bool = True,
    privileged_users: PrivilegedUsers = DEFAULT_PRIVILEGED_USERS,
) -> list[str]:
    """Serve upstream's webhook and Kueue's base webhook as one (mutating and validating);
    with ``noop_webhook=True`` (a disabled framework) one that allows everything unchanged.
    Returns the paths.

    A :class:`~jobframework.integrations.SetupWebhook`: the keywords before
    ``default_queue_name`` are :class:`~jobframework.base_webhook.BaseWebhook`'s (integration
    manager, manageJobsWithoutQueueName, namespace selector, queues, features);
    ``default_queue_name`` and ``user_rbac_admission_check`` configure upstream's webhook,
    ``privileged_users`` who may change the ``podSetInfos`` (:mod:`.admission`).
    """
    if noop_webhook:
        return setup_base_webhook(server, APPWRAPPER_GVK, NoopWebhook())
    appwrapper = AppWrapperWebhook(client, default_queue_name=default_queue_name,
                                   user_rbac_admission_check=user_rbac_admission_check)
    return setup_base_webhook(server, APPWRAPPER_GVK, AppWrapperKueueWebhook(
        client, appwrapper=appwrapper, integration_manager=integration_manager,
        manage_jobs_without_queue_name=manage_jobs_without_queue_name,
        managed_jobs_namespace_selector=managed_jobs_namespace_selector, queues=queues,
        features=features, default_local_queue_exist=default_local_queue_exist,
        privileged_users=privileged_users))


def probe_object(namespace: str) -> Object:
    """A minimal queued AppWrapper wrapping one Pod; Kueue's mutating webhook must return
    it suspended."""
    return {
        "apiVersion": APPWRAPPER_GVK.api_version, "kind": APPWRAPPER_GVK.kind,
        "metadata": {"name": "kueue-jobframework-webhook-probe", "namespace": namespace,
                     "labels": {QUEUE_LABEL: "probe"}},
        "spec": {"components": [{"template": {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "probe"}]}}}]},
    }


async def setup_indexes(indexer: Any) -> None:
    """The Workload owner index for AppWrappers (the generic reconciler's lookup)."""
    await setup_workload_owner_index(indexer, APPWRAPPER_GVK)


#: The integration as an external framework registers it.
CALLBACKS: Final = IntegrationCallbacks(
    new_job=AppWrapperJob,
    new_reconciler=new_generic_reconciler_factory(AppWrapperJob),
    setup_webhook=setup_kueue_webhook,
    job_type=APPWRAPPER_GVK,
    setup_indexes=setup_indexes,
    # No MultiKueue adapter: Kueue's generic one for external frameworks mirrors
    # AppWrappers (multiKueue.externalFrameworks); Kueue never calls one of ours.
)


def register(manager: IntegrationManager | None = None) -> None:
    """Register the framework with ``manager`` (default: the process-wide one), once."""
    register_integration_once(FRAMEWORK_NAME, CALLBACKS, manager=manager)


async def setup(
    mgr: Manager,
    *,
    webhook_server: WebhookServer | None = None,
    kueue: ReconcilerOptions | None = None,
    config: AppWrapperConfig | None = None,
) -> AppWrapperSetup:
    """Register the AppWrapper controllers and the webhook; with ``kueue`` options also
    the generic reconciler that queues AppWrappers in Kueue.

    ``config`` is the operator configuration (defaults: upstream's;
    :func:`~.config.load_operator_config` reads upstream's ConfigMap document, as the
    manager's ``--appwrapper-config`` does): its ``default_queue_name`` and
    ``user_rbac_admission_check`` drive the webhook, the rest the controller. Raises
    :class:`~.config.ConfigError` for an invalid ``config``.
    """
    from .config import AppWrapperConfig
    from .controller import setup_controllers

    config = config or AppWrapperConfig()
    reconciler = await setup_controllers(mgr, config)
    kueue_reconciler: GenericReconciler | None = None
    paths: list[str] = []
    webhook_options: dict[str, Any] = {
        "default_queue_name": config.default_queue_name,
        "user_rbac_admission_check": config.user_rbac_admission_check}
    if kueue is not None:
        callbacks = attrs.evolve(CALLBACKS, new_reconciler=new_generic_reconciler_factory(
            _new_job_for(kueue.features)))
        kueue_reconciler, paths = await setup_integration(
            mgr, callbacks, kueue, reporting_controller=KUEUE_CONTROLLER_NAME,
            webhook_server=webhook_server,
            webhook_options={**webhook_options, "privileged_users": kueue.privileged_users})
        reconciler.admission_guard = AdmissionGuard(mgr.get_client(), APPWRAPPER_GVK,
                                                    features=kueue.features)
    elif webhook_server is not None:
        paths = setup_webhook(webhook_server, mgr.get_client(), **webhook_options)
    return AppWrapperSetup(reconciler, kueue_reconciler, tuple(paths))
