"""DaemonJob through the real Kueue manager on the local cluster.

Our external-framework manager runs in-process (DaemonJob controller, webhooks over
loopback TLS, the generic reconciler); the real Go Kueue admits, preempts and accounts
quota; the real scheduler places the pinned pods; kwok runs them on its fake nodes
(``kwok-on-demand-0/1`` and ``kwok-spot-0/1``, labelled ``instance-type``, which the
``on-demand`` and ``spot`` ResourceFlavors select).

Everything polls with generous limits; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from integrations.daemonjob import (
    DAEMONJOB_GVK,
    DAEMONJOB_NAME_LABEL,
    INJECTED_INFO_ANNOTATION,
    NODE_GVK,
    NODE_LABEL,
    NODES_ANNOTATION,
    eligible_nodes,
    load_samples,
)
from integrations.manager import ExternalFrameworkManager
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.cluster import COMPLETE_DELAY_ANNOTATION

from .helpers import (
    JOB_GVK,
    NS,
    POD_GVK,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    WPC_GVK,
    Cleanup,
    condition,
    controller_uid,
    eventually,
    get_or_none,
    is_true,
    own_queue,
    workload_of,
)

pytestmark = pytest.mark.cluster

FLAVOR_LABEL = "instance-type"


def daemonjob(name: str, queue: str, *, cpu: str = "1", run: str = "2s",
              flavor: str | None = "on-demand", priority: str | None = None,
              **spec: Any) -> Object:
    """A DaemonJob whose pods request ``cpu`` and run ``run`` on kwok, on the nodes of
    ``flavor`` (all nodes when None)."""
    labels = {QUEUE_LABEL: queue}
    if priority:
        labels[PRIORITY_LABEL] = priority
    pod: dict[str, Any] = {"containers": [{
        "name": "main", "image": "registry.example/fake:1",
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    if flavor:
        pod["nodeSelector"] = {FLAVOR_LABEL: flavor}
    return {"apiVersion": DAEMONJOB_GVK.api_version, "kind": DAEMONJOB_GVK.kind,
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"template": {"metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: run}},
                                  "spec": pod}, **spec}}


async def get_dj(client: RestClient, name: str) -> Object:
    return await client.get(DAEMONJOB_GVK, name, namespace=NS)


def state_of(dj: Object | None) -> str:
    return str(((dj or {}).get("status") or {}).get("state") or "")


def node_phases(dj: Object) -> dict[str, str]:
    return {str(n["name"]): str(n["phase"]) for n in (dj.get("status") or {}).get("nodes")
            or []}


async def children(client: RestClient, name: str) -> dict[str, Object]:
    """node label → Job, for the DaemonJob ``name``."""
    jobs = await client.list(JOB_GVK, namespace=NS,
                             label_selector=f"{DAEMONJOB_NAME_LABEL}={name}")
    return {j["metadata"]["labels"][NODE_LABEL]: j for j in jobs.items}


async def ready_nodes(client: RestClient) -> dict[str, Object]:
    out = {}
    for node in (await client.list(NODE_GVK)).items:
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (node.get("status") or {}).get("conditions") or [])
        if ready and not (node.get("spec") or {}).get("unschedulable"):
            out[node["metadata"]["name"]] = node
    return out


def flavor_nodes(nodes: dict[str, Object], flavor: str) -> set[str]:
    return {n for n, obj in nodes.items()
            if (obj["metadata"].get("labels") or {}).get(FLAVOR_LABEL) == flavor}


@pytest.fixture
async def manager(client: RestClient) -> AsyncIterator[ExternalFrameworkManager]:
    async with ExternalFrameworkManager(client) as mgr:
        yield mgr


async def test_seed_sample_runs_on_the_admitted_flavors_nodes_and_succeeds(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    del manager
    dj = copy.deepcopy(load_samples()["example.yaml"][0])
    dj["metadata"].update(namespace=NS, labels={QUEUE_LABEL: "user-queue"})
    created = await client.create(dj)
    name = created["metadata"]["name"]
    cleanup.insert(0, (DAEMONJOB_GVK, name, NS))
    # Queued: Kueue's base webhook suspended it; the sample's OnFailure is kept.
    assert created["spec"]["suspend"] is True
    assert created["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"

    async def finished() -> Object | None:
        current = await get_dj(client, name)
        return current if state_of(current) in ("Succeed", "Failed") else None

    done = await eventually("the sample DaemonJob to finish", finished)
    assert state_of(done) == "Succeed", done["status"]
    wl = await finished_workload(client, done)
    assert condition(wl, "Finished")["reason"] == "Succeeded"
    (pod_set,) = wl["spec"]["podSets"]
    phases = node_phases(done)
    # One Workload for the whole DaemonJob: one pod per node of the run, which is every
    # Ready node (the sample excludes node1 and node2, which do not exist here).
    nodes = await ready_nodes(client)
    assert set(phases) == set(nodes) and len(nodes) >= 4
    assert pod_set["name"] == "main" and pod_set["count"] == len(nodes)
    # The sample requests no resources, so Kueue assigns no flavor: every node runs.
    assert not wl["status"]["admission"]["podSetAssignments"][0].get("flavors")
    assert set(phases.values()) == {"Succeeded"}, phases
    jobs = await children(client, name)
    assert set(jobs) == set(nodes)
    for node, job in jobs.items():
        assert job["metadata"]["name"] == f"{name}-{node}"
        assert controller_uid(job) == done["metadata"]["uid"]
        assert is_true(job, "Complete")
        assert QUEUE_LABEL not in job["metadata"]["labels"]
        # Globals merged; pinned to its node by node affinity, placed by the scheduler.
        tpl = job["spec"]["template"]
        assert tpl["metadata"]["labels"]["key1"] == "value1"
        assert {"name": "FOO", "value": "bar"} in tpl["spec"]["containers"][0]["env"]
        assert "nodeName" not in tpl["spec"]
        pods = (await client.list(POD_GVK, namespace=NS, label_selector=(
            f"batch.kubernetes.io/job-name={job['metadata']['name']}"))).items
        assert pods and {p["spec"]["nodeName"] for p in pods} == {node}
    # The printer columns read these.
    assert (done["status"]["desired"], done["status"]["succeeded"]) == (len(nodes),
                                                                          len(nodes))


async def test_nodes_outside_the_admitted_flavor_get_no_job_and_give_their_pods_back(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    del manager
    suffix = uuid.uuid4().hex[:6]
    # The queue's one flavor is on-demand; the DaemonJob selects every node.
    queue = await own_queue(client, cleanup, "dj-flavor", cpu="8")
    name = f"dj-all-nodes-{suffix}"
    dj = await client.create(daemonjob(name, queue.name, flavor=None, run="4s"))
    cleanup.insert(0, (DAEMONJOB_GVK, name, NS))
    nodes = await ready_nodes(client)
    on_demand = flavor_nodes(nodes, "on-demand")
    others = set(nodes) - on_demand
    assert on_demand and others

    async def reclaimed() -> Object | None:
        wl = await workload_of(client, dj)
        pods = {p["name"]: p["count"] for p in
                ((wl or {}).get("status") or {}).get("reclaimablePods") or []}
        return wl if is_true(wl, "Admitted") and pods.get("main") == len(others) else None

    # While the on-demand nodes still run, the others' pods are already given back.
    wl = await eventually("the other nodes' pods reclaimable", reclaimed)
    assert wl["spec"]["podSets"][0]["count"] == len(nodes)
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == "on-demand"
    await eventually("the DaemonJob Succeed", lambda: _state_is(client, name, "Succeed"))
    done = await get_dj(client, name)
    phases = node_phases(done)
    assert {n for n, p in phases.items() if p == "Succeeded"} == on_demand, phases
    assert {n for n, p in phases.items() if p == "OutsideFlavor"} == others, phases
    jobs = await children(client, name)
    assert set(jobs) == on_demand
    for job in jobs.values():
        assert job["spec"]["template"]["spec"]["nodeSelector"] == {FLAVOR_LABEL: "on-demand"}


async def test_daemonjob_waits_for_quota_then_runs(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    del manager
    suffix = uuid.uuid4().hex[:6]
    queue = await own_queue(client, cleanup, "dj-wait", cpu="2")
    # The two on-demand nodes, one cpu each: the whole queue. A first one holds it a while.
    first = await client.create(daemonjob(f"dj-first-{suffix}", queue.name, run="6s"))
    cleanup.insert(0, (DAEMONJOB_GVK, first["metadata"]["name"], NS))
    await eventually("the first DaemonJob admitted",
                     lambda: _admitted(client, first))
    second = await client.create(daemonjob(f"dj-second-{suffix}", queue.name, run="2s"))
    second_name = second["metadata"]["name"]
    cleanup.insert(0, (DAEMONJOB_GVK, second_name, NS))

    async def pending() -> bool:
        wl = await workload_of(client, second)
        return wl is not None and condition(wl, "QuotaReserved") is not None \
            and not is_true(wl, "QuotaReserved")

    await eventually("the second Workload pending for quota", pending)
    current = await get_dj(client, second_name)
    assert current["spec"]["suspend"] is True
    assert await children(client, second_name) == {}
    assert state_of(current) == "Pending"
    assert NODES_ANNOTATION not in (current["metadata"].get("annotations") or {})

    await eventually("the second DaemonJob admitted", lambda: _admitted(client, second))
    # It got the quota only once the first had finished.
    assert state_of(await get_dj(client, first["metadata"]["name"])) == "Succeed"
    await eventually("the second DaemonJob Succeed",
                     lambda: _state_is(client, second_name, "Succeed"))
    nodes = flavor_nodes(await ready_nodes(client), "on-demand")
    assert set(await children(client, second_name)) == nodes


async def test_preempted_daemonjob_is_suspended_and_resumes_the_same_jobs(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    del manager
    suffix = uuid.uuid4().hex[:6]
    low, high = f"dj-low-{suffix}", f"dj-high-{suffix}"
    for wpc, value in ((low, 100), (high, 1000)):
        await client.create({"apiVersion": WPC_GVK.api_version, "kind": WPC_GVK.kind,
                             "metadata": {"name": wpc}, "value": value})
        cleanup.append((WPC_GVK, wpc, None))
    queue = await own_queue(client, cleanup, "dj-preempt", cpu="3",
                            preemption={"withinClusterQueue": "LowerPriority"})
    name = f"dj-preempted-{suffix}"
    dj = await client.create(daemonjob(name, queue.name, run="20s", priority=low))
    cleanup.insert(0, (DAEMONJOB_GVK, name, NS))

    async def all_running() -> dict[str, Object] | None:
        current = await get_dj(client, name)
        jobs = await children(client, name)
        phases = node_phases(current)
        return jobs if phases and set(phases.values()) == {"Running"} else None

    jobs_before = await eventually("every node Job running", all_running)
    uids = {n: j["metadata"]["uid"] for n, j in jobs_before.items()}
    assert set(uids) == flavor_nodes(await ready_nodes(client), "on-demand")

    # A high-priority batch Job needing 2 of the 3 cpu: only preempting the DaemonJob
    # (which holds 2) makes room.
    big = await client.create({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"dj-preemptor-{suffix}", "namespace": NS,
                     "labels": {QUEUE_LABEL: queue.name, PRIORITY_LABEL: high}},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: "3s"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "registry.example/fake:1",
                "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}]}}},
    })
    cleanup.insert(0, (JOB_GVK, big["metadata"]["name"], NS))

    async def evicted() -> bool:
        return is_true(await workload_of(client, dj), "Evicted")

    await eventually("the DaemonJob's Workload evicted", evicted)
    ev = condition(await workload_of(client, dj), "Evicted")
    assert ev is not None and ev["reason"] == "Preempted", ev

    async def suspended() -> bool:
        current = await get_dj(client, name)
        jobs = await children(client, name)
        return bool(current["spec"].get("suspend")) and bool(jobs) \
            and all(j["spec"].get("suspend") for j in jobs.values()) \
            and set(node_phases(current).values()) == {"Suspended"}

    await eventually("the DaemonJob and its node Jobs suspended", suspended)
    for job in (await children(client, name)).values():
        # The admission was taken back out of the suspended templates: the template is the
        # DaemonJob's own again, and no startTime is left to block the next injection.
        assert INJECTED_INFO_ANNOTATION not in (job["metadata"].get("annotations") or {})
        assert job["spec"]["template"]["spec"]["nodeSelector"] == {FLAVOR_LABEL: "on-demand"}
        assert "startTime" not in (job.get("status") or {})

    await eventually("the DaemonJob readmitted and Succeed",
                     lambda: _state_is(client, name, "Succeed"), 180)
    assert is_true(await get_or_none(client, JOB_GVK, big["metadata"]["name"]), "Complete")
    after = await children(client, name)
    # The same Jobs resumed: not deleted and recreated.
    assert {n: j["metadata"]["uid"] for n, j in after.items()} == uids
    assert all(is_true(j, "Complete") for j in after.values())
    await finished_workload(client, dj)


async def test_webhook_refuses_bad_daemonjobs_naming_the_field(
        client: RestClient, manager: ExternalFrameworkManager) -> None:
    del manager

    async def refusal(obj: Object) -> str:
        try:
            await client.create(obj, dry_run=True)
        except ApiError as err:
            return err.message
        raise AssertionError("accepted")

    bad = daemonjob("dj-bad-exclude", "user-queue", excludeNodeList="a,,b")
    assert "spec.excludeNodeList" in await refusal(bad)
    always = daemonjob("dj-always", "user-queue")
    always["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Always"' in \
        await refusal(always)
    nowhere = daemonjob("dj-nowhere", "user-queue", flavor="no-such-flavor")
    message = await refusal(nowhere)
    assert "no node is eligible" in message and "nodeSelector" in message, message


async def finished_workload(client: RestClient, owner: Object) -> Object:
    """The owner's Workload once Kueue's side marks it Finished (the generic reconciler
    finishes it just after the DaemonJob's state says so)."""
    async def probe() -> Object | None:
        wl = await workload_of(client, owner)
        return wl if is_true(wl, "Finished") else None

    found: Object = await eventually("the Workload Finished", probe)
    return found


async def _admitted(client: RestClient, owner: Object) -> Object | None:
    wl = await workload_of(client, owner)
    return wl if is_true(wl, "Admitted") else None


async def _state_is(client: RestClient, name: str, state: str) -> bool:
    return state_of(await get_dj(client, name)) == state



async def _kwok_node(client: RestClient, name: str, labels: dict[str, str]) -> None:
    """A kwok node (the local cluster's kwok reports it Ready), waited for."""
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    await client.create({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake",
                                                   "node.alpha.kubernetes.io/ttl": "0"},
                     "labels": {"type": "kwok", "kubernetes.io/hostname": name, **labels}},
        "spec": {}})
    await client.patch(NODE_GVK, name, {"status": {"capacity": resources,
                                                   "allocatable": resources}},
                       subresource="status")
    await eventually(f"node {name} Ready", lambda: _node_ready(client, name), 60)


async def _node_ready(client: RestClient, name: str) -> bool:
    return name in await ready_nodes(client)


async def test_nodes_joining_or_leaving_a_running_daemonjob(
        client: RestClient, manager: ExternalFrameworkManager, cleanup: Cleanup) -> None:
    """The run's nodes are fixed when it starts: a node that joins later gets no Job; a
    node of the run that is deleted loses its unfinished Job and is not waited for."""
    suffix = uuid.uuid4().hex[:6]
    group = {"dj-test": suffix}
    # The queue's flavor is on-demand: the nodes carry its label, or they would be outside
    # the admitted flavor.
    labels = {**group, FLAVOR_LABEL: "on-demand"}
    stays, leaves, joins = (f"dj-{suffix}-stays", f"dj-{suffix}-leaves", f"dj-{suffix}-joins")
    for node in (stays, leaves):
        await _kwok_node(client, node, labels)
        cleanup.append((NODE_GVK, node, None))
    queue = await own_queue(client, cleanup, "dj-nodes", cpu="4")
    name = f"dj-nodes-{suffix}"
    spec = daemonjob(name, queue.name, flavor=None, cpu="0", run="15s")
    spec["spec"]["template"]["spec"]["nodeSelector"] = group
    # The run is the nodes the controller finds eligible when Kueue admits it: wait until
    # our manager's cache shows both new nodes eligible (Ready, and without the not-ready
    # taint the node controller removes a moment later), or the run could hold only one.
    assert manager.manager is not None
    cached = manager.manager.get_client()

    async def both_eligible() -> bool:
        nodes = (await cached.list(NODE_GVK)).items
        found = eligible_nodes(nodes, spec["spec"]["template"]["spec"])
        return {stays, leaves} <= set(found.eligible)

    await eventually("our manager's cache to show both nodes eligible", both_eligible)
    dj = await client.create(spec)
    cleanup.insert(0, (DAEMONJOB_GVK, name, NS))

    async def running() -> dict[str, Object] | None:
        current = await get_dj(client, name)
        return await children(client, name) \
            if set(node_phases(current).values()) == {"Running"} else None

    jobs = await eventually("both node Jobs running", running)
    assert set(jobs) == {stays, leaves}
    fixed = (await get_dj(client, name))["metadata"]["annotations"][NODES_ANNOTATION]
    assert fixed == f'["{leaves}", "{stays}"]'

    await _kwok_node(client, joins, labels)
    cleanup.append((NODE_GVK, joins, None))
    await client.delete(NODE_GVK, leaves)

    async def leaver_gone() -> Object | None:
        current = await get_dj(client, name)
        gone = node_phases(current).get(leaves) == "NodeDeleted"
        job = await get_or_none(client, JOB_GVK, jobs[leaves]["metadata"]["name"])
        return current if gone and job is None else None

    current = await eventually("the deleted node's Job deleted", leaver_gone)
    assert set(node_phases(current)) == {stays, leaves}
    await eventually("the DaemonJob Succeed", lambda: _state_is(client, name, "Succeed"))
    done = await get_dj(client, name)
    assert node_phases(done) == {stays: "Succeeded", leaves: "NodeDeleted"}
    # The node that joined after the start never got a Job; the Workload still counts the
    # two nodes admitted, and the deleted one's pod was given back.
    assert set(await children(client, name)) == {stays}
    wl = await finished_workload(client, dj)
    assert wl["spec"]["podSets"][0]["count"] == 2
    events = (await client.list(GVK("events.k8s.io", "v1", "Event"), namespace=NS)).items
    assert any(e.get("reason") == "DeletedJob" and leaves in (e.get("note") or "")
               and (e.get("regarding") or {}).get("name") == name for e in events)
