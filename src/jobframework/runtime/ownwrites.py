"""A reconcile's own writes, so its key waits for the cache to see them.

A reconcile that writes (creates a Workload, patches a Job) is often followed at once by
another reconcile of the same key: an event that arrived meanwhile marked it dirty. If
that second pass reads the cache before the watch has delivered the first pass's write,
it acts on the old state: it creates the Workload again (``AlreadyExists``) or writes a
status that is already written. Go's informers usually win that race because they run
on their own goroutines; in one event loop the next reconcile usually wins it.

So the manager's client notes, while a reconcile runs, a future for each successful write
to a cached kind (:meth:`~jobframework.runtime.cache.Cache.observed`), and the controller
keeps that key in processing (events for it only mark it dirty, as during the reconcile)
until the cache has seen those writes or a timeout passes. Other keys are not held, and
no worker waits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

#: Seconds a controller holds a key for its writes by default (``own_writes_timeout``).
DEFAULT_TIMEOUT = 2.0

_pending: ContextVar[list[asyncio.Future[None]] | None] = ContextVar(
    "jobframework_own_writes", default=None)


def collecting_now() -> bool:
    """True inside :func:`collecting` (a reconcile run by a controller)."""
    return _pending.get() is not None


def note(future: asyncio.Future[None]) -> None:
    """Add the cache's ``observed`` future of one write to the current reconcile's."""
    pending = _pending.get()
    if pending is not None:
        pending.append(future)


@contextlib.contextmanager
def collecting() -> Iterator[list[asyncio.Future[None]]]:
    """Collect the futures :func:`note` adds within this block (and tasks it starts)."""
    pending: list[asyncio.Future[None]] = []
    token = _pending.set(pending)
    try:
        yield pending
    finally:
        _pending.reset(token)
