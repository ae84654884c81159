"""LocalQueue, ClusterQueue, AdmissionCheck, ResourceFlavor, WorkloadPriorityClass (v1beta2).

Only the fields the jobframework reads are typed; everything else is kept as extras.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .. import constants as c
from .base import KueueModel, ObjectMeta, TypedObject
from .conditions import Condition


class LocalQueueSpec(KueueModel):
    """``LocalQueue.spec``."""

    cluster_queue: str | None = None
    stop_policy: str | None = None
    fair_sharing: dict[str, Any] | None = None


class LocalQueueStatus(KueueModel):
    """``LocalQueue.status`` (counters and usage kept loosely typed)."""

    conditions: list[Condition] | None = None
    pending_workloads: int | None = None
    reserving_workloads: int | None = None
    admitted_workloads: int | None = None
    flavors_reservation: list[dict[str, Any]] | None = None
    flavors_usage: list[dict[str, Any]] | None = None
    fair_sharing: dict[str, Any] | None = None


class LocalQueue(TypedObject):
    """A namespaced queue pointing at a ClusterQueue."""

    api_version: str | None = c.KUEUE_API_VERSION
    kind: str | None = "LocalQueue"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LocalQueueSpec = Field(default_factory=LocalQueueSpec)
    status: LocalQueueStatus | None = None


class AdmissionCheckStrategyRule(KueueModel):
    """``admissionChecksStrategy.admissionChecks[]``."""

    name: str | None = None
    on_flavors: list[str] | None = None


class AdmissionChecksStrategy(KueueModel):
    """``ClusterQueue.spec.admissionChecksStrategy``."""

    admission_checks: list[AdmissionCheckStrategyRule] | None = None


class ClusterQueueSpec(KueueModel):
    """``ClusterQueue.spec``; quotas and policies are kept as raw JSON."""

    resource_groups: list[dict[str, Any]] | None = None
    cohort_name: str | None = None
    queueing_strategy: str | None = None
    namespace_selector: dict[str, Any] | None = None
    flavor_fungibility: dict[str, Any] | None = None
    preemption: dict[str, Any] | None = None
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    stop_policy: str | None = None
    fair_sharing: dict[str, Any] | None = None


class ClusterQueueStatus(KueueModel):
    """``ClusterQueue.status``."""

    conditions: list[Condition] | None = None
    flavors_reservation: list[dict[str, Any]] | None = None
    flavors_usage: list[dict[str, Any]] | None = None
    pending_workloads: int | None = None
    reserving_workloads: int | None = None
    admitted_workloads: int | None = None
    fair_sharing: dict[str, Any] | None = None


class ClusterQueue(TypedObject):
    """A cluster-scoped pool of quota."""

    api_version: str | None = c.KUEUE_API_VERSION
    kind: str | None = "ClusterQueue"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus | None = None

    def admission_check_names(self) -> list[str]:
        """Names in ``spec.admissionChecksStrategy.admissionChecks``."""
        strategy = self.spec.admission_checks_strategy
        return [r.name for r in (strategy.admission_checks if strategy else None) or []
                if r.name]


class AdmissionCheckSpec(KueueModel):
    """``AdmissionCheck.spec``."""

    controller_name: str | None = None
    parameters: dict[str, Any] | None = None


class AdmissionCheck(TypedObject):
    """A cluster-scoped admission check, served by ``spec.controllerName``."""

    api_version: str | None = c.KUEUE_API_VERSION
    kind: str | None = "AdmissionCheck"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: AdmissionCheckSpec = Field(default_factory=AdmissionCheckSpec)
    status: dict[str, Any] | None = None


class ResourceFlavorSpec(KueueModel):
    """``ResourceFlavor.spec``: node labels and tolerations injected at start."""

    node_labels: dict[str, str] | None = None
    node_taints: list[dict[str, Any]] | None = None
    tolerations: list[dict[str, Any]] | None = None
    topology_name: str | None = None


class ResourceFlavor(TypedObject):
    """A cluster-scoped flavor of resources."""

    api_version: str | None = c.KUEUE_API_VERSION
    kind: str | None = "ResourceFlavor"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)


class WorkloadPriorityClass(TypedObject):
    """A cluster-scoped priority for workloads (``value`` is top-level, not in a spec)."""

    api_version: str | None = c.KUEUE_API_VERSION
    kind: str | None = "WorkloadPriorityClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    value: int | None = None
    description: str | None = None
