"""The demo's core loop: apply the seed's JobFlow samples (and two JobFlows that compete
for quota), follow them through Kueue, report the end states.

It needs a cluster whose Kueue lists JobFlow as an external framework, a LocalQueue
(``user-queue``) in the namespace, and our manager running (:func:`run_demo` starts
one in-process unless told otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import importlib
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from integrations.catalog import DEFAULT_INTEGRATIONS
from integrations.deploy import render
from integrations.deploy.check import dry_run_manifests
from integrations.jobflow import JOBFLOW_GVK, JOBTEMPLATE_GVK, load_samples
from integrations.manager import ExternalFrameworkManager, ManagerOptions
from jobframework.runtime.client import Client, PropagationPolicy
from jobframework.runtime.errors import AlreadyExists, ApiError, NotFound
from jobframework.runtime.objects import GVK, Object

from .follow import Follower, Snapshot, final_table, is_true, take_snapshot
from .kinds import Tracked, TrackedResult, run_tracked, tracked_table
from .others import appwrapper_items, daemonjob_items

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
NODE_GVK: Final = GVK("", "v1", "Node")
PV_GVK: Final = GVK("", "v1", "PersistentVolume")
PVC_GVK: Final = GVK("", "v1", "PersistentVolumeClaim")
STORAGE_CLASS_GVK: Final = GVK("storage.k8s.io", "v1", "StorageClass")
LOCAL_QUEUE_GVK: Final = GVK("kueue.x-k8s.io", "v1beta2", "LocalQueue")
#: kwok's per-pod override of how long a pod runs (see ``jobframework.testing.cluster``).
RUN_TIME_ANNOTATION: Final = "pod-complete.stage.kwok.x-k8s.io/delay"
#: The node the seed's ``sameNode`` and ``localpv`` samples pin their pods to.
SAMPLE_NODE: Final = "minikube"
#: Samples the webhook must reject (file → why).
EXPECTED_REJECTIONS: Final = {
    "example-job-error.yaml": "its job3 depends on job2, which no flow defines",
}
#: Samples that need the node ``minikube`` (file → what for).
NEEDS_SAMPLE_NODE: Final = {
    "example-sameNode.yaml": "globalParams.nodeName pins its pods to node minikube",
    "example-shareVolume.yaml": "its local PersistentVolume lives on node minikube",
}


@attrs.frozen(kw_only=True)
class DemoOptions:
    """What the demo runs and where."""

    namespace: str = "default"
    #: The LocalQueue the JobFlows are queued in (the samples name ``user-queue``).
    queue: str = "user-queue"
    #: Also run two JobFlows with CPU requests that compete for the ClusterQueue.
    quota_flows: bool = True
    #: How long each pod of the quota JobFlows runs (kwok), e.g. ``"3s"``.
    step_time: str = "3s"
    #: Create a kwok node ``minikube`` (only on the local cluster, whose kwok manages
    #: nodes annotated ``kwok.x-k8s.io/node: fake``).
    create_sample_node: bool = False
    #: Start our manager in-process (False: one already runs).
    start_manager: bool = True
    manager_options: ManagerOptions = attrs.field(factory=ManagerOptions)
    timeout: float = 300.0
    poll_interval: float = 0.5
    #: Delete what the demo created when it ends.
    cleanup: bool = True
    #: The reference integrations shown, in order (JobFlows first, then the others).
    kinds: tuple[str, ...] = DEFAULT_INTEGRATIONS
    #: Last, render the in-cluster deployment of ``kinds`` (``python -m integrations.deploy
    #: render``) and have the API server accept every object of it in a dry run.
    deploy_check: bool = True


@attrs.frozen
class DemoResult:
    """How the demo ended."""

    #: JobFlow name → final ``status.state``.
    states: Mapping[str, str]
    #: Sample file → the API server's rejection message.
    rejected: Mapping[str, str]
    #: Sample file → why it was not applied.
    skipped: Mapping[str, str]
    #: Sample file → the JobFlow name it was created under (renamed on a clash).
    created: Mapping[str, str]
    table: str
    #: What went wrong (empty when every JobFlow reached ``Succeed``, exactly the
    #: expected samples were rejected and every other object reached its expected state).
    problems: tuple[str, ...]
    #: How each DaemonJob and AppWrapper ended.
    others: tuple[TrackedResult, ...] = ()
    #: ``Kind/name`` of each object of the in-cluster deployment the API server accepted
    #: in the dry run (empty when not checked).
    deployment: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing went wrong."""
        return not self.problems


def quota_jobflows(queue: str, step_time: str) -> list[Object]:
    """Two 3-step pipelines of 5 cpu each: together more than an 8-cpu ClusterQueue.

    The second waits; it is admitted as soon as the first one's ``fetch`` and ``train``
    steps are reported reclaimable (the first still runs ``report``).
    """

    def step(name: str, cpu: str, memory: str, pods: int = 1,
             deps: tuple[str, ...] = ()) -> dict[str, Any]:
        return {"name": name, "dependencies": list(deps), "jobTemplate": {
            "parallelism": pods, "completions": pods,
            "template": {
                "metadata": {"annotations": {RUN_TIME_ANNOTATION: step_time}},
                "spec": {"containers": [{
                    "name": "main", "image": "busybox:1.28", "command": ["sh", "-c", "true"],
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}}

    out = []
    for name in ("pipeline-a", "pipeline-b"):
        out.append({
            "apiVersion": JOBFLOW_GVK.api_version, "kind": JOBFLOW_GVK.kind,
            "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
            "spec": {"flows": [
                step("fetch", "1", "1Gi"),
                step("train", "1500m", "2Gi", pods=2, deps=("fetch",)),
                step("report", "1", "1Gi", deps=("train",)),
            ]},
        })
    return out


def sample_node() -> Object:
    """A kwok node called ``minikube`` (the local cluster's kwok manages it)."""
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": SAMPLE_NODE,
                     "annotations": {"kwok.x-k8s.io/node": "fake",
                                     "node.alpha.kubernetes.io/ttl": "0"},
                     "labels": {"type": "kwok", "kubernetes.io/hostname": SAMPLE_NODE,
                                "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources},
    }


@attrs.define
class _Plan:
    templates: list[Object] = attrs.Factory(list)
    volumes: list[Object] = attrs.Factory(list)
    jobflows: list[tuple[str, Object]] = attrs.Factory(list)
    skipped: dict[str, str] = attrs.Factory(dict)
    created: dict[str, str] = attrs.Factory(dict)


def plan_samples(namespace: str, queue: str, *, has_sample_node: bool) -> _Plan:
    """Which sample objects to create, in order; JobFlow names made unique (the seed's
    ``example.yaml`` and ``example-sameNode.yaml`` both say ``jobflow-example``)."""
    plan = _Plan()
    seen: set[str] = set()
    samples = load_samples()
    # The seed's main example first, so that it keeps its name.
    for file in sorted(samples, key=lambda f: (f != "example.yaml", f)):
        docs = samples[file]
        if file in NEEDS_SAMPLE_NODE and not has_sample_node:
            plan.skipped[file] = f"no node {SAMPLE_NODE}: {NEEDS_SAMPLE_NODE[file]}"
            continue
        for doc in docs:
            obj = copy.deepcopy(doc)
            kind = obj.get("kind")
            if kind in ("PersistentVolume", "StorageClass", "PersistentVolumeClaim"):
                if not has_sample_node:
                    plan.skipped[file] = f"no node {SAMPLE_NODE} for the local PersistentVolume"
                    continue
                if kind == "PersistentVolumeClaim":
                    obj["metadata"]["namespace"] = namespace
                plan.volumes.append(obj)
                continue
            obj["metadata"]["namespace"] = namespace
            if kind == JOBTEMPLATE_GVK.kind:
                plan.templates.append(obj)
            elif kind == JOBFLOW_GVK.kind:
                name = obj["metadata"]["name"]
                if name in seen:
                    stem = file.removesuffix(".yaml").removeprefix("example-").lower()
                    name = f"{name}-{stem}"
                    obj["metadata"]["name"] = name
                seen.add(name)
                obj["metadata"].setdefault("labels", {})[QUEUE_LABEL] = queue
                plan.jobflows.append((file, obj))
    return plan


async def _create(client: Client, obj: Object) -> None:
    with contextlib.suppress(AlreadyExists):
        await client.create(obj)


async def _delete_and_wait(client: Client, gvk: GVK, name: str, namespace: str | None,
                           wait: float) -> None:
    try:
        await client.delete(gvk, name, namespace=namespace,
                            propagation_policy=PropagationPolicy.BACKGROUND)
    except NotFound:
        return
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            await client.get(gvk, name, namespace=namespace)
        except NotFound:
            return
        await asyncio.sleep(0.25)


async def _has_node(client: Client, name: str) -> bool:
    try:
        await client.get(NODE_GVK, name)
    except NotFound:
        return False
    return True


async def ensure_sample_node(client: Client) -> None:
    """Create the kwok node ``minikube`` if missing, with its capacity, and wait until
    kwok reports it Ready."""
    node = sample_node()
    if not await _has_node(client, SAMPLE_NODE):
        status = node.pop("status")
        await client.create(node)
        # A merge patch, not an update: kwok and the node controller write it too.
        await client.patch(NODE_GVK, SAMPLE_NODE, {"status": status}, subresource="status")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        obj = await client.get(NODE_GVK, SAMPLE_NODE)
        conds = (obj.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
            return
        await asyncio.sleep(0.25)
    raise TimeoutError(f"node {SAMPLE_NODE} did not become Ready")


Printer = Callable[[str], None]


async def run_demo(client: Client, options: DemoOptions | None = None,
                   out: Printer = print) -> DemoResult:
    """Run the demo on ``client``'s cluster; ``out`` receives each progress line."""
    opts = options or DemoOptions()
    manager: ExternalFrameworkManager | None = None
    if opts.start_manager:
        out(f"starting our manager for {', '.join(opts.kinds)} "
            "(CRDs, webhooks, controllers)...")
        manager = ExternalFrameworkManager(
            client, attrs.evolve(opts.manager_options, integrations=opts.kinds))
        await manager.start()
    try:
        result = await _run(client, opts, out)
        if opts.deploy_check:
            result = await _check_deployment(client, opts, result, out)
        return result
    finally:
        if manager is not None:
            await manager.stop()


async def _check_deployment(client: Client, opts: DemoOptions, result: DemoResult,
                            out: Printer) -> DemoResult:
    """The in-cluster deployment of the integrations shown (``config/default``, rendered
    from the code), accepted object by object by the API server in a dry run."""
    suffix = f"demo-{os.urandom(3).hex()}"
    files = render(opts.kinds, namespace=f"kueue-jobframework-{suffix}")
    out("")
    out(f"in-cluster deployment of {', '.join(opts.kinds)} (python -m integrations.deploy "
        "render): a server-side dry run of every object...")
    try:
        checked = await dry_run_manifests(client, files, suffix=f"-{suffix}")
    except ApiError as err:
        return attrs.evolve(result, problems=(
            *result.problems, f"the in-cluster deployment was refused: {err}"))
    kinds = sorted({a.split("/")[0] for a in checked.accepted})
    out(f"  {len(checked.accepted)} objects accepted ({', '.join(kinds)}); the Deployment's "
        "pod is admitted under the restricted Pod Security Standard"
        + (f"; not served here: {', '.join(checked.skipped)}" if checked.skipped else ""))
    return attrs.evolve(result, deployment=checked.accepted)


async def _check_queue(client: Client, opts: DemoOptions) -> None:
    try:
        await client.get(LOCAL_QUEUE_GVK, opts.queue, namespace=opts.namespace)
    except NotFound:
        raise RuntimeError(f"no LocalQueue {opts.queue!r} in namespace {opts.namespace!r}: "
                           "create one (pointing at a ClusterQueue) first") from None


async def _run(client: Client, opts: DemoOptions, out: Printer) -> DemoResult:
    await _check_queue(client, opts)
    if "jobflow" in opts.kinds:
        result = await _run_jobflows(client, opts, out)
    else:
        result = DemoResult({}, {}, {}, {}, "", ())
    items, skipped = _other_items(opts)
    if not items:
        return result
    for file, why in skipped.items():
        out(f"skipping {file}: {why}")
    for item in items:
        await _delete_and_wait(client, item.gvk, item.name, opts.namespace, opts.timeout)
    out("")
    t0 = time.monotonic()

    def say(line: str) -> None:
        out(f"[{time.monotonic() - t0:6.1f}s] {line}")

    others = await run_tracked(client, items, limit=opts.timeout,
                               poll_interval=opts.poll_interval, say=say)
    problems = list(result.problems)
    for r in others:
        if r.rejected:
            problems.append(f"{r.label} was rejected: {r.rejected}")
        elif not r.ok:
            problems.append(f"{r.label} ended {r.state}, expected {r.expected}")
    if opts.cleanup:
        for item in items:
            await _delete_and_wait(client, item.gvk, item.name, opts.namespace, 60)
    table = "\n\n".join(t for t in (result.table, tracked_table(others)) if t)
    return attrs.evolve(result, table=table, problems=tuple(problems),
                        skipped={**result.skipped, **skipped}, others=tuple(others))


def _other_items(opts: DemoOptions) -> tuple[list[Tracked], dict[str, str]]:
    """The DaemonJob and AppWrapper samples to show, and the samples skipped."""
    items: list[Tracked] = []
    skipped: dict[str, str] = {}
    if "daemonjob" in opts.kinds:
        samples = importlib.import_module("integrations.daemonjob").load_samples()
        items += daemonjob_items(samples, opts.namespace, opts.queue)
    if "appwrapper" in opts.kinds:
        samples = importlib.import_module("integrations.appwrapper").load_samples()
        aws, skipped = appwrapper_items(samples, opts.namespace, opts.queue)
        items += aws
    return items, skipped


async def _run_jobflows(client: Client, opts: DemoOptions, out: Printer) -> DemoResult:
    if opts.create_sample_node:
        await ensure_sample_node(client)
    has_node = await _has_node(client, SAMPLE_NODE)
    plan = plan_samples(opts.namespace, opts.queue, has_sample_node=has_node)
    flows = list(plan.jobflows)
    if opts.quota_flows:
        for obj in quota_jobflows(opts.queue, opts.step_time):
            obj["metadata"]["namespace"] = opts.namespace
            flows.append((f"(demo) {obj['metadata']['name']}", obj))
    names = [o["metadata"]["name"] for _, o in flows]
    # Leftovers of an interrupted run would confuse the picture.
    for name in names:
        await _delete_and_wait(client, JOBFLOW_GVK, name, opts.namespace, opts.timeout)

    for file, why in plan.skipped.items():
        out(f"skipping {file}: {why}")
    for obj in plan.templates:
        await _create(client, obj)
        out(f"JobTemplate {obj['metadata']['name']} created")
    for obj in plan.volumes:
        await _create(client, obj)
        out(f"{obj['kind']} {obj['metadata']['name']} created")

    rejected: dict[str, str] = {}
    created: dict[str, str] = {}
    started: dict[str, float] = {}
    t0 = time.monotonic()
    follower = Follower(announce_new=False)

    def say(line: str) -> None:
        out(f"[{time.monotonic() - t0:6.1f}s] {line}")

    for file, obj in flows:
        name = obj["metadata"]["name"]
        try:
            await client.create(obj)
        except ApiError as err:
            rejected[file] = err.message
            say(f"{file}: REJECTED by the webhook: {err.message}")
            continue
        created[file] = name
        started[name] = time.monotonic()
        steps = len(obj["spec"]["flows"])
        say(f"{file}: JobFlow {name} created ({steps} steps, LocalQueue {opts.queue})")
    live = [n for n in names if n in created.values()]

    finished: dict[str, float] = {}
    snap = Snapshot({}, {}, {})
    deadline = time.monotonic() + opts.timeout
    while True:
        snap = await take_snapshot(client, opts.namespace, live)
        for line in follower.observe(snap):
            say(line)
        for name, jf in snap.jobflows.items():
            state = (jf.get("status") or {}).get("state")
            if state in ("Succeed", "Failed") and name not in finished:
                finished[name] = time.monotonic() - started[name]
        if len(finished) == len(live) or time.monotonic() > deadline:
            break
        await asyncio.sleep(opts.poll_interval)

    # Kueue marks the Workloads finished just after the flows: show that too (briefly).
    settle = time.monotonic() + 10
    while len(finished) == len(live) and time.monotonic() < settle and not all(
            is_true(snap.workloads.get(n), "Finished") for n in live):
        await asyncio.sleep(opts.poll_interval)
        snap = await take_snapshot(client, opts.namespace, live)
        for line in follower.observe(snap):
            say(line)

    states = {n: str((snap.jobflows.get(n, {}).get("status") or {}).get("state") or "-")
              for n in live}
    problems: list[str] = []
    for name, state in states.items():
        if state != "Succeed":
            problems.append(f"JobFlow {name} ended {state}")
    if len(finished) < len(live):
        problems.append(f"timed out after {opts.timeout:.0f}s")
    for file in EXPECTED_REJECTIONS:
        if file in created:
            problems.append(f"{file} was accepted but should have been rejected")
    for file in rejected:
        if file not in EXPECTED_REJECTIONS:
            problems.append(f"{file} was rejected")
    table = final_table(snap, follower, finished)
    if opts.cleanup:
        for name in live:
            await _delete_and_wait(client, JOBFLOW_GVK, name, opts.namespace, 60)
        for obj in plan.templates:
            await _delete_and_wait(client, JOBTEMPLATE_GVK, obj["metadata"]["name"],
                                   opts.namespace, 60)
        gvks = {"PersistentVolumeClaim": PVC_GVK, "PersistentVolume": PV_GVK,
                "StorageClass": STORAGE_CLASS_GVK}
        for obj in reversed(plan.volumes):
            ns = opts.namespace if obj["kind"] == "PersistentVolumeClaim" else None
            await _delete_and_wait(client, gvks[obj["kind"]], obj["metadata"]["name"], ns, 0)
    return DemoResult(states, rejected, plan.skipped, created, table, tuple(problems))
