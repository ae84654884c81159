"""The batch/v1 Job webhook: :class:`~jobframework.base_webhook.BaseWebhook` plus the
Job-specific rules of Kueue's ``job_webhook.go`` (partial admission annotations, TAS
annotations on the pod template, no required/preferred topology on elastic Jobs,
parallelism frozen while a partially admitted Job runs).
"""

from __future__ import annotations

from typing import Any

from jobframework import constants as c
from jobframework.base_webhook import BaseWebhook
from jobframework.constants import FeatureGate, FeatureGates
from jobframework.field import ErrorList, forbidden, invalid, new_path
from jobframework.interface import GenericJob
from jobframework.podset import TopologyRequestError, go_parse_bool
from jobframework.validation import (
    go_atoi,
    validate_tas_pod_set_request,
    workload_slice_enabled,
)

from .job import BatchJob

MIN_PARALLELISM_PATH = new_path("metadata", "annotations").key(c.JOB_MIN_PARALLELISM_ANNOTATION)
SYNC_COMPLETIONS_PATH = new_path("metadata", "annotations").key(
    c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
TEMPLATE_METADATA_PATH = new_path("spec", "template", "metadata")


def validate_partial_admission_create(job: BatchJob) -> ErrorList:
    """``kueue.x-k8s.io/job-min-parallelism`` in ``(0, podsCount)`` and the
    completions-equal-parallelism annotation only on Indexed Jobs with equal counts."""
    errs = ErrorList()
    annotations = (job.object().get("metadata") or {}).get("annotations") or {}
    text = annotations.get(c.JOB_MIN_PARALLELISM_ANNOTATION)
    if text is not None:
        try:
            value = go_atoi(text)
        except ValueError as err:
            errs.append(invalid(MIN_PARALLELISM_PATH, text, str(err)))
        else:
            if value >= job.pods_count() or value <= 0:
                errs.append(invalid(MIN_PARALLELISM_PATH, value,
                                    f"should be between 0 and {job.pods_count() - 1}"))
        if workload_slice_enabled(job.object(), features=job.features):
            errs.append(invalid(MIN_PARALLELISM_PATH, text,
                                "partial admission and elastic job cannot be used together"))
    sync = annotations.get(c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
    if sync is not None:
        try:
            enabled = go_parse_bool(sync)
        except TopologyRequestError as err:
            errs.append(invalid(SYNC_COMPLETIONS_PATH, sync, str(err)))
            enabled = False
        if enabled:
            if job.spec.get("completionMode") != "Indexed":
                errs.append(invalid(SYNC_COMPLETIONS_PATH, sync,
                                    "should not be enabled for NonIndexed jobs"))
            if job.spec.get("completions", 1) != job.spec.get("parallelism", 1):
                errs.append(invalid(
                    new_path("spec", "completions"), job.spec.get("completions"),
                    "should be equal to parallelism when "
                    f"{c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION} annotation is true"))
    return errs


def validate_topology_request(job: BatchJob, features: FeatureGates) -> ErrorList:
    """The pod template's TAS annotations (with gate ``TopologyAwareScheduling``); an
    elastic Job may only ask for unconstrained topology, as Kueue's webhook has it.

    Like Kueue, malformed annotations are reported alone, and of the elastic-Job errors
    only the first (required before preferred).
    """
    if not features.enabled(FeatureGate.TOPOLOGY_AWARE_SCHEDULING):
        return ErrorList()
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


class BatchJobWebhook(BaseWebhook):
    """Defaulting and validation of batch/v1 Jobs."""

    def __init__(self, client: Any, **options: Any) -> None:
        features = options.get("features", c.DEFAULT_FEATURES)
        super().__init__(lambda obj: BatchJob(obj, features=features), client, **options)

    async def default(self, obj: dict[str, Any], request: Any = None) -> None:
        """Base defaults; an elastic Job's pods also wait on the elastic-job scheduling gate."""
        await super().default(obj, request)
        if workload_slice_enabled(obj, features=self.features):
            spec = obj.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
            gates = spec.setdefault("schedulingGates", [])
            if not any(g.get("name") == c.ELASTIC_JOB_SCHEDULING_GATE for g in gates):
                gates.append({"name": c.ELASTIC_JOB_SCHEDULING_GATE})

    def create_errors(self, job: GenericJob) -> ErrorList:
        """Base rules, partial admission, TAS annotations."""
        assert isinstance(job, BatchJob)
        errs = super().create_errors(job)
        errs.extend(validate_partial_admission_create(job))
        errs.extend(validate_topology_request(job, self.features))
        return errs

    def update_errors(self, old: GenericJob, new: GenericJob) -> ErrorList:
        """Base update rules, the create rules of the new Job, frozen parallelism, the
        new Job's topology request."""
        assert isinstance(old, BatchJob) and isinstance(new, BatchJob)
        errs = super().update_errors(old, new)
        errs.extend(validate_partial_admission_create(new))
        if (new.min_pods_count() is not None and not new.is_suspended()
                and old.spec.get("parallelism") != new.spec.get("parallelism")):
            errs.append(forbidden(new_path("spec", "parallelism"),
                                  "cannot change when partial admission is enabled and the "
                                  "job is not suspended"))
        errs.extend(validate_topology_request(new, self.features))
        return errs
