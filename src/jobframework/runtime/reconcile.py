"""Reconciliation: the contract between a controller and the code that does the work.

Reconciliation is *level-based*. A :class:`Reconciler` is told only *which* object to look
at (a :class:`Request`: namespace and name), never *what changed*. It reads the current
state (from the cache), compares it with the desired state, and acts to close the gap.
Events are coalesced before they reach it: ten changes to one object while a reconcile
runs produce one more reconcile, not ten, and an object is never reconciled by two
workers at once. A reconciler must therefore be idempotent and must not rely on seeing
every intermediate state; a deleted object shows up as a request whose ``get`` answers
``NotFound``.

What the controller does after ``reconcile`` returns (controller-runtime's precedence):

1. it raised :class:`TerminalError`: logged and counted as an error, *not* retried;
2. it raised anything else: logged, retried with per-object exponential backoff
   (any ``requeue_after`` it meant to return is irrelevant);
3. ``Result(requeue_after=s)`` with ``s > 0``: reconciled again after ``s`` seconds;
4. ``Result(requeue=True)``: reconciled again after the rate limiter's backoff;
5. otherwise: done until the next event; the backoff for the object is reset.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

import attrs

from .objects import ObjectKey

__all__ = ["Reconciler", "ReconcilerFunc", "Request", "Result", "TerminalError"]


@attrs.frozen(order=True)
class Request:
    """What to reconcile: the key of one object (``reconcile.Request``)."""

    key: ObjectKey

    @classmethod
    def of(cls, namespace: str, name: str) -> Request:
        """A request for ``namespace/name`` (``""`` namespace for cluster-scoped)."""
        return cls(ObjectKey(namespace, name))

    @property
    def namespace(self) -> str:
        """The object's namespace (``""`` when cluster-scoped)."""
        return self.key.namespace

    @property
    def name(self) -> str:
        """The object's name."""
        return self.key.name

    def __str__(self) -> str:
        return str(self.key)


@attrs.frozen
class Result:
    """What to do next with a request that reconciled without an exception.

    ``requeue_after`` (seconds) wins over ``requeue`` when both are set.
    """

    requeue: bool = False
    requeue_after: float = 0.0

    def is_zero(self) -> bool:
        """True for ``Result()``: nothing to requeue."""
        return not self.requeue and self.requeue_after <= 0


class TerminalError(Exception):
    """An error that retrying cannot fix: logged and counted, never requeued.

    Wrap the cause: ``raise TerminalError("bad spec") from err`` or ``TerminalError(err)``.
    """


@runtime_checkable
class Reconciler(Protocol):
    """Drives one object toward its desired state. See the module docstring."""

    async def reconcile(self, request: Request) -> Result:
        """Reconcile ``request``; return :class:`Result` or raise to retry."""


class ReconcilerFunc:
    """Adapts an ``async def fn(request) -> Result`` to :class:`Reconciler`."""

    def __init__(self, fn: Callable[[Request], Awaitable[Result]]) -> None:
        self._fn = fn

    async def reconcile(self, request: Request) -> Result:
        """Call the wrapped function."""
        return await self._fn(request)
