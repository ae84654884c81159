"""Side-by-side benchmarks of the runtime and the batch/v1 Job integration.

Every benchmark runs a subject and a baseline in the same process, on the same in-memory
API server (``jobframework.testing.APIServer``), one after the other, and reports both
absolute rates and their ratio. Only the ratios are meant to be compared across machines.

    python benchmarks/run.py                 # default sizes, writes benchmarks/results.json
    python benchmarks/run.py --scale 0.2     # smaller sizes
    python benchmarks/run.py --output -      # no results file

The functions ``bench_*`` take a size and return a :class:`Result`; the smoke test in
``tests/unit/test_benchmarks_smoke.py`` calls them with a size of 3.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from integrations.batchjob import CALLBACKS, FRAMEWORK_NAME, JOB_GVK, setup_indexes
from jobframework import constants as c
from jobframework.integrations import IntegrationManager
from jobframework.runtime.cache import SharedInformer
from jobframework.runtime.clock import RealClock, rfc3339
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.reconcile import Request
from jobframework.runtime.reconcile import Result as ReconcileResult
from jobframework.runtime.workqueue import RateLimitingQueue
from jobframework.testing import APIServer
from jobframework.testing.http import serve_http

CONFIG_MAP = GVK("", "v1", "ConfigMap")
WORKLOAD = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")
NAMESPACE = "bench"
#: Seconds a benchmark waits for the system to converge before it fails.
WAIT_LIMIT = 120.0

#: Default sizes, chosen so the whole run takes well under two minutes on two busy cores.
DEFAULT_SIZES = {"workqueue": 30000, "informer": 3000, "batchjob": 200, "http": 500}
#: Each benchmark runs this many times; the run with the median ratio is reported.
DEFAULT_REPEAT = 3


@dataclasses.dataclass(frozen=True)
class Result:
    """One benchmark: the subject's and the baseline's rate, measured side by side.

    ``ratio`` is ``subject_rate / baseline_rate``: above 1 the subject is faster.
    ``extra`` holds further absolute figures (named, in the same unit unless said).
    """

    name: str
    size: int
    unit: str
    subject: str
    subject_rate: float
    baseline: str
    baseline_rate: float
    extra: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """Subject rate over baseline rate."""
        return self.subject_rate / self.baseline_rate

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, ratio included."""
        d = dataclasses.asdict(self)
        d["ratio"] = self.ratio
        return d


def _rate(count: int, seconds: float) -> float:
    # A floor on the duration keeps tiny sizes (the smoke test) from dividing by zero.
    return count / max(seconds, 1e-9)


def new_server() -> APIServer:
    """An in-memory API server serving the Kueue kinds the reconciler touches."""
    server = APIServer(RealClock(), builtin_defaults=True)
    server.register_kind(WORKLOAD, "workloads", True)
    server.register_kind(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "WorkloadPriorityClass"),
                         "workloadpriorityclasses", False, status_subresource=False)
    server.register_kind(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "ResourceFlavor"),
                         "resourceflavors", False, status_subresource=False)
    server.register_kind(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "LocalQueue"),
                         "localqueues", True)
    server.register_kind(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "ClusterQueue"),
                         "clusterqueues", False)
    return server


async def _namespace(server: APIServer) -> None:
    await server.client().create({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": NAMESPACE}})


def _config_map(i: int) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i}", "namespace": NAMESPACE},
            "data": {"index": str(i), "payload": "x" * 64}}


async def _until(cond: Callable[[], bool], what: str) -> None:
    """Yield to the loop until ``cond`` holds (a short sleep once the loop is idle)."""
    deadline = time.perf_counter() + WAIT_LIMIT
    spins = 0
    while not cond():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"benchmark timed out waiting for {what}")
        spins += 1
        # Mostly pure yields; an occasional real sleep lets timers (backoffs) fire.
        await asyncio.sleep(0.001 if spins % 50 == 0 else 0)


# ------------------------------------------------------------------ (1) work queue


async def bench_workqueue(n: int) -> Result:
    """``RateLimitingQueue`` add (each key 3 times, de-duplicated) / get / done of ``n`` keys,
    against a plain ``asyncio.Queue`` put / get / task_done of the same ``n`` keys."""
    keys = [Request.of(NAMESPACE, f"job-{i}") for i in range(n)]

    q: RateLimitingQueue[Request] = RateLimitingQueue()
    start = time.perf_counter()
    for _ in range(3):
        for k in keys:
            q.add(k)
    handled = 0
    while handled < n:
        item = await q.get()
        q.done(item)
        handled += 1
    rlq = time.perf_counter() - start
    assert len(q) == 0, "every duplicate must have been folded into one key"
    q.shutdown()

    plain: asyncio.Queue[Request] = asyncio.Queue()
    start = time.perf_counter()
    for k in keys:
        plain.put_nowait(k)
    for _ in range(n):
        await plain.get()
        plain.task_done()
    base = time.perf_counter() - start

    return Result("workqueue", n, "keys/s", "RateLimitingQueue (3 adds per key, dedup)",
                  _rate(n, rlq), "asyncio.Queue (1 put per key)", _rate(n, base),
                  {"rlq_adds_per_s": _rate(3 * n, rlq)})


# ------------------------------------------------------------------ (2) informer


async def bench_informer(n: int) -> Result:
    """Watch events applied into a ``SharedInformer`` store, against objects returned by
    direct ``list`` calls on the same server (objects/s both)."""
    server = new_server()
    await _namespace(server)
    client = server.client()
    informer = SharedInformer(client, CONFIG_MAP, namespace=NAMESPACE)
    seen = 0

    def on_add(obj: Object) -> None:
        nonlocal seen
        seen += 1

    informer.add_event_handler(on_add=on_add)
    informer.start()
    try:
        await informer.wait_for_sync()
        # Create every object first: the in-memory server queues the watch events, so the
        # timed part below is the informer decoding and storing them, not the writes.
        start_create = time.perf_counter()
        for i in range(n):
            await client.create(_config_map(i))
        created = time.perf_counter() - start_create
        already = seen
        start = time.perf_counter()
        await _until(lambda: seen >= n, "the informer to catch up")
        applied = time.perf_counter() - start
        # If creates let the informer run in between, count the whole window.
        events_rate = (_rate(n, applied) if already == 0
                       else _rate(n, created + applied))
        cached = len(informer.indexer.list())
        assert cached == n, f"informer holds {cached} of {n}"
    finally:
        await informer.stop()

    lists = max(1, 20000 // max(n, 1))
    start = time.perf_counter()
    for _ in range(lists):
        got = await client.list(CONFIG_MAP, namespace=NAMESPACE)
        assert len(got.items) == n
    listed = time.perf_counter() - start
    return Result("informer", n, "objects/s", "informer watch events applied", events_rate,
                  "direct list calls (objects returned)", _rate(n * lists, listed),
                  {"creates_per_s": _rate(n, created),
                   "events_applied_during_creates": float(already)})


# ------------------------------------------------------------------ (3) batch/v1 Job


def _job(i: int) -> Object:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"job-{i}", "namespace": NAMESPACE,
                     "labels": {c.QUEUE_LABEL: "lq"}},
        "spec": {
            "suspend": True, "parallelism": 2,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox",
                                "resources": {"requests": {"cpu": "1"}}}],
            }},
        },
    }


async def _admit(server: APIServer, wl: Object) -> None:
    """What Kueue's scheduler writes: quota reservation and Admitted, as ``kueue-admission``."""
    now = rfc3339(server.clock.now())
    count = wl["spec"]["podSets"][0]["count"]
    await server.client().apply({
        "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
        "metadata": {"name": wl["metadata"]["name"], "namespace": NAMESPACE},
        "status": {
            "conditions": [
                {"type": c.WORKLOAD_QUOTA_RESERVED, "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": now},
                {"type": c.WORKLOAD_ADMITTED, "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted", "lastTransitionTime": now}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": wl["spec"]["podSets"][0]["name"], "flavors": {"cpu": "default"},
                 "count": count}]},
        }}, field_manager=c.ADMISSION_NAME, force=True, subresource="status")


_WRITES = ("create", "update", "update_status", "patch", "apply", "delete")
_READS = ("get", "list")


def _count_calls(client: Any) -> dict[str, int]:
    """Count ``client``'s API calls (reads: get/list; writes: everything that mutates)."""
    counts = {"writes": 0, "reads": 0}

    def wrap(verb: str, kind: str) -> None:
        method = getattr(client, verb)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            counts[kind] += 1
            return await method(*args, **kwargs)

        setattr(client, verb, counted)

    for verb in _WRITES:
        wrap(verb, "writes")
    for verb in _READS:
        wrap(verb, "reads")
    return counts


@contextlib.asynccontextmanager
async def _running(mgr: Manager) -> AsyncIterator[None]:
    task = asyncio.create_task(mgr.start())
    try:
        yield
    finally:
        await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


async def bench_batchjob(n: int) -> Result:
    """The batch/v1 Job controller under the Manager: ``n`` suspended Jobs get their
    Workloads, then (after a simulated admission) are started. Baseline: raw client
    create + get round trips of ``n`` Workload objects on the same server."""
    server = new_server()
    await _namespace(server)
    client = server.client()
    await client.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                         "metadata": {"name": "default"}, "spec": {}})

    im = IntegrationManager()
    im.register_integration(FRAMEWORK_NAME, CALLBACKS)
    im.enable_integration(FRAMEWORK_NAME)
    # The manager's own client, its calls counted (benchmark writes are not).
    mgr_client = server.client()
    calls = _count_calls(mgr_client)
    mgr = Manager(mgr_client)
    await setup_indexes(mgr.get_cache())
    assert CALLBACKS.new_reconciler is not None
    reconciler = CALLBACKS.new_reconciler(
        mgr.get_client(), mgr.get_cache(),
        mgr.get_event_recorder_for(f"{FRAMEWORK_NAME}-kueue-controller"),
        integration_manager=im)
    reconciles = 0
    inner: Callable[[Request], Awaitable[ReconcileResult]] = reconciler.reconcile

    async def counted(request: Request) -> ReconcileResult:
        nonlocal reconciles
        reconciles += 1
        return await inner(request)

    reconciler.reconcile = counted
    reconciler.setup_with_manager(mgr)

    def workloads() -> list[Object]:
        return server.objects(WORKLOAD, NAMESPACE)

    def started() -> int:
        return sum(1 for j in server.objects(JOB_GVK, NAMESPACE)
                   if j["spec"].get("suspend") is False)

    async with _running(mgr):
        start = time.perf_counter()
        for i in range(n):
            await client.create(_job(i))
        await _until(lambda: len(workloads()) >= n, "the workloads")
        create_phase = time.perf_counter() - start
        create_reconciles = reconciles
        create_writes = calls["writes"]

        start = time.perf_counter()
        for wl in workloads():
            await _admit(server, wl)
        await _until(lambda: started() >= n, "the jobs to start")
        start_phase = time.perf_counter() - start
        start_reconciles = reconciles - create_reconciles

    base_server = new_server()
    await _namespace(base_server)
    base_client = base_server.client()
    start = time.perf_counter()
    for i in range(n):
        await base_client.create({
            "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
            "metadata": {"name": f"wl-{i}", "namespace": NAMESPACE},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2,
                                                     "template": _job(i)["spec"]["template"]}]},
        })
        await base_client.get(WORKLOAD, f"wl-{i}", namespace=NAMESPACE)
    base = time.perf_counter() - start

    total = create_phase + start_phase
    return Result("batchjob", n, "jobs/s", "Job -> Workload -> admitted -> started",
                  _rate(n, total), "client create+get round trips", _rate(n, base),
                  {"workloads_created_per_s": _rate(n, create_phase),
                   "jobs_started_per_s": _rate(n, start_phase),
                   "reconciles_per_s": _rate(create_reconciles + start_reconciles, total),
                   "reconciles_per_job": (create_reconciles + start_reconciles) / n,
                   "api_writes_per_job": calls["writes"] / n,
                   "api_writes_per_job_create_phase": create_writes / n,
                   "api_reads_per_job": calls["reads"] / n,
                   "round_trips_per_s": _rate(n, base)})


# ------------------------------------------------------------------ (4) HTTP front


async def bench_http(n: int) -> Result:
    """``get`` of ``n`` objects and ``list`` calls through the ``RestClient`` on the HTTP
    front (loopback), against the ``InMemoryClient`` of the same server."""
    server = new_server()
    await _namespace(server)
    mem = server.client()
    for i in range(n):
        await mem.create(_config_map(i))
    lists = 10

    async def run(client: Any) -> tuple[float, float]:
        start = time.perf_counter()
        for i in range(n):
            await client.get(CONFIG_MAP, f"cm-{i}", namespace=NAMESPACE)
        gets = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(lists):
            got = await client.list(CONFIG_MAP, namespace=NAMESPACE)
            assert len(got.items) == n
        return gets, time.perf_counter() - start

    mem_gets, mem_lists = await run(mem)
    front = await serve_http(server)
    try:
        async with front.client() as rest:
            await rest.get(CONFIG_MAP, "cm-0", namespace=NAMESPACE)  # discovery, connection
            rest_gets, rest_lists = await run(rest)
    finally:
        await front.close()
    return Result("http", n, "gets/s", "RestClient over HTTP (loopback)", _rate(n, rest_gets),
                  "InMemoryClient", _rate(n, mem_gets),
                  {"rest_list_objects_per_s": _rate(n * lists, rest_lists),
                   "memory_list_objects_per_s": _rate(n * lists, mem_lists),
                   "list_ratio": mem_lists / max(rest_lists, 1e-9)})


BENCHMARKS: dict[str, Callable[[int], Awaitable[Result]]] = {
    "workqueue": bench_workqueue,
    "informer": bench_informer,
    "batchjob": bench_batchjob,
    "http": bench_http,
}


def render(results: list[Result]) -> str:
    """The table printed after a run."""
    rows = [("benchmark", "size", "subject", "rate", "baseline", "rate", "ratio")]
    for r in results:
        rows.append((r.name, str(r.size), r.subject, f"{r.subject_rate:,.0f} {r.unit}",
                     r.baseline, f"{r.baseline_rate:,.0f} {r.unit}", f"{r.ratio:.3f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        for key, value in r.extra.items():
            lines.append(f"  {r.name}.{key} = {value:,.3f}")
    return "\n".join(lines)


async def run_all(sizes: dict[str, int], only: list[str] | None = None,
                  repeat: int = DEFAULT_REPEAT) -> list[Result]:
    """Run the selected benchmarks in order, one at a time, ``repeat`` times each; keep
    the run whose ratio is the median (subject and baseline always from the same run)."""
    results = []
    for name, fn in BENCHMARKS.items():
        if only and name not in only:
            continue
        runs = sorted([await fn(sizes[name]) for _ in range(max(1, repeat))],
                      key=lambda r: r.ratio)
        results.append(runs[len(runs) // 2])
    return results


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the default sizes")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT,
                        help="runs per benchmark (the median ratio is kept)")
    parser.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), help="a subset")
    parser.add_argument("--output", default=str(Path(__file__).with_name("results.json")),
                        help="results file ('-' for none)")
    args = parser.parse_args(argv)
    sizes = {k: max(3, int(v * args.scale)) for k, v in DEFAULT_SIZES.items()}
    wall = time.perf_counter()
    results = asyncio.run(run_all(sizes, args.only, args.repeat))
    wall = time.perf_counter() - wall
    print(render(results))
    print(f"\nwall time {wall:.1f} s; ratios compare subject and baseline from this run only")
    if args.output != "-":
        doc = {"python": platform.python_version(), "platform": platform.platform(),
               "cpus": os.cpu_count(), "repeat": args.repeat, "wall_seconds": wall,
               "results": [r.as_dict() for r in results]}
        Path(args.output).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
