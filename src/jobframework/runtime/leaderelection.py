"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection``.

Candidates race to write their identity into the Lease's ``spec.holderIdentity``. Every
write is an update guarded by the resourceVersion just read, so the API server's
optimistic concurrency (409 Conflict) decides races: at most one writer wins a round.

Expiry is judged *locally*: a candidate remembers the monotonic time at which it last saw
the Lease's spec change and considers the holder alive until ``leaseDurationSeconds``
after that, whatever the timestamps written in the Lease say (clocks of different hosts
are not comparable). A holder renews ``renewTime`` every ``retry_period``; if it cannot
renew within ``renew_deadline`` it stops leading (and must stop acting as leader) before
anyone else may take the Lease, because ``renew_deadline < lease_duration``.

With ``release_on_cancel`` a leader cancelled cleanly writes an empty holder and a 1 s
duration, so the next candidate does not wait for the full expiry. Callers must stop the
work that needs leadership *before* cancelling the elector (the manager does).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import attrs

from .client.interface import Client
from .clock import Clock, RealClock, rfc3339_micro
from .errors import ApiError, NotFound
from .objects import GVK, Object, resource_version_of

__all__ = [
    "LEASE_GVK",
    "LeaderElectionConfig",
    "LeaderElectionRecord",
    "LeaderElector",
    "default_identity",
]

log = logging.getLogger(__name__)

LEASE_GVK = GVK("coordination.k8s.io", "v1", "Lease")

Callback = Callable[[], Awaitable[None] | None]


def default_identity() -> str:
    """``<hostname>_<uuid>``, as controller-runtime builds the holder identity."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{uuid.uuid4()}"


@attrs.frozen(kw_only=True)
class LeaderElectionConfig:
    """Where the Lease lives and the timing of the election (client-go's defaults).

    ``lease_duration`` is how long a non-leader waits, after last seeing the Lease change,
    before taking it; ``renew_deadline`` is how long the leader keeps retrying a renewal
    before giving up; ``retry_period`` is the interval between attempts.
    """

    name: str
    namespace: str
    identity: str = attrs.field(factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True
    jitter_factor: float = 1.2

    def __attrs_post_init__(self) -> None:
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if self.renew_deadline <= self.jitter_factor * self.retry_period:
            raise ValueError("renew_deadline must be greater than retry_period*jitter_factor")
        if self.retry_period <= 0:
            raise ValueError("retry_period must be positive")
        if not self.identity:
            raise ValueError("identity must not be empty")


@attrs.frozen(kw_only=True)
class LeaderElectionRecord:
    """The Lease spec fields the election uses (``resourcelock.LeaderElectionRecord``)."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Object) -> LeaderElectionRecord:
        """Read the record from a Lease object."""
        spec = lease.get("spec") or {}
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            lease_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        """The Lease ``spec`` for this record."""
        spec: dict[str, Any] = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.lease_transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return spec


class LeaderElector:
    """One candidate. :meth:`run` acquires, then renews until it fails or is cancelled.

    Callbacks (plain or coroutine functions): ``on_started_leading()`` once the Lease is
    acquired, ``on_stopped_leading()`` when :meth:`run` ends (always, as in client-go,
    even if leadership was never acquired), ``on_new_leader(identity)`` whenever the
    observed holder changes. Exceptions raised by callbacks are logged.

    :meth:`run` returns when leadership is lost (the renewal missed ``renew_deadline``);
    like client-go it does not try to re-acquire: a process that lost its lease should
    stop, since it can no longer tell whether someone else is acting.
    """

    def __init__(
        self,
        client: Client,
        config: LeaderElectionConfig,
        *,
        clock: Clock | None = None,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
        on_new_leader: Callable[[str], Awaitable[None] | None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.clock: Clock = clock or RealClock()
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._rng = rng or random.Random()
        self._observed: LeaderElectionRecord | None = None
        self._observed_time = 0.0
        self._reported_leader: str | None = None
        self._leading = False
        self._became_leader = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- state -------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        """This candidate's holder identity."""
        return self.config.identity

    def is_leader(self) -> bool:
        """True while this candidate holds (and keeps renewing) the Lease."""
        return self._leading

    def get_leader(self) -> str:
        """The holder identity last observed (``""`` when none)."""
        return self._observed.holder_identity if self._observed else ""

    @property
    def observed_record(self) -> LeaderElectionRecord | None:
        """The Lease spec last read or written."""
        return self._observed

    async def wait_for_leadership(self) -> None:
        """Return once this candidate has become leader."""
        await self._became_leader.wait()

    # -- main loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire, call ``on_started_leading``, renew until lost or cancelled.

        On cancellation while leading, the Lease is released when ``release_on_cancel``.
        """
        try:
            await self._acquire()
            self._leading = True
            self._became_leader.set()
            log.info("successfully acquired lease %s/%s as %s",
                     self.config.namespace, self.config.name, self.identity)
            await self._call(self._on_started)
            await self._renew()
            log.info("failed to renew lease %s/%s: leadership lost",
                     self.config.namespace, self.config.name)
        except asyncio.CancelledError:
            if self._leading and self.config.release_on_cancel:
                # The release must happen even though this task is being cancelled.
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.release())
            raise
        finally:
            self._leading = False
            await self._call(self._on_stopped)

    async def _acquire(self) -> None:
        cfg = self.config
        while True:
            acquired = await self.try_acquire_or_renew()
            self._maybe_report_transition()
            if acquired:
                return
            await self.clock.sleep(self._jittered(cfg.retry_period))

    async def _renew(self) -> None:
        cfg = self.config
        while True:
            deadline = self.clock.monotonic() + cfg.renew_deadline
            renewed = False
            while True:
                remaining = deadline - self.clock.monotonic()
                if remaining <= 0:
                    break
                ok = await self._before(self.try_acquire_or_renew(), remaining)
                if ok:
                    renewed = True
                    break
                remaining = deadline - self.clock.monotonic()
                if remaining <= 0:
                    break
                await self.clock.sleep(min(cfg.retry_period, remaining))
            self._maybe_report_transition()
            if not renewed:
                return
            await self.clock.sleep(cfg.retry_period)

    async def _before(self, coro: Coroutine[Any, Any, bool], seconds: float) -> bool:
        """Run ``coro`` but give up (False) when ``seconds`` pass on the clock first."""
        task = asyncio.ensure_future(coro)
        timer = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            done, _ = await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (task, timer):
                if not t.done():
                    t.cancel()
        if task in done and not task.cancelled():
            return bool(task.result())
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return False

    def _jittered(self, period: float) -> float:
        if self.config.jitter_factor <= 0:
            return period
        return period + self._rng.random() * self.config.jitter_factor * period

    # -- one round ---------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """One attempt (``tryAcquireOrRenew``): True when this candidate holds the Lease.

        Never raises: API and transport errors count as a failed attempt.
        """
        try:
            return await self._try_acquire_or_renew()
        except Exception as err:
            log.warning("error acquiring or renewing lease %s/%s: %s",
                        self.config.namespace, self.config.name, err)
            return False

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        now = rfc3339_micro(self.clock.now())
        desired = LeaderElectionRecord(
            holder_identity=self.identity,
            lease_duration_seconds=int(cfg.lease_duration),
            acquire_time=now,
            renew_time=now,
        )
        try:
            lease = await self.client.get(LEASE_GVK, cfg.name, namespace=cfg.namespace)
        except NotFound:
            try:
                created = await self.client.create(self._lease(desired, None))
            except ApiError as err:
                log.debug("error initially creating lease %s/%s: %s",
                          cfg.namespace, cfg.name, err)
                return False
            self._observe(LeaderElectionRecord.from_lease(created))
            return True
        except ApiError as err:
            log.warning("error retrieving lease %s/%s: %s", cfg.namespace, cfg.name, err)
            return False

        old = LeaderElectionRecord.from_lease(lease)
        if self._observed != old:
            self._observe(old)
        is_self = old.holder_identity == self.identity
        if (
            old.holder_identity
            and not is_self
            and self._observed_time + old.lease_duration_seconds > self.clock.monotonic()
        ):
            log.debug("lease %s/%s is held by %s and has not yet expired",
                      cfg.namespace, cfg.name, old.holder_identity)
            return False
        if is_self:
            desired = attrs.evolve(desired, acquire_time=old.acquire_time,
                                   lease_transitions=old.lease_transitions)
        else:
            desired = attrs.evolve(desired, lease_transitions=old.lease_transitions + 1)
        try:
            updated = await self.client.update(self._lease(desired, lease))
        except ApiError as err:
            log.debug("failed to update lease %s/%s: %s", cfg.namespace, cfg.name, err)
            return False
        self._observe(LeaderElectionRecord.from_lease(updated))
        return True

    async def release(self) -> bool:
        """Give the Lease up (empty holder, 1 s duration) if this candidate holds it."""
        if not self._leading or self._observed is None:
            return True
        cfg = self.config
        now = rfc3339_micro(self.clock.now())
        record = LeaderElectionRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=now,
            renew_time=now,
            lease_transitions=self._observed.lease_transitions,
        )
        try:
            lease = await self.client.get(LEASE_GVK, cfg.name, namespace=cfg.namespace)
            if LeaderElectionRecord.from_lease(lease).holder_identity != self.identity:
                return True
            updated = await self.client.update(self._lease(record, lease))
        except Exception as err:
            log.error("failed to release lease %s/%s: %s", cfg.namespace, cfg.name, err)
            return False
        self._observe(LeaderElectionRecord.from_lease(updated))
        self._leading = False
        log.info("released lease %s/%s", cfg.namespace, cfg.name)
        return True

    # -- helpers -----------------------------------------------------------------------

    def _lease(self, record: LeaderElectionRecord, current: Object | None) -> Object:
        cfg = self.config
        metadata: dict[str, Any] = {"name": cfg.name, "namespace": cfg.namespace}
        if current is not None:
            metadata = dict(current.get("metadata") or {})
            metadata["resourceVersion"] = resource_version_of(current)
        return {
            "apiVersion": LEASE_GVK.api_version,
            "kind": LEASE_GVK.kind,
            "metadata": metadata,
            "spec": record.to_spec(),
        }

    def _observe(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_time = self.clock.monotonic()

    def _maybe_report_transition(self) -> None:
        if self._observed is None:
            return
        leader = self._observed.holder_identity
        if leader == self._reported_leader:
            return
        self._reported_leader = leader
        if self._on_new_leader is not None and leader:
            cb = self._on_new_leader
            self._spawn(lambda: cb(leader))

    def _spawn(self, fn: Callable[[], Awaitable[None] | None]) -> None:
        async def runner() -> None:
            await self._call(fn)

        task = asyncio.get_running_loop().create_task(runner())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _call(fn: Callable[[], Awaitable[None] | None] | None) -> None:
        if fn is None:
            return
        try:
            result = fn()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("leader election callback failed")
