"""AppWrapper through the real Kueue manager on the local cluster.

Kueue's own ``workload.codeflare.dev/appwrapper`` framework is off; our manager runs the
AppWrapper integration (CRD, webhooks over loopback TLS, the framework controller and
Kueue's generic reconciler) with ``AppWrapper.v1beta2.workload.codeflare.dev`` in
Kueue's ``integrations.externalFrameworks``. Kueue admits and preempts, kwok runs the
wrapped pods (pods of Jobs and bare Pods finish after their run time, a Deployment's
keep running). The objects are written as upstream's users write them: plain YAML-shaped
dicts of the ``workload.codeflare.dev/v1beta2`` API.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from integrations.manager import ExternalFrameworkManager, ManagerOptions
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.cluster import (
    COMPLETE_DELAY_ANNOTATION,
    FAIL_ANNOTATION,
    ClusterInfo,
)

from .helpers import (
    JOB_GVK,
    NS,
    POD_GVK,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    WPC_GVK,
    Cleanup,
    condition,
    eventually,
    get_or_none,
    is_true,
    own_queue,
    workload_of,
)

pytestmark = pytest.mark.cluster

AW_GVK = GVK("workload.codeflare.dev", "v1beta2", "AppWrapper")
DEPLOYMENT_GVK = GVK("apps", "v1", "Deployment")
SA_GVK = GVK("", "v1", "ServiceAccount")
SECRET_GVK = GVK("", "v1", "Secret")
ROLE_GVK = GVK("rbac.authorization.k8s.io", "v1", "Role")
ROLE_BINDING_GVK = GVK("rbac.authorization.k8s.io", "v1", "RoleBinding")
AW_LABEL = "workload.codeflare.dev/appwrapper"
ANN = "workload.codeflare.dev.appwrapper/"


# -- objects ---------------------------------------------------------------------------------


def pod_spec(cpu: str, *, restart: str | None = "Never") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{
        "name": "main", "image": "registry.example/fake:1",
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    if restart:
        spec["restartPolicy"] = restart
    return spec


def pod_meta(run: str, *, fail: bool = False) -> dict[str, Any]:
    annotations = {COMPLETE_DELAY_ANNOTATION: run}
    if fail:
        annotations[FAIL_ANNOTATION] = "true"
    return {"annotations": annotations}


def wrapped_job(name: str, *, cpu: str = "500m", run: str = "2s", pods: int = 1,
                fail: bool = False) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                     "template": {"metadata": pod_meta(run, fail=fail),
                                  "spec": pod_spec(cpu)}}}


def wrapped_pod(name: str, *, cpu: str = "500m", run: str = "2s") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, **pod_meta(run)}, "spec": pod_spec(cpu)}


def wrapped_deployment(name: str, *, cpu: str = "250m", replicas: int = 2) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas,
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": pod_spec(cpu, restart=None)}}}


def appwrapper(name: str, queue: str, components: list[dict[str, Any]], *,
               priority: str | None = None,
               annotations: dict[str, str] | None = None) -> Object:
    labels = {QUEUE_LABEL: queue}
    if priority:
        labels[PRIORITY_LABEL] = priority
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": AW_GVK.api_version, "kind": AW_GVK.kind, "metadata": metadata,
            "spec": {"components": [{"template": c} for c in components]}}


def phase(aw: Object | None) -> str:
    return str(((aw or {}).get("status") or {}).get("phase") or "")


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture
async def manager(client: RestClient) -> AsyncIterator[ExternalFrameworkManager]:
    options = ManagerOptions(integrations=("appwrapper",),
                             webhook_configuration_name="kueue-jobframework-aw-test")
    async with ExternalFrameworkManager(client, options) as mgr:
        yield mgr


async def aw_phase(client: RestClient, name: str) -> str:
    return phase(await get_or_none(client, AW_GVK, name))


# -- tests -----------------------------------------------------------------------------------


async def test_wrapped_job_pod_and_deployment_run_through_kueue(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """Upstream e2e "Basic": a wrapped Job and a wrapped Pod reach Succeeded, a wrapped
    Deployment Running; each queued (suspended) first, then admitted by real Kueue."""
    del manager
    queue = await own_queue(client, cleanup, "aw-basic", cpu="4")
    sfx = uuid.uuid4().hex[:5]
    objs = {
        "job": appwrapper(f"aw-job-{sfx}", queue.name, [wrapped_job(f"aw-job-{sfx}-j")]),
        "pod": appwrapper(f"aw-pod-{sfx}", queue.name, [wrapped_pod(f"aw-pod-{sfx}-p")]),
        "deploy": appwrapper(f"aw-dep-{sfx}", queue.name,
                             [wrapped_deployment(f"aw-dep-{sfx}-d", replicas=2)]),
    }
    created = {}
    for key, obj in objs.items():
        out = await client.create(obj)
        cleanup.insert(0, (AW_GVK, obj["metadata"]["name"], NS))
        # Kueue's base webhook (ours) suspended it: it waits for its Workload's admission.
        assert out["spec"]["suspend"] is True
        created[key] = out
    for key, expected in (("job", "Succeeded"), ("pod", "Succeeded"), ("deploy", "Running")):
        name = objs[key]["metadata"]["name"]

        async def reached(name: str = name, expected: str = expected) -> bool:
            return await aw_phase(client, name) == expected

        await eventually(f"AppWrapper {name} {expected}", reached)
        aw = await client.get(AW_GVK, name, namespace=NS)
        wl = await workload_of(client, aw)
        assert wl is not None, f"no Workload for {name}"
        assert is_true(wl, "QuotaReserved") or is_true(wl, "Finished")
        assert wl["spec"]["podSets"][0]["name"] == f"{name}-0"
        expected_pods = {"job": 1, "pod": 1, "deploy": 2}[key]
        assert wl["spec"]["podSets"][0]["count"] == expected_pods
        assert is_true(aw, "QuotaReserved") == (expected == "Running")
        assert aw["status"]["componentStatus"][0]["kind"] in ("Job", "Pod", "Deployment")
    # The Deployment's pods carry the AppWrapper label and the admitted flavor's selector.
    dep_name = objs["deploy"]["metadata"]["name"]
    pods = (await client.list(POD_GVK, namespace=NS,
                              label_selector=f"{AW_LABEL}={dep_name}")).items
    assert len(pods) == 2
    assert all(p["spec"].get("nodeSelector", {}).get("instance-type") == "on-demand"
               for p in pods)
    # The succeeded Job's Workload is finished by the generic reconciler.
    job_aw = await client.get(AW_GVK, objs["job"]["metadata"]["name"], namespace=NS)

    async def finished() -> bool:
        return is_true(await workload_of(client, job_aw), "Finished")

    await eventually("the wrapped Job's Workload Finished", finished)


async def test_failing_job_is_reset_retry_limit_times_then_failed(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """Upstream e2e "Load Testing: failing job" / fault tolerance: each failure resets the
    AppWrapper (components deleted and recreated) until ``retryLimit`` resets were made;
    the next failure is terminal."""
    del manager
    queue = await own_queue(client, cleanup, "aw-fail", cpu="2")
    name = f"aw-failing-{uuid.uuid4().hex[:5]}"
    aw = appwrapper(name, queue.name, [wrapped_job(f"{name}-j", run="1s", fail=True)],
                    annotations={f"{ANN}retryLimit": "2",
                                 f"{ANN}failureGracePeriodDuration": "0s",
                                 f"{ANN}retryPausePeriodDuration": "1s",
                                 f"{ANN}forcefulDeletionGracePeriodDuration": "5s"})
    await client.create(aw)
    cleanup.insert(0, (AW_GVK, name, NS))
    seen_resetting = False

    async def failed() -> bool:
        nonlocal seen_resetting
        current = await client.get(AW_GVK, name, namespace=NS)
        seen_resetting |= phase(current) == "Resetting"
        return phase(current) == "Failed"

    await eventually(f"AppWrapper {name} Failed", failed, limit=240)
    current = await client.get(AW_GVK, name, namespace=NS)
    assert current["status"]["resettingCount"] == 2
    unhealthy = condition(current, "Unhealthy")
    assert unhealthy is not None and unhealthy["status"] == "True"

    async def cleaned() -> bool:
        obj = await client.get(AW_GVK, name, namespace=NS)
        deployed = condition(obj, "ResourcesDeployed")
        return deployed is not None and deployed["status"] == "False" \
            and await get_or_none(client, JOB_GVK, f"{name}-j") is None

    await eventually("the failed AppWrapper's components deleted", cleaned)
    wl = await workload_of(client, current)

    async def wl_finished() -> bool:
        return is_true(await workload_of(client, current), "Finished")

    await eventually("the failed AppWrapper's Workload Finished", wl_finished)
    wl = await workload_of(client, current)
    fin = condition(wl, "Finished")
    assert fin is not None and fin["reason"] == "Failed", fin


async def test_higher_priority_appwrapper_preempts_and_the_lower_one_resumes(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """Kueue e2e "AppWrapper preemption": the low-priority AppWrapper is evicted, its
    components are deleted (Suspending → Suspended), and on readmission they are created
    anew and run to success."""
    del manager
    sfx = uuid.uuid4().hex[:5]
    low, high = f"aw-low-{sfx}", f"aw-high-{sfx}"
    for wpc, value in ((low, 100), (high, 1000)):
        await client.create({"apiVersion": WPC_GVK.api_version, "kind": WPC_GVK.kind,
                             "metadata": {"name": wpc}, "value": value})
        cleanup.append((WPC_GVK, wpc, None))
    queue = await own_queue(client, cleanup, "aw-preempt", cpu="4",
                            preemption={"withinClusterQueue": "LowerPriority"})
    await client.create(appwrapper(low, queue.name,
                                   [wrapped_job(f"{low}-j", cpu="3", run="20s")],
                                   priority=low))
    cleanup.insert(0, (AW_GVK, low, NS))

    async def low_running_job() -> Object | None:
        if await aw_phase(client, low) != "Running":
            return None
        return await get_or_none(client, JOB_GVK, f"{low}-j")

    first_job = await eventually("the low AppWrapper Running", low_running_job)
    await client.create(appwrapper(high, queue.name,
                                   [wrapped_job(f"{high}-j", cpu="3", run="3s")],
                                   priority=high))
    cleanup.insert(0, (AW_GVK, high, NS))
    low_aw = await client.get(AW_GVK, low, namespace=NS)

    async def evicted() -> bool:
        return is_true(await workload_of(client, low_aw), "Evicted")

    await eventually("the low AppWrapper's Workload evicted", evicted)
    cond = condition(await workload_of(client, low_aw), "Evicted")
    assert cond is not None and cond["reason"] == "Preempted", cond

    async def low_suspended() -> bool:
        obj = await client.get(AW_GVK, low, namespace=NS)
        return phase(obj) == "Suspended" and \
            await get_or_none(client, JOB_GVK, f"{low}-j") is None

    await eventually("the low AppWrapper suspended with its Job deleted", low_suspended)
    await eventually("the high AppWrapper Succeeded",
                     lambda: _phase_is(client, high, "Succeeded"))
    await eventually("the low AppWrapper readmitted and Succeeded",
                     lambda: _phase_is(client, low, "Succeeded"), limit=180)
    # What ran to the end was a new Job: the components were created again.
    second_job = await client.get(JOB_GVK, f"{low}-j", namespace=NS)
    assert second_job["metadata"]["uid"] != first_job["metadata"]["uid"]

    async def second_complete() -> bool:
        # The AppWrapper reads its pods; the Job's own Complete condition may come later.
        return is_true(await get_or_none(client, JOB_GVK, f"{low}-j"), "Complete")

    await eventually("the recreated Job Complete", second_complete)


async def _phase_is(client: RestClient, name: str, expected: str) -> bool:
    return await aw_phase(client, name) == expected


def _token_kubeconfig(info: ClusterInfo, path: Path, user: str, bearer: str) -> Path:
    ca = base64.b64encode(Path(info.ca_cert).read_bytes()).decode()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "limited",
        "clusters": [{"name": "c", "cluster": {"server": info.server,
                                               "certificate-authority-data": ca}}],
        "users": [{"name": user, "user": {"token": bearer}}],
        "contexts": [{"name": "limited", "context": {"cluster": "c", "user": user,
                                                     "namespace": NS}}]}))
    return path


async def _limited_user_client(client: RestClient, info: ClusterInfo, tmp: Path,
                               cleanup: Cleanup, name: str) -> RestClient:
    """A client for ServiceAccount ``name``, allowed to create AppWrappers (and read
    them) but not Jobs or Pods, in ``default``."""
    await client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                         "metadata": {"name": name, "namespace": NS}})
    cleanup.append((SA_GVK, name, NS))
    await client.create({"apiVersion": "v1", "kind": "Secret", "type":
                         "kubernetes.io/service-account-token",
                         "metadata": {"name": f"{name}-token", "namespace": NS,
                                      "annotations": {
                                          "kubernetes.io/service-account.name": name}}})
    cleanup.append((SECRET_GVK, f"{name}-token", NS))
    await client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                         "metadata": {"name": name, "namespace": NS},
                         "rules": [{"apiGroups": ["workload.codeflare.dev"],
                                    "resources": ["appwrappers"],
                                    "verbs": ["create", "get", "list", "delete"]}]})
    cleanup.append((ROLE_GVK, name, NS))
    await client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": name, "namespace": NS},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                     "name": name},
                         "subjects": [{"kind": "ServiceAccount", "name": name,
                                       "namespace": NS}]})
    cleanup.append((ROLE_BINDING_GVK, name, NS))

    async def token() -> str:
        secret = await client.get(SECRET_GVK, f"{name}-token", namespace=NS)
        return base64.b64decode((secret.get("data") or {}).get("token", "")).decode()

    bearer = await eventually("the ServiceAccount token", token, limit=60)
    path = _token_kubeconfig(info, tmp / f"{name}.kubeconfig", name, bearer)
    return await RestClient.from_kubeconfig(str(path))


async def test_rbac_denied_user_is_refused_by_the_sar_check(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup,
        cluster_info: ClusterInfo, tmp_path: Path) -> None:
    """Upstream webhook "userRBACAdmissionCheck": a user who may create AppWrappers but
    not the Job it wraps is refused, naming the component; the admin is not."""
    del manager
    sa = f"aw-limited-{uuid.uuid4().hex[:5]}"
    limited = await _limited_user_client(client, cluster_info, tmp_path, cleanup, sa)
    aw = appwrapper(f"{sa}-aw", "user-queue", [wrapped_job(f"{sa}-j")])
    async with limited:
        with pytest.raises(ApiError) as err:
            await limited.create(aw, dry_run=True)
    message = err.value.message
    assert "spec.components[0].template" in message, message
    assert f"system:serviceaccount:{NS}:{sa}" in message, message
    assert "jobs" in message, message
    # The admin may create what it wraps: accepted (dry run).
    out = await client.create(aw, dry_run=True)
    assert out["spec"]["suspend"] is True


async def test_fifty_appwrappers_all_running_within_a_minute(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """The issue's load check: 50 AppWrappers (one 10m-cpu Job each) created at once are
    all Running within 60 s on the local cluster; the time taken is printed."""
    del manager
    queue = await own_queue(client, cleanup, "aw-load", cpu="4")
    sfx = uuid.uuid4().hex[:4]
    names = [f"aw-load-{sfx}-{i:02d}" for i in range(50)]
    t0 = time.monotonic()
    for name in names:
        await client.create(appwrapper(name, queue.name,
                                       [wrapped_job(f"{name}-j", cpu="10m", run="120s")]))
        cleanup.insert(0, (AW_GVK, name, NS))

    async def all_running() -> bool:
        items = (await client.list(AW_GVK, namespace=NS)).items
        running = sum(1 for aw in items
                      if aw["metadata"]["name"] in names and phase(aw) == "Running")
        return running == len(names)

    await eventually("50 AppWrappers Running", all_running, limit=60)
    took = time.monotonic() - t0
    print(f"\n50 AppWrappers Running {took:.1f}s after the first create")
    assert took < 60


UPSTREAM_SAMPLES = Path(__file__).parent.parent / "unit" / "appwrapper" / "upstream_samples"
CRD_GVK = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")


def _upstream(name: str) -> Object:
    doc: Object = yaml.safe_load((UPSTREAM_SAMPLES / name).read_text())
    doc["metadata"]["namespace"] = NS
    return doc


def _pytorchjob_crd() -> Object:
    """A schemaless stand-in for the Kubeflow training operator's PyTorchJob CRD."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "pytorchjobs.kubeflow.org"},
        "spec": {"group": "kubeflow.org", "scope": "Namespaced",
                 "names": {"plural": "pytorchjobs", "singular": "pytorchjob",
                           "kind": "PyTorchJob", "listKind": "PyTorchJobList"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


async def test_upstream_samples_accepted_as_written_once_their_kinds_are_served(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """Every upstream sample is accepted unchanged (dry run), the PyTorchJob one too while
    its CRD is not installed (as upstream v1.2.2: GitOps may apply the CRD after the
    AppWrapper), and still once it is."""
    del manager
    builtin = ["wrapped-deployment.yaml", "wrapped-failing-job.yaml",
               "wrapped-failing-pod.yaml", "wrapped-gpu-job.yaml", "wrapped-job.yaml",
               "wrapped-pod.yaml"]
    for name in builtin:
        doc = _upstream(name)
        out = await client.create(doc, dry_run=True)
        assert out["spec"]["components"] == doc["spec"]["components"], name
        assert out["spec"]["suspend"] is True, name
    sample = _upstream("wrapped-pytorch-job.yaml")
    assert await get_or_none(client, CRD_GVK, "pytorchjobs.kubeflow.org") is None
    unserved = await client.create(sample, dry_run=True)
    assert unserved["spec"]["components"] == sample["spec"]["components"]
    await client.create(_pytorchjob_crd())
    cleanup.append((CRD_GVK, "pytorchjobs.kubeflow.org", None))

    async def accepted() -> Object | None:
        try:
            return await client.create(sample, dry_run=True)
        except ApiError:
            return None

    out = await eventually("the PyTorchJob sample accepted once its CRD is served", accepted,
                           limit=60)
    assert out["spec"]["components"] == sample["spec"]["components"]
