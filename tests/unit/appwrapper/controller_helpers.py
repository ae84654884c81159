"""Helpers for the AppWrapper framework controller tests: a reconciler harness on the
in-memory API server, component fixtures in the shape of upstream's ``fixtures_test.go``,
and a client that records deletes.

The in-memory server runs no kubelet and no Job controller, so tests play them: they
create the pods a wrapped Job would make (from its injected template, labels included)
and set pod phases and container exit codes themselves. The reconciler is called
directly, as upstream's envtest suite does, and time moves only through the
``ManualClock``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import attrs
import pytest

from integrations.appwrapper.api import (
    APPWRAPPER_GVK,
    APPWRAPPER_LABEL,
    AppWrapperCondition,
    AppWrapperPhase,
    load_crds,
)
from integrations.appwrapper.config import (
    AppWrapperConfig,
    FaultToleranceConfig,
    Taint,
)
from integrations.appwrapper.controller import AppWrapperReconciler
from integrations.appwrapper.faults import NodeHealth
from jobframework.runtime.client.interface import PropagationPolicy
from jobframework.runtime.clock import ManualClock, parse_time
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.reconcile import Request, Result
from jobframework.testing import APIServer, InMemoryClient

POD_GVK = GVK("", "v1", "Pod")
JOB_GVK = GVK("batch", "v1", "Job")
NS = "default"

#: Upstream's ``markerPodSet``: what Kueue's PodSetInfo would carry.
MARKER: dict[str, Any] = {
    "labels": {"testkey1": "value1"},
    "annotations": {"test2": "test2"},
    "nodeSelector": {"nodeName": "myNode"},
    "tolerations": [{"key": "aKey", "operator": "Exists", "effect": "NoSchedule"}],
    "schedulingGates": [{"name": "aGate"}],
}


def upstream_test_config(**fault_tolerance: Any) -> AppWrapperConfig:
    """The controller test config of upstream's suite: no failure grace, no retry pause,
    no retries, success TTL 0, plus two extra GPU taints (NoExecute, PreferNoSchedule)."""
    base = AppWrapperConfig()
    assert base.autopilot is not None
    taints = dict(base.autopilot.resource_taints)
    taints["nvidia.com/gpu"] = (*taints["nvidia.com/gpu"], Taint("extra", "test", "NoExecute"),
                                Taint("extra2", "test2", "PreferNoSchedule"))
    ft = attrs.evolve(FaultToleranceConfig(), failure_grace_period=_td(0),
                      retry_pause_period=_td(0), retry_limit=0, success_ttl=_td(0))
    if fault_tolerance:
        ft = attrs.evolve(ft, **fault_tolerance)
    return attrs.evolve(base, fault_tolerance=ft,
                        autopilot=attrs.evolve(base.autopilot, resource_taints=taints))


def _td(seconds: float) -> Any:
    import datetime as dt
    return dt.timedelta(seconds=seconds)


# --- component fixtures (upstream's fixtures_test.go) ------------------------------------------


def pod_template(name: str, milli_cpu: int = 100, gpus: int = 0) -> dict[str, Any]:
    """A busybox Pod requesting CPU and ``gpus`` (request = limit)."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "busybox", "image": "quay.io/project-codeflare/busybox:1.36",
            "command": ["sh", "-c", "sleep 10"],
            "resources": {"requests": {"cpu": f"{milli_cpu}m", "nvidia.com/gpu": str(gpus)},
                          "limits": {"nvidia.com/gpu": str(gpus)}}}]},
    }


def pod(name: str, milli_cpu: int = 100, gpus: int = 0, declare: bool = False) -> dict[str, Any]:
    """Upstream's ``pod(milliCPU, numGPU, declarePodSets)`` component."""
    component: dict[str, Any] = {"template": pod_template(name, milli_cpu, gpus)}
    if declare:
        component["podSets"] = [{"replicas": 1, "path": "template"}]
    return component


def complex_pod(name: str) -> dict[str, Any]:
    """Upstream's ``complexPodYaml()``: its own label, annotation, nodeSelector, required
    hostname affinity, scheduling gate and toleration, requesting a GPU."""
    template = pod_template(name, 100, 1)
    template["metadata"].update(labels={"myComplexLabel": "myComplexValue"},
                                annotations={"myComplexAnnotation": "myComplexValue"})
    # YAML integers, as upstream's fixture: the injection must read them too.
    template["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m", "nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}
    template["spec"].update(
        nodeSelector={"myComplexSelector": "myComplexValue"},
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "NotIn",
                 "values": ["badHost1"]}]}]}}},
        schedulingGates=[{"name": "myComplexGate"}],
        tolerations=[{"key": "myComplexKey", "value": "myComplexValue", "operator": "Equal",
                      "effect": "NoSchedule"}])
    return {"template": template}


def malformed_pod(name: str) -> dict[str, Any]:
    """Upstream's ``malformedPod``: a container without an image, declared PodSet."""
    template = pod_template(name)
    del template["spec"]["containers"][0]["image"]
    return {"template": template, "podSets": [{"replicas": 1, "path": "template"}]}


def job(name: str, parallelism: int = 1, **spec: Any) -> dict[str, Any]:
    """A batch/v1 Job component (PodSet inferred: ``template.spec.template``)."""
    return {"template": {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"parallelism": parallelism, "completions": parallelism, **spec,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [{
                     "name": "main", "image": "busybox:1.36", "command": ["true"]}]}}}}}


def appwrapper(name: str, *components: Mapping[str, Any], suspend: bool = True,
               annotations: Mapping[str, str] | None = None,
               managed_by: str | None = None) -> Object:
    """An AppWrapper in ``default`` wrapping ``components``."""
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"components": [copy.deepcopy(dict(c)) for c in components],
                            "suspend": suspend}
    if managed_by is not None:
        spec["managedBy"] = managed_by
    return {"apiVersion": APPWRAPPER_GVK.api_version, "kind": APPWRAPPER_GVK.kind,
            "metadata": meta, "spec": spec}


# --- recording doubles ---------------------------------------------------------------------------


class FakeRecorder:
    """Records ``(type, reason, action, message)`` of each event (the action defaults to
    the reason, as the runtime's recorder does)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, *,
              action: str | None = None, **_: Any) -> None:
        self.events.append((type, reason, action or reason, message))


@attrs.frozen
class DeleteCall:
    """One delete the controller issued."""

    kind: str
    name: str
    propagation: PropagationPolicy | None
    grace_period_seconds: int | None


class RecordingClient:
    """The in-memory client, recording every delete with its options (the in-memory
    server deletes at once whatever the grace period; tests check what was asked)."""

    def __init__(self, api: InMemoryClient) -> None:
        self.api = api
        self.deletes: list[DeleteCall] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    async def delete(self, gvk: GVK, name: str, *, namespace: str | None = None,
                     propagation_policy: PropagationPolicy | None = None,
                     grace_period_seconds: int | None = None, **kw: Any) -> Object | None:
        self.deletes.append(DeleteCall(gvk.kind, name, propagation_policy, grace_period_seconds))
        return await self.api.delete(gvk, name, namespace=namespace,
                                     propagation_policy=propagation_policy,
                                     grace_period_seconds=grace_period_seconds, **kw)


# --- the harness ---------------------------------------------------------------------------------


def new_server() -> APIServer:
    """An in-memory server on a ManualClock serving the AppWrapper CRD."""
    server = APIServer(ManualClock(), builtin_defaults=True)
    for crd in load_crds():
        server.register_crd(crd)
    return server


class Harness:
    """An AppWrapper reconciler on an in-memory server, called directly."""

    def __init__(self, server: APIServer, config: AppWrapperConfig | None = None) -> None:
        self.server = server
        assert isinstance(server.clock, ManualClock)
        self.clock: ManualClock = server.clock
        self.api = server.client()
        self.client = RecordingClient(self.api)
        self.recorder = FakeRecorder()
        self.node_health = NodeHealth()
        self.config = config or upstream_test_config()
        self.rec = self._reconciler()
        self.name = ""

    def _reconciler(self) -> AppWrapperReconciler:
        return AppWrapperReconciler(self.client, self.recorder, self.config,
                                    clock=self.clock, node_health=self.node_health)

    def configure(self, config: AppWrapperConfig) -> None:
        """Swap the controller's configuration (a new reconciler, same state)."""
        self.config = config
        self.rec = self._reconciler()

    # -- reading ---------------------------------------------------------------------------------

    async def reconcile(self, name: str | None = None) -> Result:
        return await self.rec.reconcile(Request.of(NS, name or self.name))

    async def get(self, name: str | None = None) -> Object:
        return await self.api.get(APPWRAPPER_GVK, name or self.name, namespace=NS)

    async def phase(self, name: str | None = None) -> str:
        return str((await self.get(name)).get("status", {}).get("phase", ""))

    async def cond(self, type_: AppWrapperCondition, name: str | None = None) -> dict[str, Any]:
        """The condition (a KeyError-free empty dict when absent)."""
        for c in (await self.get(name)).get("status", {}).get("conditions", []):
            if c["type"] == type_.value:
                return dict(c)
        return {}

    async def is_true(self, type_: AppWrapperCondition, name: str | None = None) -> bool:
        return (await self.cond(type_, name)).get("status") == "True"

    async def pods(self, name: str | None = None) -> list[Object]:
        items = (await self.api.list(POD_GVK, namespace=NS)).items
        return [p for p in items
                if p["metadata"].get("labels", {}).get(APPWRAPPER_LABEL) == (name or self.name)]

    def events(self) -> list[tuple[str, str, str, str]]:
        return list(self.recorder.events)

    # -- playing Kueue, the kubelet and the Job controller -----------------------------------------

    async def create(self, aw: Object) -> Object:
        self.name = aw["metadata"]["name"]
        return await self.api.create(aw)

    async def admit(self, infos: list[dict[str, Any]] | None = None,
                    name: str | None = None) -> Object:
        """Kueue's ``RunWithPodSetsInfo``: ``SetPodSetInfos`` then ``suspend=false``."""
        aw = await self.get(name)
        statuses = aw["status"]["componentStatus"]
        infos = list(infos or [])
        k = 0
        for comp, cs in zip(aw["spec"]["components"], statuses, strict=True):
            n = len(cs["podSets"])
            comp["podSetInfos"] = [copy.deepcopy(i) for i in infos[k:k + n]]
            k += n
        aw["spec"]["suspend"] = False
        return await self.api.update(aw)

    async def suspend(self, name: str | None = None) -> Object:
        """Kueue's ``Suspend`` + ``RestorePodSetsInfo`` (``ClearPodSetInfos``)."""
        aw = await self.get(name)
        aw["spec"]["suspend"] = True
        for comp in aw["spec"]["components"]:
            comp.pop("podSetInfos", None)
        return await self.api.update(aw)

    async def set_pod_phase(self, phase: str, count: int, *, exit_code: int | None = None,
                            name: str | None = None, node: str | None = None) -> None:
        """Set ``count`` of the AppWrapper's pods (in list order) to ``phase``."""
        for p in (await self.pods(name))[:count]:
            status = p.setdefault("status", {})
            status["phase"] = phase
            if exit_code is not None:
                status["containerStatuses"] = [{"name": "busybox", "state": {
                    "terminated": {"exitCode": exit_code, "reason": "Error"}}}]
            if node is not None:
                p["spec"]["nodeName"] = node
                p = await self.api.update(p)
                p["status"] = status
            await self.api.update_status(p)

    async def create_job_pods(self, job_name: str, count: int) -> list[Object]:
        """Play the Job controller: ``count`` pods from the Job's (injected) template."""
        j = await self.api.get(JOB_GVK, job_name, namespace=NS)
        template = j["spec"]["template"]
        out = []
        for i in range(count):
            meta = copy.deepcopy(template.get("metadata") or {})
            meta.update(name=f"{job_name}-{i}", namespace=NS, ownerReferences=[{
                "apiVersion": "batch/v1", "kind": "Job", "name": job_name,
                "uid": j["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}])
            out.append(await self.api.create({"apiVersion": "v1", "kind": "Pod",
                                              "metadata": meta,
                                              "spec": copy.deepcopy(template["spec"])}))
        return out

    async def fail_job(self, job_name: str) -> None:
        """Play the Job controller giving up: ``Failed=True``."""
        j = await self.api.get(JOB_GVK, job_name, namespace=NS)
        j["status"] = {"conditions": [{"type": "Failed", "status": "True",
                                       "reason": "BackoffLimitExceeded"}]}
        await self.api.update_status(j)

    # -- upstream's steps ------------------------------------------------------------------------

    async def advance_to_resuming(self, name: str, *components: Mapping[str, Any],
                                  annotations: Mapping[str, str] | None = None,
                                  infos: list[dict[str, Any]] | None = None) -> None:
        """Upstream's ``advanceToResuming``: create suspended, Empty→Suspended, admit with
        marker PodSetInfos, Suspended→Resuming."""
        await self.create(appwrapper(name, *components, annotations=annotations))
        assert (await self.reconcile()).is_zero()
        assert await self.phase() == AppWrapperPhase.SUSPENDED
        count = sum(len(cs["podSets"]) for cs in (await self.get())["status"]["componentStatus"])
        await self.admit(infos if infos is not None else [MARKER] * count)
        await self.reconcile()
        aw = await self.get()
        assert aw["spec"]["suspend"] is False
        assert aw["status"]["phase"] == AppWrapperPhase.RESUMING
        assert aw["metadata"]["finalizers"] == ["workload.codeflare.dev/finalizer"]
        assert await self.is_true(AppWrapperCondition.RESOURCES_DEPLOYED)
        assert await self.is_true(AppWrapperCondition.QUOTA_RESERVED)

    async def begin_running(self) -> None:
        """Upstream's ``beginRunning``: Resuming→Running, all pods pending; one Running."""
        await self.reconcile()
        assert await self.phase() == AppWrapperPhase.RUNNING
        assert await self.is_true(AppWrapperCondition.RESOURCES_DEPLOYED)
        assert await self.is_true(AppWrapperCondition.QUOTA_RESERVED)
        assert not await self.is_true(AppWrapperCondition.PODS_READY)
        aw = await self.get()
        summary = await self.rec.pod_status(aw)
        assert summary.pending == summary.expected == self.rec.expected_pod_count(aw)
        await self.set_pod_phase("Running", 1)
        await self.reconcile()
        assert await self.phase() == AppWrapperPhase.RUNNING
        assert not await self.is_true(AppWrapperCondition.PODS_READY)
        summary = await self.rec.pod_status(await self.get())
        assert summary.running == 1
        assert summary.pending + summary.running == summary.expected

    async def fully_running(self) -> None:
        """Upstream's ``fullyRunning``: every pod Running gives PodsReady."""
        aw = await self.get()
        expected = self.rec.expected_pod_count(aw)
        await self.set_pod_phase("Running", expected)
        result = await self.reconcile()
        assert result.requeue_after == 60.0
        assert await self.phase() == AppWrapperPhase.RUNNING
        assert await self.is_true(AppWrapperCondition.PODS_READY)
        assert (await self.rec.pod_status(await self.get())).running == expected

    async def delete_and_finalize(self, name: str | None = None) -> None:
        """Upstream's ``AfterEach``: delete, reconcile twice, no pod and no object left."""
        await self.api.delete(APPWRAPPER_GVK, name or self.name, namespace=NS)
        await self.reconcile(name)  # initiate deletion
        await self.server.settle()
        await self.reconcile(name)  # see deletion has completed
        await self.server.settle()
        assert await self.pods(name) == []
        assert [o for o in self.server.objects(APPWRAPPER_GVK, NS)
                if o["metadata"]["name"] == (name or self.name)] == []


def transition_time(cond: Mapping[str, Any]) -> Any:
    """A condition's ``lastTransitionTime`` as a datetime."""
    return parse_time(str(cond["lastTransitionTime"]))


@pytest.fixture(name="server")
def server_fixture() -> APIServer:
    """A fresh in-memory server serving the AppWrapper CRD."""
    return new_server()


@pytest.fixture(name="h")
def harness_fixture(server: APIServer) -> Harness:
    """A harness with upstream's controller-test configuration."""
    return Harness(server)
