"""Wiring the DaemonJob integration into a manager and a webhook server.

Two ways to run it:

- standalone (no Kueue): :func:`setup` with ``kueue=None`` registers the DaemonJob
  controller and the plain defaulting and validating webhooks; a DaemonJob then starts
  as soon as it is created (unless ``spec.suspend`` is set);
- as a Kueue *external framework* (``integrations.externalFrameworks:
  ["DaemonJob.v1alpha1.api.practice.com"]`` in Kueue's configuration): pass
  ``kueue=ReconcilerOptions(...)``; the generic job reconciler then creates and follows
  each DaemonJob's Workload, and the webhook becomes Kueue's base webhook (which suspends
  queued DaemonJobs) with the DaemonJob defaulting and rules added. :data:`CALLBACKS` /
  :func:`register` offer the same to an
  :class:`~jobframework.integrations.IntegrationManager`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs

from jobframework.admittedstate import DEFAULT_PRIVILEGED_USERS, PrivilegedUsers
from jobframework.admittedworkload import AdmissionGuard
from jobframework.base_webhook import BaseWebhook, NoopWebhook, setup_base_webhook
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
from jobframework.validation import support_prebuilt_workload
from jobframework.webhook import (
    AdmissionRequest,
    ValidationError,
    Warnings,
    WebhookBuilder,
    WebhookServer,
)

from .admission import admitted_state_errors
from .api import DAEMONJOB_GVK
from .controller import DaemonJobReconciler, setup_controllers
from .job import DaemonJobJob
from .webhook import DaemonJobWebhook, default_daemonjob, eligible_node_errors

#: The name Kueue's configuration uses for this kind in ``integrations.externalFrameworks``.
FRAMEWORK_NAME: Final = f"{DAEMONJOB_GVK.kind}.{DAEMONJOB_GVK.version}.{DAEMONJOB_GVK.group}"
#: The reporting controller of the Kueue-side events.
KUEUE_CONTROLLER_NAME: Final = "daemonjob-kueue-controller"


@attrs.frozen
class DaemonJobSetup:
    """What :func:`setup` registered."""

    daemonjob_reconciler: DaemonJobReconciler
    kueue_reconciler: GenericReconciler | None = None
    webhook_paths: tuple[str, ...] = ()


def _new_job_for(features: FeatureGates) -> Callable[..., DaemonJobJob]:
    def new_job(obj: Object | None = None) -> DaemonJobJob:
        return DaemonJobJob(obj, features=features)
    return new_job


class DaemonJobKueueWebhook(BaseWebhook):
    """Kueue's base webhook for DaemonJobs: queue and suspend defaulting, ``spec.managedBy``
    defaulting to MultiKueue (with ``queues``; Kueue's ``ApplyDefaultForManagedBy``) and
    Kueue's rules, plus the DaemonJob defaulting and rules (through the adapter's custom
    validation, ``spec.managedBy`` immutability included) and the create-time
    eligible-node check (skipped for a DaemonJob run elsewhere); on update, only
    ``privileged_users`` may change the admission or the run's nodes."""

    def __init__(self, client: Any, *, features: FeatureGates = DEFAULT_FEATURES,
                 privileged_users: PrivilegedUsers = DEFAULT_PRIVILEGED_USERS,
                 **options: Any) -> None:
        super().__init__(_new_job_for(features), client, features=features, **options)
        self.privileged_users = privileged_users

    async def validate_update(self, old: Object, new: Object,
                              request: AdmissionRequest | None = None) -> Warnings:
        """Refuse a change to the admission or the run's nodes by a user who is not
        privileged (:mod:`.admission`), then check Kueue's and the DaemonJob's rules."""
        errs = admitted_state_errors(old, new, request, self.privileged_users)
        if errs:
            raise ValidationError(errs)
        return await super().validate_update(old, new, request)

    async def default(self, obj: Object, request: AdmissionRequest | None = None) -> None:
        """Kueue's defaults, then the restart policy."""
        await super().default(obj, request)
        default_daemonjob(obj)

    async def validate_create(
        self, obj: Object, request: AdmissionRequest | None = None
    ) -> Warnings:
        """Kueue's and the DaemonJob's create rules, then the eligible-node check."""
        await super().validate_create(obj, request)
        if self.client is not None:
            errs = await eligible_node_errors(self.client, obj)
            if errs:
                raise ValidationError(errs)
        return None


def setup_webhooks(server: WebhookServer, client: Any = None) -> list[str]:
    """Serve the standalone DaemonJob defaulter and validator; returns the paths."""
    webhook = DaemonJobWebhook(client)
    return WebhookBuilder(server).for_(DAEMONJOB_GVK).with_defaulter(webhook) \
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
        privileged_users: PrivilegedUsers = DEFAULT_PRIVILEGED_USERS,
) -> list[str]:
    """Serve the Kueue DaemonJob webhook (mutating and validating); with
    ``noop_webhook=True`` (a disabled framework) one that allows everything unchanged.
    Returns the paths.

    A :class:`~jobframework.integrations.SetupWebhook`: the keywords are
    :class:`~jobframework.base_webhook.BaseWebhook`'s, plus who may change the admission
    a DaemonJob carries (``privileged_users``).
    """
    if noop_webhook:
        return setup_base_webhook(server, DAEMONJOB_GVK, NoopWebhook())
    return setup_base_webhook(server, DAEMONJOB_GVK, DaemonJobKueueWebhook(
        client, integration_manager=integration_manager,
        manage_jobs_without_queue_name=manage_jobs_without_queue_name,
        managed_jobs_namespace_selector=managed_jobs_namespace_selector, queues=queues,
        features=features, default_local_queue_exist=default_local_queue_exist,
        privileged_users=privileged_users))


def probe_object(namespace: str) -> Object:
    """A minimal queued DaemonJob; Kueue's mutating webhook must return it suspended.

    It excludes nothing and selects every node, so a dry run passes the eligible-node
    check on any cluster with a Ready node.
    """
    return {
        "apiVersion": DAEMONJOB_GVK.api_version, "kind": DAEMONJOB_GVK.kind,
        "metadata": {"name": "kueue-jobframework-webhook-probe", "namespace": namespace,
                     "labels": {QUEUE_LABEL: "probe"}},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "probe"}]}}},
    }


async def setup_indexes(indexer: Any) -> None:
    """The Workload owner index for DaemonJobs (the generic reconciler's lookup)."""
    await setup_workload_owner_index(indexer, DAEMONJOB_GVK)


#: The integration as an external framework registers it.
CALLBACKS: Final = IntegrationCallbacks(
    new_job=DaemonJobJob,
    new_reconciler=new_generic_reconciler_factory(DaemonJobJob),
    setup_webhook=setup_kueue_webhook,
    job_type=DAEMONJOB_GVK,
    setup_indexes=setup_indexes,
)


def register(manager: IntegrationManager | None = None) -> None:
    """Register the framework with ``manager`` (default: the process-wide one), once."""
    # A MultiKueue worker's copy names its prebuilt Workload; the adapter runs with it.
    support_prebuilt_workload(DAEMONJOB_GVK)
    register_integration_once(FRAMEWORK_NAME, CALLBACKS, manager=manager)


async def setup(
    mgr: Manager,
    *,
    webhook_server: WebhookServer | None = None,
    kueue: ReconcilerOptions | None = None,
) -> DaemonJobSetup:
    """Register the index and the DaemonJob controller and the webhooks; with ``kueue``
    options also the generic reconciler that queues DaemonJobs in Kueue."""
    reconciler = await setup_controllers(mgr)
    kueue_reconciler: GenericReconciler | None = None
    paths: list[str] = []
    if kueue is not None:
        callbacks = attrs.evolve(CALLBACKS, new_reconciler=new_generic_reconciler_factory(
            _new_job_for(kueue.features)))
        kueue_reconciler, paths = await setup_integration(
            mgr, callbacks, kueue, reporting_controller=KUEUE_CONTROLLER_NAME,
            webhook_server=webhook_server,
            webhook_options={"privileged_users": kueue.privileged_users})
        reconciler.admission_guard = AdmissionGuard(mgr.get_client(), DAEMONJOB_GVK,
                                                    features=kueue.features)
    elif webhook_server is not None:
        paths = setup_webhooks(webhook_server, mgr.get_client())
    return DaemonJobSetup(reconciler, kueue_reconciler, tuple(paths))
