"""The batch/v1 Job webhook: Kueue's ``job_webhook.go``.

Defaulting is :class:`~jobframework.base_webhook.BaseWebhook`'s plus the elastic-job
scheduling gate. Validation follows Kueue's ``validateCreate`` / ``validateUpdate`` step by
step and in the same order (so error lists compare equal): the generic job rules, partial
admission (``kueue.x-k8s.io/job-min-parallelism``), the completions-equal-parallelism
annotation, and, with gate ``TopologyAwareScheduling``, the pod template's TAS
annotations, the elastic-job topology restriction and the slice-size upper bound. The
upper bound needs the Job's pod sets, which are async, so the full rule set is
:meth:`BatchJobWebhook.validate_create_errors` / ``validate_update_errors``; the sync
``create_errors`` / ``update_errors`` of the base class omit only that last check.
"""

from __future__ import annotations

from typing import Any, cast

from jobframework import constants as c
from jobframework.base_webhook import BaseWebhook
from jobframework.constants import FeatureGate, FeatureGates
from jobframework.field import FIELD_IMMUTABLE_ERROR_MSG, ErrorList, forbidden, invalid, new_path
from jobframework.interface import GenericJob
from jobframework.podset import TopologyRequestError, go_parse_bool
from jobframework.runtime.client import Client
from jobframework.runtime.objects import Object, annotations_of
from jobframework.validation import (
    go_atoi,
    validate_job_on_create,
    validate_job_on_update,
    validate_slice_size_annotation_upper_bound,
    validate_tas_pod_set_request,
    workload_slice_enabled,
)
from jobframework.webhook import AdmissionRequest

from .job import BatchJob

MIN_PARALLELISM_PATH = new_path("metadata", "annotations").key(c.JOB_MIN_PARALLELISM_ANNOTATION)
SYNC_COMPLETIONS_PATH = new_path("metadata", "annotations").key(
    c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
TEMPLATE_METADATA_PATH = new_path("spec", "template", "metadata")
PARALLELISM_PATH = new_path("spec", "parallelism")
COMPLETIONS_PATH = new_path("spec", "completions")


def _int32(value: int) -> int:
    """Go's ``int32(v)`` conversion: keeps the low 32 bits, two's complement."""
    return (value + 2**31) % 2**32 - 2**31


def _deref(value: Any, default: int) -> Any:
    """``ptr.Deref``: an unset (or null) field reads as ``default``."""
    return default if value is None else value


def validate_partial_admission_create(
    job: BatchJob, *, features: FeatureGates | None = None
) -> ErrorList:
    """``kueue.x-k8s.io/job-min-parallelism``, when present, is an int in ``(0, podsCount)``
    and is not combined with an elastic Job (``validatePartialAdmissionCreate``).

    ``features`` defaults to the Job's own gates.
    """
    gates = job.features if features is None else features
    errs = ErrorList()
    text = annotations_of(job.object()).get(c.JOB_MIN_PARALLELISM_ANNOTATION)
    if text is None:
        return errs
    try:
        value = go_atoi(text)
    except ValueError as err:
        errs.append(invalid(MIN_PARALLELISM_PATH, text, str(err)))
    else:
        pods = job.pods_count()
        # Kueue compares int32(v), so a value beyond int32 wraps before the upper check.
        if _int32(value) >= pods or value <= 0:
            errs.append(invalid(MIN_PARALLELISM_PATH, value,
                                f"should be between 0 and {pods - 1}"))
    if workload_slice_enabled(job.object(), features=gates):
        errs.append(invalid(MIN_PARALLELISM_PATH, text,
                            "partial admission and elastic job cannot be used together"))
    return errs


def validate_sync_completion_create(job: BatchJob) -> ErrorList:
    """``kueue.x-k8s.io/job-completions-equal-parallelism`` is a Go bool; when true the Job
    must not be NonIndexed and needs ``completions == parallelism``
    (``validateSyncCompletionCreate``)."""
    errs = ErrorList()
    text = annotations_of(job.object()).get(c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
    if text is None:
        return errs
    try:
        enabled = go_parse_bool(text)
    except TopologyRequestError as err:
        # Kueue reports the parse error and goes on with enabled == false.
        errs.append(invalid(SYNC_COMPLETIONS_PATH, text, str(err)))
        enabled = False
    if not enabled:
        return errs
    # Only an unset or NonIndexed mode is rejected, exactly as Kueue tests it.
    if job.spec.get("completionMode") in (None, "NonIndexed"):
        errs.append(invalid(SYNC_COMPLETIONS_PATH, text,
                            "should not be enabled for NonIndexed jobs"))
    completions = job.spec.get("completions")
    if _deref(job.spec.get("parallelism"), 1) != _deref(completions, 1):
        errs.append(invalid(
            COMPLETIONS_PATH, completions,
            "should be equal to parallelism when "
            f"{c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION} annotation is true"))
    return errs


def validate_partial_admission_update(old: BatchJob, new: BatchJob) -> ErrorList:
    """While the *old* Job runs (``spec.suspend`` not true) and had the min-parallelism
    annotation, parallelism is frozen; the completions-equal-parallelism setting may not
    flip while the Job stays unsuspended (``validatePartialAdmissionUpdate``)."""
    errs = ErrorList()
    # Kueue reads the old Job's raw suspend field here, not IsSuspended (no stopping check).
    if (c.JOB_MIN_PARALLELISM_ANNOTATION in annotations_of(old.object())
            and old.spec.get("suspend") is not True
            and _deref(old.spec.get("parallelism"), 1) != _deref(new.spec.get("parallelism"), 1)):
        errs.append(forbidden(PARALLELISM_PATH, "cannot change when partial admission is "
                                                "enabled and the job is not suspended"))
    if (old.is_suspended() == new.is_suspended() and not new.is_suspended()
            and old.sync_completion_with_parallelism()
            != new.sync_completion_with_parallelism()):
        errs.append(forbidden(SYNC_COMPLETIONS_PATH,
                              f"{FIELD_IMMUTABLE_ERROR_MSG} while the job is not suspended"))
    return errs


def validate_topology_annotations(job: BatchJob, features: FeatureGates) -> ErrorList:
    """The synchronous part of Kueue's ``validateTopologyRequest``: the pod template's TAS
    annotations, then (for elastic Jobs) no required/preferred topology.

    Like Kueue, malformed annotations are reported alone, and of the elastic-Job errors
    only the first (required before preferred). Callers check the TAS gate.
    """
    template_meta = (job.spec.get("template") or {}).get("metadata") or {}
    errs = validate_tas_pod_set_request(TEMPLATE_METADATA_PATH, template_meta,
                                        features=features)
    if errs:
        return errs
    if workload_slice_enabled(job.object(), features=features):
        annotations = template_meta.get("annotations") or {}
        for key, mode in ((c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION, "required"),
                          (c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION, "preferred")):
            if key in annotations:
                # Kueue names the field with Child("annotations", key): dotted, not [key].
                return ErrorList([forbidden(TEMPLATE_METADATA_PATH.child("annotations", key),
                                            f"{mode} topology is not supported with "
                                            "elastic jobs")])
    return ErrorList()


async def validate_topology_request(
    job: BatchJob, features: FeatureGates, client: Client
) -> ErrorList:
    """Kueue's ``validateTopologyRequest`` (gate ``TopologyAwareScheduling``): the
    annotation checks, then no slice size above the pod set's count.

    Raises what building the pod sets raises (Kueue returns that error, not field errors).
    """
    if not features.enabled(FeatureGate.TOPOLOGY_AWARE_SCHEDULING):
        return ErrorList()
    errs = validate_topology_annotations(job, features)
    if errs:
        return errs
    # The pod sets as JobPodSets builds them, less its copy and env-var clean-up: only
    # the first one's count is read.
    pod_sets = await job.pod_sets(client)
    if not pod_sets:
        return ErrorList()
    template_meta = (job.spec.get("template") or {}).get("metadata") or {}
    return validate_slice_size_annotation_upper_bound(TEMPLATE_METADATA_PATH, template_meta,
                                                      pod_sets[0])


class BatchJobWebhook(BaseWebhook):
    """Defaulting and validation of batch/v1 Jobs (Kueue's ``JobWebhook``)."""

    def __init__(self, client: Any, **options: Any) -> None:
        features = options.get("features", c.DEFAULT_FEATURES)
        super().__init__(lambda obj: BatchJob(obj, features=features), client, **options)

    async def default(self, obj: Object, request: AdmissionRequest | None = None) -> None:
        """Base defaults; an elastic Job's pods also wait on the elastic-job scheduling gate."""
        await super().default(obj, request)
        if workload_slice_enabled(obj, features=self.features):
            spec = obj.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
            gates = spec.get("schedulingGates") or []
            if not any(g.get("name") == c.ELASTIC_JOB_SCHEDULING_GATE for g in gates):
                # Appended after the gates already there, which stay (utilpod.GateTemplate).
                spec["schedulingGates"] = [*gates, {"name": c.ELASTIC_JOB_SCHEDULING_GATE}]

    # -- validation ------------------------------------------------------------------------

    def _create_errors_before_topology(self, job: BatchJob) -> ErrorList:
        # Kueue's JobWebhook is no BaseWebhook: the generic rules, no custom validation.
        errs = validate_job_on_create(job, features=self.features)
        errs.extend(validate_partial_admission_create(job, features=self.features))
        errs.extend(validate_sync_completion_create(job))
        return errs

    def _update_errors_before_topology(self, old: BatchJob, new: BatchJob) -> ErrorList:
        errs = validate_job_on_create(new, features=self.features)
        # Absent and empty compare equal, as Go's map lookup has it.
        key = c.JOB_MIN_PARALLELISM_ANNOTATION
        if annotations_of(new.object()).get(key, "") != annotations_of(old.object()).get(key, ""):
            errs.extend(validate_partial_admission_create(new, features=self.features))
        errs.extend(validate_sync_completion_create(new))
        errs.extend(validate_job_on_update(old, new, self.default_local_queue_exist,
                                           features=self.features))
        errs.extend(validate_partial_admission_update(old, new))
        return errs

    def _topology_annotation_errors(self, job: BatchJob) -> ErrorList:
        if not self.features.enabled(FeatureGate.TOPOLOGY_AWARE_SCHEDULING):
            return ErrorList()
        return validate_topology_annotations(job, self.features)

    def _pod_sets_client(self) -> Client:
        # Kueue builds these pod sets with a nil client: a Job's pod sets read nothing.
        return cast(Client, self.client)

    def create_errors(self, job: GenericJob) -> ErrorList:
        """Kueue's ``validateCreate`` except the slice-size upper bound (which needs the
        async pod sets; see :meth:`validate_create_errors`)."""
        assert isinstance(job, BatchJob)
        errs = self._create_errors_before_topology(job)
        errs.extend(self._topology_annotation_errors(job))
        return errs

    def update_errors(self, old: GenericJob, new: GenericJob) -> ErrorList:
        """Kueue's ``validateUpdate`` except the slice-size upper bound (see
        :meth:`validate_update_errors`)."""
        assert isinstance(old, BatchJob) and isinstance(new, BatchJob)
        errs = self._update_errors_before_topology(old, new)
        errs.extend(self._topology_annotation_errors(new))
        return errs

    async def validate_create_errors(self, job: BatchJob) -> ErrorList:
        """Every field error of Kueue's ``validateCreate``, in Kueue's order."""
        errs = self._create_errors_before_topology(job)
        errs.extend(await validate_topology_request(job, self.features,
                                                    self._pod_sets_client()))
        return errs

    async def validate_update_errors(self, old: BatchJob, new: BatchJob) -> ErrorList:
        """Every field error of Kueue's ``validateUpdate``, in Kueue's order."""
        errs = self._update_errors_before_topology(old, new)
        errs.extend(await validate_topology_request(new, self.features,
                                                    self._pod_sets_client()))
        return errs

    async def validate_create(
        self, obj: Object, request: AdmissionRequest | None = None
    ) -> None:
        """Reject an invalid new Job (an ``AggregateError`` of the field errors)."""
        del request
        job = self.from_object(obj)
        assert isinstance(job, BatchJob)
        agg = (await self.validate_create_errors(job)).to_aggregate()
        if agg is not None:
            raise agg

    async def validate_update(
        self, old: Object, new: Object, request: AdmissionRequest | None = None
    ) -> None:
        """Reject an invalid Job update."""
        del request
        old_job, new_job = self.from_object(old), self.from_object(new)
        assert isinstance(old_job, BatchJob) and isinstance(new_job, BatchJob)
        agg = (await self.validate_update_errors(old_job, new_job)).to_aggregate()
        if agg is not None:
            raise agg
