"""Real-control-plane benchmark: our batch/v1 Job integration against Kueue's own.

Two local clusters (``jobframework.testing.cluster``), one after the other on this machine,
in one invocation:

* ``kueue``: Kueue's built-in ``batch/job`` integration manages the Jobs;
* ``python``: Kueue's ``batch/job`` is off and ``Job.v1.batch`` is an external framework;
  our manager (``python -m integrations run --integrations batchjob``) runs as its own
  process beside Kueue, so its CPU time and memory are its own;
* ``embedded`` (with ``--embedded``): the same, with the integration set up the documented
  embedded way instead (``embedded.py``: ``Manager(client)`` + ``setup_controllers(...,
  configuration=<Kueue's file>)`` run by ``jobframework.runtime.run``), to show it
  performs as the shipped manager does: each pair's row sets it against both.

On each, ``N`` queued Jobs (10m cpu, one pod each) are created ``--concurrency`` at a time
into a ClusterQueue with ample quota, and the benchmark records when each Job is first seen
unsuspended (a watch). It reports, per side: throughput (Jobs unsuspended per second, first
create to last unsuspend), create→unsuspend latency p50/p99, API requests per Job by
controller and verb (from the API server's audit log, by user agent), and for our manager
CPU seconds per Job and peak RSS; then the ratios python/kueue.

    python benchmarks/cluster.py --jobs 500               # one size
    python benchmarks/cluster.py --jobs 500 --jobs 5000   # several
    python benchmarks/cluster.py --jobs 300 --embedded    # the embedded manager too
    nox -s bench-cluster -- --jobs 500

Results go to ``benchmarks/cluster-results.json`` (``--output -`` for none).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from jobframework.runtime import errors
from jobframework.runtime.client.rest import RestClient, Timeouts
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.cluster import (
    EXTERNAL_FRAMEWORKS,
    QUEUE_LABEL,
    LocalCluster,
    Topology,
    cache_root,
)
from jobframework.testing.cluster.manifests import FlavorSpec

JOB = GVK("batch", "v1", "Job")
NAMESPACE_GVK = GVK("", "v1", "Namespace")
CQ = GVK("kueue.x-k8s.io", "v1beta2", "ClusterQueue")
LQ = GVK("kueue.x-k8s.io", "v1beta2", "LocalQueue")
QUEUE = "bench"
BENCH_AGENT = "kueue-jf-bench"
OUR_AGENT = "kueue-jobframework"
RESULTS = Path(__file__).with_name("cluster-results.json")
#: The embedded side's program.
EMBEDDED = Path(__file__).with_name("embedded.py")
#: The sides measured in each pair: Go Kueue's Job integration, the shipped manager,
#: and (``--embedded``) the integration embedded in a program of one's own.
SIDES = ("kueue", "python", "embedded")

#: Nodes big enough that every benchmark pod is placed (pods stay Running: the run time
#: is far longer than a benchmark, so no completion churn skews either side).
BENCH_FLAVORS = (FlavorSpec("on-demand", nodes=2, node_cpu="1000", node_memory="4000Gi",
                            node_pods="10000", quota_cpu="1000", quota_memory="4000Gi"),)
POD_RUN_MS = 3_600_000
KUEUE_TOPOLOGY = Topology(flavors=BENCH_FLAVORS, pod_run_ms=POD_RUN_MS, audit=True)
#: Kueue's batch/job off (an integration whose CRD is absent stands in for an empty list,
#: which Kueue would default to batch/job); Jobs are an external framework.
PYTHON_TOPOLOGY = Topology(flavors=BENCH_FLAVORS, pod_run_ms=POD_RUN_MS, audit=True,
                           frameworks=("jobset.x-k8s.io/jobset",),
                           external_frameworks=(*EXTERNAL_FRAMEWORKS, "Job.v1.batch"))


@dataclasses.dataclass
class SideResult:
    """One side of one size."""

    side: str
    jobs: int
    seconds: float
    throughput: float
    p50: float
    p99: float
    #: controller → verb → requests per Job during the run.
    requests_per_job: dict[str, dict[str, float]]
    #: Our manager only: CPU seconds per Job during the run, and peak RSS in MB.
    cpu_ms_per_job: float | None = None
    peak_rss_mb: float | None = None
    #: Seconds from the first create to the last create returned (the creates go
    #: through the Job webhooks: theirs or ours).
    create_seconds: float = 0.0
    #: The API server's time for a Job create, p50 and p99 (webhook calls included).
    create_p50: float = 0.0
    create_p99: float = 0.0
    #: The Kueue manager process: CPU per Job during the run, and peak RSS in MB.
    kueue_cpu_ms_per_job: float | None = None
    kueue_peak_rss_mb: float | None = None
    #: Seconds from the job controller's unsuspend to its next Event on the Job
    #: (``Started``), p50 and p99, over the Jobs that have both in the run.
    event_lag_p50: float | None = None
    event_lag_p99: float | None = None
    #: Which pair of runs (``--pairs``) this side belongs to.
    pair: int = 0
    #: The API server's mean time (ms) in the batch Job webhooks per call during the run,
    #: by ``"<type> <operation>"`` (``admit CREATE``, ``validating CREATE``, ...).
    job_webhook_ms: dict[str, float] = dataclasses.field(default_factory=dict)


def namespace_for(n: int) -> str:
    """Each size runs in a namespace of its own (deleted afterwards, not waited for)."""
    return f"bench-{n}"


def job_manifest(i: int, ns: str) -> Object:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"bench-{i:05d}", "namespace": ns, "labels": {QUEUE_LABEL: QUEUE}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.example/fake:1",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}},
    }


# --------------------------------------------------------------------------- audit log


def controller_of_agent(agent: str) -> str:
    """A short controller name for an audit event's user agent."""
    if agent.startswith(BENCH_AGENT):
        return "benchmark"
    if agent.startswith(OUR_AGENT):
        return "ours"
    head = agent.split("/", 1)[0]
    if head == "kueue" or head.startswith("kueue-") or "kueue" in agent.split(" ", 1)[0]:
        return "kueue"
    if head in ("kube-controller-manager", "kube-scheduler", "kwok", "kube-apiserver"):
        return head
    return head or "unknown"


def _ts(value: str) -> float:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@dataclasses.dataclass
class AuditSummary:
    """What the audit log says about one run."""

    #: (controller, verb) → requests.
    counts: Counter[tuple[str, str]]
    #: The API server's time (s) for each of the benchmark's Job creates (webhooks included).
    create_times: list[float]
    #: Per Job, seconds from the job controller's unsuspend write to the first Event it
    #: wrote about that Job afterwards (``Started``): how late its events are.
    event_lags: list[float]


#: The controllers whose Job writes and Events count as the job controller's.
JOB_CONTROLLERS = ("kueue", "ours")


def count_requests(audit: Path, offset: int) -> AuditSummary:
    """Requests, Job create times and event lags in the audit log after byte ``offset``."""
    counts: Counter[tuple[str, str]] = Counter()
    creates: list[float] = []
    unsuspended: dict[str, float] = {}
    events: dict[str, list[float]] = {}
    with audit.open("rb") as f:
        f.seek(offset)
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("stage") != "ResponseComplete":
                continue
            controller = controller_of_agent(str(ev.get("userAgent") or ""))
            verb = str(ev.get("verb") or "")
            counts[(controller, verb)] += 1
            ref = ev.get("objectRef") or {}
            resource, name = ref.get("resource"), str(ref.get("name") or "")
            try:
                if controller == "benchmark" and verb == "create" and resource == "jobs":
                    creates.append(_ts(ev["stageTimestamp"])
                                   - _ts(ev["requestReceivedTimestamp"]))
                elif controller in JOB_CONTROLLERS and name:
                    ok = (ev.get("responseStatus") or {}).get("code", 200) < 300
                    if resource == "jobs" and verb in ("patch", "update") and ok \
                            and not ref.get("subresource"):
                        unsuspended.setdefault(name, _ts(ev["stageTimestamp"]))
                    elif resource == "events" and verb == "create" and ok:
                        # Events are named <regarding object>.<hex nanoseconds>.
                        events.setdefault(name.rsplit(".", 1)[0], []).append(
                            _ts(ev["stageTimestamp"]))
            except (KeyError, ValueError):
                continue
    lags = []
    for job, t in unsuspended.items():
        after = [e for e in events.get(job, ()) if e >= t]
        if after:
            lags.append(min(after) - t)
    return AuditSummary(counts, creates, lags)


#: kube-apiserver's histogram of the time each admission webhook took.
WEBHOOK_METRIC = "apiserver_admission_webhook_admission_duration_seconds_"


def job_webhook_totals(metrics: str) -> dict[str, tuple[float, float]]:
    """(seconds, calls) so far in the batch Job webhooks (Kueue's ``mjob.kb.io`` /
    ``vjob.kb.io``, ours ``mjob.batch...`` / ``vjob.batch...``), by type and operation,
    from kube-apiserver's ``/metrics`` text."""
    out: dict[str, tuple[float, float]] = {}
    # Only this histogram's samples are parsed: the whole text is several megabytes.
    lines = "\n".join(line for line in metrics.splitlines() if line.startswith(WEBHOOK_METRIC))
    for family in text_string_to_metric_families(lines):
        for sample in family.samples:
            part = sample.name.removeprefix(WEBHOOK_METRIC)
            if part not in ("sum", "count") or not sample.labels.get(
                    "name", "").startswith(("mjob.", "vjob.")):
                continue
            key = f"{sample.labels.get('type')} {sample.labels.get('operation')}"
            seconds, calls = out.get(key, (0.0, 0.0))
            if part == "sum":
                seconds += sample.value
            else:
                calls += sample.value
            out[key] = (seconds, calls)
    return out


def mean_ms(before: dict[str, tuple[float, float]],
            after: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Mean milliseconds per call between two :func:`job_webhook_totals`."""
    out = {}
    for key, (seconds, calls) in sorted(after.items()):
        s0, c0 = before.get(key, (0.0, 0.0))
        if calls > c0:
            out[key] = round((seconds - s0) * 1000 / (calls - c0), 2)
    return out


async def api_metrics(client: RestClient) -> str:
    return (await client.request_bytes("GET", "/metrics")).decode()


def audit_size(audit: Path) -> int:
    return audit.stat().st_size if audit.exists() else 0


# --------------------------------------------------------------------------- processes


def kueue_pid(state_dir: Path) -> int:
    """The Kueue manager's pid, from the launcher's record."""
    return int(json.loads((state_dir / "pids" / "kueue.json").read_text())["pid"])


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def proc_peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextlib.asynccontextmanager
async def our_manager(kubeconfig: str, log: Path, profile: Path | None = None,
                      integrations: str = "batchjob",
                      pythonpath: str | None = None) -> AsyncIterator[int]:
    """Our external-framework manager for batch/v1 Jobs as a process; yields its pid once
    started. With ``profile``, it runs under cProfile (stats written there when it stops);
    with ``pythonpath``, from that source tree instead of the installed one."""
    env = None if pythonpath is None else dict(os.environ, PYTHONPATH=pythonpath)
    async with _manager_process(
            ["-m", "integrations", "run", "--kubeconfig", kubeconfig,
             "--integrations", integrations], log, profile, env) as pid:
        yield pid


@contextlib.asynccontextmanager
async def embedded_manager(kubeconfig: str, kueue_config: Path, log: Path,
                           profile: Path | None = None) -> AsyncIterator[int]:
    """The batch/v1 Job integration embedded the documented way (``embedded.py``), as a
    process reading Kueue's own Configuration file; yields its pid once started."""
    async with _manager_process(
            [str(EMBEDDED), "--kubeconfig", kubeconfig, "--kueue-config", str(kueue_config)],
            log, profile) as pid:
        yield pid


@contextlib.asynccontextmanager
async def _manager_process(argv: list[str], log: Path, profile: Path | None = None,
                           env: dict[str, str] | None = None) -> AsyncIterator[int]:
    """``python ARGV`` (under cProfile with ``profile``), output to ``log``; stopped with
    SIGTERM (SIGKILL after a minute) on exit."""
    out = log.open("wb")
    prefix = ["-m", "cProfile", "-o", str(profile)] if profile else []
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *prefix, *argv, stdout=out, stderr=asyncio.subprocess.STDOUT,
        env=env)
    try:
        yield proc.pid
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        out.close()


# --------------------------------------------------------------------------- one side


async def setup_cluster_queue(client: RestClient) -> None:
    with contextlib.suppress(errors.AlreadyExists):
        await client.create({
            "apiVersion": CQ.api_version, "kind": "ClusterQueue", "metadata": {"name": QUEUE},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": "on-demand", "resources": [
                    {"name": "cpu", "nominalQuota": "1000"},
                    {"name": "memory", "nominalQuota": "4000Gi"}]}]}]}})
    await wait_for("ClusterQueue active", lambda: _cq_active(client), 120)


async def setup_namespace(client: RestClient, ns: str) -> None:
    """The namespace and its LocalQueue, once its ServiceAccount exists."""
    with contextlib.suppress(errors.AlreadyExists):
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    with contextlib.suppress(errors.AlreadyExists):
        await client.create({"apiVersion": LQ.api_version, "kind": "LocalQueue",
                             "metadata": {"name": QUEUE, "namespace": ns},
                             "spec": {"clusterQueue": QUEUE}})
    await wait_for(f"ServiceAccount {ns}/default", lambda: _has_sa(client, ns), 120)


async def _cq_active(client: RestClient) -> bool:
    cq = await client.get(CQ, QUEUE)
    return any(c.get("type") == "Active" and c.get("status") == "True"
               for c in (cq.get("status") or {}).get("conditions") or [])


async def _has_sa(client: RestClient, ns: str) -> bool:
    try:
        await client.get(GVK("", "v1", "ServiceAccount"), "default", namespace=ns)
        return True
    except errors.NotFound:
        return False


async def _suspends(client: RestClient, ns: str) -> bool:
    probe = job_manifest(99999, ns)
    probe["metadata"]["name"] = "bench-probe"
    try:
        out = await client.create(probe, dry_run=True)
    except errors.ApiError:
        return False
    return bool(out["spec"].get("suspend"))


async def wait_for(what: str, probe: Any, limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if await probe():
                return
        except errors.ApiError:
            pass
        await asyncio.sleep(0.5)
    raise TimeoutError(f"timed out after {limit:.0f}s waiting for {what}")


async def follow_unsuspends(client: RestClient, ns: str, seen: dict[str, float],
                            stop: asyncio.Event) -> None:
    """Record the first time each Job is seen with ``spec.suspend: false``."""
    while not stop.is_set():
        listed = await client.list(JOB, namespace=ns)
        for j in listed.items:
            if j["spec"].get("suspend") is False:
                seen.setdefault(j["metadata"]["name"], time.monotonic())
        stream = client.watch(JOB, namespace=ns, resource_version=listed.resource_version)
        try:
            async for ev in stream:
                obj = ev.object
                if ev.type in ("ADDED", "MODIFIED") and obj.get("spec", {}).get("suspend") is False:
                    seen.setdefault(obj["metadata"]["name"], time.monotonic())
                if stop.is_set():
                    break
        except errors.Gone:
            continue
        finally:
            await stream.aclose()


async def run_side(side: str, topology: Topology, sizes: list[int], concurrency: int,
                   say: Any, profile: Path | None = None) -> list[SideResult]:
    state_dir = cache_root() / "clusters" / f"bench-{side}-{os.getpid()}"
    cluster = LocalCluster(state_dir, topology)
    say(f"[{side}] starting a local cluster...")
    info = cluster.up()
    audit = state_dir / "logs" / "audit.log"
    results: list[SideResult] = []
    try:
        async with await RestClient.from_kubeconfig(
                info.kubeconfig, user_agent=BENCH_AGENT,
                timeouts=Timeouts(read=60.0, watch_inactivity=120.0)) as client:
            await setup_cluster_queue(client)
            await setup_namespace(client, "bench-probe")
            async with contextlib.AsyncExitStack() as stack:
                pid: int | None = None
                if side == "python":
                    pid = await stack.enter_async_context(
                        our_manager(info.kubeconfig, state_dir / "logs" / "our-manager.log",
                                    profile))
                elif side == "embedded":
                    # Kueue's own file: the local cluster's Kueue reads it (no ConfigMap).
                    pid = await stack.enter_async_context(embedded_manager(
                        info.kubeconfig, state_dir / "config" / "kueue.yaml",
                        state_dir / "logs" / "embedded-manager.log", profile))
                await wait_for(f"{side}: the Job webhook to suspend a queued Job",
                               lambda: _suspends(client, "bench-probe"), 180)
                for n in sizes:
                    ns = namespace_for(n)
                    await setup_namespace(client, ns)
                    r = await measure(side, client, ns, n, concurrency, audit, pid,
                                      kueue_pid(state_dir), say)
                    say(f"[{side}] {n} Jobs in {r.seconds}s: {r.throughput} Jobs/s, "
                        f"p50 {r.p50}s, p99 {r.p99}s (creates done after {r.create_seconds}s,"
                        f" {r.create_p50 * 1000:.1f}/{r.create_p99 * 1000:.1f} ms p50/p99 each)"
                        f"; Kueue {r.kueue_cpu_ms_per_job} ms "
                        f"CPU/Job, peak RSS {r.kueue_peak_rss_mb} MB"
                        + (f"; ours {r.cpu_ms_per_job} ms CPU/Job, peak RSS "
                           f"{r.peak_rss_mb} MB" if pid else "")
                        + f"; Started event {r.event_lag_p50}/{r.event_lag_p99}s p50/p99 "
                          "after the unsuspend; Job webhooks " + (", ".join(
                              f"{k} {v} ms" for k, v in r.job_webhook_ms.items()) or "-"))
                    results.append(r)
                    # Gone in the background: its pods and Workloads are deleted by GC.
                    await client.delete(NAMESPACE_GVK, ns)
    finally:
        cluster.down()
        shutil.rmtree(state_dir, ignore_errors=True)
    return results


async def measure(side: str, client: RestClient, ns: str, n: int, concurrency: int,
                  audit: Path, pid: int | None, kueue: int, say: Any) -> SideResult:
    say(f"[{side}] {n} Jobs, {concurrency} creates at a time...")
    seen: dict[str, float] = {}
    created: dict[str, float] = {}
    stop = asyncio.Event()
    follower = asyncio.create_task(follow_unsuspends(client, ns, seen, stop))
    await asyncio.sleep(1.0)
    offset = audit_size(audit)
    hooks0 = job_webhook_totals(await api_metrics(client))
    cpu0 = proc_cpu_seconds(pid) if pid else 0.0
    kueue0 = proc_cpu_seconds(kueue)
    sem = asyncio.Semaphore(concurrency)
    t0 = time.monotonic()

    async def create(i: int) -> None:
        async with sem:
            obj = await client.create(job_manifest(i, ns))
            created[obj["metadata"]["name"]] = time.monotonic()

    await asyncio.gather(*(create(i) for i in range(n)))
    t_created = time.monotonic()
    names = set(created)
    deadline = time.monotonic() + max(300.0, n * 0.5)
    while not names <= set(seen):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{side}: only {len(names & set(seen))} of {n} unsuspended")
        await asyncio.sleep(0.2)
    t_end = max(seen[k] for k in names)
    cpu1 = proc_cpu_seconds(pid) if pid else 0.0
    kueue1 = proc_cpu_seconds(kueue)
    hooks1 = job_webhook_totals(await api_metrics(client))
    stop.set()
    follower.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await follower
    await asyncio.sleep(3.0)  # the audit backend writes in batches
    audited = count_requests(audit, offset)
    counts, create_times = audited.counts, sorted(audited.create_times)
    lags = sorted(audited.event_lags)
    lat = sorted(seen[k] - created[k] for k in names)
    per_job: dict[str, dict[str, float]] = {}
    for (controller, verb), count in sorted(counts.items()):
        per_job.setdefault(controller, {})[verb] = round(count / n, 3)
    seconds = t_end - t0
    return SideResult(
        side=side, jobs=n, seconds=round(seconds, 2), throughput=round(n / seconds, 2),
        p50=round(statistics.median(lat), 3), p99=round(lat[int(0.99 * (len(lat) - 1))], 3),
        requests_per_job=per_job,
        cpu_ms_per_job=round((cpu1 - cpu0) * 1000 / n, 2) if pid else None,
        peak_rss_mb=round(proc_peak_rss_mb(pid), 1) if pid else None,
        create_seconds=round(t_created - t0, 2),
        create_p50=round(statistics.median(create_times), 4) if create_times else 0.0,
        create_p99=round(create_times[int(0.99 * (len(create_times) - 1))], 4)
        if create_times else 0.0,
        kueue_cpu_ms_per_job=round((kueue1 - kueue0) * 1000 / n, 2),
        kueue_peak_rss_mb=round(proc_peak_rss_mb(kueue), 1),
        event_lag_p50=round(statistics.median(lags), 3) if lags else None,
        event_lag_p99=round(lags[int(0.99 * (len(lags) - 1))], 3) if lags else None,
        job_webhook_ms=mean_ms(hooks0, hooks1))


# --------------------------------------------------------------------------- memory


def proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def idle_job(i: int, ns: str) -> Object:
    """A suspended Job without a queue: cached by our manager, run by nobody."""
    job = job_manifest(i, ns)
    del job["metadata"]["labels"]
    job["spec"]["suspend"] = True
    return job


def idle_workload(i: int, ns: str) -> Object:
    """A Workload for a LocalQueue that does not exist: cached, never admitted."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"idle-{i:05d}", "namespace": ns},
            "spec": {"queueName": "nowhere", "podSets": [{
                "name": "main", "count": 1, "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.example/fake:1",
                                    "resources": {"requests": {"cpu": "10m"}}}]}}}]}}


async def run_memory(n: int, concurrency: int, say: Any) -> dict[str, float]:
    """Our manager's memory with ``n`` Jobs and ``n`` Workloads in its caches."""
    state_dir = cache_root() / "clusters" / f"bench-memory-{os.getpid()}"
    cluster = LocalCluster(state_dir, PYTHON_TOPOLOGY)
    say(f"[memory] starting a local cluster for {n} Jobs and {n} Workloads...")
    info = cluster.up()
    try:
        async with await RestClient.from_kubeconfig(
                info.kubeconfig, user_agent=BENCH_AGENT,
                timeouts=Timeouts(read=60.0, watch_inactivity=120.0)) as client, \
                our_manager(info.kubeconfig, state_dir / "logs" / "our-manager.log") as pid:
            ns = "bench-memory"
            await setup_namespace(client, ns)
            await wait_for("our Job webhook", lambda: _suspends(client, ns), 180)
            await asyncio.sleep(5.0)
            empty = proc_rss_mb(pid)
            sem = asyncio.Semaphore(concurrency)

            async def create(obj: Object) -> None:
                async with sem:
                    await client.create(obj)

            t0 = time.monotonic()
            await asyncio.gather(*(create(idle_job(i, ns)) for i in range(n)))
            await asyncio.gather(*(create(idle_workload(i, ns)) for i in range(n)))
            say(f"[memory] {2 * n} objects created in {time.monotonic() - t0:.0f}s")
            # The watches deliver them within moments; let the manager settle.
            previous = -1.0
            for _ in range(60):
                await asyncio.sleep(2.0)
                rss = proc_rss_mb(pid)
                if abs(rss - previous) < 0.5:
                    break
                previous = rss
            full = proc_rss_mb(pid)
            out = {"objects": 2 * n, "rss_empty_mb": round(empty, 1),
                   "rss_full_mb": round(full, 1), "peak_rss_mb": round(proc_peak_rss_mb(pid), 1),
                   "bytes_per_object": round((full - empty) * 1024 * 1024 / (2 * n))}
            say(f"[memory] our manager: {out['rss_empty_mb']} MB empty, {out['rss_full_mb']} MB"
                f" with {n} Jobs and {n} Workloads cached (peak {out['peak_rss_mb']} MB), "
                f"{out['bytes_per_object']} bytes per cached object")
            return out
    finally:
        cluster.down()
        shutil.rmtree(state_dir, ignore_errors=True)


# --------------------------------------------------------------------------- kinds

#: Pods that finish (2 s on kwok), so every kind runs its whole lifecycle.
KINDS_TOPOLOGY = Topology(
    flavors=(FlavorSpec("on-demand", nodes=2, node_cpu="1000", node_memory="4000Gi",
                        node_pods="10000", quota_cpu="1000", quota_memory="4000Gi"),),
    pod_run_ms=2000, audit=True, frameworks=("jobset.x-k8s.io/jobset",),
    external_frameworks=(*EXTERNAL_FRAMEWORKS, "Job.v1.batch"))
KINDS = ("batchjob", "jobflow", "daemonjob", "appwrapper")
JOBFLOW = GVK("api.practice.com", "v1alpha1", "JobFlow")
DAEMONJOB = GVK("api.practice.com", "v1alpha1", "DaemonJob")
APPWRAPPER = GVK("workload.codeflare.dev", "v1beta2", "AppWrapper")


def _pod_template() -> Object:
    return {"spec": {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "registry.example/fake:1",
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}


def kind_object(kind: str, i: int, ns: str) -> tuple[Object, int]:
    """One queued object of ``kind`` and the pods its whole lifecycle runs."""
    meta = {"name": f"{kind}-{i:04d}", "namespace": ns, "labels": {QUEUE_LABEL: QUEUE}}
    if kind == "batchjob":
        return ({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                 "spec": {"template": _pod_template()}}, 1)
    if kind == "jobflow":
        steps = [{"name": s, "dependencies": deps, "jobTemplate": {"template": _pod_template()}}
                 for s, deps in (("a", []), ("b", ["a"]), ("c", ["b"]))]
        return ({"apiVersion": JOBFLOW.api_version, "kind": "JobFlow", "metadata": meta,
                 "spec": {"flows": steps}}, 3)
    if kind == "daemonjob":
        # Both benchmark nodes are eligible: two pods.
        return ({"apiVersion": DAEMONJOB.api_version, "kind": "DaemonJob", "metadata": meta,
                 "spec": {"template": _pod_template()}}, 2)
    # Wrapped components keep their names: one Job name per AppWrapper.
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{meta['name']}-job"},
           "spec": {"template": _pod_template()}}
    return ({"apiVersion": APPWRAPPER.api_version, "kind": "AppWrapper", "metadata": meta,
             "spec": {"components": [{"template": job}]}}, 1)


def kind_done(kind: str, obj: Object) -> bool:
    status = obj.get("status") or {}
    if kind == "batchjob":
        return any(c.get("type") == "Complete" and c.get("status") == "True"
                   for c in status.get("conditions") or [])
    if kind == "appwrapper":
        return status.get("phase") == "Succeeded"
    return status.get("state") == "Succeed"


KIND_GVKS = {"batchjob": JOB, "jobflow": JOBFLOW, "daemonjob": DAEMONJOB,
             "appwrapper": APPWRAPPER}


async def run_kinds(n: int, concurrency: int, say: Any) -> list[dict[str, Any]]:
    """Each integration's whole lifecycle for ``n`` objects on one cluster, with our
    manager running all of them: its CPU and API writes per pod, beside the batch Job's."""
    state_dir = cache_root() / "clusters" / f"bench-kinds-{os.getpid()}"
    cluster = LocalCluster(state_dir, KINDS_TOPOLOGY)
    say(f"[kinds] starting a local cluster for {n} objects of each kind...")
    info = cluster.up()
    audit = state_dir / "logs" / "audit.log"
    rows: list[dict[str, Any]] = []
    try:
        async with await RestClient.from_kubeconfig(
                info.kubeconfig, user_agent=BENCH_AGENT,
                timeouts=Timeouts(read=60.0, watch_inactivity=120.0)) as client, \
                our_manager(info.kubeconfig, state_dir / "logs" / "our-manager.log",
                            integrations=",".join(KINDS)) as pid:
            await setup_cluster_queue(client)
            await setup_namespace(client, "bench-probe")
            await wait_for("our Job webhook", lambda: _suspends(client, "bench-probe"), 180)
            for kind in KINDS:
                ns = f"bench-{kind}"
                await setup_namespace(client, ns)
                await asyncio.sleep(2.0)
                offset = audit_size(audit)
                cpu0 = proc_cpu_seconds(pid)
                sem = asyncio.Semaphore(concurrency)
                pods = 0
                t0 = time.monotonic()

                async def create(i: int, kind: str = kind, ns: str = ns,
                                 sem: asyncio.Semaphore = sem) -> int:
                    obj, count = kind_object(kind, i, ns)
                    async with sem:
                        await client.create(obj)
                    return count

                pods = sum(await asyncio.gather(*(create(i) for i in range(n))))

                async def all_done(kind: str = kind, ns: str = ns) -> bool:
                    items = (await client.list(KIND_GVKS[kind], namespace=ns)).items
                    return len(items) == n and all(kind_done(kind, o) for o in items)

                await wait_for(f"every {kind} finished", all_done, max(600.0, n * 5.0))
                seconds = time.monotonic() - t0
                cpu = proc_cpu_seconds(pid) - cpu0
                await asyncio.sleep(3.0)  # the audit backend writes in batches
                counts = count_requests(audit, offset).counts
                ours = {verb: c for (ctl, verb), c in counts.items() if ctl == "ours"}
                writes = sum(c for verb, c in ours.items()
                             if verb in ("create", "update", "patch", "delete"))
                row = {"kind": kind, "objects": n, "pods": pods, "seconds": round(seconds, 1),
                       "cpu_ms_per_pod": round(cpu * 1000 / pods, 2),
                       "writes_per_pod": round(writes / pods, 2),
                       "requests_per_pod": {v: round(c / pods, 2) for v, c in ours.items()}}
                rows.append(row)
                say(f"[kinds] {kind}: {n} objects, {pods} pods, all finished in "
                    f"{row['seconds']}s; ours {row['cpu_ms_per_pod']} ms CPU and "
                    f"{row['writes_per_pod']} writes per pod")
                await client.delete(NAMESPACE_GVK, ns)
    finally:
        cluster.down()
        shutil.rmtree(state_dir, ignore_errors=True)
    base = next((r for r in rows if r["kind"] == "batchjob"), None)
    if base:
        for r in rows:
            r["cpu_per_pod_ratio_to_batchjob"] = round(r["cpu_ms_per_pod"]
                                                       / base["cpu_ms_per_pod"], 2)
            r["writes_per_pod_ratio_to_batchjob"] = round(r["writes_per_pod"]
                                                          / base["writes_per_pod"], 2)
        say("[kinds] per pod, against the batch Job path: " + "; ".join(
            f"{r['kind']} CPU x{r['cpu_per_pod_ratio_to_batchjob']}, writes "
            f"x{r['writes_per_pod_ratio_to_batchjob']}" for r in rows))
    return rows


# --------------------------------------------------------------------------- report


def writes(r: SideResult, controller: str) -> float:
    verbs = r.requests_per_job.get(controller, {})
    return sum(v for k, v in verbs.items() if k in ("create", "update", "patch", "delete"))


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def embedded_comparison(k: SideResult, p: SideResult, e: SideResult) -> dict[str, Any]:
    """The embedded side of one pair: its figures, and its ratios to Go Kueue's and to
    the shipped manager's (all three ran one after the other on this machine)."""
    return {
        "throughput": e.throughput, "p50": e.p50, "p99": e.p99,
        "ratio_to_kueue": {"throughput": _ratio(e.throughput, k.throughput),
                           "p50": _ratio(e.p50, k.p50), "p99": _ratio(e.p99, k.p99)},
        "ratio_to_shipped": {"throughput": _ratio(e.throughput, p.throughput),
                             "p50": _ratio(e.p50, p.p50), "p99": _ratio(e.p99, p.p99),
                             "cpu_ms_per_job": _ratio(e.cpu_ms_per_job, p.cpu_ms_per_job),
                             "peak_rss_mb": _ratio(e.peak_rss_mb, p.peak_rss_mb)},
        "cpu_ms_per_job": e.cpu_ms_per_job, "peak_rss_mb": e.peak_rss_mb,
        "job_controller_writes_per_job": round(writes(e, "ours"), 3),
        "kueue_cpu_ms_per_job": e.kueue_cpu_ms_per_job,
        "requests_per_job": e.requests_per_job,
        "event_lag_seconds": {"p50": e.event_lag_p50, "p99": e.event_lag_p99},
        "job_webhook_ms": e.job_webhook_ms,
    }


def say_embedded(e: dict[str, Any], say: Any) -> None:
    to_go, to_shipped = e["ratio_to_kueue"], e["ratio_to_shipped"]
    say(f"  embedded: {e['throughput']} Jobs/s (x{to_go['throughput']} Go, "
        f"x{to_shipped['throughput']} shipped), p99 {e['p99']}s (x{to_go['p99']} Go, "
        f"x{to_shipped['p99']} shipped); {e['cpu_ms_per_job']} ms CPU per Job "
        f"(x{to_shipped['cpu_ms_per_job']} shipped), peak RSS {e['peak_rss_mb']} MB "
        f"(x{to_shipped['peak_rss_mb']} shipped); {e['job_controller_writes_per_job']} "
        "writes per Job")


def report(results: list[SideResult], say: Any) -> list[dict[str, Any]]:
    rows = []
    by = {(r.side, r.jobs, r.pair): r for r in results}
    for pair, n in sorted({(r.pair, r.jobs) for r in results}):
        k, p = by.get(("kueue", n, pair)), by.get(("python", n, pair))
        if k is None or p is None:
            continue
        # Kueue's job reconciler's share: what Kueue does on its own side minus what it
        # still does beside ours (the scheduler, the Workload controller, ...).
        kueue_job_writes = writes(k, "kueue") - writes(p, "kueue")
        # Likewise its job reconciler's and webhooks' CPU, and ours against it.
        kueue_job_cpu = (round(k.kueue_cpu_ms_per_job - p.kueue_cpu_ms_per_job, 2)
                         if k.kueue_cpu_ms_per_job is not None
                         and p.kueue_cpu_ms_per_job is not None else None)
        cpu_ratio = (round(p.cpu_ms_per_job / kueue_job_cpu, 3)
                     if (kueue_job_cpu or 0) > 0 and p.cpu_ms_per_job is not None
                     else None)
        row: dict[str, Any] = {
            "jobs": n,
            "pair": pair,
            "throughput": {"kueue": k.throughput, "python": p.throughput,
                           "ratio": round(p.throughput / k.throughput, 3)},
            "p50": {"kueue": k.p50, "python": p.p50, "ratio": round(p.p50 / k.p50, 3)},
            "p99": {"kueue": k.p99, "python": p.p99, "ratio": round(p.p99 / k.p99, 3)},
            "job_controller_writes_per_job": {"kueue": round(kueue_job_writes, 3),
                                              "python": round(writes(p, "ours"), 3)},
            "ours_cpu_ms_per_job": p.cpu_ms_per_job, "ours_peak_rss_mb": p.peak_rss_mb,
            # Kueue alone on its side vs Kueue beside ours: the job reconciler's CPU moved.
            "kueue_cpu_ms_per_job": {"kueue": k.kueue_cpu_ms_per_job,
                                     "python": p.kueue_cpu_ms_per_job},
            "kueue_job_cpu_ms_per_job": kueue_job_cpu,
            "cpu_ratio": cpu_ratio,
            "kueue_peak_rss_mb": {"kueue": k.kueue_peak_rss_mb, "python": p.kueue_peak_rss_mb},
            "requests_per_job": {"kueue": k.requests_per_job, "python": p.requests_per_job},
            # A Started event far behind its Job means deferred work (and a divergence).
            "event_lag_seconds": {
                "kueue": {"p50": k.event_lag_p50, "p99": k.event_lag_p99},
                "python": {"p50": p.event_lag_p50, "p99": p.event_lag_p99}},
            # The API server's mean time per call in each side's Job webhooks.
            "job_webhook_ms": {"kueue": k.job_webhook_ms, "python": p.job_webhook_ms},
        }
        e = by.get(("embedded", n, pair))
        if e is not None:
            row["embedded"] = embedded_comparison(k, p, e)
        rows.append(row)
        say(f"\nN={n}{f' (pair {pair + 1})' if pair else ''}: throughput {k.throughput} (Go) "
            f"vs {p.throughput} (ours) Jobs/s -> ratio {row['throughput']['ratio']}")
        say(f"  create->unsuspend p50 {k.p50}s vs {p.p50}s (ratio {row['p50']['ratio']}), "
            f"p99 {k.p99}s vs {p.p99}s (ratio {row['p99']['ratio']})")
        say(f"  job-controller writes per Job: Kueue {kueue_job_writes:.2f}, ours "
            f"{writes(p, 'ours'):.2f}; ours {p.cpu_ms_per_job} ms CPU per Job, "
            f"peak RSS {p.peak_rss_mb} MB")
        say(f"  Started event after the unsuspend, p50/p99: Kueue {k.event_lag_p50}/"
            f"{k.event_lag_p99}s, ours {p.event_lag_p50}/{p.event_lag_p99}s")
        say("  Job webhooks as the API server times them, mean ms per call: " + "; ".join(
            f"{key} {k.job_webhook_ms.get(key, '-')} (Kueue) vs "
            f"{p.job_webhook_ms.get(key, '-')} (ours)"
            for key in sorted({*k.job_webhook_ms, *p.job_webhook_ms})))
        say(f"  Kueue process: {k.kueue_cpu_ms_per_job} ms CPU per Job alone, "
            f"{p.kueue_cpu_ms_per_job} beside ours (so its Job reconciler and webhook cost "
            f"about {kueue_job_cpu} ms, ours / that {cpu_ratio}); peak RSS {k.kueue_peak_rss_mb} / "
            f"{p.kueue_peak_rss_mb} MB")
        if e is not None:
            say_embedded(row["embedded"], say)
        for side, r in (("kueue", k), ("python", p), ("embedded", e)):
            if r is None:
                continue
            say(f"  [{side}] requests per Job: " + "; ".join(
                f"{c}: " + ", ".join(f"{v} {verb}" for verb, v in sorted(verbs.items()))
                for c, verbs in sorted(r.requests_per_job.items())))
    return rows


def _medians(values: list[float | None]) -> dict[str, Any] | None:
    known = [v for v in values if v is not None]
    return {"median_ratio": round(statistics.median(known), 3), "ratios": known} \
        if known else None


def embedded_summary(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The embedded side over the pairs of one size: the median of its ratios to Go Kueue
    and to the shipped manager, each taken within its pair; None under two pairs."""
    mine = [r["embedded"] for r in rows if "embedded" in r]
    if len(mine) < 2:
        return None
    return {
        "pairs": len(mine),
        "ratio_to_kueue": {key: _medians([e["ratio_to_kueue"][key] for e in mine])
                           for key in ("throughput", "p50", "p99")},
        "ratio_to_shipped": {key: _medians([e["ratio_to_shipped"][key] for e in mine])
                             for key in ("throughput", "p50", "p99", "cpu_ms_per_job",
                                         "peak_rss_mb")},
    }


def summary(rows: list[dict[str, Any]], say: Any) -> list[dict[str, Any]]:
    """With several pairs of runs: per size, the median of the ratios taken within each
    pair (each pair's two sides ran one after the other, so a slower hour of the machine
    weighs on both), and the median of our CPU per Job."""
    out = []
    for n in sorted({r["jobs"] for r in rows}):
        mine = [r for r in rows if r["jobs"] == n]
        if len(mine) < 2:
            continue
        item = {"jobs": n, "pairs": len(mine)}
        for key in ("throughput", "p50", "p99"):
            ratios = [r[key]["ratio"] for r in mine]
            item[key] = {"median_ratio": round(statistics.median(ratios), 3),
                         "ratios": ratios}
        cpus = [r["ours_cpu_ms_per_job"] for r in mine if r["ours_cpu_ms_per_job"] is not None]
        item["ours_cpu_ms_per_job"] = {"median": round(statistics.median(cpus), 2),
                                       "runs": cpus} if cpus else None
        # Ours against Kueue's job reconciler and webhooks, taken within each pair.
        cpu_ratios = [r["cpu_ratio"] for r in mine if r.get("cpu_ratio") is not None]
        item["cpu_ratio"] = {"median_ratio": round(statistics.median(cpu_ratios), 3),
                             "ratios": cpu_ratios} if cpu_ratios else None
        embedded = embedded_summary(mine)
        if embedded is not None:
            item["embedded"] = embedded
        out.append(item)
        say(f"\nN={n}, {len(mine)} pairs: throughput ratio median "
            f"{item['throughput']['median_ratio']} {item['throughput']['ratios']}, p99 ratio "
            f"median {item['p99']['median_ratio']} {item['p99']['ratios']}"
            + (f", ours {item['ours_cpu_ms_per_job']['median']} ms CPU per Job "
               f"{item['ours_cpu_ms_per_job']['runs']}" if cpus else "")
            + (f", ours / Kueue's job reconciler and webhooks in CPU per Job median "
               f"{item['cpu_ratio']['median_ratio']} {item['cpu_ratio']['ratios']}"
               if cpu_ratios else ""))
        if embedded is not None:
            shipped = embedded["ratio_to_shipped"]
            spread = item["throughput"]["ratios"]
            say(f"  embedded / shipped, median of {embedded['pairs']} pairs: throughput "
                f"{shipped['throughput']['median_ratio']} {shipped['throughput']['ratios']}, "
                f"p99 {shipped['p99']['median_ratio']} {shipped['p99']['ratios']}, CPU per "
                f"Job {(shipped['cpu_ms_per_job'] or {}).get('median_ratio')}, peak RSS "
                f"{(shipped['peak_rss_mb'] or {}).get('median_ratio')}; the shipped / Go "
                f"throughput ratio spread over {min(spread)}-{max(spread)} in the same pairs")
    return out


async def run_all(args: argparse.Namespace, say: Any) -> list[SideResult]:
    sizes = args.jobs or [500]
    results: list[SideResult] = []
    sides = [("kueue", KUEUE_TOPOLOGY), ("python", PYTHON_TOPOLOGY)]
    if args.embedded or args.only == "embedded":
        sides.append(("embedded", PYTHON_TOPOLOGY))
    for pair in range(args.pairs):
        # A B (C), (C) B A, A B (C) ...: no side always runs first.
        for side, topology in (sides if pair % 2 == 0 else sides[::-1]):
            if args.only and side != args.only:
                continue
            ran = await run_side(side, topology, sizes, args.concurrency, say,
                                 Path(args.profile) if args.profile else None)
            results += [dataclasses.replace(r, pair=pair) for r in ran]
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, action="append",
                   help="Jobs per run (repeat for several sizes; default 500)")
    p.add_argument("--concurrency", type=int, default=16, help="creates in flight")
    p.add_argument("--pairs", type=int, default=1,
                   help="run both sides this many times, alternating which goes first, and "
                        "report the median of the ratios of each pair")
    p.add_argument("--only", choices=SIDES, help="one side only")
    p.add_argument("--embedded", action="store_true",
                   help="a third side in each pair: the batch/v1 Job integration embedded "
                        "the documented way (embedded.py), set against Go Kueue's and the "
                        "shipped manager's")
    p.add_argument("--output", default=str(RESULTS), help="results file ('-' for none)")
    p.add_argument("--memory", type=int, default=0, metavar="N",
                   help="also measure our manager's memory with N Jobs and N Workloads "
                        "cached (e.g. 10000)")
    p.add_argument("--memory-only", action="store_true", help="only the memory benchmark")
    p.add_argument("--kinds", type=int, default=0, metavar="N",
                   help="also run N objects of every integration (batch Job, JobFlow of 3 "
                        "steps, DaemonJob, AppWrapper) to their end: per-pod cost")
    p.add_argument("--kinds-only", action="store_true", help="only the per-kind benchmark")
    p.add_argument("--profile", help="run our manager under cProfile, stats to this file "
                                     "(CPU figures then include the profiler's cost)")
    args = p.parse_args(argv)

    def say(line: str) -> None:
        print(line, flush=True)

    only_extra = args.memory_only or args.kinds_only
    results = asyncio.run(run_all(args, say)) if not only_extra else []
    rows = report(results, say)
    medians = summary(rows, say)
    memory = asyncio.run(run_memory(args.memory, args.concurrency * 2, say)) \
        if args.memory else None
    kinds = asyncio.run(run_kinds(args.kinds, args.concurrency, say)) if args.kinds else None
    if args.output != "-":
        Path(args.output).write_text(json.dumps({
            "date": dt.date.today().isoformat(), "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "concurrency": args.concurrency,
            "sides": [dataclasses.asdict(r) for r in results], "comparison": rows,
            "summary": medians,
            "memory": memory, "kinds": kinds,
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
