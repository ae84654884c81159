"""Work queues with client-go's semantics: de-duplication, delays, rate-limited retries.

A controller puts keys in a :class:`RateLimitingQueue` from its event handlers and
reconciles them from worker tasks. The queue guarantees that a key is never handed to
two workers at once, that a burst of events for one key collapses into one reconcile,
and that failures back off (:func:`default_controller_rate_limiter`: per key 5 ms
doubling up to 1000 s, overall 10 qps with a burst of 100).
"""

from ._metrics import (
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    NoopMetricsProvider,
    QueueMetricsProvider,
    SettableGaugeMetric,
)
from ._queue import QueueEmpty, QueueShutDown, RateLimitingQueue
from ._ratelimiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)

__all__ = [
    "BucketRateLimiter",
    "CounterMetric",
    "GaugeMetric",
    "HistogramMetric",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "NoopMetricsProvider",
    "QueueEmpty",
    "QueueMetricsProvider",
    "QueueShutDown",
    "RateLimiter",
    "RateLimitingQueue",
    "SettableGaugeMetric",
    "default_controller_rate_limiter",
]
