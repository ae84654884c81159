"""Helpers of Kueue's ``jobframework/utils.go`` not found elsewhere: :func:`new_workload` and
:class:`PodSetReplicaSize`. (The job metadata accessors live in :mod:`jobframework.validation`;
``RecordWorkloadCreationLatency`` in :mod:`jobframework.metrics`.)"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from . import constants as c
from .api.base import KueueModel, ObjectMeta
from .api.workload import PodSet, Workload, WorkloadSpec
from .constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from .runtime.objects import Object, annotations_of, labels_of, namespace_of
from .validation import maximum_execution_time_seconds_for_object, queue_name_for_object

__all__ = ["PodSetReplicaSize", "new_workload"]


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
