"""The Autopilot node health monitor: upstream's ``node_health_monitor_test.go``
("Autopilot Monitoring"), called directly on the in-memory server."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.appwrapper.config import AppWrapperConfig
from integrations.appwrapper.faults import NODE_GVK, NodeHealth, NodeHealthMonitor
from jobframework.runtime.reconcile import Request
from jobframework.testing import APIServer, InMemoryClient

from .controller_helpers import new_server


class Nodes:
    def __init__(self, server: APIServer) -> None:
        self.api: InMemoryClient = server.client()
        self.health = NodeHealth()
        self.monitor = NodeHealthMonitor(self.api, AppWrapperConfig(), self.health)

    async def create(self, name: str) -> None:
        """Upstream's ``createNode``: 4 GPUs, Ready, no taints."""
        await self.api.create({"apiVersion": "v1", "kind": "Node",
                               "metadata": {"name": name, "labels": {"key1": "value1"}}})
        node = await self.api.get(NODE_GVK, name)
        node["status"] = {"capacity": {"nvidia.com/gpu": "4", "pods": "110"},
                          "conditions": [{"type": "Ready", "status": "True"}]}
        await self.api.update_status(node)

    async def reconcile(self, *names: str) -> None:
        for name in names:
            assert (await self.monitor.reconcile(Request.of("", name))).is_zero()

    async def edit(self, name: str, **changes: Any) -> None:
        node = await self.api.get(NODE_GVK, name)
        if "labels" in changes:
            node["metadata"]["labels"].update(changes["labels"])
        if "taints" in changes:
            node.setdefault("spec", {})["taints"] = changes["taints"]
        if "unschedulable" in changes:
            node.setdefault("spec", {})["unschedulable"] = changes["unschedulable"]
        await self.api.update(node)


@pytest.fixture(name="nodes")
async def nodes_fixture() -> Nodes:
    n = Nodes(new_server())
    await n.create("fake-node-1")
    await n.create("fake-node-2")
    return n


async def test_evict_label_marks_no_execute_and_warn_clears_it(nodes: Nodes) -> None:
    """Upstream "Autopilot Monitoring", NoExecute part (AU-12..AU-14)."""
    await nodes.reconcile("fake-node-1", "fake-node-2")
    assert nodes.health.no_execute == {}, "a healthy cluster has no unhealthy nodes"

    await nodes.edit("fake-node-1", labels={"autopilot.ibm.com/gpuhealth": "EVICT"})
    await nodes.reconcile("fake-node-1", "fake-node-2")
    assert nodes.health.no_execute == {"fake-node-1": frozenset({"nvidia.com/gpu"})}
    await nodes.reconcile("fake-node-1", "fake-node-2")
    assert nodes.health.no_execute == {"fake-node-1": frozenset({"nvidia.com/gpu"})}, \
        "a repeated reconcile does not change the map"
    assert nodes.health.no_schedule == {"fake-node-1": {"nvidia.com/gpu": "4"}}, \
        "EVICT is NoExecute, which also makes the GPUs unschedulable"

    await nodes.edit("fake-node-1", labels={"autopilot.ibm.com/gpuhealth": "WARN"})
    await nodes.reconcile("fake-node-1")
    assert nodes.health.no_execute == {}
    assert nodes.health.no_schedule == {}, "WARN is PreferNoSchedule only"


@pytest.mark.parametrize("taint", ["node.kubernetes.io/unreachable",
                                   "node.kubernetes.io/not-ready"])
async def test_unreachable_or_not_ready_node_is_unschedulable(nodes: Nodes, taint: str) -> None:
    """Upstream "Autopilot Monitoring", NoSchedule part (AU-15, AU-16): the whole
    capacity but ``pods``; idempotent; removing the taint empties the map."""
    await nodes.edit("fake-node-1", taints=[{"key": taint, "effect": "NoExecute"}])
    await nodes.reconcile("fake-node-1", "fake-node-2")
    assert nodes.health.no_schedule == {"fake-node-1": {"nvidia.com/gpu": "4"}}
    await nodes.reconcile("fake-node-1", "fake-node-2")
    assert nodes.health.no_schedule == {"fake-node-1": {"nvidia.com/gpu": "4"}}
    assert nodes.health.no_execute == {}, "node taints are not Autopilot labels"
    await nodes.edit("fake-node-1", taints=[])
    await nodes.reconcile("fake-node-1")
    assert nodes.health.no_schedule == {}


async def test_cordoned_node_and_deleted_node(nodes: Nodes) -> None:
    """A cordoned node is unschedulable; a deleted node leaves both maps."""
    await nodes.edit("fake-node-2", unschedulable=True,
                     labels={"autopilot.ibm.com/gpuhealth": "EVICT"})
    await nodes.reconcile("fake-node-2")
    assert nodes.health.no_schedule == {"fake-node-2": {"nvidia.com/gpu": "4"}}
    assert "fake-node-2" in nodes.health.no_execute
    await nodes.api.delete(NODE_GVK, "fake-node-2")
    await nodes.reconcile("fake-node-2")
    assert nodes.health.no_schedule == {} and nodes.health.no_execute == {}


async def test_no_schedule_label_with_zero_capacity_is_skipped(nodes: Nodes) -> None:
    """TESTING (NoSchedule) on a node without GPUs flags nothing (zero quantities are
    skipped), and never NoExecute."""
    node = await nodes.api.get(NODE_GVK, "fake-node-1")
    node["status"]["capacity"] = {"nvidia.com/gpu": "0", "pods": "110"}
    await nodes.api.update_status(node)
    await nodes.edit("fake-node-1", labels={"autopilot.ibm.com/gpuhealth": "TESTING"})
    await nodes.reconcile("fake-node-1")
    assert nodes.health.no_schedule == {} and nodes.health.no_execute == {}
