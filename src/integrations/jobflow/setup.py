"""Wiring the JobFlow integration into a manager and a webhook server.

Two ways to run it:

- standalone (no Kueue): :func:`setup` with ``kueue=None`` registers the DAG and
  JobTemplate controllers and the plain validating webhooks;
- as a Kueue *external framework* (``integrations.externalFrameworks:
  ["JobFlow.v1alpha1.api.practice.com"]`` in Kueue's configuration): pass
  ``kueue=ReconcilerOptions(...)``; the generic job reconciler then creates and follows
  the JobFlow's Workload, and the JobFlow webhook becomes Kueue's base webhook (which
  defaults ``spec.suspend`` for queued JobFlows) with the JobFlow rules as its custom
  validation. :data:`CALLBACKS` / :func:`register` offer the same to an
  :class:`~jobframework.integrations.IntegrationManager`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from jobframework.webhook import AdmissionRequest, ValidationError, WebhookBuilder, WebhookServer

from .admission import admitted_state_errors
from .api import JOBFLOW_GVK, JOBTEMPLATE_GVK
from .controller import JobFlowReconciler, JobTemplateReconciler, setup_controllers
from .job import JobFlowJob
from .webhook import JobFlowWebhook, JobTemplateWebhook

#: The name Kueue's configuration uses for this kind in ``integrations.externalFrameworks``.
FRAMEWORK_NAME: Final = f"{JOBFLOW_GVK.kind}.{JOBFLOW_GVK.version}.{JOBFLOW_GVK.group}"
#: The reporting controller of the Kueue-side events.
KUEUE_CONTROLLER_NAME: Final = "jobflow-kueue-controller"


@attrs.frozen
class JobFlowSetup:
    """What :func:`setup` registered."""

    jobflow_reconciler: JobFlowReconciler
    jobtemplate_reconciler: JobTemplateReconciler
    kueue_reconciler: GenericReconciler | None = None
    webhook_paths: tuple[str, ...] = ()


def _new_job_for(features: FeatureGates) -> Callable[..., JobFlowJob]:
    def new_job(obj: Object | None = None) -> JobFlowJob:
        return JobFlowJob(obj, features=features)
    return new_job


class JobFlowKueueWebhook(BaseWebhook):
    """Kueue's base webhook for JobFlows: queue and suspend defaulting, ``spec.managedBy``
    defaulting to MultiKueue (with ``queues``; Kueue's ``ApplyDefaultForManagedBy``),
    Kueue's rules and the JobFlow rules (through ``JobFlowJob``'s custom validation,
    ``spec.managedBy`` immutability included); on update, only ``privileged_users`` may
    change the admission the JobFlow carries (:mod:`.admission`)."""

    def __init__(self, client: Any, *, features: FeatureGates = DEFAULT_FEATURES,
                 privileged_users: PrivilegedUsers = DEFAULT_PRIVILEGED_USERS,
                 **options: Any) -> None:
        super().__init__(_new_job_for(features), client, features=features, **options)
        self.privileged_users = privileged_users

    async def validate_update(self, old: Object, new: Object,
                              request: AdmissionRequest | None = None) -> Sequence[str] | None:
        """Refuse a change to the admission by a user who is not privileged, then check
        Kueue's and the JobFlow's rules."""
        errs = admitted_state_errors(old, new, request, self.privileged_users)
        if errs:
            raise ValidationError(errs)
        return await super().validate_update(old, new, request)


def _jobtemplate_webhook(server: WebhookServer) -> list[str]:
    return WebhookBuilder(server).for_(JOBTEMPLATE_GVK) \
        .with_validator(JobTemplateWebhook()).complete()


def setup_webhooks(server: WebhookServer) -> list[str]:
    """Serve the standalone JobFlow and JobTemplate validators; returns the paths."""
    paths = WebhookBuilder(server).for_(JOBFLOW_GVK).with_validator(JobFlowWebhook()).complete()
    return paths + _jobtemplate_webhook(server)


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
    """Serve the Kueue JobFlow webhook (mutating and validating) and the JobTemplate one;
    with ``noop_webhook=True`` (a disabled framework) a JobFlow webhook that allows
    everything unchanged, and no JobTemplate one. Returns the paths.

    A :class:`~jobframework.integrations.SetupWebhook`: the keywords are
    :class:`~jobframework.base_webhook.BaseWebhook`'s, plus who may change the admission
    a JobFlow carries (``privileged_users``).
    """
    if noop_webhook:
        return setup_base_webhook(server, JOBFLOW_GVK, NoopWebhook())
    paths = setup_base_webhook(server, JOBFLOW_GVK, JobFlowKueueWebhook(
        client, integration_manager=integration_manager,
        manage_jobs_without_queue_name=manage_jobs_without_queue_name,
        managed_jobs_namespace_selector=managed_jobs_namespace_selector, queues=queues,
        features=features, default_local_queue_exist=default_local_queue_exist,
        privileged_users=privileged_users))
    return paths + _jobtemplate_webhook(server)


def probe_object(namespace: str) -> Object:
    """A minimal queued JobFlow; Kueue's mutating webhook must return it suspended."""
    return {
        "apiVersion": JOBFLOW_GVK.api_version, "kind": JOBFLOW_GVK.kind,
        "metadata": {"name": "kueue-jobframework-webhook-probe", "namespace": namespace,
                     "labels": {QUEUE_LABEL: "probe"}},
        "spec": {"flows": [{"name": "probe", "jobTemplate": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "probe"}]}}}}]},
    }


async def setup_indexes(indexer: Any) -> None:
    """The Workload owner index for JobFlows (the generic reconciler's lookup)."""
    await setup_workload_owner_index(indexer, JOBFLOW_GVK)


#: The integration as an external framework registers it.
CALLBACKS: Final = IntegrationCallbacks(
    new_job=JobFlowJob,
    new_reconciler=new_generic_reconciler_factory(JobFlowJob),
    setup_webhook=setup_kueue_webhook,
    job_type=JOBFLOW_GVK,
    setup_indexes=setup_indexes,
)


def register(manager: IntegrationManager | None = None) -> None:
    """Register the framework with ``manager`` (default: the process-wide one), once."""
    # A MultiKueue worker's copy names its prebuilt Workload; the adapter runs with it.
    support_prebuilt_workload(JOBFLOW_GVK)
    register_integration_once(FRAMEWORK_NAME, CALLBACKS, manager=manager)


async def setup(
    mgr: Manager,
    *,
    webhook_server: WebhookServer | None = None,
    kueue: ReconcilerOptions | None = None,
) -> JobFlowSetup:
    """Register the indexes, the DAG and JobTemplate controllers and the webhooks; with
    ``kueue`` options also the generic reconciler that queues JobFlows in Kueue."""
    flows, templates = await setup_controllers(mgr)
    kueue_reconciler: GenericReconciler | None = None
    paths: list[str] = []
    if kueue is not None:
        callbacks = attrs.evolve(CALLBACKS, new_reconciler=new_generic_reconciler_factory(
            _new_job_for(kueue.features)))
        kueue_reconciler, paths = await setup_integration(
            mgr, callbacks, kueue, reporting_controller=KUEUE_CONTROLLER_NAME,
            webhook_server=webhook_server,
            webhook_options={"privileged_users": kueue.privileged_users})
        flows.admission_guard = AdmissionGuard(mgr.get_client(), JOBFLOW_GVK,
                                               features=kueue.features)
    elif webhook_server is not None:
        paths = setup_webhooks(webhook_server)
    return JobFlowSetup(flows, templates, kueue_reconciler, tuple(paths))
