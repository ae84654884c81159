"""The controller: sources feed a rate-limited queue, workers reconcile what it hands out.

Like controller-runtime's ``controller.Controller``:

- every watched :class:`~jobframework.runtime.source.Source` enqueues
  :class:`~jobframework.runtime.reconcile.Request` keys into one
  :class:`~jobframework.runtime.workqueue.RateLimitingQueue`, which de-duplicates them and
  never hands one key to two workers at once;
- :meth:`Controller.start` starts the sources, waits for their caches to sync, then runs
  ``max_concurrent_reconciles`` workers until it is cancelled;
- each result is handled with controller-runtime's precedence (see
  :mod:`jobframework.runtime.reconcile`): exception → rate-limited requeue;
  :class:`~jobframework.runtime.reconcile.TerminalError` → forget, log, count;
  ``requeue_after > 0`` → forget then requeue after the delay; ``requeue`` →
  rate-limited requeue; otherwise forget. An exception never stops a worker.

Shutdown (cancelling :meth:`start`) stops handing out new keys, lets reconciles already
running finish, then returns; keys still queued are dropped (they are recomputed from
the cache on the next start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from . import ownwrites
from .client.interface import RESTMapper
from .clock import Clock, RealClock
from .errors import ApiError
from .handler import RESTMapperAware
from .metrics import Metrics
from .reconcile import Reconciler, Request, Result, TerminalError
from .source import Source, SyncingSource
from .workqueue import QueueShutDown, RateLimiter, RateLimitingQueue

__all__ = ["Controller", "ControllerAlreadyStarted"]

log = logging.getLogger(__name__)


class ControllerAlreadyStarted(RuntimeError):
    """:meth:`Controller.start` was called twice."""


class Controller:
    """Reconciles the requests its sources produce. A manager runnable.

    Args:
        name: unique per manager; labels metrics and logs, and names the queue.
        reconciler: the :class:`~jobframework.runtime.reconcile.Reconciler`.
        max_concurrent_reconciles: worker count (different keys in parallel).
        rate_limiter: the queue's limiter (client-go's default controller limiter if None).
        clock: time for the queue's delays and for metrics.
        metrics: where to record; a private registry when None.
        rest_mapper: given to handlers that need it (owner scope lookups).
        cache_sync_timeout: real seconds to wait for sources to sync before failing.
        need_leader_election: whether the manager runs it only while leading.
        own_writes_timeout: after a reconcile that wrote to kinds the manager caches, its
            key stays in processing until the cache has seen those writes, for at most
            this many real seconds (see :mod:`~jobframework.runtime.ownwrites`); ``None``
            or 0 reconciles it again at once, as controller-runtime does.
    """

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        max_concurrent_reconciles: int = 1,
        rate_limiter: RateLimiter[Request] | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        rest_mapper: RESTMapper | None = None,
        cache_sync_timeout: float = 120.0,
        need_leader_election: bool = True,
        own_writes_timeout: float | None = ownwrites.DEFAULT_TIMEOUT,
    ) -> None:
        if not name:
            raise ValueError("a controller needs a name")
        if max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1")
        self.name = name
        self.reconciler = reconciler
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.clock: Clock = clock or RealClock()
        self.metrics = metrics or Metrics()
        self.rest_mapper = rest_mapper
        self.cache_sync_timeout = cache_sync_timeout
        self._need_leader_election = need_leader_election
        self.own_writes_timeout = own_writes_timeout
        # Keys held until the cache has their reconcile's writes (see _worker).
        self._holds: set[_Hold] = set()
        self.queue: RateLimitingQueue[Request] = RateLimitingQueue(
            rate_limiter, name=name, clock=self.clock,
            metrics_provider=self.metrics.workqueue_provider(),
        )
        self._sources: list[Source] = []
        self._started = False
        self._stopping = False
        self._synced = asyncio.Event()
        self._log = log.getChild(name)
        # (metric, label values) -> (metric, its labelled child): see _child.
        self._children: dict[tuple[int, tuple[str, ...]], tuple[Any, Any]] = {}

    def need_leader_election(self) -> bool:
        """Whether the manager must hold the lease to run this controller."""
        return self._need_leader_election

    @property
    def started(self) -> bool:
        """True once :meth:`start` began."""
        return self._started

    async def wait_for_sync(self) -> None:
        """Return once the sources have synced and workers run."""
        await self._synced.wait()

    async def watch(self, source: Source) -> None:
        """Add a source; one added after start is started at once (no sync wait)."""
        self._sources.append(source)
        if self._started:
            await self._start_source(source)

    def add_source(self, source: Source) -> None:
        """Add a source before :meth:`start` (synchronous form of :meth:`watch`)."""
        if self._started:
            raise ControllerAlreadyStarted(
                f"controller {self.name}: use watch() to add sources after start")
        self._sources.append(source)

    async def _start_source(self, source: Source) -> None:
        handler = getattr(source, "handler", None)
        if isinstance(handler, RESTMapperAware) and self.rest_mapper is not None:
            await handler.resolve(self.rest_mapper)
        await source.start(self.queue)

    async def start(self) -> None:
        """Start sources, wait for sync, run workers until cancelled."""
        if self._started:
            raise ControllerAlreadyStarted(f"controller {self.name} was already started")
        self._started = True
        self._log.info("starting controller %s", self.name)
        workers: list[asyncio.Task[None]] = []
        try:
            for source in list(self._sources):
                await self._start_source(source)
            syncing = [s for s in self._sources if isinstance(s, SyncingSource)]
            if syncing:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
                # that arrives as the inner wait completes, and stop() would then hang.
                try:
                    async with asyncio.timeout(self.cache_sync_timeout):
                        await asyncio.gather(*(s.wait_for_sync() for s in syncing))
                except TimeoutError as err:
                    raise TimeoutError(
                        f"controller {self.name}: timed out waiting for cache to be synced"
                    ) from err
            self._init_metrics()
            self.metrics.max_concurrent_reconciles.labels(self.name).set(
                self.max_concurrent_reconciles)
            self.metrics.active_workers.labels(self.name).set(0)
            loop = asyncio.get_running_loop()
            workers = [loop.create_task(self._worker(), name=f"{self.name}-worker-{i}")
                       for i in range(self.max_concurrent_reconciles)]
            self._synced.set()
            self._log.info("started %d workers", len(workers))
            # asyncio.wait, unlike gather, does not cancel the workers when we are cancelled:
            # _shutdown decides how they end.
            await asyncio.wait(workers)
        finally:
            await self._shutdown(workers)

    def _init_metrics(self) -> None:
        # Expose every series at 0 from the start, as controller-runtime's initMetrics, so
        # rates and alerts work before the first error happens.
        m = self.metrics
        for result in ("error", "requeue", "requeue_after", "success"):
            m.reconcile_total.labels(self.name, result)
        m.reconcile_errors_total.labels(self.name)
        m.terminal_reconcile_errors_total.labels(self.name)

    async def _shutdown(self, workers: Sequence[asyncio.Task[None]]) -> None:
        self._stopping = True
        self.queue.shutdown()
        for hold in list(self._holds):
            hold.finish()
        pending = [w for w in workers if not w.done()]
        if not pending:
            return
        self._log.info("shutdown: waiting for %d workers to finish", len(pending))
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError:
            # Cancelled again while draining: abandon the in-flight reconciles.
            for w in pending:
                w.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*pending, return_exceptions=True)
            raise

    async def _worker(self) -> None:
        hold_for = self.own_writes_timeout
        while True:
            try:
                request = await self.queue.get()
            except QueueShutDown:
                return
            held = False
            try:
                if self._stopping:
                    continue
                with ownwrites.collecting() as written:
                    await self.reconcile_handler(request)
                if written and hold_for and not self._stopping:
                    held = self._hold(request, written, hold_for)
            finally:
                if not held:
                    self.queue.done(request)

    def _hold(self, request: Request, written: list[asyncio.Future[None]],
              seconds: float) -> bool:
        # The key stays in processing meanwhile: an event for it marks it dirty, and done()
        # requeues it, now reading a cache that has this reconcile's writes.
        pending = [f for f in written if not f.done()]
        if not pending:
            return False

        def release(hold: _Hold) -> None:
            self._holds.discard(hold)
            self.queue.done(request)

        self._holds.add(_Hold(pending, seconds, release))
        return True

    def _child(self, metric: Any, *labels: str) -> Any:
        # ``metric.labels(...)``, looked up once per series: a few labels() calls on every
        # reconcile added up. Created on first use, as before.
        key = (id(metric), labels)
        entry = self._children.get(key)
        if entry is None or entry[0] is not metric:
            entry = self._children[key] = (metric, metric.labels(*labels))
        return entry[1]

    async def reconcile_handler(self, request: Request) -> None:
        """Reconcile one request and requeue it as its outcome says."""
        m = self.metrics
        name = self.name
        child = self._child
        active = child(m.active_workers, name)
        active.inc()
        start = self.clock.monotonic()
        try:
            result = await self.reconciler.reconcile(request)
        except asyncio.CancelledError:
            raise
        except TerminalError as err:
            self.queue.forget(request)
            child(m.reconcile_errors_total, name).inc()
            child(m.terminal_reconcile_errors_total, name).inc()
            child(m.reconcile_total, name, "error").inc()
            self._log.error("terminal error reconciling %s: %s", request, err,
                            exc_info=err)
            return
        except Exception as err:
            self.queue.add_rate_limited(request)
            child(m.reconcile_errors_total, name).inc()
            child(m.reconcile_total, name, "error").inc()
            # An API server's answer (a Conflict, say) is told by its message, as Go's
            # "Reconciler error" tells it; a traceback is for errors of the code. Either
            # way the record carries the exception as ``error`` (logr's key).
            answered = isinstance(err, ApiError) or isinstance(err.__cause__, ApiError)
            self._log.error("reconciler error for %s (requeued with backoff): %s",
                            request, err, exc_info=None if answered else err,
                            extra={"error": err})
            return
        finally:
            child(m.reconcile_time_seconds, name).observe(
                max(0.0, self.clock.monotonic() - start))
            active.dec()
        if result is None:  # tolerate reconcilers that forget to return
            result = Result()
        if result.requeue_after > 0:
            # Forget first so the backoff for this key restarts next time it fails.
            self.queue.forget(request)
            self.queue.add_after(request, result.requeue_after)
            child(m.reconcile_total, name, "requeue_after").inc()
        elif result.requeue:
            self.queue.add_rate_limited(request)
            child(m.reconcile_total, name, "requeue").inc()
        else:
            self.queue.forget(request)
            child(m.reconcile_total, name, "success").inc()


class _Hold:
    """Calls ``release`` once every future is done, or ``seconds`` (real time) after it
    began, whichever comes first; the futures still pending are then cancelled. Future
    callbacks and one timer, rather than a task per held key."""

    __slots__ = ("_finished", "_futures", "_left", "_release", "_timer")

    def __init__(self, futures: list[asyncio.Future[None]], seconds: float,
                 release: Callable[[_Hold], None]) -> None:
        self._futures = futures
        self._left = len(futures)
        self._release = release
        self._finished = False
        self._timer = asyncio.get_running_loop().call_later(seconds, self.finish)
        for future in futures:
            future.add_done_callback(self._one_done)

    def _one_done(self, _: asyncio.Future[None]) -> None:
        self._left -= 1
        if self._left <= 0:
            self.finish()

    def finish(self) -> None:
        """Release now (idempotent)."""
        if self._finished:
            return
        self._finished = True
        self._timer.cancel()
        for future in self._futures:
            future.cancel()  # a write the cache did not see in time: stop waiting on it
        self._release(self)
