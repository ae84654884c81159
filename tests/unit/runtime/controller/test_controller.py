"""Controller: result precedence, backoff, per-key exclusivity, concurrency, metrics."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from jobframework.runtime.clock import ManualClock
from jobframework.runtime.controller import Controller, ControllerAlreadyStarted
from jobframework.runtime.metrics import Metrics
from jobframework.runtime.reconcile import Request, Result, TerminalError

from .helpers import ScriptedReconciler, settle, until

A = Request.of("ns", "a")
B = Request.of("ns", "b")


@contextlib.asynccontextmanager
async def running(ctrl: Controller) -> AsyncIterator[Controller]:
    task = asyncio.create_task(ctrl.start())
    await ctrl.wait_for_sync()
    try:
        yield ctrl
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def make(rec: object, clock: ManualClock, **kw: object) -> Controller:
    return Controller("test", rec, clock=clock, **kw)  # type: ignore[arg-type]


def total(m: Metrics, result: str) -> float:
    return m.sample("controller_runtime_reconcile_total",
                    {"controller": "test", "result": result}) or 0.0


async def test_success_forgets_and_does_not_requeue() -> None:
    clock = ManualClock()
    rec = ScriptedReconciler(Result())
    ctrl = make(rec, clock)
    async with running(ctrl):
        ctrl.queue.add(A)
        await until(lambda: len(rec.calls) == 1)
        await settle()
        clock.advance(3600)
        await settle()
        assert rec.calls == [A]
        assert ctrl.queue.num_requeues(A) == 0
        assert total(ctrl.metrics, "success") == 1


async def test_exception_requeues_with_exponential_backoff() -> None:
    clock = ManualClock()
    rec = ScriptedReconciler(RuntimeError("boom"), RuntimeError("boom"), Result())
    ctrl = make(rec, clock)
    async with running(ctrl):
        ctrl.queue.add(A)
        await until(lambda: len(rec.calls) == 1)
        await settle()
        assert ctrl.queue.num_requeues(A) == 1
        # First retry after 5 ms, not before.
        clock.advance(0.004)
        await settle()
        assert len(rec.calls) == 1
        clock.advance(0.001)
        await until(lambda: len(rec.calls) == 2)
        await settle()
        # Second retry backs off to 10 ms.
        clock.advance(0.009)
        await settle()
        assert len(rec.calls) == 2
        clock.advance(0.001)
        await until(lambda: len(rec.calls) == 3)
        await settle()
        assert ctrl.queue.num_requeues(A) == 0, "success forgets the backoff"
        m = ctrl.metrics
        assert total(m, "error") == 2
        assert total(m, "success") == 1
        assert m.sample("controller_runtime_reconcile_errors_total", {"controller": "test"}) == 2


async def test_terminal_error_is_not_requeued() -> None:
    clock = ManualClock()
    rec = ScriptedReconciler(RuntimeError("transient"), TerminalError("bad spec"))
    ctrl = make(rec, clock)
    async with running(ctrl):
        ctrl.queue.add(A)
        await until(lambda: len(rec.calls) == 1)
        clock.advance(0.005)
        await until(lambda: len(rec.calls) == 2)
        await settle()
        assert ctrl.queue.num_requeues(A) == 0, "terminal error forgets the key"
        clock.advance(10_000)
        await settle()
        assert len(rec.calls) == 2
        m = ctrl.metrics
        assert m.sample("controller_runtime_terminal_reconcile_errors_total",
                        {"controller": "test"}) == 1
        assert m.sample("controller_runtime_reconcile_errors_total",
                        {"controller": "test"}) == 2
        assert total(m, "error") == 2


async def test_requeue_after_forgets_backoff_and_waits_exactly() -> None:
    clock = ManualClock()
    rec = ScriptedReconciler(RuntimeError("x"), RuntimeError("x"), Result(requeue_after=30),
                             Result())
    ctrl = make(rec, clock)
    async with running(ctrl):
        ctrl.queue.add(A)
        await until(lambda: len(rec.calls) == 1)
        clock.advance(0.005)
        await until(lambda: len(rec.calls) == 2)
        clock.advance(0.010)
        await until(lambda: len(rec.calls) == 3)
        await settle()
        assert ctrl.queue.num_requeues(A) == 0, "requeue_after forgets the failures"
        clock.advance(29.9)
        await settle()
        assert len(rec.calls) == 3
        clock.advance(0.1)
        await until(lambda: len(rec.calls) == 4)
        assert total(ctrl.metrics, "requeue_after") == 1


async def test_requeue_after_wins_over_requeue() -> None:
    clock = ManualClock()
    rec = ScriptedReconciler(Result(requeue=True, requeue_after=60), Result())
    ctrl = make(rec, clock)
    async with running(ctrl):
        ctrl.queue.add(A)
        await until(lambda: len(rec.calls) == 1)
        await settle()
        clock.advance(1)  # far beyond the 5 ms rate-limited delay
        await settle()
        assert len(rec.calls) == 1
        clock.advance(59)
        await until(lambda: len(rec.calls) == 2)
        assert total(ctrl.metrics, "requeue_after") == 1
        assert total(ctrl.metrics, "requeue") == 0


async def test_requeue_is_rate_limited() -> None:
    clock = ManualClock()
    rec = ScriptedReconciler(Result(requeue=True), Result(requeue=True), Result())
    ctrl = make(rec, clock)
    async with running(ctrl):
        ctrl.queue.add(A)
        await until(lambda: len(rec.calls) == 1)
        await settle()
        assert ctrl.queue.num_requeues(A) == 1
        clock.advance(0.005)
        await until(lambda: len(rec.calls) == 2)
        await settle()
        assert ctrl.queue.num_requeues(A) == 2, "requeue keeps the backoff growing"
        clock.advance(0.009)
        await settle()
        assert len(rec.calls) == 2
        clock.advance(0.001)
        await until(lambda: len(rec.calls) == 3)
        assert total(ctrl.metrics, "requeue") == 2


async def test_exception_never_kills_the_worker() -> None:
    clock = ManualClock()
    rec = ScriptedReconciler(*[ValueError(str(i)) for i in range(5)], default=Result())
    ctrl = make(rec, clock, max_concurrent_reconciles=1)
    async with running(ctrl):
        for i in range(5):
            ctrl.queue.add(Request.of("ns", f"k{i}"))
        await until(lambda: len(rec.calls) == 5)
        clock.advance(1)
        await until(lambda: len(rec.calls) == 10, what="retries after errors")
        assert {r.name for r in rec.calls[5:]} == {f"k{i}" for i in range(5)}


class Gate:
    """A reconciler whose calls block until released; tracks concurrency per key."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.active: dict[Request, int] = {}
        self.max_total = 0
        self.max_per_key = 0
        self.calls: list[Request] = []

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request)
        self.active[request] = self.active.get(request, 0) + 1
        self.max_per_key = max(self.max_per_key, self.active[request])
        self.max_total = max(self.max_total, sum(self.active.values()))
        try:
            await self.release.wait()
        finally:
            self.active[request] -= 1
        return Result()


async def test_max_concurrency_respected_and_gauges_follow() -> None:
    gate = Gate()
    ctrl = make(gate, ManualClock(), max_concurrent_reconciles=3)
    async with running(ctrl):
        for i in range(6):
            ctrl.queue.add(Request.of("ns", f"k{i}"))
        await until(lambda: len(gate.calls) == 3)
        await settle()
        assert len(gate.calls) == 3
        m = ctrl.metrics
        assert m.sample("controller_runtime_active_workers", {"controller": "test"}) == 3
        assert m.sample("controller_runtime_max_concurrent_reconciles",
                        {"controller": "test"}) == 3
        gate.release.set()
        await until(lambda: len(gate.calls) == 6)
        await until(lambda: m.sample("controller_runtime_active_workers",
                                     {"controller": "test"}) == 0)
        assert gate.max_total == 3


async def test_a_key_is_never_reconciled_concurrently() -> None:
    gate = Gate()
    ctrl = make(gate, ManualClock(), max_concurrent_reconciles=4)
    async with running(ctrl):
        ctrl.queue.add(A)
        await until(lambda: len(gate.calls) == 1)
        for _ in range(10):
            ctrl.queue.add(A)
        ctrl.queue.add(B)
        await until(lambda: len(gate.calls) == 2)
        await settle()
        assert gate.calls == [A, B], "A's re-adds wait for the running reconcile"
        gate.release.set()
        await until(lambda: len(gate.calls) == 3)
        await settle()
        assert gate.calls.count(A) == 2, "ten adds while running collapse into one"
        assert gate.max_per_key == 1


async def test_metrics_record_duration_and_workqueue_series() -> None:
    clock = ManualClock()

    async def slow(request: Request) -> Result:
        clock.advance(0.3)
        return Result()

    from jobframework.runtime.reconcile import ReconcilerFunc

    ctrl = make(ReconcilerFunc(slow), clock)
    async with running(ctrl):
        ctrl.queue.add(A)
        ctrl.queue.add(B)
        await until(lambda: total(ctrl.metrics, "success") == 2)
        m = ctrl.metrics
        labels = {"controller": "test"}
        assert m.sample("controller_runtime_reconcile_time_seconds_count", labels) == 2
        assert m.sample("controller_runtime_reconcile_time_seconds_sum", labels) == \
            pytest.approx(0.6)
        qlabels = {"name": "test", "controller": "test"}
        assert m.sample("workqueue_adds_total", qlabels) == 2
        assert m.sample("workqueue_depth", qlabels) == 0
        assert m.sample("workqueue_work_duration_seconds_count", qlabels) == 2
        text = m.exposition().decode()
        assert 'controller_runtime_reconcile_total{controller="test",result="success"} 2.0' \
            in text


async def test_shutdown_lets_in_flight_reconcile_finish_and_drops_backlog() -> None:
    gate = Gate()
    ctrl = make(gate, ManualClock(), max_concurrent_reconciles=1)
    task = asyncio.create_task(ctrl.start())
    await ctrl.wait_for_sync()
    ctrl.queue.add(A)
    ctrl.queue.add(B)
    await until(lambda: len(gate.calls) == 1)
    task.cancel()
    await settle()
    assert not task.done(), "waits for the in-flight reconcile"
    assert gate.active[A] == 1
    gate.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gate.calls == [A], "the queued key is not reconciled during shutdown"
    assert ctrl.queue.shutting_down


async def test_start_twice_fails() -> None:
    ctrl = make(ScriptedReconciler(), ManualClock())
    async with running(ctrl):
        with pytest.raises(ControllerAlreadyStarted):
            await ctrl.start()


def test_rejects_bad_options() -> None:
    with pytest.raises(ValueError):
        Controller("", ScriptedReconciler())
    with pytest.raises(ValueError):
        Controller("x", ScriptedReconciler(), max_concurrent_reconciles=0)


async def test_metric_series_exist_at_zero_once_started() -> None:
    ctrl = make(ScriptedReconciler(), ManualClock())
    assert ctrl.metrics.sample("controller_runtime_reconcile_total",
                               {"controller": "test", "result": "error"}) is None
    async with running(ctrl):
        for result in ("error", "requeue", "requeue_after", "success"):
            assert total(ctrl.metrics, result) == 0
            assert ctrl.metrics.sample("controller_runtime_reconcile_total",
                                       {"controller": "test", "result": result}) == 0.0
        assert ctrl.metrics.sample("controller_runtime_reconcile_errors_total",
                                   {"controller": "test"}) == 0.0


async def test_api_errors_are_logged_by_message_and_code_errors_with_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from jobframework.runtime import errors

    conflict = errors.Conflict("the object has been modified")
    wrapped = RuntimeError("updating workload status: conflict")
    wrapped.__cause__ = errors.Conflict("modified again")
    clock = ManualClock()
    rec = ScriptedReconciler(conflict, wrapped, KeyError("bug"), Result())
    ctrl = make(rec, clock)
    with caplog.at_level("ERROR", logger="jobframework.runtime.controller"):
        async with running(ctrl):
            ctrl.queue.add(A)
            for n, wait in ((1, 0.005), (2, 0.01), (3, 0.02)):
                await until(lambda n=n: len(rec.calls) == n)  # type: ignore[misc]
                await settle()
                clock.advance(wait)
            await until(lambda: len(rec.calls) == 4)
    records = [r for r in caplog.records if "reconciler error" in r.getMessage()]
    assert [r.exc_info is not None for r in records] == [False, False, True]
    assert [type(r.error).__name__ for r in records] == [  # type: ignore[attr-defined]
        "Conflict", "RuntimeError", "KeyError"]
    assert "the object has been modified" in records[0].getMessage()
    assert "conflict" in records[1].getMessage()
    assert total(ctrl.metrics, "error") == 3
