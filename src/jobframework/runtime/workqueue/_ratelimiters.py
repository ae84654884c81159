"""Rate limiters deciding how long a failed item waits before it is retried.

Same contracts and defaults as client-go's ``util/workqueue`` rate limiters. Delays are
float seconds.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from ..clock import Clock, RealClock

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[T_contra]):
    """Decides retry delays per item (client-go's ``TypedRateLimiter``)."""

    def when(self, item: T_contra) -> float:
        """Seconds to wait before ``item`` is retried; counts one more failure."""

    def forget(self, item: T_contra) -> None:
        """Stop tracking ``item`` (it succeeded): its next failure starts afresh."""

    def num_requeues(self, item: T_contra) -> int:
        """How many failures of ``item`` are being tracked."""


class ItemExponentialFailureRateLimiter(Generic[T]):
    """``base_delay * 2**failures``, capped at ``max_delay``, tracked per item.

    The first ``when`` returns ``base_delay``, the next twice that, and so on.
    """

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay < 0 or max_delay < 0:
            raise ValueError("delays must not be negative")
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        """The backoff for this failure of ``item``, and count it."""
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        # ldexp is exact for powers of two; guard the exponent so it cannot overflow.
        if exp > 1000:
            return self.max_delay
        backoff = math.ldexp(self.base_delay, exp)
        return min(backoff, self.max_delay)

    def forget(self, item: T) -> None:
        """Reset ``item``'s failure count."""
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        """Failures counted for ``item`` since it was last forgotten."""
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[T]):
    """A global token bucket (``golang.org/x/time/rate`` reservation semantics).

    The bucket holds at most ``burst`` tokens and refills at ``qps`` tokens per second;
    it starts full. Every ``when`` reserves one token, even when none is available: the
    bucket then goes into debt and the returned delay is the time until the reserved
    token will have been earned. So 100 immediate failures pass with no delay, the
    101st waits 0.1 s, the 102nd 0.2 s, ... at the defaults (10 qps, burst 100).
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be positive and burst at least 1")
        self.qps = qps
        self.burst = burst
        self._clock: Clock = clock or RealClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    def when(self, item: T) -> float:
        """Reserve a token; the delay until it is available (0 when one is in hand)."""
        now = self._clock.monotonic()
        # Refill for the time elapsed since the last reservation (never backwards).
        elapsed = max(0.0, now - self._last)
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
        self._last = max(self._last, now)
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def forget(self, item: T) -> None:
        """Nothing is tracked per item."""

    def num_requeues(self, item: T) -> int:
        """Always 0: the bucket does not count per item."""
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The longest delay of several limiters (every limiter sees every call)."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("at least one rate limiter is required")
        self.limiters: tuple[RateLimiter[T], ...] = limiters

    def when(self, item: T) -> float:
        """The maximum of every limiter's ``when`` (all of them are called)."""
        return max([limiter.when(item) for limiter in self.limiters])

    def forget(self, item: T) -> None:
        """Forget ``item`` in every limiter."""
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """The maximum count any limiter tracks for ``item``."""
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(*, clock: Clock | None = None) -> MaxOfRateLimiter[T]:
    """client-go's ``DefaultTypedControllerRateLimiter``, controller-runtime's default.

    The max of per-item exponential backoff (5 ms doubling, capped at 1000 s) and an
    overall 10 qps / burst 100 token bucket: one item failing over and over backs off
    exponentially, and a storm of distinct failing items is still limited to 10 qps.
    """
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter[T](0.005, 1000.0),
        BucketRateLimiter[T](10.0, 100, clock=clock),
    )
