"""``setup_controllers`` on a running manager over the in-memory server: the watches
(AppWrappers; Succeeded pods), the requeues on the manager's ManualClock, the node
monitor, events and the ``appwrapper_phase_total`` metric."""

from __future__ import annotations

import contextlib
import datetime as dt

import pytest

from integrations.appwrapper.api import APPWRAPPER_GVK
from integrations.appwrapper.config import AppWrapperConfig, ConfigError, FaultToleranceConfig
from integrations.appwrapper.controller import setup_controllers
from integrations.appwrapper.faults import NODE_GVK
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.events import EVENT_GVK
from jobframework.runtime.manager import Manager
from jobframework.testing import APIServer
from jobframework.testing.running import running, until

from .controller_helpers import NS, POD_GVK, appwrapper, new_server, pod


@pytest.fixture(name="server")
def server_fixture() -> APIServer:
    return new_server()


async def test_appwrapper_runs_to_success_through_the_manager(server: APIServer) -> None:
    """Created unsuspended: the AppWrapper's own status writes drive it to Running; a
    pod turning Succeeded (the Pod watch) brings Succeeded; the TTL requeue on the
    manager's clock removes the resources."""
    api = server.client()
    clock = server.clock
    assert isinstance(clock, ManualClock)
    mgr = Manager(api, clock=clock)
    config = AppWrapperConfig(fault_tolerance=FaultToleranceConfig(
        success_ttl=dt.timedelta(minutes=1)))
    rec = await setup_controllers(mgr, config)
    assert rec.clock is clock

    async def phase() -> str:
        aw = await api.get(APPWRAPPER_GVK, "aw", namespace=NS)
        return str(aw.get("status", {}).get("phase", ""))

    async def pods() -> list[dict[str, object]]:
        return list((await api.list(POD_GVK, namespace=NS)).items)

    async with running(mgr):
        await api.create(appwrapper("aw", pod("p1"), pod("p2"), suspend=False))

        async def is_running() -> bool:
            return await phase() == "Running"
        await until(is_running, "Running")
        assert len(await pods()) == 2
        for p in await pods():
            p["status"] = {"phase": "Succeeded"}
            await api.update_status(p)

        async def is_succeeded() -> bool:
            return await phase() == "Succeeded"
        await until(is_succeeded, "Succeeded (the Succeeded pods' watch)")

        clock.advance(61)

        async def cleaned() -> bool:
            aw = await api.get(APPWRAPPER_GVK, "aw", namespace=NS)
            rd = [c for c in aw["status"].get("conditions", [])
                  if c["type"] == "ResourcesDeployed"]
            return bool(rd and rd[0]["status"] == "False")
        for _ in range(5):  # the deletion polls every 5 s on the manager's clock
            with contextlib.suppress(AssertionError):
                await until(cleaned, "TTL deletion", turns=300)
                break
            clock.advance(5)
        assert await cleaned()
        assert await pods() == []

    metrics = mgr.get_metrics()
    for ph in ("Suspended", "Resuming", "Running", "Succeeded"):
        assert metrics.sample("appwrapper_phase_total",
                              {"namespace": NS, "phase": ph}) == 1, ph


async def test_node_monitor_feeds_the_reconciler(server: APIServer) -> None:
    """With Autopilot monitoring on, Node changes reach the reconciler's node health."""
    api = server.client()
    mgr = Manager(api, clock=server.clock)
    rec = await setup_controllers(mgr)
    await api.create({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "n1", "labels": {"autopilot.ibm.com/gpuhealth": "EVICT"}}})
    async with running(mgr):
        async def flagged() -> bool:
            return rec.node_health.no_execute == {"n1": frozenset({"nvidia.com/gpu"})}
        await until(flagged, "the NoExecute node")
        node = await api.get(NODE_GVK, "n1")
        node["metadata"]["labels"] = {}
        await api.update(node)

        async def cleared() -> bool:
            return rec.node_health.no_execute == {}
        await until(cleared, "the node recovered")


async def test_no_node_monitor_when_monitoring_is_off(server: APIServer) -> None:
    """``autopilot.monitorNodes`` false: no NodeMonitor controller, nothing tracked."""
    api = server.client()
    mgr = Manager(api, clock=server.clock)
    rec = await setup_controllers(mgr, AppWrapperConfig(autopilot=None))
    await api.create({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "n1", "labels": {"autopilot.ibm.com/gpuhealth": "EVICT"}}})
    async with running(mgr):
        await api.create(appwrapper("aw", pod("p1"), suspend=False))

        async def is_running() -> bool:
            aw = await api.get(APPWRAPPER_GVK, "aw", namespace=NS)
            return bool(aw.get("status", {}).get("phase") == "Running")
        await until(is_running, "Running")
        assert rec.node_health.no_execute == {}


async def test_events_reach_the_api_server(server: APIServer) -> None:
    """Events are recorded by the ``appwrappers`` reporter as upstream v1.2.2 records
    them (events.k8s.io: Normal, reason ``ExternallySuspended``, action ``Suspending``,
    the bare message)."""
    api = server.client()
    mgr = Manager(api, clock=server.clock)
    await setup_controllers(mgr)
    async with running(mgr):
        await api.create(appwrapper("aw", pod("p1"), suspend=False))

        async def is_running() -> bool:
            aw = await api.get(APPWRAPPER_GVK, "aw", namespace=NS)
            return bool(aw.get("status", {}).get("phase") == "Running")
        await until(is_running, "Running")
        aw = await api.get(APPWRAPPER_GVK, "aw", namespace=NS)
        aw["spec"]["suspend"] = True
        await api.update(aw)

        async def suspending_event() -> bool:
            events = (await api.list(EVENT_GVK, namespace=NS)).items
            return any(e.get("reason") == "ExternallySuspended" for e in events)
        await until(suspending_event, "the ExternallySuspended event")
        (event,) = [e for e in (await api.list(EVENT_GVK, namespace=NS)).items
                    if e.get("reason") == "ExternallySuspended"]
        assert (event["type"], event["action"]) == ("Normal", "Suspending")
        assert event["note"] == "Externally suspended while in the Running phase"
        assert event["reportingController"] == "appwrappers"


async def test_invalid_config_is_rejected() -> None:
    """``setup_controllers`` validates the configuration first (upstream's main)."""
    server = new_server()
    mgr = Manager(server.client(), clock=server.clock)
    with pytest.raises(ConfigError, match="SuccessTTL"):
        await setup_controllers(mgr, AppWrapperConfig(
            fault_tolerance=FaultToleranceConfig(success_ttl=dt.timedelta(0))))


def test_pods_enqueue_their_appwrapper_once_finished() -> None:
    """Upstream's ``podMapFunc`` maps Succeeded pods; ours maps Failed ones too (the
    failure is seen at once instead of at the next poll). Running or unlabelled pods map
    to nothing."""
    from integrations.appwrapper.api import APPWRAPPER_LABEL
    from integrations.appwrapper.controller import AppWrapperReconciler
    from jobframework.runtime.reconcile import Request

    def labelled(phase: str, label: bool = True) -> dict[str, object]:
        meta: dict[str, object] = {"name": "p", "namespace": NS}
        if label:
            meta["labels"] = {APPWRAPPER_LABEL: "aw"}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "status": {"phase": phase}}

    assert AppWrapperReconciler.pod_requests(labelled("Succeeded")) == [Request.of(NS, "aw")]
    assert AppWrapperReconciler.pod_requests(labelled("Failed")) == [Request.of(NS, "aw")]
    assert AppWrapperReconciler.pod_requests(labelled("Running")) == []
    assert AppWrapperReconciler.pod_requests(labelled("Failed", label=False)) == []
