"""Work queue metrics hooks, shaped like client-go's ``workqueue.MetricsProvider``.

A queue asks its provider for one metric object per series when it is built, then
only calls ``inc``/``dec``/``set``/``observe`` on them: a Prometheus adapter creates
labelled children in the ``new_*`` methods and the queue stays ignorant of Prometheus.
Unnamed queues (``name=""``) never ask the provider, as in client-go.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class GaugeMetric(Protocol):
    """A gauge moved up and down (``workqueue_depth``)."""

    def inc(self) -> None:
        """Add one."""

    def dec(self) -> None:
        """Subtract one."""


@runtime_checkable
class SettableGaugeMetric(Protocol):
    """A gauge set to an absolute value (unfinished work, longest running processor)."""

    def set(self, value: float) -> None:
        """Set the current value."""


@runtime_checkable
class CounterMetric(Protocol):
    """A monotonic counter (``workqueue_adds_total``, ``workqueue_retries_total``)."""

    def inc(self) -> None:
        """Add one."""


@runtime_checkable
class HistogramMetric(Protocol):
    """A distribution of durations in seconds."""

    def observe(self, value: float) -> None:
        """Record one observation (seconds)."""


@runtime_checkable
class QueueMetricsProvider(Protocol):
    """Creates the metrics of one named queue. Each method receives the queue's name.

    The series, with the names client-go (and controller-runtime, which adds a
    ``controller`` label equal to ``name``) registers them under:

    - ``workqueue_depth`` (gauge): items waiting to be handed out by ``get``;
    - ``workqueue_adds_total`` (counter): adds that were not de-duplicated away;
    - ``workqueue_queue_duration_seconds`` (histogram): time from add to ``get``;
    - ``workqueue_work_duration_seconds`` (histogram): time from ``get`` to ``done``;
    - ``workqueue_unfinished_work_seconds`` (gauge): seconds of work in progress
      that has not been observed by ``work_duration`` yet (sum over processors);
    - ``workqueue_longest_running_processor_seconds`` (gauge): age of the oldest
      item being processed;
    - ``workqueue_retries_total`` (counter): calls to ``add_after`` /
      ``add_rate_limited``.
    """

    def new_depth_metric(self, name: str) -> GaugeMetric:
        """``workqueue_depth``."""

    def new_adds_metric(self, name: str) -> CounterMetric:
        """``workqueue_adds_total``."""

    def new_latency_metric(self, name: str) -> HistogramMetric:
        """``workqueue_queue_duration_seconds``."""

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        """``workqueue_work_duration_seconds``."""

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """``workqueue_unfinished_work_seconds``."""

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """``workqueue_longest_running_processor_seconds``."""

    def new_retries_metric(self, name: str) -> CounterMetric:
        """``workqueue_retries_total``."""


class _NoopMetric:
    """Satisfies every metric protocol and records nothing."""

    def inc(self) -> None:
        pass

    def dec(self) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, value: float) -> None:
        pass


_NOOP = _NoopMetric()


class NoopMetricsProvider:
    """The default provider: every metric is a no-op."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        """A no-op gauge."""
        return _NOOP

    def new_adds_metric(self, name: str) -> CounterMetric:
        """A no-op counter."""
        return _NOOP

    def new_latency_metric(self, name: str) -> HistogramMetric:
        """A no-op histogram."""
        return _NOOP

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        """A no-op histogram."""
        return _NOOP

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """A no-op gauge."""
        return _NOOP

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """A no-op gauge."""
        return _NOOP

    def new_retries_metric(self, name: str) -> CounterMetric:
        """A no-op counter."""
        return _NOOP
