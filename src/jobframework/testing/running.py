"""Driving a :class:`~jobframework.runtime.manager.Manager` in a test.

:func:`running` starts the manager in a task for the body of an ``async with`` block and
stops it (waiting for its task) when the block ends; :func:`until` yields to the event
loop until a check passes, failing after a bounded number of turns instead of sleeping
for wall-clock time, so a test on the in-memory server stays deterministic and fast.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from ..runtime.manager import Manager

__all__ = ["running", "until"]

_T = TypeVar("_T")


@contextlib.asynccontextmanager
async def running(mgr: Manager) -> AsyncIterator[None]:
    """Run ``mgr`` for the body of the block; stop it and wait for it afterwards."""
    task = asyncio.create_task(mgr.start())
    try:
        yield
    finally:
        await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


async def until(check: Callable[[], Awaitable[_T]], what: str, turns: int = 3000) -> _T:
    """Await ``check`` once per event-loop turn until it returns something true (True, a
    non-empty list...) and return that; after ``turns`` turns fail with an
    :class:`AssertionError` saying ``what`` was awaited."""
    for _ in range(turns):
        result = await check()
        if result:
            return result
        await asyncio.sleep(0)
    raise AssertionError(f"timed out waiting for {what}")
