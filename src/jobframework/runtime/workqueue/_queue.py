"""The rate-limiting work queue with client-go's semantics, on one asyncio event loop.

Three sets of items define its behaviour (as ``workqueue.Typed``):

- the *queue*: items waiting to be handed out by :meth:`get`, in FIFO order;
- *dirty*: items that need processing (queued, or re-added while being processed);
- *processing*: items handed out by ``get`` and not yet passed to :meth:`done`.

Adding an item that is already dirty does nothing (de-duplication). Adding an item that
is being processed only marks it dirty: it goes back on the queue when ``done`` is
called, so one item is never processed by two workers at once.

Delayed items (``add_after``) wait in a heap ordered by deadline, keyed by item so an
item waits at most once (a later ``add_after`` with an earlier deadline moves it
forward, never back). A background task promotes them when their deadline passes on
the injected clock; reads (``get``, ``len``) also promote due items, so a test that
advances a :class:`~jobframework.runtime.clock.ManualClock` sees them at once.

All methods except :meth:`get` and :meth:`shutdown_with_drain` are synchronous, so
event handlers can enqueue without awaiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from ..clock import Clock, RealClock
from ._metrics import NoopMetricsProvider, QueueMetricsProvider
from ._ratelimiters import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class QueueShutDown(Exception):
    """Raised by :meth:`RateLimitingQueue.get` once the queue is shut down and empty."""


class QueueEmpty(Exception):
    """Raised by :meth:`RateLimitingQueue.get_nowait` when no item is ready."""


class _QueueMetrics(Generic[T]):
    """Bookkeeping behind the metric hooks (client-go's ``defaultQueueMetrics``)."""

    def __init__(self, name: str, provider: QueueMetricsProvider, clock: Clock) -> None:
        self._clock = clock
        self._enabled = bool(name)
        if not name:
            provider = NoopMetricsProvider()
        self.depth = provider.new_depth_metric(name)
        self.adds = provider.new_adds_metric(name)
        self.latency = provider.new_latency_metric(name)
        self.work_duration = provider.new_work_duration_metric(name)
        self.unfinished = provider.new_unfinished_work_seconds_metric(name)
        self.longest = provider.new_longest_running_processor_seconds_metric(name)
        self.retries = provider.new_retries_metric(name)
        self._add_times: dict[T, float] = {}
        self._processing_starts: dict[T, float] = {}

    def add(self, item: T) -> None:
        if not self._enabled:
            return
        self.adds.inc()
        self.depth.inc()
        self._add_times.setdefault(item, self._clock.monotonic())

    def get(self, item: T) -> None:
        if not self._enabled:
            return
        now = self._clock.monotonic()
        self.depth.dec()
        self._processing_starts[item] = now
        added = self._add_times.pop(item, None)
        if added is not None:
            self.latency.observe(now - added)

    def done(self, item: T) -> None:
        if not self._enabled:
            return
        started = self._processing_starts.pop(item, None)
        if started is not None:
            self.work_duration.observe(self._clock.monotonic() - started)
        self.update_unfinished_work()

    def retry(self) -> None:
        if self._enabled:
            self.retries.inc()

    def update_unfinished_work(self) -> None:
        if not self._enabled:
            return
        now = self._clock.monotonic()
        ages = [now - t for t in self._processing_starts.values()]
        self.unfinished.set(sum(ages))
        self.longest.set(max(ages, default=0.0))


class RateLimitingQueue(Generic[T]):
    """A de-duplicating, delaying, rate-limited work queue (client-go semantics).

    Workers loop on ``item = await q.get()``, process ``item``, then call ``q.done(item)``;
    on failure ``q.add_rate_limited(item)``, on success ``q.forget(item)``.

    Args:
        rate_limiter: decides ``add_rate_limited`` delays; defaults to
            :func:`default_controller_rate_limiter` on the same clock.
        name: the queue's metric name; unnamed queues record no metrics.
        clock: time source for delays and metrics (inject a ``ManualClock`` in tests).
        metrics_provider: creates the metric hooks; no-op by default.
    """

    def __init__(
        self,
        rate_limiter: RateLimiter[T] | None = None,
        *,
        name: str = "",
        clock: Clock | None = None,
        metrics_provider: QueueMetricsProvider | None = None,
    ) -> None:
        self._clock: Clock = clock or RealClock()
        self.name = name
        self.rate_limiter: RateLimiter[T] = rate_limiter or default_controller_rate_limiter(
            clock=self._clock
        )
        self._metrics: _QueueMetrics[T] = _QueueMetrics(
            name, metrics_provider or NoopMetricsProvider(), self._clock
        )
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._shutting_down = False
        self._drain = False
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drain_waiters: list[asyncio.Future[None]] = []
        # Delayed items: item -> (ready_at, seq); the heap may hold stale entries,
        # recognised because their seq is no longer the one recorded for the item.
        self._waiting: dict[T, tuple[float, int]] = {}
        self._heap: list[tuple[float, int, T]] = []
        self._seq = itertools.count()
        self._waiting_task: asyncio.Task[None] | None = None
        self._wake_waiting: asyncio.Event | None = None

    # -- the basic queue -----------------------------------------------------------

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing; a no-op if it already is, or on shutdown."""
        if self._shutting_down or item in self._dirty:
            return
        self._metrics.add(item)
        self._dirty.add(item)
        if item in self._processing:
            # Requeued by done(): never hand one item to two workers at once.
            return
        self._queue.append(item)
        self._wakeup_getter()

    def __len__(self) -> int:
        """Items ready to be handed out (not counting delayed or processing ones)."""
        self._promote_ready()
        return len(self._queue)

    async def get(self) -> T:
        """Wait for the next item and mark it as processing.

        Raises :class:`QueueShutDown` once the queue is shut down and nothing is left
        in it (items queued before shutdown are still handed out, as in client-go).
        """
        self._ensure_waiting_loop()
        while True:
            self._promote_ready()
            if self._queue:
                return self._pop()
            if self._shutting_down:
                raise QueueShutDown
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except BaseException:
                fut.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(fut)
                # If we were woken and then cancelled, pass the wakeup on.
                if self._queue and not fut.cancelled():
                    self._wakeup_getter()
                raise

    def get_nowait(self) -> T:
        """The next item if one is ready, else :class:`QueueEmpty` (or ``QueueShutDown``)."""
        self._promote_ready()
        if self._queue:
            return self._pop()
        if self._shutting_down:
            raise QueueShutDown
        raise QueueEmpty

    def done(self, item: T) -> None:
        """Mark ``item`` as processed; if it was re-added meanwhile, queue it again."""
        self._metrics.done(item)
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
            self._wakeup_getter()
        elif not self._processing:
            self._release_drain_waiters()

    def shutdown(self) -> None:
        """Refuse new items and wake every waiting ``get``; delayed items are dropped.

        Items already queued are still handed out; ``get`` raises ``QueueShutDown`` once
        they are gone. Cancels a concurrent :meth:`shutdown_with_drain`'s wait.
        """
        self._drain = False
        self._shut()
        self._release_drain_waiters()

    async def shutdown_with_drain(self) -> None:
        """Shut down, then wait until every item handed out has been passed to ``done``."""
        self._drain = True
        self._shut()
        while self._drain and self._processing:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(fut)
            try:
                await fut
            finally:
                with contextlib.suppress(ValueError):
                    self._drain_waiters.remove(fut)

    @property
    def shutting_down(self) -> bool:
        """True once :meth:`shutdown` or :meth:`shutdown_with_drain` was called."""
        return self._shutting_down

    @property
    def processing(self) -> frozenset[T]:
        """Items handed out and not yet done (a snapshot, for diagnostics and tests)."""
        return frozenset(self._processing)

    @property
    def waiting(self) -> int:
        """How many items wait in the delay heap."""
        return len(self._waiting)

    def update_unfinished_work(self) -> None:
        """Refresh the unfinished-work and longest-running-processor gauges.

        client-go refreshes them every 500 ms; call this from a metrics scrape instead
        (the queue also refreshes them on every ``done``).
        """
        self._metrics.update_unfinished_work()

    # -- delaying ------------------------------------------------------------------

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` after ``delay`` seconds (at once when ``delay <= 0``).

        An item waits at most once: if it is already waiting, the earlier of the two
        deadlines wins.
        """
        if self._shutting_down:
            return
        self._metrics.retry()
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._clock.monotonic() + delay
        current = self._waiting.get(item)
        if current is not None and current[0] <= ready_at:
            return
        seq = next(self._seq)
        self._waiting[item] = (ready_at, seq)
        heapq.heappush(self._heap, (ready_at, seq, item))
        self._ensure_waiting_loop()
        if self._wake_waiting is not None:
            self._wake_waiting.set()

    # -- rate limiting -------------------------------------------------------------

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the delay the rate limiter decides (counts a failure)."""
        if self._shutting_down:
            return
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Stop tracking ``item``'s failures (call after it was processed successfully)."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many rate-limited requeues of ``item`` the limiter is tracking."""
        return self.rate_limiter.num_requeues(item)

    # -- internals -----------------------------------------------------------------

    def _pop(self) -> T:
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        self._metrics.get(item)
        return item

    def _wakeup_getter(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _shut(self) -> None:
        self._shutting_down = True
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
        self._waiting.clear()
        self._heap.clear()
        if self._waiting_task is not None:
            self._waiting_task.cancel()
            self._waiting_task = None

    def _release_drain_waiters(self) -> None:
        for fut in self._drain_waiters:
            if not fut.done():
                fut.set_result(None)

    def _promote_ready(self) -> None:
        now = self._clock.monotonic()
        while self._heap and self._heap[0][0] <= now:
            _, seq, item = heapq.heappop(self._heap)
            current = self._waiting.get(item)
            if current is None or current[1] != seq:
                continue  # superseded by an earlier deadline
            del self._waiting[item]
            self.add(item)

    def _next_ready_at(self) -> float | None:
        while self._heap:
            ready_at, seq, item = self._heap[0]
            current = self._waiting.get(item)
            if current is not None and current[1] == seq:
                return ready_at
            heapq.heappop(self._heap)
        return None

    def _ensure_waiting_loop(self) -> None:
        if self._shutting_down or not self._waiting:
            return
        if self._waiting_task is not None and not self._waiting_task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: the first get() starts it
        self._wake_waiting = asyncio.Event()
        self._waiting_task = loop.create_task(
            self._waiting_loop(), name=f"workqueue-waiting-{self.name or id(self)}"
        )

    async def _waiting_loop(self) -> None:
        """Promote delayed items at their deadlines; ends when none are left waiting."""
        wake = self._wake_waiting
        assert wake is not None
        while not self._shutting_down:
            self._promote_ready()
            ready_at = self._next_ready_at()
            if ready_at is None:
                return
            wake.clear()
            sleeper = asyncio.ensure_future(
                self._clock.sleep(ready_at - self._clock.monotonic())
            )
            woken = asyncio.ensure_future(wake.wait())
            try:
                await asyncio.wait({sleeper, woken}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                woken.cancel()
