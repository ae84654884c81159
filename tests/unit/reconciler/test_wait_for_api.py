"""``WaitForAPI``: an enabled integration whose CRD is missing at setup gets its webhook at
once and its controller when the CRD appears (polled with backoff on the manager's clock)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobframework.integrations import IntegrationCallbacks, IntegrationError, IntegrationManager
from jobframework.reconciler import (
    WAIT_FOR_API_BASE_BACKOFF,
    WAIT_FOR_API_MAX_BACKOFF,
    APIWaiter,
    ReconcilerOptions,
    setup_controllers,
    wait_for_api,
)
from jobframework.runtime.builder import ControllerBuilder
from jobframework.runtime.client.discovery import NoKindMatchError
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.manager import CachedClient, Manager
from jobframework.runtime.objects import GVK
from jobframework.runtime.reconcile import Request, Result
from jobframework.testing import APIServer

from .helpers import START

WIDGET = GVK("example.com", "v1", "Widget")
NAME = "example.com/widget"
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"kind": "Widget", "plural": "widgets"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}}}]},
}


class WidgetReconciler:
    """Records what it reconciles."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.requests: list[Request] = []

    async def reconcile(self, request: Request) -> Result:
        self.requests.append(request)
        return Result()

    def setup_with_manager(self, mgr: Any) -> None:
        ControllerBuilder(mgr).named("widget").for_(WIDGET).complete(self)


class World:
    def __init__(self) -> None:
        self.clock = ManualClock(START)
        self.server = APIServer(self.clock)
        self.client = self.server.client()
        self.reconcilers: list[WidgetReconciler] = []
        self.webhook_calls: list[dict[str, Any]] = []
        self.im = IntegrationManager()
        self.im.register_integration(NAME, IntegrationCallbacks(
            new_reconciler=self.factory, setup_webhook=self.setup_webhook, job_type=WIDGET))
        self.mgr = Manager(self.client, clock=self.clock)

    def factory(self, client: Any, indexer: Any, recorder: Any, **kw: Any) -> WidgetReconciler:
        r = WidgetReconciler(recorder)
        self.reconcilers.append(r)
        return r

    def setup_webhook(self, server: Any, client: Any, **options: Any) -> None:
        self.webhook_calls.append(options)

    async def setup(self) -> frozenset[str]:
        return await setup_controllers(self.mgr, self.im, options=ReconcilerOptions(
            clock=self.clock), webhook_server=object(), enabled_frameworks=[NAME])

    async def settle(self, until: Any, *, seconds: float = 0.0) -> None:
        """Advance the clock by ``seconds`` in small steps, yielding, until ``until()``."""
        for i in range(2000):
            if until():
                return
            await asyncio.sleep(0)
            if seconds and i % 10 == 9:
                self.clock.advance(seconds)
        raise AssertionError("condition not reached")


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    await w.client.create({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "ns"}})
    yield w
    await w.mgr.stop()


@pytest.mark.kueue_case(
    "TestSetupControllers/mapper doesn't have kubeflow.org/mpijob, but no error occur",
    "TestSetupControllers/mapper doesn't have ray.io/raycluster when Controllers have been "
    "setup, but eventually does",
)
async def test_missing_crd_defers_controller_until_served(world: World) -> None:
    w = world
    done = await w.setup()
    assert done == frozenset(), "no controller while the API is missing"
    assert w.reconcilers == []
    assert "widget" not in w.mgr._controller_names
    assert NAME not in w.im.enabled_integrations(), "enabled only with its controller"
    assert len(w.webhook_calls) == 1 and "noop_webhook" not in w.webhook_calls[0], \
        "the real webhook is set up at once"
    task = asyncio.create_task(w.mgr.start())
    try:
        # The waiter polls at 1 s, 2 s, 4 s ...: still nothing after a minute.
        await w.settle(lambda: w.clock.monotonic() >= 60, seconds=1.0)
        assert w.reconcilers == []
        w.server.register_crd(WIDGET_CRD)
        await w.settle(lambda: w.reconcilers, seconds=1.0)
        assert w.clock.monotonic() <= 60 + 64 + 5, "picked up at the next poll"
        assert NAME in w.im.enabled_integrations()
        assert w.im.get_job_type_for_owner(
            {"apiVersion": "example.com/v1", "kind": "Widget"}) == WIDGET
        assert len(w.webhook_calls) == 1, "the webhook is not set up twice"
        await w.client.create({"apiVersion": "example.com/v1", "kind": "Widget",
                               "metadata": {"name": "w1", "namespace": "ns"}})
        [r] = w.reconcilers
        await w.settle(lambda: r.requests, seconds=0.01)
        assert r.requests[0] == Request.of("ns", "w1")
    finally:
        await w.mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


@pytest.mark.kueue_case("TestSetupControllers/setup controllers succeed")
async def test_served_crd_sets_up_controller_at_once(world: World) -> None:
    w = world
    w.server.register_crd(WIDGET_CRD)
    assert await w.setup() == {NAME}
    assert len(w.reconcilers) == 1 and "widget" in w.mgr._controller_names
    assert NAME in w.im.enabled_integrations()
    assert not any(isinstance(r, APIWaiter) for r in w.mgr._others.runnables)


async def test_other_rest_mapping_errors_fail_setup(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    w = world

    class Broken:
        async def rest_mapping(self, gvk: GVK) -> Any:
            raise ConnectionError("discovery unavailable")

    monkeypatch.setattr(CachedClient, "rest_mapper", property(lambda self: Broken()))
    with pytest.raises(IntegrationError,
                       match=r'^jobFrameworkName "example.com/widget": discovery unavailable$'):
        await w.setup()
    assert w.reconcilers == []


class FlakyMapper:
    """Not served for the first ``misses`` lookups (one lookup fails otherwise)."""

    def __init__(self, clock: ManualClock, misses: int, *, error_at: int = -1) -> None:
        self.clock = clock
        self.misses = misses
        self.error_at = error_at
        self.calls: list[float] = []

    async def rest_mapping(self, gvk: GVK) -> str:
        self.calls.append(self.clock.monotonic())
        if len(self.calls) - 1 == self.error_at:
            raise ConnectionError("blip")
        if len(self.calls) <= self.misses:
            raise NoKindMatchError(gvk)
        return "mapping"


async def drive(clock: ManualClock, task: asyncio.Task[None]) -> None:
    for _ in range(200):
        if task.done():
            return
        await asyncio.sleep(0)
        await clock.step()
    raise AssertionError("wait_for_api did not finish")


async def test_wait_for_api_backs_off_exponentially_to_two_minutes() -> None:
    clock = ManualClock(START)
    mapper = FlakyMapper(clock, misses=10)
    ran: list[float] = []

    async def action() -> None:
        ran.append(clock.monotonic())

    task = asyncio.create_task(wait_for_api(mapper, WIDGET, action, clock=clock))
    await drive(clock, task)
    gaps = [b - a for a, b in zip(mapper.calls, mapper.calls[1:], strict=False)]
    assert WAIT_FOR_API_BASE_BACKOFF == 1.0 and WAIT_FOR_API_MAX_BACKOFF == 120.0
    assert gaps == [1, 2, 4, 8, 16, 32, 64, 120, 120, 120]
    assert ran == [mapper.calls[-1]], "the action runs once, right after the API appears"


async def test_wait_for_api_runs_at_once_and_survives_other_errors() -> None:
    clock = ManualClock(START)
    ran: list[str] = []
    served = FlakyMapper(clock, misses=0)
    await wait_for_api(served, WIDGET, lambda: ran.append("sync"), clock=clock)
    assert ran == ["sync"] and served.calls == [0.0]

    flaky = FlakyMapper(clock, misses=2, error_at=1)
    task = asyncio.create_task(wait_for_api(flaky, WIDGET, lambda: ran.append("later"),
                                            clock=clock))
    await drive(clock, task)
    assert ran == ["sync", "later"] and len(flaky.calls) == 3


async def test_wait_for_api_stops_on_cancel() -> None:
    clock = ManualClock(START)
    mapper = FlakyMapper(clock, misses=10**6)
    ran: list[int] = []
    task = asyncio.create_task(wait_for_api(mapper, WIDGET, lambda: ran.append(1),
                                            clock=clock))
    await asyncio.sleep(0)
    assert clock.sleepers == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    clock.advance(1000)
    await asyncio.sleep(0)
    assert ran == [] and len(mapper.calls) == 1
