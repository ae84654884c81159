"""Fault detection: the pod status summary and the Autopilot node health monitor.

:func:`pod_status_summary` counts an AppWrapper's pods (those labelled
``workload.codeflare.dev/appwrapper=<name>``) the way upstream's ``getPodStatus`` does,
decides whether a failure is terminal from the exit-code annotations, and flags the
nodes Autopilot marked NoExecute that running pods use.

:class:`NodeHealthMonitor` (upstream's ``NodeHealthMonitor``, controller ``NodeMonitor``)
reconciles Nodes into a :class:`NodeHealth`, which the AppWrapper reconciler reads:

- ``no_execute``: node → resources for which the node carries an Autopilot label whose
  configured effect is NoExecute (default: ``autopilot.ibm.com/gpuhealth=EVICT`` marks
  ``nvidia.com/gpu``); a Running AppWrapper using such a resource there is reset without
  a retry charge;
- ``no_schedule``: node → quantities that cannot be scheduled (the whole capacity but
  ``pods`` of a cordoned, unreachable or not-ready node, else the capacity of resources
  with a NoSchedule/NoExecute label). Kept for parity; nothing reads it upstream since
  the slack-ClusterQueue monitor was removed.

Upstream keeps both maps process-global; here they live in one object per manager.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from jobframework.runtime.builder import ControllerBuilder
from jobframework.runtime.errors import NotFound
from jobframework.runtime.handler import EnqueueRequestForObject
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object, is_being_deleted, labels_of
from jobframework.runtime.reconcile import Request, Result
from jobframework.validation import quantity_value

from .config import AppWrapperConfig

log = logging.getLogger(__name__)

__all__ = [
    "NODE_GVK",
    "NODE_MONITOR_CONTROLLER_NAME",
    "NodeHealth",
    "NodeHealthMonitor",
    "PodStatusSummary",
    "pod_status_summary",
]

NODE_GVK: Final = GVK("", "v1", "Node")
#: Upstream's controller name for the node monitor.
NODE_MONITOR_CONTROLLER_NAME: Final = "NodeMonitor"
_UNSCHEDULABLE_TAINTS: Final = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")


# --- node health ---------------------------------------------------------------------------------


@attrs.define
class NodeHealth:
    """What the node monitor knows about unhealthy nodes (shared with the reconciler)."""

    no_execute: dict[str, frozenset[str]] = attrs.field(factory=dict)
    no_schedule: dict[str, dict[str, str]] = attrs.field(factory=dict)

    def forget(self, node: str) -> None:
        """Drop a deleted node from both maps."""
        if self.no_execute.pop(node, None) is not None:
            log.info("Updated NoExecute information due to Node deletion: %d nodes: %s",
                     len(self.no_execute), self.no_execute)
        if self.no_schedule.pop(node, None) is not None:
            log.info("Updated NoSchedule information due to Node deletion: %d nodes: %s",
                     len(self.no_schedule), self.no_schedule)


def _nonzero(q: Any) -> bool:
    value = quantity_value(q)
    return value is not None and value != 0


class NodeHealthMonitor:
    """Reconciles Nodes into a :class:`NodeHealth` (see the module docstring)."""

    def __init__(self, reader: Any, config: AppWrapperConfig, health: NodeHealth) -> None:
        self.reader = reader
        self.config = config
        self.health = health

    def _taints(self) -> Mapping[str, Sequence[Any]]:
        return self.config.autopilot.resource_taints if self.config.autopilot else {}

    async def reconcile(self, request: Request) -> Result:
        """Refresh the node's entries (removing them when it is gone or going)."""
        try:
            node = await self.reader.get(NODE_GVK, request.name)
        except NotFound:
            self.health.forget(request.name)
            return Result()
        if is_being_deleted(node):
            self.health.forget(request.name)
        else:
            self.update_no_execute(node)
            self.update_no_schedule(node)
        return Result()

    def update_no_execute(self, node: Object) -> None:
        """The node's NoExecute resources from its Autopilot labels."""
        name = str(node["metadata"]["name"])
        labels = labels_of(node)
        resources = frozenset(
            resource for resource, taints in self._taints().items() for t in taints
            if t.effect == "NoExecute" and labels.get(t.key) == t.value and t.key in labels)
        prior = self.health.no_execute.get(name)
        if resources == (prior or frozenset()):
            return
        if resources:
            self.health.no_execute[name] = resources
        else:
            del self.health.no_execute[name]
        log.info("Updated NoExecute information: %d nodes: %s", len(self.health.no_execute),
                 self.health.no_execute)

    @staticmethod
    def node_is_unschedulable(node: Object) -> bool:
        """Cordoned, or tainted unreachable / not-ready."""
        spec = node.get("spec") or {}
        if spec.get("unschedulable"):
            return True
        return any(isinstance(t, Mapping) and t.get("key") in _UNSCHEDULABLE_TAINTS
                   for t in spec.get("taints") or [])

    def update_no_schedule(self, node: Object) -> None:
        """The node's unschedulable quantities."""
        name = str(node["metadata"]["name"])
        capacity = {str(k): str(v) for k, v in
                    ((node.get("status") or {}).get("capacity") or {}).items()}
        resources: dict[str, str] = {}
        if self.node_is_unschedulable(node):
            resources = {k: v for k, v in capacity.items() if k != "pods"}
        else:
            labels = labels_of(node)
            for resource, taints in self._taints().items():
                for t in taints:
                    if (t.effect in ("NoExecute", "NoSchedule") and t.key in labels
                            and labels[t.key] == t.value and _nonzero(capacity.get(resource))):
                        resources[resource] = capacity[resource]
        prior = self.health.no_schedule.get(name)
        if resources == (prior or {}):
            return
        if resources:
            self.health.no_schedule[name] = resources
        else:
            del self.health.no_schedule[name]
        log.info("Updated NoSchedule information: %d nodes: %s", len(self.health.no_schedule),
                 self.health.no_schedule)

    def setup_with_manager(self, mgr: Manager) -> None:
        """Watch Nodes, each change reconciling that node (controller ``NodeMonitor``)."""
        ControllerBuilder(mgr).named(NODE_MONITOR_CONTROLLER_NAME) \
            .watches(NODE_GVK, EnqueueRequestForObject()).complete(self)


# --- pod status ----------------------------------------------------------------------------------


@attrs.define
class PodStatusSummary:
    """Upstream's ``podStatusSummary``: the pod counts the Running phase decides on."""

    expected: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminal_failure: bool = False
    no_execute_nodes: set[str] = attrs.field(factory=set)

    @property
    def total(self) -> int:
        """Every counted pod."""
        return self.pending + self.running + self.succeeded + self.failed


def _terminated_exit_codes(pod: Mapping[str, Any]) -> list[int]:
    """Non-zero ``state.terminated.exitCode`` of the regular containers (not init
    containers, not ``lastState``), as upstream reads them."""
    codes = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = ((cs or {}).get("state") or {}).get("terminated")
        if isinstance(terminated, Mapping):
            code = terminated.get("exitCode", 0)
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                codes.append(code)
    return codes


def _uses_flagged_resource(pod: Mapping[str, Any], resources: Iterable[str]) -> bool:
    # Regular containers only, as upstream (initContainers are not looked at here).
    for container in (pod.get("spec") or {}).get("containers") or []:
        res = (container or {}).get("resources") or {}
        for key in ("limits", "requests"):
            values = res.get(key) or {}
            if any(r in values and _nonzero(values[r]) for r in resources):
                return True
    return False


def pod_status_summary(
    pods: Iterable[Mapping[str, Any]],
    expected: int,
    *,
    terminal_exit_codes: Sequence[int] = (),
    retryable_exit_codes: Sequence[int] = (),
    no_execute_nodes: Mapping[str, Iterable[str]] | None = None,
) -> PodStatusSummary:
    """Count ``pods`` by phase as upstream's ``getPodStatus``.

    Pending pods count even while being deleted; Running ones only when not being
    deleted; Succeeded and Failed always. A failed pod makes the failure terminal when a
    container exited with a listed terminal code, or (with retryable codes given) with a
    non-zero code that is not listed. ``no_execute_nodes`` (the node monitor's map) flags
    the nodes of running pods that use one of the node's NoExecute resources; None skips
    the check (Autopilot node monitoring off).
    """
    summary = PodStatusSummary(expected=expected)
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Pending":
            summary.pending += 1
        elif phase == "Running":
            if is_being_deleted(pod):
                continue
            summary.running += 1
            if no_execute_nodes:
                node = str((pod.get("spec") or {}).get("nodeName") or "")
                flagged = no_execute_nodes.get(node)
                if flagged and _uses_flagged_resource(pod, flagged):
                    summary.no_execute_nodes.add(node)
        elif phase == "Succeeded":
            summary.succeeded += 1
        elif phase == "Failed":
            summary.failed += 1
            codes = _terminated_exit_codes(pod)
            if terminal_exit_codes and any(c in terminal_exit_codes for c in codes):
                summary.terminal_failure = True
            if retryable_exit_codes and any(c not in retryable_exit_codes for c in codes):
                summary.terminal_failure = True
    return summary


def go_string_set(items: Iterable[str]) -> str:
    """``%v`` of a Go ``sets.Set[string]`` (a map to empty structs): ``map[a:{} b:{}]``."""
    return "map[" + " ".join(f"{i}:{{}}" for i in sorted(items)) + "]"
