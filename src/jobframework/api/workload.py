"""Kueue ``Workload`` (``kueue.x-k8s.io/v1beta2``), after ``apis/kueue/v1beta2/workload_types.go``.

Pod templates stay plain dicts (``PodSet.template``) so every pod field survives untouched.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .. import constants as c
from .base import KueueModel, ObjectMeta, ResourceList, TypedObject
from .conditions import Condition, find_condition, is_condition_true


class PriorityClassRef(KueueModel):
    """``spec.priorityClassRef``: a WorkloadPriorityClass or a pod PriorityClass."""

    group: str | None = None
    kind: str | None = None
    name: str | None = None


class PodsetSliceRequiredTopologyConstraint(KueueModel):
    """One layer of ``podsetSliceRequiredTopologyConstraints``."""

    topology: str | None = None
    size: int | None = None


class PodSetTopologyRequest(KueueModel):
    """``podSets[].topologyRequest`` (TAS)."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None
    pod_set_group_name: str | None = None
    pod_set_slice_required_topology: str | None = None
    pod_set_slice_size: int | None = None
    podset_slice_required_topology_constraints: (
        list[PodsetSliceRequiredTopologyConstraint] | None
    ) = Field(default=None, alias="podsetSliceRequiredTopologyConstraints")


class PodSet(KueueModel):
    """``spec.podSets[]``: a group of identical pods; ``template`` is a raw PodTemplateSpec."""

    name: str | None = None
    template: dict[str, Any] = Field(default_factory=dict)
    count: int = 1
    min_count: int | None = None
    topology_request: PodSetTopologyRequest | None = None


class PreemptionGate(KueueModel):
    """``spec.preemptionGates[]``."""

    name: str


class WorkloadSpec(KueueModel):
    """``Workload.spec``."""

    pod_sets: list[PodSet] = Field(default_factory=list)
    queue_name: str | None = None
    priority_class_ref: PriorityClassRef | None = None
    priority: int | None = None
    active: bool | None = None
    maximum_execution_time_seconds: int | None = None
    preemption_gates: list[PreemptionGate] | None = None


class TopologyAssignmentSliceLevelIndividualValues(KueueModel):
    """Per-domain values of one topology level."""

    prefix: str | None = None
    suffix: str | None = None
    roots: list[str] | None = None


class TopologyAssignmentSliceLevelValues(KueueModel):
    """Values of one level in a topology assignment slice."""

    universal: str | None = None
    individual: TopologyAssignmentSliceLevelIndividualValues | None = None


class TopologyAssignmentSlicePodCounts(KueueModel):
    """Pod counts per domain of a slice."""

    universal: int | None = None
    individual: list[int] | None = None


class TopologyAssignmentSlice(KueueModel):
    """A compressed run of topology domains."""

    domain_count: int | None = None
    values_per_level: list[TopologyAssignmentSliceLevelValues] | None = None
    pod_counts: TopologyAssignmentSlicePodCounts | None = None


class TopologyAssignment(KueueModel):
    """``podSetAssignments[].topologyAssignment``."""

    levels: list[str] | None = None
    slices: list[TopologyAssignmentSlice] | None = None


class PodSetAssignment(KueueModel):
    """``status.admission.podSetAssignments[]``."""

    name: str
    flavors: dict[str, str] | None = None
    resource_usage: ResourceList | None = None
    count: int | None = None
    topology_assignment: TopologyAssignment | None = None
    delayed_topology_request: str | None = None


class Admission(KueueModel):
    """``status.admission``: the ClusterQueue and per-podset flavors."""

    cluster_queue: str
    pod_set_assignments: list[PodSetAssignment] = Field(default_factory=list)


class RequeueState(KueueModel):
    """``status.requeueState`` (backoff after PodsReady timeouts)."""

    count: int | None = None
    requeue_at: str | None = None


class ReclaimablePod(KueueModel):
    """``status.reclaimablePods[]``."""

    name: str
    count: int


class PodSetUpdate(KueueModel):
    """``admissionChecks[].podSetUpdates[]``: what a check injects into a pod set."""

    name: str
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    node_selector: dict[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = None


class AdmissionCheckState(KueueModel):
    """``status.admissionChecks[]``."""

    name: str | None = None
    state: str | None = None
    last_transition_time: str | None = None
    message: str | None = None
    requeue_after_seconds: int | None = None
    retry_count: int | None = None
    pod_set_updates: list[PodSetUpdate] | None = None


class PodSetRequest(KueueModel):
    """``status.resourceRequests[]``."""

    name: str
    resources: ResourceList | None = None


class WorkloadSchedulingStatsEviction(KueueModel):
    """``status.schedulingStats.evictions[]``."""

    reason: str
    underlying_cause: str
    count: int


class SchedulingStats(KueueModel):
    """``status.schedulingStats``."""

    evictions: list[WorkloadSchedulingStatsEviction] | None = None


class UnhealthyNode(KueueModel):
    """``status.unhealthyNodes[]``."""

    name: str


class PreemptionGateState(KueueModel):
    """``status.preemptionGates[]``."""

    name: str
    position: str | None = None
    last_transition_time: str | None = None


class WorkloadStatus(KueueModel):
    """``Workload.status``."""

    conditions: list[Condition] | None = None
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    reclaimable_pods: list[ReclaimablePod] | None = None
    admission_checks: list[AdmissionCheckState] | None = None
    resource_requests: list[PodSetRequest] | None = None
    accumulated_past_execution_time_seconds: int | None = None
    scheduling_stats: SchedulingStats | None = None
    nominated_cluster_names: list[str] | None = None
    cluster_name: str | None = None
    unhealthy_nodes: list[UnhealthyNode] | None = None
    preemption_gates: list[PreemptionGateState] | None = None


class Workload(TypedObject):
    """A Kueue Workload: the unit of admission for one job."""

    api_version: str | None = c.KUEUE_API_VERSION
    kind: str | None = "Workload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)
    status: WorkloadStatus | None = None

    # --- pkg/workload helpers (read-only) -------------------------------------------------

    def conditions(self) -> list[Condition]:
        """``status.conditions`` (empty when unset)."""
        return (self.status.conditions if self.status else None) or []

    def find_condition(self, type_: str) -> Condition | None:
        """The condition of ``type_``, or None."""
        return find_condition(self.conditions(), type_)

    def is_admitted(self) -> bool:
        """``Admitted=True``."""
        return is_condition_true(self.conditions(), c.WORKLOAD_ADMITTED)

    def has_quota_reservation(self) -> bool:
        """``QuotaReserved=True``."""
        return is_condition_true(self.conditions(), c.WORKLOAD_QUOTA_RESERVED)

    def is_finished(self) -> bool:
        """``Finished=True``."""
        return is_condition_true(self.conditions(), c.WORKLOAD_FINISHED)

    def is_evicted(self) -> bool:
        """``Evicted=True``."""
        return is_condition_true(self.conditions(), c.WORKLOAD_EVICTED)

    def is_active(self) -> bool:
        """``spec.active`` unset or true."""
        return self.spec.active is None or self.spec.active

    def is_evicted_due_to_deactivation_by_kueue(self) -> bool:
        """Evicted with a ``DeactivatedDueTo...`` reason (Kueue deactivated it itself)."""
        cond = self.find_condition(c.WORKLOAD_EVICTED)
        return (cond is not None and cond.status == "True"
                and (cond.reason or "").startswith(c.DEACTIVATED_DUE_TO_PREFIX))

    def can_be_partially_admitted(self) -> bool:
        """Some pod set has ``count > minCount``."""
        return any(ps.min_count is not None and ps.count > ps.min_count
                   for ps in self.spec.pod_sets)


class WorkloadList(KueueModel):
    """A list of Workloads."""

    api_version: str | None = None
    kind: str | None = None
    metadata: dict[str, Any] | None = None
    items: list[Workload] = Field(default_factory=list)
