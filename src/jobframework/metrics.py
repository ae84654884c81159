"""Kueue's job metrics: the Prometheus series Kueue's jobframework records (``pkg/metrics``).

Kueue v0.19.2's generic job reconciler records two families, with Kueue's names, labels
and buckets:

- ``kueue_workload_creation_latency_seconds{job_kind,replica_role}``: from the job's
  creation to its Workload's, for jobs of generation 1 only, when a Workload is created
  (gate ``MetricForWorkloadCreationLatency``, on by default); buckets
  ``ExponentialBuckets(0.01, 2, 11)``;
- time to ready, when the reconciler first writes ``PodsReady=True`` with reason
  ``Started`` (``waitForPodsReady``): ``kueue_ready_wait_time_seconds`` (created or
  requeued → ready) and ``kueue_admitted_until_ready_wait_time_seconds`` (admitted →
  ready), labelled ``{cluster_queue,priority_class,replica_role}``, and their LocalQueue
  twins ``kueue_local_queue_ready_wait_time_seconds`` and
  ``kueue_local_queue_admitted_until_ready_wait_time_seconds`` labelled
  ``{name,namespace,priority_class,replica_role}``; buckets ``[1, 2.5, 5, ... 10240]``
  (Kueue's ``generateExponentialBuckets(14)``).

``replica_role`` is ``standalone`` unless a role function says otherwise (Kueue's
``roletracker``: ``leader``/``follower`` in HA mode). The ``CustomMetricLabels`` gate's
extra labels (alpha, off in v0.19.2) are not ported.

One :class:`JobMetrics` per Prometheus registry: :func:`job_metrics_for` hands out the one
of a registry (a manager's, so ``/metrics`` serves them).
"""

from __future__ import annotations

import datetime as dt
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from prometheus_client import CollectorRegistry, Histogram

from . import constants as c
from .api.conditions import find_condition
from .api.workload import Workload
from .constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from .runtime.client import Reader
from .runtime.clock import Clock, parse_time
from .runtime.objects import GVK, Object, labels_of
from .runtime.selectors import LabelSelector

__all__ = [
    "KUEUE_SUBSYSTEM",
    "LOCAL_QUEUE_GVK",
    "ROLE_FOLLOWER",
    "ROLE_LEADER",
    "ROLE_STANDALONE",
    "WAIT_TIME_BUCKETS",
    "WORKLOAD_CREATION_LATENCY_BUCKETS",
    "JobMetrics",
    "LocalQueueMetricsConfig",
    "generate_exponential_buckets",
    "job_metrics_for",
    "queued_wait_time",
    "record_workload_creation_latency",
    "should_expose_local_queue_metrics_for_workload",
]

log = logging.getLogger(__name__)

#: The subsystem (name prefix) of Kueue's metrics.
KUEUE_SUBSYSTEM = "kueue"
#: ``replica_role`` values (Kueue's ``roletracker``).
ROLE_LEADER = "leader"
ROLE_FOLLOWER = "follower"
ROLE_STANDALONE = "standalone"

LOCAL_QUEUE_GVK = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "LocalQueue")


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus' ``ExponentialBuckets``: ``count`` bounds from ``start``, each ``factor``
    times the previous."""
    out: list[float] = []
    bound = start
    for _ in range(count):
        out.append(bound)
        bound *= factor
    return tuple(out)


def generate_exponential_buckets(count: int) -> tuple[float, ...]:
    """Kueue's wait-time buckets: ``1`` then ``ExponentialBuckets(2.5, 2, count-1)``."""
    return (1.0, *exponential_buckets(2.5, 2, count - 1))


#: Buckets of the ``*ready_wait_time_seconds`` histograms.
WAIT_TIME_BUCKETS: tuple[float, ...] = generate_exponential_buckets(14)
#: Buckets of ``kueue_workload_creation_latency_seconds``.
WORKLOAD_CREATION_LATENCY_BUCKETS: tuple[float, ...] = exponential_buckets(0.01, 2, 11)

_CQ_LABELS = ("cluster_queue", "priority_class", "replica_role")
_LQ_LABELS = ("name", "namespace", "priority_class", "replica_role")


@attrs.frozen
class LocalQueueMetricsConfig:
    """``metrics.localQueueMetrics`` with the ``LocalQueueMetrics`` gate (on in v0.19.2):
    whether LocalQueue series are recorded, and for which LocalQueues (None: all)."""

    enabled: bool = True
    queue_selector: LabelSelector | None = None


class JobMetrics:
    """Kueue's job-reconciler histograms, registered in :attr:`registry`."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        role: Callable[[], str] | None = None,
        local_queue_metrics: LocalQueueMetricsConfig | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._role = role
        self.local_queue_metrics = (local_queue_metrics if local_queue_metrics is not None
                                    else LocalQueueMetricsConfig())
        reg = self.registry
        self.queued_until_ready_wait_time = Histogram(
            "ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready, "
            "per 'cluster_queue'",
            _CQ_LABELS, subsystem=KUEUE_SUBSYSTEM, buckets=WAIT_TIME_BUCKETS, registry=reg,
        )
        self.admitted_until_ready_wait_time = Histogram(
            "admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready, per 'cluster_queue'",
            _CQ_LABELS, subsystem=KUEUE_SUBSYSTEM, buckets=WAIT_TIME_BUCKETS, registry=reg,
        )
        self.local_queue_queued_until_ready_wait_time = Histogram(
            "local_queue_ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready, "
            "per 'local_queue'",
            _LQ_LABELS, subsystem=KUEUE_SUBSYSTEM, buckets=WAIT_TIME_BUCKETS, registry=reg,
        )
        self.local_queue_admitted_until_ready_wait_time = Histogram(
            "local_queue_admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready, per 'local_queue'",
            _LQ_LABELS, subsystem=KUEUE_SUBSYSTEM, buckets=WAIT_TIME_BUCKETS, registry=reg,
        )
        self.workload_creation_latency = Histogram(
            "workload_creation_latency_seconds",
            "The time between a job was created until its workload was created, per "
            "'job_kind'. Entries are only recorded for objects with generation 1.",
            ("job_kind", "replica_role"), subsystem=KUEUE_SUBSYSTEM,
            buckets=WORKLOAD_CREATION_LATENCY_BUCKETS, registry=reg,
        )

    @property
    def role(self) -> str:
        """The ``replica_role`` label value now."""
        return self._role() if self._role is not None else ROLE_STANDALONE

    def record_workload_creation_latency(self, job_kind: str, latency: float) -> None:
        """Observe one job → Workload creation latency, in seconds."""
        self.workload_creation_latency.labels(job_kind, self.role).observe(latency)

    def ready_wait_time(self, cluster_queue: str, priority_class: str, seconds: float) -> None:
        """Observe ``kueue_ready_wait_time_seconds`` (``ReadyWaitTime``)."""
        self.queued_until_ready_wait_time.labels(
            cluster_queue, priority_class, self.role).observe(seconds)

    def report_admitted_until_ready_wait_time(
        self, cluster_queue: str, priority_class: str, seconds: float
    ) -> None:
        """Observe ``kueue_admitted_until_ready_wait_time_seconds``."""
        self.admitted_until_ready_wait_time.labels(
            cluster_queue, priority_class, self.role).observe(seconds)

    def local_queue_ready_wait_time(
        self, name: str, namespace: str, priority_class: str, seconds: float
    ) -> None:
        """Observe ``kueue_local_queue_ready_wait_time_seconds``."""
        self.local_queue_queued_until_ready_wait_time.labels(
            name, namespace, priority_class, self.role).observe(seconds)

    def report_local_queue_admitted_until_ready_wait_time(
        self, name: str, namespace: str, priority_class: str, seconds: float
    ) -> None:
        """Observe ``kueue_local_queue_admitted_until_ready_wait_time_seconds``."""
        self.local_queue_admitted_until_ready_wait_time.labels(
            name, namespace, priority_class, self.role).observe(seconds)

    def sample(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """The value of one exposed sample (e.g. ``..._seconds_count``), None if absent."""
        return self.registry.get_sample_value(name, dict(labels or {}))

    async def record_pods_ready(
        self, reader: Reader, wl: Workload, ready_at: dt.datetime, clock: Clock
    ) -> None:
        """Record the time-to-ready series of a Workload whose pods just became ready
        for the first time (the reconciler's ``PodsReady=True``/``Started`` step)."""
        if wl.status is None or wl.status.admission is None:
            return
        cq = wl.status.admission.cluster_queue or ""
        ref = wl.spec.priority_class_ref
        priority_class = (ref.name or "") if ref is not None else ""
        queued = queued_wait_time(wl, clock)
        self.ready_wait_time(cq, priority_class, queued)
        admitted = find_condition(wl.conditions(), c.WORKLOAD_ADMITTED)
        since_admitted = 0.0
        if admitted is not None and admitted.last_transition_time:
            since_admitted = (ready_at - parse_time(admitted.last_transition_time)
                              ).total_seconds()
        self.report_admitted_until_ready_wait_time(cq, priority_class, since_admitted)
        if await should_expose_local_queue_metrics_for_workload(
                reader, wl, self.local_queue_metrics):
            namespace = wl.metadata.namespace or ""
            name = wl.spec.queue_name or ""
            self.local_queue_ready_wait_time(name, namespace, priority_class, queued)
            self.report_local_queue_admitted_until_ready_wait_time(
                name, namespace, priority_class, since_admitted)


_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, JobMetrics] = (
    weakref.WeakKeyDictionary())


def job_metrics_for(registry: CollectorRegistry, **kwargs: Any) -> JobMetrics:
    """The :class:`JobMetrics` of ``registry``, created (with ``kwargs``) on first use, so
    every reconciler of one manager shares the collectors its ``/metrics`` serves."""
    found = _BY_REGISTRY.get(registry)
    if found is None:
        found = _BY_REGISTRY[registry] = JobMetrics(registry, **kwargs)
    return found


def queued_wait_time(wl: Workload, clock: Clock) -> float:
    """Seconds since the Workload was created, or last requeued (``QueuedWaitTime``)."""
    requeued = find_condition(wl.conditions(), c.WORKLOAD_REQUEUED)
    since = (requeued.last_transition_time if requeued is not None
             else wl.metadata.creation_timestamp)
    if not since:
        return 0.0
    return (clock.now() - parse_time(since)).total_seconds()


async def should_expose_local_queue_metrics_for_workload(
    reader: Reader, wl: Workload, config: LocalQueueMetricsConfig
) -> bool:
    """Whether the LocalQueue series are recorded for ``wl``
    (``Cache.ShouldExposeLocalQueueMetricsForWorkload``).

    Enabled, the Workload admitted, its LocalQueue found feeding the admitting
    ClusterQueue, and the LocalQueue's labels matching the selector. Read errors count
    as no (Kueue logs them too).
    """
    if not config.enabled:
        return False
    if wl.status is None or wl.status.admission is None:
        return False
    try:
        lq: Object = await reader.get(LOCAL_QUEUE_GVK, wl.spec.queue_name or "",
                                      namespace=wl.metadata.namespace)
    except Exception as err:
        log.debug("failed to get the LocalQueue of %s for metrics: %s", wl.name, err)
        return False
    if ((lq.get("spec") or {}).get("clusterQueue") or "") != wl.status.admission.cluster_queue:
        return False
    return config.queue_selector is None or config.queue_selector.matches(labels_of(lq))


def record_workload_creation_latency(
    metrics: JobMetrics,
    job: Object,
    job_kind: str,
    wl: Workload,
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> None:
    """Observe the time from the job's creation to its Workload's
    (``RecordWorkloadCreationLatency``).

    Nothing with ``MetricForWorkloadCreationLatency`` off, or when the job's generation is
    above 1 (its spec changed since creation, so the delay says nothing about Kueue).
    """
    if not features.enabled(FeatureGate.METRIC_FOR_WORKLOAD_CREATION_LATENCY):
        return
    meta = job.get("metadata") or {}
    if int(meta.get("generation") or 0) > 1:
        log.debug("not recording the workload creation latency: generation %s > 1",
                  meta.get("generation"))
        return
    if not meta.get("creationTimestamp") or not wl.metadata.creation_timestamp:
        log.debug("not recording the workload creation latency: no creation timestamp")
        return
    job_created = parse_time(meta["creationTimestamp"])
    wl_created = parse_time(wl.metadata.creation_timestamp)
    metrics.record_workload_creation_latency(job_kind,
                                             (wl_created - job_created).total_seconds())
