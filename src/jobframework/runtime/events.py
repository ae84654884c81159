"""An ``events.k8s.io/v1`` event recorder with client-go's correlation, never raising.

:class:`EventBroadcaster` owns the sending: recorders (one per reporting controller, from
:meth:`EventBroadcaster.new_recorder`) hand events to it synchronously, and it writes
them to the API server in the background. Before anything is queued:

- a *spam filter* (client-go's ``EventSourceObjectSpamFilter``) keeps a token bucket per
  reporting controller + instance + regarding object: a burst of 25, refilled by one token
  every 5 minutes; events beyond it are dropped;
- *aggregation*: an event identical to one already recorded (same regarding/related
  object, type, reason, action, note, reporter) is not created again; the existing Event's
  ``series`` (``count``, ``lastObservedTime``) is bumped instead, and repeats that arrive
  before the write is sent are coalesced into one write.

The queue is bounded (1000 writes, as client-go's broadcaster); when it is full, events
are dropped and logged. Writes go out concurrently, as client-go's broadcaster starts a
goroutine per event: one slow round trip must not hold back the events behind it (written
one at a time, a burst of Job creates left ``Started`` events seconds late and could fill
the queue). At most ``max_concurrent_writes`` are in flight, so events never take more than
that many of the client's connections, and one correlated event is never written twice at
once. Write failures are logged and retried (up to 12 attempts, 10 s apart, as client-go),
never propagated: recording an event must not fail a reconcile. Recorders must be called
from the event loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from .client.interface import Client, PatchType
from .clock import Clock, RealClock, rfc3339_micro
from .errors import AlreadyExists, Invalid, NotFound
from .objects import GVK, Object

__all__ = [
    "EVENT_GVK",
    "NORMAL",
    "WARNING",
    "EventBroadcaster",
    "EventRecorder",
    "object_reference",
]

log = logging.getLogger(__name__)

EVENT_GVK = GVK("events.k8s.io", "v1", "Event")
NORMAL: Literal["Normal"] = "Normal"
WARNING: Literal["Warning"] = "Warning"
#: The API server rejects notes longer than this (``NoteLengthLimit``).
NOTE_LENGTH_LIMIT = 1024


def object_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A ``v1.ObjectReference`` to ``obj`` (apiVersion, kind, namespace, name, uid, rv)."""
    gvk = GVK.of(obj)
    meta = obj.get("metadata") or {}
    ref: dict[str, Any] = {"apiVersion": gvk.api_version, "kind": gvk.kind,
                           "name": meta.get("name") or ""}
    for src, dst in (("namespace", "namespace"), ("uid", "uid"),
                     ("resourceVersion", "resourceVersion")):
        if meta.get(src):
            ref[dst] = meta[src]
    if not ref["name"]:
        raise ValueError("object has no metadata.name")
    return ref


def _ref_key(ref: Mapping[str, Any] | None) -> tuple[str, ...]:
    if ref is None:
        return ()
    return tuple(str(ref.get(k) or "") for k in
                 ("apiVersion", "kind", "namespace", "name", "uid"))


@attrs.define
class _TokenBucket:
    tokens: float
    last: float


@attrs.define(eq=False)
class _Series:
    """One correlated event: the Event written (or to write) and its repeat count."""

    event: Object
    count: int = 1
    last_observed: str = ""
    created: bool = False
    pending: bool = False
    #: A write of this series is in flight; ``resend``: it changed meanwhile.
    sending: bool = False
    resend: bool = False
    attempts: int = 0


class EventBroadcaster:
    """Queues events from recorders and writes them with ``client`` in the background.

    Run it with :meth:`start` (returns at once; the manager does this) or ``async with``;
    :meth:`shutdown` sends what is queued, within a timeout, then stops.
    """

    def __init__(
        self,
        client: Client,
        *,
        clock: Clock | None = None,
        queue_size: int = 1000,
        burst: int = 25,
        refill_seconds: float = 300.0,
        cache_size: int = 4096,
        max_attempts: int = 12,
        retry_seconds: float = 10.0,
        max_concurrent_writes: int = 16,
    ) -> None:
        if max_concurrent_writes < 1:
            raise ValueError("max_concurrent_writes must be at least 1")
        self.client = client
        self.clock: Clock = clock or RealClock()
        self.burst = burst
        self.refill_seconds = refill_seconds
        self.max_attempts = max_attempts
        self.retry_seconds = retry_seconds
        self._cache_size = cache_size
        self._queue: asyncio.Queue[_Series] = asyncio.Queue(maxsize=queue_size)
        self._series: OrderedDict[tuple[Any, ...], _Series] = OrderedDict()
        self._buckets: OrderedDict[tuple[Any, ...], _TokenBucket] = OrderedDict()
        self._last_nanos = 0
        self._task: asyncio.Task[None] | None = None
        self._retries: set[asyncio.Task[None]] = set()
        self._writes: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(max_concurrent_writes)
        #: Counts, for observability and tests.
        self.dropped_rate_limited = 0
        self.dropped_queue_full = 0
        self.failed = 0

    def new_recorder(
        self, reporting_controller: str, reporting_instance: str | None = None
    ) -> EventRecorder:
        """A recorder that reports as ``reporting_controller`` (instance: ``<ctrl>-<host>``)."""
        instance = reporting_instance or (
            f"{reporting_controller}-{os.environ.get('HOSTNAME') or socket.gethostname()}")
        return EventRecorder(self, reporting_controller, instance)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the sending task on the running loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def flush(self) -> None:
        """Wait until every queued write has been attempted."""
        await self._queue.join()

    async def shutdown(self, grace_seconds: float = 5.0) -> None:
        """Send what is queued (for at most ``grace_seconds`` real seconds), then stop."""
        if self._task is not None and not self._task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), grace_seconds)
        for task in [self._task, *self._retries, *self._writes]:
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = None

    async def __aenter__(self) -> EventBroadcaster:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- recording (synchronous, never raises) -----------------------------------------

    def _record(self, event: Object, reporter: tuple[str, str]) -> None:
        regarding = event["regarding"]
        spam_key = (*reporter, _ref_key(regarding))
        if not self._take_token(spam_key):
            self.dropped_rate_limited += 1
            log.debug("event %s/%s on %s dropped by the rate limit",
                      event.get("type"), event.get("reason"), regarding.get("name"))
            return
        key = (*reporter, _ref_key(regarding), _ref_key(event.get("related")),
               event["type"], event["reason"], event["action"], event["note"])
        now = rfc3339_micro(self.clock.now())
        series = self._series.get(key)
        if series is not None:
            self._series.move_to_end(key)
            series.count += 1
            series.last_observed = now
        else:
            series = _Series(event=event, last_observed=now)
            self._series[key] = series
            while len(self._series) > self._cache_size:
                self._series.popitem(last=False)
        self._enqueue(series)

    def _enqueue(self, series: _Series) -> None:
        if series.pending:
            return  # the queued write will carry the latest count
        if series.sending:
            series.resend = True  # the write in flight took the count it had then
            return
        try:
            self._queue.put_nowait(series)
        except asyncio.QueueFull:
            self.dropped_queue_full += 1
            log.error("event queue is full, dropping event %s", series.event.get("reason"))
            return
        series.pending = True

    def _take_token(self, key: tuple[Any, ...]) -> bool:
        now = self.clock.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _TokenBucket(tokens=float(self.burst), last=now)
            self._buckets[key] = bucket
            while len(self._buckets) > self._cache_size:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            if self.refill_seconds > 0:
                bucket.tokens = min(float(self.burst),
                                    bucket.tokens + (now - bucket.last) / self.refill_seconds)
            bucket.last = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def _unique_name(self, base: str) -> str:
        # client-go names events <object>.<unix nanos in hex>; keep names unique even when
        # a manual clock does not move between two events.
        nanos = int(self.clock.now().timestamp() * 1e9)
        nanos = max(nanos, self._last_nanos + 1)
        self._last_nanos = nanos
        return f"{base}.{nanos:x}"

    # -- sending -----------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            series = await self._queue.get()
            await self._slots.acquire()
            task = loop.create_task(self._write(series))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    async def _write(self, series: _Series) -> None:
        try:
            series.pending = False
            series.sending = True
            try:
                await self._send(series)
            finally:
                series.sending = False
            if series.resend:
                series.resend = False
                self._enqueue(series)
        except Exception:  # never let one event stop the sender
            log.exception("unexpected error recording event")
        finally:
            self._slots.release()
            self._queue.task_done()

    async def _send(self, series: _Series) -> None:
        series.attempts += 1
        event = dict(series.event)
        if series.count > 1:
            event["series"] = {"count": series.count, "lastObservedTime": series.last_observed}
        meta = event["metadata"]
        if series.created and series.count <= 1:
            return  # nothing new to say about an Event already written
        try:
            if series.created:
                try:
                    await self.client.patch(
                        EVENT_GVK, meta["name"], {"series": event["series"]},
                        namespace=meta["namespace"], patch_type=PatchType.MERGE)
                except NotFound:
                    # The Event expired (or was deleted): write it again.
                    await self.client.create(event)
            else:
                await self.client.create(event)
        except AlreadyExists:
            series.created = True
        except (Invalid, ValueError, TypeError) as err:
            self.failed += 1
            log.error("event %s rejected, not retrying: %s", event.get("reason"), err)
        except Exception as err:
            if series.attempts >= self.max_attempts:
                self.failed += 1
                log.error("unable to write event %s after %d attempts: %s",
                          event.get("reason"), series.attempts, err)
                return
            log.warning("unable to write event %s (will retry): %s", event.get("reason"), err)
            self._retry_later(series)
        else:
            series.created = True
            series.attempts = 0

    def _retry_later(self, series: _Series) -> None:
        async def retry() -> None:
            await self.clock.sleep(self.retry_seconds)
            self._enqueue(series)

        task = asyncio.get_running_loop().create_task(retry())
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)


class EventRecorder:
    """Records events about objects for one reporting controller.

    ``event``/``eventf`` return immediately and never raise: bad input and API failures
    are logged. ``action`` (required by events.k8s.io/v1) defaults to ``reason``.
    """

    def __init__(
        self, broadcaster: EventBroadcaster, reporting_controller: str, reporting_instance: str
    ) -> None:
        self.broadcaster = broadcaster
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance

    def event(
        self,
        obj: Mapping[str, Any],
        type: str,
        reason: str,
        message: str,
        *,
        action: str | None = None,
        related: Mapping[str, Any] | None = None,
    ) -> None:
        """Record that ``reason`` happened to ``obj`` (``type``: ``Normal`` or ``Warning``)."""
        try:
            if type not in (NORMAL, WARNING):
                raise ValueError(f"unsupported event type {type!r}")
            if not reason:
                raise ValueError("an event needs a reason")
            event = self._build(obj, type, reason, message, action or reason, related)
            self.broadcaster._record(event, (self.reporting_controller, self.reporting_instance))
        except Exception as err:
            log.error("could not record event %r on %s: %s", reason, _describe(obj), err)

    def eventf(
        self,
        obj: Mapping[str, Any],
        type: str,
        reason: str,
        message_fmt: str,
        *args: object,
        action: str | None = None,
        related: Mapping[str, Any] | None = None,
    ) -> None:
        """:meth:`event` with a ``%``-format message."""
        try:
            message = message_fmt % args if args else message_fmt
        except (TypeError, ValueError) as err:
            message = f"{message_fmt} (format error: {err})"
        self.event(obj, type, reason, message, action=action, related=related)

    def _build(
        self,
        obj: Mapping[str, Any],
        type: str,
        reason: str,
        message: str,
        action: str,
        related: Mapping[str, Any] | None,
    ) -> Object:
        regarding = object_reference(obj)
        note = message
        if len(note.encode()) > NOTE_LENGTH_LIMIT:
            note = note.encode()[: NOTE_LENGTH_LIMIT - 3].decode(errors="ignore") + "..."
        b = self.broadcaster
        event: Object = {
            "apiVersion": EVENT_GVK.api_version,
            "kind": EVENT_GVK.kind,
            "metadata": {
                "name": b._unique_name(regarding["name"]),
                "namespace": regarding.get("namespace") or "default",
            },
            "eventTime": rfc3339_micro(b.clock.now()),
            "reportingController": self.reporting_controller,
            "reportingInstance": self.reporting_instance,
            "action": action,
            "reason": reason,
            "regarding": regarding,
            "note": note,
            "type": type,
        }
        if related is not None:
            event["related"] = object_reference(related)
        return event


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if isinstance(meta, Mapping):
        return f"{obj.get('kind')} {meta.get('namespace') or ''}/{meta.get('name') or ''}"
    return repr(obj)[:80]
