"""Fluent construction of a controller and its watches (controller-runtime's ``builder``).

::

    ControllerBuilder(manager) \\
        .named("job") \\
        .for_(JOB_GVK, predicates=[GenerationChangedPredicate()]) \\
        .owns(WORKLOAD_GVK) \\
        .watches(LOCALQUEUE_GVK, EnqueueRequestsFromMapFunc(jobs_in_queue)) \\
        .with_options(max_concurrent_reconciles=4) \\
        .complete(JobReconciler(...))

- ``for_`` names the reconciled kind: its events enqueue the object itself;
- ``owns`` watches a child kind: its events enqueue the owner named by the child's
  *controller* owner reference, if that owner is of the ``for_`` kind;
- ``watches`` adds any kind with any handler;
- ``with_event_filter`` adds predicates applied to every watch.

``complete`` registers the controller with the manager (it starts when the manager leads).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from . import ownwrites
from .controller import Controller
from .handler import EnqueueRequestForObject, EnqueueRequestForOwner, EventHandler
from .objects import GVK
from .predicate import Predicate
from .reconcile import Reconciler, Request
from .source import Kind, Source
from .workqueue import RateLimiter

if TYPE_CHECKING:
    from .manager import Manager

__all__ = ["BuilderError", "ControllerBuilder"]


class BuilderError(ValueError):
    """The builder was configured inconsistently."""


@attrs.frozen
class _Watch:
    gvk: GVK
    handler: EventHandler
    predicates: tuple[Predicate, ...]


def group_kind_key(gvk: GVK) -> str:
    """controller-runtime's ``GroupKind.String()``: ``Kind.group``, or ``Kind`` for core."""
    return f"{gvk.kind}.{gvk.group}" if gvk.group else gvk.kind


def group_kind_concurrency(manager: Manager, gvk: GVK) -> int:
    """The manager's default worker count for controllers of ``gvk`` (1 when unset)."""
    table = getattr(manager, "group_kind_concurrency", None) or {}
    return int(table.get(group_kind_key(gvk), 1))


class ControllerBuilder:
    """Builds a :class:`~jobframework.runtime.controller.Controller` on a manager."""

    def __init__(self, manager: Manager) -> None:
        self._manager = manager
        self._name: str | None = None
        self._for: _Watch | None = None
        self._owns: list[tuple[GVK, tuple[Predicate, ...], bool]] = []
        self._watches: list[_Watch] = []
        self._raw_sources: list[Source] = []
        self._global_predicates: list[Predicate] = []
        self._max_concurrent_reconciles: int | None = None
        self._rate_limiter: RateLimiter[Request] | None = None
        self._need_leader_election: bool | None = None
        self._cache_sync_timeout: float | None = None
        self._own_writes_timeout: float | None = None

    def named(self, name: str) -> ControllerBuilder:
        """The controller's name (default: the ``for_`` kind, lower-cased)."""
        self._name = name
        return self

    def for_(self, gvk: GVK, *, predicates: Sequence[Predicate] = ()) -> ControllerBuilder:
        """The kind this controller reconciles; may be given once."""
        if self._for is not None:
            raise BuilderError("for_() may only be called once")
        self._for = _Watch(gvk, EnqueueRequestForObject(), tuple(predicates))
        return self

    def owns(
        self,
        gvk: GVK,
        *,
        predicates: Sequence[Predicate] = (),
        only_controller: bool = True,
    ) -> ControllerBuilder:
        """Watch ``gvk`` and reconcile the owner (of the ``for_`` kind) of each changed one."""
        self._owns.append((gvk, tuple(predicates), only_controller))
        return self

    def watches(
        self, gvk: GVK, handler: EventHandler, *, predicates: Sequence[Predicate] = ()
    ) -> ControllerBuilder:
        """Watch ``gvk`` with ``handler`` deciding what to reconcile."""
        self._watches.append(_Watch(gvk, handler, tuple(predicates)))
        return self

    def watches_raw_source(self, source: Source) -> ControllerBuilder:
        """Add a ready-made source (e.g. a :class:`~jobframework.runtime.source.Channel`)."""
        self._raw_sources.append(source)
        return self

    def with_event_filter(self, predicate: Predicate) -> ControllerBuilder:
        """A predicate applied to every watch of this controller."""
        self._global_predicates.append(predicate)
        return self

    def with_options(
        self,
        *,
        max_concurrent_reconciles: int | None = None,
        rate_limiter: RateLimiter[Request] | None = None,
        need_leader_election: bool | None = None,
        cache_sync_timeout: float | None = None,
        own_writes_timeout: float | None = None,
    ) -> ControllerBuilder:
        """Controller options (see :class:`~jobframework.runtime.controller.Controller`).

        Without ``max_concurrent_reconciles`` the manager's ``group_kind_concurrency`` for
        the ``for_`` kind applies (1 when it has none), as in controller-runtime.
        ``own_writes_timeout=0`` reconciles a key again without waiting for the cache to see
        the writes of its last reconcile.
        """
        if max_concurrent_reconciles is not None:
            self._max_concurrent_reconciles = max_concurrent_reconciles
        if rate_limiter is not None:
            self._rate_limiter = rate_limiter
        if need_leader_election is not None:
            self._need_leader_election = need_leader_election
        if cache_sync_timeout is not None:
            self._cache_sync_timeout = cache_sync_timeout
        if own_writes_timeout is not None:
            self._own_writes_timeout = own_writes_timeout
        return self

    def build(self, reconciler: Reconciler) -> Controller:
        """Create the controller, add it to the manager and return it."""
        if self._for is None and not self._watches and not self._raw_sources:
            raise BuilderError("a controller needs for_(), watches() or a raw source")
        if self._owns and self._for is None:
            raise BuilderError("owns() needs for_() to know the owner kind")
        name = self._name or (self._for.gvk.kind.lower() if self._for else "")
        if not name:
            raise BuilderError("name the controller with named() when it has no for_()")
        mgr = self._manager
        mgr.register_controller_name(name)
        workers = self._max_concurrent_reconciles
        if workers is None:
            workers = group_kind_concurrency(mgr, self._for.gvk) if self._for else 1
        ctrl = Controller(
            name,
            reconciler,
            max_concurrent_reconciles=workers,
            rate_limiter=self._rate_limiter,
            clock=mgr.clock,
            metrics=mgr.get_metrics(),
            rest_mapper=mgr.api_client.rest_mapper,
            cache_sync_timeout=(self._cache_sync_timeout if self._cache_sync_timeout is not None
                                else mgr.cache_sync_timeout),
            need_leader_election=(self._need_leader_election
                                  if self._need_leader_election is not None else True),
            own_writes_timeout=(self._own_writes_timeout
                                if self._own_writes_timeout is not None
                                else ownwrites.DEFAULT_TIMEOUT),
        )
        cache = mgr.get_cache()
        watches = [self._for] if self._for else []
        for gvk, preds, only_controller in self._owns:
            assert self._for is not None
            watches.append(_Watch(gvk, EnqueueRequestForOwner(
                self._for.gvk, only_controller=only_controller), preds))
        watches.extend(self._watches)
        for w in watches:
            ctrl.add_source(Kind(cache, w.gvk, w.handler,
                                 *self._global_predicates, *w.predicates))
        for src in self._raw_sources:
            ctrl.add_source(src)
        mgr.add(ctrl)
        return ctrl

    def complete(self, reconciler: Reconciler) -> None:
        """:meth:`build`, discarding the controller."""
        self.build(reconciler)
