"""The Kueue stand-in agrees with real Kueue on the same scenarios.

Each scenario runs twice, phase by phase: on the real control plane (Kueue v0.19.2's
scheduler and its own ``batch/job`` integration) and on the in-memory API server
(:class:`~jobframework.testing.KueueStandIn` with our port of the ``batch/job``
integration, as a user's test would run it). After each phase both sides settle, and
their observable state must be equal: each Job's ``suspend``, and its Workload's
admission (ClusterQueue, flavors, usage), ``active`` and conditions with reasons and
messages. UIDs, generated names and the scenario's unique suffix are normalized;
timestamps are left out. ``PodsReady`` is left out too: the in-memory server runs no
pods, so only real Kueue writes it. Phases are seconds apart on the real control plane
(each settles for 3 s); the stand-in's manual clock moves :data:`PHASE_SECONDS` before each
phase, so that creation and reservation times order the same on both sides (Kueue's FIFO
and its preemption candidates depend on them).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import pprint
import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal, Protocol

import attrs
import pytest

from integrations.batchjob import CALLBACKS
from jobframework import constants as c
from jobframework.runtime.client import PropagationPolicy
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import KueueStandIn
from jobframework.testing.cluster.manifests import COMPLETE_DELAY_ANNOTATION
from jobframework.testing.pytest_plugin import KueueManagerFactory, RunningIntegration

from .helpers import (
    CLUSTER_QUEUE_GVK,
    JOB_GVK,
    LOCAL_QUEUE_GVK,
    NS,
    WORKLOAD_GVK,
    WPC_GVK,
    delete,
    eventually,
)

pytestmark = pytest.mark.cluster

RF_GVK = GVK("kueue.x-k8s.io", "v1beta2", "ResourceFlavor")
#: Workload conditions compared (PodsReady: see the module docstring).
#: A preempted Workload that Kueue requeues goes to its ClusterQueue's heap (and the
#: scheduler soon writes its no-fit message) or straight to the inadmissible list (it
#: keeps the eviction message) depending on whether a scheduling cycle popped since the
#: last inadmissible requeue (``requeueIfNotPresent``); with two preempted Workloads,
#: real Kueue retried one or the other in three runs. That message alone is not compared.
NOT_COMPARED = "<timing-dependent: not compared>"
#: How far the stand-in's clock moves before each phase.
PHASE_SECONDS = 10
CONDITIONS = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Requeued", "Finished")


@attrs.frozen
class Step:
    """One action of a phase."""

    action: Literal["create", "delete", "deactivate"]
    job: str
    cpu: str = "1"
    priority: str | None = None


@attrs.frozen
class Scenario:
    name: str
    #: Flavor → nominal cpu, in the order the ClusterQueue tries them.
    flavors: Mapping[str, str]
    phases: tuple[tuple[Step, ...], ...]
    preemption: str = "Never"
    queueing_strategy: str = "BestEffortFIFO"
    priorities: Mapping[str, int] = attrs.field(factory=dict)
    #: Phase number → jobs whose ``QuotaReserved`` message depends on Kueue's scheduling
    #: cycles (see :data:`NOT_COMPARED`); their status and reason are still compared.
    timing_dependent: Mapping[int, tuple[str, ...]] = attrs.field(factory=dict)


def create(job: str, cpu: str = "1", priority: str | None = None) -> Step:
    return Step("create", job, cpu, priority)


SCENARIOS = [
    Scenario("quota-fifo", {"a": "2"}, (
        (create("j1"), create("j2")),
        (create("j3"),),
        (Step("delete", "j1"),),
    )),
    Scenario("flavor-fallback", {"a": "1", "b": "4"}, (
        (create("j1"),),
        (create("j2"),),
        (create("j3", cpu="4"),),
    )),
    # A smaller job behind one that does not fit: admitted past it, or blocked behind it.
    Scenario("best-effort-fifo", {"a": "3"}, (
        (create("j1", cpu="2"),), (create("j2", cpu="2"),), (create("j3"),),
    )),
    Scenario("strict-fifo", {"a": "3"}, (
        (create("j1", cpu="2"),), (create("j2", cpu="2"),), (create("j3"),),
        (Step("delete", "j1"),),
    ), queueing_strategy="StrictFIFO"),
    Scenario("too-big", {"a": "2"}, (
        (create("j1", cpu="3"),),
    )),
    Scenario("preemption", {"a": "2"}, (
        (create("l1", priority="low"), create("l2", priority="low")),
        (create("h", cpu="2", priority="high"),),
        # Freed quota requeues every inadmissible Workload: both come back.
        (Step("delete", "h"),),
    ), preemption="LowerPriority", priorities={"low": 100, "high": 1000},
        timing_dependent={2: ("l1", "l2")}),
    # Three equal candidates admitted one phase apart, one victim enough: Kueue takes the
    # most recently admitted (CandidatesOrdering: lower priority, then newer reservation).
    Scenario("preemption-newest-first", {"a": "3"}, (
        (create("l1", priority="low"),),
        (create("l2", priority="low"),),
        (create("l3", priority="low"),),
        (create("h", priority="high"),),
    ), preemption="LowerPriority", priorities={"low": 100, "high": 1000},
        timing_dependent={4: ("l3",)}),
    # The newer small job is removed first, but h fits only once the big one is removed
    # too; the small one is then added back (fillBackWorkloads): only the big one goes.
    Scenario("preemption-only-the-big-one", {"a": "3"}, (
        (create("big", cpu="2", priority="low"),),
        (create("small", priority="low"),),
        (create("h", cpu="2", priority="high"),),
    ), preemption="LowerPriority", priorities={"low": 100, "high": 1000},
        timing_dependent={3: ("big",)}),
    Scenario("deactivation", {"a": "1"}, (
        (create("j1"),),
        (create("j2"),),
        (Step("deactivate", "j1"),),
    )),
]


def job_manifest(name: str, queue: str, cpu: str, priority: str | None) -> Object:
    labels = {c.QUEUE_LABEL: queue}
    if priority is not None:
        labels[c.WORKLOAD_PRIORITY_CLASS_LABEL] = priority
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {
            # Pods run for the whole test on kwok (its default run is a few seconds).
            "metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: "1h"}},
            "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.example/fake:1",
                            "resources": {"requests": {"cpu": cpu}}}]}}},
    }


class Side(Protocol):
    """One side of the comparison."""

    client: Any
    suffix: str

    async def prepare(self, scenario: Scenario) -> None: ...

    async def settle(self) -> dict[str, Any]: ...


def _normalize(text: str, names: Mapping[str, str]) -> str:
    for raw, name in sorted(names.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(raw, name)
    return text


async def snapshot(client: Any, suffix: str, jobs: list[str],
                   names: dict[str, str]) -> dict[str, Any]:
    """What both sides are compared on, per job (see the module docstring).

    ``names`` maps UIDs and generated names to stable ones; it is kept between phases, so
    that messages naming a job deleted since still compare.
    """
    names.setdefault(f"-{suffix}", "")
    found: dict[str, tuple[Object, Object | None]] = {}
    workloads = (await client.list(WORKLOAD_GVK, namespace=NS)).items
    for job in jobs:
        obj = await client.get(JOB_GVK, f"{job}-{suffix}", namespace=NS)
        uid = obj["metadata"]["uid"]
        names[uid] = f"<uid of {job}>"
        owned = [w for w in workloads if any(
            r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or [])]
        assert len(owned) <= 1, f"{job} has {len(owned)} Workloads"
        wl = owned[0] if owned else None
        if wl is not None:
            names[wl["metadata"]["uid"]] = f"<uid of {job}'s workload>"
            names[wl["metadata"]["name"]] = f"<{job}'s workload>"
        found[job] = (obj, wl)
    out: dict[str, Any] = {}
    for job, (obj, wl) in found.items():
        entry: dict[str, Any] = {"suspend": bool(obj["spec"].get("suspend"))}
        if wl is None:
            entry["workload"] = None
        else:
            status = wl.get("status") or {}
            entry["active"] = wl["spec"].get("active", True)
            entry["admission"] = json.loads(_normalize(json.dumps(
                status.get("admission"), sort_keys=True), names))
            entry["conditions"] = {
                cond["type"]: (cond["status"], cond.get("reason"),
                               _normalize(cond.get("message", ""), names))
                for cond in status.get("conditions") or [] if cond["type"] in CONDITIONS}
        out[job] = entry
    return out


class RealKueue:
    """The real control plane: Kueue's scheduler and its batch/job integration."""

    def __init__(self, client: RestClient) -> None:
        self.client = client
        self.suffix = uuid.uuid4().hex[:6]
        self.jobs: list[str] = []
        self.names: dict[str, str] = {}
        self.cleanup: list[tuple[GVK, str, str | None]] = []

    def q(self, name: str) -> str:
        return f"{name}-{self.suffix}"

    async def prepare(self, scenario: Scenario) -> None:
        for flavor in scenario.flavors:
            await self.client.create({"apiVersion": RF_GVK.api_version, "kind": "ResourceFlavor",
                                      "metadata": {"name": self.q(flavor)}, "spec": {}})
            self.cleanup.append((RF_GVK, self.q(flavor), None))
        for name, value in scenario.priorities.items():
            await self.client.create({"apiVersion": WPC_GVK.api_version,
                                      "kind": "WorkloadPriorityClass",
                                      "metadata": {"name": self.q(name)}, "value": value})
            self.cleanup.append((WPC_GVK, self.q(name), None))
        await self.client.create({
            "apiVersion": CLUSTER_QUEUE_GVK.api_version, "kind": "ClusterQueue",
            "metadata": {"name": self.q("cq")},
            "spec": {"namespaceSelector": {}, "queueingStrategy": scenario.queueing_strategy,
                     "preemption": {"withinClusterQueue": scenario.preemption,
                                    "reclaimWithinCohort": "Never"},
                     "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                         {"name": self.q(f), "resources": [{"name": "cpu",
                                                            "nominalQuota": cpu}]}
                         for f, cpu in scenario.flavors.items()]}]}})
        self.cleanup.insert(0, (CLUSTER_QUEUE_GVK, self.q("cq"), None))
        await self.client.create({"apiVersion": LOCAL_QUEUE_GVK.api_version,
                                  "kind": "LocalQueue",
                                  "metadata": {"name": self.q("lq"), "namespace": NS},
                                  "spec": {"clusterQueue": self.q("cq")}})
        self.cleanup.insert(0, (LOCAL_QUEUE_GVK, self.q("lq"), NS))

        async def active() -> bool:
            cq = await self.client.get(CLUSTER_QUEUE_GVK, self.q("cq"))
            return any(x["type"] == "Active" and x["status"] == "True"
                       for x in (cq.get("status") or {}).get("conditions") or [])

        await eventually("the scenario's ClusterQueue to be Active", active, 60)

    async def run(self, step: Step) -> None:
        await run_step(self.client, self.suffix, step, self.jobs)
        if step.action == "create":
            self.cleanup.insert(0, (JOB_GVK, self.q(step.job), NS))

    async def settle(self) -> dict[str, Any]:
        """The snapshot once it has not changed for 3 s (every job with a Workload)."""
        last: dict[str, Any] | None = None
        since = time.monotonic()
        deadline = since + 90
        while time.monotonic() < deadline:
            now = await snapshot(self.client, self.suffix, self.jobs, self.names)
            if now != last or any(e.get("workload", 1) is None for e in now.values()):
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= 3.0:
                return now
            await asyncio.sleep(0.3)
        raise AssertionError(f"real Kueue did not settle: {pprint.pformat(last)}")

    async def close(self) -> None:
        for gvk, name, namespace in self.cleanup:
            await delete(self.client, gvk, name, namespace)


class StandIn:
    """The in-memory API server, the stand-in and our batch/job integration."""

    def __init__(self, kueue: KueueStandIn, running: RunningIntegration,
                 clock: ManualClock) -> None:
        self.kueue = kueue
        self.running = running
        self.clock = clock
        self.client = kueue.server.client()
        self.suffix = uuid.uuid4().hex[:6]
        self.jobs: list[str] = []
        self.names: dict[str, str] = {}

    async def prepare(self, scenario: Scenario) -> None:
        for flavor in scenario.flavors:
            await self.kueue.resource_flavor(f"{flavor}-{self.suffix}")
        for name, value in scenario.priorities.items():
            await self.kueue.priority_class(f"{name}-{self.suffix}", value)
        await self.kueue.cluster_queue(
            f"cq-{self.suffix}", {f"{f}-{self.suffix}": {"cpu": cpu}
                                  for f, cpu in scenario.flavors.items()},
            preemption=scenario.preemption, queueing_strategy=scenario.queueing_strategy)
        await self.kueue.local_queue(f"lq-{self.suffix}", f"cq-{self.suffix}", NS)

    async def run(self, step: Step) -> None:
        await run_step(self.client, self.suffix, step, self.jobs)

    async def settle(self) -> dict[str, Any]:
        last: dict[str, Any] | None = None
        for _ in range(50):
            await self.running.settle()
            await self.kueue.schedule()
            await self.running.settle()
            now = await snapshot(self.client, self.suffix, self.jobs, self.names)
            if now == last:
                return now
            last = now
        raise AssertionError(f"the stand-in did not settle: {pprint.pformat(last)}")


async def run_step(client: Any, suffix: str, step: Step, jobs: list[str]) -> None:
    name = f"{step.job}-{suffix}"
    if step.action == "create":
        priority = f"{step.priority}-{suffix}" if step.priority else None
        await client.create(job_manifest(name, f"lq-{suffix}", step.cpu, priority))
        jobs.append(step.job)
    elif step.action == "delete":
        await client.delete(JOB_GVK, name, namespace=NS,
                            propagation_policy=PropagationPolicy.BACKGROUND)
        jobs.remove(step.job)
    else:
        job = await client.get(JOB_GVK, name, namespace=NS)
        for wl in (await client.list(WORKLOAD_GVK, namespace=NS)).items:
            if any(r.get("uid") == job["metadata"]["uid"]
                   for r in wl["metadata"].get("ownerReferences") or []):
                await client.patch(WORKLOAD_GVK, wl["metadata"]["name"],
                                   {"spec": {"active": False}}, namespace=NS)


def _diff(a: Any, b: Any) -> str:
    return "\n".join(difflib.unified_diff(
        pprint.pformat(a, width=100).splitlines(), pprint.pformat(b, width=100).splitlines(),
        "real Kueue", "stand-in", lineterm=""))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_standin_agrees_with_real_kueue(
        scenario: Scenario, client: RestClient, kueue: KueueStandIn,
        kueue_manager: KueueManagerFactory, kueue_clock: ManualClock) -> None:
    real = RealKueue(client)
    standin = StandIn(kueue, await kueue_manager(CALLBACKS, name="batch/job"), kueue_clock)
    try:
        await real.prepare(scenario)
        await standin.prepare(scenario)
        for number, phase in enumerate(scenario.phases, 1):
            standin.clock.advance(PHASE_SECONDS)
            for step in phase:
                await real.run(step)
                await standin.run(step)
            on_real, on_standin = await real.settle(), await standin.settle()
            for job in scenario.timing_dependent.get(number, ()):
                for side in (on_real, on_standin):
                    status, reason, _ = side[job]["conditions"]["QuotaReserved"]
                    side[job]["conditions"]["QuotaReserved"] = (status, reason, NOT_COMPARED)
            assert on_real == on_standin, (
                f"{scenario.name}, phase {number}: the stand-in disagrees with real Kueue:\n"
                + _diff(on_real, on_standin))
            # The phase did something observable (a vacuous agreement proves nothing).
            assert on_real, f"{scenario.name}, phase {number}: no job observed"
    finally:
        await real.close()

