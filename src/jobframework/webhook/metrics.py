"""Prometheus series of the webhook server, with controller-runtime's names.

- ``controller_runtime_webhook_requests_total{webhook,code}``: requests by HTTP status;
- ``controller_runtime_webhook_latency_seconds{webhook}``: histogram of handling time;
- ``controller_runtime_webhook_requests_in_flight{webhook}``: requests being served.

``webhook`` is the registered path. Pass a manager's registry to expose them on its
``/metrics`` endpoint; by default each server has a registry of its own.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

#: ``prometheus.ExponentialBuckets(10e-9, 10, 12)``, as controller-runtime uses.
LATENCY_BUCKETS: tuple[float, ...] = tuple(1e-8 * 10**i for i in range(12))


class WebhookMetrics:
    """The webhook collectors, registered in :attr:`registry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests_total = Counter(
            "controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code.",
            ["webhook", "code"], registry=self.registry,
        )
        self.latency_seconds = Histogram(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            ["webhook"], buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.requests_in_flight = Gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            ["webhook"], registry=self.registry,
        )
        self._paths: dict[str, PathSeries] = {}

    def for_path(self, path: str) -> PathSeries:
        """``path``'s series, looked up once: ``labels()`` takes a lock and builds a key
        on every call, three times per admission request otherwise."""
        series = self._paths.get(path)
        if series is None:
            series = self._paths[path] = PathSeries(self, path)
        return series

    def register_path(self, path: str) -> None:
        """Start the likely series of ``path`` at zero, as controller-runtime does."""
        self.requests_total.labels(path, "200")
        self.requests_total.labels(path, "500")
        self.requests_in_flight.labels(path)


class PathSeries:
    """The series of one webhook path (children of :class:`WebhookMetrics`' collectors)."""

    def __init__(self, metrics: WebhookMetrics, path: str) -> None:
        self.path = path
        self.in_flight = metrics.requests_in_flight.labels(path)
        self.latency = metrics.latency_seconds.labels(path)
        self._requests_total = metrics.requests_total
        self._totals: dict[int, Any] = {}

    def requests_total(self, status: int) -> Any:
        """The ``requests_total`` child of HTTP status ``status``."""
        child = self._totals.get(status)
        if child is None:
            child = self._totals[status] = self._requests_total.labels(self.path, str(status))
        return child
