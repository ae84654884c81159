"""RateLimitingQueue: client-go workqueue semantics, driven by a ManualClock."""

from __future__ import annotations

import asyncio

import pytest

from jobframework.runtime.clock import ManualClock
from jobframework.runtime.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    QueueEmpty,
    QueueShutDown,
    RateLimitingQueue,
    default_controller_rate_limiter,
)


def make_queue(clock: ManualClock | None = None, **kw: object) -> RateLimitingQueue[str]:
    return RateLimitingQueue(clock=clock or ManualClock(), **kw)  # type: ignore[arg-type]


async def settle(turns: int = 10) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


# -- basic queue -------------------------------------------------------------------


async def test_fifo_order_and_dedup() -> None:
    q = make_queue()
    for item in ["a", "b", "a", "c", "b"]:
        q.add(item)
    assert len(q) == 3
    assert [await q.get(), await q.get(), await q.get()] == ["a", "b", "c"]
    with pytest.raises(QueueEmpty):
        q.get_nowait()


async def test_item_being_processed_is_not_handed_out_again_until_done() -> None:
    q = make_queue()
    q.add("a")
    assert await q.get() == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0, "re-added while processing: held back"
    with pytest.raises(QueueEmpty):
        q.get_nowait()
    q.done("a")
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0, "done without a re-add does not requeue"


async def test_get_waits_for_an_add() -> None:
    q = make_queue()
    getter = asyncio.create_task(q.get())
    await settle()
    assert not getter.done()
    q.add("x")
    assert await asyncio.wait_for(getter, 1) == "x"


async def test_one_add_wakes_one_getter() -> None:
    q = make_queue()
    g1 = asyncio.create_task(q.get())
    g2 = asyncio.create_task(q.get())
    await settle()
    q.add("x")
    await settle()
    assert [g1.done(), g2.done()] == [True, False]
    q.add("y")
    assert await asyncio.wait_for(g2, 1) == "y"


async def test_cancelled_getter_passes_its_wakeup_on() -> None:
    q = make_queue()
    g1 = asyncio.create_task(q.get())
    g2 = asyncio.create_task(q.get())
    await settle()
    q.add("x")  # wakes g1 ...
    g1.cancel()  # ... which is cancelled before it runs
    assert await asyncio.wait_for(g2, 1) == "x"
    with pytest.raises(asyncio.CancelledError):
        await g1


# -- shutdown ----------------------------------------------------------------------


async def test_shutdown_hands_out_queued_items_then_raises() -> None:
    q = make_queue()
    q.add("a")
    q.shutdown()
    q.add("b")  # refused
    assert q.shutting_down
    assert await q.get() == "a"
    with pytest.raises(QueueShutDown):
        await q.get()
    with pytest.raises(QueueShutDown):
        q.get_nowait()


async def test_shutdown_wakes_blocked_getters() -> None:
    q = make_queue()
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await settle()
    q.shutdown()
    for g in getters:
        with pytest.raises(QueueShutDown):
            await asyncio.wait_for(g, 1)


async def test_shutdown_drops_delayed_items() -> None:
    clock = ManualClock()
    q = make_queue(clock)
    q.add_after("a", 1)
    q.shutdown()
    clock.advance(2)
    assert len(q) == 0
    q.add_after("b", 0)
    assert len(q) == 0


async def test_shutdown_with_drain_waits_for_processing_items() -> None:
    q = make_queue()
    q.add("a")
    q.add("b")
    a = await q.get()
    b = await q.get()
    drain = asyncio.create_task(q.shutdown_with_drain())
    await settle()
    assert not drain.done()
    q.done(a)
    await settle()
    assert not drain.done(), "b is still being processed"
    q.done(b)
    await asyncio.wait_for(drain, 1)


async def test_shutdown_with_drain_returns_at_once_when_idle() -> None:
    q = make_queue()
    await asyncio.wait_for(q.shutdown_with_drain(), 1)
    assert q.shutting_down


async def test_shutdown_cancels_a_drain_wait() -> None:
    q = make_queue()
    q.add("a")
    await q.get()
    drain = asyncio.create_task(q.shutdown_with_drain())
    await settle()
    assert not drain.done()
    q.shutdown()
    await asyncio.wait_for(drain, 1)
    assert q.processing == {"a"}


# -- delaying ----------------------------------------------------------------------


async def test_add_after_waits_for_the_clock() -> None:
    clock = ManualClock()
    q = make_queue(clock)
    q.add_after("a", 1.0)
    assert len(q) == 0 and q.waiting == 1
    clock.advance(0.999)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1 and q.waiting == 0
    assert await q.get() == "a"


async def test_add_after_non_positive_delay_adds_now() -> None:
    q = make_queue()
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert len(q) == 2


async def test_add_after_keeps_the_earliest_deadline() -> None:
    clock = ManualClock()
    q = make_queue(clock)
    q.add_after("a", 5)
    q.add_after("a", 10)  # later: ignored
    q.add_after("a", 2)  # earlier: moves it forward
    clock.advance(2)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    clock.advance(10)
    assert len(q) == 0, "the superseded deadlines do not add it again"


async def test_delayed_items_come_out_in_deadline_order() -> None:
    clock = ManualClock()
    q = make_queue(clock)
    q.add_after("late", 3)
    q.add_after("early", 1)
    q.add_after("mid", 2)
    q.add("now")
    clock.advance(5)
    assert [q.get_nowait() for _ in range(4)] == ["now", "early", "mid", "late"]


async def test_waiting_loop_wakes_a_blocked_getter() -> None:
    clock = ManualClock()
    q = make_queue(clock)
    getter = asyncio.create_task(q.get())
    await settle()
    q.add_after("a", 1)
    q.add_after("b", 0.5)  # an earlier deadline interrupts the loop's sleep
    await settle()
    assert clock.sleepers >= 1
    clock.advance(0.5)
    assert await asyncio.wait_for(getter, 1) == "b"
    getter2 = asyncio.create_task(q.get())
    await settle()
    assert not getter2.done()
    clock.advance(0.5)
    assert await asyncio.wait_for(getter2, 1) == "a"
    await settle()
    assert q.waiting == 0
    assert clock.sleepers == 0, "the waiting loop ends when nothing waits"


async def test_delayed_item_being_processed_is_requeued_after_done() -> None:
    clock = ManualClock()
    q = make_queue(clock)
    q.add("a")
    assert await q.get() == "a"
    q.add_after("a", 1)
    clock.advance(1)
    assert len(q) == 0
    q.done("a")
    assert await q.get() == "a"


# -- rate limiting -----------------------------------------------------------------


async def test_add_rate_limited_backs_off_exponentially_and_forget_resets() -> None:
    clock = ManualClock()
    q = make_queue(clock)
    expected = [0.005, 0.01, 0.02, 0.04]
    for n, delay in enumerate(expected):
        assert q.num_requeues("a") == n
        q.add_rate_limited("a")
        clock.advance(delay - 1e-9)
        assert len(q) == 0, f"retry {n} came out early"
        clock.advance(1e-9)
        assert await q.get() == "a"
        q.done("a")
    assert q.num_requeues("a") == 4
    q.forget("a")
    assert q.num_requeues("a") == 0
    q.add_rate_limited("a")
    clock.advance(0.005)
    assert len(q) == 1


def test_exponential_limiter_caps_at_max_delay() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("x") for _ in range(2000)]
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655.36 s
    assert delays[18] == 1000.0
    assert delays[-1] == 1000.0
    assert limiter.num_requeues("x") == 2000
    assert limiter.when("y") == 0.005, "items are tracked separately"


def test_bucket_limiter_burst_then_qps() -> None:
    clock = ManualClock()
    bucket: BucketRateLimiter[str] = BucketRateLimiter(10, 100, clock=clock)
    assert all(bucket.when(str(i)) == 0 for i in range(100))
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2), "reservations queue up (bucket in debt)"
    clock.advance(1.0)  # 10 tokens earned: debt of 2 repaid, 8 in hand
    assert [bucket.when(str(i)) for i in range(8)] == [0] * 8
    assert bucket.when("z") == pytest.approx(0.1)
    clock.advance(1000)
    assert bucket.when("w") == 0, "refill is capped at the burst"
    assert bucket.num_requeues("w") == 0


def test_default_controller_rate_limiter_is_max_of_both() -> None:
    clock = ManualClock()
    limiter: MaxOfRateLimiter[str] = default_controller_rate_limiter(clock=clock)
    # 100 distinct items use the burst; per-item delays dominate.
    assert [limiter.when(f"i{i}") for i in range(100)] == [0.005] * 100
    # The bucket is empty now: the 101st item waits for a token, not 5 ms.
    assert limiter.when("new") == pytest.approx(0.1)
    assert limiter.num_requeues("i0") == 1
    limiter.forget("i0")
    assert limiter.num_requeues("i0") == 0


# -- metrics -----------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.value = 0.0
        self.observations: list[float] = []

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1

    def set(self, value: float) -> None:
        self.value = value

    def observe(self, value: float) -> None:
        self.observations.append(value)


class RecordingProvider:
    def __init__(self) -> None:
        self.metrics: dict[str, Recorder] = {}
        self.names: set[str] = set()

    def _new(self, kind: str, name: str) -> Recorder:
        self.names.add(name)
        return self.metrics.setdefault(kind, Recorder())

    def new_depth_metric(self, name: str) -> Recorder:
        return self._new("depth", name)

    def new_adds_metric(self, name: str) -> Recorder:
        return self._new("adds", name)

    def new_latency_metric(self, name: str) -> Recorder:
        return self._new("latency", name)

    def new_work_duration_metric(self, name: str) -> Recorder:
        return self._new("work", name)

    def new_unfinished_work_seconds_metric(self, name: str) -> Recorder:
        return self._new("unfinished", name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> Recorder:
        return self._new("longest", name)

    def new_retries_metric(self, name: str) -> Recorder:
        return self._new("retries", name)


async def test_metrics_hooks() -> None:
    clock = ManualClock()
    provider = RecordingProvider()
    q: RateLimitingQueue[str] = RateLimitingQueue(
        name="jobs", clock=clock, metrics_provider=provider
    )
    m = provider.metrics
    assert provider.names == {"jobs"}
    q.add("a")
    q.add("a")  # de-duplicated: not an add
    q.add("b")
    assert m["adds"].value == 2 and m["depth"].value == 2
    clock.advance(2)
    assert await q.get() == "a"
    assert m["depth"].value == 1
    assert m["latency"].observations == [2.0]
    clock.advance(3)
    assert await q.get() == "b"
    clock.advance(1)
    q.update_unfinished_work()
    assert m["unfinished"].value == pytest.approx(4 + 1)
    assert m["longest"].value == pytest.approx(4)
    q.done("a")
    assert m["work"].observations == [4.0]
    assert m["unfinished"].value == pytest.approx(1)
    q.add_rate_limited("c")
    q.add_after("d", 1)
    assert m["retries"].value == 2
    q.done("b")
    assert m["longest"].value == 0


async def test_unnamed_queue_does_not_ask_for_metrics() -> None:
    provider = RecordingProvider()
    q: RateLimitingQueue[str] = RateLimitingQueue(clock=ManualClock(), metrics_provider=provider)
    q.add("a")
    await q.get()
    q.done("a")
    assert provider.names == set()
    assert provider.metrics == {}
