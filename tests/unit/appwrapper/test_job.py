"""AppWrapper under Kueue: the GenericJob adapter (ported from Kueue's
``pkg/controller/jobs/appwrapper/appwrapper_controller_test.go`` and the AppWrapper
integration tests ``test/integration/singlecluster/controller/jobs/appwrapper``), driven
by the generic reconciler on the in-memory server; the test plays Kueue's scheduler.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.jobflow.multikueue import ORIGIN, remote_copy, sync_status

from integrations.appwrapper import (
    APPWRAPPER_GVK,
    CALLBACKS,
    FRAMEWORK_NAME,
    AppWrapperJob,
    load_crds,
    register,
)
from integrations.appwrapper.api import (
    APPWRAPPER_CONTROLLER_NAME,
    APPWRAPPER_LABEL,
    TAS_SUB_GROUP_COUNT_ANNOTATION,
)
from integrations.appwrapper.config import AppWrapperConfig
from integrations.appwrapper.controller import AppWrapperReconciler
from jobframework import constants as c
from jobframework.constants import DEFAULT_FEATURES, FeatureGate
from jobframework.integrations import IntegrationManager
from jobframework.podset import InvalidPodsetInfoError, PodSetInfo
from jobframework.reconciler import JobReconciler, ReconcilerOptions
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.reconcile import Request
from jobframework.runtime.selectors import LabelSelector
from jobframework.testing import APIServer
from jobframework.validation import prebuilt_workload_name_for

from .controller_helpers import Harness, new_server
from .helpers import NS, appwrapper, job, jobset, pod, pytorchjob, service

WORKLOAD = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")
FLAVOR = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "ResourceFlavor")
JOB = GVK("batch", "v1", "Job")
TS = "2026-01-01T00:00:00Z"
TAS_OFF = DEFAULT_FEATURES.with_gates(**{FeatureGate.TOPOLOGY_AWARE_SCHEDULING.value: False})
TAS_ON = DEFAULT_FEATURES.with_gates(**{FeatureGate.TOPOLOGY_AWARE_SCHEDULING.value: True})


class Recorder:
    """Records ``(type, reason, message)`` of each event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Any, type: str, reason: str, message: str, **_: Any) -> None:
        self.events.append((type, reason, message))


def cond(obj: Object, type_: str) -> tuple[str, str, str] | None:
    for x in (obj.get("status") or {}).get("conditions") or []:
        if x["type"] == type_:
            return x["status"], x.get("reason", ""), x.get("message", "")
    return None


def aw_condition(type_: str, status: str, reason: str = "Test") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "",
            "lastTransitionTime": TS}


class Kueue:
    """The generic reconciler for AppWrappers, and Kueue's scheduler writes."""

    def __init__(self, *, manage_without_queue: bool = False,
                 selector: LabelSelector | None = None, wait_for_pods_ready: bool = False,
                 features: Any = TAS_OFF) -> None:
        self.server = APIServer(ManualClock(), builtin_defaults=True)
        for crd in load_crds():
            self.server.register_crd(crd)
        self.server.register_kind(WORKLOAD, "workloads", True)
        self.server.register_kind(FLAVOR, "resourceflavors", False, status_subresource=False)
        for kind, plural, namespaced in (("LocalQueue", "localqueues", True),
                                         ("ClusterQueue", "clusterqueues", False),
                                         ("WorkloadPriorityClass", "workloadpriorityclasses",
                                          False)):
            self.server.register_kind(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, kind), plural,
                                      namespaced,
                                      status_subresource=kind != "WorkloadPriorityClass")
        self.api = self.server.client()
        self.features = features
        self.im = IntegrationManager()
        self.im.register_external_job_type(FRAMEWORK_NAME)
        self.recorder = Recorder()
        self.reconciler = JobReconciler(self.api, self.recorder, ReconcilerOptions(
            clock=self.server.clock, integration_manager=self.im,
            manage_jobs_without_queue_name=manage_without_queue,
            managed_jobs_namespace_selector=selector,
            wait_for_pods_ready=wait_for_pods_ready, features=features))

    async def reconcile(self, name: str = "aw") -> None:
        await self.reconciler.reconcile_generic_job(
            Request.of(NS, name), AppWrapperJob(features=self.features))

    async def get(self, name: str = "aw") -> Object:
        return await self.api.get(APPWRAPPER_GVK, name, namespace=NS)

    async def workloads(self) -> list[Object]:
        return list((await self.api.list(WORKLOAD, namespace=NS)).items)

    async def workload(self) -> Object:
        (wl,) = await self.workloads()
        return wl

    async def set_aw_status(self, **status: Any) -> None:
        aw = await self.get()
        aw["status"] = {**(aw.get("status") or {}), **status}
        await self.api.update_status(aw)

    async def flavor(self, name: str, labels: dict[str, str]) -> None:
        await self.api.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                               "metadata": {"name": name}, "spec": {"nodeLabels": labels}})

    async def apply_status(self, status: dict[str, Any]) -> None:
        wl = await self.workload()
        await self.api.apply({"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
                              "metadata": {"name": wl["metadata"]["name"], "namespace": NS},
                              "status": status},
                             field_manager=c.ADMISSION_NAME, force=True, subresource="status")

    async def admit(self, flavors: list[str], *, updates: list[dict[str, Any]] | None = None,
                    checks: bool = False) -> None:
        wl = await self.workload()
        assignments = [{"name": ps["name"], "flavors": {"cpu": flavors[i]}, "count": ps["count"]}
                       for i, ps in enumerate(wl["spec"]["podSets"])]
        status: dict[str, Any] = {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue cluster-queue",
                 "lastTransitionTime": TS},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted", "lastTransitionTime": TS}],
            "admission": {"clusterQueue": "cluster-queue", "podSetAssignments": assignments}}
        if checks:
            status["admissionChecks"] = [{
                "name": "check", "state": "Ready", "message": "", "lastTransitionTime": TS,
                "podSetUpdates": updates or []}]
        await self.apply_status(status)

    async def evict(self) -> None:
        wl = await self.workload()
        conds = [x for x in wl["status"]["conditions"] if x["type"] != "Evicted"]
        conds.append({"type": "Evicted", "status": "True", "reason": "Preempted",
                      "message": "Preempted to accommodate a higher priority Workload",
                      "lastTransitionTime": TS})
        await self.apply_status({"conditions": conds, "admission": wl["status"]["admission"]})


def queued(components: list[dict[str, Any]], *, queue: str = "user-queue",
           suspend: bool = True, **meta: Any) -> Object:
    aw = appwrapper(components, labels={c.QUEUE_LABEL: queue} if queue else None,
                    suspend=suspend)
    aw["metadata"].update(meta)
    return aw


# --- PodSets (Kueue's TestPodSets) -----------------------------------------------------------


def pytorch_with_topology() -> dict[str, Any]:
    comp = pytorchjob(4)
    specs = comp["template"]["spec"]["pytorchReplicaSpecs"]
    specs["Master"]["template"]["metadata"] = {
        "annotations": {c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/rack"}}
    specs["Worker"]["template"]["metadata"] = {
        "annotations": {c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION: "cloud.com/block"}}
    return comp


async def test_pod_sets_no_annotations() -> None:
    """Kueue's TestPodSets "no annotations" (KU-1): a PyTorchJob (Master 1, Worker 4)
    and a Job (parallelism 2) make aw-0, aw-1, aw-2; no topology request without TAS."""
    aw = appwrapper([pytorchjob(4), job(2)], name="aw")
    pod_sets = await AppWrapperJob(aw, features=TAS_OFF).pod_sets(None)  # type: ignore[arg-type]
    assert [(p.name, p.count, p.topology_request) for p in pod_sets] == [
        ("aw-0", 1, None), ("aw-1", 4, None), ("aw-2", 2, None)]
    spec = pod_sets[2].template["spec"]
    assert spec["containers"][0]["image"] == "quay.io/project-codeflare/busybox:1.36"
    assert spec["restartPolicy"] == "Never" and spec["schedulerName"] == "default-scheduler"


async def test_pod_sets_with_topology_annotations() -> None:
    """Kueue's TestPodSets "with required and preferred topology annotation" (KU-2)."""
    aw = appwrapper([pytorch_with_topology()], name="aw")
    pod_sets = await AppWrapperJob(aw, features=TAS_ON).pod_sets(None)  # type: ignore[arg-type]
    master, worker = pod_sets
    assert master.topology_request is not None and worker.topology_request is not None
    assert (master.topology_request.required, master.topology_request.pod_index_label) == (
        "cloud.com/rack", "training.kubeflow.org/replica-index")
    assert (worker.topology_request.preferred, worker.topology_request.pod_index_label) == (
        "cloud.com/block", "training.kubeflow.org/replica-index")
    assert master.template["metadata"]["annotations"] == {
        c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/rack"}


async def test_pod_sets_topology_annotations_without_tas() -> None:
    """Kueue's TestPodSets "without ... topology annotation if TAS is disabled" (KU-3)."""
    aw = appwrapper([pytorch_with_topology()], name="aw")
    pod_sets = await AppWrapperJob(aw, features=TAS_OFF).pod_sets(None)  # type: ignore[arg-type]
    assert [p.topology_request for p in pod_sets] == [None, None]
    assert pod_sets[1].template["metadata"]["annotations"] == {
        c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION: "cloud.com/block"}


async def test_pod_sets_sub_groups_and_bad_counts() -> None:
    """JobSet hints become the sub-group request; a malformed count is ignored."""
    js = jobset(1)
    js["template"]["spec"]["replicatedJobs"][0]["replicas"] = 3
    aw = appwrapper([js], name="AW-Upper")
    (ps,) = await AppWrapperJob(aw, features=TAS_ON).pod_sets(None)  # type: ignore[arg-type]
    assert ps.name == "aw-upper-0"
    assert ps.topology_request is not None
    assert (ps.topology_request.sub_group_count, ps.topology_request.sub_group_index_label,
            ps.topology_request.pod_index_label) == (
        3, "jobset.sigs.k8s.io/job-index", "batch.kubernetes.io/job-completion-index")
    aw["status"] = {"componentStatus": [{
        "name": "", "kind": "", "apiVersion": "", "podSets": [{
            "path": "template.spec.replicatedJobs[0].template.spec.template", "replicas": 3,
            "annotations": {TAS_SUB_GROUP_COUNT_ANNOTATION: "three"}}]}]}
    (ps,) = await AppWrapperJob(aw, features=TAS_ON).pod_sets(None)  # type: ignore[arg-type]
    assert ps.topology_request is None


async def test_pod_sets_follow_frozen_status_and_skip_bad_templates() -> None:
    """The status copy of the PodSets wins; a PodSet whose template no longer parses is
    skipped (upstream's GetComponentPodSpecs), the index counting only kept ones."""
    aw = appwrapper([pod(declare=True), service(), job(3)], name="aw")
    aw["status"] = {"componentStatus": [
        {"name": "", "kind": "", "apiVersion": "", "podSets": [{"path": "template.nope"}]},
        {"name": "", "kind": "", "apiVersion": "", "podSets": []},
        {"name": "", "kind": "", "apiVersion": "",
         "podSets": [{"path": "template.spec.template", "replicas": 5}]}]}
    pod_sets = await AppWrapperJob(aw).pod_sets(None)  # type: ignore[arg-type]
    assert [(p.name, p.count) for p in pod_sets] == [("aw-0", 5)]


async def test_pod_sets_inference_error_is_raised() -> None:
    """An uninferable component is an error (the reconciler retries)."""
    comp = job(1)
    comp["template"]["spec"]["template"]["spec"]["containers"] = "oops"
    with pytest.raises(ValueError, match=r"does not refer to a v1\.PodSpecTemplate"):
        await AppWrapperJob(appwrapper([comp])).pod_sets(None)  # type: ignore[arg-type]


# --- the adapter's contract ------------------------------------------------------------------


async def test_run_restore_and_count_mismatch() -> None:
    """``RunWithPodSetsInfo`` / ``RestorePodSetsInfo`` (and the KU "SetPodSetInfos count
    mismatch" error, wrapped as Kueue's invalid pod-set info)."""
    aw = appwrapper([pytorchjob(2), job(1)], suspend=True)
    j = AppWrapperJob(aw)
    with pytest.raises(InvalidPodsetInfoError,
                       match=r"^invalid podset infos: expecting 3 podsets, got 1$"):
        await j.run_with_pod_sets_info(None, [PodSetInfo(name="aw-0")])  # type: ignore[arg-type]
    assert j.is_suspended()
    infos = [PodSetInfo(name="aw-0", count=1, node_selector={"f": "a"}),
             PodSetInfo(name="aw-1", count=2, labels={"l": "1"}, annotations={"a": "1"},
                        tolerations=[{"key": "k", "operator": "Exists"}],
                        scheduling_gates=[{"name": "kueue.x-k8s.io/topology"}],
                        affinity={"ignored": True}),
             PodSetInfo(name="aw-2", count=1)]
    await j.run_with_pod_sets_info(None, infos)  # type: ignore[arg-type]
    assert not j.is_suspended()
    comps = aw["spec"]["components"]
    assert comps[0]["podSetInfos"] == [
        {"nodeSelector": {"f": "a"}},
        {"labels": {"l": "1"}, "annotations": {"a": "1"},
         "tolerations": [{"key": "k", "operator": "Exists"}],
         "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}]}]
    assert comps[1]["podSetInfos"] == [{}]
    # The PodSets Kueue compares do not move with the injection.
    assert [p.template for p in await j.pod_sets(None)] == [  # type: ignore[arg-type]
        p.template for p in await AppWrapperJob(appwrapper([pytorchjob(2), job(1)]))
        .pod_sets(None)]  # type: ignore[arg-type]
    j.suspend()
    assert j.restore_pod_sets_info(infos) is True
    assert all("podSetInfos" not in comp for comp in comps)
    assert j.restore_pod_sets_info(infos) is True, "always true, as upstream"


def test_predicates_from_status() -> None:
    """IsActive / PodsReady / Finished read the controller's conditions and phase (§2.6)."""
    j = AppWrapperJob(appwrapper([pod()]))
    assert (j.is_active(), j.finished()) == (False, ("", False, False))
    j.obj["status"] = {"phase": "Running",
                       "conditions": [aw_condition("QuotaReserved", "True")]}
    assert j.is_active()
    j.obj["status"] = {"phase": "Succeeded",
                       "conditions": [aw_condition("QuotaReserved", "False")]}
    assert not j.is_active()
    assert j.finished() == ("AppWrapper finished successfully", True, True)
    j.obj["status"] = {"phase": "Failed",
                       "conditions": [aw_condition("ResourcesDeployed", "True")]}
    assert j.finished() == ("Still deleting resources for failed AppWrapper", False, False)
    j.obj["status"]["conditions"] = [aw_condition("ResourcesDeployed", "False")]
    assert j.finished() == ("AppWrapper failed", False, True)


async def test_pods_ready_from_condition() -> None:
    j = AppWrapperJob(appwrapper([pod()]))
    assert not await j.pods_ready(None)  # type: ignore[arg-type]
    j.obj["status"] = {"conditions": [aw_condition("PodsReady", "True")]}
    assert await j.pods_ready(None)  # type: ignore[arg-type]


def test_managed_by() -> None:
    """``JobWithManagedBy``: MultiKueue may default it when unset or the AppWrapper
    controller's own name."""
    j = AppWrapperJob(appwrapper([pod()]))
    assert j.can_default_managed_by() and j.managed_by() is None
    j.set_managed_by(APPWRAPPER_CONTROLLER_NAME)
    assert j.can_default_managed_by()
    j.set_managed_by(c.MULTIKUEUE_CONTROLLER_NAME)
    assert not j.can_default_managed_by()
    assert j.managed_by() == c.MULTIKUEUE_CONTROLLER_NAME
    j.set_managed_by(None)
    assert "managedBy" not in j.obj["spec"]
    off = DEFAULT_FEATURES.with_gates(**{FeatureGate.MULTIKUEUE.value: False})
    assert not AppWrapperJob(appwrapper([pod()]), features=off).can_default_managed_by()


def test_callbacks() -> None:
    """The registration mirrors Kueue's (GVK, job type; MultiKueue: see below)."""
    assert CALLBACKS.get_gvk() == APPWRAPPER_GVK
    assert CALLBACKS.job_type == APPWRAPPER_GVK
    assert FRAMEWORK_NAME == "AppWrapper.v1beta2.workload.codeflare.dev"


# --- the generic reconciler (Kueue's TestReconciler) -----------------------------------------


async def test_workload_is_created_with_pod_sets() -> None:
    """Kueue's TestReconciler "workload is created with podsets" (KU-4)."""
    k = Kueue(manage_without_queue=True, features=TAS_ON)
    await k.api.create(queued([job(2)], queue=""))
    await k.reconcile()
    wl = await k.workload()
    (ps,) = wl["spec"]["podSets"]
    assert (ps["name"], ps["count"]) == ("aw-0", 2)
    assert ps["topologyRequest"] == {"podIndexLabel": "batch.kubernetes.io/job-completion-index"}
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "AppWrapper"
    assert wl["metadata"]["name"].startswith("appwrapper-aw-")
    aw = await k.get()
    assert aw["spec"]["suspend"] is True and "podSetInfos" not in aw["spec"]["components"][0]


async def test_workload_gets_provreq_annotations() -> None:
    """Kueue's TestReconciler "workload is created with a ProvReq annotation" (KU-5)."""
    k = Kueue(manage_without_queue=True)
    await k.api.create(queued([job(2)], queue="", annotations={
        c.PROV_REQ_ANNOTATION_PREFIX + "test-annotation": "test-val",
        "invalid-provreq-prefix/test-annotation-2": "test-val-2"}))
    await k.reconcile()
    assert (await k.workload())["metadata"]["annotations"] == {
        c.PROV_REQ_ANNOTATION_PREFIX + "test-annotation": "test-val"}


async def test_no_workload_without_queue_name() -> None:
    """Kueue's TestReconciler "workload isn't created due to manageJobsWithoutQueueName=
    false" (KU-6); adding the queue label then creates one (KI-5)."""
    k = Kueue()
    await k.api.create(queued([job(2)], queue=""))
    await k.reconcile()
    assert await k.workloads() == []
    aw = await k.get()
    aw["metadata"]["labels"] = {c.QUEUE_LABEL: "user-queue"}
    await k.api.update(aw)
    await k.reconcile()
    assert (await k.workload())["spec"]["queueName"] == "user-queue"


async def test_no_workload_for_completed_appwrapper() -> None:
    """Kueue's TestReconciler "workload shouldn't be recreated for completed job" (KU-7)."""
    k = Kueue()
    await k.api.create(queued([job(2)], queue="foo"))
    await k.set_aw_status(phase="Succeeded")
    await k.reconcile()
    assert await k.workloads() == []


# --- the integration flow --------------------------------------------------------------------


async def test_admission_injects_flavors_and_the_controller_applies_them() -> None:
    """Kueue's integration "Should reconcile AppWrappers" (KI-1, KI-7): admission with
    flavors per PodSet unsuspends the AppWrapper, emits Started, stores one podSetInfo
    per component; the framework controller then creates the Jobs with the node
    selectors injected. A Succeeded phase finishes the Workload."""
    k = Kueue()
    await k.flavor("on-demand", {"instance": "on-demand"})
    await k.flavor("spot", {"instance": "spot"})
    await k.api.create(queued([job(1, name="j1"), job(3, name="j2")], suspend=False))
    await k.reconcile()
    wl = await k.workload()
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("aw-0", 1), ("aw-1", 3)]
    await k.admit(["spot", "on-demand"])
    await k.reconcile()
    aw = await k.get()
    assert aw["spec"]["suspend"] is False
    comps = aw["spec"]["components"]
    assert comps[0]["podSetInfos"][0]["nodeSelector"] == {"instance": "spot"}
    assert comps[1]["podSetInfos"][0]["nodeSelector"] == {"instance": "on-demand"}
    assert ("Normal", "Started", "Admitted by clusterQueue cluster-queue") in k.recorder.events

    controller = AppWrapperReconciler(k.api, Recorder(), AppWrapperConfig(autopilot=None),
                                      clock=k.server.clock)
    for _ in range(3):
        await controller.reconcile(Request.of(NS, "aw"))
    jobs = {j["metadata"]["name"]: j for j in (await k.api.list(JOB, namespace=NS)).items}
    assert jobs["j1"]["spec"]["template"]["spec"]["nodeSelector"] == {"instance": "spot"}
    assert jobs["j2"]["spec"]["template"]["spec"]["nodeSelector"] == {"instance": "on-demand"}
    assert jobs["j2"]["spec"]["template"]["metadata"]["labels"][APPWRAPPER_LABEL] == "aw"
    await k.reconcile()  # the controller's status changes do not break equivalence
    assert len(await k.workloads()) == 1

    await k.set_aw_status(phase="Succeeded", conditions=[aw_condition("QuotaReserved", "False")])
    await k.reconcile()
    assert cond(await k.workload(), "Finished") == (
        "True", "Succeeded", "AppWrapper finished successfully")


async def test_preemption_waits_for_the_controller_to_clean_up() -> None:
    """Kueue's integration "Should finish the preemption when the appwrapper no longer
    has resources deployed" (KI-3): suspended on eviction, quota held while QuotaReserved
    is True on the AppWrapper."""
    k = Kueue()
    await k.flavor("default", {})
    await k.api.create(queued([job(1)]))
    await k.reconcile()
    await k.admit(["default"])
    await k.reconcile()
    await k.set_aw_status(conditions=[aw_condition("QuotaReserved", "True")])
    await k.evict()
    await k.reconcile()
    aw = await k.get()
    assert aw["spec"]["suspend"] is True
    assert "podSetInfos" not in aw["spec"]["components"][0]
    await k.reconcile()
    assert cond(await k.workload(), "QuotaReserved")[0] == "True"  # type: ignore[index]
    await k.set_aw_status(conditions=[aw_condition("QuotaReserved", "False")])
    await k.reconcile()
    assert cond(await k.workload(), "QuotaReserved")[0] == "False"  # type: ignore[index]


async def test_admission_check_pod_set_updates() -> None:
    """Kueue's integration "Should not set the pod template's ... admission check
    PodSetUpdates" (KI-4): the updates reach each component's podSetInfos; clearing the
    admission suspends the AppWrapper and drops every podSetInfos."""
    k = Kueue()
    await k.flavor("default", {})
    await k.api.create(queued([job(1), job(2)]))
    await k.reconcile()
    updates = [{"name": "aw-0", "annotations": {"ann1": "v1"}, "labels": {"lbl1": "v1"},
                "nodeSelector": {"sel1": "v1"},
                "tolerations": [{"key": "t1", "operator": "Equal", "value": "v1",
                                 "effect": "NoSchedule"}]},
               {"name": "aw-1", "labels": {"lbl2": "v2"}}]
    await k.admit(["default", "default"], updates=updates, checks=True)
    await k.reconcile()
    aw = await k.get()
    assert aw["spec"]["suspend"] is False
    info0 = aw["spec"]["components"][0]["podSetInfos"][0]
    assert info0["annotations"] == {"ann1": "v1"}
    assert info0["labels"]["lbl1"] == "v1"
    assert info0["nodeSelector"] == {"sel1": "v1"}
    assert info0["tolerations"] == updates[0]["tolerations"]
    assert aw["spec"]["components"][1]["podSetInfos"][0]["labels"]["lbl2"] == "v2"
    await k.apply_status({"conditions": [], "admission": None, "admissionChecks": []})
    await k.reconcile()
    aw = await k.get()
    assert aw["spec"]["suspend"] is True
    assert all("podSetInfos" not in comp for comp in aw["spec"]["components"])


async def test_wait_for_pods_ready_follows_the_appwrapper() -> None:
    """Kueue's integration "Should set the PodsReady condition" cases (KI-6)."""
    k = Kueue(wait_for_pods_ready=True)
    await k.flavor("default", {})
    await k.api.create(queued([job(1)]))
    await k.reconcile()
    await k.admit(["default"])
    await k.reconcile()
    await k.reconcile()
    assert cond(await k.workload(), "PodsReady") == (
        "False", "WaitForStart", "Not all pods are ready or succeeded")
    await k.set_aw_status(conditions=[aw_condition("PodsReady", "True")])
    await k.reconcile()
    assert cond(await k.workload(), "PodsReady") == (
        "True", "Started", "All pods reached readiness and the workload is running")


async def test_failed_appwrapper_finishes_only_after_cleanup() -> None:
    """A Failed AppWrapper keeps its Workload unfinished while ResourcesDeployed (§2.8)."""
    k = Kueue()
    await k.flavor("default", {})
    await k.api.create(queued([job(1)]))
    await k.reconcile()
    await k.admit(["default"])
    await k.reconcile()
    await k.set_aw_status(phase="Failed", conditions=[
        aw_condition("ResourcesDeployed", "True"), aw_condition("QuotaReserved", "True")])
    await k.reconcile()
    assert cond(await k.workload(), "Finished") is None
    await k.set_aw_status(conditions=[aw_condition("ResourcesDeployed", "False"),
                                      aw_condition("QuotaReserved", "False")])
    await k.reconcile()
    assert cond(await k.workload(), "Finished") == ("True", "Failed", "AppWrapper failed")


async def test_unmanaged_namespace_is_left_alone() -> None:
    """Kueue's integration "unmanaged namespace" (KI-2): no Workload, not suspended."""
    k = Kueue(manage_without_queue=True,
              selector=LabelSelector.parse("kubernetes.io/metadata.name=managed"))
    await k.api.create(queued([job(1)], queue="", suspend=False))
    await k.reconcile()
    assert await k.workloads() == []
    assert (await k.get())["spec"]["suspend"] is False


# --- MultiKueue: Kueue's generic adapter for external frameworks -----------------------------


def test_no_multikueue_adapter_of_our_own() -> None:
    """Kueue v0.19.2 takes MultiKueue adapters from the built-in integrations it has
    enabled, and for an external framework uses its generic adapter
    (``multiKueue.externalFrameworks``): it never calls a Python adapter, so none is
    registered (issue #28, item 11)."""
    assert CALLBACKS.multikueue_adapter is None
    im = IntegrationManager()
    register(im)
    assert im.get_multikueue_adapters([FRAMEWORK_NAME]) == {}


async def test_generic_adapter_copy_runs_on_the_worker_and_mirrors_back() -> None:
    """KU-8/KU-9 with the adapter Kueue really uses (its generic one, as
    ``tests/unit/jobflow/multikueue.py`` plays it): the manager's controller leaves an
    AppWrapper managed by MultiKueue alone; the worker's copy (spec without ``managedBy``,
    origin label, prebuilt-workload name) passes the CRD and the worker's controller runs
    it; its status is mirrored onto the manager's AppWrapper, ``suspend`` untouched."""
    manager, worker = Harness(new_server()), Harness(new_server())
    aw = queued([job(2)], suspend=False)
    aw["spec"]["managedBy"] = c.MULTIKUEUE_CONTROLLER_NAME
    local = await manager.create(aw)
    await manager.reconcile()
    assert "status" not in await manager.get(), "the manager's controller ignores it"

    remote = remote_copy(local, "wl1")
    created = await worker.create(remote)
    assert "managedBy" not in created["spec"]
    assert created["spec"]["components"] == aw["spec"]["components"]
    assert prebuilt_workload_name_for(created) == "wl1"
    assert created["metadata"]["labels"][c.MULTIKUEUE_ORIGIN_LABEL] == ORIGIN
    await worker.reconcile()  # "" → Suspended
    await worker.reconcile()  # Suspended → Resuming (the copy is not suspended)
    await worker.reconcile()  # Resuming → Running: the wrapped Job is created
    assert await worker.phase() == "Running"
    assert [j["metadata"]["name"] for j in worker.server.objects(JOB, NS)] == ["job"]

    mirrored = await sync_status(manager.api, worker.api, APPWRAPPER_GVK, "aw", NS)
    assert mirrored["status"] == (await worker.get())["status"]
    assert mirrored["spec"]["suspend"] is False
    assert mirrored["spec"]["managedBy"] == c.MULTIKUEUE_CONTROLLER_NAME
    assert manager.server.objects(JOB, NS) == [], "nothing runs on the manager"
