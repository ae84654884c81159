"""The manager: runs caches, controllers and other runnables, with optional leader election.

controller-runtime's ``manager.Manager``, embeddable in an asyncio program:

- it is built from a :class:`~jobframework.runtime.client.Client` the caller already has
  and holds no global state (its own metrics registry, cache, event broadcaster);
- ``await manager.start()`` runs inside the caller's event loop until
  :meth:`Manager.stop` is called, the task running it is cancelled, a runnable fails,
  or leadership is lost (then ``start`` raises :class:`LeaderElectionLost`).

Start order: the probe and metrics servers, the cache (waiting until every informer
requested so far has synced), the event broadcaster, the runnables that do not need
leadership, then leader election; the runnables that need leadership (controllers, by
default) start once elected (immediately without leader election).

Shutdown runs in reverse: leader-only runnables are cancelled and awaited *first*, then
leader election is cancelled (which releases the Lease), so a new leader can never run
alongside the old one's workers; then the other runnables, the event broadcaster (which
sends what is queued), the cache and the servers. ``graceful_shutdown_timeout`` bounds
(in real seconds) how long runnables may take to finish what they are doing.

A *runnable* is an object with ``async def start(self) -> None`` that runs until
cancelled (a controller), or a coroutine function taking no argument. It may define
``need_leader_election() -> bool``; ``add(..., needs_leader_election=...)`` overrides it.
A runnable that returns has finished; one that raises stops the manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from . import ownwrites
from .cache import Cache
from .client.interface import (
    Client,
    FieldSel,
    ObjectList,
    PatchType,
    Preconditions,
    PropagationPolicy,
    RESTMapper,
    Selector,
    WatchEvent,
)
from .clock import Clock, RealClock
from .events import EventBroadcaster, EventRecorder
from .healthz import Checker, Checks, ProbeServer
from .leaderelection import LeaderElectionConfig, LeaderElector
from .metrics import Metrics
from .objects import GVK, Object

__all__ = [
    "CachedClient",
    "LeaderElectionLost",
    "Manager",
    "Runnable",
    "RunnableFunc",
]

log = logging.getLogger(__name__)


class LeaderElectionLost(RuntimeError):
    """The manager stopped because it could not renew its Lease."""


@runtime_checkable
class Runnable(Protocol):
    """Something the manager runs: ``start`` returns only when cancelled (or finished)."""

    async def start(self) -> None:
        """Run until cancelled."""


class RunnableFunc:
    """Adapts ``async def fn() -> None`` to :class:`Runnable`."""

    def __init__(self, fn: Callable[[], Awaitable[None]], *, need_leader_election: bool = True):
        self._fn = fn
        self._need = need_leader_election

    async def start(self) -> None:
        """Run the function."""
        await self._fn()

    def need_leader_election(self) -> bool:
        """As given to the constructor."""
        return self._need

    def __repr__(self) -> str:
        return f"RunnableFunc({getattr(self._fn, '__qualname__', self._fn)!r})"


class CachedClient:
    """controller-runtime's default client: reads from the cache, writes to the API server.

    ``get``/``list`` of a kind answer from the manager's informer cache (an informer is
    started on first use, and the read waits until it has synced), so they are cheap but
    may lag behind the API server by the watch delay; a reconciler must tolerate reading
    an older version than it just wrote (and gets a Conflict if it updates from one).
    Kinds listed in ``uncached`` are read from the API server directly. Everything else
    (watch, create, update, patch, apply, delete, the REST mapper) goes to the API server.
    """

    def __init__(self, client: Client, cache: Cache, *, uncached: Sequence[GVK] = ()) -> None:
        self.api = client
        self.cache = cache
        self.uncached = frozenset(uncached)

    @property
    def rest_mapper(self) -> RESTMapper:
        """The API client's mapper."""
        return self.api.rest_mapper

    def _note(self, written: Object, *, gvk: GVK | None = None, dry_run: bool = False) -> None:
        # Inside a controller's reconcile, the key is held until the cache has this write
        # (see :mod:`~jobframework.runtime.ownwrites`); a dry run wrote nothing.
        if dry_run or not ownwrites.collecting_now():
            return
        gvk = gvk or GVK.of(written)
        if gvk not in self.uncached:
            future = self.cache.observed(gvk, written)
            if future is not None:
                ownwrites.note(future)

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        """From the cache (or the API server for uncached kinds)."""
        if gvk in self.uncached:
            return await self.api.get(gvk, name, namespace=namespace)
        return await self.cache.get(gvk, name, namespace=namespace)

    async def get_read_only(
        self, gvk: GVK, name: str, *, namespace: str | None = None
    ) -> Mapping[str, Any]:
        """:meth:`get` without the copy, for callers that only read the object (see
        :func:`~jobframework.runtime.client.get_read_only`): the cached object itself."""
        if gvk in self.uncached:
            return await self.api.get(gvk, name, namespace=namespace)
        return await self.cache.get_read_only(gvk, name, namespace=namespace)

    async def list(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
        matching_fields: Mapping[str, str] | None = None,
    ) -> ObjectList:
        """From the cache (or the API server for uncached kinds).

        ``matching_fields`` looks up field indexes and is served by the cache only.
        """
        if gvk in self.uncached:
            if matching_fields:
                raise ValueError(f"matching_fields needs a cached kind; {gvk} is uncached")
            return await self.api.list(gvk, namespace=namespace, label_selector=label_selector,
                                       field_selector=field_selector)
        return await self.cache.list(gvk, namespace=namespace, label_selector=label_selector,
                                     field_selector=field_selector,
                                     matching_fields=matching_fields)

    def watch(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
        resource_version: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Delegates to the API client."""
        return self.api.watch(gvk, namespace=namespace, label_selector=label_selector,
                              field_selector=field_selector, resource_version=resource_version,
                              allow_bookmarks=allow_bookmarks, timeout_seconds=timeout_seconds)

    async def create(
        self, obj: Object, *, field_manager: str | None = None, dry_run: bool = False
    ) -> Object:
        """Delegates to the API client."""
        out = await self.api.create(obj, field_manager=field_manager, dry_run=dry_run)
        self._note(out, dry_run=dry_run)
        return out

    async def update(
        self,
        obj: Object,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> Object:
        """Delegates to the API client."""
        out = await self.api.update(obj, subresource=subresource, field_manager=field_manager,
                                    dry_run=dry_run)
        self._note(out, dry_run=dry_run)
        return out

    async def update_status(self, obj: Object, *, field_manager: str | None = None) -> Object:
        """Delegates to the API client."""
        out = await self.api.update_status(obj, field_manager=field_manager)
        self._note(out)
        return out

    async def patch(
        self,
        gvk: GVK,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
    ) -> Object:
        """Delegates to the API client."""
        out = await self.api.patch(gvk, name, patch, namespace=namespace,
                                   patch_type=patch_type, subresource=subresource,
                                   field_manager=field_manager, force=force, dry_run=dry_run)
        self._note(out, gvk=gvk, dry_run=dry_run)
        return out

    async def apply(
        self,
        obj: Object,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
    ) -> Object:
        """Delegates to the API client."""
        out = await self.api.apply(obj, field_manager=field_manager, force=force,
                                   subresource=subresource)
        self._note(out)
        return out

    async def delete(
        self,
        gvk: GVK,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: PropagationPolicy | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> Object | None:
        """Delegates to the API client."""
        return await self.api.delete(gvk, name, namespace=namespace,
                                     propagation_policy=propagation_policy,
                                     preconditions=preconditions,
                                     grace_period_seconds=grace_period_seconds, dry_run=dry_run)


class _Group:
    """Runnables started and stopped together."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.runnables: list[Runnable] = []
        self.tasks: dict[asyncio.Task[None], Runnable] = {}
        self.started = False


def _needs_leader_election(runnable: Runnable) -> bool:
    fn = getattr(runnable, "need_leader_election", None)
    return bool(fn()) if callable(fn) else True


class Manager:
    """Runs a set of controllers and runnables. See the module docstring.

    Args:
        client: the API client (reads of :meth:`get_client` go through the cache).
        cache: an informer cache; built from ``client`` and ``cache_options`` when None.
        cache_options: keyword arguments for :class:`~jobframework.runtime.cache.Cache`.
        uncached: kinds :meth:`get_client` reads from the API server directly.
        leader_election: Lease settings, or None to run leader-only runnables at once.
        metrics_bind_address: ``host:port`` for ``/metrics`` (None: not served).
        health_probe_bind_address: ``host:port`` for ``/healthz`` and ``/readyz`` (None:
            not served; the checks still work in-process via :meth:`check_health`).
        clock: time for controllers' queues, leader election and events.
        event_recorder_factory: builds the recorder for a name (defaults to recorders of
            this manager's :class:`~jobframework.runtime.events.EventBroadcaster`).
        graceful_shutdown_timeout: real seconds runnables get to finish on shutdown.
        cache_sync_timeout: real seconds to wait for the cache to sync on start.
    """

    def __init__(
        self,
        client: Client,
        *,
        cache: Cache | None = None,
        cache_options: Mapping[str, Any] | None = None,
        uncached: Sequence[GVK] = (),
        leader_election: LeaderElectionConfig | None = None,
        metrics_bind_address: str | None = None,
        health_probe_bind_address: str | None = None,
        clock: Clock | None = None,
        event_recorder_factory: Callable[[str], EventRecorder] | None = None,
        graceful_shutdown_timeout: float = 30.0,
        cache_sync_timeout: float = 120.0,
        group_kind_concurrency: Mapping[str, int] | None = None,
    ) -> None:
        self.clock: Clock = clock or RealClock()
        #: Default worker count of a controller by the ``Kind.group`` it reconciles
        #: (``"Job.batch"``, ``"Pod"``), as controller-runtime's
        #: ``controller.groupKindConcurrency``; a builder's explicit option wins.
        self.group_kind_concurrency: Mapping[str, int] = dict(group_kind_concurrency or {})
        self.api_client = client
        self.cache = cache or Cache(client, clock=self.clock, **dict(cache_options or {}))
        self.client = CachedClient(client, self.cache, uncached=uncached)
        self.metrics = Metrics()
        self.leader_election = leader_election
        self.metrics_bind_address = metrics_bind_address
        self.health_probe_bind_address = health_probe_bind_address
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.cache_sync_timeout = cache_sync_timeout
        self.healthz = Checks("healthz")
        self.readyz = Checks("readyz")
        self.event_broadcaster = EventBroadcaster(client, clock=self.clock)
        self._recorder_factory = event_recorder_factory or self.event_broadcaster.new_recorder
        self._others = _Group("others")
        self._leader = _Group("leader election runnables")
        self._controller_names: set[str] = set()
        self._elector: LeaderElector | None = None
        self._elector_task: asyncio.Task[None] | None = None
        self._elected = asyncio.Event()
        self._stop = asyncio.Event()
        self._errors: list[BaseException] = []
        self._servers: list[ProbeServer] = []
        #: The server behind ``/metrics`` once started (None when not served).
        self.metrics_server: ProbeServer | None = None
        #: The server behind ``/healthz`` and ``/readyz`` once started (None when not served).
        self.health_probe_server: ProbeServer | None = None
        self._done = asyncio.Event()
        self._started = False
        self._stopping = False
        self._running = False

    # -- accessors -------------------------------------------------------------------

    def get_client(self) -> CachedClient:
        """The client for reconcilers: cached reads, direct writes (see :class:`CachedClient`)."""
        return self.client

    def get_api_reader(self) -> Client:
        """The uncached API client (controller-runtime's ``GetAPIReader``)."""
        return self.api_client

    def get_cache(self) -> Cache:
        """The informer cache."""
        return self.cache

    def get_metrics(self) -> Metrics:
        """This manager's metrics (its own Prometheus registry)."""
        return self.metrics

    def get_event_recorder_for(self, name: str) -> EventRecorder:
        """An event recorder reporting as ``name``."""
        return self._recorder_factory(name)

    @property
    def elector(self) -> LeaderElector | None:
        """The leader elector (None without leader election, or before start)."""
        return self._elector

    def is_leader(self) -> bool:
        """True while leader-only runnables may run (always after start without election)."""
        return self._elected.is_set() and not self._stopping

    async def elected(self) -> None:
        """Return once this manager leads (at start, when leader election is off)."""
        await self._elected.wait()

    def add_healthz_check(self, name: str, check: Checker) -> None:
        """Add a liveness check (``/healthz``)."""
        self.healthz.add(name, check)

    def add_readyz_check(self, name: str, check: Checker) -> None:
        """Add a readiness check (``/readyz``)."""
        self.readyz.add(name, check)

    def register_controller_name(self, name: str) -> None:
        """Reserve a controller name; names are unique per manager (metrics labels)."""
        if name in self._controller_names:
            raise ValueError(f"controller with name {name!r} already exists; names must be "
                             "unique per manager")
        self._controller_names.add(name)

    # -- runnables -------------------------------------------------------------------

    def add(self, runnable: Runnable | Callable[[], Awaitable[None]],
            *, needs_leader_election: bool | None = None) -> None:
        """Add a runnable; after start it is started at once if its group runs."""
        if not isinstance(runnable, Runnable):
            if not callable(runnable):
                raise TypeError(f"{runnable!r} is not a runnable")
            runnable = RunnableFunc(runnable)
        needs = (needs_leader_election if needs_leader_election is not None
                 else _needs_leader_election(runnable))
        group = self._leader if needs else self._others
        group.runnables.append(runnable)
        if group.started and not self._stopping:
            self._spawn(group, runnable)

    def _spawn(self, group: _Group, runnable: Runnable) -> None:
        task = asyncio.get_running_loop().create_task(self._run_runnable(runnable),
                                                      name=f"runnable {runnable!r}")
        group.tasks[task] = runnable
        task.add_done_callback(lambda t: group.tasks.pop(t, None))

    async def _run_runnable(self, runnable: Runnable) -> None:
        try:
            result = runnable.start()
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.error("runnable %r failed: %s", runnable, err, exc_info=err)
            self._fail(err)

    def _start_group(self, group: _Group) -> None:
        if group.started:
            return
        group.started = True
        for runnable in group.runnables:
            self._spawn(group, runnable)

    async def _stop_group(self, group: _Group) -> None:
        tasks = list(group.tasks)
        group.started = False
        if not tasks:
            return
        for t in tasks:
            t.cancel()
        _, pending = await asyncio.wait(tasks, timeout=self.graceful_shutdown_timeout)
        if pending:
            log.error("%d %s did not stop within the graceful shutdown timeout",
                      len(pending), group.name)

    def _fail(self, err: BaseException) -> None:
        self._errors.append(err)
        self._stop.set()

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, stop: asyncio.Event | None = None) -> None:
        """Run everything until :meth:`stop`, ``stop`` is set, cancellation, a failure or
        lost leadership (``mgr.Start(ctx)``, ``stop`` standing for the context: for
        instance :func:`~jobframework.runtime.runner.setup_signal_handler`'s event).

        Raises the first runnable error, :class:`LeaderElectionLost`, or ``TimeoutError``
        when the cache does not sync in time. A manager starts once.
        """
        if self._started:
            raise RuntimeError("a manager can be started only once")
        self._started = True
        self._running = True
        watcher: asyncio.Task[None] | None = None
        if stop is not None:
            watcher = asyncio.get_running_loop().create_task(
                self._stop_when(stop), name="manager stop watcher")
        try:
            await self._start_servers()
            self.cache.start()
            try:
                # asyncio.timeout keeps a concurrent cancellation (see Controller.start).
                async with asyncio.timeout(self.cache_sync_timeout):
                    synced = await self.cache.wait_for_cache_sync()
            except TimeoutError as err:
                raise TimeoutError("timed out waiting for the cache to sync") from err
            if not synced:
                raise RuntimeError("the cache stopped before it synced")
            self.event_broadcaster.start()
            self._start_group(self._others)
            if self.leader_election is None:
                self._on_started_leading()
            else:
                self._start_leader_election(self.leader_election)
            await self._stop.wait()
        finally:
            if watcher is not None:
                watcher.cancel()
            # Shielded so that a second cancellation cannot skip the release ordering.
            await asyncio.shield(self._shutdown())
        if self._errors:
            raise self._errors[0]

    async def _stop_when(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._stop.set()

    async def stop(self) -> None:
        """Ask a running :meth:`start` to shut down, and wait until it has."""
        self._stop.set()
        if self._running:
            await self._done.wait()

    async def _start_servers(self) -> None:
        metrics_addr, probe_addr = self.metrics_bind_address, self.health_probe_bind_address
        if metrics_addr is not None and metrics_addr == probe_addr:
            both = ProbeServer(metrics_addr, healthz=self.healthz, readyz=self.readyz,
                               registry=self.metrics.registry)
            self.metrics_server = self.health_probe_server = both
            self._servers.append(both)
        else:
            if metrics_addr is not None:
                self.metrics_server = ProbeServer(metrics_addr, registry=self.metrics.registry)
                self._servers.append(self.metrics_server)
            if probe_addr is not None:
                self.health_probe_server = ProbeServer(probe_addr, healthz=self.healthz,
                                                       readyz=self.readyz)
                self._servers.append(self.health_probe_server)
        for server in self._servers:
            await server.start()

    def _start_leader_election(self, config: LeaderElectionConfig) -> None:
        self._elector = LeaderElector(
            self.api_client, config, clock=self.clock,
            on_started_leading=self._on_started_leading,
            on_stopped_leading=self._on_stopped_leading,
        )
        self._elector_task = asyncio.get_running_loop().create_task(
            self._elector.run(), name=f"leader election {config.namespace}/{config.name}")

    def _on_started_leading(self) -> None:
        if self._stopping:
            return
        if self.leader_election is not None:
            self.metrics.leader_election_master_status.labels(self.leader_election.name).set(1)
        self._elected.set()
        self._start_group(self._leader)

    def _on_stopped_leading(self) -> None:
        if self.leader_election is not None:
            self.metrics.leader_election_master_status.labels(self.leader_election.name).set(0)
        if not self._stopping:
            log.error("leader election lost")
            self._fail(LeaderElectionLost("leader election lost"))

    async def _shutdown(self) -> None:
        self._stopping = True
        try:
            # Leader-only work stops before the Lease is released (controller-runtime's
            # engageStopProcedure): nobody else can lead while it still runs.
            await self._stop_group(self._leader)
            if self._elector_task is not None:
                self._elector_task.cancel()
                await asyncio.gather(self._elector_task, return_exceptions=True)
            await self._stop_group(self._others)
            await self.event_broadcaster.shutdown(min(5.0, self.graceful_shutdown_timeout))
            await self.cache.stop()
            for server in self._servers:
                with contextlib.suppress(Exception):
                    await server.stop()
        finally:
            self._running = False
            self._done.set()

    # -- probes ----------------------------------------------------------------------

    async def check_health(self, *, verbose: bool = False) -> tuple[int, str]:
        """Run the ``/healthz`` checks in-process: ``(status, body)``."""
        return await self.healthz.check_all(verbose=verbose)

    async def check_ready(self, *, verbose: bool = False) -> tuple[int, str]:
        """Run the ``/readyz`` checks in-process: ``(status, body)``."""
        return await self.readyz.check_all(verbose=verbose)
