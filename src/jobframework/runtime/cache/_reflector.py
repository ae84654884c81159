"""The reflector: keeps a store in step with the API server by listing, then watching.

Behaviour follows client-go's ``cache.Reflector``:

1. **List** the kind (with the informer's namespace and selectors), and hand the items
   and the list's resourceVersion to the store as a *replace*.
2. **Watch** from that resourceVersion with bookmarks allowed. Each event is applied to
   the store and advances the resourceVersion the next watch resumes from; BOOKMARK
   events only advance it.
3. When a watch stream ends or breaks, **re-watch** from the last resourceVersion, with
   no relist: nothing was missed. A stream that ends at once without delivering anything
   counts as a failure (client-go's "very short watch"), so a server closing every watch
   cannot make the reflector spin.
4. When the server answers **410 Gone** (the resourceVersion fell out of its history),
   go back to 1: relist and replace. The store turns the replace into synthetic events.

Failures back off exponentially on the injected clock (client-go's reflector defaults:
0.8 s doubling to 30 s, with jitter, reset after 2 minutes without failures). Every watch
asks the server to close it after a random 5 to 10 minutes, and is abandoned by the client
if it is still open 30 s after that (a stalled connection must not go unnoticed).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from .. import errors
from ..client.interface import Client, FieldSel, Selector, WatchEvent
from ..clock import Clock, RealClock
from ..objects import GVK, Object, resource_version_of

log = logging.getLogger(__name__)


class ReflectorStore(Protocol):
    """What a reflector feeds: the informer."""

    def replace(self, items: list[Object], resource_version: str) -> None:
        """Make the store hold exactly ``items`` (the result of a list)."""

    def apply(self, event: WatchEvent) -> None:
        """Apply one ADDED/MODIFIED/DELETED watch event."""


class Backoff:
    """Exponential backoff with jitter on a clock (client-go's ``ExponentialBackoffManager``).

    Each :meth:`next` returns the current step plus up to ``jitter`` times it, then
    multiplies the step by ``factor`` (capped at ``cap``). When ``reset_after`` seconds
    pass without a call, the step goes back to ``initial``.
    """

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        *,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._clock: Clock = clock or RealClock()
        self._rng = rng or random.Random()
        self._step = initial
        self._last: float | None = None

    def next(self) -> float:
        """The next delay in seconds."""
        now = self._clock.monotonic()
        if self._last is not None and now - self._last > self.reset_after:
            self._step = self.initial
        self._last = now
        step = self._step
        self._step = min(self._step * self.factor, self.cap)
        return step + (self._rng.random() * self.jitter * step if self.jitter > 0 else 0.0)

    def reset(self) -> None:
        """Start again from ``initial``."""
        self._step = self.initial


class Reflector:
    """Lists and watches one kind into a :class:`ReflectorStore`; see the module docs.

    Args:
        client: the API client.
        gvk: the kind.
        store: receives replaces and events.
        namespace / label_selector / field_selector: restrict what is listed and watched.
        clock: drives backoff and watch deadlines.
        backoff: the failure backoff; client-go's defaults on ``clock`` when omitted.
        min_watch_timeout: watches ask the server to close them after between this and
            twice this many seconds (client-go: 5 minutes).
        rng: randomness for watch timeouts (and the default backoff's jitter).
        on_error: called with every list/watch failure (client-go's watch error
            handler); by default failures are logged.
    """

    #: Extra seconds a watch may stay open past its server-side timeout.
    stall_grace = 30.0
    #: A stream that ends sooner than this without events is a failure.
    short_watch = 1.0

    def __init__(
        self,
        client: Client,
        gvk: GVK,
        store: ReflectorStore,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        min_watch_timeout: float = 300.0,
        rng: random.Random | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.client = client
        self.gvk = gvk
        self.store = store
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._clock: Clock = clock or RealClock()
        self._rng = rng or random.Random()
        self.backoff = backoff or Backoff(clock=self._clock, rng=self._rng)
        self.min_watch_timeout = min_watch_timeout
        self._on_error = on_error
        #: The resourceVersion the next watch resumes from ("" before the first list).
        self.last_sync_resource_version = ""
        #: Counters, for tests and diagnostics.
        self.lists = 0
        self.watches = 0

    def __repr__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"Reflector({self.gvk}{where})"

    async def run(self) -> None:
        """List and watch until cancelled, backing off after each failure."""
        while True:
            try:
                await self.list_and_watch()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                self._report(err)
            await self._clock.sleep(self.backoff.next())

    async def list_and_watch(self) -> None:
        """List, replace the store, then watch until the resourceVersion expires.

        Returns after a 410 Gone (the caller relists); raises when the list fails.
        """
        result = await self.client.list(
            self.gvk,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
        self.lists += 1
        self.store.replace(result.items, result.resource_version)
        self.last_sync_resource_version = result.resource_version
        while True:
            try:
                await self._watch_once()
            except errors.Gone as err:
                log.debug("%r: watch expired, relisting: %s", self, err)
                return
            except asyncio.CancelledError:
                raise
            except Exception as err:
                # A broken stream or a failed watch request: resume from the last rv.
                self._report(err)
                await self._clock.sleep(self.backoff.next())

    async def _watch_once(self) -> None:
        timeout = int(self.min_watch_timeout * (1 + self._rng.random()))
        stream = self.client.watch(
            self.gvk,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            resource_version=self.last_sync_resource_version,
            allow_bookmarks=True,
            timeout_seconds=timeout,
        )
        self.watches += 1
        started = self._clock.monotonic()
        consumer = asyncio.ensure_future(self._consume(stream))
        deadline = asyncio.ensure_future(self._clock.sleep(timeout + self.stall_grace))
        stalled = False
        try:
            await asyncio.wait({consumer, deadline}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            deadline.cancel()
            if not consumer.done():
                stalled = True
                consumer.cancel()
                await asyncio.gather(consumer, return_exceptions=True)
        if stalled:
            # The stream outlived its server-side timeout: drop it and re-watch.
            log.warning("%r: watch stalled past its timeout, re-watching", self)
            return
        events = consumer.result()
        if events == 0 and self._clock.monotonic() - started < self.short_watch:
            raise ConnectionError(
                f"very short watch: {self.gvk}: unexpected watch close - "
                "watch lasted less than a second and no items received"
            )

    async def _consume(self, stream: AsyncIterator[WatchEvent]) -> int:
        count = 0
        aiter = stream.__aiter__()
        try:
            async for event in aiter:
                count += 1
                if event.type != "BOOKMARK":
                    self.store.apply(event)
                rv = resource_version_of(event.object)
                if rv:
                    self.last_sync_resource_version = rv
        finally:
            aclose = getattr(aiter, "aclose", None)
            if aclose is not None:
                await aclose()
        return count

    def _report(self, err: BaseException) -> None:
        if self._on_error is not None:
            try:
                self._on_error(err)
            except Exception:
                log.exception("%r: watch error handler failed", self)
            return
        log.warning("%r: %s: %s", self, type(err).__name__, err)
