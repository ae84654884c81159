"""Every string Kueue's jobframework writes or reads, spelled exactly as in Kueue v0.19/v0.20.

Labels, annotations, finalizers, scheduling gates, condition types and reasons, event
reasons, field managers, error messages, and the feature gates that change the
jobframework's behaviour, with each Kueue version's defaults (its *version profile*:
:class:`KueueVersion`, :class:`VersionProfile`; v0.19, i.e. v0.19.2, unless named).

A Kueue operator must not be able to tell our objects from Go-made ones, so nothing
here may be reworded.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from types import MappingProxyType

# --- API group --------------------------------------------------------------------------

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
KUEUE_API_VERSION = f"{KUEUE_GROUP}/{KUEUE_VERSION}"

# --- Labels and annotations on jobs (pkg/controller/constants) -------------------------

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
DEFAULT_LOCAL_QUEUE_NAME = "default"
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
PREBUILT_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/prebuilt-workload-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
WORKLOAD_PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
DEFAULT_WORKLOAD_PRIORITY_CLASS_NAME = "default"
PROV_REQ_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"
MAX_EXEC_TIME_SECONDS_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
SAFE_TO_FORCEFULLY_DELETE_ANNOTATION_KEY = "kueue.x-k8s.io/safe-to-forcefully-delete"
SAFE_TO_FORCEFULLY_DELETE_ANNOTATION_VALUE = "true"
JOB_OWNER_GVK_ANNOTATION = "kueue.x-k8s.io/job-owner-gvk"
JOB_OWNER_NAME_ANNOTATION = "kueue.x-k8s.io/job-owner-name"
COMPONENT_WORKLOAD_INDEX_ANNOTATION = "kueue.x-k8s.io/component-workload-index"
MULTIKUEUE_PREEMPTION_GATE = "kueue.x-k8s.io/multikueue"
CONCURRENT_ADMISSION_PREEMPTION_GATE = "kueue.x-k8s.io/concurrent-admission"
PRIORITY_BOOST_ANNOTATION_KEY = "kueue.x-k8s.io/priority-boost"
WORKLOAD_ALLOWED_RESOURCE_FLAVOR_ANNOTATION = "kueue.x-k8s.io/workload-allowed-resource-flavors"
CONCURRENT_ADMISSION_PARENT_LABEL_KEY = "kueue.x-k8s.io/concurrent-admission-parent"
MANAGED_BY_KUEUE_LABEL_KEY = "kueue.x-k8s.io/managed"
MANAGED_BY_KUEUE_LABEL_VALUE = "true"
ADMISSION_GATED_BY_ANNOTATION = "kueue.x-k8s.io/admission-gated-by"
#: Longest gate name allowed in ``kueue.x-k8s.io/admission-gated-by`` (as Job ``managedBy``).
MAX_GATE_NAME_LENGTH_FOR_ADMISSION_GATED_BY = 63

# --- Labels and annotations injected into pod templates at start ------------------------

PODSET_LABEL = "kueue.x-k8s.io/podset"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
WORKLOAD_SLICE_NAME_ANNOTATION = "kueue.x-k8s.io/workload-slice-name"
MULTIKUEUE_WORKER_WORKLOAD_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"

# --- Elastic jobs (workload slices) ------------------------------------------------------

ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
ELASTIC_JOB_ANNOTATION_VALUE = "true"
WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION = "kueue.x-k8s.io/workload-slice-replacement-for"

# --- Finalizers, default names, scheduling gates ----------------------------------------

RESOURCE_IN_USE_FINALIZER_NAME = "kueue.x-k8s.io/resource-in-use"
DEFAULT_PODSET_NAME = "main"
ELASTIC_JOB_SCHEDULING_GATE = "kueue.x-k8s.io/elastic-job"
TOPOLOGY_SCHEDULING_GATE = "kueue.x-k8s.io/topology"
POD_ADMISSION_SCHEDULING_GATE = "kueue.x-k8s.io/admission"
#: Maximum number of pod sets in a Workload.
MAX_POD_SETS = 18

# --- TAS annotations on pod templates ----------------------------------------------------

PODSET_REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PODSET_PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"
PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-slice-required-topology"
PODSET_SLICE_SIZE_ANNOTATION = "kueue.x-k8s.io/podset-slice-size"
PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION = (
    "kueue.x-k8s.io/podset-slice-required-topology-constraints"
)
PODSET_GROUP_NAME_ANNOTATION = "kueue.x-k8s.io/podset-group-name"
POD_INDEX_OFFSET_ANNOTATION = "kueue.x-k8s.io/pod-index-offset"
POD_GROUP_POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index"
POD_GROUP_POD_INDEX_LABEL_ANNOTATION = "kueue.x-k8s.io/pod-group-pod-index-label"

# --- MultiKueue ---------------------------------------------------------------------------

MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
MULTIKUEUE_ORIGIN_UID_ANNOTATION = "kueue.x-k8s.io/multikueue-origin-uid"
#: ``spec.managedBy`` value and the MultiKueue admission check controller name.
MULTIKUEUE_CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"

# --- Pod groups ---------------------------------------------------------------------------

GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_NAME_ANNOTATION = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
GROUP_FAST_ADMISSION_ANNOTATION_KEY = "kueue.x-k8s.io/pod-group-fast-admission"
GROUP_SERVING_ANNOTATION_KEY = "kueue.x-k8s.io/pod-group-serving"
ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
RETRIABLE_IN_GROUP_ANNOTATION_KEY = "kueue.x-k8s.io/retriable-in-group"
IS_GROUP_WORKLOAD_ANNOTATION_KEY = "kueue.x-k8s.io/is-group-workload"
IS_GROUP_WORKLOAD_ANNOTATION_VALUE = "true"
SUSPENDED_BY_PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"

# --- batch/v1 Job integration ------------------------------------------------------------

JOB_MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"
STOPPING_ANNOTATION = "kueue.x-k8s.io/stopping"

#: ``integrations.frameworks`` default.
DEFAULT_FRAMEWORK = "batch/job"

# --- Controller names / field managers ---------------------------------------------------

KUEUE_NAME = "kueue"
JOB_CONTROLLER_NAME = "kueue-job-controller"
ADMISSION_NAME = "kueue-admission"
RECLAIMABLE_PODS_MANAGER = "kueue-reclaimable-pods"
PODS_READY_FIELD_MANAGER = "kueue-job-controller-PodsReady"


def custom_conditions_field_manager(kind: str) -> str:
    """Field manager for custom workload conditions: ``kueue-<lower(kind)>-controller``."""
    return f"kueue-{kind.lower()}-controller"


# --- Workload condition types (apis/kueue/v1beta2) ---------------------------------------

WORKLOAD_ADMITTED = "Admitted"
WORKLOAD_BLOCKED_ON_PREEMPTION_GATES = "BlockedOnPreemptionGates"
WORKLOAD_QUOTA_RESERVED = "QuotaReserved"
WORKLOAD_FINISHED = "Finished"
WORKLOAD_PODS_READY = "PodsReady"
WORKLOAD_EVICTED = "Evicted"
WORKLOAD_PREEMPTED = "Preempted"
WORKLOAD_REQUEUED = "Requeued"
WORKLOAD_DEACTIVATION_TARGET = "DeactivationTarget"
WORKLOAD_WAITING_FOR_REPLACEMENT_PODS = "WaitingForReplacementPods"

# QuotaReserved reasons.
QUOTA_RESERVED_REASON_NO_MATCHING_FLAVOR = "NoMatchingFlavor"
QUOTA_RESERVED_REASON_WAITING_FOR_QUOTA = "WaitingForQuota"
QUOTA_RESERVED_REASON_EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
QUOTA_RESERVED_REASON_TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
QUOTA_RESERVED_REASON_WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"
QUOTA_RESERVED_REASON_MISCONFIGURED = "Misconfigured"
QUOTA_RESERVED_REASON_SUSPENDED = "Suspended"
QUOTA_RESERVED_REASON_PENDING_EVALUATION = "PendingEvaluation"
QUOTA_RESERVED_REASON_WAITING_FOR_PODS_READY = "WaitingForPodsReady"
QUOTA_RESERVED_REASON_QUOTA_RESERVED = "QuotaReserved"
WORKLOAD_INADMISSIBLE = "Inadmissible"
WORKLOAD_ON_HOLD = "OnHold"
WORKLOAD_PENDING = "Pending"
WORKLOAD_WAITING = "Waiting"
WORKLOAD_ADMISSION_GATED = "AdmissionGated"

# Admitted reasons.
ADMITTED_REASON_ADMITTED = "Admitted"
ADMITTED_REASON_NO_RESERVATION = "NoReservation"
ADMITTED_REASON_UNSATISFIED_ADMISSION_CHECKS = "UnsatisfiedAdmissionChecks"
ADMITTED_REASON_UNSATISFIED_CHECKS = "UnsatisfiedChecks"
ADMITTED_REASON_NO_RESERVATION_UNSATISFIED_CHECKS = "NoReservationUnsatisfiedChecks"
ADMITTED_REASON_PENDING_DELAYED_TOPOLOGY_REQUESTS = "PendingDelayedTopologyRequests"

# Evicted reasons.
EVICTED_BY_PREEMPTION = "Preempted"
EVICTED_BY_FLAVOR_MIGRATION = "FlavorMigration"
EVICTED_BY_PODS_READY_TIMEOUT = "PodsReadyTimeout"
EVICTED_BY_ADMISSION_CHECK = "AdmissionCheck"
EVICTED_BY_CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
EVICTED_BY_LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
EVICTED_DUE_TO_NODE_FAILURES = "NodeFailures"
EVICTED_ON_MANAGER_CLUSTER = "EvictedOnManagerCluster"
WORKLOAD_SLICE_REPLACED = "WorkloadSliceReplaced"
WORKLOAD_DEACTIVATED = "Deactivated"
#: Prefix of Evicted reasons set when Kueue itself deactivates a workload.
DEACTIVATED_DUE_TO_PREFIX = "DeactivatedDueTo"

# Requeued reasons.
WORKLOAD_REACTIVATED = "Reactivated"
WORKLOAD_BACKOFF_FINISHED = "BackoffFinished"
WORKLOAD_CLUSTER_QUEUE_RESTARTED = "ClusterQueueRestarted"
WORKLOAD_LOCAL_QUEUE_RESTARTED = "LocalQueueRestarted"

# DeactivationTarget reasons.
WORKLOAD_REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
WORKLOAD_MAXIMUM_EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"

# Preempted reasons.
IN_CLUSTER_QUEUE_REASON = "InClusterQueue"
IN_COHORT_RECLAMATION_REASON = "InCohortReclamation"
IN_COHORT_FAIR_SHARING_REASON = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING_REASON = "InCohortReclaimWhileBorrowing"

# BlockedOnPreemptionGates reason.
PREEMPTION_GATED = "PreemptionGated"

# PodsReady reasons.
WORKLOAD_WAIT_FOR_START = "WaitForStart"
WORKLOAD_WAIT_FOR_RECOVERY = "WaitForRecovery"
WORKLOAD_STARTED = "Started"
WORKLOAD_RECOVERED = "Recovered"

# Finished reasons.
FINISHED_REASON_SUCCEEDED = "Succeeded"
FINISHED_REASON_FAILED = "Failed"
FINISHED_REASON_OUT_OF_SYNC = "OutOfSync"
FINISHED_REASON_OWNER_NOT_FOUND = "OwnerNotFound"
#: Finished reason when starting a job failed permanently (jobframework).
FAILED_TO_START_FINISHED_REASON = "FailedToStart"

# --- Condition and event messages the jobframework writes --------------------------------

MSG_QUOTA_RESERVED = "Quota reserved in ClusterQueue {}"
MSG_ADMITTED = "The workload is admitted"
MSG_NO_RESERVATION = "The workload has no reservation"
MSG_NO_RESERVATION_UNSATISFIED_CHECKS = "The workload has no reservation and not all checks ready"
MSG_OWNER_NOT_FOUND = "The workload's owner no longer exists"
MSG_PREBUILT_OUT_OF_SYNC = "The prebuilt workload is out of sync with its user job"
MSG_SLICE_OUT_OF_SYNC = "The workload slice is out of sync with its parent job"
MSG_SLICE_REPLACED = "Replaced to accommodate a new workload slice"
MSG_JOB_ON_HOLD = "Job is on hold"
MSG_PODS_READY_WAIT_FOR_START = "Not all pods are ready or succeeded"
MSG_PODS_READY_RUNNING = "All pods reached readiness and the workload is running"
MSG_PODS_READY_WAIT_FOR_RECOVERY = "At least one pod has failed, waiting for recovery"
MSG_WORKLOAD_DELETED = "Workload is deleted"
MSG_NOT_ADMITTED = "Not admitted by cluster queue"
MSG_MISSING_WORKLOAD = "Missing Workload; unable to restore pod templates"
MSG_NO_MATCHING_WORKLOAD = (
    "No matching Workload; restoring pod templates according to existent Workload"
)
MSG_PREBUILT_MISSING = "missing workload"
MSG_CHILD_JOB_SUSPENDED = "Kueue managed child job suspended"
MSG_JOB_NESTING_TOO_DEEP = (
    "Terminated search for Kueue-managed Job because ancestor depth exceeded limit of 10"
)
MSG_DEACTIVATION_RETENTION_DELETED = "Deleted job: deactivation retention period expired"
MSG_ADMITTED_BY_CLUSTER_QUEUE = "Admitted by clusterQueue {}"
MSG_CREATED_WORKLOAD = "Created Workload: {}"
MSG_DELETED_NOT_MATCHING_WORKLOAD = "Deleted not matching Workload: {}"
MSG_UPDATED_NOT_MATCHING_WORKLOAD = "Updated not matching Workload for suspended job: {}"
MSG_UPDATED_PRIORITY_CLASS = "Updated workload priority class: {}"
MSG_UPDATED_ADMISSION_GATED_BY = 'Updated workload AdmissionGatedBy to "{}"'
MSG_WORKLOAD_FINISHED = "Workload '{}' is declared finished"
MSG_WPC_NOT_FOUND = 'WorkloadPriorityClass "{}" not found'

# --- Event reasons (events.go) -------------------------------------------------------------

REASON_STARTED = "Started"
REASON_SUSPENDED = "Suspended"
REASON_STOPPED = "Stopped"
REASON_DELETED = "Deleted"
REASON_CREATED_WORKLOAD = "CreatedWorkload"
REASON_DELETED_WORKLOAD = "DeletedWorkload"
REASON_UPDATED_WORKLOAD = "UpdatedWorkload"
REASON_FINISHED_WORKLOAD = "FinishedWorkload"
REASON_ERR_WORKLOAD_COMPOSE = "ErrWorkloadCompose"
REASON_UPDATED_ADMISSION_CHECK = "UpdatedAdmissionCheck"
REASON_JOB_NESTING_TOO_DEEP = "JobNestingTooDeep"
REASON_WORKLOAD_PRIORITY_CLASS_NOT_FOUND = "WorkloadPriorityClassNotFound"

# --- Priority classes -----------------------------------------------------------------------

WORKLOAD_PRIORITY_CLASS_GROUP = "kueue.x-k8s.io"
WORKLOAD_PRIORITY_CLASS_KIND = "WorkloadPriorityClass"
POD_PRIORITY_CLASS_GROUP = "scheduling.k8s.io"
POD_PRIORITY_CLASS_KIND = "PriorityClass"

# --- Admission check states ------------------------------------------------------------------

CHECK_STATE_PENDING = "Pending"
CHECK_STATE_READY = "Ready"
CHECK_STATE_RETRY = "Retry"
CHECK_STATE_REJECTED = "Rejected"

# --- Limits -----------------------------------------------------------------------------------

#: Event messages are truncated to this many bytes (``" ..."`` replaces the tail).
MAX_EVENT_MESSAGE_SIZE = 1024
#: Condition messages are truncated to this many bytes.
MAX_CONDITION_MESSAGE_SIZE = 32 * 1024
#: Longest ancestor chain FindAncestorJobManagedByKueue walks.
MANAGED_OWNERS_CHAIN_LIMIT = 10
#: Kubernetes label value limit (also the short workload-name limit).
LABEL_VALUE_MAX_LENGTH = 63


def _truncate_message(message: str, limit: int) -> str:
    raw = message.encode()
    if len(raw) <= limit:
        return message
    suffix = b" ..."
    # Go slices bytes; a cut rune is dropped rather than emitting invalid UTF-8.
    return (raw[: limit - len(suffix)] + suffix).decode("utf-8", "ignore")


def truncate_event_message(message: str) -> str:
    """Kueue's ``TruncateEventMessage``: at most 1024 bytes, ending in ``" ..."`` if cut."""
    return _truncate_message(message, MAX_EVENT_MESSAGE_SIZE)


def truncate_condition_message(message: str) -> str:
    """Kueue's ``TruncateConditionMessage``: at most 32 KiB, ending in ``" ..."`` if cut."""
    return _truncate_message(message, MAX_CONDITION_MESSAGE_SIZE)


# --- Feature gates --------------------------------------------------------------------------


class FeatureGate(enum.StrEnum):
    """Kueue feature gates that change jobframework behaviour (names as in Kueue)."""

    SHORT_WORKLOAD_NAMES = "ShortWorkloadNames"
    WORKLOAD_IDENTIFIER_ANNOTATIONS = "WorkloadIdentifierAnnotations"
    ADMISSION_GATED_BY = "AdmissionGatedBy"
    FINISH_ORPHANED_WORKLOADS = "FinishOrphanedWorkloads"
    PARTIAL_ADMISSION = "PartialAdmission"
    RECLAIMABLE_PODS = "ReclaimablePods"
    TOPOLOGY_AWARE_SCHEDULING = "TopologyAwareScheduling"
    ELASTIC_JOBS_VIA_WORKLOAD_SLICES = "ElasticJobsViaWorkloadSlices"
    MULTIKUEUE = "MultiKueue"
    ASSIGN_QUEUE_LABELS_FOR_PODS = "AssignQueueLabelsForPods"
    WORKLOAD_PRIORITY_CLASS_DEFAULTING = "WorkloadPriorityClassDefaulting"
    SKIP_ANCESTOR_CHECK_FOR_DELETED_WORKLOADS = "SkipAncestorCheckForDeletedWorkloads"
    SKIP_REASSIGNMENT_FOR_POD_OWNED_WORKLOADS = "SkipReassignmentForPodOwnedWorkloads"
    UNADMITTED_WORKLOADS_OBSERVABILITY = "UnadmittedWorkloadsObservability"
    UNADMITTED_WORKLOADS_EXPLICIT_STATUS = "UnadmittedWorkloadsExplicitStatus"
    CUSTOM_METRIC_LABELS = "CustomMetricLabels"
    METRIC_FOR_WORKLOAD_CREATION_LATENCY = "MetricForWorkloadCreationLatency"
    DISABLE_WAIT_FOR_PODS_READY = "DisableWaitForPodsReady"
    WORKLOAD_REQUEST_USE_MERGE_PATCH = "WorkloadRequestUseMergePatch"
    TAS_MULTI_LAYER_TOPOLOGY = "TASMultiLayerTopology"
    VALIDATE_RAY_AND_SPARK_JOB_UPDATES = "ValidateRayAndSparkJobUpdates"


class KueueVersion(enum.StrEnum):
    """The Kueue release we run beside: its *version profile* decides every behaviour that
    differs between releases (feature-gate defaults first, then reasons and events).

    ``V0_19`` is exactly Kueue v0.19.2, the version our local control plane pins;
    ``MAIN`` is Kueue's unreleased main branch as this library first ported it.
    """

    V0_19 = "v0.19"
    MAIN = "main"


#: The profile used when none is named: the Kueue our local control plane pins (v0.19.2).
DEFAULT_KUEUE_VERSION = KueueVersion.V0_19

# Kueue's main branch at the ported commit.
_MAIN_FEATURE_GATES: dict[FeatureGate, bool] = {
    FeatureGate.SHORT_WORKLOAD_NAMES: False,
    FeatureGate.WORKLOAD_IDENTIFIER_ANNOTATIONS: True,
    FeatureGate.ADMISSION_GATED_BY: True,
    FeatureGate.FINISH_ORPHANED_WORKLOADS: True,
    FeatureGate.PARTIAL_ADMISSION: True,
    FeatureGate.RECLAIMABLE_PODS: True,
    FeatureGate.TOPOLOGY_AWARE_SCHEDULING: True,
    FeatureGate.ELASTIC_JOBS_VIA_WORKLOAD_SLICES: True,
    FeatureGate.MULTIKUEUE: True,
    FeatureGate.ASSIGN_QUEUE_LABELS_FOR_PODS: True,
    FeatureGate.WORKLOAD_PRIORITY_CLASS_DEFAULTING: True,
    FeatureGate.SKIP_ANCESTOR_CHECK_FOR_DELETED_WORKLOADS: True,
    FeatureGate.SKIP_REASSIGNMENT_FOR_POD_OWNED_WORKLOADS: True,
    FeatureGate.UNADMITTED_WORKLOADS_OBSERVABILITY: True,
    FeatureGate.UNADMITTED_WORKLOADS_EXPLICIT_STATUS: False,
    FeatureGate.CUSTOM_METRIC_LABELS: False,
    FeatureGate.METRIC_FOR_WORKLOAD_CREATION_LATENCY: True,
    FeatureGate.DISABLE_WAIT_FOR_PODS_READY: False,
    FeatureGate.WORKLOAD_REQUEST_USE_MERGE_PATCH: False,
    FeatureGate.TAS_MULTI_LAYER_TOPOLOGY: True,
    FeatureGate.VALIDATE_RAY_AND_SPARK_JOB_UPDATES: True,
}


@dataclasses.dataclass(frozen=True)
class VersionProfile:
    """What one Kueue release does where releases differ.

    Gate-driven behaviour follows :attr:`feature_gates` (the release's defaults, which
    explicit :class:`FeatureGates` overrides still beat); the flags cover the rest.
    """

    version: KueueVersion
    #: The release's default for every :class:`FeatureGate`.
    feature_gates: Mapping[FeatureGate, bool]
    #: A job labelled with a missing WorkloadPriorityClass gets a Warning
    #: ``WorkloadPriorityClassNotFound`` event (main); v0.19.2 only returns the NotFound.
    records_priority_class_not_found: bool
    #: ``SyncAdmittedCondition`` as v0.19.2 writes it: with ``UnadmittedWorkloadsObservability``
    #: off, unready checks give ``Admitted`` reason ``UnsatisfiedChecks``; with it on,
    #: ``Admitted`` is re-derived on every call unless neither ``QuotaReserved`` nor
    #: ``Admitted`` exists yet (and ``UnadmittedWorkloadsExplicitStatus`` is off).
    admitted_sync_follows_observability: bool


#: Every version profile. v0.19.2's gate defaults are the last spec of each gate in its
#: ``pkg/features/kube_features.go`` (Kueue's binary version is above every spec's, so the
#: newest one applies).
VERSION_PROFILES: Mapping[KueueVersion, VersionProfile] = MappingProxyType({
    KueueVersion.V0_19: VersionProfile(
        version=KueueVersion.V0_19,
        feature_gates=MappingProxyType({
            **_MAIN_FEATURE_GATES,
            # Both still default off (Alpha / Beta-off) in v0.19.2.
            FeatureGate.WORKLOAD_PRIORITY_CLASS_DEFAULTING: False,
            FeatureGate.UNADMITTED_WORKLOADS_OBSERVABILITY: False,
        }),
        records_priority_class_not_found=False,
        admitted_sync_follows_observability=True,
    ),
    KueueVersion.MAIN: VersionProfile(
        version=KueueVersion.MAIN,
        feature_gates=MappingProxyType(dict(_MAIN_FEATURE_GATES)),
        records_priority_class_not_found=True,
        admitted_sync_follows_observability=False,
    ),
})

#: Kueue's defaults for :class:`FeatureGate`, per version profile.
FEATURE_GATE_DEFAULTS: Mapping[KueueVersion, Mapping[FeatureGate, bool]] = MappingProxyType({
    v: p.feature_gates for v, p in VERSION_PROFILES.items()})

#: Kueue's defaults for :class:`FeatureGate` in the default profile (v0.19.2).
DEFAULT_FEATURE_GATES: Mapping[FeatureGate, bool] = FEATURE_GATE_DEFAULTS[DEFAULT_KUEUE_VERSION]


class FeatureGates:
    """An immutable set of gate values for one version profile; unset gates take that
    Kueue version's default.

    Passed explicitly to every function whose behaviour depends on a gate or on the Kueue
    version, so there is no process-wide mutable gate state (Kueue keeps one; tests here
    simply build another). Build with Kueue's gate names and, optionally, the Kueue
    version we run beside (default :data:`DEFAULT_KUEUE_VERSION`, v0.19):
    ``FeatureGates(ShortWorkloadNames=True, version=KueueVersion.MAIN)``.
    """

    __slots__ = ("_resolved", "_values", "_version")

    def __init__(
        self, overrides: Mapping[FeatureGate | str, bool] | None = None, *,
        version: KueueVersion | str = DEFAULT_KUEUE_VERSION, **gates: bool,
    ) -> None:
        values = {FeatureGate(k): bool(v) for k, v in (overrides or {}).items()}
        values.update({FeatureGate(k): bool(v) for k, v in gates.items()})
        self._values: Mapping[FeatureGate, bool] = MappingProxyType(values)
        self._version = KueueVersion(version)
        # Every gate's value, resolved once: gates are read many times per reconcile.
        self._resolved: dict[FeatureGate, bool] = {
            **VERSION_PROFILES[self._version].feature_gates, **values}

    @property
    def overrides(self) -> Mapping[FeatureGate, bool]:
        """The gates set explicitly."""
        return self._values

    @property
    def version(self) -> KueueVersion:
        """The Kueue version whose defaults and behaviour apply."""
        return self._version

    @property
    def profile(self) -> VersionProfile:
        """The :class:`VersionProfile` of :attr:`version`."""
        return VERSION_PROFILES[self._version]

    def enabled(self, gate: FeatureGate) -> bool:
        """The gate's value (override, else the version's default)."""
        return self._resolved[gate]

    def with_gates(self, **gates: bool) -> FeatureGates:
        """A copy with more gates set by their Kueue names (same version)."""
        merged: dict[FeatureGate | str, bool] = {k: v for k, v in self._values.items()}
        merged.update({FeatureGate(k): v for k, v in gates.items()})
        return FeatureGates(merged, version=self._version)

    def with_version(self, version: KueueVersion | str) -> FeatureGates:
        """A copy with the same overrides for another Kueue version."""
        same: dict[FeatureGate | str, bool] = {k: v for k, v in self._values.items()}
        return FeatureGates(same, version=version)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FeatureGates):
            return NotImplemented
        return self._version == other._version and all(
            self.enabled(g) == other.enabled(g) for g in FeatureGate)

    def __hash__(self) -> int:
        return hash((self._version, *(self.enabled(g) for g in FeatureGate)))

    def __repr__(self) -> str:
        parts = [f"{k.value}={v}" for k, v in self._values.items()]
        if self._version != DEFAULT_KUEUE_VERSION:
            parts.append(f"version={self._version.value!r}")
        return f"FeatureGates({', '.join(parts)})"


#: Kueue's default gates and behaviour for the default version (v0.19.2).
DEFAULT_FEATURES = FeatureGates()
