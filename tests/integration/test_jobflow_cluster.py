"""JobFlow through the real Kueue manager on the local cluster.

Each test runs our external-framework manager (:mod:`integrations.manager`) in-process
against the session's cluster: CRDs, webhooks over loopback TLS, the DAG controller and
the generic reconciler. Kueue (the real Go manager) admits, preempts and accounts quota;
kwok runs the pods. Tests that need a particular queue make their own ClusterQueue and
LocalQueue so they do not depend on what other tests left behind.

Everything polls with generous limits (the machine may be loaded); nothing sleeps for a
fixed time.
"""

from __future__ import annotations

import asyncio
import decimal
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from integrations.demo import DemoOptions, run_demo
from integrations.demo.core import SAMPLE_NODE
from integrations.demo.follow import CLUSTER_QUEUE_GVK, cluster_queue_usage
from integrations.jobflow import JOB_GVK, JOBFLOW_GVK, JOBTEMPLATE_GVK
from integrations.manager import ExternalFrameworkManager, ManagerOptions
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.cluster import COMPLETE_DELAY_ANNOTATION, ClusterInfo

from .helpers import (
    LOCAL_QUEUE_GVK,
    NS,
    POD_GVK,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    TIMEOUT,
    WPC_GVK,
    Queue,
    condition,
    controller_uid,
    delete,
    eventually,
    get_or_none,
    is_true,
    workload_of,
)

pytestmark = pytest.mark.cluster


def step(name: str, *, cpu: str = "1", run: str = "2s", pods: int = 1,
         deps: tuple[str, ...] = ()) -> dict[str, Any]:
    """A flow whose pods request ``cpu`` and run ``run`` on kwok."""
    return {"name": name, "dependencies": list(deps), "jobTemplate": {
        "parallelism": pods, "completions": pods,
        "template": {
            "metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: run}},
            "spec": {"containers": [{
                "name": "main", "image": "registry.example/fake:1",
                "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}}}}


def jobflow(name: str, queue: str, flows: list[dict[str, Any]],
            priority: str | None = None) -> Object:
    labels = {QUEUE_LABEL: queue}
    if priority:
        labels[PRIORITY_LABEL] = priority
    return {"apiVersion": JOBFLOW_GVK.api_version, "kind": JOBFLOW_GVK.kind,
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"flows": flows}}


def state_of(jf: Object | None) -> str:
    return str(((jf or {}).get("status") or {}).get("state") or "")


def phases(jf: Object | None) -> dict[str, str]:
    return {str(f["name"]): str(f.get("phase")) for f in
            ((jf or {}).get("status") or {}).get("flows") or []}


def cpu_in_use(cq: Object) -> decimal.Decimal:
    used, _ = cluster_queue_usage(cq)
    return used.get("cpu", decimal.Decimal(0))


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture
async def manager(client: RestClient) -> AsyncIterator[ExternalFrameworkManager]:
    async with ExternalFrameworkManager(client) as mgr:
        yield mgr


# -- tests -----------------------------------------------------------------------------------


async def test_demo_core_loop_runs_the_seed_samples_through_real_kueue(
        client: RestClient) -> None:
    lines: list[str] = []
    result = await run_demo(client, DemoOptions(create_sample_node=True, cleanup=False,
                                                timeout=TIMEOUT, step_time="2s"),
                            lines.append)
    try:
        assert result.ok, (result.problems, "\n".join(lines))
        assert set(result.created) == {
            "example.yaml", "example-sameNode.yaml", "example-shareVolume.yaml",
            "example-with-jobTemplate.yaml", "example-with-jobTemplate1.yaml",
            "(demo) pipeline-a", "(demo) pipeline-b"}
        assert set(result.states.values()) == {"Succeed"}
        # The invalid sample is refused by our webhook, naming the field and the value.
        message = result.rejected["example-job-error.yaml"]
        assert 'spec.flows[2].dependencies[1]: Not found: "job2"' in message
        assert "JOBFLOW" in result.table and "pipeline-b" in result.table
        assert any("admitted by ClusterQueue cluster-queue" in line for line in lines)
        assert any("reclaimable pods" in line for line in lines)
        # The DaemonJob samples: the seed's on every node, the flavor one on the nodes of
        # the flavor Kueue admitted it into.
        others = {r.label: r for r in result.others}
        for label in ("DaemonJob/daemonjob-example", "DaemonJob/daemonjob-flavor-example"):
            assert others[label].state == "Succeed", others[label]
        assert others["DaemonJob/daemonjob-flavor-example"].flavors in ("on-demand", "spot")
        assert any("outside the admitted flavor" in line for line in lines)
        # Last, the in-cluster deployment: every rendered object accepted in a dry run.
        assert {"Deployment", "CustomResourceDefinition", "ClusterRole",
                "MutatingWebhookConfiguration"} <= {a.split("/")[0] for a in result.deployment}
        assert any("objects accepted" in line for line in lines)

        nodes = set()
        for file, name in result.created.items():
            jf = await client.get(JOBFLOW_GVK, name, namespace=NS)
            assert state_of(jf) == "Succeed", file
            # One Workload, made by our reconciler, controlled by the JobFlow, admitted
            # and finished by Kueue.
            wl = await workload_of(client, jf)
            assert wl is not None, f"no Workload owned by {name}"
            assert [p["name"] for p in wl["spec"]["podSets"]] == \
                [f["name"] for f in jf["spec"]["flows"]]
            assert is_true(wl, "Admitted") or is_true(wl, "Finished")
            assert is_true(wl, "Finished")
            # waitForPodsReady is on in Kueue's default Configuration, so the manager keeps
            # the PodsReady condition as Kueue's own integrations do.
            assert condition(wl, "PodsReady") is not None, wl["status"]["conditions"]
            for flow in jf["spec"]["flows"]:
                job = await client.get(JOB_GVK, f"{name}-{flow['name']}", namespace=NS)
                assert controller_uid(job) == jf["metadata"]["uid"]
                assert is_true(job, "Complete")
                # Never queued on its own: no queue label, never suspended, no Workload.
                assert QUEUE_LABEL not in (job["metadata"].get("labels") or {})
                assert condition(job, "Suspended") is None, job["status"]
                assert await workload_of(client, job) is None
                pods = (await client.list(
                    POD_GVK, namespace=NS,
                    label_selector=f"batch.kubernetes.io/job-name={job['metadata']['name']}"
                )).items
                assert pods and all(p["status"]["phase"] == "Succeeded" for p in pods)
                for pod in pods:
                    nodes.add(pod["spec"]["nodeName"])
                    if file == "example-sameNode.yaml":
                        assert pod["spec"]["nodeName"] == SAMPLE_NODE
        assert nodes <= {SAMPLE_NODE} | {f"kwok-{f}-{i}" for f in ("on-demand", "spot")
                                        for i in range(2)}
    finally:
        for name in result.created.values():
            await delete(client, JOBFLOW_GVK, name)
        kinds = {"DaemonJob": GVK("api.practice.com", "v1alpha1", "DaemonJob"),
                 "AppWrapper": GVK("workload.codeflare.dev", "v1beta2", "AppWrapper")}
        # AppWrappers carry our finalizer: a manager must run while they go.
        async with ExternalFrameworkManager(client):
            for other in result.others:
                kind, _, other_name = other.label.partition("/")
                await delete(client, kinds[kind], other_name)
        for name in ("job1-template", "job2-template"):
            await delete(client, JOBTEMPLATE_GVK, name)
        await delete(client, GVK("", "v1", "PersistentVolumeClaim"), "mylocalpvc")
        await delete(client, GVK("", "v1", "PersistentVolume"), "mylocalpv", None)
        await delete(client, GVK("storage.k8s.io", "v1", "StorageClass"), "my-local-storage",
                     None)
        # The sample node has no flavor label; other tests' pods should not land there.
        await delete(client, GVK("", "v1", "Node"), SAMPLE_NODE, None)


async def test_two_jobflows_compete_for_a_small_cluster_queue(
        client: RestClient, manager: ExternalFrameworkManager,
        cleanup: list[tuple[GVK, str, str | None]]) -> None:
    del manager
    queue = Queue(client, "jf-small", cpu="2")
    await queue.create()
    cleanup.append((LOCAL_QUEUE_GVK, queue.name, NS))
    cleanup.append((CLUSTER_QUEUE_GVK, queue.name, None))
    # Each flow needs the whole queue (two 1-cpu steps); the second must wait.
    flows = [step("a", run="3s"), step("b", run="3s", deps=("a",))]
    first = await client.create(jobflow("compete-1", queue.name, flows))
    cleanup.insert(0, (JOBFLOW_GVK, "compete-1", NS))
    wl1 = await eventually("first Workload admitted", lambda: _admitted(client, first))
    assert wl1["status"]["admission"]["clusterQueue"] == queue.name
    second = await client.create(jobflow("compete-2", queue.name, flows))
    cleanup.insert(0, (JOBFLOW_GVK, "compete-2", NS))

    async def second_pending() -> bool:
        wl = await workload_of(client, second)
        return wl is not None and condition(wl, "QuotaReserved") is not None \
            and not is_true(wl, "QuotaReserved")

    await eventually("second Workload pending for quota", second_pending)
    jf2 = await client.get(JOBFLOW_GVK, "compete-2", namespace=NS)
    assert jf2["spec"]["suspend"] is True
    assert (await client.list(JOB_GVK, namespace=NS,
                              label_selector="jobflow.api.practice.com/name=compete-2")).items \
        == []

    wl2 = await eventually("second Workload admitted", lambda: _admitted(client, second))
    # It got the quota only once the first flow had finished (its first step's reclaimed
    # cpu was not enough).
    wl1 = await workload_of(client, first)
    assert is_true(wl1, "Finished"), wl1
    assert wl2["status"]["admission"]["clusterQueue"] == queue.name
    await eventually("second JobFlow Succeed", lambda: _state_is(client, "compete-2", "Succeed"))


async def _admitted(client: RestClient, owner: Object) -> Object | None:
    wl = await workload_of(client, owner)
    return wl if is_true(wl, "Admitted") else None


async def _state_is(client: RestClient, name: str, state: str) -> bool:
    return state_of(await client.get(JOBFLOW_GVK, name, namespace=NS)) == state


async def test_reclaimable_quota_is_released_step_by_step(
        client: RestClient, manager: ExternalFrameworkManager,
        cleanup: list[tuple[GVK, str, str | None]]) -> None:
    del manager
    queue = Queue(client, "jf-reclaim", cpu="8")
    await queue.create()
    cleanup.append((LOCAL_QUEUE_GVK, queue.name, NS))
    cleanup.append((CLUSTER_QUEUE_GVK, queue.name, None))
    flows = [step("s1", cpu="1", run="4s"), step("s2", cpu="2", run="4s", deps=("s1",)),
             step("s3", cpu="1", run="4s", deps=("s2",))]
    jf = await client.create(jobflow("reclaim", queue.name, flows))
    cleanup.insert(0, (JOBFLOW_GVK, "reclaim", NS))

    usage: list[decimal.Decimal] = []
    reclaimable: list[dict[str, int]] = []

    async def watch() -> bool:
        cq = await queue.cluster_queue()
        wl = await workload_of(client, jf)
        current = await client.get(JOBFLOW_GVK, "reclaim", namespace=NS)
        if state_of(current) == "Succeed":
            return True
        if wl is not None and is_true(wl, "Admitted"):
            cpu = cpu_in_use(cq)
            if not usage or usage[-1] != cpu:
                usage.append(cpu)
            pods = {str(p["name"]): int(p["count"])
                    for p in (wl.get("status") or {}).get("reclaimablePods") or []}
            if not reclaimable or reclaimable[-1] != pods:
                reclaimable.append(pods)
        return False

    await eventually("the JobFlow to Succeed", watch)
    # While the DAG ran, Kueue saw the finished steps as reclaimable, one after the other,
    # and the ClusterQueue's usage went down accordingly: 4 -> 3 -> 1 cpu.
    assert {"s1": 1} in reclaimable and {"s1": 1, "s2": 1} in reclaimable, reclaimable
    assert reclaimable.index({"s1": 1}) < reclaimable.index({"s1": 1, "s2": 1})
    d = decimal.Decimal
    for expected in (d(4), d(3), d(1)):
        assert expected in usage, usage
    assert usage.index(d(4)) < usage.index(d(3)) < usage.index(d(1)), usage

    async def released() -> bool:
        return cpu_in_use(await queue.cluster_queue()) == 0

    await eventually("all quota released after the flow finished", released)


async def test_preempted_jobflow_resumes_without_rerunning_completed_steps(
        client: RestClient, manager: ExternalFrameworkManager,
        cleanup: list[tuple[GVK, str, str | None]]) -> None:
    del manager
    suffix = uuid.uuid4().hex[:6]
    low, high = f"jf-low-{suffix}", f"jf-high-{suffix}"
    for name, value in ((low, 100), (high, 1000)):
        await client.create({"apiVersion": WPC_GVK.api_version, "kind": WPC_GVK.kind,
                             "metadata": {"name": name}, "value": value})
        cleanup.append((WPC_GVK, name, None))
    queue = Queue(client, "jf-preempt", cpu="4",
                  preemption={"withinClusterQueue": "LowerPriority"})
    await queue.create()
    cleanup.append((LOCAL_QUEUE_GVK, queue.name, NS))
    cleanup.append((CLUSTER_QUEUE_GVK, queue.name, None))

    flows = [step("s1", cpu="1", run="1s"), step("s2", cpu="1", run="15s", deps=("s1",)),
             step("s3", cpu="1", run="1s", deps=("s2",))]
    jf = await client.create(jobflow("preempted", queue.name, flows, priority=low))
    cleanup.insert(0, (JOBFLOW_GVK, "preempted", NS))

    async def s2_running() -> bool:
        current = await client.get(JOBFLOW_GVK, "preempted", namespace=NS)
        return phases(current).get("s2") == "Running"

    await eventually("step s2 running", s2_running)
    s1_job = await client.get(JOB_GVK, "preempted-s1", namespace=NS)
    assert is_true(s1_job, "Complete")
    wl = await workload_of(client, jf)
    assert wl is not None and wl["spec"].get("priority") == 100

    # A high-priority batch Job that needs 3 of the 4 cpu: only preempting the flow (which
    # still holds 2 cpu: s1's quota is reclaimable) makes room.
    big = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"preemptor-{suffix}", "namespace": NS,
                     "labels": {QUEUE_LABEL: queue.name, PRIORITY_LABEL: high}},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: "3s"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "registry.example/fake:1",
                "resources": {"requests": {"cpu": "3", "memory": "128Mi"}}}]}}},
    }
    big = await client.create(big)
    cleanup.insert(0, (JOB_GVK, big["metadata"]["name"], NS))

    async def preempted() -> bool:
        w = await workload_of(client, jf)
        return is_true(w, "Evicted")

    await eventually("the JobFlow's Workload evicted", preempted)
    evicted = condition(await workload_of(client, jf), "Evicted")
    assert evicted is not None and evicted["reason"] == "Preempted", evicted

    async def children_suspended() -> bool:
        current = await client.get(JOBFLOW_GVK, "preempted", namespace=NS)
        s2 = await client.get(JOB_GVK, "preempted-s2", namespace=NS)
        return bool(current["spec"].get("suspend")) and bool(s2["spec"].get("suspend")) \
            and phases(current).get("s2") == "Suspended"

    await eventually("the flow and its running step suspended", children_suspended)
    await eventually("the preemptor Job complete",
                     lambda: _job_complete(client, big["metadata"]["name"]))

    await eventually("the JobFlow re-admitted and Succeed",
                     lambda: _state_is(client, "preempted", "Succeed"))
    # Completed steps were not run again: same Job, one pod.
    s1_after = await client.get(JOB_GVK, "preempted-s1", namespace=NS)
    assert s1_after["metadata"]["uid"] == s1_job["metadata"]["uid"]
    assert s1_after["status"].get("succeeded") == 1
    s1_pods = (await client.list(POD_GVK, namespace=NS,
                                 label_selector="batch.kubernetes.io/job-name=preempted-s1"
                                 )).items
    assert len(s1_pods) == 1
    s2_after = await client.get(JOB_GVK, "preempted-s2", namespace=NS)
    assert is_true(s2_after, "Complete")

    async def finished() -> bool:
        # The generic reconciler finishes the Workload just after the flow's state.
        return is_true(await workload_of(client, jf), "Finished")

    await eventually("the JobFlow's Workload Finished", finished)


async def _job_complete(client: RestClient, name: str) -> bool:
    return is_true(await get_or_none(client, JOB_GVK, name), "Complete")


MUTATING_GVK = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING_GVK = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")


async def test_manager_process_serves_webhooks_and_removes_them_on_sigterm(
        client: RestClient, cluster_info: ClusterInfo) -> None:
    name = ManagerOptions().webhook_configuration_name
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "integrations", "run", "--kubeconfig", cluster_info.kubeconfig,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        async def registered() -> bool:
            return all([await get_or_none(client, MUTATING_GVK, name, None),
                        await get_or_none(client, VALIDATING_GVK, name, None)])

        await eventually("the webhook configurations", registered)
        hooks = (await client.get(VALIDATING_GVK, name))["webhooks"]
        assert {h["clientConfig"]["url"].split("/", 3)[2].split(":")[0] for h in hooks} \
            == {"127.0.0.1"}
        # Served: an invalid JobFlow is refused by the process's validating webhook.
        bad = jobflow("bad-deps", "user-queue", [step("a", deps=("nope",))])

        async def rejected() -> str:
            try:
                await client.create(bad, dry_run=True)
            except ApiError as err:
                return err.message
            return ""

        message = await eventually("the validating webhook to answer", rejected)
        assert 'spec.flows[0].dependencies[0]: Not found: "nope"' in message
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, out.decode(errors="replace")[-3000:]
        # Nothing left that would make the API server call a dead URL.
        assert await get_or_none(client, MUTATING_GVK, name, None) is None
        assert await get_or_none(client, VALIDATING_GVK, name, None) is None
        await client.create(bad, dry_run=True)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
