"""Prometheus series of the webhook server, with controller-runtime's names.

- ``controller_runtime_webhook_requests_total{webhook,code}``: requests by HTTP status;
- ``controller_runtime_webhook_latency_seconds{webhook}``: histogram of handling time;
- ``controller_runtime_webhook_requests_in_flight{webhook}``: requests being served.

``webhook`` is the registered path. Pass a manager's registry to expose them on its
``/metrics`` endpoint; by default each server has a registry of its own.
"""

from __future__ import annotations

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

    def register_path(self, path: str) -> None:
        """Start the likely series of ``path`` at zero, as controller-runtime does."""
        self.requests_total.labels(path, "200")
        self.requests_total.labels(path, "500")
        self.requests_in_flight.labels(path)
