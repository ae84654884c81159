"""A hostile tenant against what Kueue admitted, on the real control plane (issue #27,
findings 1, 2, 3 and 5, on JobFlow, AppWrapper and DaemonJob).

The tenant is a ServiceAccount with the Kubernetes ``edit`` ClusterRole bound in one
namespace (a RoleBinding): what any user who owns jobs in a namespace has. Its client
impersonates it (``Impersonate-User``), so the API server authorizes each request as the
ServiceAccount and our webhooks see its userInfo. ``edit`` covers this project's kinds
through the editor ClusterRoles ``deploy render`` ships (``user-roles.yaml``, labelled
``aggregate-to-edit``), which the fixture applies as rendered.

Our manager runs in-process with the admin identity (as the other cluster tests), the
real Kueue admits, kwok runs the pods. Each test asserts what the tenant can no longer
do; each fails when the protection it covers is removed:

1. the admission a JobFlow or an AppWrapper carries cannot be rewritten (the validating
   webhooks refuse it, naming the field), while the tenant may still edit the rest;
2. a JobFlow step's Job scaled past its admission is set back by our controller;
3. a Job of the tenant's own naming an admitted JobFlow as its controller is suspended
   and gets no Workload (no free ride on the JobFlow's quota);
4. a JobTemplate edited after admission does not reach the later step of that admission;
5. a DaemonJob's admission and its run's node list cannot be rewritten, a node Job scaled
   past its admission is set back, and a Job claiming the DaemonJob is suspended.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from integrations.daemonjob import DAEMONJOB_GVK, NODE_GVK, NODES_ANNOTATION
from integrations.daemonjob.api import POD_SETS_INFO_ANNOTATION as DJ_POD_SETS_INFO
from integrations.deploy import DEFAULT_NAMESPACE, render
from integrations.deploy.render import SERVICE_ACCOUNT
from integrations.jobflow import JOBFLOW_GVK, JOBTEMPLATE_GVK
from integrations.jobflow.admission import ADMITTED_TEMPLATES_ANNOTATION
from integrations.jobflow.api import POD_SETS_INFO_ANNOTATION, job_status_key
from integrations.manager import ExternalFrameworkManager
from jobframework.admittedstate import own_username, service_account_username
from jobframework.childguard import (
    ADMITTED_SIZE_RESTORED_REASON,
    FOREIGN_JOB_SUSPENDED_REASON,
)
from jobframework.runtime.client.config import load_kubeconfig
from jobframework.runtime.client.interface import PropagationPolicy
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.cluster import COMPLETE_DELAY_ANNOTATION, ClusterInfo

from .helpers import (
    JOB_GVK,
    NS,
    POD_GVK,
    Cleanup,
    Queue,
    eventually,
    get_or_none,
    is_true,
    own_queue,
    workload_of,
)
from .test_appwrapper_cluster import AW_GVK, appwrapper, phase, wrapped_job
from .test_daemonjob_cluster import children, daemonjob, node_phases
from .test_jobflow_cluster import jobflow, state_of, step

pytestmark = pytest.mark.cluster

SA_GVK = GVK("", "v1", "ServiceAccount")
CLUSTER_ROLE_GVK = GVK("rbac.authorization.k8s.io", "v1", "ClusterRole")
ROLE_BINDING_GVK = GVK("rbac.authorization.k8s.io", "v1", "RoleBinding")
EVENT_GVK = GVK("events.k8s.io", "v1", "Event")
VAP_GVK = GVK("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy")
VAP_BINDING_GVK = GVK("admissionregistration.k8s.io", "v1",
                      "ValidatingAdmissionPolicyBinding")
#: This project's kinds, as the tenant's ``edit`` role gets them.
TENANT_KINDS = {"api.practice.com": ["jobflows", "jobtemplates", "daemonjobs"],
                "workload.codeflare.dev": ["appwrappers"]}


# -- the tenant ------------------------------------------------------------------------------


async def _edit_covers_our_kinds(client: RestClient) -> bool:
    """Whether ``edit`` lets a namespace's editors create our kinds and ``view`` lets its
    viewers read them (the shipped roles aggregated)."""
    for role, verb in (("edit", "create"), ("view", "get")):
        granted = {(g, r) for rule in (await client.get(CLUSTER_ROLE_GVK, role)).get("rules")
                   or [] if verb in (rule.get("verbs") or [])
                   for g in rule.get("apiGroups") or [] for r in rule.get("resources") or []}
        if not all((g, r) in granted for g, kinds in TENANT_KINDS.items() for r in kinds):
            return False
    return True


@pytest.fixture
async def tenant(client: RestClient, cluster_info: ClusterInfo,
                 cleanup: Cleanup) -> AsyncIterator[RestClient]:
    """A client impersonating a ServiceAccount that holds ``edit`` in :data:`NS` only."""
    name = f"tenant-{uuid.uuid4().hex[:6]}"
    for shipped in render(("jobflow", "daemonjob", "appwrapper"))["user-roles.yaml"]:
        try:
            await client.create(shipped)
        except ApiError as err:
            if err.code != 409:
                raise
        cleanup.append((CLUSTER_ROLE_GVK, shipped["metadata"]["name"], None))
    await client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                         "metadata": {"name": name, "namespace": NS}})
    cleanup.append((SA_GVK, name, NS))
    await client.create({
        "apiVersion": ROLE_BINDING_GVK.api_version, "kind": ROLE_BINDING_GVK.kind,
        "metadata": {"name": name, "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}]})
    cleanup.append((ROLE_BINDING_GVK, name, NS))
    await eventually("the edit ClusterRole to aggregate our kinds",
                     lambda: _edit_covers_our_kinds(client), 60)
    username = service_account_username(NS, name)
    creds = await load_kubeconfig(cluster_info.kubeconfig)
    api = ApiClient(configuration=creds.configuration, header_name="Impersonate-User",
                    header_value=username)
    async with RestClient(api, credentials=creds, owns_api_client=True) as c:
        # The API server authenticates it as the ServiceAccount, not as the admin.
        assert await own_username(c) == username
        yield c


@pytest.fixture
async def manager(client: RestClient) -> AsyncIterator[ExternalFrameworkManager]:
    async with ExternalFrameworkManager(client) as mgr:
        yield mgr


@pytest.fixture
async def queue(client: RestClient, cleanup: Cleanup) -> Queue:
    """A ClusterQueue (one flavor, ``on-demand``) and a LocalQueue in :data:`NS`."""
    return await own_queue(client, cleanup, "tenant", cpu="8")


# -- helpers ---------------------------------------------------------------------------------


async def admitted_jobflow(client: RestClient, name: str) -> Object | None:
    """The JobFlow once Kueue admitted it and the adapter stored the admission on it."""
    jf = await client.get(JOBFLOW_GVK, name, namespace=NS)
    wl = await workload_of(client, jf)
    if not is_true(wl, "Admitted"):
        return None
    annotations = jf["metadata"].get("annotations") or {}
    return jf if POD_SETS_INFO_ANNOTATION in annotations else None


async def events_for(client: RestClient, obj: Object, reason: str) -> list[Object]:
    """The events of ``reason`` regarding ``obj`` (by UID)."""
    uid = obj["metadata"]["uid"]
    return [e for e in (await client.list(EVENT_GVK, namespace=NS)).items
            if e.get("reason") == reason and (e.get("regarding") or {}).get("uid") == uid]


def job_pods(name: str) -> str:
    return f"batch.kubernetes.io/job-name={name}"


def claiming_job(name: str, parent: Object) -> Object:
    """The tenant's own 3-pod Job, no queue name, naming ``parent`` as its controller:
    Kueue's child rule would let it run on the parent's admission. (blockOwnerDeletion
    would need the parent's finalizers.)"""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "ownerReferences": [{
            "apiVersion": parent["apiVersion"], "kind": parent["kind"],
            "name": parent["metadata"]["name"], "uid": parent["metadata"]["uid"],
            "controller": True}]},
        "spec": {"parallelism": 3, "completions": 3, "backoffLimit": 0, "template": {
            "metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: "60s"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "registry.example/fake:1",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}},
    }


async def parallelism_is(client: RestClient, name: str, parallelism: int) -> bool:
    """Whether the Job ``name`` is back at ``parallelism``."""
    job = await client.get(JOB_GVK, name, namespace=NS)
    return bool(job["spec"]["parallelism"] == parallelism)


async def job_suspended(client: RestClient, name: str) -> bool:
    return (await client.get(JOB_GVK, name, namespace=NS))["spec"].get("suspend") is True


def elsewhere(infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tenant's rewrite of stored pod-set infos: another flavor's nodes, and a
    toleration of every taint."""
    out = copy.deepcopy(infos)
    for info in out:
        info["nodeSelector"] = {"instance-type": "spot"}
        info["tolerations"] = [{"operator": "Exists"}]
    return out


# -- finding 1 -------------------------------------------------------------------------------


async def test_tenant_cannot_rewrite_the_admission_a_jobflow_or_appwrapper_carries(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup,
        queue: Queue, tenant: RestClient) -> None:
    del manager
    sfx = uuid.uuid4().hex[:5]
    flow_name, aw_name = f"t-adm-{sfx}", f"t-adm-aw-{sfx}"
    await tenant.create(jobflow(flow_name, queue.name, [step("a", cpu="500m", run="60s")]))
    cleanup.insert(0, (JOBFLOW_GVK, flow_name, NS))
    await tenant.create(appwrapper(aw_name, queue.name,
                                   [wrapped_job(f"{aw_name}-j", cpu="250m", run="60s")]))
    cleanup.insert(0, (AW_GVK, aw_name, NS))

    jf = await eventually("the JobFlow admitted", lambda: admitted_jobflow(client, flow_name))
    stored = jf["metadata"]["annotations"][POD_SETS_INFO_ANNOTATION]
    assert json.loads(stored)[0]["nodeSelector"] == {"instance-type": "on-demand"}
    rewritten = json.dumps(elsewhere(json.loads(stored)))
    with pytest.raises(ApiError) as refused:
        await tenant.patch(JOBFLOW_GVK, flow_name, {"metadata": {"annotations": {
            POD_SETS_INFO_ANNOTATION: rewritten}}}, namespace=NS)
    assert refused.value.code == 403, refused.value.message
    assert "denied the request" in refused.value.message  # the webhook's, not RBAC's
    assert f"metadata.annotations[{POD_SETS_INFO_ANNOTATION}]: Forbidden" \
        in refused.value.message, refused.value.message
    # Removing it is the same change (the next admission is Kueue's to store).
    with pytest.raises(ApiError) as dropped:
        await tenant.patch(JOBFLOW_GVK, flow_name, {"metadata": {"annotations": {
            POD_SETS_INFO_ANNOTATION: None}}}, namespace=NS)
    assert f"metadata.annotations[{POD_SETS_INFO_ANNOTATION}]: Forbidden" \
        in dropped.value.message, dropped.value.message
    # The tenant may edit the rest of its JobFlow: the refusals are about the admission.
    await tenant.patch(JOBFLOW_GVK, flow_name,
                       {"metadata": {"annotations": {"tenant.example/note": "mine"}}},
                       namespace=NS)
    after = await client.get(JOBFLOW_GVK, flow_name, namespace=NS)
    assert after["metadata"]["annotations"][POD_SETS_INFO_ANNOTATION] == stored
    assert after["metadata"]["annotations"]["tenant.example/note"] == "mine"

    async def aw_admitted() -> Object | None:
        aw = await client.get(AW_GVK, aw_name, namespace=NS)
        infos = aw["spec"]["components"][0].get("podSetInfos")
        return aw if phase(aw) == "Running" and infos else None

    aw = await eventually("the AppWrapper running", aw_admitted)
    components = copy.deepcopy(aw["spec"]["components"])
    admitted_infos = components[0]["podSetInfos"]
    assert admitted_infos[0]["nodeSelector"] == {"instance-type": "on-demand"}
    components[0]["podSetInfos"] = elsewhere(admitted_infos)
    with pytest.raises(ApiError) as aw_refused:
        await tenant.patch(AW_GVK, aw_name, {"spec": {"components": components}},
                           namespace=NS)
    assert aw_refused.value.code == 403, aw_refused.value.message
    assert "denied the request" in aw_refused.value.message
    assert "spec.components[0].podSetInfos: Forbidden" in aw_refused.value.message, \
        aw_refused.value.message
    await tenant.patch(AW_GVK, aw_name,
                       {"metadata": {"annotations": {"tenant.example/note": "mine"}}},
                       namespace=NS)
    aw_after = await client.get(AW_GVK, aw_name, namespace=NS)
    assert aw_after["spec"]["components"][0]["podSetInfos"] == admitted_infos

    async def aw_pods() -> list[Object]:
        return (await client.list(POD_GVK, namespace=NS,
                                  label_selector=job_pods(f"{aw_name}-j"))).items

    pods = await eventually("the wrapped Job's pod", aw_pods)
    assert all(p["spec"].get("nodeSelector", {}).get("instance-type") == "on-demand"
               for p in pods)


# -- finding 2 -------------------------------------------------------------------------------


async def test_a_step_job_scaled_past_its_admission_is_set_back(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup,
        queue: Queue, tenant: RestClient) -> None:
    del manager
    name = f"t-scale-{uuid.uuid4().hex[:5]}"
    # One pod at a time, four in all: a larger parallelism would run more at once.
    a = step("a", cpu="250m", run="15s")
    a["jobTemplate"]["completions"] = 4
    await tenant.create(jobflow(name, queue.name, [a]))
    cleanup.insert(0, (JOBFLOW_GVK, name, NS))
    jf = await eventually("the JobFlow admitted", lambda: admitted_jobflow(client, name))

    async def running_job() -> Object | None:
        job = await get_or_none(client, JOB_GVK, f"{name}-a")
        return job if job is not None and (job.get("status") or {}).get("active") else None

    await eventually("the step's Job running", running_job)
    # The tenant's edit role allows it: the API server and Kueue take it.
    scaled = await tenant.patch(JOB_GVK, f"{name}-a", {"spec": {"parallelism": 50}},
                                namespace=NS)
    assert scaled["spec"]["parallelism"] == 50

    await eventually("the Job's parallelism set back to the admitted 1",
                     lambda: parallelism_is(client, f"{name}-a", 1))
    events = await eventually("the AdmittedSizeRestored event on the JobFlow",
                              lambda: events_for(client, jf, ADMITTED_SIZE_RESTORED_REASON))
    assert f"Job {name}-a" in events[0]["note"] and "set back to 1" in events[0]["note"]

    async def one_at_a_time() -> bool:
        job = await client.get(JOB_GVK, f"{name}-a", namespace=NS)
        return int((job.get("status") or {}).get("active") or 0) <= 1

    await eventually("no more than the admitted pod active", one_at_a_time)
    wl = await workload_of(client, jf)
    assert wl is not None and is_true(wl, "Admitted")
    assert wl["spec"]["podSets"][0]["count"] == 1


# -- finding 3 -------------------------------------------------------------------------------


async def test_a_tenant_job_claiming_an_admitted_jobflow_is_suspended(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup,
        queue: Queue, tenant: RestClient) -> None:
    del manager
    sfx = uuid.uuid4().hex[:5]
    name, foreign = f"t-claim-{sfx}", f"t-claim-{sfx}-extra"
    await tenant.create(jobflow(name, queue.name, [step("a", cpu="250m", run="20s")]))
    cleanup.insert(0, (JOBFLOW_GVK, name, NS))
    jf = await eventually("the JobFlow admitted", lambda: admitted_jobflow(client, name))
    job = await tenant.create(claiming_job(foreign, jf))
    cleanup.insert(0, (JOB_GVK, foreign, NS))

    await eventually("the claiming Job suspended", lambda: job_suspended(client, foreign))
    on_job = await eventually("the ForeignJobSuspended event on the Job",
                              lambda: events_for(client, job, FOREIGN_JOB_SUSPENDED_REASON))
    assert f"JobFlow {name}" in on_job[0]["note"]
    await eventually("the ForeignJobSuspended event on the JobFlow",
                     lambda: events_for(client, jf, FOREIGN_JOB_SUSPENDED_REASON))
    # The JobFlow runs its own step to the end; the claiming Job stays stopped, with no
    # Workload of its own, and is not one of the flow's Jobs.
    await eventually("the JobFlow Succeed", lambda: _state_is(client, name, "Succeed"))
    current = await client.get(JOB_GVK, foreign, namespace=NS)
    assert current["spec"]["suspend"] is True
    assert not (current.get("status") or {}).get("active"), current["status"]
    assert not (current.get("status") or {}).get("succeeded"), current["status"]
    assert await workload_of(client, current) is None
    done = await client.get(JOBFLOW_GVK, name, namespace=NS)
    assert list(done["status"]["jobStatusList"]) == [job_status_key(f"{name}-a", NS)]


async def _state_is(client: RestClient, name: str, state: str) -> bool:
    return state_of(await client.get(JOBFLOW_GVK, name, namespace=NS)) == state


# -- finding 5 -------------------------------------------------------------------------------


async def test_a_jobtemplate_edited_after_admission_does_not_resize_a_later_step(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup,
        queue: Queue, tenant: RestClient) -> None:
    del manager
    sfx = uuid.uuid4().hex[:5]
    name, template = f"t-tmpl-{sfx}", f"t-tmpl-{sfx}"
    await tenant.create({
        "apiVersion": JOBTEMPLATE_GVK.api_version, "kind": JOBTEMPLATE_GVK.kind,
        "metadata": {"name": template, "namespace": NS},
        "spec": {"jobTemplate": {"parallelism": 1, "template": {
            "metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: "2s"}},
            "spec": {"containers": [{
                "name": "main", "image": "registry.example/fake:1",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}})
    cleanup.append((JOBTEMPLATE_GVK, template, NS))
    flows = [step("a", cpu="250m", run="15s"),
             {"name": "b", "dependencies": ["a"], "jobTemplateRef": template}]
    await tenant.create(jobflow(name, queue.name, flows))
    cleanup.insert(0, (JOBFLOW_GVK, name, NS))
    jf = await eventually("the JobFlow admitted", lambda: admitted_jobflow(client, name))
    assert ADMITTED_TEMPLATES_ANNOTATION in jf["metadata"]["annotations"]
    wl = await workload_of(client, jf)
    assert wl is not None
    assert {p["name"]: p["count"] for p in wl["spec"]["podSets"]} == {"a": 1, "b": 1}
    # b has not started (a runs 15 s): its Job will be created after the edit.
    assert await get_or_none(client, JOB_GVK, f"{name}-b") is None
    await tenant.patch(JOBTEMPLATE_GVK, template,
                       {"spec": {"jobTemplate": {"parallelism": 50}}}, namespace=NS)
    edited = await client.get(JOBTEMPLATE_GVK, template, namespace=NS)
    assert edited["spec"]["jobTemplate"]["parallelism"] == 50

    await eventually("the JobFlow Succeed", lambda: _state_is(client, name, "Succeed"))
    job = await client.get(JOB_GVK, f"{name}-b", namespace=NS)
    assert job["spec"]["parallelism"] == 1
    pods = (await client.list(POD_GVK, namespace=NS, label_selector=job_pods(f"{name}-b"))).items
    assert len(pods) == 1


# -- DaemonJob: findings 1, 2, 3 and 5 ---------------------------------------------------------


async def admitted_daemonjob(client: RestClient, name: str) -> Object | None:
    """The DaemonJob once Kueue admitted it and its node Jobs run."""
    dj = await client.get(DAEMONJOB_GVK, name, namespace=NS)
    wl = await workload_of(client, dj)
    annotations = dj["metadata"].get("annotations") or {}
    if not is_true(wl, "Admitted") or DJ_POD_SETS_INFO not in annotations:
        return None
    return dj if set(node_phases(dj).values()) == {"Running"} else None


async def test_a_tenant_cannot_steer_resize_or_claim_an_admitted_daemonjob(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup,
        queue: Queue, tenant: RestClient) -> None:
    del manager
    sfx = uuid.uuid4().hex[:5]
    name, foreign = f"t-dj-{sfx}", f"t-dj-{sfx}-extra"
    # Four pods per node, one at a time: a larger parallelism would run more at once.
    await tenant.create(daemonjob(name, queue.name, cpu="250m", run="30s", completions=4,
                                  parallelism=1))
    cleanup.insert(0, (DAEMONJOB_GVK, name, NS))
    dj = await eventually("the DaemonJob admitted and running",
                          lambda: admitted_daemonjob(client, name))
    annotations = dj["metadata"]["annotations"]
    run = json.loads(annotations[NODES_ANNOTATION])
    wl = await workload_of(client, dj)
    assert wl is not None and wl["spec"]["podSets"][0]["count"] == len(run)
    jobs = await children(client, name)
    assert set(jobs) == set(run)

    # Finding 1: the stored admission is not the tenant's to rewrite or drop.
    infos = json.loads(annotations[DJ_POD_SETS_INFO])
    assert infos[0]["nodeSelector"] == {"instance-type": "on-demand"}
    for value in (json.dumps(elsewhere(infos)), None):
        with pytest.raises(ApiError) as refused:
            await tenant.patch(DAEMONJOB_GVK, name, {"metadata": {"annotations": {
                DJ_POD_SETS_INFO: value}}}, namespace=NS)
        assert refused.value.code == 403, refused.value.message
        assert "denied the request" in refused.value.message
        assert f"metadata.annotations[{DJ_POD_SETS_INFO}]: Forbidden" \
            in refused.value.message, refused.value.message

    # Finding 5: nor is the run's node list (the Workload's count was computed from it).
    spot = [n["metadata"]["name"] for n in (await client.list(
        NODE_GVK, label_selector="instance-type=spot")).items]
    assert spot and not set(spot) & set(run)
    with pytest.raises(ApiError) as widened:
        await tenant.patch(DAEMONJOB_GVK, name, {"metadata": {"annotations": {
            NODES_ANNOTATION: json.dumps(sorted(run + spot))}}}, namespace=NS)
    assert widened.value.code == 403, widened.value.message
    assert f"metadata.annotations[{NODES_ANNOTATION}]: Forbidden" \
        in widened.value.message, widened.value.message
    await tenant.patch(DAEMONJOB_GVK, name,
                       {"metadata": {"annotations": {"tenant.example/note": "mine"}}},
                       namespace=NS)

    # Finding 2: a node Job scaled past its admission is set back.
    node = sorted(run)[0]
    job_name = jobs[node]["metadata"]["name"]
    scaled = await tenant.patch(JOB_GVK, job_name, {"spec": {"parallelism": 50}},
                                namespace=NS)
    assert scaled["spec"]["parallelism"] == 50

    await eventually("the node Job's parallelism set back to the admitted 1",
                     lambda: parallelism_is(client, job_name, 1))
    events = await eventually("the AdmittedSizeRestored event on the DaemonJob",
                              lambda: events_for(client, dj, ADMITTED_SIZE_RESTORED_REASON))
    assert f"Job {job_name}" in events[0]["note"] and "set back to 1" in events[0]["note"]

    # Finding 3: a Job of the tenant's naming the DaemonJob as its controller is stopped.
    job = await tenant.create(claiming_job(foreign, dj))
    cleanup.insert(0, (JOB_GVK, foreign, NS))

    await eventually("the claiming Job suspended", lambda: job_suspended(client, foreign))
    on_job = await eventually("the ForeignJobSuspended event on the Job",
                              lambda: events_for(client, job, FOREIGN_JOB_SUSPENDED_REASON))
    assert f"DaemonJob {name}" in on_job[0]["note"]

    # What runs is what was admitted: one pod per node of the run, on the run's nodes.
    after = await client.get(DAEMONJOB_GVK, name, namespace=NS)
    assert json.loads(after["metadata"]["annotations"][NODES_ANNOTATION]) == run
    assert set(await children(client, name)) == set(run)

    async def one_pod_per_node() -> bool:
        pods = [p for p in (await client.list(POD_GVK, namespace=NS)).items
                if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name")
                in {j["metadata"]["name"] for j in jobs.values()}
                and not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") in ("Pending", "Running")]
        return len(pods) == len(run) and {p["spec"].get("nodeName") for p in pods} == set(run)

    await eventually("one pod per node of the run", one_pod_per_node)
    current = await client.get(JOB_GVK, foreign, namespace=NS)
    assert not (current.get("status") or {}).get("active"), current["status"]
    assert await workload_of(client, current) is None


# -- the admission policy of docs/jobflow.md -------------------------------------------------


def documented_children_policy(manager_username: str) -> list[Object]:
    """The ValidatingAdmissionPolicy and its binding as docs/jobflow.md gives them, with
    ``manager_username`` for the ServiceAccount of ``config/default`` it names."""
    text = (Path(__file__).parents[2] / "docs" / "jobflow.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S)
                 if "kind: ValidatingAdmissionPolicy" in b)
    shipped = f"system:serviceaccount:{DEFAULT_NAMESPACE}:{SERVICE_ACCOUNT}"
    assert f"'{shipped}'" in block, "the policy names the shipped manager's ServiceAccount"
    return [o for o in yaml.safe_load_all(block.replace(shipped, manager_username)) if o]


async def test_the_documented_policy_refuses_a_tenants_job_named_like_a_later_step(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup,
        queue: Queue, tenant: RestClient) -> None:
    del manager
    policy, binding = documented_children_policy(await own_username(client))
    suffix = uuid.uuid4().hex[:5]
    for obj in (policy, binding):
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-{suffix}"
    binding["spec"]["policyName"] = policy["metadata"]["name"]
    await client.create(policy)
    cleanup.append((VAP_GVK, policy["metadata"]["name"], None))
    await client.create(binding)
    cleanup.append((VAP_BINDING_GVK, binding["metadata"]["name"], None))

    name = f"t-vap-{suffix}"
    await tenant.create(jobflow(name, queue.name, [step("a", cpu="250m", run="20s"),
                                                   step("b", cpu="250m", deps=("a",))]))
    cleanup.insert(0, (JOBFLOW_GVK, name, NS))
    jf = await eventually("the JobFlow admitted", lambda: admitted_jobflow(client, name))
    assert await get_or_none(client, JOB_GVK, f"{name}-b") is None
    spoof: Object = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"{name}-b", "namespace": NS, "ownerReferences": [{
            "apiVersion": JOBFLOW_GVK.api_version, "kind": JOBFLOW_GVK.kind,
            "name": name, "uid": jf["metadata"]["uid"], "controller": True}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "registry.example/tenant:1"}]}}}}

    async def refused() -> str | None:
        # A new policy takes effect once the API server has loaded it: until then a
        # create may pass, and is undone.
        try:
            await tenant.create(copy.deepcopy(spoof))
        except ApiError as err:
            return err.message if err.code in (403, 422) else None
        await client.delete(JOB_GVK, f"{name}-b", namespace=NS,
                            propagation_policy=PropagationPolicy.BACKGROUND)
        await eventually("the spoof deleted",
                         lambda: _gone(client, JOB_GVK, f"{name}-b"))
        return None

    message = await eventually("the tenant's step-named Job refused", refused)
    assert "only the kueue-jobframework manager creates Jobs controlled by its kinds" \
        in message, message
    # The manager's own Jobs pass the same policy: the flow runs both steps to the end.
    await eventually("the JobFlow Succeed", lambda: _state_is(client, name, "Succeed"))
    b = await client.get(JOB_GVK, f"{name}-b", namespace=NS)
    assert b["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example/fake:1"


async def _gone(client: RestClient, gvk: GVK, name: str) -> bool:
    return await get_or_none(client, gvk, name) is None
