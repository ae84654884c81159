"""Webhook validation of Kueue's job labels and annotations (``validation.go``), plus the
job-metadata accessors of ``utils.go`` and the Kubernetes name checks they rely on.

The name checks are defined in :mod:`jobframework.k8svalidation` and the raw-object
accessors in :mod:`jobframework.utils`, below the job interface, so that modules under
:mod:`jobframework.interface` (such as :mod:`jobframework.podset`) can use them; they are
re-exported here, where they have always been importable from.

Rules, field paths and messages are Kueue's: e.g. a bad queue name gives
``metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "a_b": a lowercase RFC 1123
subdomain must consist of ...``. Functions take a :class:`~jobframework.interface.GenericJob`
(or, for the metadata helpers, the raw object) and the feature gates to apply.
"""

from __future__ import annotations

import decimal
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from . import constants as c
from .constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from .field import (
    FIELD_IMMUTABLE_ERROR_MSG,
    OMIT_VALUE,
    ErrorList,
    Path,
    duplicate,
    forbidden,
    go_quote,
    invalid,
    new_path,
    required,
    too_long,
    validate_immutable_field,
)
from .interface import GenericJob

# Re-exported: the Kubernetes name checks (apimachinery util/validation) and the job
# metadata accessors on the raw object (utils.go) live below the job interface.
from .k8svalidation import DNS1123_LABEL_MAX_LENGTH as DNS1123_LABEL_MAX_LENGTH
from .k8svalidation import DNS1123_SUBDOMAIN_MAX_LENGTH as DNS1123_SUBDOMAIN_MAX_LENGTH
from .k8svalidation import is_dns1123_label as is_dns1123_label
from .k8svalidation import is_dns1123_subdomain as is_dns1123_subdomain
from .k8svalidation import is_domain_prefixed_path as is_domain_prefixed_path
from .k8svalidation import is_qualified_name as is_qualified_name
from .k8svalidation import is_valid_label_value as is_valid_label_value
from .k8svalidation import max_len_error as max_len_error
from .k8svalidation import regex_error as regex_error
from .k8svalidation import validate_label_name as validate_label_name
from .runtime.objects import GVK, annotations_of, labels_of
from .utils import is_workload_priority_class_name_empty as is_workload_priority_class_name_empty
from .utils import (
    maximum_execution_time_seconds_for_object as maximum_execution_time_seconds_for_object,
)
from .utils import prebuilt_workload_name_for as prebuilt_workload_name_for
from .utils import queue_name_for_object as queue_name_for_object
from .utils import set_multikueue_meta as set_multikueue_meta
from .utils import set_prebuilt_workload_name as set_prebuilt_workload_name
from .utils import workload_priority_class_name as workload_priority_class_name
from .utils import workload_slice_enabled as workload_slice_enabled

# --- Go's strconv ---------------------------------------------------------------------------


def go_atoi(text: str) -> int:
    """Go's ``strconv.Atoi``; raises ``ValueError`` with Go's message."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(f"strconv.Atoi: parsing {go_quote(text)}: invalid syntax")
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"strconv.Atoi: parsing {go_quote(text)}: value out of range")
    return value


# --- job metadata accessors taking a GenericJob (utils.go) ---------------------------------


def queue_name(job: GenericJob) -> str:
    """The job's LocalQueue name (``QueueName``)."""
    return queue_name_for_object(job.object())


def maximum_execution_time_seconds(job: GenericJob) -> int | None:
    """``MaximumExecutionTimeSeconds`` of a job."""
    return maximum_execution_time_seconds_for_object(job.object())


def _prebuilt_in_annotation(obj: Mapping[str, Any], features: FeatureGates) -> bool:
    ann = annotations_of(obj).get(c.PREBUILT_WORKLOAD_ANNOTATION, "")
    return bool(ann) and (features.enabled(FeatureGate.WORKLOAD_IDENTIFIER_ANNOTATIONS)
                          or len(ann) > c.LABEL_VALUE_MAX_LENGTH)


# --- validation.go ---------------------------------------------------------------------------

METADATA_PATH: Final = new_path("metadata")
LABELS_PATH: Final = METADATA_PATH.child("labels")
ANNOTATIONS_PATH: Final = METADATA_PATH.child("annotations")
QUEUE_NAME_LABEL_PATH: Final = LABELS_PATH.key(c.QUEUE_LABEL)
MAX_EXEC_TIME_LABEL_PATH: Final = LABELS_PATH.key(c.MAX_EXEC_TIME_SECONDS_LABEL)
WORKLOAD_PRIORITY_CLASS_NAME_PATH: Final = LABELS_PATH.key(c.WORKLOAD_PRIORITY_CLASS_LABEL)
PREBUILT_WORKLOAD_LABEL_PATH: Final = LABELS_PATH.key(c.PREBUILT_WORKLOAD_LABEL)
PREBUILT_WORKLOAD_ANNOTATION_PATH: Final = ANNOTATIONS_PATH.key(c.PREBUILT_WORKLOAD_ANNOTATION)
ELASTIC_JOB_ANNOTATION_PATH: Final = ANNOTATIONS_PATH.key(c.ELASTIC_JOB_ANNOTATION)
ADMISSION_GATED_BY_PATH: Final = ANNOTATIONS_PATH.key(c.ADMISSION_GATED_BY_ANNOTATION)

#: Kinds that may use the elastic-job annotation (``str(gvk)`` form).
SUPPORTED_ELASTIC_JOB_GVKS: Final = frozenset({
    "batch/v1, Kind=Job", "ray.io/v1, Kind=RayCluster", "ray.io/v1, Kind=RayJob",
    "ray.io/v1, Kind=RayService",
})
#: Kinds that may name a prebuilt Workload (``str(gvk)`` form).
SUPPORTED_PREBUILT_WORKLOAD_GVKS: Final = frozenset({
    "batch/v1, Kind=Job", "jobset.x-k8s.io/v1alpha2, Kind=JobSet",
    "kubeflow.org/v1, Kind=TFJob", "kubeflow.org/v1, Kind=PaddleJob",
    "kubeflow.org/v1, Kind=PyTorchJob", "kubeflow.org/v1, Kind=XGBoostJob",
    "trainer.kubeflow.org/v1alpha1, Kind=TrainJob", "kubeflow.org/v2beta1, Kind=MPIJob",
    "ray.io/v1, Kind=RayJob", "/v1, Kind=Pod", "ray.io/v1, Kind=RayCluster",
    "ray.io/v1, Kind=RayService", "workload.codeflare.dev/v1beta2, Kind=AppWrapper",
})


#: Kinds declared by their integrations to run correctly with a prebuilt Workload
#: (:func:`support_prebuilt_workload`), accepted besides Kueue's list.
_DECLARED_PREBUILT_WORKLOAD_GVKS: set[str] = set()


def support_prebuilt_workload(gvk: GVK) -> None:
    """Accept the prebuilt-workload label on ``gvk`` jobs.

    Kueue accepts it only on the kinds of :data:`SUPPORTED_PREBUILT_WORKLOAD_GVKS` ("to be
    relaxed once each integration is confirmed to run with a prebuilt Workload"). A
    MultiKueue worker's copy of a job always names one, so an integration that runs
    correctly with it, and wants its jobs dispatched by MultiKueue's generic adapter,
    declares its kind here when it registers (as ours do).
    """
    _DECLARED_PREBUILT_WORKLOAD_GVKS.add(str(gvk))


def validate_label_as_crd_name(obj: Mapping[str, Any], key: str) -> ErrorList:
    """If the label is present its value must be a DNS-1123 subdomain."""
    errs = ErrorList()
    labels = labels_of(obj)
    if key in labels:
        problems = is_dns1123_subdomain(labels[key])
        if problems:
            errs.append(invalid(LABELS_PATH.key(key), labels[key], ",".join(problems)))
    return errs


def validate_annotation_as_crd_name(obj: Mapping[str, Any], key: str) -> ErrorList:
    """If the annotation is present its value must be a DNS-1123 subdomain."""
    errs = ErrorList()
    annotations = annotations_of(obj)
    if key in annotations:
        problems = is_dns1123_subdomain(annotations[key])
        if problems:
            errs.append(invalid(ANNOTATIONS_PATH.key(key), annotations[key], ",".join(problems)))
    return errs


def validate_queue_name(obj: Mapping[str, Any]) -> ErrorList:
    """The queue-name label, when present, is a valid LocalQueue name."""
    return validate_label_as_crd_name(obj, c.QUEUE_LABEL)


def get_prebuilt_workload_path(
    obj: Mapping[str, Any], *, features: FeatureGates = DEFAULT_FEATURES
) -> Path:
    """The field path of the prebuilt name: the annotation when it is the one in use."""
    if _prebuilt_in_annotation(obj, features):
        return PREBUILT_WORKLOAD_ANNOTATION_PATH
    return PREBUILT_WORKLOAD_LABEL_PATH


def validate_prebuilt_workload_name(
    obj: Mapping[str, Any], *, features: FeatureGates = DEFAULT_FEATURES
) -> ErrorList:
    """The prebuilt name (annotation or label, whichever is in use) is a DNS-1123 subdomain."""
    if _prebuilt_in_annotation(obj, features):
        return validate_annotation_as_crd_name(obj, c.PREBUILT_WORKLOAD_ANNOTATION)
    return validate_label_as_crd_name(obj, c.PREBUILT_WORKLOAD_LABEL)


def validate_elastic_job_annotation(
    obj: Mapping[str, Any], gvk: GVK, *, features: FeatureGates = DEFAULT_FEATURES
) -> ErrorList:
    """The elastic-job annotation is only for Job and the Ray kinds."""
    if not workload_slice_enabled(obj, features=features):
        return ErrorList()
    if str(gvk) not in SUPPORTED_ELASTIC_JOB_GVKS:
        return ErrorList([forbidden(
            ELASTIC_JOB_ANNOTATION_PATH, f"elastic job is not supported for {go_quote(str(gvk))}")])
    return ErrorList()


def parse_csv(value: str) -> list[str]:
    """Kueue's ``csv.Parse``: comma-split, each part trimmed; blank input is empty."""
    if not value.strip():
        return []
    return [p.strip() for p in value.split(",")]


def _validate_admission_gated_by_format(value: str) -> ErrorList:
    errs = ErrorList()
    if not value:
        return errs
    seen: set[str] = set()
    for gate in parse_csv(value):
        if not gate:
            errs.append(invalid(ADMISSION_GATED_BY_PATH, value, "cannot contain empty gate names"))
            continue
        if gate in seen:
            errs.append(invalid(ADMISSION_GATED_BY_PATH, value, f"duplicate gate name: {gate}"))
            continue
        seen.add(gate)
        errs.extend(is_domain_prefixed_path(ADMISSION_GATED_BY_PATH, gate))
        if len(gate) > c.MAX_GATE_NAME_LENGTH_FOR_ADMISSION_GATED_BY:
            errs.append(too_long(ADMISSION_GATED_BY_PATH, "",
                                 c.MAX_GATE_NAME_LENGTH_FOR_ADMISSION_GATED_BY))
    return errs


def validate_admission_gated_by_annotation_on_create(obj: Mapping[str, Any]) -> ErrorList:
    """Format of ``kueue.x-k8s.io/admission-gated-by``: non-empty, unique, domain-prefixed."""
    return _validate_admission_gated_by_format(
        annotations_of(obj).get(c.ADMISSION_GATED_BY_ANNOTATION, ""))


def validate_admission_gated_by_annotation_on_update(
    old: Mapping[str, Any], new: Mapping[str, Any]
) -> ErrorList:
    """Gates cannot be added after creation; they can only be removed."""
    old_val = annotations_of(old).get(c.ADMISSION_GATED_BY_ANNOTATION, "")
    new_val = annotations_of(new).get(c.ADMISSION_GATED_BY_ANNOTATION, "")
    errs = ErrorList()
    if not old_val and new_val:
        errs.append(forbidden(ADMISSION_GATED_BY_PATH, "cannot add admission gate after creation"))
    if old_val and new_val:
        old_gates = parse_csv(old_val)
        if any(g not in old_gates for g in parse_csv(new_val)):
            errs.append(forbidden(ADMISSION_GATED_BY_PATH,
                                  "can only remove gates, not add new ones"))
    errs.extend(_validate_admission_gated_by_format(new_val))
    return errs


def _validate_create_for_prebuilt_workload(job: GenericJob, features: FeatureGates) -> ErrorList:
    obj = job.object()
    errs = validate_prebuilt_workload_name(obj, features=features)
    if prebuilt_workload_name_for(obj, features=features):
        gvk = str(job.gvk())
        if (gvk not in SUPPORTED_PREBUILT_WORKLOAD_GVKS
                and gvk not in _DECLARED_PREBUILT_WORKLOAD_GVKS):
            errs.append(forbidden(get_prebuilt_workload_path(obj, features=features),
                                  f"Is not supported for {go_quote(gvk)}"))
    return errs


def _validate_create_for_max_exec_time(job: GenericJob) -> ErrorList:
    labels = labels_of(job.object())
    if c.MAX_EXEC_TIME_SECONDS_LABEL not in labels:
        return ErrorList()
    text = labels[c.MAX_EXEC_TIME_SECONDS_LABEL]
    try:
        value = go_atoi(text)
    except ValueError as err:
        return ErrorList([invalid(MAX_EXEC_TIME_LABEL_PATH, text, str(err))])
    if value <= 0:
        return ErrorList([invalid(MAX_EXEC_TIME_LABEL_PATH, value, "should be greater than 0")])
    return ErrorList()


def validate_job_on_create(
    job: GenericJob, *, features: FeatureGates = DEFAULT_FEATURES
) -> ErrorList:
    """Every create-time rule of Kueue's ``ValidateJobOnCreate``, in Kueue's order."""
    obj = job.object()
    errs = validate_queue_name(obj)
    errs.extend(_validate_create_for_prebuilt_workload(job, features))
    errs.extend(_validate_create_for_max_exec_time(job))
    errs.extend(validate_elastic_job_annotation(obj, job.gvk(), features=features))
    if features.enabled(FeatureGate.ADMISSION_GATED_BY):
        errs.extend(validate_admission_gated_by_annotation_on_create(obj))
    return errs


def should_validate_ray_or_spark_job_on_update(
    old_job: GenericJob, new_job: GenericJob, manage_jobs_without_queue_name: bool,
    *, features: FeatureGates = DEFAULT_FEATURES,
) -> bool:
    """Update validation applies to managed jobs, and to jobs that were managed before."""
    if manage_jobs_without_queue_name or queue_name(new_job):
        return True
    return (features.enabled(FeatureGate.VALIDATE_RAY_AND_SPARK_JOB_UPDATES)
            and queue_name(old_job) != "")


def validate_update_for_workload_priority_class_name(
    is_suspended: bool, old: Mapping[str, Any], new: Mapping[str, Any]
) -> ErrorList:
    """A priority class cannot be added to a running job, nor removed from any job."""
    if (not is_suspended and is_workload_priority_class_name_empty(old)
            and not is_workload_priority_class_name_empty(new)):
        return ErrorList([invalid(
            WORKLOAD_PRIORITY_CLASS_NAME_PATH, workload_priority_class_name(new),
            "WorkloadPriorityClass cannot be added to a non-suspended workload")])
    if (is_workload_priority_class_name_empty(new)
            and not is_workload_priority_class_name_empty(old)):
        return ErrorList([invalid(WORKLOAD_PRIORITY_CLASS_NAME_PATH,
                                  workload_priority_class_name(new),
                                  "WorkloadPriorityClass cannot be removed from a workload")])
    return ErrorList()


def validate_job_on_update(
    old_job: GenericJob,
    new_job: GenericJob,
    default_queue_exist: Callable[[str], bool],
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> ErrorList:
    """Every update-time rule of Kueue's ``ValidateJobOnUpdate``, in Kueue's order.

    ``default_queue_exist(namespace)`` tells whether the namespace has a ``default``
    LocalQueue (then the queue-name label cannot be removed).
    """
    old, new = old_job.object(), new_job.object()
    errs = ErrorList()
    # Queue name.
    if not new_job.is_suspended():
        errs.extend(validate_immutable_field(queue_name(new_job), queue_name(old_job),
                                             QUEUE_NAME_LABEL_PATH))
    if (queue_name(new_job) == "" and queue_name(old_job) != ""
            and default_queue_exist(str((old.get("metadata") or {}).get("namespace") or ""))):
        errs.append(invalid(QUEUE_NAME_LABEL_PATH, "",
                            "queue-name must not be empty in namespace with default queue"))
    # Prebuilt workload.
    if new_job.is_suspended() or workload_slice_enabled(old, features=features):
        errs.extend(_validate_create_for_prebuilt_workload(new_job, features))
    else:
        errs.extend(validate_immutable_field(
            prebuilt_workload_name_for(new, features=features),
            prebuilt_workload_name_for(old, features=features),
            get_prebuilt_workload_path(new, features=features)))
    # Maximum execution time.
    if not new_job.is_suspended() or not old_job.is_suspended():
        errs.extend(validate_immutable_field(
            labels_of(new).get(c.MAX_EXEC_TIME_SECONDS_LABEL, ""),
            labels_of(old).get(c.MAX_EXEC_TIME_SECONDS_LABEL, ""),
            MAX_EXEC_TIME_LABEL_PATH))
    # Workload priority class.
    errs.extend(validate_update_for_workload_priority_class_name(
        new_job.is_suspended(), old, new))
    # Elastic toggle.
    old_elastic = workload_slice_enabled(old, features=features)
    new_elastic = workload_slice_enabled(new, features=features)
    if old_elastic != new_elastic:
        errs.append(invalid(ELASTIC_JOB_ANNOTATION_PATH, new_elastic, FIELD_IMMUTABLE_ERROR_MSG))
    if features.enabled(FeatureGate.ADMISSION_GATED_BY):
        errs.extend(validate_admission_gated_by_annotation_on_update(old, new))
    return errs


# --- TAS annotations (tas_validation.go) ------------------------------------------------------

_TOPOLOGY_ANNOTATIONS: Final = (c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
                                c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
                                c.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION)


def _parse_int32(text: str) -> int | None:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if -(2**31) <= value < 2**31 else None


def validate_tas_pod_set_request(
    replica_path: Path, meta: Mapping[str, Any], *, features: FeatureGates = DEFAULT_FEATURES
) -> ErrorList:
    """Webhook checks of a pod template's TAS annotations (``ValidateTASPodSetRequest``).

    ``replica_path`` is the template's metadata path, e.g. ``spec.template.metadata``.
    """
    ann: Mapping[str, str] = meta.get("annotations") or {}
    required_v = ann.get(c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION)
    preferred_v = ann.get(c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION)
    slice_req_v = ann.get(c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION)
    slice_size_found = c.PODSET_SLICE_SIZE_ANNOTATION in ann
    path = replica_path.child("annotations")
    errs = ErrorList()
    if sum(k in ann for k in _TOPOLOGY_ANNOTATIONS) > 1:
        quoted = ", ".join(go_quote(k) for k in _TOPOLOGY_ANNOTATIONS)
        errs.append(invalid(path, OMIT_VALUE,
                            f"must not contain more than one topology annotation: [{quoted}]"))
    for key, value in ((c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION, required_v),
                       (c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION, preferred_v),
                       (c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, slice_req_v)):
        if value is not None:
            errs.extend(validate_label_name(value, path.key(key)))
    group_path = path.key(c.PODSET_GROUP_NAME_ANNOTATION)
    group = ann.get(c.PODSET_GROUP_NAME_ANNOTATION)
    if group is not None:
        if re.fullmatch(r"[0-9]+", group) and int(group) < 2**64:
            errs.append(invalid(group_path, group, "must not be a number"))
        if slice_size_found:
            errs.append(forbidden(
                group_path, f"may not be set when '{c.PODSET_SLICE_SIZE_ANNOTATION}' is specified"))
        if slice_req_v is not None:
            errs.append(forbidden(group_path, "may not be set when "
                                  f"'{c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION}' is specified"))
        if preferred_v is None and required_v is None:
            errs.append(forbidden(
                group_path,
                f"may not be set when neither '{c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION}' nor "
                f"'{c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION}' is specified"))
    unconstrained = ann.get(c.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION)
    if unconstrained is not None and unconstrained not in (
            "1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"):
        errs.append(invalid(path.key(c.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION), unconstrained,
                            "must be a boolean value"))
    size_path = path.key(c.PODSET_SLICE_SIZE_ANNOTATION)
    if slice_size_found:
        text = ann[c.PODSET_SLICE_SIZE_ANNOTATION]
        size = _parse_int32(text)
        if size is None:
            errs.append(invalid(size_path, text, "must be a numeric value"))
        elif size < 1:
            errs.append(invalid(size_path, text, "must be greater than or equal to 1"))
    if slice_req_v is not None and not slice_size_found:
        errs.append(required(size_path, "must be set when "
                             f"'{c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION}' is specified"))
    if slice_req_v is None and slice_size_found:
        errs.append(forbidden(size_path, "may not be set when "
                              f"'{c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION}' is not specified"))
    errs.extend(_validate_topology_constraints(
        path, ann, slice_req_v is not None, slice_size_found, group is not None, features))
    return errs


def _validate_topology_constraints(
    path: Path, ann: Mapping[str, str], slice_required: bool, slice_size: bool,
    group_name: bool, features: FeatureGates,
) -> ErrorList:
    key = c.PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION
    if key not in ann:
        return ErrorList()
    text = ann[key]
    fld = path.key(key)
    if not features.enabled(FeatureGate.TAS_MULTI_LAYER_TOPOLOGY):
        return ErrorList([forbidden(fld, "the TASMultiLayerTopology feature gate must be "
                                         "enabled to use this annotation")])
    errs = ErrorList()
    if slice_required:
        errs.append(forbidden(fld, "may not be set when "
                              f"'{c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION}' is specified"))
    if slice_size:
        errs.append(forbidden(
            fld, f"may not be set when '{c.PODSET_SLICE_SIZE_ANNOTATION}' is specified"))
    if group_name:
        errs.append(forbidden(path.key(c.PODSET_GROUP_NAME_ANNOTATION),
                              f"may not be set when '{key}' is specified"))
    try:
        raw = json.loads(text)
        if raw is None:
            raw = []
        if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
            raise ValueError("cannot unmarshal into an array of topology constraints")
        constraints = [(str(e.get("topology") or ""), _json_int32(e.get("size"))) for e in raw]
    except (ValueError, TypeError) as err:
        errs.append(invalid(fld, text, f"must be a valid JSON array: {err}"))
        return errs
    if not 1 <= len(constraints) <= 3:
        errs.append(invalid(fld, text, "topology constraints must contain between 1 and 3 entries"))
        return errs
    for i, (topology, size) in enumerate(constraints):
        entry = fld.index_(i)
        errs.extend(validate_label_name(topology, entry.child("topology")))
        if size < 1:
            errs.append(invalid(entry.child("size"), size, "must be greater than or equal to 1"))
    seen: dict[str, int] = {}
    for i, (topology, _) in enumerate(constraints):
        if topology in seen:
            errs.append(duplicate(fld.index_(i).child("topology"),
                                  f"{topology} (also at index {seen[topology]})"))
        else:
            seen[topology] = i
    for i in range(len(constraints) - 1):
        parent, child = constraints[i][1], constraints[i + 1][1]
        if child > 0 and parent % child != 0:
            errs.append(invalid(fld.index_(i + 1).child("size"), child,
                                f"must evenly divide the parent layer size {parent}"))
    return errs


def _json_int32(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise TypeError(f"cannot unmarshal {json.dumps(value)} into an int32 size")
    return value


def validate_slice_size_annotation_upper_bound(
    replica_path: Path, meta: Mapping[str, Any], pod_set: Any
) -> ErrorList:
    """Slice sizes may not exceed the pod set's count (``ValidateSliceSizeAnnotationUpperBound``).

    ``pod_set`` is a :class:`~jobframework.api.PodSet` (or None: nothing to check).
    """
    if pod_set is None:
        return ErrorList()
    ann: Mapping[str, str] = meta.get("annotations") or {}
    path = replica_path.child("annotations")
    count = int(pod_set.count)
    errs = ErrorList()
    if c.PODSET_SLICE_SIZE_ANNOTATION in ann:
        text = ann[c.PODSET_SLICE_SIZE_ANNOTATION]
        size = _parse_int32(text)
        size_path = path.key(c.PODSET_SLICE_SIZE_ANNOTATION)
        if size is None:
            return ErrorList([invalid(size_path, text, "must be a numeric value")])
        if size > count:
            errs.append(invalid(size_path, text, f"must not be greater than pod set count {count}"))
    key = c.PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION
    if key in ann:
        try:
            raw = json.loads(ann[key])
            first = _json_int32(raw[0].get("size")) if isinstance(raw, list) and raw else None
        except (ValueError, TypeError, AttributeError):
            first = None
        if first is not None and first > count:
            errs.append(invalid(path.key(key), first,
                                f"must not be greater than pod set count {count}"))
    return errs


# --- pod group spec immutability (ValidateImmutablePodGroupPodSpec) -------------------------

_QUANTITY_SUFFIXES: Final[dict[str, decimal.Decimal]] = {
    "Ki": decimal.Decimal(2**10), "Mi": decimal.Decimal(2**20), "Gi": decimal.Decimal(2**30),
    "Ti": decimal.Decimal(2**40), "Pi": decimal.Decimal(2**50), "Ei": decimal.Decimal(2**60),
    "n": decimal.Decimal("1e-9"), "u": decimal.Decimal("1e-6"), "m": decimal.Decimal("1e-3"),
    "": decimal.Decimal(1), "k": decimal.Decimal(10**3), "M": decimal.Decimal(10**6),
    "G": decimal.Decimal(10**9), "T": decimal.Decimal(10**12), "P": decimal.Decimal(10**15),
    "E": decimal.Decimal(10**18),
}
_QUANTITY_RE: Final = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)")


def quantity_value(q: Any) -> decimal.Decimal | None:
    """The numeric value of a ``resource.Quantity`` (``"100m"``, ``"1Gi"``, ``2``), or None."""
    if isinstance(q, bool):
        return None
    if isinstance(q, int | float):
        return decimal.Decimal(str(q))
    if not isinstance(q, str):
        return None
    m = _QUANTITY_RE.fullmatch(q.strip())
    if m is None:
        return None
    number, exponent, suffix = m.groups()
    value = decimal.Decimal(number)
    if exponent:
        return value.scaleb(int(exponent[1:]))
    return value * _QUANTITY_SUFFIXES[suffix or ""]


def _empty(v: Any) -> bool:
    return v is None or v == [] or v == {}


def semantic_equal(a: Any, b: Any, *, quantities: bool = False) -> bool:
    """apimachinery's ``equality.Semantic.DeepEqual`` on JSON: nil equals empty; with
    ``quantities``, map values compare as resource quantities."""
    if _empty(a) and _empty(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return False
        return all(semantic_equal(a[k], b[k], quantities=quantities) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(semantic_equal(x, y, quantities=quantities)
                                        for x, y in zip(a, b, strict=True))
    if quantities:
        qa, qb = quantity_value(a), quantity_value(b)
        if qa is not None and qb is not None:
            return qa == qb
    return bool(a == b)


_QUANTITY_FIELDS: Final = frozenset({"requests", "overhead", "resources"})


def _containers_shape(containers: Any) -> list[dict[str, Any]] | None:
    if not containers:
        return None
    return [{"resources": {"requests": (c.get("resources") or {}).get("requests")},
             "ports": c.get("ports")} for c in containers]


def pod_spec_shape(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue's ``SpecShape``: the pod spec parts that must not change for a pod group."""
    shape: dict[str, Any] = {
        "initContainers": _containers_shape(spec.get("initContainers")),
        "containers": _containers_shape(spec.get("containers")),
        "nodeSelector": spec.get("nodeSelector"),
        "affinity": spec.get("affinity"),
        "tolerations": spec.get("tolerations"),
        "runtimeClassName": spec.get("runtimeClassName"),
        "priority": spec.get("priority"),
        "topologySpreadConstraints": spec.get("topologySpreadConstraints"),
        "overhead": spec.get("overhead"),
        "resourceClaims": spec.get("resourceClaims"),
    }
    # Pod-level resources count only when set, so older role hashes stay stable.
    if spec.get("resources") is not None:
        shape["resources"] = (spec.get("resources") or {}).get("requests")
    return shape


def _immutable(new: Any, old: Any, path: Path, quantities: bool) -> ErrorList:
    if semantic_equal(new, old, quantities=quantities):
        return ErrorList()
    return ErrorList([invalid(path, new, FIELD_IMMUTABLE_ERROR_MSG)])


def _validate_shape(new: Mapping[str, Any], old: Mapping[str, Any], path: Path) -> ErrorList:
    errs = ErrorList()
    # Go walks the keys in map order (random); a fixed order keeps messages reproducible.
    keys = list(new) + [k for k in old if k not in new]
    for key in keys:
        child = path.child(key)
        new_v, old_v = new.get(key), old.get(key)
        if key in ("containers", "initContainers"):
            new_l, old_l = new_v or [], old_v or []
            if len(new_l) != len(old_l):
                errs.extend(_immutable(new_v, old_v, child, True))
                continue
            for i, (n, o) in enumerate(zip(new_l, old_l, strict=True)):
                item = child.index_(i)
                errs.extend(_immutable(n["resources"]["requests"], o["resources"]["requests"],
                                       item.child("resources", "requests"), True))
                errs.extend(_immutable(n["ports"], o["ports"], item.child("ports"), False))
        else:
            errs.extend(_immutable(new_v, old_v, child, key in _QUANTITY_FIELDS))
    return errs


def validate_immutable_pod_group_pod_spec(
    new_spec: Mapping[str, Any], old_spec: Mapping[str, Any], path: Path
) -> ErrorList:
    """Serving pod groups may not change their pod spec *shape* (requests, ports, node
    selection, tolerations, priority...); images may change (``ValidateImmutablePodGroupPodSpec``).
    """
    return _validate_shape(pod_spec_shape(new_spec), pod_spec_shape(old_spec), path)


def validate_pod_set_grouping_topology(
    pod_sets: list[Any], annotations_path_by_name: Mapping[str, Path]
) -> ErrorList:
    """``podset-group-name`` groups: exactly 2 pod sets, one with a single replica, and the
    same required/preferred topology (``ValidatePodSetGroupingTopology``).

    ``pod_sets`` are :class:`~jobframework.api.PodSet`; ``annotations_path_by_name`` maps a
    pod set name to its template annotations path.
    """
    groups: dict[str, list[Any]] = {}
    for ps in pod_sets:
        req = ps.topology_request
        if req is None or req.pod_set_group_name is None:
            continue
        groups.setdefault(req.pod_set_group_name, []).append(ps)
    errs = ErrorList()
    for name, members in groups.items():
        if len(members) != 2:
            for ps in members:
                errs.append(invalid(
                    annotations_path_by_name[ps.name].key(c.PODSET_GROUP_NAME_ANNOTATION), name,
                    f"can only define groups of exactly 2 pod sets, got: {len(members)} "
                    "pod set(s)"))
            continue
        first, second = members
        path1 = annotations_path_by_name[first.name]
        path2 = annotations_path_by_name[second.name]
        if first.count != 1 and second.count != 1:
            msg = ("can only define groups where at least one pod set has only 1 replica, got: "
                   f"{first.count} replica(s) and {second.count} replica(s) in the group")
            errs.append(invalid(path1.key(c.PODSET_GROUP_NAME_ANNOTATION), name, msg))
            errs.append(invalid(path2.key(c.PODSET_GROUP_NAME_ANNOTATION), name, msg))
        r1, r2 = first.topology_request, second.topology_request
        consistent = (
            (r1.required is not None or r1.preferred is not None)
            and (r2.required is not None or r2.preferred is not None)
            and r1.required == r2.required and r1.preferred == r2.preferred
        )
        if not consistent:
            errs.append(invalid(path1, OMIT_VALUE, _group_topology_msg(path2, name)))
            errs.append(invalid(path2, OMIT_VALUE, _group_topology_msg(path1, name)))
    return errs


def _group_topology_msg(other: Path, group: str) -> str:
    return (f"must specify '{c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION}' or "
            f"'{c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION}' topology consistent with "
            f"'{other}' in group '{group}'")
