"""Property tests of the work queue: a model of client-go's semantics, random workloads."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from jobframework.runtime.clock import ManualClock
from jobframework.runtime.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    QueueEmpty,
    RateLimitingQueue,
    default_controller_rate_limiter,
)

ITEMS = st.sampled_from("abcde")
DELAYS = st.sampled_from([0.0, 0.005, 0.01, 0.5, 1.0, 2.5])


class QueueModel(RuleBasedStateMachine):
    """The queue against an explicit model of queue/dirty/processing/waiting.

    Only per-item exponential backoff is used for ``add_rate_limited`` so the model
    can predict every delay; the bucket is tested on its own below.
    """

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.q: RateLimitingQueue[str] = RateLimitingQueue(
            ItemExponentialFailureRateLimiter(), clock=self.clock
        )
        self.queue: list[str] = []
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.waiting: dict[str, tuple[float, int]] = {}
        self.heap: list[tuple[float, int, str]] = []
        self.seq = itertools.count()
        self.failures: dict[str, int] = {}
        # Per item: dirty periods begun, and how many times it was handed out.
        self.periods: dict[str, int] = {}
        self.handed_out: dict[str, int] = {}

    # -- the model ---------------------------------------------------------------

    def m_add(self, item: str) -> None:
        if item in self.dirty:
            return
        self.dirty.add(item)
        self.periods[item] = self.periods.get(item, 0) + 1
        if item not in self.processing:
            self.queue.append(item)

    def m_promote(self) -> None:
        now = self.clock.monotonic()
        while self.heap and self.heap[0][0] <= now:
            _, seq, item = heapq.heappop(self.heap)
            if self.waiting.get(item, (0.0, -1))[1] == seq:
                del self.waiting[item]
                self.m_add(item)

    def m_add_after(self, item: str, delay: float) -> None:
        if delay <= 0:
            self.m_add(item)
            return
        ready_at = self.clock.monotonic() + delay
        current = self.waiting.get(item)
        if current is not None and current[0] <= ready_at:
            return
        seq = next(self.seq)
        self.waiting[item] = (ready_at, seq)
        heapq.heappush(self.heap, (ready_at, seq, item))

    # -- rules -------------------------------------------------------------------

    @rule(item=ITEMS)
    def add(self, item: str) -> None:
        self.q.add(item)
        self.m_add(item)

    @rule(item=ITEMS, delay=DELAYS)
    def add_after(self, item: str, delay: float) -> None:
        self.q.add_after(item, delay)
        self.m_add_after(item, delay)

    @rule(item=ITEMS)
    def add_rate_limited(self, item: str) -> None:
        n = self.failures.get(item, 0)
        self.failures[item] = n + 1
        self.q.add_rate_limited(item)
        self.m_add_after(item, min(0.005 * 2**n, 1000.0))

    @rule(item=ITEMS)
    def forget(self, item: str) -> None:
        self.q.forget(item)
        self.failures.pop(item, None)

    @rule(seconds=st.sampled_from([0.001, 0.005, 0.01, 0.5, 1.0, 3.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def get(self) -> None:
        self._get_one()

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        self._finish(data.draw(st.sampled_from(sorted(self.processing))))

    def _get_one(self) -> bool:
        self.m_promote()
        try:
            got = self.q.get_nowait()
        except QueueEmpty:
            assert self.queue == []
            return False
        assert self.queue, f"queue handed out {got!r} but the model is empty"
        expected = self.queue.pop(0)
        assert got == expected, "FIFO order (delayed items in deadline order)"
        assert got not in self.processing, "handed out while being processed"
        self.processing.add(got)
        self.dirty.discard(got)
        self.handed_out[got] = self.handed_out.get(got, 0) + 1
        return True

    def _finish(self, item: str) -> None:
        self.q.done(item)
        self.processing.discard(item)
        if item in self.dirty:
            self.queue.append(item)

    # -- invariants ----------------------------------------------------------------

    @invariant()
    def matches_model(self) -> None:
        self.m_promote()
        assert len(self.q) == len(self.queue)
        assert self.q.processing == self.processing
        assert self.q.waiting == len(self.waiting)
        assert len(set(self.queue)) == len(self.queue), "an item is queued at most once"
        for item in self.queue:
            assert item not in self.processing
        for item, n in self.failures.items():
            assert self.q.num_requeues(item) == n

    @invariant()
    def handed_out_once_per_dirty_period(self) -> None:
        for item, n in self.handed_out.items():
            pending = 1 if item in self.dirty else 0
            assert n + pending == self.periods[item]

    def teardown(self) -> None:
        # Everything added is eventually processed: run to quiescence.
        self.clock.advance(10_000)
        while True:
            for item in sorted(self.processing):
                self._finish(item)
            if not self._get_one():
                break
            while self._get_one():
                pass
        assert not self.dirty and not self.queue and not self.processing
        for item, n in self.periods.items():
            assert self.handed_out.get(item, 0) == n


TestQueueModel = QueueModel.TestCase
TestQueueModel.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)


@given(st.integers(min_value=1, max_value=80))
def test_backoff_sequence_is_5ms_doubling_capped(n: int) -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("k") for _ in range(n)]
    assert delays == [min(0.005 * 2**i, 1000.0) for i in range(n)]


@given(st.lists(st.tuples(st.sampled_from("xyz"), st.floats(0, 0.5)), max_size=300))
def test_bucket_never_grants_more_than_burst_plus_refill(
    calls: list[tuple[str, float]],
) -> None:
    clock = ManualClock()
    bucket: BucketRateLimiter[str] = BucketRateLimiter(10, 100, clock=clock)
    release_times = []
    for item, gap in calls:
        clock.advance(gap)
        delay = bucket.when(item)
        assert delay >= 0
        release_times.append(clock.monotonic() + delay)
    # Releases are granted at most burst at once, then one per 1/qps seconds.
    release_times.sort()
    for i, t in enumerate(release_times):
        assert t >= (i + 1 - 100) / 10 - 1e-9


@given(st.integers(min_value=1, max_value=100))
def test_default_limiter_for_one_item_follows_item_backoff(n: int) -> None:
    limiter = default_controller_rate_limiter(clock=ManualClock())
    assert [limiter.when("k") for _ in range(n)] == [min(0.005 * 2**i, 1000.0) for i in range(n)]


@settings(max_examples=60, deadline=None)
@given(
    adds=st.lists(st.sampled_from(range(8)), min_size=1, max_size=60),
    workers=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_concurrent_workers_never_share_an_item(adds: list[int], workers: int, seed: int) -> None:
    """Workers yield a random number of times while "processing"; adds interleave."""

    async def scenario() -> None:
        rng = random.Random(seed)
        q: RateLimitingQueue[int] = RateLimitingQueue(clock=ManualClock())
        active: set[int] = set()
        processed: list[int] = []

        async def worker() -> None:
            while True:
                try:
                    item = await q.get()
                except Exception:
                    return
                assert item not in active, f"{item} handed to two workers"
                active.add(item)
                for _ in range(rng.randint(0, 3)):
                    await asyncio.sleep(0)
                active.discard(item)
                processed.append(item)
                q.done(item)

        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        for item in adds:
            q.add(item)
            for _ in range(rng.randint(0, 2)):
                await asyncio.sleep(0)
        await asyncio.wait_for(q.shutdown_with_drain(), 5)
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        assert set(processed) == set(adds), "every added item was processed"
        assert len(q) == 0 and not q.processing

    asyncio.run(scenario())
