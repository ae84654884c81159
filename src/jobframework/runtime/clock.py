"""Injectable time, so queues, leases and the in-memory server are testable deterministically."""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import itertools
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """A source of time. ``monotonic`` drives timers; ``now`` stamps objects."""

    def monotonic(self) -> float:
        """Seconds on a monotonic scale (only differences matter)."""

    def now(self) -> dt.datetime:
        """The current wall time, timezone-aware UTC."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""


class RealClock:
    """The system clock and ``asyncio.sleep``."""

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def now(self) -> dt.datetime:
        """``datetime.now(UTC)``."""
        return dt.datetime.now(dt.UTC)

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when a test calls :meth:`advance` (or :meth:`step`).

    Sleepers wake, in deadline order, when the clock passes their deadline.
    """

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._wall0 = start or dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        self._t = 0.0
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def monotonic(self) -> float:
        """Seconds advanced since creation."""
        return self._t

    def now(self) -> dt.datetime:
        """Start time plus the seconds advanced."""
        return self._wall0 + dt.timedelta(seconds=self._t)

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has been advanced by ``seconds``."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._t + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending (cancelled ones excluded)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        """The earliest pending deadline, or None."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline is reached."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._t += seconds
        while self._sleepers and self._sleepers[0][0] <= self._t:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    async def step(self) -> bool:
        """Jump to the next deadline (if any), wake its sleepers, let them run one turn."""
        deadline = self.next_deadline()
        if deadline is None:
            return False
        self.advance(max(0.0, deadline - self._t))
        await asyncio.sleep(0)
        return True


def rfc3339(t: dt.datetime) -> str:
    """Kubernetes ``metav1.Time`` rendering (seconds precision, ``Z``)."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(t: dt.datetime) -> str:
    """Kubernetes ``metav1.MicroTime`` rendering (microseconds, ``Z``)."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> dt.datetime:
    """Parse a ``metav1.Time``/``MicroTime`` string."""
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
