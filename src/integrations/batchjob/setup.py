"""Registration of the batch/v1 Job integration as framework ``batch/job``.

:data:`CALLBACKS` holds what Kueue's ``init()`` registers: the job adapter, the generic
reconciler factory (plus a watch that re-reconciles child Jobs when their parent's
Workload changes), the webhook setup, the indexes and the MultiKueue adapter
(:class:`~.multikueue.BatchJobMultiKueueAdapter`). Call :func:`register` to add it to
an :class:`~jobframework.integrations.IntegrationManager` (the process-wide one by
default).

It is also a reference integration of our external-framework manager
(``python -m integrations run --integrations batchjob``): beside a Kueue whose own
``batch/job`` integration is off and whose ``integrations.externalFrameworks`` lists
``Job.v1.batch``, :func:`setup` runs the Job reconciler and webhook in our process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs

from jobframework.base_webhook import NoopWebhook, setup_base_webhook
from jobframework.constants import DEFAULT_FEATURES, QUEUE_LABEL, FeatureGates
from jobframework.defaults import QueueLookup
from jobframework.indexer import (
    OWNER_REFERENCE_UID,
    list_by_index,
    owner_uid_index_func,
    setup_owner_uid_index,
    setup_workload_owner_index,
)
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
from jobframework.runtime.builder import ControllerBuilder
from jobframework.runtime.client import Client
from jobframework.runtime.handler import EnqueueRequestsFromMapFunc, Queue
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import Object, controller_of, name_of, namespace_of
from jobframework.runtime.reconcile import Request
from jobframework.runtime.selectors import LabelSelector
from jobframework.runtime.source import DeleteEvent, GenericEvent, UpdateEvent
from jobframework.webhook.manifests import WebhookResource
from jobframework.webhook.server import WebhookServer
from jobframework.workload import WORKLOAD_GVK

from .job import FRAMEWORK_NAME, JOB_GVK, BatchJob
from .multikueue import BatchJobMultiKueueAdapter
from .webhook import BatchJobWebhook


class _OnWorkloadCreateOrUpdate(EnqueueRequestsFromMapFunc):
    """Kueue's ``parentWorkloadHandler``: maps a created Workload and the new state of an
    updated one; deletes and generic events are ignored."""

    def update(self, event: UpdateEvent, queue: Queue) -> None:
        """The requests of the new object only."""
        self._map([event.object_new], queue)

    def delete(self, event: DeleteEvent, queue: Queue) -> None:
        """Ignored."""

    def generic(self, event: GenericEvent, queue: Queue) -> None:
        """Ignored."""


def watch_child_jobs(builder: ControllerBuilder, client: Client) -> ControllerBuilder:
    """Reconcile the Jobs owned by the object that owns a changed Workload (a parent
    JobSet, say), so children are suspended or released as the parent's admission goes."""

    async def jobs_owned_by(namespace: str, uid: str) -> list[Request]:
        jobs = await list_by_index(client, JOB_GVK, namespace, OWNER_REFERENCE_UID, uid,
                                   owner_uid_index_func)
        return [Request.of(namespace_of(j), name_of(j)) for j in jobs]

    def children(wl: Object) -> Awaitable[list[Request]] | list[Request]:
        owner = controller_of(wl)
        if owner is None or not owner.get("uid"):
            return []  # no cache read, no task
        return jobs_owned_by(namespace_of(wl), str(owner["uid"]))

    return builder.watches(WORKLOAD_GVK, _OnWorkloadCreateOrUpdate(children, read_only=True))


async def setup_indexes(indexer: Any) -> None:
    """Owner-UID index on Jobs and the Workload owner index for Jobs."""
    await setup_owner_uid_index(indexer, JOB_GVK)
    await setup_workload_owner_index(indexer, JOB_GVK)


def setup_webhook(
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
) -> list[str]:
    """Serve the Job webhook (a no-op one with ``noop_webhook=True``); returns the paths.

    A :class:`~jobframework.integrations.SetupWebhook`: the keywords are
    :class:`~jobframework.base_webhook.BaseWebhook`'s.
    """
    if noop_webhook:
        return setup_base_webhook(server, JOB_GVK, NoopWebhook())
    return setup_base_webhook(server, JOB_GVK, BatchJobWebhook(
        client, integration_manager=integration_manager,
        manage_jobs_without_queue_name=manage_jobs_without_queue_name,
        managed_jobs_namespace_selector=managed_jobs_namespace_selector, queues=queues,
        features=features, default_local_queue_exist=default_local_queue_exist))


#: The integration as Kueue registers it.
CALLBACKS = IntegrationCallbacks(
    new_job=BatchJob,
    new_reconciler=new_generic_reconciler_factory(BatchJob, watch_child_jobs),
    setup_webhook=setup_webhook,
    job_type=JOB_GVK,
    setup_indexes=setup_indexes,
    multikueue_adapter=BatchJobMultiKueueAdapter(),
)


def register(manager: IntegrationManager | None = None) -> None:
    """Register ``batch/job`` with ``manager`` (default: the process-wide one), once."""
    register_integration_once(FRAMEWORK_NAME, CALLBACKS, manager=manager)


#: The name Kueue's configuration uses for batch/v1 Jobs in
#: ``integrations.externalFrameworks`` (``Kind.version.group``).
EXTERNAL_FRAMEWORK_NAME: Final = f"{JOB_GVK.kind}.{JOB_GVK.version}.{JOB_GVK.group}"
#: The reporting controller of the Kueue-side events (Kueue's own name for it).
KUEUE_CONTROLLER_NAME: Final = "job-controller"
#: Kueue's webhooks for built-in kinds leave the system namespaces alone.
_NOT_SYSTEM_NAMESPACES: Final = {"matchExpressions": [{
    "key": "kubernetes.io/metadata.name", "operator": "NotIn",
    "values": ["kube-system", "kueue-system"]}]}


@attrs.frozen
class BatchJobSetup:
    """What :func:`setup` registered."""

    kueue_reconciler: GenericReconciler | None = None
    webhook_paths: tuple[str, ...] = ()


def load_crds() -> list[Object]:
    """None: batch/v1 is built in."""
    return []


def webhook_resources() -> list[WebhookResource]:
    """The resource our Job webhooks intercept, scoped as Kueue's (no system namespaces)."""
    return [WebhookResource("batch", "v1", "Job", "jobs",
                            namespace_selector=_NOT_SYSTEM_NAMESPACES)]


def probe_object(namespace: str) -> Object:
    """A minimal queued Job; the mutating webhook must return it suspended."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "kueue-jobframework-webhook-probe", "namespace": namespace,
                     "labels": {QUEUE_LABEL: "probe"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "probe"}]}}},
    }


async def setup(
    mgr: Manager,
    *,
    webhook_server: WebhookServer | None = None,
    kueue: ReconcilerOptions | None = None,
) -> BatchJobSetup:
    """With ``kueue`` options: the indexes, the generic Job reconciler and (with a server)
    the Job webhook. Without them there is nothing to run: the Job controller runs Jobs."""
    if kueue is None:
        return BatchJobSetup()
    reconciler, paths = await setup_integration(
        mgr, CALLBACKS, kueue, reporting_controller=KUEUE_CONTROLLER_NAME,
        webhook_server=webhook_server)
    return BatchJobSetup(reconciler, tuple(paths))


__all__ = ["CALLBACKS", "EXTERNAL_FRAMEWORK_NAME", "BatchJobSetup", "load_crds",
           "probe_object", "register", "setup", "setup_indexes", "setup_webhook",
           "watch_child_jobs", "webhook_resources"]
