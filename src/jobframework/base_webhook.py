"""``BaseWebhook``: the defaulting and validating webhook every job kind gets for free
(Kueue's ``base_webhook.go``).

Defaulting (in Kueue's order, with an integration manager): the ``default`` LocalQueue
label, the ``default`` WorkloadPriorityClass label, ``suspend`` for jobs Kueue will queue;
then, always, ``managedBy`` for jobs sent to a MultiKueue ClusterQueue. Validation: the
create/update rules of :func:`~jobframework.validation.validate_job_on_create` /
``validate_job_on_update`` plus the job's own (``JobWithCustomValidation``); an exception
from the custom validation replaces every field error, as in Kueue.

Served through :mod:`jobframework.webhook` with Kueue's lossless rule: the defaulting
patch never removes a field (see :mod:`jobframework.lossless`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .constants import DEFAULT_FEATURES, FeatureGates
from .defaults import (
    QueueLookup,
    apply_default_for_managed_by,
    apply_default_for_suspend,
    apply_default_local_queue,
    apply_default_workload_priority_class,
    default_local_queue_exist_of,
)
from .field import ErrorList, type_invalid
from .integrations import IntegrationManager
from .interface import GenericJob, JobWithCustomValidation
from .jsonshape import json_type
from .lossless import LosslessMode
from .runtime.client import Reader
from .runtime.errors import BadRequest
from .runtime.objects import GVK, Object
from .runtime.selectors import LabelSelector
from .validation import validate_job_on_create, validate_job_on_update
from .webhook import AdmissionRequest, JsonPatchOperation, PatchContext, WebhookBuilder
from .webhook.server import WebhookServer

#: Builds the job adapter of a request's object (``FromObject``).
FromObject = Callable[[Object], GenericJob]


def drop_remove_operations(
    ops: Sequence[JsonPatchOperation], ctx: PatchContext
) -> list[JsonPatchOperation]:
    """Kueue's ``LosslessDefaulter`` rule as a patch filter: no ``remove`` operations."""
    del ctx
    return [op for op in ops if op["op"] != "remove"]


def _no_default_queue(namespace: str) -> bool:
    del namespace
    return False


class BaseWebhook:
    """Defaulter and validator for one job kind (``BaseWebhook[T]``).

    Args:
        from_object: wraps the request's object (edited in place) in the job adapter.
        client: reads ancestors, namespaces and priority classes.
        integration_manager: without one, only managedBy defaulting happens.
        queues: LocalQueue → ClusterQueue lookups for managedBy defaulting.
        default_local_queue_exist: whether a namespace has a ``default`` LocalQueue;
            when None, asked of ``queues`` (a
            :class:`~jobframework.defaults.DefaultLocalQueueLookup`, as the manager's
            :class:`~jobframework.queuelookup.CachedQueueLookup` is), else always "no".
    """

    def __init__(
        self,
        from_object: FromObject,
        client: Reader,
        *,
        integration_manager: IntegrationManager | None = None,
        manage_jobs_without_queue_name: bool = False,
        managed_jobs_namespace_selector: LabelSelector | None = None,
        queues: QueueLookup | None = None,
        default_local_queue_exist: Callable[[str], bool] | None = None,
        features: FeatureGates = DEFAULT_FEATURES,
    ) -> None:
        self.from_object = from_object
        self.client = client
        self.integration_manager = integration_manager
        self.manage_jobs_without_queue_name = manage_jobs_without_queue_name
        self.managed_jobs_namespace_selector = managed_jobs_namespace_selector
        self.queues = queues
        # Kueue's webhooks ask the queue manager (Queues.DefaultLocalQueueExist).
        self.default_local_queue_exist = (default_local_queue_exist
                                          or default_local_queue_exist_of(queues)
                                          or _no_default_queue)
        self.features = features

    async def default(self, obj: Object, request: AdmissionRequest | None = None) -> None:
        """Apply Kueue's job defaults to ``obj`` in place.

        Raises :class:`~jobframework.runtime.errors.BadRequest` (400, naming the field)
        when ``spec`` is not a JSON object.
        """
        del request
        spec = obj.get("spec")
        if spec is not None and not isinstance(spec, dict):
            # The mutating webhook runs before the CRD schema is checked, so it sees any
            # JSON; Go's webhook fails to decode such an object (400) before defaulting.
            raise BadRequest(str(type_invalid("spec", json_type(spec), "must be an object")))
        job = self.from_object(obj)
        im = self.integration_manager
        if im is not None:
            await apply_default_local_queue(im, self.client, job.object(),
                                            self.default_local_queue_exist,
                                            self.managed_jobs_namespace_selector)
            await apply_default_workload_priority_class(im, self.client, job.object(),
                                                        features=self.features)
            await apply_default_for_suspend(im, job, self.client,
                                            self.manage_jobs_without_queue_name,
                                            self.managed_jobs_namespace_selector,
                                            features=self.features)
        if self.queues is not None:
            apply_default_for_managed_by(job, self.queues)

    def create_errors(self, job: GenericJob) -> ErrorList:
        """Field errors of a new job (custom validation included); raises what it raises."""
        errs = validate_job_on_create(job, features=self.features)
        if isinstance(job, JobWithCustomValidation):
            errs.extend(job.validate_on_create())
        return errs

    def update_errors(self, old: GenericJob, new: GenericJob) -> ErrorList:
        """Field errors of a job update (custom validation included)."""
        errs = validate_job_on_update(old, new, self.default_local_queue_exist,
                                      features=self.features)
        if isinstance(new, JobWithCustomValidation):
            errs.extend(new.validate_on_update(old))
        return errs

    async def validate_create(
        self, obj: Object, request: AdmissionRequest | None = None
    ) -> Sequence[str] | None:
        """Reject an invalid new job (an ``AggregateError`` of the field errors)."""
        del request
        agg = self.create_errors(self.from_object(obj)).to_aggregate()
        if agg is not None:
            raise agg
        return None

    async def validate_update(
        self, old: Object, new: Object, request: AdmissionRequest | None = None
    ) -> Sequence[str] | None:
        """Reject an invalid job update."""
        del request
        agg = self.update_errors(self.from_object(old), self.from_object(new)).to_aggregate()
        if agg is not None:
            raise agg
        return None

    async def validate_delete(
        self, obj: Object, request: AdmissionRequest | None = None
    ) -> Sequence[str] | None:
        """Deletes are always allowed."""
        del obj, request
        return None


class NoopWebhook:
    """Allows everything unchanged (served for disabled integrations)."""

    async def default(self, obj: Object, request: AdmissionRequest | None = None) -> None:
        """Nothing to default."""
        del obj, request

    async def validate_create(self, obj: Object, request: Any = None) -> None:
        """Allowed."""
        del obj, request

    async def validate_update(self, old: Object, new: Object, request: Any = None) -> None:
        """Allowed."""
        del old, new, request

    async def validate_delete(self, obj: Object, request: Any = None) -> None:
        """Allowed."""
        del obj, request


def setup_base_webhook(
    server: WebhookServer,
    gvk: GVK,
    webhook: BaseWebhook | NoopWebhook,
    *,
    lossless_mode: LosslessMode = LosslessMode.DROP_ALL_REMOVES,
) -> list[str]:
    """Serve ``webhook`` for ``gvk`` at controller-runtime's paths (``BaseWebhookFactory``).

    With :attr:`LosslessMode.DROP_ALL_REMOVES` the defaulting patch keeps only ``add`` and
    ``replace`` operations; with :attr:`LosslessMode.DROP_ROUND_TRIP_REMOVES` a removal the
    defaulter makes on purpose is kept. Returns the paths registered.
    """
    patch_filter = (drop_remove_operations if lossless_mode is LosslessMode.DROP_ALL_REMOVES
                    else None)
    return (WebhookBuilder(server).for_(gvk)
            .with_defaulter(webhook, patch_filter=patch_filter)
            .with_validator(webhook).complete())
