"""Our batch/v1 Job reconciler against real Kueue, side by side with Kueue's own.

Two real clusters (``jobframework.testing.cluster``) run the same scenarios at once:

* ``kueue``: the session cluster (``cluster_info``), where Kueue's built-in ``batch/job``
  integration manages Jobs (its webhook suspends them, its reconciler makes Workloads);
* ``python``: a second cluster started by this module where Kueue's ``batch/job``
  integration is **off** (``integrations.frameworks`` lists only JobSet, whose CRD is not
  installed) and ``Job.v1.batch`` is in ``integrations.externalFrameworks``, so Kueue's
  core still admits, preempts and finishes Workloads owned by Jobs. Our manager runs
  in-process: ``integrations.batchjob`` through ``setup_controllers`` on a
  :class:`~jobframework.runtime.manager.Manager` with a RestClient from the cluster's
  kubeconfig, and its webhook served on loopback and registered by URL, so Jobs are
  created suspended by *our* webhook.

Each scenario asserts the Kueue behaviour on both sides, then compares what the two
controllers wrote: Workload names, labels, finalizers, owner references, specs,
admissions and conditions (type, status, reason, message) must be equal once UIDs are
factored out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from integrations.batchjob import FRAMEWORK_NAME
from integrations.batchjob import register as register_batchjob
from jobframework import constants as c
from jobframework.integrations import IntegrationManager
from jobframework.naming import get_workload_name_for_owner_with_gvk
from jobframework.reconciler import ReconcilerOptions, setup_controllers
from jobframework.runtime import errors
from jobframework.runtime.client.rest import RestClient, Timeouts
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK
from jobframework.testing.cluster import (
    COMPLETE_DELAY_ANNOTATION,
    EXTERNAL_FRAMEWORKS,
    FAIL_ANNOTATION,
    FLAVOR_LABEL,
    QUEUE_LABEL,
    ClusterInfo,
    LocalCluster,
    Topology,
    cache_root,
)
from jobframework.webhook import (
    WebhookServer,
    WebhookSpec,
    mutating_webhook_configuration,
    rule,
    validating_webhook_configuration,
    write_serving_certs,
)

from .helpers import condition, eventually, is_true

pytestmark = [pytest.mark.cluster, pytest.mark.asyncio(loop_scope="module")]

JOB = GVK("batch", "v1", "Job")
POD = GVK("", "v1", "Pod")
EVENT = GVK("events.k8s.io", "v1", "Event")
NAMESPACE = GVK("", "v1", "Namespace")
WPC = GVK("kueue.x-k8s.io", "v1beta2", "WorkloadPriorityClass")
WORKLOAD = GVK("kueue.x-k8s.io", "v1beta2", "Workload")
MUTATING = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"

NS = "jf-e2e"
QUEUE = "jf-queue"
PREEMPT_QUEUE = "jf-preempt-queue"
TIMEOUT = 120.0
JSON = dict[str, Any]

#: Kueue's built-in batch/job off; Jobs are an external framework. Kueue defaults an
#: empty ``frameworks`` list to ``[batch/job]``, so one integration whose API is absent
#: (Kueue waits for its CRD in the background) stands in.
PYTHON_TOPOLOGY = Topology(
    frameworks=("jobset.x-k8s.io/jobset",),
    external_frameworks=(*EXTERNAL_FRAMEWORKS, "Job.v1.batch"),
)
_NOT_SYSTEM = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                     "values": ["kube-system", "kueue-system"]}]}


# --------------------------------------------------------------------------- helpers


def conditions(obj: JSON) -> list[tuple[str, str, str, str]]:
    """Conditions without timestamps, sorted by type."""
    return sorted((cd["type"], cd["status"], cd.get("reason", ""), cd.get("message", ""))
                  for cd in (obj.get("status") or {}).get("conditions") or [])


def job_manifest(name: str, *, queue: str = QUEUE, cpu: str = "1", parallelism: int = 1,
                 run: str = "2s", priority_class: str | None = None,
                 fail: bool = False) -> JSON:
    labels = {QUEUE_LABEL: queue}
    if priority_class:
        labels[PRIORITY_LABEL] = priority_class
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "parallelism": parallelism, "completions": parallelism,
            **({"backoffLimit": 0} if fail else {}),
            "template": {
                "metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: run,
                                             **({FAIL_ANNOTATION: "true"} if fail else {})}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox",
                                    "resources": {"requests": {"cpu": cpu,
                                                               "memory": "100Mi"}}}],
                },
            },
        },
    }


@dataclass
class Env:
    """One cluster as a scenario sees it."""

    name: str
    info: ClusterInfo
    client: RestClient

    async def create_job(self, manifest: JSON) -> JSON:
        created = await self.client.create(manifest)
        # Both webhooks (Kueue's and ours) suspend a queued Job on creation.
        assert created["spec"]["suspend"] is True, f"{self.name}: the webhook suspends Jobs"
        return created

    async def job(self, name: str) -> JSON:
        return await self.client.get(JOB, name, namespace=NS)

    async def workload(self, job: JSON) -> JSON | None:
        uid = job["metadata"]["uid"]
        listed = await self.client.list(WORKLOAD, namespace=NS,
                                        label_selector=f"{c.JOB_UID_LABEL}={uid}")
        items = [w for w in listed.items
                 if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences", []))]
        assert len(items) <= 1, f"{self.name}: one Workload per Job, got {len(items)}"
        return items[0] if items else None

    async def wait_workload(self, job: JSON, what: str,
                            check: Callable[[JSON], bool]) -> JSON:
        async def probe() -> JSON | None:
            wl = await self.workload(job)
            return wl if wl is not None and check(wl) else None

        found: JSON = await eventually(
            f"{self.name}: Workload of {job['metadata']['name']} {what}", probe)
        return found

    async def wait_job(self, name: str, what: str, check: Callable[[JSON], bool]) -> JSON:
        async def probe() -> JSON | None:
            job = await self.job(name)
            return job if check(job) else None

        found: JSON = await eventually(f"{self.name}: Job {name} {what}", probe)
        return found

    async def events_about(self, *objects: JSON,
                           others: tuple[JSON, ...] = ()) -> list[tuple[str, str, str, str]]:
        """(type, reason, note, reporting controller) of Kueue's events about ``objects``
        (events.k8s.io/v1), sorted; the Job controller's own events are left out. Names
        and UIDs of ``objects`` and ``others`` are replaced by placeholders."""
        uids = {o["metadata"]["uid"] for o in objects}
        names = {o["metadata"][key]: f"<{o['kind']} {i} {key}>"
                 for i, o in enumerate((*objects, *others)) for key in ("name", "uid")}
        listed = await self.client.list(EVENT, namespace=NS)
        out = set()
        for e in listed.items:
            if (e.get("regarding") or {}).get("uid") not in uids or \
                    e.get("reportingController") in ("job-controller", "default-scheduler"):
                continue
            # Names hash UIDs and wait times depend on the machine's load.
            note = re.sub(r"was \d+s", "was <n>s", e.get("note", ""))
            for name, placeholder in sorted(names.items(), key=lambda kv: -len(kv[0])):
                note = note.replace(name, placeholder)
            out.add((e.get("type", ""), e.get("reason", ""), note,
                     e.get("reportingController", "")))
        return sorted(out)

    @contextlib.asynccontextmanager
    async def condition_history(
            self, job_name: str, ctype: str) -> AsyncIterator[list[tuple[str, str, str]]]:
        """Every distinct (status, reason, message) the ``ctype`` condition of the Workload
        owned by Job ``job_name`` takes while the block runs, in order.

        It follows a watch of the namespace's Workloads from before the block, so no
        write is missed however quickly the next one replaces it.
        """
        history: list[tuple[str, str, str]] = []
        start = (await self.client.list(WORKLOAD, namespace=NS)).resource_version

        async def follow() -> None:
            rv = start
            while True:  # the stream ends after a quiet minute: watch again from ``rv``
                async for event in self.client.watch(WORKLOAD, namespace=NS,
                                                     resource_version=rv):
                    obj = event.object
                    rv = obj["metadata"]["resourceVersion"]
                    owners = obj["metadata"].get("ownerReferences") or []
                    if event.type == "BOOKMARK" or not any(
                            o.get("kind") == "Job" and o.get("name") == job_name
                            for o in owners):
                        continue
                    cond = condition(obj, ctype)
                    if cond is None:
                        continue
                    entry = (cond["status"], cond.get("reason", ""), cond.get("message", ""))
                    if not history or history[-1] != entry:
                        history.append(entry)

        task = asyncio.create_task(follow(), name=f"{self.name}-{ctype}-history")
        try:
            yield history
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def create_priority_class(self, name: str, value: int) -> None:
        wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
               "metadata": {"name": name}, "value": value}
        await self.client.create(wpc)

    async def delete_priority_class(self, name: str) -> None:
        with contextlib.suppress(errors.NotFound):
            await self.client.delete(WPC, name)

    async def pods(self, job_name: str) -> list[JSON]:
        listed = await self.client.list(
            POD, namespace=NS, label_selector=f"batch.kubernetes.io/job-name={job_name}")
        return list(listed.items)


def uid_free(obj: Any, job: JSON) -> Any:
    """``obj`` with the Job's UID (and resourceVersions) replaced, for comparing clusters."""
    text = json.dumps(obj, sort_keys=True).replace(job["metadata"]["uid"], "<job-uid>")
    return json.loads(text)


def identity(wl: JSON, job: JSON) -> JSON:
    """What a Workload's creator decides: name, labels, annotations, finalizers, owners, spec."""
    meta = wl["metadata"]
    expected = get_workload_name_for_owner_with_gvk(
        job["metadata"]["name"], job["metadata"]["uid"], JOB)
    # The name hashes the Job's UID, which differs between clusters: compare the rule.
    name = "<job-<name>-<hash of uid>>" if meta["name"] == expected else meta["name"]
    out: JSON = uid_free({
        "name": name, "labels": meta.get("labels"),
        "annotations": meta.get("annotations"), "finalizers": meta.get("finalizers"),
        "ownerReferences": meta.get("ownerReferences"), "spec": wl["spec"],
    }, job)
    return out


def is_complete(job: JSON) -> bool:
    return is_true(job, "Complete")


# --------------------------------------------------------------------------- clusters


async def _setup_queues(client: RestClient) -> None:
    """A namespace with two LocalQueues: a 2-flavor queue and a preempting one."""
    objects: list[JSON] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
         "metadata": {"name": "jf-low"}, "value": 100},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
         "metadata": {"name": "jf-high"}, "value": 1000},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
         "metadata": {"name": "jf-cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory"],
             "flavors": [{"name": f, "resources": [{"name": "cpu", "nominalQuota": "4"},
                                                   {"name": "memory", "nominalQuota": "8Gi"}]}
                         for f in ("on-demand", "spot")]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
         "metadata": {"name": "jf-preempt-cq"},
         "spec": {"namespaceSelector": {},
                  "preemption": {"withinClusterQueue": "LowerPriority"},
                  "resourceGroups": [{
                      "coveredResources": ["cpu", "memory"],
                      "flavors": [{"name": "on-demand",
                                   "resources": [{"name": "cpu", "nominalQuota": "2"},
                                                 {"name": "memory", "nominalQuota": "8Gi"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": QUEUE, "namespace": NS}, "spec": {"clusterQueue": "jf-cq"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": PREEMPT_QUEUE, "namespace": NS},
         "spec": {"clusterQueue": "jf-preempt-cq"}},
    ]
    for obj in objects:
        gvk, name = GVK.of(obj), obj["metadata"]["name"]
        namespace = obj["metadata"].get("namespace")

        async def not_terminating(gvk: GVK = gvk, name: str = name,
                                  namespace: str | None = namespace) -> bool:
            # A reused session cluster may still be removing a previous run's objects.
            try:
                found = await client.get(gvk, name, namespace=namespace)
            except errors.NotFound:
                return True
            return "deletionTimestamp" not in found["metadata"]

        await eventually(f"{gvk.kind} {name} not terminating", not_terminating)
        with contextlib.suppress(errors.AlreadyExists):
            await client.create(obj)
    cq_gvk = GVK("kueue.x-k8s.io", "v1beta2", "ClusterQueue")
    for name in ("jf-cq", "jf-preempt-cq"):
        async def active(name: str = name) -> bool:
            return is_true(await client.get(cq_gvk, name), "Active")

        await eventually(f"ClusterQueue {name} Active", active)

    async def service_account() -> bool:
        try:
            await client.get(GVK("", "v1", "ServiceAccount"), "default", namespace=NS)
            return True
        except errors.NotFound:
            return False

    await eventually(f"ServiceAccount {NS}/default", service_account)


async def _remove_queues(client: RestClient) -> None:
    """Best-effort removal of what :func:`_setup_queues` made (not waited for)."""
    kueue = "kueue.x-k8s.io", "v1beta2"
    with contextlib.suppress(errors.ApiError):
        await client.delete(NAMESPACE, NS)
    for kind, name in (("ClusterQueue", "jf-cq"), ("ClusterQueue", "jf-preempt-cq"),
                       ("WorkloadPriorityClass", "jf-low"),
                       ("WorkloadPriorityClass", "jf-high")):
        with contextlib.suppress(errors.ApiError):
            await client.delete(GVK(*kueue, kind), name)


@contextlib.asynccontextmanager
async def _python_integration(info: ClusterInfo, client: RestClient) -> AsyncIterator[None]:
    """Our batch/job integration, in-process, with its webhook registered by URL."""
    im = IntegrationManager()
    register_batchjob(im)
    mgr = Manager(client, graceful_shutdown_timeout=10.0, cache_sync_timeout=TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="jf-batchjob-webhook-") as cert_dir:
        certs = write_serving_certs(cert_dir, ("127.0.0.1", "localhost"))
        server = WebhookServer(cert_dir=cert_dir, shutdown_timeout=5.0)
        # Kueue v0.19 defaults ``waitForPodsReady`` to a non-nil struct, which *enables*
        # it (``waitforpodsready.Enabled`` is ``cfg != nil``): its Job reconciler writes
        # ``PodsReady``. Same configuration here.
        options = ReconcilerOptions(wait_for_pods_ready=True)
        done = await setup_controllers(mgr, im, options=options,
                                       webhook_server=server,
                                       enabled_frameworks=[FRAMEWORK_NAME])
        assert done == {FRAMEWORK_NAME}
        await server.listen()
        task = asyncio.create_task(mgr.start(), name="jf-batchjob-manager")
        names: list[tuple[GVK, str]] = []
        try:
            await asyncio.wait_for(mgr.elected(), TIMEOUT)
            url = server.url()
            # As Kueue's markers: defaulting on create, validation on create and update.
            hooks = [
                (MUTATING, mutating_webhook_configuration("jf-batchjob", [WebhookSpec(
                    name="mjob.jobframework.test", path="/mutate-batch-v1-job",
                    rules=[rule("batch", "v1", "jobs", ("CREATE",))],
                    namespace_selector=_NOT_SYSTEM, timeout_seconds=10)],
                    url=url, ca_bundle=certs.ca_bundle)),
                (VALIDATING, validating_webhook_configuration("jf-batchjob", [WebhookSpec(
                    name="vjob.jobframework.test", path="/validate-batch-v1-job",
                    rules=[rule("batch", "v1", "jobs", ("CREATE", "UPDATE"))],
                    namespace_selector=_NOT_SYSTEM, timeout_seconds=10)],
                    url=url, ca_bundle=certs.ca_bundle)),
            ]
            for gvk, manifest in hooks:
                with contextlib.suppress(errors.NotFound):
                    await client.delete(gvk, manifest["metadata"]["name"])
                await client.create(manifest)
                names.append((gvk, manifest["metadata"]["name"]))
            probe = job_manifest("jf-webhook-probe")

            async def suspended_by_our_webhook() -> bool:
                out = await client.create(probe, dry_run=True)
                return bool(out["spec"].get("suspend"))

            await eventually("our Job webhook to suspend a queued Job (dry run)",
                             suspended_by_our_webhook)
            yield
        finally:
            for gvk, name in reversed(names):
                with contextlib.suppress(errors.ApiError):
                    await client.delete(gvk, name)
            await mgr.stop()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task
            await server.stop()


@pytest.fixture(scope="module")
def python_cluster(request: pytest.FixtureRequest) -> Any:
    """A second cluster whose Kueue leaves batch/v1 Jobs to an external controller.

    ``KUEUE_JF_PYTHON_CLUSTER_DIR`` names the state dir of one already started with
    :data:`PYTHON_TOPOLOGY` (reused and left running), which is quick while iterating.
    """
    reuse = os.environ.get("KUEUE_JF_PYTHON_CLUSTER_DIR")
    if reuse:
        info = LocalCluster(Path(reuse)).info()
        if info is None:
            pytest.fail(f"KUEUE_JF_PYTHON_CLUSTER_DIR={reuse} but no cluster runs there")
        yield info
        return
    state_dir = cache_root() / "clusters" / f"pytest-{os.getpid()}-python"
    cluster = LocalCluster(state_dir, PYTHON_TOPOLOGY)
    started = time.monotonic()
    info = cluster.up()
    print(f"\npython-side cluster up in {time.monotonic() - started:.1f}s")
    failed_before = request.session.testsfailed
    try:
        yield info
    finally:
        cluster.down()
        if request.session.testsfailed == failed_before:
            shutil.rmtree(state_dir, ignore_errors=True)
        else:
            print(f"\npython-side cluster logs kept in {state_dir}/logs")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def envs(cluster_info: ClusterInfo,
               python_cluster: ClusterInfo) -> AsyncIterator[tuple[Env, Env]]:
    """(Kueue's own integration, ours), each with its queues; ours running in-process."""
    timeouts = Timeouts(read=30.0, watch_inactivity=60.0)
    async with await RestClient.from_kubeconfig(cluster_info.kubeconfig,
                                                timeouts=timeouts) as kc, \
            await RestClient.from_kubeconfig(python_cluster.kubeconfig,
                                             timeouts=timeouts) as pc:
        await asyncio.gather(_setup_queues(kc), _setup_queues(pc))
        try:
            async with _python_integration(python_cluster, pc):
                yield Env("kueue", cluster_info, kc), Env("python", python_cluster, pc)
        finally:
            await _remove_queues(kc)  # the session cluster outlives this module


async def both(envs: tuple[Env, Env],
               scenario: Callable[[Env], Awaitable[Any]]) -> tuple[Any, Any]:
    """Run ``scenario`` on both clusters at once; return (kueue's result, ours)."""
    kueue, python = await asyncio.gather(scenario(envs[0]), scenario(envs[1]))
    return kueue, python


def suffix() -> str:
    return secrets.token_hex(3)


# --------------------------------------------------------------------------- scenarios


async def test_job_is_admitted_runs_on_kwok_nodes_and_finishes(envs: tuple[Env, Env]) -> None:
    name = f"sample-{suffix()}"

    async def scenario(env: Env) -> JSON:
        job = await env.create_job(job_manifest(name, parallelism=2, run="2s"))
        wl = await env.wait_workload(job, "exists", lambda wl: True)
        first = identity(wl, job)
        assert wl["metadata"]["name"] == get_workload_name_for_owner_with_gvk(
            name, job["metadata"]["uid"], JOB)
        admitted = await env.wait_workload(job, "admitted", lambda wl: is_true(wl, "Admitted"))
        running = await env.wait_job(name, "unsuspended",
                                     lambda j: j["spec"].get("suspend") is False)
        node_selector = running["spec"]["template"]["spec"].get("nodeSelector")
        assert node_selector == {FLAVOR_LABEL: "on-demand"}, env.name

        async def pods_on_kwok() -> list[JSON] | None:
            pods = await env.pods(name)
            bound = [p for p in pods if p["spec"].get("nodeName", "").startswith("kwok-")]
            return pods if len(bound) == 2 else None

        pods = await eventually(f"{env.name}: 2 pods bound to kwok nodes", pods_on_kwok)
        assert {p["spec"]["nodeName"].rsplit("-", 1)[0] for p in pods} == {"kwok-on-demand"}
        await env.wait_job(name, "complete", is_complete)
        finished = await env.wait_workload(job, "finished", lambda wl: is_true(wl, "Finished"))
        # The resource-in-use finalizer goes once the Workload is finished (Kueue releases
        # it in a later reconcile, so this waits rather than snapshots).
        await env.wait_workload(job, "released", lambda wl: not wl["metadata"].get("finalizers"))

        async def all_events() -> list[tuple[str, str, str, str]] | None:
            # Events are sent asynchronously by each side's broadcaster.
            events = await env.events_about(job, finished)
            return events if any(e[1] == "FinishedWorkload" for e in events) else None

        events = await eventually(f"{env.name}: the FinishedWorkload event", all_events)
        return {"identity": first, "admission": uid_free(admitted["status"]["admission"], job),
                "finished": conditions(uid_free(finished, job)), "events": events}

    kueue, python = await both(envs, scenario)
    assert python["identity"] == kueue["identity"]
    assert python["identity"]["finalizers"] == [c.RESOURCE_IN_USE_FINALIZER_NAME]
    assert python["admission"] == kueue["admission"]
    assert python["finished"] == kueue["finished"]
    # Kueue copies the Job's Complete condition message ("Reached expected number of
    # succeeded pods") into Finished.
    assert ("Finished", "True", "Succeeded") in [cd[:3] for cd in python["finished"]]
    assert ("PodsReady", "True", "Started") in [cd[:3] for cd in python["finished"]]
    # The job reconciler's events (reason, note, reporting controller) as Kueue's, next to
    # the ones Kueue's scheduler reports about the Workload.
    controller = "batch/job-kueue-controller"
    assert {(e[1], e[3]) for e in python["events"]} >= {
        ("CreatedWorkload", controller), ("Started", controller),
        ("FinishedWorkload", controller), ("QuotaReserved", "kueue-admission")}
    assert python["events"] == kueue["events"]


async def test_job_that_does_not_fit_waits_until_quota_frees(envs: tuple[Env, Env]) -> None:
    tag = suffix()
    names = [f"fill-{i}-{tag}" for i in range(2)]
    late = f"late-{tag}"

    async def scenario(env: Env) -> JSON:
        # Two 4-cpu Jobs take both flavors of jf-cq; the third must wait.
        fill = [await env.create_job(job_manifest(n, cpu="2", parallelism=2, run="6s"))
                for n in names]
        admitted = [await env.wait_workload(j, "admitted", lambda wl: is_true(wl, "Admitted"))
                    for j in fill]
        flavors = sorted(a["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"]
                         for a in admitted)
        assert flavors == ["on-demand", "spot"], env.name
        waiting = await env.create_job(job_manifest(late, cpu="2", parallelism=2, run="2s"))

        def pending(wl: JSON) -> bool:
            cond = condition(wl, "QuotaReserved")
            # Kueue's scheduler and the job reconciler (PodsReady=False/WaitForStart)
            # write in either order: wait for both.
            return cond is not None and cond["status"] == "False" and \
                cond.get("reason") == "Pending" and condition(wl, "PodsReady") is not None

        pending_wl = await env.wait_workload(waiting, "pending", pending)
        job = await env.job(late)
        assert job["spec"]["suspend"] is True, f"{env.name}: a Job without quota stays suspended"
        assert not any(await env.pods(late)), env.name
        # Only one fill Job can have finished while the late one is still pending.
        assert sum([is_complete(await env.job(n)) for n in names]) < 2
        await env.wait_workload(waiting, "admitted", lambda wl: is_true(wl, "Admitted"))
        await env.wait_job(late, "complete", is_complete)
        done = await env.wait_workload(waiting, "finished", lambda wl: is_true(wl, "Finished"))
        return {"pending": [cd[:3] for cd in conditions(pending_wl)],
                "finished": conditions(uid_free(done, waiting))}

    kueue, python = await both(envs, scenario)
    pending = {cd[0]: cd for cd in python["pending"]}
    assert pending["QuotaReserved"] == ("QuotaReserved", "False", "Pending")
    assert pending["PodsReady"] == ("PodsReady", "False", "WaitForStart")
    assert python["pending"] == kueue["pending"]
    assert python["finished"] == kueue["finished"]


async def test_preemption_suspends_restores_requeues_and_reruns(envs: tuple[Env, Env]) -> None:
    tag = suffix()
    low, high = f"low-{tag}", f"high-{tag}"

    async def scenario(env: Env) -> JSON:
        # Kueue's scheduler soon rewrites the QuotaReserved reason the job reconciler
        # writes on eviction: only a watch sees every reason both wrote, in order.
        async with env.condition_history(low, "QuotaReserved") as reserved:
            out = await run(env)
            last = condition(out.pop("released"), "QuotaReserved")
            assert last is not None, env.name
            final = (last["status"], last["reason"], last["message"])

            async def caught_up() -> bool:
                return bool(reserved) and reserved[-1] == final

            await eventually(f"{env.name}: the watch to see the final QuotaReserved", caught_up)
        reasons: list[tuple[str, str]] = []
        for status, reason, _ in reserved:  # messages name UIDs and the scheduler's attempts
            if not reasons or reasons[-1] != (status, reason):
                reasons.append((status, reason))
        return {**out, "reserved": reasons}

    async def run(env: Env) -> JSON:
        low_job = await env.create_job(job_manifest(
            low, queue=PREEMPT_QUEUE, cpu="2", run="15s", priority_class="jf-low"))
        original_template = low_job["spec"]["template"]
        await env.wait_workload(low_job, "admitted", lambda wl: is_true(wl, "Admitted"))
        await env.wait_job(low, "running", lambda j: (j.get("status") or {}).get("active", 0) >= 1)
        high_job = await env.create_job(job_manifest(
            high, queue=PREEMPT_QUEUE, cpu="2", run="2s", priority_class="jf-high"))

        def requeued_after_preemption(wl: JSON) -> bool:
            # Kueue's core evicts; the job reconciler stops the Job, then releases the
            # quota reservation and sets Requeued=True (the state the Workload keeps).
            return (condition(wl, "Evicted") or {}).get("reason") == "Preempted" and \
                is_true(wl, "Requeued") and not is_true(wl, "QuotaReserved") and \
                not is_true(wl, "PodsReady")

        evicted = await env.wait_workload(low_job, "preempted and requeued",
                                          requeued_after_preemption)
        stopped = await env.wait_job(low, "suspended again",
                                     lambda j: j["spec"].get("suspend") is True)
        # The admission's node selector is gone again: the template is the original one.
        assert stopped["spec"]["template"] == original_template, env.name
        assert is_true(evicted, "Preempted"), env.name
        await env.wait_job(high, "complete", is_complete)
        await env.wait_workload(high_job, "finished", lambda wl: is_true(wl, "Finished"))
        readmitted = await env.wait_workload(low_job, "admitted again",
                                             lambda wl: is_true(wl, "Admitted"))
        rerun = await env.wait_job(low, "unsuspended again",
                                   lambda j: j["spec"].get("suspend") is False)
        assert rerun["spec"]["template"]["spec"]["nodeSelector"] == {FLAVOR_LABEL: "on-demand"}
        await env.wait_job(low, "complete", is_complete)
        done = await env.wait_workload(low_job, "finished", lambda wl: is_true(wl, "Finished"))
        released = await env.wait_workload(low_job, "released",
                                           lambda wl: not wl["metadata"].get("finalizers"))
        high_wl = await env.workload(high_job)
        assert high_wl is not None

        async def all_events() -> list[tuple[str, str, str, str]] | None:
            events = await env.events_about(low_job, released,
                                            others=(high_job, high_wl))
            return events if any(e[1] == "FinishedWorkload" for e in events) else None

        return {
            "events": await eventually(f"{env.name}: the FinishedWorkload event", all_events),
            "evicted": [cd[:3] for cd in conditions(evicted)],
            # PodsReady flips as soon as the re-run's pod starts: not part of the snapshot.
            "readmitted": [cd[:3] for cd in conditions(readmitted) if cd[0] != "PodsReady"],
            "requeue_state": (readmitted.get("status") or {}).get("requeueState"),
            "finished": [cd[:3] for cd in conditions(done)],
            "identity": identity(released, low_job),
            "released": released,
        }

    kueue, python = await both(envs, scenario)
    # Admitted, released on eviction with the reason v0.19.2 writes (Pending, as the
    # scheduler's own; PendingEvaluation would need UnadmittedWorkloadsObservability),
    # admitted again.
    assert python["reserved"] == [("True", "QuotaReserved"), ("False", "Pending"),
                                  ("True", "QuotaReserved")]
    assert python["reserved"] == kueue["reserved"]
    evicted = {cd[0]: cd for cd in python["evicted"]}
    assert evicted["Evicted"] == ("Evicted", "True", "Preempted")
    assert evicted["Requeued"] == ("Requeued", "True", "Preempted")
    assert evicted["Preempted"] == ("Preempted", "True", "InClusterQueue")
    # v0.19.2 (UnadmittedWorkloadsObservability off): the job reconciler releases the
    # reservation with QuotaReserved=False/Pending, the reason Kueue's scheduler also
    # writes when the Workload does not fit yet; Admitted follows the lost reservation.
    assert evicted["QuotaReserved"] == ("QuotaReserved", "False", "Pending")
    assert evicted["Admitted"] == ("Admitted", "False", "NoReservation")
    assert python["evicted"] == kueue["evicted"]
    assert python["readmitted"] == kueue["readmitted"]
    assert python["requeue_state"] == kueue["requeue_state"]
    assert python["finished"] == kueue["finished"]
    assert python["identity"] == kueue["identity"]
    reasons = {(e[1], e[3]) for e in python["events"]}
    assert ("Stopped", "batch/job-kueue-controller") in reasons
    assert python["events"] == kueue["events"]


async def test_failed_job_finishes_its_workload_as_failed(envs: tuple[Env, Env]) -> None:
    name = f"failing-{suffix()}"

    async def scenario(env: Env) -> JSON:
        job = await env.create_job(job_manifest(name, run="1s", fail=True))
        await env.wait_workload(job, "admitted", lambda wl: is_true(wl, "Admitted"))
        failed = await env.wait_job(name, "failed", lambda j: is_true(j, "Failed"))
        finished = await env.wait_workload(job, "finished", lambda wl: is_true(wl, "Finished"))
        await env.wait_workload(job, "released", lambda wl: not wl["metadata"].get("finalizers"))
        # PodsReady ends True/Started or False/WaitForRecovery, depending on whether the
        # reconciler saw the Job between its pod failing and its Failed condition (both
        # sides alike): it is left out.
        return {"finished": [cd for cd in conditions(uid_free(finished, job))
                             if cd[0] != "PodsReady"],
                "job_failed": (condition(failed, "Failed") or {}).get("reason")}

    kueue, python = await both(envs, scenario)
    assert python["job_failed"] == kueue["job_failed"] == "BackoffLimitExceeded"
    assert ("Finished", "True", "Failed") in [cd[:3] for cd in python["finished"]]
    assert python["finished"] == kueue["finished"]


async def test_pods_ready_condition_goes_wait_for_start_then_started(
        envs: tuple[Env, Env]) -> None:
    """waitForPodsReady is on (Kueue v0.19's default configuration): the job reconciler
    writes PodsReady=False/WaitForStart until every pod of the admitted Job is ready, then
    PodsReady=True/Started; the whole history is compared, message included."""
    name = f"ready-{suffix()}"

    async def scenario(env: Env) -> JSON:
        async with env.condition_history(name, "PodsReady") as history:
            job = await env.create_job(job_manifest(name, parallelism=2, run="3s"))
            await env.wait_job(name, "complete", is_complete)
            done = await env.wait_workload(job, "finished", lambda wl: is_true(wl, "Finished"))
            last = condition(done, "PodsReady")
            assert last is not None, env.name
            final = (last["status"], last["reason"], last["message"])

            async def caught_up() -> bool:
                return bool(history) and history[-1] == final

            await eventually(f"{env.name}: the watch to see the final PodsReady", caught_up)
            return {"history": list(history)}

    kueue, python = await both(envs, scenario)
    assert python["history"] == [
        ("False", "WaitForStart", c.MSG_PODS_READY_WAIT_FOR_START),
        ("True", "Started", c.MSG_PODS_READY_RUNNING),
    ]
    assert python["history"] == kueue["history"]


async def test_priority_class_label_resolves_without_defaulting(envs: tuple[Env, Env]) -> None:
    """The ``kueue.x-k8s.io/priority-class`` label, with and without the WorkloadPriorityClass
    it names, and with and without a WorkloadPriorityClass named ``default``.

    v0.19.2 keeps ``WorkloadPriorityClassDefaulting`` off: neither webhook adds a
    ``priority-class: default`` label even when that class exists. A labelled Job's
    Workload takes the class's value; a Job naming a missing class gets no Workload (and
    no event) until the class is created.
    """
    tag = suffix()
    missing = f"jf-missing-{tag}"
    default = c.DEFAULT_WORKLOAD_PRIORITY_CLASS_NAME

    async def scenario(env: Env) -> JSON:
        out: JSON = {}
        jobs: dict[str, JSON] = {}
        try:
            # 1. No WorkloadPriorityClass named "default".
            for key, priority_class in (("plain", None), ("labelled", "jf-low"),
                                        ("missing", missing)):
                jobs[key] = await env.create_job(job_manifest(
                    f"{key}-{tag}", run="1s", priority_class=priority_class))
            for key in ("plain", "labelled"):
                wl = await env.wait_workload(jobs[key], "exists", lambda wl: True)
                out[key] = identity(wl, jobs[key])
            # The reconciler cannot build the Workload of a Job whose class is missing.
            assert await env.workload(jobs["missing"]) is None, env.name
            await env.create_priority_class(missing, 50)
            wl = await env.wait_workload(jobs["missing"], "exists once its class exists",
                                         lambda wl: True)
            out["missing"] = identity(wl, jobs["missing"])
            # 2. A WorkloadPriorityClass named "default" exists.
            await env.create_priority_class(default, 10)
            for key, priority_class in (("plain-with-default", None),
                                        ("named-default", default)):
                jobs[key] = await env.create_job(job_manifest(
                    f"{key}-{tag}", run="1s", priority_class=priority_class))
                wl = await env.wait_workload(jobs[key], "exists", lambda wl: True)
                out[key] = identity(wl, jobs[key])
            out["job_labels"] = {key: job["metadata"].get("labels") for key, job in jobs.items()}
            for key, job in jobs.items():
                done = await env.wait_workload(job, "finished",
                                               lambda wl: is_true(wl, "Finished"))

                async def job_events(job: JSON = job,
                                     done: JSON = done) -> list[tuple[str, str, str, str]] | None:
                    # The Workload's name hashes the Job's UID: it is replaced too.
                    events = await env.events_about(job, done)
                    return events if any(e[1] == "FinishedWorkload" for e in events) else None

                out[f"{key}-events"] = await eventually(
                    f"{env.name}: the FinishedWorkload event of {key}", job_events)
        finally:
            await env.delete_priority_class(default)
            await env.delete_priority_class(missing)
        return out

    kueue, python = await both(envs, scenario)

    def priority(key: str) -> tuple[Any, Any]:
        spec = python[key]["spec"]
        return spec.get("priorityClassRef"), spec.get("priority")

    def wpc(name: str) -> JSON:
        return {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}

    assert priority("plain") == (None, 0)
    assert priority("labelled") == (wpc("jf-low"), 100)
    assert priority("missing") == (wpc(missing), 50)
    assert priority("plain-with-default") == (None, 0)
    assert priority("named-default") == (wpc(default), 10)
    # No defaulted label: the Jobs keep exactly the labels they were created with.
    assert python["job_labels"] == {
        "plain": {QUEUE_LABEL: QUEUE}, "plain-with-default": {QUEUE_LABEL: QUEUE},
        "labelled": {QUEUE_LABEL: QUEUE, PRIORITY_LABEL: "jf-low"},
        "missing": {QUEUE_LABEL: QUEUE, PRIORITY_LABEL: missing},
        "named-default": {QUEUE_LABEL: QUEUE, PRIORITY_LABEL: default},
    }
    assert not any(e[1] == c.REASON_WORKLOAD_PRIORITY_CLASS_NOT_FOUND
                   for e in python["missing-events"])
    assert python == kueue


async def test_default_local_queue_as_kueue_applies_it(envs: tuple[Env, Env]) -> None:
    """A LocalQueue named ``default`` in a Job's namespace (Kueue's
    ``DefaultLocalQueueExist``): Kueue's webhook and ours label a Job created without a
    queue name ``queue-name: default`` and suspend it, leave a Job elsewhere alone, refuse
    an update that drops the queue name there, and stop defaulting while the queue is held
    (``stopPolicy: Hold`` takes it out of Kueue's queue manager).

    Ours is ``setup_controllers`` given no queues: it follows the cluster's LocalQueues
    itself. The default queue feeds a ClusterQueue that does not exist, so the labelled
    Job stays suspended (queued) throughout.
    """
    tag = suffix()
    with_default, without_default = f"jf-dlq-{tag}", f"jf-no-dlq-{tag}"
    local_queue = GVK("kueue.x-k8s.io", "v1beta2", "LocalQueue")

    def unqueued(namespace: str, name: str) -> JSON:
        manifest = job_manifest(name, run="1s", cpu="100m")
        manifest["metadata"]["namespace"] = namespace
        del manifest["metadata"]["labels"]
        return manifest

    def queue_of(job: JSON) -> str | None:
        return (job["metadata"].get("labels") or {}).get(QUEUE_LABEL)

    async def scenario(env: Env) -> JSON:
        client, out = env.client, {}
        try:
            for ns in (with_default, without_default):
                await client.create({"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": ns}})
            for ns, name in ((with_default, c.DEFAULT_LOCAL_QUEUE_NAME),
                             (without_default, "jf-other")):
                await client.create({"apiVersion": "kueue.x-k8s.io/v1beta2",
                                     "kind": "LocalQueue",
                                     "metadata": {"name": name, "namespace": ns},
                                     "spec": {"clusterQueue": f"jf-absent-{tag}"}})

            async def defaulted(want: str | None) -> bool:
                # Each webhook learns of the queue from its own watch: dry runs until then.
                probe = await client.create(unqueued(with_default, "jf-probe"), dry_run=True)
                return queue_of(probe) == want

            await eventually(f"{env.name}: the default LocalQueue in the webhook",
                             lambda: defaulted(c.DEFAULT_LOCAL_QUEUE_NAME))
            labelled = await client.create(unqueued(with_default, "jf-job"))
            plain = await client.create(unqueued(without_default, "jf-job"))
            out["created"] = {"labelled": (queue_of(labelled), labelled["spec"]["suspend"]),
                              "plain": (queue_of(plain), plain["spec"]["suspend"])}
            dropped = await env.client.get(JOB, "jf-job", namespace=with_default)
            del dropped["metadata"]["labels"][QUEUE_LABEL]
            try:
                await client.update(dropped)
                out["drop queue name"] = "allowed"
            except errors.ApiError as err:
                # The webhook's own name differs (vjob.kb.io, ours vjob.jobframework.test).
                out["drop queue name"] = (err.code, err.message.split(
                    "denied the request: ", 1)[-1])
            lq = await client.get(local_queue, c.DEFAULT_LOCAL_QUEUE_NAME,
                                  namespace=with_default)
            lq["spec"]["stopPolicy"] = "Hold"
            await client.update(lq)
            await eventually(f"{env.name}: the held LocalQueue out of the webhook",
                             lambda: defaulted(None))
            held = await client.create(unqueued(with_default, "jf-job-held"))
            out["created while held"] = (queue_of(held), held["spec"].get("suspend"))
        finally:
            for ns in (with_default, without_default):
                with contextlib.suppress(errors.ApiError):
                    await client.delete(NAMESPACE, ns)
        return out

    kueue, python = await both(envs, scenario)
    assert python == {
        "created": {"labelled": (c.DEFAULT_LOCAL_QUEUE_NAME, True), "plain": (None, False)},
        "drop queue name": (403, 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid '
                                 'value: "": queue-name must not be empty in namespace '
                                 'with default queue'),
        "created while held": (None, False),
    }
    assert python == kueue
