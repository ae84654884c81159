"""Shared helpers for the controller-layer tests (imported by path-relative module name)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from jobframework.runtime.clock import ManualClock
from jobframework.runtime.reconcile import Request, Result


async def until(cond: Callable[[], bool], *, turns: int = 500, what: str = "condition") -> None:
    """Let the loop run until ``cond()`` holds (a bounded number of turns, no real sleeps)."""
    for _ in range(turns):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"timed out waiting for {what}")


async def settle(turns: int = 50) -> None:
    """Let pending callbacks run."""
    for _ in range(turns):
        await asyncio.sleep(0)


Outcome = Result | BaseException | Callable[[], Result]


class ScriptedReconciler:
    """Returns (or raises) scripted outcomes per call and records every request seen."""

    def __init__(self, *outcomes: Outcome, default: Result | None = None) -> None:
        self.outcomes = list(outcomes)
        self.default = default or Result()
        self.calls: list[Request] = []

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request)
        outcome = self.outcomes.pop(0) if self.outcomes else self.default
        if isinstance(outcome, BaseException):
            raise outcome
        if callable(outcome):
            return outcome()
        return outcome


async def tick(clock: ManualClock, seconds: float, *, step: float = 0.5) -> None:
    """Advance ``clock`` by ``seconds`` in steps, letting woken tasks run after each."""
    elapsed = 0.0
    while elapsed < seconds - 1e-9:
        dt = min(step, seconds - elapsed)
        clock.advance(dt)
        elapsed += dt
        await settle()
