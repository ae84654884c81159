"""Lease leader election: two candidates on one in-memory server, on a manual clock."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import pytest

from jobframework.runtime.clock import ManualClock, parse_time
from jobframework.runtime.errors import Conflict
from jobframework.runtime.leaderelection import (
    LEASE_GVK,
    LeaderElectionConfig,
    LeaderElector,
)
from jobframework.testing import APIServer

from .helpers import settle, tick, until


class Candidate:
    def __init__(self, server: APIServer, identity: str, **cfg: Any) -> None:
        self.events: list[str] = []
        self.times: dict[str, float] = {}
        self.elector = LeaderElector(
            server.client(),
            LeaderElectionConfig(name="lock", namespace="default", identity=identity, **cfg),
            clock=server.clock,
            on_started_leading=lambda: self._note("started"),
            on_stopped_leading=lambda: self._note("stopped"),
            on_new_leader=lambda who: self.events.append(f"leader={who}"),
            rng=random.Random(0),
        )
        self.task: asyncio.Task[None] | None = None

    def _note(self, what: str) -> None:
        self.events.append(what)
        self.times[what] = self.elector.clock.monotonic()

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run())

    async def cancel(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def lease(server: APIServer) -> dict[str, Any]:
    obj = await server.client().get(LEASE_GVK, "lock", namespace="default")
    spec: dict[str, Any] = obj["spec"]
    return spec


@pytest.fixture
def server() -> APIServer:
    return APIServer(ManualClock())


async def test_first_candidate_creates_the_lease(server: APIServer) -> None:
    a = Candidate(server, "a")
    a.start()
    await until(lambda: a.elector.is_leader())
    await settle()
    spec = await lease(server)
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert spec["acquireTime"].endswith("Z") and "." in spec["acquireTime"], "MicroTime"
    assert parse_time(spec["renewTime"]) == server.clock.now()
    assert sorted(a.events) == ["leader=a", "started"]  # on_new_leader runs in a task
    await a.cancel()


async def test_leader_renews_and_the_other_waits(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    a, b = Candidate(server, "a"), Candidate(server, "b")
    a.start()
    await until(lambda: a.elector.is_leader())
    b.start()
    await tick(clock, 60)
    assert a.elector.is_leader() and not b.elector.is_leader()
    spec = await lease(server)
    assert spec["holderIdentity"] == "a"
    assert parse_time(spec["renewTime"]) > parse_time(spec["acquireTime"]), "renewed"
    assert (clock.now() - parse_time(spec["renewTime"])).total_seconds() <= 2.0
    assert b.events == ["leader=a"]
    await a.cancel()
    await b.cancel()


async def test_takeover_after_expiry_when_leader_stops_renewing(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    a = Candidate(server, "a", release_on_cancel=False)
    b = Candidate(server, "b")
    a.start()
    await until(lambda: a.elector.is_leader())
    b.start()
    await tick(clock, 5)
    await a.cancel()  # a crash: no release
    assert a.events[-1] == "stopped"
    stopped_at = clock.monotonic()
    # b saw the last renewal at most 2 s before a stopped; it must wait 15 s after that.
    while not b.elector.is_leader() and clock.monotonic() - stopped_at < 30:
        await tick(clock, 0.25)
    took_over_after = clock.monotonic() - stopped_at
    # Not before the lease (as last observed renewed) expired; within one jittered retry.
    assert 13 <= took_over_after <= 15 + 4.4 + 0.5
    spec = await lease(server)
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    assert b.events[0] == "leader=a"
    assert sorted(b.events[1:]) == ["leader=b", "started"]
    await b.cancel()


async def test_release_on_cancel_hands_over_quickly(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    a, b = Candidate(server, "a"), Candidate(server, "b")
    a.start()
    await until(lambda: a.elector.is_leader())
    b.start()
    await tick(clock, 3)
    await a.cancel()
    spec = await lease(server)
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert not a.elector.is_leader()
    await tick(clock, 6, step=0.25)  # one retry period (with jitter) plus 1 s
    assert b.elector.is_leader()
    assert (await lease(server))["leaseTransitions"] == 1
    await b.cancel()


async def test_leader_that_cannot_renew_steps_down_before_expiry(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    a, b = Candidate(server, "a"), Candidate(server, "b")
    a.start()
    await until(lambda: a.elector.is_leader())
    b.start()
    await tick(clock, 4)
    server.faults.fail("update", gvk=LEASE_GVK, error=500, times=None)
    lost_from = clock.monotonic()
    await tick(clock, 14, step=0.25)
    assert a.task is not None and a.task.done(), "run() returns when leadership is lost"
    assert a.events[-1] == "stopped"
    assert not a.elector.is_leader()
    # a stepped down renew_deadline after its first failed attempt (which came at most one
    # retry period after the fault began).
    assert 10 <= a.times["stopped"] - lost_from <= 12
    server.faults.clear()
    await tick(clock, 20, step=0.25)
    assert b.elector.is_leader()
    assert b.times["started"] > a.times["stopped"], "never two leaders at once"
    await b.cancel()


async def test_renewal_hanging_past_the_deadline_loses_leadership(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    a = Candidate(server, "a")
    a.start()
    await until(lambda: a.elector.is_leader())
    server.faults.delay(3600, "get", gvk=LEASE_GVK)
    await tick(clock, 13, step=0.25)
    assert a.task is not None and a.task.done()
    assert a.events[-1] == "stopped"


async def test_conflicting_update_is_retried(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    a = Candidate(server, "a")
    a.start()
    await until(lambda: a.elector.is_leader())
    rule = server.faults.fail("update", gvk=LEASE_GVK,
                              error=Conflict("the object has been modified"), times=3)
    await tick(clock, 20)
    assert rule.hits == 3
    assert a.elector.is_leader(), "three conflicts within the deadline are survived"
    await a.cancel()


async def test_simultaneous_candidates_elect_exactly_one(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    cands = [Candidate(server, f"c{i}") for i in range(4)]
    for c in cands:
        c.start()
    await settle(200)
    await tick(clock, 30)
    leaders = [c for c in cands if c.elector.is_leader()]
    assert len(leaders) == 1
    assert (await lease(server))["holderIdentity"] == leaders[0].elector.identity
    assert all(c.elector.get_leader() == leaders[0].elector.identity for c in cands)
    for c in cands:
        await c.cancel()


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        LeaderElectionConfig(name="x", namespace="y", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError):
        LeaderElectionConfig(name="x", namespace="y", renew_deadline=2, retry_period=2)
    cfg = LeaderElectionConfig(name="x", namespace="y")
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (15, 10, 2)
    assert cfg.identity


async def test_transport_errors_are_failed_attempts_not_crashes(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    real = server.client()
    failures = {"left": 3}

    class Flaky:
        """A client whose first few reads fail below the API (connection refused)."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        async def get(self, *args: Any, **kwargs: Any) -> Any:
            if failures["left"] > 0:
                failures["left"] -= 1
                raise ConnectionRefusedError("connection refused")
            return await real.get(*args, **kwargs)

    elector = LeaderElector(
        Flaky(),  # type: ignore[arg-type]
        LeaderElectionConfig(name="lock", namespace="default", identity="a"),
        clock=clock, rng=random.Random(0))
    task = asyncio.create_task(elector.run())
    await tick(clock, 15)
    assert failures["left"] == 0
    assert elector.is_leader() and not task.done()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


# The example hypothesis found for test_leader_election_never_has_two_leaders: the leader
# is still inside a failing renewal round when the faults are cleared, gives up one retry
# period later (as client-go's does) and never campaigns again, while both other candidates
# have crashed.
GIVE_UP_AFTER_FAULTS_CLEARED = [
    ("crash", 1), ("fail_updates", 5), ("advance", 3.0), ("advance", 8.0), ("crash", 2),
]


async def test_property_example_leader_gives_up_after_faults_cleared() -> None:
    from .test_properties import _election

    await _election(GIVE_UP_AFTER_FAULTS_CLEARED)


async def test_leader_past_its_renew_deadline_stops_and_does_not_campaign_again(
    server: APIServer,
) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    a = Candidate(server, "a")
    b = Candidate(server, "b", release_on_cancel=False)
    c = Candidate(server, "c", release_on_cancel=False)
    a.start()
    await until(lambda: a.elector.is_leader())
    b.start()
    c.start()
    await settle(60)
    await b.cancel()  # crash
    rule = server.faults.fail("update", gvk=LEASE_GVK, error=500, times=5)
    await tick(clock, 11, step=0.25)
    # The renewal round that began at 2 s failed at 2, 4, 6, 8 and 10 s: its deadline is
    # 12 s, so the next attempt would come too late. a still counts as leader until then.
    assert rule.hits == 5
    assert a.elector.is_leader() and a.task is not None and not a.task.done()
    await c.cancel()  # crash
    server.faults.clear()
    await tick(clock, 2, step=0.25)
    # Faults gone, but the round's deadline passed while a slept: leadership is lost and
    # run() returns, without releasing (only a cancelled leader releases) and without
    # trying to acquire again, as client-go's Run.
    assert a.task.done() and a.events[-1] == "stopped"
    assert a.times["stopped"] == 12.0
    await tick(clock, 30, step=0.25)
    assert not a.elector.is_leader()
    assert (await lease(server))["holderIdentity"] == "a", "nobody campaigns any more"
    # A restarted candidate (a new identity, as a restarted process) takes the Lease a
    # lease duration after its first look, within one jittered retry period.
    a2 = Candidate(server, "a2")
    a2.start()
    started = clock.monotonic()
    await settle(60)
    while not a2.elector.is_leader() and clock.monotonic() - started < 30:
        await tick(clock, 0.25)
    assert 15 <= clock.monotonic() - started <= 15 + 2 * (1 + 1.2)
    spec = await lease(server)
    assert spec["holderIdentity"] == "a2"
    assert spec["leaseTransitions"] == 1
    await a2.cancel()
