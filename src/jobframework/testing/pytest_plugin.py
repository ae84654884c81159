"""The users' testing kit: pytest fixtures for an integration under a stand-in Kueue.

Installed with the package and loaded by pytest through its ``pytest11`` entry point, so
a test file needs no ``conftest.py``:

* ``kueue_server``: an in-memory :class:`~jobframework.testing.APIServer` on a
  :class:`~jobframework.runtime.clock.ManualClock`, serving Kueue's kinds;
* ``kueue_clock``: that clock;
* ``kueue_client``: a client of ``kueue_server``;
* ``event_recorder``: an :class:`~jobframework.testing.recorder.EventCollector` that
  gets the events of the stand-in and of every manager started by ``kueue_manager``;
* ``kueue``: a :class:`~jobframework.testing.kueue.KueueStandIn` (Kueue's scheduler and
  workload controller) on ``kueue_server``;
* ``kueue_manager``: an async factory; ``await kueue_manager(MyJob)`` (or an
  :class:`~jobframework.integrations.IntegrationCallbacks`) runs a
  :class:`~jobframework.runtime.manager.Manager` with the integration's generic reconciler
  and serves its webhook on ``kueue_server``'s admission chain, until the test ends.

The fixtures work with pytest-asyncio in ``strict`` and ``auto`` mode. Override
``kueue_version`` (a :class:`~jobframework.constants.KueueVersion`) to play another Kueue.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import pytest

from ..base_webhook import BaseWebhook, setup_base_webhook
from ..constants import DEFAULT_KUEUE_VERSION, FeatureGates, KueueVersion
from ..indexer import setup_workload_owner_index
from ..integrations import IntegrationCallbacks, IntegrationManager
from ..interface import GenericJob
from ..options import ReconcilerOptions
from ..reconciler import GenericReconciler, new_generic_reconciler_factory, setup_integration
from ..runtime.clock import ManualClock
from ..runtime.manager import Manager
from ..runtime.objects import GVK
from ..webhook import WebhookServer, rule
from ..webhook.builder import mutate_path, validate_path
from .client import InMemoryClient
from .kueue import KueueStandIn, register_kueue_kinds
from .recorder import EventCollector
from .running import until
from .server import APIServer

try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - pytest-asyncio is in the "test" extra
    pytest_asyncio = None  # type: ignore[assignment]

__all__ = [
    "KueueManagerFactory",
    "RunningIntegration",
    "event_recorder",
    "kueue",
    "kueue_client",
    "kueue_clock",
    "kueue_manager",
    "kueue_server",
    "kueue_version",
]

_T = TypeVar("_T")


@pytest.fixture
def kueue_version() -> KueueVersion:
    """The Kueue version the stand-in and the reconciler's feature gates follow."""
    return DEFAULT_KUEUE_VERSION


@pytest.fixture
def kueue_clock() -> ManualClock:
    """The server's clock: time moves only when the test advances it."""
    return ManualClock()


@pytest.fixture
def kueue_server(kueue_clock: ManualClock) -> APIServer:
    """An in-memory API server serving Kueue's kinds (Workload, ResourceFlavor,
    ClusterQueue, LocalQueue, WorkloadPriorityClass). Register your CRDs on it, or pass
    them to ``kueue_manager``."""
    server = APIServer(kueue_clock)
    register_kueue_kinds(server)
    return server


@pytest.fixture
def kueue_client(kueue_server: APIServer) -> InMemoryClient:
    """A client of ``kueue_server`` (acting as ``admin``) for the test's own reads and
    writes."""
    return kueue_server.client()


@pytest.fixture
def event_recorder() -> EventCollector:
    """Collects ``(type, reason, message)`` and the object of every event recorded by the
    stand-in and by the managers of ``kueue_manager``."""
    return EventCollector()


@pytest.fixture
def kueue(kueue_server: APIServer, event_recorder: EventCollector,
          kueue_version: KueueVersion) -> KueueStandIn:
    """Kueue's scheduler and workload controller, played on ``kueue_server``."""
    return KueueStandIn(kueue_server, recorder=event_recorder, version=kueue_version)


# --- kueue_manager -------------------------------------------------------------------


@attrs.define
class RunningIntegration:
    """An integration running under a manager, as ``kueue_manager`` returns it."""

    #: The integration's name (``<group>/<kind>`` by default).
    name: str
    #: The job kind.
    gvk: GVK
    server: APIServer
    manager: Manager
    reconciler: GenericReconciler
    integration_manager: IntegrationManager
    options: ReconcilerOptions
    #: The webhook server whose handlers are on the API server's admission chain.
    webhook_server: WebhookServer
    #: The webhook paths served.
    paths: list[str]

    async def settle(self, *, quiet_turns: int = 30, max_turns: int = 20000,
                     retry_horizon: float = 0.5) -> None:
        """Let the manager work until nothing changes any more.

        Runs the event loop until the server's resourceVersion has not moved for
        ``quiet_turns`` turns; when a controller's retry (a rate-limited requeue) is due
        within ``retry_horizon`` seconds of the clock, the clock jumps to it and the
        manager works again. Time moves only for such retries.
        """
        clock = self.server.clock
        last, quiet = self.server.resource_version, 0
        for _ in range(max_turns):
            await asyncio.sleep(0)
            current = self.server.resource_version
            if current != last:
                last, quiet = current, 0
                continue
            quiet += 1
            if quiet < quiet_turns:
                continue
            deadline = clock.next_deadline() if isinstance(clock, ManualClock) else None
            if (deadline is None or not isinstance(clock, ManualClock)
                    or deadline - clock.monotonic() > retry_horizon):
                await self.server.settle()
                if self.server.resource_version == last:
                    return
                last, quiet = self.server.resource_version, 0
                continue
            await clock.step()
            quiet = 0
        raise AssertionError("the manager did not settle")

    async def until(self, check: Callable[[], Awaitable[_T]], what: str,
                    turns: int = 3000) -> _T:
        """Run the event loop until ``check`` returns something true, and return it (an
        :class:`AssertionError` naming ``what`` after ``turns`` loop turns); see
        :func:`jobframework.testing.running.until`."""
        return await until(check, what, turns)


def _default_name(gvk: GVK) -> str:
    return f"{gvk.group}/{gvk.kind.lower()}" if gvk.group else gvk.kind.lower()


def callbacks_for(job_class: Callable[..., GenericJob]) -> IntegrationCallbacks:
    """Integration callbacks for a :class:`~jobframework.interface.GenericJob` class: the
    generic reconciler, the workload owner index and Kueue's base webhook (suspend queued
    jobs, default the queue, validate) for its kind."""
    gvk = job_class().gvk()

    def setup_webhook(server: WebhookServer, client: Any = None, **options: Any) -> list[str]:
        if options.pop("noop_webhook", False):
            return []
        webhook = BaseWebhook(job_class, client, **{
            k: v for k, v in options.items()
            if k in ("integration_manager", "manage_jobs_without_queue_name",
                     "managed_jobs_namespace_selector", "queues", "features")})
        return setup_base_webhook(server, gvk, webhook)

    return IntegrationCallbacks(
        new_job=job_class,
        new_reconciler=new_generic_reconciler_factory(job_class),
        setup_webhook=setup_webhook,
        job_type=gvk,
        setup_indexes=lambda indexer: setup_workload_owner_index(indexer, gvk),
    )


def wire_webhooks(server: APIServer, webhooks: WebhookServer, paths: Sequence[str]) -> None:
    """Put the handlers at ``paths`` on ``server``'s admission chain as Kueue's webhook
    configurations do: ``/mutate-...`` on CREATE, ``/validate-...`` on CREATE and
    UPDATE, failure policy ``Fail``, for the served kind the path names."""
    by_path: dict[str, tuple[bool, GVK, str]] = {}
    for mapping in server.resources():
        gvk = mapping.gvk
        plural = server.kind_info(gvk).plural
        by_path[mutate_path(gvk)] = (True, gvk, plural)
        by_path[validate_path(gvk)] = (False, gvk, plural)
    for path in paths:
        if path not in by_path:
            raise ValueError(f"webhook path {path} names no kind the server serves")
        mutating, gvk, plural = by_path[path]
        hook = webhooks.as_admission_hook(path)
        name = f"{'m' if mutating else 'v'}{gvk.kind.lower()}.kb.io"
        if mutating:
            server.add_mutating_webhook(hook, name=name, rules=[
                rule(gvk.group, gvk.version, plural, ["CREATE"])])
        else:
            server.add_validating_webhook(hook, name=name, rules=[
                rule(gvk.group, gvk.version, plural, ["CREATE", "UPDATE"])])


class KueueManagerFactory:
    """``kueue_manager``: ``await kueue_manager(integration, ...)`` starts a manager
    running ``integration`` (an :class:`~jobframework.integrations.IntegrationCallbacks`,
    or a :class:`~jobframework.interface.GenericJob` class, see :func:`callbacks_for`).

    Keyword arguments: ``name`` (the framework name, default ``<group>/<kind>``),
    ``crds`` (CRD manifests to serve first), ``options`` (the
    :class:`~jobframework.options.ReconcilerOptions`; the clock and the integration
    manager are filled in), ``webhook`` (serve the integration's webhook, default
    True) and ``external_frameworks`` (``Kind.version.group`` names registered as
    externally managed). Every manager stops when the test ends.
    """

    def __init__(self, server: APIServer, recorder: EventCollector,
                 version: KueueVersion) -> None:
        self.server = server
        self.recorder = recorder
        self.version = version
        self.started: list[tuple[Manager, asyncio.Task[None]]] = []

    async def __call__(
        self,
        integration: IntegrationCallbacks | Callable[..., GenericJob],
        *,
        name: str | None = None,
        crds: Sequence[Mapping[str, Any]] = (),
        options: ReconcilerOptions | None = None,
        webhook: bool = True,
        external_frameworks: Sequence[str] = (),
    ) -> RunningIntegration:
        """Set up and start a manager for ``integration``; see the class docstring."""
        for crd in crds:
            self.server.register_crd(crd)
        callbacks = (integration if isinstance(integration, IntegrationCallbacks)
                     else callbacks_for(integration))
        gvk = callbacks.get_gvk()
        if gvk is None:
            raise ValueError("the integration names no job kind")
        name = name or _default_name(gvk)
        im = IntegrationManager()
        im.register_integration(name, callbacks)
        im.enable_integration(name)
        for kind in external_frameworks:
            im.register_external_job_type(kind)
        base = options or ReconcilerOptions(features=FeatureGates(version=self.version))
        opts = attrs.evolve(base, clock=self.server.clock,
                            integration_manager=base.integration_manager or im)
        mgr = Manager(self.server.client(), clock=self.server.clock,
                      event_recorder_factory=self.recorder.for_)
        webhooks = WebhookServer(clock=self.server.clock)
        reconciler, paths = await setup_integration(
            mgr, callbacks, opts, reporting_controller=f"{name}-{opts.manager_name}-controller",
            webhook_server=webhooks if webhook else None)
        wire_webhooks(self.server, webhooks, paths)
        task = asyncio.create_task(mgr.start())
        self.started.append((mgr, task))
        running = RunningIntegration(name, gvk, self.server, mgr, reconciler, im, opts,
                                     webhooks, paths)

        sync = asyncio.ensure_future(mgr.get_cache().wait_for_cache_sync())
        async with asyncio.timeout(60):
            done, _ = await asyncio.wait({task, sync}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            sync.cancel()
            task.result()
            raise RuntimeError("the manager stopped while starting")
        await running.settle()
        return running

    async def stop_all(self) -> None:
        """Stop every manager started, newest first."""
        while self.started:
            mgr, task = self.started.pop()
            await mgr.stop()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task


async def _kueue_manager(kueue_server: APIServer, event_recorder: EventCollector,
                         kueue_version: KueueVersion) -> AsyncIterator[KueueManagerFactory]:
    factory = KueueManagerFactory(kueue_server, event_recorder, kueue_version)
    try:
        yield factory
    finally:
        await factory.stop_all()


if pytest_asyncio is not None:
    kueue_manager = pytest_asyncio.fixture(_kueue_manager)
    kueue_manager.__doc__ = """An async factory running integrations under a manager on
    ``kueue_server`` (see :class:`KueueManagerFactory`); managers stop with the test."""
else:  # pragma: no cover

    @pytest.fixture
    def kueue_manager() -> KueueManagerFactory:
        """Needs pytest-asyncio."""
        raise pytest.UsageError("the kueue_manager fixture needs pytest-asyncio")
