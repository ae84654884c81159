"""The kopf example (docs/examples/kopf_operator) through the real Kueue.

A local control plane of this module's own runs Kueue v0.19.2 with
``Simulation.v1.science.example.com`` in ``integrations.externalFrameworks`` (and its
built-in ``batch/job`` integration on), as docs/kopf.md asks of a cluster. Each test runs
the example as a user does, ``kopf run --all-namespaces simulation_operator.py`` in a
process of its own with ``$KUBECONFIG`` and ``$KUEUE_CONFIG`` (the file this Kueue reads)
set: its startup handler installs the CRD, serves the webhook and starts the manager in
kopf's loop; its handlers create the Simulation's batch/v1 Job, which runs on kwok nodes.

``KUEUE_JF_KOPF_CLUSTER_DIR`` names the state dir of a cluster already started with
:data:`TOPOLOGY` (reused and left running), which is quick while iterating.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from jobframework.runtime.client.rest import RestClient, Timeouts
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.cluster import (
    COMPLETE_DELAY_ANNOTATION,
    FLAVOR_LABEL,
    ClusterInfo,
    LocalCluster,
    Topology,
    cache_root,
)

from .helpers import (
    CLUSTER_QUEUE_GVK,
    JOB_GVK,
    LOCAL_QUEUE_GVK,
    NS,
    POD_GVK,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    WPC_GVK,
    Cleanup,
    Queue,
    condition,
    delete,
    eventually,
    get_or_none,
    is_true,
    workload_of,
)

pytestmark = [pytest.mark.cluster]

EXAMPLE = (Path(__file__).parents[2] / "docs" / "examples" / "kopf_operator"
           / "simulation_operator.py")
FRAMEWORK = "Simulation.v1.science.example.com"
SIMULATION_GVK = GVK("science.example.com", "v1", "Simulation")
MUTATING_GVK = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING_GVK = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
WEBHOOK_CONFIGURATION = "simulation-kueue"
KOPF_ANNOTATION = "kopf.zalando.org/last-handled-configuration"
#: Kueue lists the example's kind; the built-in batch/job integration stays on, so the
#: Simulation's Jobs meet Kueue's Job webhook and reconciler as in a real cluster.
TOPOLOGY = Topology(external_frameworks=(FRAMEWORK,))


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def kopf_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterInfo]:
    """A cluster whose Kueue lists the example's kind as an external framework."""
    reuse = os.environ.get("KUEUE_JF_KOPF_CLUSTER_DIR")
    if reuse:
        info = LocalCluster(Path(reuse)).info()
        if info is None:
            pytest.fail(f"KUEUE_JF_KOPF_CLUSTER_DIR={reuse} but no cluster runs there")
        yield info
        return
    state_dir = cache_root() / "clusters" / f"pytest-{os.getpid()}-kopf"
    cluster = LocalCluster(state_dir, TOPOLOGY)
    info = cluster.up()
    failed_before = request.session.testsfailed
    try:
        yield info
    finally:
        cluster.down()
        if request.session.testsfailed == failed_before:
            shutil.rmtree(state_dir, ignore_errors=True)
        else:
            print(f"\nkopf cluster logs kept in {state_dir}/logs")


@pytest.fixture
async def client(kopf_cluster: ClusterInfo) -> AsyncIterator[RestClient]:
    """An admin client of the module's cluster."""
    timeouts = Timeouts(read=30.0, watch_inactivity=60.0)
    async with await RestClient.from_kubeconfig(kopf_cluster.kubeconfig,
                                                timeouts=timeouts) as c:
        yield c


@pytest.fixture
async def cleanup(client: RestClient) -> AsyncIterator[Cleanup]:
    """Objects to delete after the test, in list order."""
    todo: Cleanup = []
    yield todo
    for gvk, name, namespace in todo:
        await delete(client, gvk, name, namespace)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Operator:
    """The example running as ``kopf run`` in a process of its own."""

    def __init__(self, proc: asyncio.subprocess.Process, log: Path, liveness: str) -> None:
        self.proc = proc
        self.log = log
        self.liveness = liveness

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    async def stop(self) -> int:
        """SIGTERM, as a Deployment's pod gets; the exit code."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), 60)


@contextlib.asynccontextmanager
async def kopf_operator(info: ClusterInfo, client: RestClient,
                        tmp_path: Path) -> AsyncIterator[Operator]:
    """Start the example, wait until queued Simulations are suspended on create (its
    startup handler has run), and stop it when the block ends."""
    log = tmp_path / "kopf.log"
    liveness = f"http://127.0.0.1:{_free_port()}/healthz"
    env = {**os.environ, "KUBECONFIG": info.kubeconfig,
           "KUEUE_CONFIG": str(Path(info.state_dir) / "config" / "kueue.yaml"),
           "PYTHONUNBUFFERED": "1"}
    for name in ("WEBHOOK_CERT_DIR", "WEBHOOK_HOST", "WEBHOOK_PORT", "INSTALL_CRD"):
        env.pop(name, None)
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kopf", "run", "--all-namespaces", f"--liveness={liveness}",
            str(EXAMPLE), env=env, cwd=tmp_path, stdout=out, stderr=asyncio.subprocess.STDOUT)
    operator = Operator(proc, log, liveness)
    try:
        async def suspends_queued() -> bool:
            if proc.returncode is not None:
                raise AssertionError(f"kopf exited with {proc.returncode}:\n{operator.tail()}")
            if await get_or_none(client, MUTATING_GVK, WEBHOOK_CONFIGURATION, None) is None:
                return False
            try:
                out = await client.create(simulation("probe", "any-queue"), dry_run=True)
            except Exception:  # the kind or the webhook not served yet
                return False
            return out["spec"].get("suspend") is True

        await eventually("the example's webhook to suspend queued Simulations",
                         suspends_queued)
        yield operator
    except BaseException:
        print(f"--- kopf output ---\n{operator.tail()}")
        raise
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def simulation(name: str, queue: str, *, parallelism: int = 2, cpu: str = "1",
               run: str = "2s", priority_class: str | None = None) -> Object:
    labels = {QUEUE_LABEL: queue}
    if priority_class:
        labels[PRIORITY_LABEL] = priority_class
    return {
        "apiVersion": SIMULATION_GVK.api_version, "kind": "Simulation",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"parallelism": parallelism, "template": {
            "metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: run}},
            "spec": {"containers": [{
                "name": "main", "image": "registry.example/simulate:1",
                "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}}},
    }


async def own_queue(client: RestClient, cleanup: Cleanup, cpu: str,
                    preemption: dict[str, Any] | None = None) -> Queue:
    queue = Queue(client, "kopf", cpu=cpu, preemption=preemption)
    await queue.create()
    cleanup.append((LOCAL_QUEUE_GVK, queue.name, NS))
    cleanup.append((CLUSTER_QUEUE_GVK, queue.name, None))
    return queue


async def sim_state(client: RestClient, name: str) -> Object:
    return await client.get(SIMULATION_GVK, name, namespace=NS)


# --------------------------------------------------------------------------- tests


async def test_queued_simulation_is_admitted_by_kueue_and_run_by_kopf(
        kopf_cluster: ClusterInfo, client: RestClient, cleanup: Cleanup,
        tmp_path: Path) -> None:
    queue = await own_queue(client, cleanup, cpu="4")
    name = f"sim-{uuid.uuid4().hex[:6]}"
    async with kopf_operator(kopf_cluster, client, tmp_path) as operator:
        # kopf's liveness probe includes the example's: the embedded manager runs.
        async with aiohttp.ClientSession() as session, session.get(operator.liveness) as resp:
            assert resp.status == 200
            assert (await resp.json()).get("kueue") is True

        created = await client.create(simulation(name, queue.name, parallelism=2))
        cleanup.insert(0, (SIMULATION_GVK, name, NS))
        # The example's webhook suspended it on create.
        assert created["spec"]["suspend"] is True

        async def admitted() -> Object | None:
            wl = await workload_of(client, created)
            return wl if is_true(wl, "Admitted") else None

        wl = await eventually("the Simulation's Workload admitted by Kueue", admitted)
        assert wl["metadata"]["name"].startswith(f"simulation-{name}-")
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 2)]
        assert wl["status"]["admission"]["clusterQueue"] == queue.name

        # The reconciler unsuspended it with the flavor's node selector; kopf's field
        # handler on spec.suspend made the Job from that template.
        job = await eventually("kopf to create the Simulation's Job",
                               lambda: get_or_none(client, JOB_GVK, name))
        assert [(r["kind"], r["name"]) for r in job["metadata"]["ownerReferences"]] == \
            [("Simulation", name)]
        assert job["spec"]["template"]["spec"]["nodeSelector"] == {FLAVOR_LABEL: "on-demand"}
        sim = await sim_state(client, name)
        assert sim["spec"]["suspend"] is False
        assert KOPF_ANNOTATION in sim["metadata"]["annotations"]

        async def pods_on_kwok() -> list[Object] | None:
            pods = (await client.list(POD_GVK, namespace=NS,
                                      label_selector=f"batch.kubernetes.io/job-name={name}"
                                      )).items
            bound = [p for p in pods if p["spec"].get("nodeName", "").startswith("kwok-")]
            return pods if len(bound) == 2 else None

        pods = await eventually("2 pods bound to kwok nodes", pods_on_kwok)
        assert {p["spec"]["nodeName"].rsplit("-", 1)[0] for p in pods} == {"kwok-on-demand"}

        # kopf copies the Job's outcome into the status; the reconciler finishes the
        # Workload from it.
        async def finished() -> Object | None:
            wl = await workload_of(client, created)
            return wl if wl is not None and is_true(wl, "Finished") \
                and not wl["metadata"].get("finalizers") else None

        done = await eventually("the Workload Finished and released", finished)
        assert (condition(done, "Finished") or {}).get("reason") == "Succeeded"
        assert is_true(done, "PodsReady"), condition(done, "PodsReady")
        sim = await sim_state(client, name)
        assert sim["status"]["phase"] == "Succeeded"
        assert is_true(await client.get(JOB_GVK, name, namespace=NS), "Complete")
        # No timers, daemons or deletion handlers: kopf put no finalizer on it.
        assert not sim["metadata"].get("finalizers")

        # SIGTERM: kopf's cleanup handler stops the Kueue side, webhooks first.
        assert await operator.stop() == 0, operator.tail()
        assert await get_or_none(client, MUTATING_GVK, WEBHOOK_CONFIGURATION, None) is None
        assert await get_or_none(client, VALIDATING_GVK, WEBHOOK_CONFIGURATION, None) is None
        log = operator.tail()
        assert "Kueue's side has stopped" in log


async def test_preempted_simulation_is_suspended_and_kopf_stops_its_job(
        kopf_cluster: ClusterInfo, client: RestClient, cleanup: Cleanup,
        tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    low, high = f"kopf-low-{tag}", f"kopf-high-{tag}"
    for priority_class, value in ((low, 100), (high, 1000)):
        await client.create({"apiVersion": WPC_GVK.api_version, "kind": WPC_GVK.kind,
                             "metadata": {"name": priority_class}, "value": value})
        cleanup.append((WPC_GVK, priority_class, None))
    queue = await own_queue(client, cleanup, cpu="2",
                            preemption={"withinClusterQueue": "LowerPriority"})
    victim, preemptor = f"victim-{tag}", f"preemptor-{tag}"
    async with kopf_operator(kopf_cluster, client, tmp_path):
        created = await client.create(simulation(victim, queue.name, run="10s",
                                                 priority_class=low))
        cleanup.insert(0, (SIMULATION_GVK, victim, NS))
        original_template = created["spec"]["template"]

        async def running() -> Object | None:
            sim = await sim_state(client, victim)
            return sim if (sim.get("status") or {}).get("phase") == "Running" else None

        await eventually("the victim running", running)
        first_job = await client.get(JOB_GVK, victim, namespace=NS)

        await client.create(simulation(preemptor, queue.name, run="2s",
                                       priority_class=high))
        cleanup.insert(0, (SIMULATION_GVK, preemptor, NS))

        # Kueue preempts the victim: the reconciler suspends it and restores its
        # template; kopf's field handler deletes its Job; once no pod of it is active
        # the quota is released and the preemptor is admitted.
        async def preempted() -> Object | None:
            wl = await workload_of(client, created)
            return wl if (condition(wl, "Evicted") or {}).get("reason") == "Preempted" \
                and is_true(wl, "Requeued") and not is_true(wl, "QuotaReserved") else None

        evicted = await eventually("the victim's Workload preempted, its quota released",
                                   preempted)
        assert (condition(evicted, "Preempted") or {}).get("reason") == "InClusterQueue"
        sim = await sim_state(client, victim)
        assert sim["spec"]["suspend"] is True
        assert sim["spec"]["template"] == original_template
        # The quota is released only once kopf reported no active pods: none of the
        # first run's pods runs on.
        assert sim["status"]["active"] == 0
        first_uid = first_job["metadata"]["uid"]
        first_pods = (await client.list(
            POD_GVK, namespace=NS,
            label_selector=f"batch.kubernetes.io/controller-uid={first_uid}")).items
        assert [p["metadata"]["name"] for p in first_pods
                if (p.get("status") or {}).get("phase") == "Running"
                and "deletionTimestamp" not in p["metadata"]] == []

        async def first_job_deleted() -> bool:
            job = await get_or_none(client, JOB_GVK, victim)
            return job is None or job["metadata"]["uid"] != first_uid

        await eventually("kopf's deletion of the first run's Job to complete",
                         first_job_deleted)

        async def simulation_succeeded(name: str) -> bool:
            sim = await sim_state(client, name)
            return (sim.get("status") or {}).get("phase") == "Succeeded"

        await eventually("the preemptor to succeed", lambda: simulation_succeeded(preemptor))
        # Admitted again, the victim runs a new Job to the end.
        await eventually("the victim to succeed after its second run",
                         lambda: simulation_succeeded(victim))
        second_job = await client.get(JOB_GVK, victim, namespace=NS)
        assert second_job["metadata"]["uid"] != first_uid
        assert second_job["spec"]["template"]["spec"]["nodeSelector"] == \
            {FLAVOR_LABEL: "on-demand"}

        async def finished() -> bool:
            return is_true(await workload_of(client, created), "Finished")

        await eventually("the victim's Workload Finished", finished)

