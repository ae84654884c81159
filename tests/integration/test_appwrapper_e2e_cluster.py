"""Upstream AppWrapper's end-to-end scenarios (project-codeflare/appwrapper v1.2.2,
``test/e2e/appwrapper_test.go``) on the local control plane, with the real Kueue.

Ported as behaviour: the same wrapped kinds, sizes and expectations, written as this
project's cluster tests write objects (plain dicts), run by our manager beside Kueue
(``AppWrapper.v1beta2.workload.codeflare.dev`` in its ``externalFrameworks``; Kueue's own
``batch/job`` integration on). kwok runs the pods: those of Jobs and of bare Pods owned
by the AppWrapper finish after the run time annotated on them, the others run on.

The PyTorchJob, RayCluster, RayJob and JobSet scenarios install those kinds' real CRDs,
read from the Go module cache at the versions Kueue v0.19.2 pins
(``tests/cluster/kueue/go.mod``); their controllers are absent, so no pods appear, and
what is proven is ours: creation, PodSet inference, suspension and deletion.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from integrations.appwrapper.api import APPWRAPPER_GVK, APPWRAPPER_LABEL, FINALIZER
from integrations.manager import CRD_GVK, ExternalFrameworkManager, ManagerOptions
from jobframework.runtime.client import PropagationPolicy
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import AlreadyExists, NotFound
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.cluster import COMPLETE_DELAY_ANNOTATION
from jobframework.testing.cluster.binaries import BuildError, module_source

from .helpers import (
    CLUSTER_QUEUE_GVK,
    JOB_GVK,
    NS,
    POD_GVK,
    QUEUE_LABEL,
    WORKLOAD_GVK,
    Cleanup,
    condition,
    controller_uid,
    delete,
    eventually,
    get_or_none,
    is_true,
    own_queue,
    workload_of,
)

pytestmark = pytest.mark.cluster

AW_GVK, AW_LABEL, AW_FINALIZER = APPWRAPPER_GVK, APPWRAPPER_LABEL, FINALIZER

STATEFULSET_GVK = GVK("apps", "v1", "StatefulSet")
DEPLOYMENT_GVK = GVK("apps", "v1", "Deployment")
SERVICE_GVK = GVK("", "v1", "Service")
PYTORCHJOB_GVK = GVK("kubeflow.org", "v1", "PyTorchJob")
RAYCLUSTER_GVK = GVK("ray.io", "v1", "RayCluster")
RAYJOB_GVK = GVK("ray.io", "v1", "RayJob")
JOBSET_GVK = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
ANN = "workload.codeflare.dev.appwrapper/"
HOLD_FINALIZER = "kueue-jf.test/hold"
FLAVOR_SELECTOR = {"instance-type": "on-demand"}
#: Long enough that a Job's or a bare Pod's pods run until the test ends.
FOREVER = "600s"

#: (Go module as Kueue's go.mod requires it, CRD file in that module), per wrapped kind.
OPERATOR_CRDS = (
    ("github.com/kubeflow/training-operator",
     "manifests/base/crds/kubeflow.org_pytorchjobs.yaml"),
    ("github.com/ray-project/kuberay/ray-operator",
     "config/crd/bases/ray.io_rayclusters.yaml"),
    ("github.com/ray-project/kuberay/ray-operator", "config/crd/bases/ray.io_rayjobs.yaml"),
    ("sigs.k8s.io/jobset", "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"),
)


# -- objects ---------------------------------------------------------------------------------


def pod_spec(cpu: str, *, restart: str | None = "Never") -> dict[str, Any]:
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0, "containers": [{
        "name": "main", "image": "registry.example/fake:1",
        "resources": {"requests": {"cpu": cpu}}}]}
    if restart:
        spec["restartPolicy"] = restart
    return spec


def pod_template(cpu: str, *, run: str | None = None, labels: dict[str, str] | None = None,
                 restart: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if run:
        meta["annotations"] = {COMPLETE_DELAY_ANNOTATION: run}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "spec": pod_spec(cpu, restart=restart)}


def pod(name: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {COMPLETE_DELAY_ANNOTATION: FOREVER}},
            "spec": pod_spec(cpu)}


def deployment(name: str, replicas: int, cpu: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": pod_template(cpu, labels=labels)}}


def statefulset(name: str, replicas: int, cpu: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": pod_template(cpu, labels=labels)}}


def service(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name},
                     "ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}]}}


def batch_job(cpu: str, *, name: str | None = None, generate_name: str | None = None,
              queue: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name} if name else {"generateName": generate_name}
    if queue:
        meta["labels"] = {QUEUE_LABEL: queue}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"template": pod_template(cpu, run=FOREVER, restart="Never")}}


def pytorchjob(name: str, workers: int, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Worker": {
                "replicas": workers, "restartPolicy": "OnFailure",
                "template": pod_template(cpu)}}}}


def ray_cluster_spec(head_cpu: str, workers: int, worker_cpu: str) -> dict[str, Any]:
    return {"rayVersion": "2.9.0",
            "headGroupSpec": {"rayStartParams": {}, "template": pod_template(head_cpu)},
            "workerGroupSpecs": [{"groupName": "small-group", "replicas": workers,
                                  "minReplicas": workers, "maxReplicas": workers,
                                  "rayStartParams": {},
                                  "template": pod_template(worker_cpu)}]}


def raycluster(name: str, head_cpu: str, workers: int, worker_cpu: str) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
            "spec": ray_cluster_spec(head_cpu, workers, worker_cpu)}


def rayjob(name: str, head_cpu: str, workers: int, worker_cpu: str) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name},
            "spec": {"shutdownAfterJobFinishes": True,
                     "rayClusterSpec": ray_cluster_spec(head_cpu, workers, worker_cpu)}}


def jobset(generate_name: str, worker_jobs: int, worker_pods: int, cpu: str) -> dict[str, Any]:
    def job(pods: int) -> dict[str, Any]:
        return {"spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                         "template": pod_template(cpu, restart="Never")}}

    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"generateName": generate_name},
            "spec": {"replicatedJobs": [
                {"name": "driver", "template": job(1)},
                {"name": "workers", "replicas": worker_jobs, "template": job(worker_pods)}]}}


def component(template: dict[str, Any],
              pod_sets: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A component; ``pod_sets`` declared as upstream's fixtures do, else inferred."""
    out: dict[str, Any] = {"template": template}
    if pod_sets is not None:
        out["podSets"] = pod_sets
    return out


def appwrapper(name: str, queue: str, components: list[dict[str, Any]],
               annotations: dict[str, str] | None = None) -> Object:
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: queue}}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": AW_GVK.api_version, "kind": AW_GVK.kind, "metadata": metadata,
            "spec": {"components": components}}


def phase(aw: Object | None) -> str:
    return str(((aw or {}).get("status") or {}).get("phase") or "")


def at_path(obj: Any, path: str) -> Any:
    """The value at a PodSet path (``template.spec.x[0].y``; ``template`` is ``obj``)."""
    parts = path.split(".")
    assert parts[0] == "template", path
    for part in parts[1:]:
        key, _, index = part.partition("[")
        obj = obj[key]
        if index:
            obj = obj[int(index.rstrip("]"))]
    return obj


# -- waiting ---------------------------------------------------------------------------------


async def consistently(what: str, probe: Callable[[], Awaitable[bool]],
                       seconds: float) -> None:
    """Fail as soon as ``probe`` is false within the next ``seconds`` (Gomega's
    ``Consistently``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert await probe(), f"no longer {what}"
        await asyncio.sleep(0.5)


async def aw_phase(client: RestClient, name: str) -> str:
    return phase(await get_or_none(client, AW_GVK, name))


def phase_is(client: RestClient, name: str, expected: str) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return await aw_phase(client, name) == expected

    return probe


async def stays_running(client: RestClient, name: str, seconds: float) -> None:
    """Running (it may still be finishing Resuming when its pods run), then Running for
    ``seconds``."""
    await eventually(f"{name} Running", phase_is(client, name, "Running"))
    await consistently(f"{name} Running", phase_is(client, name, "Running"), seconds)


async def ready_pods(client: RestClient, name: str) -> list[Object]:
    """The AppWrapper's pods that run or ran (upstream's ``waitAWPodsReady`` counts
    phases Running and Succeeded)."""
    pods = (await client.list(POD_GVK, namespace=NS,
                              label_selector=f"{AW_LABEL}={name}")).items
    return [p for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Succeeded")]


async def wait_pods_ready(client: RestClient, name: str, expected: int) -> list[Object]:
    async def enough() -> list[Object] | None:
        pods = await ready_pods(client, name)
        return pods if len(pods) >= expected else None

    pods: list[Object] = await eventually(f"{expected} pods of {name} running", enough)
    return pods


async def admitted_workload(client: RestClient, name: str) -> Object:
    aw = await client.get(AW_GVK, name, namespace=NS)

    async def admitted() -> Object | None:
        wl = await workload_of(client, aw)
        return wl if is_true(wl, "Admitted") else None

    wl: Object = await eventually(f"the Workload of {name} admitted", admitted)
    return wl


def on_flavor_nodes(pod: Object) -> bool:
    """The pod has the admitted flavor's node selector and runs on one of its nodes."""
    return (pod["spec"].get("nodeSelector") == FLAVOR_SELECTOR
            and str(pod["spec"].get("nodeName") or "").startswith("kwok-on-demand-"))


def pod_set_shape(wl: Object) -> list[tuple[int, str]]:
    """Per PodSet of the Workload, its count and its (single) container's cpu request."""
    return [(ps["count"], ps["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"])
            for ps in wl["spec"]["podSets"]]


async def suspended_without_quota(client: RestClient, name: str) -> bool:
    """Suspended, its Workload pending (no quota reserved), none of its pods exist."""
    aw = await get_or_none(client, AW_GVK, name)
    if aw is None or phase(aw) != "Suspended" or aw["spec"].get("suspend") is not True:
        return False
    wl = await workload_of(client, aw)
    reserved = condition(wl, "QuotaReserved")
    pods = (await client.list(POD_GVK, namespace=NS, label_selector=f"{AW_LABEL}={name}")).items
    return (wl is not None and reserved is not None and reserved["status"] == "False"
            and not pods)


async def set_active(client: RestClient, name: str, active: bool) -> None:
    """Set ``spec.active`` of the AppWrapper's Workload (Kueue evicts an inactive one)."""
    wl = await workload_of(client, await client.get(AW_GVK, name, namespace=NS))
    assert wl is not None, name
    await client.patch(WORKLOAD_GVK, wl["metadata"]["name"], {"spec": {"active": active}},
                       namespace=NS)


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture
async def manager(client: RestClient) -> AsyncIterator[ExternalFrameworkManager]:
    """Our manager running the AppWrapper integration beside the cluster's Kueue."""
    options = ManagerOptions(integrations=("appwrapper",),
                             webhook_configuration_name="kueue-jobframework-aw-e2e")
    async with ExternalFrameworkManager(client, options) as mgr:
        yield mgr


def _load_crds() -> list[Object]:
    crds: list[Object] = []
    for module, rel in OPERATOR_CRDS:
        try:
            src = module_source("kueue", module)
        except BuildError as err:
            pytest.fail(f"the CRD {rel} of Go module {module} (required by "
                        f"tests/cluster/kueue/go.mod) is not in the Go module cache and "
                        f"could not be downloaded: {err}")
        path: Path = src.dir / rel
        if not path.is_file():
            pytest.fail(f"Go module {module}@{src.version} has no {rel} ({path})")
        # The C loader when PyYAML has it: these files are up to 1.4 MB of YAML.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        crds.extend(d for d in yaml.load_all(path.read_text(), Loader=loader) if d)
    return crds


@pytest.fixture
async def operator_crds(client: RestClient) -> AsyncIterator[list[str]]:
    """The PyTorchJob, RayCluster, RayJob and JobSet CRDs, established; removed after
    the test (other tests expect those kinds unserved)."""
    crds = await asyncio.to_thread(_load_crds)
    names = [crd["metadata"]["name"] for crd in crds]
    for crd in crds:
        # One left by an interrupted run on a reused cluster is as good.
        with contextlib.suppress(AlreadyExists):
            await client.create(crd)
    for name in names:
        async def established(name: str = name) -> bool:
            return is_true(await client.get(CRD_GVK, name), "Established")

        await eventually(f"CRD {name} established", established, limit=60)
    yield names
    await asyncio.gather(*(delete(client, CRD_GVK, name, None) for name in names))


@pytest.fixture
async def manager_with_crds(client: RestClient, operator_crds: list[str]
                            ) -> AsyncIterator[ExternalFrameworkManager]:
    """Our manager, started once the operators' kinds are served."""
    del operator_crds
    options = ManagerOptions(integrations=("appwrapper",),
                             webhook_configuration_name="kueue-jobframework-aw-e2e")
    async with ExternalFrameworkManager(client, options) as mgr:
        yield mgr


# -- Creation of Fundamental GVKs ----------------------------------------------------------


async def test_statefulset_pods_become_ready_and_the_appwrapper_stays_running(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """Upstream "Creation of Fundamental GVKs: StatefulSets": a StatefulSet of 2 at
    200m with a declared PodSet; its pods run on the admitted flavor's nodes and the
    AppWrapper stays Running."""
    del manager
    queue = await own_queue(client, cleanup, "aw-e2e-sts", cpu="1")
    name = f"aw-sts-{uuid.uuid4().hex[:5]}"
    sts = f"{name}-s"
    await client.create(appwrapper(name, queue.name, [component(
        statefulset(sts, 2, "200m"), [{"replicas": 2, "path": "template.spec.template"}])]))
    cleanup.insert(0, (AW_GVK, name, NS))

    pods = await wait_pods_ready(client, name, 2)
    await stays_running(client, name, 5)
    wl = await admitted_workload(client, name)
    assert pod_set_shape(wl) == [(2, "200m")]
    aw = await client.get(AW_GVK, name, namespace=NS)
    owner = await client.get(STATEFULSET_GVK, sts, namespace=NS)
    assert controller_uid(owner) == aw["metadata"]["uid"]
    assert sorted(p["metadata"]["name"] for p in pods) == [f"{sts}-0", f"{sts}-1"]
    assert all(on_flavor_nodes(p) for p in pods)


async def test_mixed_basic_resources_in_one_appwrapper(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """Upstream "Mixed Basic Resources": a Pod, a Deployment of 2, a StatefulSet of 2, a
    Service and a Job (generated name) in one AppWrapper: one Workload of four PodSets,
    six pods running, the Service created, and the AppWrapper stays Running."""
    del manager
    queue = await own_queue(client, cleanup, "aw-e2e-mixed", cpu="1")
    name = f"aw-mixed-{uuid.uuid4().hex[:5]}"
    await client.create(appwrapper(name, queue.name, [
        component(pod(f"{name}-pod", "100m"), [{"path": "template"}]),
        component(deployment(f"{name}-dep", 2, "100m"),
                  [{"replicas": 2, "path": "template.spec.template"}]),
        component(statefulset(f"{name}-sts", 2, "100m"),
                  [{"replicas": 2, "path": "template.spec.template"}]),
        component(service(f"{name}-svc")),
        component(batch_job("100m", generate_name="batchjob-"),
                  [{"path": "template.spec.template"}]),
    ]))
    cleanup.insert(0, (AW_GVK, name, NS))

    pods = await wait_pods_ready(client, name, 6)
    await stays_running(client, name, 5)
    wl = await admitted_workload(client, name)
    assert pod_set_shape(wl) == [(1, "100m"), (2, "100m"), (2, "100m"), (1, "100m")]
    assert all(on_flavor_nodes(p) for p in pods)
    aw = await client.get(AW_GVK, name, namespace=NS)
    statuses = aw["status"]["componentStatus"]
    assert [cs["kind"] for cs in statuses] == ["Pod", "Deployment", "StatefulSet", "Service",
                                               "Job"]
    job_name = statuses[4]["name"]
    assert job_name.startswith("batchjob-") and job_name != "batchjob-"
    svc = await client.get(SERVICE_GVK, f"{name}-svc", namespace=NS)
    assert controller_uid(svc) == aw["metadata"]["uid"]
    job = await client.get(JOB_GVK, job_name, namespace=NS)
    assert controller_uid(job) == aw["metadata"]["uid"]


# -- Creation of Kubeflow Training Operator, KubeRay and JobSet GVKs ------------------------


async def test_pytorchjob_raycluster_rayjob_and_jobset_created_suspended_and_deleted(
        client: RestClient, manager_with_crds: ExternalFrameworkManager,
        cleanup: Cleanup) -> None:
    """Upstream "Creation of Kubeflow Training Operator / Kuberay / JobSet GVKs", with
    their real CRDs and no controllers: PodSets inferred (none declared) into the
    Workload; once admitted each component is created, controlled by its AppWrapper,
    with the AppWrapper label and the flavor's node selector in every pod template;
    deactivating the Workload suspends the AppWrapper and deletes the component;
    reactivated, it is created anew; deleting the AppWrapper deletes it first, the
    AppWrapper staying Terminating until it is gone."""
    del manager_with_crds
    queue = await own_queue(client, cleanup, "aw-e2e-crds", cpu="4")
    sfx = uuid.uuid4().hex[:5]
    # No pods ever appear: keep the "not enough pods" timer out of the way.
    patient = {f"{ANN}admissionGracePeriodDuration": "10m"}
    cases: dict[str, tuple[dict[str, Any], list[tuple[int, str]]]] = {
        f"aw-pt-{sfx}": (pytorchjob(f"pt-{sfx}", 2, "250m"), [(2, "250m")]),
        f"aw-rc-{sfx}": (raycluster(f"rc-{sfx}", "500m", 2, "250m"),
                         [(1, "500m"), (2, "250m")]),
        f"aw-rj-{sfx}": (rayjob(f"rj-{sfx}", "500m", 2, "250m"), [(1, "500m"), (2, "250m")]),
        f"aw-js-{sfx}": (jobset("jobset-", 2, 2, "100m"), [(1, "100m"), (4, "100m")]),
    }
    for name, (template, _) in cases.items():
        await client.create(appwrapper(name, queue.name, [component(template)], patient))
        cleanup.insert(0, (AW_GVK, name, NS))

    async def created(name: str) -> Object:
        async def running_component() -> Object | None:
            aw = await client.get(AW_GVK, name, namespace=NS)
            if phase(aw) != "Running":
                return None
            cs = aw["status"]["componentStatus"][0]
            obj = await get_or_none(client, GVK.from_api_version(cs["apiVersion"], cs["kind"]),
                                    cs["name"])
            return obj

        obj: Object = await eventually(f"{name} Running with its component",
                                       running_component)
        return obj

    first_uids = {}
    for name, (template, shape) in cases.items():
        wl = await admitted_workload(client, name)
        assert pod_set_shape(wl) == shape, name
        obj = await created(name)
        aw = await client.get(AW_GVK, name, namespace=NS)
        assert obj["kind"] == template["kind"]
        assert controller_uid(obj) == aw["metadata"]["uid"], name
        assert AW_FINALIZER in aw["metadata"]["finalizers"]
        paths = [ps["path"] for ps in aw["status"]["componentStatus"][0]["podSets"]]
        assert len(paths) == len(shape), paths
        for path in paths:
            pod_tmpl = at_path(obj, path)
            assert pod_tmpl["metadata"]["labels"][AW_LABEL] == name, (name, path)
            assert pod_tmpl["spec"]["nodeSelector"] == FLAVOR_SELECTOR, (name, path)
        first_uids[name] = obj["metadata"]["uid"]

    # Suspension: Kueue evicts a deactivated Workload; the components are deleted.
    for name in cases:
        await set_active(client, name, False)
    for name, (template, _) in cases.items():
        async def suspended(name: str = name, template: dict[str, Any] = template) -> bool:
            aw = await client.get(AW_GVK, name, namespace=NS)
            cs = aw["status"]["componentStatus"][0]
            return (phase(aw) == "Suspended" and aw["spec"]["suspend"] is True
                    and await get_or_none(client, GVK.of(template), cs["name"]) is None)

        await eventually(f"{name} Suspended with its component deleted", suspended)
        evicted = condition(await workload_of(client, await client.get(AW_GVK, name,
                                                                        namespace=NS)),
                            "Evicted")
        assert evicted is not None and evicted["reason"] == "Deactivated", evicted

    # Resumed: created anew.
    for name in cases:
        await set_active(client, name, True)
    components: dict[str, tuple[GVK, str]] = {}
    for name in cases:
        obj = await created(name)
        assert obj["metadata"]["uid"] != first_uids[name], name
        components[name] = (GVK.of(obj), obj["metadata"]["name"])

    # Deletion, upstream's two stages: the AppWrapper's finalizer deletes the component
    # and keeps the AppWrapper (Terminating) until it is gone. A finalizer of the test's
    # holds each component so that this can be seen; with background propagation the
    # garbage collector would delete it only once the AppWrapper is gone.
    for gvk, comp_name in components.values():
        await client.patch(gvk, comp_name, {"metadata": {"finalizers": [HOLD_FINALIZER]}},
                           namespace=NS)
    try:
        for name in cases:
            await client.delete(AW_GVK, name, namespace=NS,
                                propagation_policy=PropagationPolicy.BACKGROUND)
        for name, (gvk, comp_name) in components.items():
            async def held(name: str = name, gvk: GVK = gvk, comp_name: str = comp_name
                           ) -> bool:
                obj = await get_or_none(client, gvk, comp_name)
                return obj is not None and bool(obj["metadata"].get("deletionTimestamp"))

            await eventually(f"the {gvk.kind} of {name} being deleted", held)
            aw = await client.get(AW_GVK, name, namespace=NS)
            assert phase(aw) == "Terminating", phase(aw)
            assert AW_FINALIZER in aw["metadata"]["finalizers"]
    finally:
        for gvk, comp_name in components.values():
            with contextlib.suppress(NotFound):
                await client.patch(gvk, comp_name, {"metadata": {"finalizers": None}},
                                   namespace=NS)
    for name, (gvk, comp_name) in components.items():
        async def gone(name: str = name, gvk: GVK = gvk, comp_name: str = comp_name) -> bool:
            return (await get_or_none(client, AW_GVK, name) is None
                    and await get_or_none(client, gvk, comp_name) is None)

        await eventually(f"{name} and its {gvk.kind} deleted", gone)


# -- Recognition of Child Jobs ------------------------------------------------------------


async def test_wrapped_jobs_get_no_workload_of_their_own(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """Upstream "Recognition of Child Jobs" (compound): the AppWrapper takes the whole
    quota, so a second Workload for a wrapped Job could never be admitted. Real Kueue's
    Job integration recognises the Jobs as children of a Kueue-managed AppWrapper (an
    external framework), even the one carrying a queue label: no Workload of their own,
    never suspended, all pods run, and the ClusterQueue counts the quota once."""
    del manager
    queue = await own_queue(client, cleanup, "aw-e2e-child", cpu="2")
    name = f"aw-child-{uuid.uuid4().hex[:5]}"
    await client.create(appwrapper(name, queue.name, [
        component(batch_job("500m", name=f"{name}-labelled", queue=queue.name)),
        component(batch_job("500m", generate_name=f"{name}-j-")),
        component(deployment(f"{name}-dep", 2, "500m")),
    ]))
    cleanup.insert(0, (AW_GVK, name, NS))

    await wait_pods_ready(client, name, 4)
    wl = await admitted_workload(client, name)
    assert pod_set_shape(wl) == [(1, "500m"), (1, "500m"), (2, "500m")]
    aw = await client.get(AW_GVK, name, namespace=NS)
    jobs = [await client.get(JOB_GVK, cs["name"], namespace=NS)
            for cs in aw["status"]["componentStatus"] if cs["kind"] == "Job"]
    assert len(jobs) == 2
    # Give Kueue's Job reconciler time to act on the running children, then look.
    await stays_running(client, name, 5)
    job_uids = set()
    for job in jobs:
        current = await client.get(JOB_GVK, job["metadata"]["name"], namespace=NS)
        assert current["spec"]["suspend"] is False, current["metadata"]["name"]
        job_uids.add(current["metadata"]["uid"])
    workloads = (await client.list(WORKLOAD_GVK, namespace=NS)).items
    assert [w for w in workloads if controller_uid(w) in job_uids] == []
    cq = await client.get(CLUSTER_QUEUE_GVK, queue.name)
    assert cq["status"]["admittedWorkloads"] == 1
    usage = {r["name"]: r["total"] for f in cq["status"]["flavorsReservation"]
             for r in f["resources"]}
    assert usage["cpu"] == "2"


# -- Queueing -------------------------------------------------------------------------------


async def test_basic_queuing_waits_suspended_until_quota_is_freed(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """Upstream "Queueing and Preemption: Basic Queuing", with both ways quota comes
    back: while two running AppWrappers hold the quota, two more stay Suspended (their
    Workloads pending, no pods); deleting one running AppWrapper admits the one that
    now fits, and the other waits until the second running one finishes."""
    del manager
    queue = await own_queue(client, cleanup, "aw-e2e-queue", cpu="2")
    sfx = uuid.uuid4().hex[:5]
    small, finishing, fits_first, fits_last = (f"aw-q{i}-{sfx}" for i in range(1, 5))
    await client.create(appwrapper(small, queue.name, [
        component(deployment(f"{small}-d", 2, "250m"))]))
    cleanup.insert(0, (AW_GVK, small, NS))
    # A bare Pod running until the test finishes it.
    await client.create(appwrapper(finishing, queue.name, [
        component(pod(f"{finishing}-p", "1500m"))]))
    cleanup.insert(0, (AW_GVK, finishing, NS))
    await wait_pods_ready(client, small, 2)
    [running_pod] = await wait_pods_ready(client, finishing, 1)

    # 2 cpu in use: both wait.
    await client.create(appwrapper(fits_first, queue.name, [
        component(deployment(f"{fits_first}-d", 2, "250m"))]))
    cleanup.insert(0, (AW_GVK, fits_first, NS))
    await client.create(appwrapper(fits_last, queue.name, [
        component(deployment(f"{fits_last}-d", 2, "500m"))]))
    cleanup.insert(0, (AW_GVK, fits_last, NS))
    for name in (fits_first, fits_last):
        await eventually(f"{name} Suspended without quota",
                         functools.partial(suspended_without_quota, client, name))

    async def both_wait() -> bool:
        return (await suspended_without_quota(client, fits_first)
                and await suspended_without_quota(client, fits_last))

    await consistently("both queued AppWrappers Suspended", both_wait, 10)

    # Deleting the small one frees 0.5 cpu: only the small waiting one fits.
    await delete(client, AW_GVK, small, NS)
    await wait_pods_ready(client, fits_first, 2)
    await consistently(f"{fits_last} Suspended",
                       lambda: suspended_without_quota(client, fits_last), 5)

    # The Pod finishes: its AppWrapper succeeds, its Workload releases 1.5 cpu.
    terminated = {"state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                  "name": "main", "image": "registry.example/fake:1", "ready": False,
                  "restartCount": 0}
    await client.patch(POD_GVK, running_pod["metadata"]["name"],
                       {"status": {"phase": "Succeeded", "containerStatuses": [terminated]}},
                       namespace=NS, subresource="status")
    await eventually(f"{finishing} Succeeded", phase_is(client, finishing, "Succeeded"))
    await wait_pods_ready(client, fits_last, 2)
    await eventually(f"{fits_last} Running", phase_is(client, fits_last, "Running"))


# -- Load Testing --------------------------------------------------------------------------


async def test_fifty_appwrappers_of_deployments_all_pods_ready(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """Upstream "Load Testing: Create 50 AppWrappers": each a Deployment of 2 at 5m
    cpu; all Running within a minute, then all 100 pods running within three."""
    del manager
    queue = await own_queue(client, cleanup, "aw-e2e-load", cpu="2")
    sfx = uuid.uuid4().hex[:4]
    names = [f"aw-e2e-load-{sfx}-{i:02d}" for i in range(50)]
    t0 = time.monotonic()
    try:
        for name in names:
            await client.create(appwrapper(name, queue.name, [component(
                deployment(f"{name}-d", 2, "5m"),
                [{"replicas": 2, "path": "template.spec.template"}])]))

        async def all_running() -> bool:
            items = (await client.list(AW_GVK, namespace=NS)).items
            return sum(1 for aw in items if aw["metadata"]["name"] in names
                       and phase(aw) == "Running") == len(names)

        await eventually("50 AppWrappers Running", all_running, limit=60)
        running = time.monotonic() - t0

        async def all_pods_ready() -> bool:
            pods = (await client.list(POD_GVK, namespace=NS, label_selector=AW_LABEL)).items
            ready: dict[str, int] = {}
            for p in pods:
                if (p.get("status") or {}).get("phase") == "Running":
                    owner = p["metadata"]["labels"][AW_LABEL]
                    ready[owner] = ready.get(owner, 0) + 1
            return all(ready.get(name, 0) >= 2 for name in names)

        await eventually("the 100 pods of 50 AppWrappers running", all_pods_ready, limit=180)
        print(f"\n50 AppWrappers Running {running:.1f}s, all pods running "
              f"{time.monotonic() - t0:.1f}s after the first create")
    finally:
        # All at once: one by one would take a minute.
        await asyncio.gather(*(delete(client, AW_GVK, name, NS) for name in names))
