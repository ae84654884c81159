"""Helpers of Kueue's ``jobframework/utils.go``: the job metadata accessors working on the raw
object (queue name, max execution time, priority class, prebuilt workload name, elastic
slices, MultiKueue metadata), :func:`new_workload` and :class:`PodSetReplicaSize`.

The accessors are re-exported by :mod:`jobframework.validation`, beside the ``GenericJob``
forms :func:`~jobframework.validation.queue_name` and
:func:`~jobframework.validation.maximum_execution_time_seconds`; ``RecordWorkloadCreationLatency``
is in :mod:`jobframework.metrics`. Nothing here imports the job interface, so lower modules
(:mod:`jobframework.podset`) can use it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import constants as c
from .api.base import KueueModel, ObjectMeta
from .api.workload import PodSet, Workload, WorkloadSpec
from .constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from .runtime.objects import Object, annotations_of, labels_of, namespace_of

__all__ = [
    "PodSetReplicaSize",
    "is_workload_priority_class_name_empty",
    "maximum_execution_time_seconds_for_object",
    "new_workload",
    "prebuilt_workload_name_for",
    "queue_name_for_object",
    "set_multikueue_meta",
    "set_prebuilt_workload_name",
    "workload_priority_class_name",
    "workload_slice_enabled",
]


# --- job metadata accessors ------------------------------------------------------------------


def queue_name_for_object(obj: Mapping[str, Any]) -> str:
    """The ``kueue.x-k8s.io/queue-name`` label, or ``""``."""
    return labels_of(obj).get(c.QUEUE_LABEL, "")


def maximum_execution_time_seconds_for_object(obj: Mapping[str, Any]) -> int | None:
    """The max-exec-time label as a positive int32, else None (unset, unparsable or <= 0)."""
    text = labels_of(obj).get(c.MAX_EXEC_TIME_SECONDS_LABEL)
    if text is None or not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    if value <= 0 or value >= 2**31:
        return None
    return value


def workload_priority_class_name(obj: Mapping[str, Any]) -> str:
    """The ``kueue.x-k8s.io/priority-class`` label, or ``""``."""
    return labels_of(obj).get(c.WORKLOAD_PRIORITY_CLASS_LABEL, "")


def is_workload_priority_class_name_empty(obj: Mapping[str, Any]) -> bool:
    """No (or an empty) priority-class label."""
    return workload_priority_class_name(obj) == ""


def workload_slice_enabled(
    obj: Mapping[str, Any] | None, *, features: FeatureGates = DEFAULT_FEATURES
) -> bool:
    """Elastic job: gate ``ElasticJobsViaWorkloadSlices`` and annotation ``elastic-job: "true"``."""
    if obj is None:
        return False
    return (features.enabled(FeatureGate.ELASTIC_JOBS_VIA_WORKLOAD_SLICES)
            and annotations_of(obj).get(c.ELASTIC_JOB_ANNOTATION) == c.ELASTIC_JOB_ANNOTATION_VALUE)


def prebuilt_workload_name_for(
    obj: Mapping[str, Any], *, features: FeatureGates = DEFAULT_FEATURES
) -> str:
    """The prebuilt Workload a job names (``PrebuiltWorkloadNameFor``), or ``""``.

    With ``WorkloadIdentifierAnnotations`` the annotation wins over the label; without, the
    label wins and the annotation counts only when longer than 63 characters.
    """
    ann = annotations_of(obj).get(c.PREBUILT_WORKLOAD_ANNOTATION, "")
    label = labels_of(obj).get(c.PREBUILT_WORKLOAD_LABEL, "")
    if features.enabled(FeatureGate.WORKLOAD_IDENTIFIER_ANNOTATIONS):
        return ann or label
    if label:
        return label
    return ann if len(ann) > c.LABEL_VALUE_MAX_LENGTH else ""


def set_prebuilt_workload_name(
    obj: dict[str, Any], name: str, *, features: FeatureGates = DEFAULT_FEATURES
) -> None:
    """Write the prebuilt name as annotation (gate on, or > 63 chars) or label."""
    meta = obj.setdefault("metadata", {})
    if features.enabled(FeatureGate.WORKLOAD_IDENTIFIER_ANNOTATIONS) or (
            len(name) > c.LABEL_VALUE_MAX_LENGTH):
        meta.setdefault("annotations", {})[c.PREBUILT_WORKLOAD_ANNOTATION] = name
    else:
        meta.setdefault("labels", {})[c.PREBUILT_WORKLOAD_LABEL] = name


def set_multikueue_meta(
    obj: dict[str, Any], workload_name: str, origin: str,
    *, features: FeatureGates = DEFAULT_FEATURES,
) -> None:
    """Label the MultiKueue origin and set the prebuilt workload name (``SetMultiKueueMeta``)."""
    obj.setdefault("metadata", {}).setdefault("labels", {})[c.MULTIKUEUE_ORIGIN_LABEL] = origin
    set_prebuilt_workload_name(obj, workload_name, features=features)


# --- workloads ------------------------------------------------------------------------------


class PodSetReplicaSize(KueueModel):
    """A pod set's name and count only: the items of the pod-set replica-sizes annotation
    (``PodSetReplicaSize``), JSON ``{"name": ..., "count": ...}``."""

    name: str
    count: int


def new_workload(
    name: str,
    obj: Object,
    pod_sets: Sequence[PodSet],
    label_keys_to_copy: Iterable[str] = (),
    annotations_to_copy: Iterable[str] = (),
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> Workload:
    """A Workload ``name`` for ``obj`` (``NewWorkload``), without owner reference.

    In ``obj``'s namespace with the resource-in-use finalizer; labels are the job's labels
    among ``label_keys_to_copy``; annotations the job's ProvisioningRequest ones
    (``provreq.kueue.x-k8s.io/``) and, with ``CustomMetricLabels``, those among
    ``annotations_to_copy``; the spec has the job's queue name, ``pod_sets`` and maximum
    execution time.
    """
    label_keys = frozenset(label_keys_to_copy)
    annotation_keys = frozenset(annotations_to_copy)
    job_annotations = annotations_of(obj)
    annotations = {k: v for k, v in job_annotations.items()
                   if k.startswith(c.PROV_REQ_ANNOTATION_PREFIX)}
    if features.enabled(FeatureGate.CUSTOM_METRIC_LABELS):
        annotations.update({k: v for k, v in job_annotations.items() if k in annotation_keys})
    labels = {k: v for k, v in labels_of(obj).items() if k in label_keys}
    meta: dict[str, Any] = {"name": name, "namespace": namespace_of(obj),
                            "finalizers": [c.RESOURCE_IN_USE_FINALIZER_NAME]}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"pod_sets": list(pod_sets)}
    queue = queue_name_for_object(obj)
    if queue:
        spec["queue_name"] = queue
    max_exec = maximum_execution_time_seconds_for_object(obj)
    if max_exec is not None:
        spec["maximum_execution_time_seconds"] = max_exec
    return Workload(metadata=ObjectMeta(**meta), spec=WorkloadSpec(**spec))
