"""Property tests: leader election safety/liveness and level-based controller guarantees.

Each example runs a fresh event loop on a manual clock, so interleavings are decided by
the drawn actions only.
"""

from __future__ import annotations

import asyncio
import contextlib
import random

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobframework.runtime.clock import ManualClock
from jobframework.runtime.controller import Controller
from jobframework.runtime.errors import Conflict
from jobframework.runtime.leaderelection import LEASE_GVK, LeaderElectionConfig, LeaderElector
from jobframework.runtime.reconcile import Request, Result, TerminalError
from jobframework.testing import APIServer

from .helpers import settle

# -- leader election -------------------------------------------------------------------

LE_ACTIONS = st.one_of(
    st.tuples(st.just("advance"), st.sampled_from([0.25, 1.0, 3.0, 8.0])),
    st.tuples(st.just("crash"), st.integers(0, 2)),
    st.tuples(st.just("release"), st.integers(0, 2)),
    st.tuples(st.just("start"), st.integers(0, 2)),
    st.tuples(st.just("fail_updates"), st.integers(1, 8)),
    st.tuples(st.just("conflict_updates"), st.integers(1, 3)),
)


async def _election(actions: list[tuple[str, float]]) -> None:
    clock = ManualClock()
    server = APIServer(clock)
    electors: dict[int, LeaderElector] = {}
    tasks: dict[int, asyncio.Task[None]] = {}
    generation = [0]

    def start(i: int) -> None:
        if i in tasks and not tasks[i].done():
            return
        generation[0] += 1
        electors[i] = LeaderElector(
            server.client(),
            LeaderElectionConfig(name="lock", namespace="default",
                                 identity=f"c{i}-{generation[0]}"),
            clock=clock, rng=random.Random(generation[0]))
        tasks[i] = asyncio.create_task(electors[i].run())

    async def stop(i: int, release: bool) -> None:
        task = tasks.get(i)
        if task is None or task.done():
            return
        # A crash leaves without touching the Lease; a clean stop releases it.
        electors[i].config = attrs.evolve(electors[i].config, release_on_cancel=release)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def check() -> None:
        leaders = [e for i, e in electors.items() if e.is_leader() and not tasks[i].done()]
        assert len(leaders) <= 1, f"two leaders: {[e.identity for e in leaders]}"
        if leaders:
            lease = await server.client().get(LEASE_GVK, "lock", namespace="default")
            assert lease["spec"]["holderIdentity"] == leaders[0].identity

    async def advance(seconds: float) -> None:
        steps = round(seconds / 0.25)
        for _ in range(steps):
            clock.advance(0.25)
            await settle(30)
            await check()

    for i in range(3):
        start(i)
    await settle(60)
    for action, arg in actions:
        if action == "advance":
            await advance(arg)
        elif action == "crash":
            await stop(int(arg), release=False)
        elif action == "release":
            await stop(int(arg), release=True)
        elif action == "start":
            start(int(arg))
            await settle(30)
        elif action == "fail_updates":
            server.faults.fail("update", gvk=LEASE_GVK, error=500, times=int(arg))
        else:
            server.faults.fail("update", gvk=LEASE_GVK, times=int(arg),
                               error=Conflict("the object has been modified"))
        await check()
    # Liveness: with faults gone and a candidate running, someone leads within a bounded
    # time. The bound, with client-go's timing (lease 15 s, renew deadline 10 s, retry 2 s,
    # jitter 1.2), from the moment T the faults are cleared:
    #
    # 1. A leader whose current renewal round already failed is asleep for at most one
    #    retry period (it sleeps min(retry, time left before the deadline) between
    #    attempts). When it wakes, by T + retry, it either renews (faults are gone) or finds
    #    the renew deadline passed and stops leading. Like client-go's Run, it then returns
    #    for good and does not campaign again (the process would exit and be restarted), so
    #    while it is still running at T, "start(0)" would be a no-op and leave no candidate
    #    at all once it stops. Hence: wait one retry period, *then* make sure candidate 0
    #    runs. After T + retry no running elector can stop: renewals succeed, and acquiring
    #    never gives up.
    # 2. Nobody then writes the Lease until someone acquires it, so every running
    #    candidate first saw its current spec by the restart at the latest and may take it
    #    lease_duration after that; its attempts are at most retry * (1 + jitter) apart, so
    #    one of them lands within lease_duration + retry * (1 + jitter) of the restart.
    #    Racing candidates are settled by the resourceVersion: one wins.
    timing = LeaderElectionConfig(name="lock", namespace="default", identity="timing")
    server.faults.clear()
    await advance(timing.retry_period)
    start(0)
    await advance(timing.lease_duration
                  + timing.retry_period * (1 + timing.jitter_factor))
    leaders = [e for i, e in electors.items() if e.is_leader() and not tasks[i].done()]
    assert len(leaders) == 1
    for i in list(tasks):
        await stop(i, release=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LE_ACTIONS, max_size=14))
def test_leader_election_never_has_two_leaders(actions: list[tuple[str, float]]) -> None:
    asyncio.run(_election(actions))


# -- controller ------------------------------------------------------------------------

KEYS = [Request.of("ns", k) for k in "abcd"]
OUTCOMES = st.sampled_from(["ok", "error", "terminal", "requeue", "after"])


async def _controller(script: list[tuple[int, int, list[str]]], workers: int) -> None:
    """``script``: (key index, ticks to wait after adding, outcomes for this key's calls)."""
    clock = ManualClock()
    outcomes: dict[Request, list[str]] = {k: [] for k in KEYS}
    active: dict[Request, int] = dict.fromkeys(KEYS, 0)
    log: list[tuple[str, Request]] = []  # ("add" | "start", key), in order
    last: dict[Request, str] = {}

    class Rec:
        async def reconcile(self, request: Request) -> Result:
            log.append(("start", request))
            active[request] += 1
            assert active[request] == 1, f"{request} reconciled concurrently"
            try:
                await clock.sleep(0.5)  # work that spans other events
                outcome = outcomes[request].pop(0) if outcomes[request] else "ok"
                last[request] = outcome
                if outcome == "error":
                    raise RuntimeError("transient")
                if outcome == "terminal":
                    raise TerminalError("permanent")
                if outcome == "requeue":
                    return Result(requeue=True)
                if outcome == "after":
                    return Result(requeue_after=2.0)
                return Result()
            finally:
                active[request] -= 1

    ctrl = Controller("prop", Rec(), clock=clock, max_concurrent_reconciles=workers)
    task = asyncio.create_task(ctrl.start())
    await ctrl.wait_for_sync()
    for key_index, wait, outs in script:
        key = KEYS[key_index]
        outcomes[key].extend(outs)
        log.append(("add", key))
        ctrl.queue.add(key)
        for _ in range(wait):
            clock.advance(0.25)
            await settle(20)
    # Quiesce: every scripted outcome is bounded, so backoffs end.
    for _ in range(400):
        clock.advance(0.25)
        await settle(20)
        if not any(outcomes.values()) and not ctrl.queue.processing and not len(ctrl.queue) \
                and not ctrl.queue.waiting:
            break
    # Level-based guarantee: a reconcile of each key started after its last add.
    for key in KEYS:
        adds = [i for i, (what, k) in enumerate(log) if what == "add" and k == key]
        if adds:
            assert any(what == "start" and k == key for what, k in log[adds[-1]:]), \
                f"{key} not reconciled after its last add"
    # Errors and requeues are retried until an outcome that ends the work.
    assert all(outcome in ("ok", "terminal") for outcome in last.values()), last
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4),
                       st.lists(OUTCOMES, max_size=3)), min_size=1, max_size=12),
    st.integers(1, 3),
)
def test_controller_level_based_and_exclusive(
    script: list[tuple[int, int, list[str]]], workers: int
) -> None:
    asyncio.run(_controller(script, workers))
