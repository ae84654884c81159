"""Our integrations under MultiKueue: one manager cluster, two workers, all real.

``jobframework.testing.cluster.multikueue`` starts three local control planes (each with
its own Kueue), connects the manager's Kueue to the workers (MultiKueueClusters, a
MultiKueueConfig, the MultiKueue AdmissionCheck on a ClusterQueue of its own) and our
manager runs on every cluster. A job created on the manager cluster in that queue is
handed to MultiKueue by our webhook (``spec.managedBy``), admitted on the manager,
dispatched by Kueue's generic adapter for external frameworks to exactly one worker,
where our controllers run it; its status comes back to the manager cluster, and the
job finishes on both sides with no copy left on any worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from integrations.daemonjob import DAEMONJOB_GVK, NODES_ANNOTATION
from integrations.jobflow import JOBFLOW_GVK
from integrations.manager import ExternalFrameworkManager, ManagerOptions
from jobframework.plugins import load_integration
from jobframework.runtime.client import PropagationPolicy
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.cluster import COMPLETE_DELAY_ANNOTATION, EXTERNAL_FRAMEWORKS, cache_root
from jobframework.testing.cluster.multikueue import (
    LOCAL_QUEUE,
    MULTIKUEUE_CONTROLLER,
    MultiKueueClusters,
    MultiKueueEnvironment,
    clients,
    configure,
    manager_topology,
    worker_topology,
)

from .helpers import JOB_GVK, NS, POD_GVK, eventually, is_true, workload_of
from .test_appwrapper_cluster import AW_GVK, appwrapper, phase, wrapped_job
from .test_daemonjob_cluster import daemonjob
from .test_daemonjob_cluster import state_of as dj_state
from .test_jobflow_cluster import jobflow, state_of, step

pytestmark = [pytest.mark.cluster, pytest.mark.asyncio(loop_scope="module")]

#: Our integrations on the manager cluster, and on the workers.
MANAGER_INTEGRATIONS = ("jobflow", "daemonjob", "appwrapper")
WORKER_INTEGRATIONS = (*MANAGER_INTEGRATIONS, "batchjob")
#: batch/v1 Jobs: Kueue's generic adapter copies a Job's whole spec (its selector and
#: controller-uid labels included, which a worker's API server refuses), so on the
#: manager cluster Kueue's own batch/job integration and its Job adapter handle them;
#: on the workers Kueue's batch/job is off and ours runs the copies (a built-in
#: framework must stay listed there: an empty list means batch/job).
WORKER_BUILT_IN = ("jobset.x-k8s.io/jobset",)
WORKER_EXTERNAL = (*EXTERNAL_FRAMEWORKS, "Job.v1.batch")


@pytest.fixture(scope="module")
def multikueue_clusters(request: pytest.FixtureRequest) -> Any:
    """The manager and two workers, for this module."""
    root = cache_root() / "clusters" / f"pytest-{os.getpid()}-mk"
    env = MultiKueueEnvironment(root, manager=manager_topology(EXTERNAL_FRAMEWORKS),
                                worker=worker_topology(WORKER_EXTERNAL,
                                                       frameworks=WORKER_BUILT_IN))
    started = time.monotonic()
    clusters = env.up()
    print(f"\nmultikueue clusters up in {time.monotonic() - started:.1f}s")
    failed_before = request.session.testsfailed
    try:
        yield clusters, env
    finally:
        env.down()
        if request.session.testsfailed == failed_before:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"\nmultikueue cluster logs kept in {root}/*/logs")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def envs(multikueue_clusters: tuple[MultiKueueClusters, MultiKueueEnvironment]
               ) -> AsyncIterator[tuple[RestClient, dict[str, RestClient]]]:
    """Clients of the manager and the workers; MultiKueue configured; our manager
    running on every cluster."""
    clusters, _ = multikueue_clusters
    async with clients(clusters) as (manager, workers), \
            contextlib.AsyncExitStack() as stack:
        for client, ours in ((manager, MANAGER_INTEGRATIONS),
                             *((w, WORKER_INTEGRATIONS) for w in workers.values())):
            await stack.enter_async_context(ExternalFrameworkManager(
                client, ManagerOptions(integrations=ours)))
        # Kueue watches every kind of multiKueue.externalFrameworks on each worker.
        crds = [crd for name in MANAGER_INTEGRATIONS
                for crd in load_integration(name).load_crds()]
        await configure(manager, clusters.workers, workers, crds=crds)
        yield manager, workers


async def _names_on(client: RestClient, gvk: GVK) -> set[str]:
    return {o["metadata"]["name"] for o in (await client.list(gvk, namespace=NS)).items}


async def test_appwrapper_runs_on_one_worker_and_finishes_on_both_sides(
        envs: tuple[RestClient, dict[str, RestClient]]) -> None:
    manager, workers = envs
    aw = appwrapper("mk-aw", LOCAL_QUEUE, [wrapped_job("mk-aw-job", cpu="200m", run="4s")])
    created = await manager.create(aw)
    assert created["spec"].get("managedBy") == MULTIKUEUE_CONTROLLER, (
        "our webhook hands a job in a MultiKueue queue to MultiKueue")
    seen_on: set[str] = set()

    async def watch_workers() -> None:
        while True:
            for name, client in workers.items():
                if "mk-aw" in await _names_on(client, AW_GVK):
                    seen_on.add(name)
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch_workers())
    try:
        async def finished() -> bool:
            obj = await manager.get(AW_GVK, "mk-aw", namespace=NS)
            wl = await workload_of(manager, obj)
            return phase(obj) == "Succeeded" and wl is not None and is_true(wl, "Finished")

        await eventually("the AppWrapper to succeed on the manager cluster", finished, 180)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    assert len(seen_on) == 1, f"the AppWrapper ran on {sorted(seen_on) or 'no worker'}"
    (worker,) = seen_on
    obj = await manager.get(AW_GVK, "mk-aw", namespace=NS)
    wl = await workload_of(manager, obj)
    assert wl is not None
    (check,) = wl["status"]["admissionChecks"]
    assert check["state"] == "Ready" and f'"{worker}"' in check["message"], check
    # Nothing ran on the manager cluster: its AppWrapper controller left the job alone.
    assert "mk-aw-job" not in await _names_on(manager, JOB_GVK)
    assert not [p for p in (await manager.list(POD_GVK, namespace=NS)).items
                if p["metadata"]["name"].startswith("mk-aw-job")]

    async def no_copy_left() -> bool:
        return all(["mk-aw" not in await _names_on(client, AW_GVK)
                    for client in workers.values()])

    await eventually("the worker's copy to be removed", no_copy_left, 120)
    await manager.delete(AW_GVK, "mk-aw", namespace=NS)




async def test_batch_job_runs_on_one_worker_and_finishes_on_both_sides(
        envs: tuple[RestClient, dict[str, RestClient]]) -> None:
    """Kueue's own Job adapter copies the Job to a worker, where our batchjob
    integration (Kueue's batch/job is off there) and the worker's Job controller run it;
    its status comes back onto the manager's Job."""
    manager, workers = envs
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "mk-job", "namespace": NS,
                        "labels": {"kueue.x-k8s.io/queue-name": LOCAL_QUEUE}},
           "spec": {"backoffLimit": 0, "template": {
               "metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: "4s"}},
               "spec": {"restartPolicy": "Never", "containers": [{
                   "name": "main", "image": "registry.example/fake:1",
                   "resources": {"requests": {"cpu": "200m"}}}]}}}}
    created = await manager.create(job)
    assert created["spec"].get("managedBy") == MULTIKUEUE_CONTROLLER  # Kueue's webhook
    seen_on = await _run_until(manager, workers, JOB_GVK, "mk-job", lambda obj: is_true(
        obj, "Complete"))
    assert len(seen_on) == 1, f"the Job ran on {sorted(seen_on) or 'no worker'}"
    assert not [p for p in (await manager.list(POD_GVK, namespace=NS)).items
                if p["metadata"]["name"].startswith("mk-job")], "a pod ran on the manager"
    await manager.delete(JOB_GVK, "mk-job", namespace=NS,
                         propagation_policy=PropagationPolicy.BACKGROUND)


async def _run_until(manager: RestClient, workers: dict[str, RestClient], gvk: GVK,
                     name: str, done: Callable[[Object], bool]) -> set[str]:
    """Wait until the manager's object is ``done`` and its Workload Finished; return the
    workers a copy of it was seen on meanwhile, and check none is left."""
    seen_on: set[str] = set()

    async def watch_workers() -> None:
        while True:
            for wname, client in workers.items():
                if name in await _names_on(client, gvk):
                    seen_on.add(wname)
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch_workers())
    try:
        async def finished() -> bool:
            obj = await manager.get(gvk, name, namespace=NS)
            wl = await workload_of(manager, obj)
            return done(obj) and wl is not None and is_true(wl, "Finished")

        await eventually(f"{gvk.kind} {name} to finish on the manager cluster", finished, 180)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher

    async def no_copy_left() -> bool:
        return all([name not in await _names_on(client, gvk) for client in workers.values()])

    await eventually(f"the workers' copies of {name} to be removed", no_copy_left, 120)
    return seen_on


async def test_jobflow_runs_on_one_worker_and_finishes_on_both_sides(
        envs: tuple[RestClient, dict[str, RestClient]]) -> None:
    """Kueue's generic adapter copies the JobFlow (managedBy removed) to a worker, where
    our DAG controller runs its steps; the worker's status (steps, state) is mirrored
    onto the manager's JobFlow, whose own controller leaves it alone."""
    manager, workers = envs
    flow = jobflow("mk-flow", LOCAL_QUEUE, [step("a", cpu="200m", run="2s"),
                                            step("b", cpu="200m", run="2s", deps=("a",))])
    created = await manager.create(flow)
    assert created["spec"].get("managedBy") == MULTIKUEUE_CONTROLLER
    seen_on = await _run_until(manager, workers, JOBFLOW_GVK, "mk-flow",
                               lambda obj: state_of(obj) == "Succeed")
    assert len(seen_on) == 1, f"the JobFlow ran on {sorted(seen_on) or 'no worker'}"
    obj = await manager.get(JOBFLOW_GVK, "mk-flow", namespace=NS)
    assert {f["name"]: f["phase"] for f in obj["status"]["flows"]} == {
        "a": "Succeeded", "b": "Succeeded"}, "the worker's step status is mirrored"
    assert not [j for j in (await manager.list(JOB_GVK, namespace=NS)).items
                if j["metadata"]["name"].startswith("mk-flow")], "a step ran on the manager"
    await manager.delete(JOBFLOW_GVK, "mk-flow", namespace=NS)


async def test_daemonjob_runs_its_declared_nodes_on_one_worker(
        envs: tuple[RestClient, dict[str, RestClient]]) -> None:
    """A MultiKueue DaemonJob declares its nodes (both workers have them): the manager's
    Workload counts them, the chosen worker runs exactly those."""
    manager, workers = envs
    nodes = ["kwok-on-demand-0", "kwok-on-demand-1"]
    dj = daemonjob("mk-dj", LOCAL_QUEUE, cpu="100m", run="2s")
    dj["metadata"]["annotations"] = {NODES_ANNOTATION: json.dumps(nodes)}
    created = await manager.create(dj)
    assert created["spec"].get("managedBy") == MULTIKUEUE_CONTROLLER
    wl = await eventually("the DaemonJob's Workload", lambda: workload_of(manager, created))
    assert wl["spec"]["podSets"][0]["count"] == len(nodes)
    seen_on = await _run_until(manager, workers, DAEMONJOB_GVK, "mk-dj",
                               lambda obj: dj_state(obj) == "Succeed")
    assert len(seen_on) == 1, f"the DaemonJob ran on {sorted(seen_on) or 'no worker'}"
    obj = await manager.get(DAEMONJOB_GVK, "mk-dj", namespace=NS)
    assert sorted(n["name"] for n in obj["status"]["nodes"]) == nodes
    await manager.delete(DAEMONJOB_GVK, "mk-dj", namespace=NS)


async def test_a_lost_worker_s_job_completes_on_the_other_and_is_not_duplicated(
        envs: tuple[RestClient, dict[str, RestClient]],
        multikueue_clusters: tuple[MultiKueueClusters, MultiKueueEnvironment]) -> None:
    """The worker running a JobFlow loses its API server: after the worker-lost timeout
    (30 s here) Kueue requeues the Workload and it completes on the other worker; when
    the lost worker returns, its stale copy is removed and the JobFlow ran to success
    once."""
    manager, workers = envs
    _, env = multikueue_clusters
    flow = jobflow("mk-lost", LOCAL_QUEUE, [step("a", cpu="200m", run="25s")])
    await manager.create(flow)

    async def running_on() -> str | None:
        for name, client in workers.items():
            if "mk-lost" in await _names_on(client, JOBFLOW_GVK):
                return name
        return None

    lost = await eventually("the JobFlow to reach a worker", running_on, 120)
    other = next(name for name in workers if name != lost)
    env.workers[lost].stop_component("kube-apiserver")
    try:
        async def moved() -> bool:
            return "mk-lost" in await _names_on(workers[other], JOBFLOW_GVK)

        await eventually(f"the JobFlow to be dispatched to {other}", moved, 180)

        async def succeeded() -> bool:
            obj = await manager.get(JOBFLOW_GVK, "mk-lost", namespace=NS)
            wl = await workload_of(manager, obj)
            return state_of(obj) == "Succeed" and wl is not None and is_true(wl, "Finished")

        await eventually("the JobFlow to succeed on the manager cluster", succeeded, 180)
        wl = await workload_of(manager, await manager.get(JOBFLOW_GVK, "mk-lost",
                                                          namespace=NS))
        assert wl is not None
        (check,) = wl["status"]["admissionChecks"]
        assert f'"{other}"' in check["message"], check
    finally:
        await asyncio.to_thread(env.workers[lost].start_component, "kube-apiserver")

    async def nothing_left() -> bool:
        return all(["mk-lost" not in await _names_on(client, JOBFLOW_GVK)
                    for client in workers.values()])

    await eventually("no copy left on either worker once the lost one returns",
                     nothing_left, 180)
    flows = [f for f in (await manager.list(JOBFLOW_GVK, namespace=NS)).items
             if f["metadata"]["name"] == "mk-lost"]
    assert len(flows) == 1 and state_of(flows[0]) == "Succeed"
    await manager.delete(JOBFLOW_GVK, "mk-lost", namespace=NS)
