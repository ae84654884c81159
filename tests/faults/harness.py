"""The fault run: job lifecycles of every registered integration on the real control plane
while the manager is SIGKILLed, its API connections are cut, delayed and answered with
errors by a :class:`~jobframework.testing.faultproxy.FaultProxy`, etcd is compacted and
(optionally) the API server restarts; an
:class:`~jobframework.testing.invariants.InvariantWatcher` checks the jobframework's
guarantees while it runs.

A hostile tenant (``tenant``) creates a share of the JobFlow, DaemonJob and AppWrapper
lifecycles and tries, while they run, to steer, resize and outrun what Kueue admitted;
the watcher's ``pods-off-flavor`` and ``pods-over-admission`` rules judge what ran.

Every random choice comes from one seed (:attr:`RunSettings.seed`): the mix of kinds,
priorities, deletions and deactivations, the points where the manager is killed, the
proxy's decisions. Wall-clock timing still differs between runs, so a replay repeats
the schedule, not every interleaving.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import random
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs

from integrations.catalog import reference_names
from jobframework.integrations import IntegrationCallbacks
from jobframework.plugins import load_integration
from jobframework.runtime import errors
from jobframework.runtime.client import PropagationPolicy
from jobframework.runtime.client.discovery import NoKindMatchError
from jobframework.runtime.client.rest import RestClient, Timeouts
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.cluster import ClusterInfo, LocalCluster
from jobframework.testing.cluster.procs import die_with_parent_preexec
from jobframework.testing.invariants import InvariantWatcher, Violation, WatchedKind
from jobframework.workload import WORKLOAD_GVK

from .tenant import HOSTILE_KINDS, HostileTenant, hostile_objects

T = TypeVar("T")

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
CQ_GVK = GVK("kueue.x-k8s.io", "v1beta2", "ClusterQueue")
LQ_GVK = GVK("kueue.x-k8s.io", "v1beta2", "LocalQueue")
WPC_GVK = GVK("kueue.x-k8s.io", "v1beta2", "WorkloadPriorityClass")
NS_GVK = GVK("", "v1", "Namespace")
SA_GVK = GVK("", "v1", "ServiceAccount")
JOB_GVK = GVK("batch", "v1", "Job")
HARNESS_AGENT = "kueue-jobframework-faults"
#: What a lifecycle's pod requests: the ClusterQueue holds :attr:`RunSettings.quota_cpu`,
#: so jobs queue and high-priority ones preempt low-priority ones.
POD_CPU = "250m"
#: Manager exits we did not cause: a restart is made, and the run fails.
RULE_MANAGER_EXITED = "manager-exited"
#: A lifecycle that ended Failed although every pod of this cluster succeeds.
RULE_JOB_FAILED = "job-failed"


@attrs.define(kw_only=True)
class RunSettings:
    """One fault run's size and faults (the defaults are CI's short run)."""

    #: Prefix of the run's namespace and ClusterQueue.
    name: str = "faults"
    seed: int = 2026
    lifecycles: int = 40
    kills: int = 4
    compactions: int = 1
    apiserver_restarts: int = 0
    integrations: tuple[str, ...] = reference_names()
    #: Lifecycles in flight at once.
    concurrency: int = 12
    quota_cpu: str = "1.5"
    high_priority: float = 0.25
    #: Fractions of lifecycles deactivated (then reactivated) and deleted mid-run.
    deactivations: float = 0.08
    deletions: float = 0.08
    #: The manager talks to the API server through the fault proxy (else directly).
    use_proxy: bool = True
    #: The proxy's faults.
    error_rate: float = 0.03
    delay_rate: float = 0.05
    max_delay: float = 0.4
    cut_rate: float = 0.01
    watch_cut_after: tuple[float, float] = (5.0, 40.0)
    watch_expire_rate: float = 0.3
    #: Seconds a job may take to finish once every lifecycle has been started.
    finish_timeout: float = 600.0
    grace: float = 30.0
    #: Seconds a job may run more pods than admitted (``pods-over-admission``): the time
    #: a controller takes to set back a child the tenant resized, the proxy's faults
    #: included; the manager's downtime after a SIGKILL does not count
    #: (``InvariantWatcher.controllers_down``).
    overrun_grace: float = 30.0
    #: Share of the JobFlow, DaemonJob and AppWrapper lifecycles the hostile tenant
    #: creates and attacks (at least one of each kind when above 0; 0: no tenant).
    hostile: float = 0.3
    #: Seconds the pods of the tenant's lifecycles run: longer than ``overrun_grace``, so
    #: that a child left resized would be seen over its admission.
    hostile_run: float = 45.0
    #: Sample the manager's RSS and work-queue depth every this many seconds (0: never).
    sample_every: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class RunReport:
    """The figures a fault run prints and writes as JSON."""

    settings: dict[str, Any]
    lifecycles: int = 0
    outcomes: dict[str, int] = attrs.field(factory=dict)
    by_kind: dict[str, int] = attrs.field(factory=dict)
    kills: int = 0
    manager_starts: int = 0
    unexpected_exits: int = 0
    apiserver_restarts: int = 0
    compactions: int = 0
    deactivations: int = 0
    deletions: int = 0
    create_retries: int = 0
    proxy: dict[str, Any] = attrs.field(factory=dict)
    watcher: dict[str, int] = attrs.field(factory=dict)
    violations: list[dict[str, Any]] = attrs.field(factory=list)
    #: The hostile tenant's lifecycles and the outcome of each edit it tried
    #: (:class:`~.tenant.TenantReport`); empty without a tenant.
    tenant: dict[str, Any] = attrs.field(factory=dict)
    seconds: float = 0.0
    #: (seconds since start, manager RSS in MB, work-queue depth summed over controllers)
    samples: list[tuple[float, float, int]] = attrs.field(factory=list)

    def summary(self) -> str:
        p = self.proxy
        errors_injected = sum(int(v) for v in (p.get("errors") or {}).values())
        cut = int(p.get("connections_cut", 0)) + int(p.get("watches_cut", 0))
        return (f"fault run (seed {self.settings['seed']}): {self.lifecycles} lifecycles "
                f"{dict(self.by_kind)} -> {dict(self.outcomes)}; "
                f"{self.kills} manager kills ({self.manager_starts} starts, "
                f"{self.unexpected_exits} unexpected exits), "
                f"{self.apiserver_restarts} apiserver restarts, {self.compactions} etcd "
                f"compactions, {cut} connections cut ({p.get('watches_expired', 0)} watches "
                f"expired), {errors_injected} injected errors {p.get('errors', {})}, "
                f"{p.get('delayed', 0)} delayed; {self.deactivations} deactivations, "
                f"{self.deletions} deletions, evictions seen "
                f"{self.watcher.get('evictions_seen', 0)} reflected "
                f"{self.watcher.get('evictions_reflected', 0)}; "
                f"{self._tenant_summary()}"
                f"{len(self.violations)} violations; {self.seconds:.0f} s")

    def _tenant_summary(self) -> str:
        t = self.tenant
        if not t:
            return ""
        slowest = {k: f"{max(v):.1f}s" for k, v in (t.get("corrected_after") or {}).items()
                   if v}
        w = self.watcher
        return (f"hostile tenant: {sum((t.get('lifecycles') or {}).values())} lifecycles, "
                f"outcomes {t.get('outcomes')}, slowest correction {slowest}; "
                f"pods judged on their flavor {w.get('pods_placement_checked', 0)}, "
                f"overruns seen {w.get('overruns_seen', 0)} corrected "
                f"{w.get('overruns_corrected', 0)} (longest "
                f"{w.get('overrun_longest_ms', 0) / 1000:.1f}s); ")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _retriable(err: BaseException) -> bool:
    if isinstance(err, errors.ApiError):
        # 500 includes "failed calling webhook" while the manager is down.
        return err.code in (409, 429, 500, 503, 504) or "webhook" in err.message
    return isinstance(err, OSError | asyncio.TimeoutError | ConnectionError) or \
        type(err).__module__.startswith("aiohttp")


async def retry(what: str, call: Callable[[], Awaitable[T]], limit: float = 180.0,
                counter: list[int] | None = None) -> T:
    """``call`` until it does not fail with a transient error (a restarting manager or
    API server); other errors and running out of ``limit`` seconds raise."""
    deadline = time.monotonic() + limit
    delay = 0.2
    while True:
        try:
            return await call()
        except Exception as err:
            if not _retriable(err) or time.monotonic() > deadline:
                raise AssertionError(f"{what}: {err!r}") from err
            if counter is not None:
                counter[0] += 1
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)


async def eventually(what: str, probe: Callable[[], Awaitable[Any]], limit: float) -> Any:
    """Poll ``probe`` every 0.5 s until it returns something truthy (transient errors count
    as not yet); fail after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while True:
        try:
            value = await probe()
            if value:
                return value
        except Exception as err:
            if not _retriable(err):
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit:.0f} s waiting for {what}")
        await asyncio.sleep(0.5)


# --------------------------------------------------------------------------- objects


def _set_pod_requests(node: Any, cpu: str) -> None:
    """Give every container of every pod template in ``node`` a CPU request."""
    if isinstance(node, dict):
        for container in node.get("containers") or []:
            if isinstance(container, dict):
                container.setdefault("resources", {}).setdefault("requests", {})["cpu"] = cpu
        for value in node.values():
            _set_pod_requests(value, cpu)
    elif isinstance(node, list):
        for value in node:
            _set_pod_requests(value, cpu)


def _rename_nested(node: Any, prefix: str, counter: list[int], top: bool = True) -> None:
    """Nested objects with their own names (an AppWrapper's components) get names of this
    lifecycle's own, so that two lifecycles never collide."""
    if isinstance(node, dict):
        meta = node.get("metadata")
        if not top and isinstance(meta, dict) and "name" in meta and "kind" in node:
            meta["name"] = f"{prefix}-{counter[0]}"
            counter[0] += 1
        for key, value in node.items():
            _rename_nested(value, prefix, counter, top=top and key == "metadata")
    elif isinstance(node, list):
        for value in node:
            _rename_nested(value, prefix, counter, top=False)


def lifecycle_object(integration: str, name: str, namespace: str, queue: str,
                     priority_class: str) -> Object:
    """One queued object of ``integration``: its registered probe object (what its webhook
    must suspend) renamed, queued, prioritised, and with CPU requests."""
    obj = load_integration(integration).probe_object(namespace)
    obj["metadata"]["name"] = name
    labels = obj["metadata"].setdefault("labels", {})
    labels[QUEUE_LABEL] = queue
    labels[PRIORITY_LABEL] = priority_class
    _rename_nested(obj, name, [0])
    _set_pod_requests(obj.get("spec"), POD_CPU)
    return obj


def hostile_lifecycles(kinds: list[str], share: float, seed: int) -> set[int]:
    """Which lifecycles (indexes into ``kinds``) the hostile tenant runs: ``share`` of
    each kind of :data:`~.tenant.HOSTILE_KINDS`, at least one when ``share`` is above 0,
    chosen by a generator of their own (the rest of the schedule stays the seed's)."""
    if share <= 0:
        return set()
    rng = random.Random(f"hostile-{seed}")
    chosen: set[int] = set()
    for kind in HOSTILE_KINDS:
        of_kind = [i for i, k in enumerate(kinds) if k == kind]
        n = min(len(of_kind), max(1, round(share * len(of_kind))))
        chosen.update(rng.sample(of_kind, n))
    return chosen


def callbacks(name: str) -> IntegrationCallbacks:
    """The registered integration's ``CALLBACKS`` (its adapter factory, ``new_job``)."""
    callbacks: IntegrationCallbacks = load_integration(name).callbacks
    return callbacks


def watched_kinds(integrations: tuple[str, ...]) -> list[WatchedKind]:
    return [WatchedKind.from_callbacks(callbacks(name)) for name in integrations]


# --------------------------------------------------------------------------- processes


class ProxyProcess:
    """The fault proxy in a process of its own (the run's event loop is busy)."""

    def __init__(self, upstream: str, directory: Path, settings: RunSettings) -> None:
        self.directory = directory
        self.stats_file = directory / "proxy-stats.json"
        self.kubeconfig = directory / "kubeconfig"
        self.settings = settings
        self.upstream = upstream
        self.proc: asyncio.subprocess.Process | None = None
        self._log = (directory / "proxy.log").open("ab")

    async def start(self) -> None:
        s = self.settings
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "jobframework.testing.faultproxy",
            "--kubeconfig", self.upstream, "--directory", str(self.directory),
            "--seed", str(s.seed), "--error-rate", str(s.error_rate),
            "--delay-rate", str(s.delay_rate), "--max-delay", str(s.max_delay),
            "--cut-rate", str(s.cut_rate),
            "--watch-cut-after", str(s.watch_cut_after[0]), str(s.watch_cut_after[1]),
            "--watch-expire-rate", str(s.watch_expire_rate), "--exempt-leases",
            "--stats-file", str(self.stats_file),
            stdout=asyncio.subprocess.PIPE, stderr=self._log,
            preexec_fn=die_with_parent_preexec())
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        if not line.startswith(b"ready"):
            raise AssertionError(f"fault proxy did not start: {line!r}")

    def stats(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.stats_file.read_text()))
        except (OSError, ValueError):
            return {}

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        self._log.close()


class ManagerSupervisor:
    """Runs ``python -m integrations run`` and restarts it when it dies, as a Deployment
    would; :meth:`kill` SIGKILLs it (counted), any other exit is counted as unexpected."""

    def __init__(self, kubeconfig: Path, directory: Path, integrations: tuple[str, ...],
                 on_unexpected_exit: Callable[[str], None]) -> None:
        self.kubeconfig = kubeconfig
        self.directory = directory
        self.integrations = integrations
        self.webhook_port = free_port()
        self.metrics_port = free_port()
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.kills = 0
        self.unexpected = 0
        self._killing = False
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._on_unexpected_exit = on_unexpected_exit
        self._started = asyncio.Event()
        self._running = asyncio.Event()

    def log_path(self, n: int) -> Path:
        return self.directory / f"manager-{n:03d}.log"

    async def _spawn(self) -> None:
        self.starts += 1
        log = self.log_path(self.starts).open("wb")
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "integrations", "run",
                "--kubeconfig", str(self.kubeconfig),
                "--integrations", ",".join(self.integrations),
                "--webhook-port", str(self.webhook_port),
                "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
                stdout=log, stderr=asyncio.subprocess.STDOUT,
                # A killed test run leaves no manager or proxy behind (as its cluster).
                preexec_fn=die_with_parent_preexec())
        finally:
            log.close()
        self._started.set()
        self._running.set()

    async def _supervise(self) -> None:
        while not self._stopping:
            await self._spawn()
            assert self.proc is not None
            code = await self.proc.wait()
            self._running.clear()
            if self._stopping:
                return
            if self._killing:
                self._killing = False
            else:
                self.unexpected += 1
                self._on_unexpected_exit(
                    f"manager exited by itself with code {code}; log "
                    f"{self.log_path(self.starts)}")
            await asyncio.sleep(0.5)  # a Deployment's restart is not instant either

    async def start(self) -> None:
        self._task = asyncio.create_task(self._supervise())
        await self._started.wait()

    async def running(self) -> None:
        """Wait until a manager process runs."""
        await self._running.wait()

    def kill(self) -> bool:
        if self.proc is None or self.proc.returncode is not None:
            return False
        self._killing = True
        self.proc.kill()
        self.kills += 1
        return True

    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.returncode is None else None

    async def stop(self) -> None:
        self._stopping = True
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 60)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path(self.starts).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def etcd_compact(info: ClusterInfo) -> int:
    """Compact etcd to its current revision, so that watches from before get 410 Gone."""
    base = f"http://127.0.0.1:{info.ports['etcd']}"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return dict(json.loads(resp.read()))

    key = base64.b64encode(b"/").decode()
    rev = int(post("/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])
    post("/v3/kv/compaction", {"revision": str(rev), "physical": True})
    return rev


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def workqueue_depth(metrics_port: int) -> int:
    """The manager's ``workqueue_depth``, summed over its controllers."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("workqueue_depth{")))


# --------------------------------------------------------------------------- the run


class FaultRun:
    """One fault run on ``cluster`` (see the module)."""

    def __init__(self, cluster: LocalCluster, info: ClusterInfo, settings: RunSettings,
                 directory: Path, say: Callable[[str], None]) -> None:
        self.cluster = cluster
        self.info = info
        self.s = settings
        self.dir = directory
        self.say = say
        self.rng = random.Random(settings.seed)
        # A namespace and queue of the run's own: runs on one cluster never share objects.
        self.ns = f"{settings.name}-{settings.seed}-{os.getpid() % 10000}"
        self.queue = self.ns
        self.report = RunReport(settings=settings.as_dict())
        self.extra_violations: list[Violation] = []
        self._create_retries = [0]
        self._progress = 0
        self._progress_event = asyncio.Event()
        self._watcher: InvariantWatcher | None = None
        self._tenant: HostileTenant | None = None
        self._hostile: set[int] = set()
        self._client: RestClient | None = None
        self._down_tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ set-up

    async def _setup(self, client: RestClient) -> None:
        cpu = self.s.quota_cpu
        for obj in (
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}},
            {"apiVersion": WPC_GVK.api_version, "kind": "WorkloadPriorityClass",
             "metadata": {"name": "faults-low"}, "value": 100},
            {"apiVersion": WPC_GVK.api_version, "kind": "WorkloadPriorityClass",
             "metadata": {"name": "faults-high"}, "value": 1000},
            {"apiVersion": CQ_GVK.api_version, "kind": "ClusterQueue",
             "metadata": {"name": self.queue},
             "spec": {"namespaceSelector": {},
                      "preemption": {"withinClusterQueue": "LowerPriority"},
                      "resourceGroups": [{
                          "coveredResources": ["cpu", "memory"],
                          "flavors": [{"name": "on-demand", "resources": [
                              {"name": "cpu", "nominalQuota": cpu},
                              {"name": "memory", "nominalQuota": "64Gi"}]}]}]}},
            {"apiVersion": LQ_GVK.api_version, "kind": "LocalQueue",
             "metadata": {"name": self.queue, "namespace": self.ns},
             "spec": {"clusterQueue": self.queue}},
        ):
            with contextlib.suppress(errors.AlreadyExists):
                await client.create(obj)

        async def sa() -> bool:
            try:
                await client.get(SA_GVK, "default", namespace=self.ns)
                return True
            except errors.NotFound:
                return False

        await self._eventually("the namespace's ServiceAccount", sa, 120)

    async def _eventually(self, what: str, probe: Callable[[], Awaitable[bool]],
                          limit: float) -> None:
        await eventually(what, probe, limit)

    async def _webhooks_ready(self, client: RestClient) -> bool:
        """Each integration's mutating webhook suspends its probe (a dry-run create)."""
        for name in self.s.integrations:
            obj = lifecycle_object(name, "faults-probe", self.ns, self.queue, "faults-low")
            try:
                out = await client.create(obj, dry_run=True)
            except (errors.ApiError, NoKindMatchError):
                return False  # the manager has not installed its CRDs or webhooks yet
            if not reference_integration_suspended(name, out):
                return False
        return True

    # ------------------------------------------------------------------ lifecycles

    async def _lifecycle(self, client: RestClient, i: int, kind: str, sem: asyncio.Semaphore,
                         ) -> None:
        rng = random.Random(self.rng.random())
        priority = "faults-high" if rng.random() < self.s.high_priority else "faults-low"
        roll = rng.random()
        action = ("deactivate" if roll < self.s.deactivations else
                  "delete" if roll < self.s.deactivations + self.s.deletions else "run")
        delete_after = rng.random() < 0.5
        name = f"{kind}-{i:04d}"
        obj = lifecycle_object(kind, name, self.ns, self.queue, priority)
        gvk = GVK.of(obj)
        tenant = self._tenant if i in self._hostile else None
        if tenant is not None:
            # The tenant's lifecycles run to their end, beside the others (not counted in
            # the concurrency: their pods run long, and request little).
            action = "run"
        gate: contextlib.AbstractAsyncContextManager[Any] = (
            sem if tenant is None else contextlib.nullcontext())
        async with gate:
            if tenant is not None:
                created = await tenant.create(
                    kind, hostile_objects(kind, obj, self.s.hostile_run))
            else:
                created = await retry(f"create {kind} {name}", lambda: client.create(obj),
                                      counter=self._create_retries)
            uid = created["metadata"]["uid"]
            self._progress += 1
            self._progress_event.set()
            if action == "deactivate":
                await self._deactivate(client, uid, name)
            elif action == "delete":
                await self._admitted_workload(client, uid, limit=self.s.finish_timeout)
                await asyncio.sleep(rng.uniform(0.0, 3.0))
                await retry(f"delete {name}", lambda: _delete(client, gvk, name, self.ns))
                self.report.deletions += 1
                self._outcome("deleted")
                return
            if tenant is not None:
                await tenant.attack(kind, created)
            outcome = await self._wait_finished(client, gvk, kind, name)
            if tenant is not None:
                await tenant.after(kind, created)
            self._outcome(outcome)
            if outcome == "failed":
                self.extra_violations.append(Violation(
                    rule=RULE_JOB_FAILED, kind=gvk.kind, namespace=self.ns, name=name,
                    message=f"{gvk.kind} {name} failed", at=time.monotonic()))
            if delete_after:
                await retry(f"delete {name}", lambda: _delete(client, gvk, name, self.ns))

    def _tenant_violation(self, violation: Violation) -> None:
        self.say(f"  VIOLATION {violation}")
        self.extra_violations.append(violation)

    def _outcome(self, outcome: str) -> None:
        self.report.outcomes[outcome] = self.report.outcomes.get(outcome, 0) + 1

    async def _workload(self, client: RestClient, uid: str) -> Object | None:
        items = (await client.list(WORKLOAD_GVK, namespace=self.ns,
                                   label_selector=f"kueue.x-k8s.io/job-uid={uid}")).items
        return items[0] if items else None

    async def _admitted_workload(self, client: RestClient, uid: str, limit: float) -> Object:
        found: list[Object] = []

        async def admitted() -> bool:
            wl = await self._workload(client, uid)
            if wl is not None and (wl.get("status") or {}).get("admission"):
                found.append(wl)
                return True
            return False

        await self._eventually(f"an admitted Workload of {uid}", admitted, limit)
        return found[-1]

    async def _deactivate(self, client: RestClient, uid: str, name: str) -> None:
        """Kueue's deactivation: ``spec.active=false`` evicts the Workload, the job must be
        stopped; ``true`` again requeues it, and it must run to its end."""
        wl = await self._admitted_workload(client, uid, self.s.finish_timeout)
        wl_name = wl["metadata"]["name"]
        try:
            await retry(f"deactivate {wl_name}", lambda: client.patch(
                WORKLOAD_GVK, wl_name, {"spec": {"active": False}}, namespace=self.ns))
        except AssertionError as err:
            if isinstance(err.__cause__, errors.NotFound):
                return  # it finished and went before we got there
            raise

        async def evicted() -> bool:
            try:
                cur = await client.get(WORKLOAD_GVK, wl_name, namespace=self.ns)
            except errors.NotFound:
                return True
            return any(c.get("type") == "Evicted" and c.get("status") == "True"
                       for c in (cur.get("status") or {}).get("conditions") or []) or \
                _finished(cur)

        await self._eventually(f"Workload {wl_name} evicted", evicted, 120)
        await asyncio.sleep(1.0)
        with contextlib.suppress(AssertionError):
            await retry(f"reactivate {wl_name}", lambda: client.patch(
                WORKLOAD_GVK, wl_name, {"spec": {"active": True}}, namespace=self.ns))
        self.report.deactivations += 1

    async def _wait_finished(self, client: RestClient, gvk: GVK, kind: str, name: str) -> str:
        watched = self._kinds[kind]
        outcome: list[str] = []

        async def finished() -> bool:
            try:
                obj = await client.get(gvk, name, namespace=self.ns)
            except errors.NotFound:
                outcome.append("vanished")
                return True
            job = watched.new_job()
            job.object().update(obj)
            result = job.finished()
            if result.finished:
                outcome.append("succeeded" if result.success else "failed")
                return True
            return False

        try:
            await self._eventually(f"{kind} {name} finished", finished,
                                   self.s.finish_timeout)
        except AssertionError:
            return "not-finished"
        return outcome[-1]

    # ------------------------------------------------------------------ chaos

    async def _chaos(self, supervisor: ManagerSupervisor) -> None:
        """Kill the manager, compact etcd and restart the API server at random points of
        the run (chosen by how many lifecycles have started)."""
        n = self.s.lifecycles
        events: list[tuple[int, str]] = []
        for what, count in (("kill", self.s.kills), ("compact", self.s.compactions),
                            ("restart", self.s.apiserver_restarts)):
            events += [(self.rng.randint(1, n), what) for _ in range(count)]
        events.sort()
        for at, what in events:
            while self._progress < at:
                self._progress_event.clear()
                await self._progress_event.wait()
            await asyncio.sleep(self.rng.uniform(0.0, 4.0))
            if what == "kill":
                await supervisor.running()  # it may still be restarting from the last kill
                if supervisor.kill():
                    self.say(f"  [{self._progress}/{n}] manager SIGKILLed")
                    self._down_tasks.append(asyncio.create_task(self._manager_down()))
                await asyncio.sleep(self.rng.uniform(0.5, 3.0))
            elif what == "compact":
                rev = await asyncio.to_thread(etcd_compact, self.info)
                self.report.compactions += 1
                self.say(f"  [{self._progress}/{n}] etcd compacted at revision {rev}")
            else:
                assert self._watcher is not None
                # Every controller (the garbage collector too) is stopped by the outage
                # and backs off: the grace-based rules start again once it is over.
                async with self._watcher.outage():
                    self.say(f"  [{self._progress}/{n}] kube-apiserver stopped")
                    await asyncio.to_thread(self.cluster.stop_component, "kube-apiserver")
                    await asyncio.sleep(self.rng.uniform(2.0, 6.0))
                    await asyncio.to_thread(self.cluster.start_component, "kube-apiserver")
                self.report.apiserver_restarts += 1
                self.say(f"  [{self._progress}/{n}] kube-apiserver back")

    async def _manager_down(self) -> None:
        """Tell the watcher the correcting controllers are down, from a SIGKILL until the
        restarted manager's webhooks answer (its controllers start about a second
        later)."""
        assert self._watcher is not None and self._client is not None
        client = self._client
        async with self._watcher.controllers_down():
            await asyncio.sleep(0.5)  # the killed process's webhooks stop answering
            await self._eventually("the manager's webhooks after a SIGKILL",
                                   lambda: self._webhooks_ready(client), 180)

    async def _sample(self, supervisor: ManagerSupervisor, t0: float) -> None:
        while True:
            await asyncio.sleep(self.s.sample_every)
            pid = supervisor.pid()
            if pid is None:
                continue
            try:
                rss = rss_mb(pid)
                depth = await asyncio.to_thread(workqueue_depth, supervisor.metrics_port)
            except (OSError, ValueError, IndexError):
                continue  # restarting, or metrics not served yet
            self.report.samples.append((round(time.monotonic() - t0, 1), round(rss, 1),
                                        depth))

    # ------------------------------------------------------------------ main

    async def run(self) -> RunReport:
        t0 = time.monotonic()
        self._kinds = {name: kind for name, kind in
                       zip(self.s.integrations, watched_kinds(self.s.integrations),
                           strict=True)}
        timeouts = Timeouts(read=30.0, watch_inactivity=90.0)
        async with await RestClient.from_kubeconfig(
                self.info.kubeconfig, user_agent=HARNESS_AGENT, timeouts=timeouts) as client:
            self._client = client
            await self._setup(client)
            proxy: ProxyProcess | None = None
            manager_kubeconfig = Path(self.info.kubeconfig)
            if self.s.use_proxy:
                proxy = ProxyProcess(self.info.kubeconfig, self.dir, self.s)
                await proxy.start()
                manager_kubeconfig = proxy.kubeconfig
                self.say(f"fault proxy up; manager talks to the API server through it "
                         f"(seed {self.s.seed})")

            def unexpected(message: str) -> None:
                self.say(f"  VIOLATION {RULE_MANAGER_EXITED}: {message}")
                self.extra_violations.append(Violation(
                    rule=RULE_MANAGER_EXITED, kind="Manager", namespace="", name="",
                    message=message, at=time.monotonic()))

            supervisor = ManagerSupervisor(manager_kubeconfig, self.dir, self.s.integrations,
                                           unexpected)
            watcher = InvariantWatcher(client, list(self._kinds.values()), namespace=self.ns,
                                       grace=self.s.grace,
                                       overrun_grace=self.s.overrun_grace)
            watcher.on_violation(lambda v: self.say(
                f"  VIOLATION {v.rule}: {v.kind} {v.namespace}/{v.name}: {v.message}"))
            self._watcher = watcher
            chaos: asyncio.Task[None] | None = None
            sampler: asyncio.Task[None] | None = None
            try:
                await supervisor.start()
                await self._eventually("the manager's webhooks",
                                       lambda: self._webhooks_ready(client), 180)
                self.say("manager up, webhooks answer")
                await watcher.start()
                chaos = asyncio.create_task(self._chaos(supervisor))
                if self.s.sample_every > 0:
                    sampler = asyncio.create_task(self._sample(supervisor, t0))
                sem = asyncio.Semaphore(self.s.concurrency)
                kinds = [self.s.integrations[i % len(self.s.integrations)]
                         for i in range(self.s.lifecycles)]
                self.rng.shuffle(kinds)
                self._hostile = hostile_lifecycles(kinds, self.s.hostile, self.s.seed)
                if self._hostile:
                    # A correction is decided when it happens or when the child ends: a
                    # child that ran its pods over size to their end was never corrected.
                    self._tenant = HostileTenant(
                        client, self.info.kubeconfig, self.ns, self.s.hostile_run,
                        decide_within=self.s.hostile_run + self.s.grace,
                        on_violation=self._tenant_violation)
                    await self._tenant.setup()
                    self.say(f"hostile tenant up: {len(self._hostile)} lifecycles are its")
                for kind in kinds:
                    self.report.by_kind[kind] = self.report.by_kind.get(kind, 0) + 1
                tasks = [asyncio.create_task(self._lifecycle(client, i, kind, sem))
                         for i, kind in enumerate(kinds)]
                results = await asyncio.gather(*tasks, return_exceptions=True)
                for r in results:
                    if isinstance(r, BaseException):
                        raise r
                await chaos
                self.report.lifecycles = len(kinds)
                self.say("every lifecycle ended; checking what is left")
                await watcher.wait_terminal(self.s.finish_timeout)
                await watcher.final_check(settle=self.s.grace * 2)
            finally:
                for task in (chaos, sampler, *self._down_tasks):
                    if task is not None and not task.done():
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
                await watcher.stop()
                await supervisor.stop()
                if proxy is not None:
                    await proxy.stop()
                self.report.kills = supervisor.kills
                self.report.manager_starts = supervisor.starts
                self.report.unexpected_exits = supervisor.unexpected
                self.report.proxy = proxy.stats() if proxy is not None else {}
                self.report.watcher = dict(watcher.stats)
                self.report.create_retries = self._create_retries[0]
                if self._tenant is not None:
                    self.report.tenant = attrs.asdict(self._tenant.report)
                    with contextlib.suppress(Exception):
                        await self._tenant.close()
                self.report.violations = [attrs.asdict(v) for v in
                                          [*watcher.violations, *self.extra_violations]]
                self.report.seconds = time.monotonic() - t0
            with contextlib.suppress(Exception):
                await _delete(client, CQ_GVK, self.queue, None)
        return self.report


def reference_integration_suspended(name: str, obj: Object) -> bool:
    """Whether a dry-run create of ``name``'s object came back suspended by its webhook."""
    new_job = callbacks(name).new_job
    assert new_job is not None
    job = new_job()
    job.object().update(obj)
    return bool(job.is_suspended())


def _finished(wl: Object) -> bool:
    return any(c.get("type") == "Finished" and c.get("status") == "True"
               for c in (wl.get("status") or {}).get("conditions") or [])


async def _delete(client: RestClient, gvk: GVK, name: str, namespace: str | None) -> None:
    with contextlib.suppress(errors.NotFound):
        await client.delete(gvk, name, namespace=namespace,
                            propagation_policy=PropagationPolicy.BACKGROUND)

