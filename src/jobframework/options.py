"""The options of job reconcilers and webhooks: Kueue's jobframework ``Options``.

:class:`ReconcilerOptions` is what :func:`~jobframework.reconciler.new_reconciler`, the
reconciler factories and :func:`~jobframework.reconciler.setup_controllers` take;
:func:`~jobframework.config.reconciler_options_from` builds it from Kueue's
Configuration. It lives below both so that neither imports the other; every name is
re-exported by :mod:`jobframework.reconciler`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

import attrs

from . import constants as c
from .constants import DEFAULT_FEATURES, FeatureGates
from .integrations import IntegrationManager
from .metrics import JobMetrics, LocalQueueMetricsConfig
from .runtime.clock import Clock, RealClock
from .runtime.selectors import LabelSelector

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ReconcilerOptionOverrides",
    "ReconcilerOptions",
    "WorkloadRetentionPolicy",
    "process_options",
]


@attrs.frozen
class WorkloadRetentionPolicy:
    """``objectRetentionPolicies.workloads``: seconds after a deactivation by Kueue before
    the job is deleted (None: never)."""

    after_deactivated_by_kueue: float | None = None


def _frozen(values: Any) -> frozenset[str]:
    return frozenset(values or ())


@attrs.frozen(kw_only=True)
class ReconcilerOptions:
    """Kueue's ``Options`` for job reconcilers and webhooks, in Python style."""

    manage_jobs_without_queue_name: bool = False
    #: Only namespaces whose labels match are managed (None: every namespace).
    managed_jobs_namespace_selector: LabelSelector | None = None
    #: Write the ``PodsReady`` condition (``waitForPodsReady`` configured).
    wait_for_pods_ready: bool = False
    kube_server_version: str | None = None
    #: Per-integration options keyed ``"<group>/<version>, Kind=<Kind>"``.
    integration_options: Mapping[str, Any] = attrs.field(factory=dict)
    enabled_frameworks: frozenset[str] | None = None
    enabled_external_frameworks: frozenset[str] | None = None
    manager_name: str = c.KUEUE_NAME
    #: Job labels copied to new Workloads.
    label_keys_to_copy: frozenset[str] = attrs.field(default=frozenset(), converter=_frozen)
    #: Job annotations copied to new Workloads (with the ``CustomMetricLabels`` gate).
    annotations_to_copy: frozenset[str] = attrs.field(default=frozenset(), converter=_frozen)
    clock: Clock = attrs.field(factory=RealClock)
    workload_retention_policy: WorkloadRetentionPolicy | None = None
    integration_manager: IntegrationManager | None = None
    features: FeatureGates = DEFAULT_FEATURES
    #: Queue lookups for managedBy defaulting and default LocalQueues (webhooks).
    queues: Any = None
    #: Register a no-op webhook (for disabled integrations).
    noop_webhook: bool = False
    #: Kueue's job metrics (None: the manager's registry once set up with a manager, else
    #: a registry of the reconciler's own).
    metrics: JobMetrics | None = None
    #: ``metrics.localQueueMetrics`` for the metrics the reconciler creates (None: every
    #: LocalQueue); ignored when ``metrics`` is given.
    local_queue_metrics: LocalQueueMetricsConfig | None = None


class ReconcilerOptionOverrides(TypedDict, total=False):
    """The keyword overrides :func:`process_options` and the factories accept: exactly
    :class:`ReconcilerOptions`' fields, so a type checker catches a misspelt option."""

    manage_jobs_without_queue_name: bool
    managed_jobs_namespace_selector: LabelSelector | None
    wait_for_pods_ready: bool
    kube_server_version: str | None
    integration_options: Mapping[str, Any]
    enabled_frameworks: frozenset[str] | None
    enabled_external_frameworks: frozenset[str] | None
    manager_name: str
    label_keys_to_copy: frozenset[str]
    annotations_to_copy: frozenset[str]
    clock: Clock
    workload_retention_policy: WorkloadRetentionPolicy | None
    integration_manager: IntegrationManager | None
    features: FeatureGates
    queues: Any
    noop_webhook: bool
    metrics: JobMetrics | None
    local_queue_metrics: LocalQueueMetricsConfig | None


def process_options(
    options: ReconcilerOptions | None = None, **overrides: Unpack[ReconcilerOptionOverrides]
) -> ReconcilerOptions:
    """Options with ``overrides`` applied (``ProcessOptions``)."""
    base = options or ReconcilerOptions()
    return attrs.evolve(base, **overrides) if overrides else base
