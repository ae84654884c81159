"""Prometheus metrics with controller-runtime's names, one registry per manager.

controller-runtime registers its collectors in a process-global registry; here every
:class:`Metrics` owns a ``prometheus_client.CollectorRegistry`` so two managers in one
process (or one test run) never share or collide. The series:

- ``controller_runtime_reconcile_total{controller,result}`` with ``result`` one of
  ``success``, ``error``, ``requeue``, ``requeue_after``;
- ``controller_runtime_reconcile_errors_total{controller}`` (exceptions, terminal included);
- ``controller_runtime_terminal_reconcile_errors_total{controller}``;
- ``controller_runtime_reconcile_time_seconds{controller}`` (histogram);
- ``controller_runtime_max_concurrent_reconciles{controller}``,
  ``controller_runtime_active_workers{controller}`` (gauges);
- ``workqueue_*{name,controller}``: the queue series of client-go (see
  :class:`WorkqueueMetricsProvider`);
- ``leader_election_master_status{name}``: 1 while this process holds the lease.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .workqueue._metrics import (
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    SettableGaugeMetric,
)

__all__ = [
    "CONTENT_TYPE_LATEST",
    "RECONCILE_TIME_BUCKETS",
    "WORKQUEUE_DURATION_BUCKETS",
    "Metrics",
    "WorkqueueMetricsProvider",
]

#: controller-runtime's buckets for ``controller_runtime_reconcile_time_seconds``.
RECONCILE_TIME_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0,
    10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
)

#: ``prometheus.ExponentialBuckets(10e-9, 10, 12)``, as the workqueue histograms use.
WORKQUEUE_DURATION_BUCKETS: tuple[float, ...] = tuple(1e-8 * 10**i for i in range(12))


class Metrics:
    """The collectors of one manager, registered in :attr:`registry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        reg = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"], registry=reg,
        )
        self.reconcile_errors_total = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"], registry=reg,
        )
        self.terminal_reconcile_errors_total = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            ["controller"], registry=reg,
        )
        self.reconcile_time_seconds = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"], buckets=RECONCILE_TIME_BUCKETS, registry=reg,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"], registry=reg,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"], registry=reg,
        )
        labels = ["name", "controller"]
        self.workqueue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", labels, registry=reg,
        )
        self.workqueue_adds_total = Counter(
            "workqueue_adds", "Total number of adds handled by workqueue", labels,
            registry=reg,
        )
        self.workqueue_queue_duration_seconds = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels, buckets=WORKQUEUE_DURATION_BUCKETS, registry=reg,
        )
        self.workqueue_work_duration_seconds = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            labels, buckets=WORKQUEUE_DURATION_BUCKETS, registry=reg,
        )
        self.workqueue_unfinished_work_seconds = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads.",
            labels, registry=reg,
        )
        self.workqueue_longest_running_processor_seconds = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels, registry=reg,
        )
        self.workqueue_retries_total = Counter(
            "workqueue_retries", "Total number of retries handled by workqueue", labels,
            registry=reg,
        )
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, "
            "0 indicates backup, 1 indicates master.",
            ["name"], registry=reg,
        )

    def workqueue_provider(self) -> WorkqueueMetricsProvider:
        """A queue metrics provider writing into this registry."""
        return WorkqueueMetricsProvider(self)

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """The current value of one sample (``None`` if it does not exist yet).

        ``name`` is the sample name as exposed, e.g. ``controller_runtime_reconcile_total``
        or ``controller_runtime_reconcile_time_seconds_count``.
        """
        return self.registry.get_sample_value(name, labels or {})

    def exposition(self) -> bytes:
        """The registry in Prometheus text format (what ``/metrics`` serves)."""
        return generate_latest(self.registry)


class WorkqueueMetricsProvider:
    """Adapts :class:`Metrics` to the work queue's metrics-provider hook.

    The ``controller`` label is the queue name, as controller-runtime sets it.
    """

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics

    def new_depth_metric(self, name: str) -> GaugeMetric:
        """``workqueue_depth``."""
        return self._m.workqueue_depth.labels(name, name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        """``workqueue_adds_total``."""
        return self._m.workqueue_adds_total.labels(name, name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        """``workqueue_queue_duration_seconds``."""
        return self._m.workqueue_queue_duration_seconds.labels(name, name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        """``workqueue_work_duration_seconds``."""
        return self._m.workqueue_work_duration_seconds.labels(name, name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """``workqueue_unfinished_work_seconds``."""
        return self._m.workqueue_unfinished_work_seconds.labels(name, name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """``workqueue_longest_running_processor_seconds``."""
        return self._m.workqueue_longest_running_processor_seconds.labels(name, name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        """``workqueue_retries_total``."""
        return self._m.workqueue_retries_total.labels(name, name)
