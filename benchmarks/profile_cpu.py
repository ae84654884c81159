"""CPU per batch/v1 Job of our code, without a cluster: where it goes, to cut it.

Five scenarios, each on the in-memory API server (``jobframework.testing.APIServer``):

``lifecycle``
    Our manager wired as ``python -m integrations run --integrations batchjob`` wires it
    (Kueue v0.19.2's default Configuration, so ``waitForPodsReady`` is on; five Job
    workers; cache transforms dropping managedFields and interning strings) runs ``n``
    Jobs through their lifecycle, phase by phase: ``create`` (suspended Jobs, as our
    webhook leaves them; done when every Workload exists with its PodsReady=False
    condition), ``admit`` (QuotaReserved + Admitted applied as ``kueue-admission``; done
    when every Job is unsuspended), ``run`` (the Job controller's status: active and
    ready; done when every Workload is PodsReady=True) and ``finish`` (the Job completes;
    done when every Workload is Finished and has lost its finalizer).

    ``--transport http`` (the default) runs the API server, its HTTP front and the
    driver playing Kueue and the Job controller in a *child process*; the manager talks
    to it with the real ``RestClient``, so this process's CPU time is the manager's
    alone, HTTP client and JSON included (no TLS). ``--transport memory`` runs
    everything in one process on the ``InMemoryClient``; the profile then splits the
    time between our code, the in-memory server and the driver (see :func:`attribute`).

``reconcile``
    One reconcile with nothing to write, the most frequent pass, called directly on a
    synced manager: a Job beside its pending Workload, and an admitted running Job.

``watch``
    The Job and Workload watch events of a lifecycle, captured as JSON lines, replayed
    from the wire to the store: decoding, the manager's transform (managedFields
    dropped, strings interned), the indexed store and a read-only handler; then one
    cache copy of each stored object (what a reconcile's read costs).

``webhook``
    The batch/v1 Job webhooks (``BatchJobWebhook`` behind the mutating and validating
    handlers) answer the AdmissionReviews kube-apiserver sends for a Job create, from
    the raw JSON body to the encoded answer, as ``WebhookServer`` does minus aiohttp and
    TLS. The reviews are captured from the in-memory server's admission chain.

``http``
    ``RestClient`` get / create / merge-patch round trips against the HTTP front in a
    child process: this process's CPU per request.

Every figure is CPU seconds of this process (``time.process_time``), the median of
``--repeat`` runs. ``--profile`` adds a cProfile of one more run, grouped by component
(library time charged to the code of ours that called it); ``--sample`` (lifecycle) a
sampling profile, whose shares cProfile's per-call overhead does not distort;
``--gc-time`` the garbage collector's CPU time.

    python benchmarks/profile_cpu.py                       # all scenarios, 500 Jobs
    python benchmarks/profile_cpu.py --scenario lifecycle --jobs 300 --sample
    python benchmarks/profile_cpu.py --scenario lifecycle --transport memory --profile
    python benchmarks/profile_cpu.py --scenario reconcile webhook http --output out.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import logging
import os
import platform
import pstats
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from integrations.batchjob import JOB_GVK
from jobframework import constants as c
from jobframework.config import default_configuration, reconciler_options_from
from jobframework.integrations import IntegrationManager
from jobframework.plugins import load_integrations
from jobframework.runtime.cache import compose_transforms, intern_strings, strip_managed_fields
from jobframework.runtime.client import Client
from jobframework.runtime.clock import RealClock, rfc3339
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object, deep_copy
from jobframework.runtime.runner import loop_runner
from jobframework.testing import APIServer
from jobframework.webhook import WebhookServer
from jobframework.webhook.admission import review

WORKLOAD = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")
CONFIG_MAP = GVK("", "v1", "ConfigMap")
NAMESPACE = "bench"
QUEUE = "lq"
WAIT_LIMIT = 300.0
PHASES = ("create", "admit", "run", "finish")
HERE = Path(__file__).resolve()


# ------------------------------------------------------------------ the API server side


def new_server() -> APIServer:
    """An in-memory API server with the Kueue kinds the reconciler touches."""
    server = APIServer(RealClock(), builtin_defaults=True)
    kinds = (("Workload", "workloads", True, True), ("LocalQueue", "localqueues", True, True),
             ("ClusterQueue", "clusterqueues", False, True),
             ("ResourceFlavor", "resourceflavors", False, False),
             ("WorkloadPriorityClass", "workloadpriorityclasses", False, False))
    for kind, plural, namespaced, status in kinds:
        server.register_kind(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, kind), plural, namespaced,
                             status_subresource=status)
    return server


async def seed(server: APIServer) -> None:
    """The namespace, a ResourceFlavor and the LocalQueue the Jobs name."""
    client = server.client()
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": NAMESPACE}})
    await client.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                         "metadata": {"name": "default"}, "spec": {}})
    await client.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "LocalQueue",
                         "metadata": {"name": QUEUE, "namespace": NAMESPACE},
                         "spec": {"clusterQueue": "cq"}})


def job_manifest(i: int, *, suspend: bool | None = True) -> Object:
    """The benchmark's Job (``benchmarks/cluster.py``'s), suspended as our webhook leaves it."""
    spec: dict[str, Any] = {"parallelism": 1, "completions": 1, "template": {"spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "registry.example/fake:1",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"bench-{i:05d}", "namespace": NAMESPACE,
                         "labels": {c.QUEUE_LABEL: QUEUE}},
            "spec": spec}


def _cond(obj: Object, type_: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


async def _until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_LIMIT
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class Driver:
    """Plays the benchmark, Kueue's scheduler and the Job controller on ``server``.

    It follows Jobs and Workloads with watches (each event once, no listing), so that
    its own CPU stays small beside the manager's.
    """

    def __init__(self, server: APIServer, wait_for_pods_ready: bool = True) -> None:
        self.server = server
        self.client = server.client()
        self.wait_for_pods_ready = wait_for_pods_ready
        self.round = 0
        self.jobs: dict[str, Object] = {}
        #: Workloads by the name of the Job owning them.
        self.workloads: dict[str, Object] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Start following Jobs and Workloads."""
        for gvk, sink in ((JOB_GVK, self._on_job), (WORKLOAD, self._on_workload)):
            listed = await self.client.list(gvk, namespace=NAMESPACE)
            for obj in listed.items:
                sink("ADDED", obj)
            self._tasks.append(asyncio.create_task(
                self._follow(gvk, listed.resource_version, sink)))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow(self, gvk: GVK, rv: str, sink: Callable[[str, Object], None]) -> None:
        async for event in self.client.watch(gvk, namespace=NAMESPACE, resource_version=rv,
                                             allow_bookmarks=False):
            sink(event.type, event.object)

    def _on_job(self, type_: str, obj: Object) -> None:
        name = obj["metadata"]["name"]
        if type_ == "DELETED":
            self.jobs.pop(name, None)
        else:
            self.jobs[name] = obj

    def _on_workload(self, type_: str, obj: Object) -> None:
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                if type_ == "DELETED":
                    self.workloads.pop(ref["name"], None)
                else:
                    self.workloads[ref["name"]] = obj

    async def run(self, n: int, on_phase: Callable[[str], Awaitable[None]]) -> None:
        """Run ``n`` Jobs through every phase, calling ``on_phase(name)`` after each."""
        base = self.round * n
        self.round += 1
        names = [job_manifest(base + i)["metadata"]["name"] for i in range(n)]

        def count(pred: Callable[[Object], bool], objects: dict[str, Object]) -> int:
            return sum(1 for name in names if (o := objects.get(name)) is not None and pred(o))

        def pods_ready(status: str | None) -> Callable[[Object], bool]:
            def pred(w: Object) -> bool:
                cond = _cond(w, c.WORKLOAD_PODS_READY)
                return cond is not None and (status is None or cond.get("status") == status)
            return pred

        for i in range(n):
            await self.client.create(job_manifest(base + i))
        if self.wait_for_pods_ready:
            await _until(lambda: count(pods_ready(None), self.workloads) >= n, "the workloads")
        else:
            await _until(lambda: count(lambda w: True, self.workloads) >= n, "the workloads")
        await on_phase("create")

        for name in names:
            await self._admit(self.workloads[name])
        await _until(lambda: count(lambda j: j["spec"].get("suspend") is False, self.jobs)
                     >= n, "the jobs to start")
        await on_phase("admit")

        now = rfc3339(self.server.clock.now())
        for name in names:
            await self.client.patch(JOB_GVK, name, {"status": {
                "startTime": now, "active": 1, "ready": 1, "terminating": 0,
                "uncountedTerminatedPods": {}}}, namespace=NAMESPACE, subresource="status")
        if self.wait_for_pods_ready:
            await _until(lambda: count(pods_ready("True"), self.workloads) >= n, "PodsReady")
        await on_phase("run")

        for name in names:
            await self.client.patch(JOB_GVK, name, {"status": {
                "active": 0, "ready": 0, "succeeded": 1, "completionTime": now,
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods",
                     "lastProbeTime": now, "lastTransitionTime": now},
                    {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods",
                     "lastProbeTime": now, "lastTransitionTime": now}]}},
                namespace=NAMESPACE, subresource="status")
        await _until(lambda: count(lambda w: _cond(w, c.WORKLOAD_FINISHED) is not None
                                   and not w["metadata"].get("finalizers"), self.workloads)
                     >= n, "the workloads to finish")
        await on_phase("finish")

    async def _admit(self, wl: Object) -> None:
        now = rfc3339(self.server.clock.now())
        ps = wl["spec"]["podSets"][0]
        await self.client.apply({
            "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
            "metadata": {"name": wl["metadata"]["name"], "namespace": NAMESPACE},
            "status": {
                "conditions": [
                    {"type": c.WORKLOAD_QUOTA_RESERVED, "status": "True",
                     "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue cq",
                     "lastTransitionTime": now},
                    {"type": c.WORKLOAD_ADMITTED, "status": "True", "reason": "Admitted",
                     "message": "The workload is admitted", "lastTransitionTime": now}],
                "admission": {"clusterQueue": "cq", "podSetAssignments": [
                    {"name": ps["name"], "flavors": {"cpu": "default", "memory": "default"},
                     "resourceUsage": {"cpu": "10m", "memory": "16Mi"},
                     "count": ps["count"]}]},
            }}, field_manager=c.ADMISSION_NAME, force=True, subresource="status")


async def _serve_child() -> None:
    """The child process: an API server on loopback HTTP, driven over stdin/stdout.

    Commands (one a line): ``lifecycle <n>`` runs the driver and prints ``phase <name>``
    after each phase; ``objects <n>`` creates ``n`` ConfigMaps; ``quit``.
    """
    from jobframework.testing.http import serve_http

    server = new_server()
    await seed(server)
    front = await serve_http(server)
    driver = Driver(server)
    await driver.start()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    async def phase(name: str) -> None:
        say(f"phase {name}")

    say(f"url {front.url}")
    try:
        while line := (await reader.readline()).decode().strip():
            cmd, _, arg = line.partition(" ")
            if cmd == "quit":
                break
            if cmd == "lifecycle":
                await driver.run(int(arg), phase)
            elif cmd == "objects":
                client = server.client()
                for i in range(int(arg)):
                    await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": f"cm-{i}", "namespace": NAMESPACE},
                                         "data": {"index": str(i), "payload": "x" * 64}})
            say("done")
    finally:
        await driver.stop()
        await front.close()


class Child:
    """The API server child process, seen from the manager's side."""

    def __init__(self, proc: asyncio.subprocess.Process, url: str) -> None:
        self.proc = proc
        self.url = url

    @classmethod
    async def start(cls) -> Child:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(HERE), "--child", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONHASHSEED": "0"})
        assert proc.stdout is not None
        line = (await proc.stdout.readline()).decode().split()
        if len(line) != 2 or line[0] != "url":
            raise RuntimeError(f"the API server child did not start: {line}")
        return cls(proc, line[1])

    async def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        await self.proc.stdin.drain()

    async def read(self) -> str:
        assert self.proc.stdout is not None
        line = (await asyncio.wait_for(self.proc.stdout.readline(), WAIT_LIMIT)).decode()
        if not line:
            raise RuntimeError("the API server child exited")
        return line.strip()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.send("quit")
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


# ------------------------------------------------------------------ the manager side


@contextlib.contextmanager
def _profiling(profiler: cProfile.Profile | Sampler | None) -> Iterator[None]:
    if profiler is not None:
        profiler.enable()
    try:
        yield
    finally:
        if profiler is not None:
            profiler.disable()


async def start_manager(client: Client, *, webhooks: bool = False
                        ) -> tuple[Manager, asyncio.Task[None], WebhookServer | None]:
    """Our manager as ``python -m integrations run --integrations batchjob`` builds it."""
    mgr, task, server, _ = await start_manager_with_reconciler(client, webhooks=webhooks)
    return mgr, task, server


async def start_manager_with_reconciler(
    client: Client, *, webhooks: bool = False,
) -> tuple[Manager, asyncio.Task[None], WebhookServer | None, Any]:
    """:func:`start_manager`, and the Job reconciler it runs."""
    integrations = load_integrations(("batchjob",))
    im = IntegrationManager()
    for integration in integrations:
        integration.register(im)
    mgr = Manager(client, graceful_shutdown_timeout=10.0,
                  group_kind_concurrency={"Job.batch": 5},
                  cache_options={"transform": compose_transforms(strip_managed_fields,
                                                                 intern_strings)})
    server = WebhookServer(metrics_registry=mgr.get_metrics().registry) if webhooks else None
    kueue = reconciler_options_from(default_configuration(), integration_manager=im)
    wiring = [await integration.setup(mgr, webhook_server=server, kueue=kueue)
              for integration in integrations]
    task = asyncio.create_task(mgr.start())
    await asyncio.wait_for(mgr.elected(), 60)
    await asyncio.wait_for(mgr.get_cache().wait_for_cache_sync(), 60)
    return mgr, task, server, getattr(wiring[0], "kueue_reconciler", None)


def reconcile_counts(mgr: Manager) -> dict[str, float]:
    """``controller_runtime_reconcile_total`` of the manager, by result."""
    out: dict[str, float] = {}
    for metric in mgr.get_metrics().registry.collect():
        for sample in metric.samples:
            if sample.name == "controller_runtime_reconcile_total":
                key = sample.labels.get("result", "")
                out[key] = out.get(key, 0.0) + sample.value
    return out


def count_requests(client: Any) -> dict[str, float]:
    """Count ``client.request_json`` calls by HTTP method and resource (watches not
    included)."""
    counts: dict[str, float] = {}
    inner = client.request_json

    async def counted(method: str, path: str, **kwargs: Any) -> Any:
        parts = path.strip("/").split("/")
        parts = parts[2:] if parts[0] == "api" else parts[3:]  # after the version
        if len(parts) > 2 and parts[0] == "namespaces":
            parts = parts[2:]
        resource = "/".join(parts[:1] + parts[2:3]) or "discovery"
        key = f"{method} {resource}"
        counts[key] = counts.get(key, 0.0) + 1
        return await inner(method, path, **kwargs)

    client.request_json = counted
    return counts


def _delta(after: dict[str, float], before: dict[str, float], n: int) -> dict[str, float]:
    return {k: round((v - before.get(k, 0.0)) / n, 3) for k, v in sorted(after.items())
            if v != before.get(k, 0.0)}


async def settle(mgr: Manager) -> None:
    """Let the manager finish what the run left it: the events still queued for sending
    (a slower manager has more of them) and the reconciles they trigger."""
    await asyncio.sleep(0.3)
    await asyncio.wait_for(mgr.event_broadcaster.flush(), WAIT_LIMIT)
    await asyncio.sleep(0.1)


async def stop_manager(mgr: Manager, task: asyncio.Task[None]) -> None:
    await mgr.stop()
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await task


@attrs.define
class Run:
    """CPU seconds of one run, per phase; reconciles by result and requests by verb."""

    n: int
    cpu: dict[str, float]
    wall: float
    reconciles: dict[str, float] = attrs.field(factory=dict)
    requests: dict[str, float] = attrs.field(factory=dict)
    #: CPU seconds in the cyclic garbage collector, by generation.
    gc: dict[int, float] = attrs.field(factory=dict)
    #: CPU seconds of the main thread (the event loop) alone; the rest of :attr:`total`
    #: ran in other threads (a thread pool's lookups, say).
    main_thread: float = 0.0

    @property
    def total(self) -> float:
        return sum(self.cpu.values())


class GCTimer:
    """CPU time spent in :mod:`gc` collections while active, by generation (with
    ``--gc-time`` only: the callbacks cost a little themselves)."""

    enabled = False

    def __init__(self) -> None:
        self.seconds: dict[int, float] = {}
        self._start = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            gen = int(info.get("generation", -1))
            self.seconds[gen] = self.seconds.get(gen, 0.0) + time.process_time() - self._start

    def __enter__(self) -> GCTimer:
        if self.enabled:
            gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            gc.callbacks.remove(self._callback)


async def lifecycle_http(n: int, profiler: cProfile.Profile | Sampler | None = None) -> Run:
    """One lifecycle run with the API server in a child process (our CPU only)."""
    child = await Child.start()
    try:
        from jobframework.runtime.client.rest import RestClient

        async with RestClient.from_url(child.url) as client:
            requests = count_requests(client)
            mgr, task, _ = await start_manager(client)
            try:
                await asyncio.sleep(0.2)
                before = (reconcile_counts(mgr), dict(requests))
                cpu: dict[str, float] = {}
                wall = time.perf_counter()
                with _profiling(profiler), GCTimer() as gct:
                    t0 = time.process_time()
                    thread0 = time.thread_time()
                    await child.send(f"lifecycle {n}")
                    for name in PHASES:
                        line = await child.read()
                        if line != f"phase {name}":
                            raise RuntimeError(f"expected phase {name}, got {line!r}")
                        t1 = time.process_time()
                        cpu[name] = t1 - t0
                        t0 = t1
                    if await child.read() != "done":
                        raise RuntimeError("the driver did not finish")
                    # What the last phase left queued (events) is still ours.
                    await settle(mgr)
                    cpu["finish"] += time.process_time() - t0
                    main_thread = time.thread_time() - thread0
                wall = time.perf_counter() - wall
                counts = (_delta(reconcile_counts(mgr), before[0], n),
                          _delta(requests, before[1], n))
            finally:
                await stop_manager(mgr, task)
    finally:
        await child.close()
    return Run(n, cpu, wall, *counts, gc=gct.seconds, main_thread=main_thread)


async def lifecycle_memory(n: int, profiler: cProfile.Profile | Sampler | None = None
                           ) -> Run:
    """One lifecycle run in one process (server and driver included in the CPU)."""
    server = new_server()
    await seed(server)
    mgr, task, _ = await start_manager(server.client())
    driver = Driver(server)
    await driver.start()
    cpu: dict[str, float] = {}
    before = reconcile_counts(mgr)
    try:
        wall = time.perf_counter()
        with _profiling(profiler), GCTimer() as gct:
            t0 = time.process_time()
            thread0 = time.thread_time()

            async def on_phase(name: str) -> None:
                nonlocal t0
                t1 = time.process_time()
                cpu[name] = t1 - t0
                t0 = t1

            await driver.run(n, on_phase)
            await settle(mgr)
            cpu["finish"] += time.process_time() - t0
            main_thread = time.thread_time() - thread0
        wall = time.perf_counter() - wall
        reconciles = _delta(reconcile_counts(mgr), before, n)
    finally:
        await driver.stop()
        await stop_manager(mgr, task)
    return Run(n, cpu, wall, reconciles, gc=gct.seconds, main_thread=main_thread)


# ------------------------------------------------------------------ one reconcile


async def bench_reconcile(n: int, passes: int, profiler: cProfile.Profile | None
                          ) -> dict[str, Any]:
    """CPU of one reconcile that has nothing to write, the most common pass: a Job waiting
    for admission beside its Workload, and an admitted, running Job. The lifecycle is
    paused at those points and the reconciler is called directly ``passes`` times for
    each of the ``n`` Jobs (in memory: cache reads, pod-set comparison, Workload model)."""
    from jobframework.runtime.reconcile import Request

    server = new_server()
    await seed(server)
    mgr, task, _, reconciler = await start_manager_with_reconciler(server.client())
    driver = Driver(server)
    await driver.start()
    out: dict[str, Any] = {}
    try:
        async def on_phase(name: str) -> None:
            if name not in ("create", "run"):
                return
            await asyncio.sleep(0.3)  # let the manager settle
            requests = [Request.of(NAMESPACE, j) for j in sorted(driver.jobs)[-n:]]
            for r in requests[:20]:
                await reconciler.reconcile(r)  # warm up
            runs = []
            for _ in range(passes):
                t0 = time.process_time()
                for r in requests:
                    await reconciler.reconcile(r)
                runs.append((time.process_time() - t0) / len(requests))
            if profiler is not None:
                with _profiling(profiler):
                    for r in requests:
                        await reconciler.reconcile(r)
            state = "pending" if name == "create" else "running"
            out[state] = {"us_per_reconcile": round(statistics.median(runs) * 1e6, 1),
                          "runs_us": [round(r * 1e6, 1) for r in runs]}

        await driver.run(n, on_phase)
    finally:
        await driver.stop()
        await stop_manager(mgr, task)
    return out


# ------------------------------------------------------------------ watch events


async def capture_events(n: int) -> list[bytes]:
    """The Job and Workload watch events of ``n`` lifecycles, as the API server writes
    them on the wire (one JSON line each, ``managedFields`` included)."""
    server = new_server()
    await seed(server)
    mgr, task, _ = await start_manager(server.client())
    driver = Driver(server)
    await driver.start()
    lines: list[bytes] = []

    async def follow(gvk: GVK) -> None:
        async for event in server.client().watch(gvk, namespace=NAMESPACE,
                                                 allow_bookmarks=False):
            lines.append(json.dumps({"type": event.type, "object": event.object},
                                    separators=(",", ":")).encode())

    followers = [asyncio.create_task(follow(g)) for g in (JOB_GVK, WORKLOAD)]
    try:
        async def on_phase(name: str) -> None:
            del name

        await driver.run(n, on_phase)
        await settle(mgr)
    finally:
        for f in followers:
            f.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        await driver.stop()
        await stop_manager(mgr, task)
    return lines


async def bench_watch(n: int, repeat: int, profiler: cProfile.Profile | None
                      ) -> dict[str, Any]:
    """CPU per watch event from the wire to the store: decoding the line
    (``RestClient._decode_event``), the manager's transform (managedFields dropped,
    strings interned), the indexed store and a read-only handler, as the Job controller's
    informers do; then a cache read of each object (the copy a reconcile gets)."""
    from jobframework.runtime.cache import SharedInformer
    from jobframework.runtime.client.rest import RestClient

    lines = await capture_events(n)
    transform = compose_transforms(strip_managed_fields, intern_strings)

    def replay() -> tuple[float, float]:
        informers = {gvk: SharedInformer(new_server().client(), gvk, transform=transform)
                     for gvk in (JOB_GVK, WORKLOAD)}
        seen: list[str] = []
        for inf in informers.values():
            inf.add_event_handler(lambda o: seen.append(o["metadata"]["name"]),
                                  lambda o, n: seen.append(n["metadata"]["name"]),
                                  read_only=True)
        t0 = time.process_time()
        for line in lines:
            event = RestClient._decode_event(line)
            assert event is not None
            informers[GVK.of(event.object)].apply(event)
        t1 = time.process_time()
        stored = [(inf, o) for inf in informers.values() for o in inf.indexer.list()]
        for inf, o in stored:
            # Versions before the JSON fast copy (an A/B against an older src) copy
            # through marshal.
            getattr(inf, "copy_of", deep_copy)(o)
        return (t1 - t0) / len(lines), (time.process_time() - t1) / len(stored)

    replay()  # warm up
    runs = [replay() for _ in range(repeat)]
    if profiler is not None:
        with _profiling(profiler):
            replay()
    return {"events": len(lines), "bytes_per_event": round(sum(map(len, lines)) / len(lines)),
            "us_per_event": round(statistics.median(r[0] for r in runs) * 1e6, 1),
            "runs_us": [round(r[0] * 1e6, 1) for r in runs],
            "us_per_copy": round(statistics.median(r[1] for r in runs) * 1e6, 1)}


# ------------------------------------------------------------------ webhook


async def capture_reviews(webhooks: WebhookServer, paths: list[str]) -> dict[str, bytes]:
    """The AdmissionReview bodies kube-apiserver-like admission sends for a Job create."""
    server = new_server()
    await seed(server)
    captured: dict[str, bytes] = {}

    def capture(path: str) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        hook = webhooks.as_admission_hook(path)

        async def fn(body: dict[str, Any]) -> dict[str, Any]:
            captured.setdefault(path, json.dumps(body).encode())
            return await hook(body)
        return fn

    mutate = next(p for p in paths if p.startswith("/mutate"))
    validate = next(p for p in paths if p.startswith("/validate"))
    server.add_mutating_webhook(capture(mutate), name="mjob.kb.io")
    server.add_validating_webhook(capture(validate), name="vjob.kb.io")
    created = await server.client().create(job_manifest(0, suspend=None))
    assert created["spec"]["suspend"] is True, "the webhook must suspend a queued Job"
    return captured


async def bench_webhook(n: int, repeat: int, profiler: cProfile.Profile | None
                        ) -> dict[str, Any]:
    """CPU per AdmissionReview (decode, handler, encode) of the Job webhooks."""
    server = new_server()
    await seed(server)
    mgr, task, webhooks = await start_manager(server.client(), webhooks=True)
    assert webhooks is not None
    try:
        paths = sorted(webhooks.handlers)
        reviews = await capture_reviews(webhooks, paths)
        out: dict[str, Any] = {}
        for path, raw in sorted(reviews.items()):
            handler = webhooks.handlers[path]

            async def one(raw: bytes = raw, handler: Any = handler) -> None:
                status, answer = await review(handler, json.loads(raw))
                assert status == 200 and answer["response"]["allowed"], answer
                json.dumps(answer)  # what web.json_response sends

            for _ in range(50):  # warm up
                await one()
            runs = []
            for _ in range(repeat):
                t0 = time.process_time()
                for _ in range(n):
                    await one()
                runs.append((time.process_time() - t0) / n)
            if profiler is not None:
                with _profiling(profiler):
                    for _ in range(n):
                        await one()
            kind = "mutate" if path.startswith("/mutate") else "validate"
            out[kind] = {"path": path, "us_per_review": round(statistics.median(runs) * 1e6, 1),
                         "runs_us": [round(r * 1e6, 1) for r in runs],
                         "request_bytes": len(raw)}
        out["us_per_job"] = round(out["mutate"]["us_per_review"]
                                  + out["validate"]["us_per_review"], 1)
        return out
    finally:
        await stop_manager(mgr, task)


# ------------------------------------------------------------------ http


async def bench_http(n: int, repeat: int, profiler: cProfile.Profile | None) -> dict[str, Any]:
    """CPU per RestClient request (get, create, merge patch) to the child's HTTP front."""
    from jobframework.runtime.client.rest import RestClient

    child = await Child.start()
    try:
        await child.send(f"objects {n}")
        assert await child.read() == "done"
        async with RestClient.from_url(child.url) as client:
            await client.get(CONFIG_MAP, "cm-0", namespace=NAMESPACE)  # discovery

            async def gets(tag: int) -> None:
                for i in range(n):
                    await client.get(CONFIG_MAP, f"cm-{i}", namespace=NAMESPACE)

            async def creates(tag: int) -> None:
                for i in range(n):
                    await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                        "name": f"new-{tag}-{i}", "namespace": NAMESPACE},
                        "data": {"payload": "y" * 64}})

            async def patches(tag: int) -> None:
                for i in range(n):
                    await client.patch(CONFIG_MAP, f"cm-{i}", {"data": {"tag": str(tag)}},
                                       namespace=NAMESPACE)

            out: dict[str, Any] = {}
            tag = 0
            for verb, fn in (("get", gets), ("create", creates), ("patch", patches)):
                runs = []
                for _ in range(repeat):
                    tag += 1
                    t0 = time.process_time()
                    await fn(tag)
                    runs.append((time.process_time() - t0) / n)
                if profiler is not None:
                    tag += 1
                    with _profiling(profiler):
                        await fn(tag)
                out[verb] = {"us_per_request": round(statistics.median(runs) * 1e6, 1),
                             "runs_us": [round(r * 1e6, 1) for r in runs]}
            return out
    finally:
        await child.close()


# ------------------------------------------------------------------ sampling profiler


class Sampler:
    """A statistical profiler: a thread samples the main thread's Python stack.

    cProfile's per-call overhead inflates code that makes many small calls several
    times over; sampling does not (it only adds GIL hand-offs), so its shares are the
    ones to trust for "where does the CPU go". Each busy sample is charged to the
    innermost frame of our code (a library frame below it, json or aiohttp, counts for
    the code of ours that called it); samples with no frame of ours are charged to the
    library at the top of the stack. Samples of an idle event loop are dropped.
    """

    def __init__(self, interval: float = 0.0005) -> None:
        self.interval = interval
        self.components: dict[str, int] = {}
        self.own: dict[str, int] = {}
        self.inclusive: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._switch = sys.getswitchinterval()
        self._idle_code: set[Any] = set()

    def enable(self) -> None:
        # The frame the event loop runs under: a sample stopping there is an idle loop.
        frame = sys._getframe(1)
        while frame is not None:
            self._idle_code.add(frame.f_code)
            frame = frame.f_back  # type: ignore[assignment]
        self._stop.clear()
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(self.interval)
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()

    def disable(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        sys.setswitchinterval(self._switch)

    def _run(self) -> None:
        main = threading.main_thread().ident or 0
        while not self._stop.wait(self.interval):
            frame = sys._current_frames().get(main)
            if frame is not None:
                self._record(frame)

    def _record(self, leaf: Any) -> None:
        if leaf.f_code in self._idle_code:
            return
        frames: list[Any] = []
        frame = leaf
        while frame is not None and len(frames) < 80:
            frames.append(frame.f_code)
            frame = frame.f_back
        self.samples += 1
        charged: str | None = None
        seen: set[str] = set()
        for code in frames:
            comp = component(code.co_filename)
            if comp is None:
                if _is_helper(code.co_filename):  # deep_copy and the like: listed, not charged
                    name = _code_label(code)
                    if name not in seen:
                        seen.add(name)
                        self.inclusive[name] = self.inclusive.get(name, 0) + 1
                continue
            name = _code_label(code)
            if charged is None:
                charged = comp
                self.own[name] = self.own.get(name, 0) + 1
            if comp not in ("driver", "server") and name not in seen:
                seen.add(name)
                self.inclusive[name] = self.inclusive.get(name, 0) + 1
        if charged is None:
            charged = _library(frames[0].co_filename, frames[0].co_name)
        self.components[charged] = self.components.get(charged, 0) + 1


def _is_helper(filename: str) -> bool:
    return filename.replace("\\", "/").endswith("jobframework/runtime/objects.py")


def _code_label(code: Any) -> str:
    path = code.co_filename.replace("\\", "/")
    for root in _ROOTS:
        if path.startswith(root):
            path = path[len(root):]
            break
    return f"{path}:{code.co_firstlineno}({code.co_name})"


def sample_report(sampler: Sampler, run: Run, top: int) -> dict[str, Any]:
    """Components and functions as shares of the samples, and µs per unit of the main
    thread's CPU time in the sampled run; CPU of other threads (not sampled) is its own
    line."""
    total = max(1, sampler.samples)
    us = run.main_thread / run.n * 1e6

    def rows(counts: dict[str, int]) -> dict[str, dict[str, float]]:
        return {k: {"us_per_unit": round(v / total * us, 1), "share": round(v / total, 3)}
                for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}

    return {"samples": sampler.samples, "cpu_ms_per_unit": round(run.total / run.n * 1e3, 3),
            "main_thread_ms_per_unit": round(us / 1e3, 3),
            "other_threads_us_per_unit": round((run.total - run.main_thread) / run.n * 1e6, 1),
            "components": rows(sampler.components),
            "top_own": dict(list(rows(sampler.own).items())[:top]),
            "top_inclusive": dict(list(rows(sampler.inclusive).items())[:top])}


def print_samples(title: str, report: dict[str, Any], unit: str) -> None:
    print(f"\n  sampled profile of {title} ({report['samples']} samples of the main thread's "
          f"{report['main_thread_ms_per_unit']} ms CPU per {unit}; other threads "
          f"{report['other_threads_us_per_unit']} µs, {report['cpu_ms_per_unit']} ms in all):")
    for k, v in report["components"].items():
        if v["share"] >= 0.005:
            print(f"    {k:32s} {v['us_per_unit']:9.1f} µs  {v['share'] * 100:5.1f} %")
    for title_, key in (("own (innermost frame of ours)", "top_own"),
                        ("inclusive (anywhere on the stack)", "top_inclusive")):
        print(f"    top functions, {title_}:")
        for k, v in report[key].items():
            print(f"      {v['us_per_unit']:9.1f} µs  {v['share'] * 100:5.1f} %  {k}")


# ------------------------------------------------------------------ profile attribution


_ROOTS = tuple(str(Path(m.__file__).resolve().parent.parent) + "/"
               for m in (sys.modules["jobframework"], sys.modules["integrations"])
               if m.__file__)


def component(filename: str) -> str | None:
    """The component of our code (or the harness) a function's file belongs to; None for
    libraries (the standard library, pydantic, aiohttp...)."""
    f = filename.replace("\\", "/")
    if f == str(HERE):
        return "driver"
    for root in _ROOTS:
        if not f.startswith(root):
            continue
        rel = f[len(root):]
        if not rel.startswith(("jobframework/", "integrations/")):
            continue
        if rel.startswith("jobframework/testing/"):
            return "server"
        if rel.startswith("integrations/"):
            return "integration (batchjob)"
        part = rel.removeprefix("jobframework/")
        if part.startswith("runtime/cache/"):
            return "cache + informers"
        if part.startswith("runtime/client/"):
            return "REST client"
        if part.startswith(("runtime/workqueue/", "runtime/controller", "runtime/handler",
                            "runtime/source", "runtime/predicate", "runtime/builder",
                            "runtime/manager", "runtime/reconcile")):
            return "controller + workqueue"
        if part.startswith(("runtime/events", "runtime/event")):
            return "event recorder"
        if part.startswith("runtime/objects"):
            return None  # helpers (deep_copy...): charged to the code that calls them
        if part.startswith("runtime/"):
            return "runtime (other)"
        if part.startswith("api/"):
            return "workload model (api)"
        if part.startswith(("webhook/", "base_webhook", "defaults", "validation",
                            "k8svalidation", "lossless", "field")):
            return "webhook + validation"
        if part.startswith(("reconciler", "workload.py", "podset", "metrics", "naming",
                            "workloadslicing", "indexer", "integrations", "multikueue")):
            return "reconciler"
        return "jobframework (other)"
    return None


def _library(filename: str, name: str) -> str:
    f = filename.replace("\\", "/")
    if "site-packages/" in f:
        return "lib " + f.split("site-packages/", 1)[1].split("/", 1)[0]
    if f in ("~", ""):
        return "lib builtins"
    return "lib " + Path(f).stem


def attribute(stats: pstats.Stats) -> dict[str, float]:
    """Seconds per component: our functions' own time, plus the library time they cause.

    A library function's own time goes to the components of its callers, in proportion
    to the time spent under each call edge, recursively through library callers; what
    reaches no component of ours (the event loop's own work, aiohttp's protocol parsing
    fed by the loop) is reported under the library's name.
    """
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    memo: dict[Any, dict[str, float]] = {}
    active: set[Any] = set()

    def dist(func: Any) -> dict[str, float]:
        comp = component(func[0])
        if comp is not None:
            return {comp: 1.0}
        if func in memo:
            return memo[func]
        active.add(func)
        weights: dict[str, float] = {}
        total = 0.0
        callers = raw[func][4] if func in raw else {}
        for caller, edge in callers.items():
            w = edge[3]
            if w <= 0 or caller in active:  # recursion: the outer call decides
                continue
            sub = dist(caller)
            for k, v in sub.items():
                weights[k] = weights.get(k, 0.0) + w * v
            total += w if sub else 0.0
        active.discard(func)
        if total > 0:
            result = {k: v / total for k, v in weights.items()}
        elif callers and any(c in active for c in callers):
            return {}  # only reached through a recursion still being resolved
        else:
            result = {_library(func[0], func[2]): 1.0}
        memo[func] = result
        return result

    out: dict[str, float] = {}
    for func, (_, _, tt, _, _) in raw.items():
        for k, share in (dist(func) or {_library(func[0], func[2]): 1.0}).items():
            out[k] = out.get(k, 0.0) + tt * share
    return out


def profile_report(profiler: cProfile.Profile, per: int, top: int) -> dict[str, Any]:
    """Components (µs per unit and share) and the top functions by own time."""
    stats = pstats.Stats(profiler)
    parts = attribute(stats)
    total = sum(parts.values()) or 1.0
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    funcs = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    cumul = sorted(((f, v) for f, v in raw.items() if component(f[0]) not in (None, "server",
                                                                             "driver")),
                   key=lambda kv: kv[1][3], reverse=True)[:top]

    def label(f: Any) -> str:
        path = f[0].replace("\\", "/")
        for marker in ("/src/", "site-packages/", "/lib/python3"):
            if marker in path:
                path = path.split(marker, 1)[1]
                break
        return f"{path}:{f[1]}({f[2]})"

    return {
        "profiled_seconds": round(total, 3),
        "components": {k: {"us_per_unit": round(v / per * 1e6, 1),
                           "share": round(v / total, 3)}
                       for k, v in sorted(parts.items(), key=lambda kv: -kv[1])},
        "top_own_time": [{"function": label(f), "calls": v[1],
                          "own_us_per_unit": round(v[2] / per * 1e6, 1),
                          "cumulative_us_per_unit": round(v[3] / per * 1e6, 1)}
                         for f, v in funcs],
        "top_cumulative_ours": [{"function": label(f), "calls": v[1],
                                 "cumulative_us_per_unit": round(v[3] / per * 1e6, 1)}
                                for f, v in cumul],
    }


def print_profile(title: str, report: dict[str, Any], unit: str) -> None:
    print(f"\n  profile of {title} ({report['profiled_seconds']} s profiled, per {unit}):")
    for k, v in report["components"].items():
        if v["share"] >= 0.005:
            print(f"    {k:32s} {v['us_per_unit']:9.1f} µs  {v['share'] * 100:5.1f} %")
    print("    top functions by own time (µs per unit, own / cumulative):")
    for row in report["top_own_time"]:
        print(f"      {row['own_us_per_unit']:8.1f} {row['cumulative_us_per_unit']:9.1f}  "
              f"{row['calls']:>8}  {row['function']}")
    print("    top functions of ours by cumulative time:")
    for row in report["top_cumulative_ours"]:
        print(f"      {row['cumulative_us_per_unit']:9.1f}  {row['calls']:>8}  {row['function']}")


# ------------------------------------------------------------------ main


async def run_lifecycle(args: argparse.Namespace) -> dict[str, Any]:
    fn = lifecycle_http if args.transport == "http" else lifecycle_memory
    await fn(min(args.jobs, max(10, args.jobs // 10)))  # warm up: imports, discovery
    runs = [await fn(args.jobs) for _ in range(args.repeat)]
    med = sorted(runs, key=lambda r: r.total)[len(runs) // 2]
    out: dict[str, Any] = {
        "transport": args.transport, "jobs": args.jobs,
        "cpu_ms_per_job": round(med.total / med.n * 1e3, 3),
        "main_thread_ms_per_job": round(med.main_thread / med.n * 1e3, 3),
        "runs_cpu_ms_per_job": [round(r.total / r.n * 1e3, 3) for r in runs],
        "phases_ms_per_job": {k: round(v / med.n * 1e3, 3) for k, v in med.cpu.items()},
        "wall_seconds": round(med.wall, 2),
        "reconciles_per_job": med.reconciles,
        "requests_per_job": med.requests,
        "gc_ms_per_job": {str(k): round(v / med.n * 1e3, 3) for k, v in sorted(med.gc.items())},
    }
    print(f"lifecycle ({args.transport}, {args.jobs} Jobs): {out['cpu_ms_per_job']} ms CPU "
          f"per Job ({out['main_thread_ms_per_job']} in the event loop's thread; runs "
          f"{out['runs_cpu_ms_per_job']}); per phase "
          + ", ".join(f"{k} {v}" for k, v in out["phases_ms_per_job"].items())
          + f"; reconciles per Job {med.reconciles}, requests per Job {med.requests}"
          + (f", GC ms per Job by generation {out['gc_ms_per_job']}" if args.gc_time else ""))
    if args.sample:
        sampler = Sampler()
        run = await fn(args.jobs, sampler)
        out["sampled"] = sample_report(sampler, run, args.top)
        print_samples("lifecycle", out["sampled"], "Job")
    if args.profile:
        profiler = cProfile.Profile()
        await fn(args.jobs, profiler)
        out["profile"] = profile_report(profiler, args.jobs, args.top)
        print_profile("lifecycle", out["profile"], "Job")
        _dump(profiler, args, "lifecycle")
    return out


async def run_reconcile(args: argparse.Namespace) -> dict[str, Any]:
    profiler = cProfile.Profile() if args.profile else None
    out = await bench_reconcile(args.reconcile_jobs, args.repeat, profiler)
    print("reconcile (nothing to write): " + ", ".join(
        f"{k} {v['us_per_reconcile']} µs" for k, v in out.items()) + " CPU per reconcile")
    return _with_profile(out, profiler, 2 * args.reconcile_jobs, args, "reconcile",
                         "no-op reconciles (pending + running)", "reconcile")


async def run_webhook(args: argparse.Namespace) -> dict[str, Any]:
    profiler = cProfile.Profile() if args.profile else None
    out = await bench_webhook(args.reviews, args.repeat, profiler)
    print(f"webhook: mutate {out['mutate']['us_per_review']} µs, validate "
          f"{out['validate']['us_per_review']} µs per review ({out['us_per_job']} µs per Job)")
    return _with_profile(out, profiler, 2 * args.reviews, args, "webhook",
                         "webhook (mutate + validate)", "review")


async def run_watch(args: argparse.Namespace) -> dict[str, Any]:
    profiler = cProfile.Profile() if args.profile else None
    out = await bench_watch(args.reconcile_jobs, args.repeat, profiler)
    print(f"watch: {out['us_per_event']} µs CPU per event ({out['events']} events, "
          f"{out['bytes_per_event']} bytes each), {out['us_per_copy']} µs per cache copy")
    return _with_profile(out, profiler, out["events"], args, "watch", "watch events", "event")


async def run_http(args: argparse.Namespace) -> dict[str, Any]:
    profiler = cProfile.Profile() if args.profile else None
    out = await bench_http(args.requests, args.repeat, profiler)
    print("http: " + ", ".join(f"{k} {v['us_per_request']} µs" for k, v in out.items())
          + " CPU per request")
    return _with_profile(out, profiler, 3 * args.requests, args, "http",
                         "http (get + create + patch)", "request")


def _with_profile(out: dict[str, Any], profiler: cProfile.Profile | None, per: int,
                  args: argparse.Namespace, scenario: str, title: str, unit: str
                  ) -> dict[str, Any]:
    """``out``, with the profile of ``per`` units added and printed when one was taken."""
    if profiler is not None:
        out["profile"] = profile_report(profiler, per, args.top)
        print_profile(title, out["profile"], unit)
        _dump(profiler, args, scenario)
    return out


def _dump(profiler: cProfile.Profile, args: argparse.Namespace, scenario: str) -> None:
    if args.dump:
        profiler.dump_stats(f"{args.dump}.{scenario}.pstats")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenario", nargs="*",
                        choices=("lifecycle", "reconcile", "watch", "webhook", "http"),
                        default=["lifecycle", "reconcile", "watch", "webhook", "http"])
    parser.add_argument("--transport", choices=("http", "memory"), default="http",
                        help="lifecycle: API server in a child process over HTTP (our CPU "
                             "only), or in this process")
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--reconcile-jobs", type=int, default=200,
                        help="reconcile: Jobs reconciled per pass")
    parser.add_argument("--reviews", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="add a cProfile breakdown")
    parser.add_argument("--gc-time", action="store_true",
                        help="lifecycle: also measure the CPU time of garbage collections")
    parser.add_argument("--sample", action="store_true",
                        help="lifecycle: add a sampling-profiler breakdown (less distorted)")
    parser.add_argument("--top", type=int, default=25, help="functions listed per profile")
    parser.add_argument("--dump", default=None,
                        help="also write each raw profile to <DUMP>.<scenario>.pstats")
    parser.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                        help="event loop (auto: uvloop when installed, as the manager)")
    parser.add_argument("--log-level", default="info",
                        help="the manager's log level (its default; records go to devnull)")
    parser.add_argument("--output", default="-", help="JSON results file ('-' for none)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    run = loop_runner(args.loop)  # the shipped runner's choice of loop
    GCTimer.enabled = args.gc_time
    if args.child:
        logging.basicConfig(level=logging.WARNING)
        run(_serve_child())
        return 0
    root = logging.getLogger()
    handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(args.log_level.upper())

    async def all_scenarios() -> dict[str, Any]:
        results: dict[str, Any] = {}
        for name, fn in (("lifecycle", run_lifecycle), ("reconcile", run_reconcile),
                         ("watch", run_watch), ("webhook", run_webhook), ("http", run_http)):
            if name in args.scenario:
                results[name] = await fn(args)
        return results

    results = run(all_scenarios())
    if args.output != "-":
        doc = {"python": platform.python_version(), "platform": platform.platform(),
               "cpus": os.cpu_count(), "loop": args.loop, "argv": sys.argv[1:],
               "results": results}
        Path(args.output).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
