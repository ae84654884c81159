"""Bring a real local control plane plus a real Kueue manager up and down.

Components (all built from the Go pins in ``tests/cluster``), launched as
direct processes on 127.0.0.1:

etcd -> kube-apiserver -> kube-controller-manager, kube-scheduler -> kwok
(fake nodes) -> Kueue CRDs -> Kueue manager -> Kueue webhook configurations
-> ResourceFlavors, ClusterQueue, LocalQueue.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jobframework.testing.cluster import binaries, manifests, pki
from jobframework.testing.cluster.kube import Kube, wait_for, write_kubeconfig
from jobframework.testing.cluster.procs import Processes, tail

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
POD_CIDR = "10.244.0.0/16"

#: Shutdown order (reverse of start-up).
STOP_ORDER = (
    "kueue",
    "kwok",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "etcd",
)


KUEUE_GROUP_VERSION = "kueue.x-k8s.io/v1beta2"


def default_state_dir(name: str = "default") -> Path:
    env = os.environ.get("KUEUE_JF_CLUSTER_DIR")
    if env:
        return Path(env)
    return binaries.cache_root() / "clusters" / name


@dataclass
class ClusterInfo:
    """What a client needs to reach the cluster; persisted as ``cluster.json``."""

    state_dir: str
    kubeconfig: str
    server: str
    ports: dict[str, int]
    bin_dir: str
    versions: dict[str, str]
    ca_cert: str
    admin_cert: str
    admin_key: str
    started_at: float
    timings: dict[str, float] = field(default_factory=dict)
    #: The CA of the client certificate the API server presents to every admission
    #: webhook; a webhook server given it as its client CA verifies the API server.
    webhook_client_ca: str = ""

    @classmethod
    def load(cls, state_dir: Path) -> ClusterInfo | None:
        path = state_dir / "cluster.json"
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def save(self) -> None:
        path = Path(self.state_dir) / "cluster.json"
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    def client(self) -> Kube:
        return Kube(self.server, Path(self.ca_cert), Path(self.admin_cert), Path(self.admin_key))


def _free_ports(names: list[str]) -> dict[str, int]:
    socks = []
    try:
        for _ in names:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return {n: s.getsockname()[1] for n, s in zip(names, socks, strict=True)}
    finally:
        for s in socks:
            s.close()


def _http_ok(url: str, timeout: float = 2.0) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, timeout=timeout, context=ctx) as resp:
        return 200 <= int(resp.status) < 300


def _read_versions(bin_dir: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        for line in (bin_dir / "versions.txt").read_text().splitlines():
            if "=" in line:
                key, value = line.split("=", 1)
                out[key] = value
    except OSError:
        pass
    return out


class LocalCluster:
    """One local cluster, identified by its state directory.

    Its processes die with the Python process that started them (``die_with_parent``,
    the default; Linux), so a test run that is killed or times out leaves nothing
    running; ``die_with_parent=False`` starts a cluster that outlives its starter until
    :meth:`down` (the ``up`` command's, for later runs to reuse).
    """

    def __init__(
        self,
        state_dir: Path | None = None,
        topology: manifests.Topology | None = None,
        *,
        log: Callable[[str], None] | None = None,
        verbosity: int = 0,
        die_with_parent: bool = True,
    ) -> None:
        self.state_dir = (state_dir or default_state_dir()).absolute()
        self.topology = topology or manifests.Topology()
        self.procs = Processes(self.state_dir, die_with_parent=die_with_parent)
        self._stopped: dict[str, tuple[str, ...]] = {}
        self.verbosity = verbosity
        self._log = log or (lambda msg: print(f"[cluster] {msg}", file=sys.stderr, flush=True))
        self._t0 = time.monotonic()

    # ------------------------------------------------------------------ status

    def info(self) -> ClusterInfo | None:
        return ClusterInfo.load(self.state_dir)

    def running(self) -> dict[str, bool]:
        return {rec.name: rec.alive() for rec in self.procs.records()}

    def status(self) -> dict[str, Any]:
        info = self.info()
        procs = {
            rec.name: {"pid": rec.pid, "alive": rec.alive(), "log": rec.log}
            for rec in self.procs.records()
        }
        report: dict[str, Any] = {"state_dir": str(self.state_dir), "processes": procs}
        if info is None:
            report["state"] = "down" if not procs else "partial"
            return report
        report["kubeconfig"] = info.kubeconfig
        report["server"] = info.server
        report["ports"] = info.ports
        report["versions"] = info.versions
        healthy = bool(procs) and all(p["alive"] for p in procs.values())
        checks: dict[str, str] = {}
        if healthy:
            kube = info.client()
            kueue_readyz = f"http://127.0.0.1:{info.ports['kueue-health']}/readyz"
            probes: list[tuple[str, Callable[[], bool]]] = [
                ("apiserver /readyz", lambda: kube.get_text("/readyz") == "ok"),
                ("kueue /readyz", lambda: _http_ok(kueue_readyz)),
            ]
            for name, probe in probes:
                try:
                    checks[name] = "ok" if probe() else "failing"
                except Exception as err:
                    checks[name] = f"error: {err}"
            healthy = all(v == "ok" for v in checks.values())
        report["checks"] = checks
        report["state"] = "up" if healthy else "degraded"
        return report

    # ------------------------------------------------------------------ down

    def stop_component(self, name: str) -> None:
        """Stop one process of the running cluster (``kube-apiserver``, ``kueue``, ...),
        as an outage would; :meth:`start_component` brings it back as it was."""
        record = self.procs.record(name)
        if record is None:
            raise LookupError(f"no process {name!r} runs in {self.state_dir}")
        self._stopped[name] = record.argv
        self.procs.stop(name)

    def start_component(self, name: str, *, ready_timeout: float = 90.0) -> None:
        """Start again a process :meth:`stop_component` stopped, with the same command
        line; for the API server, wait until it is ready."""
        try:
            argv = self._stopped.pop(name)
        except KeyError:
            raise LookupError(f"{name!r} was not stopped by stop_component") from None
        env = {**os.environ, "KUBECONFIG": str(self.state_dir / "kubeconfig")}
        self.procs.start(name, argv, cwd=self.state_dir / "run" / name, env=env)
        info = self.info()
        if name == "kube-apiserver" and info is not None:
            kube = info.client()
            self._t0 = time.monotonic()
            self._wait("kube-apiserver /readyz", lambda: kube.get_text("/readyz") == "ok",
                       ready_timeout)

    def down(self) -> list[str]:
        """Stop every process this state directory records; return their names."""
        stopped = []
        known = {rec.name for rec in self.procs.records()}
        for name in [*STOP_ORDER, *sorted(known - set(STOP_ORDER))]:
            if name in known and self.procs.stop(name):
                stopped.append(name)
        info_path = self.state_dir / "cluster.json"
        info_path.unlink(missing_ok=True)
        return stopped

    # ------------------------------------------------------------------ up

    def _step(self, msg: str) -> None:
        self._log(f"{time.monotonic() - self._t0:6.1f}s {msg}")

    def up(self, *, build: bool = True) -> ClusterInfo:
        """Start everything and wait until Kueue admits through its webhooks."""
        self._t0 = time.monotonic()
        timings: dict[str, float] = {}
        if any(self.running().values()):
            raise RuntimeError(
                f"a cluster is already running from {self.state_dir}; "
                "run `python -m jobframework.testing.cluster down` first"
            )
        self.down()  # forget stale records of dead processes

        if build:
            bin_dir = binaries.build()
        else:
            bin_dir = binaries.bin_dir()
            if not (bin_dir / ".complete").is_file():
                raise binaries.BuildError(f"{bin_dir} is not built; run the `build` command")
        timings["build_check"] = time.monotonic() - self._t0
        self._step(f"binaries: {bin_dir}")

        try:
            info = self._up(bin_dir, timings)
        except BaseException:
            self._log(
                f"start-up failed; stopping what was started (logs kept in {self.state_dir}/logs)"
            )
            self.down()
            raise
        timings["total"] = time.monotonic() - self._t0
        info.timings = {k: round(v, 2) for k, v in timings.items()}
        info.save()
        self._step(f"cluster is up; KUBECONFIG={info.kubeconfig}")
        return info

    def _up(self, bin_dir: Path, timings: dict[str, float]) -> ClusterInfo:
        sd = self.state_dir
        for sub in ("pki", "etcd-data", "config", "run", "kueue-certs", "pids", "logs"):
            shutil.rmtree(sd / sub, ignore_errors=True)
        (sd / "cluster.json").unlink(missing_ok=True)
        sd.mkdir(parents=True, exist_ok=True)
        for sub in ("config", "run", "kueue-certs"):
            (sd / sub).mkdir()

        ports = _free_ports(
            [
                "etcd",
                "etcd-peer",
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "kwok",
                "kueue-webhook",
                "kueue-health",
                "kueue-metrics",
            ]
        )
        creds = pki.generate(sd / "pki", SERVICE_IP)
        server = f"https://127.0.0.1:{ports['kube-apiserver']}"
        kubeconfig = sd / "kubeconfig"
        write_kubeconfig(kubeconfig, server, creds)
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        v = str(self.verbosity)

        def binary(name: str) -> str:
            return str(bin_dir / name)

        def run_dir(name: str) -> Path:
            return sd / "run" / name

        # ---------------------------------------------------------------- etcd
        etcd_url = f"http://127.0.0.1:{ports['etcd']}"
        peer_url = f"http://127.0.0.1:{ports['etcd-peer']}"
        self.procs.start(
            "etcd",
            [
                binary("etcd"),
                "--name=default",
                f"--data-dir={sd / 'etcd-data'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
            cwd=run_dir("etcd"),
            env=env,
        )
        self._wait("etcd", lambda: _http_ok(f"{etcd_url}/health"), 30)
        timings["etcd"] = time.monotonic() - self._t0

        # ---------------------------------------------------------- apiserver
        audit_flags: list[str] = []
        if self.topology.audit:
            policy = sd / "config" / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump(manifests.audit_policy()))
            (sd / "logs").mkdir(exist_ok=True)
            audit_flags = [f"--audit-policy-file={policy}",
                           f"--audit-log-path={sd / 'logs' / 'audit.log'}",
                           "--audit-log-format=json", "--audit-log-maxsize=0",
                           # Buffered batches: the log costs the API server little.
                           "--audit-log-mode=batch"]
        admission = sd / "config" / "admission.yaml"
        admission.parent.mkdir(parents=True, exist_ok=True)
        webhook_kubeconfig = sd / "config" / "webhook-client.kubeconfig"
        webhook_kubeconfig.write_text(yaml.safe_dump(
            manifests.webhook_client_kubeconfig(creds.webhook_client.cert,
                                                creds.webhook_client.key)))
        admission.write_text(yaml.safe_dump(manifests.admission_configuration(
            webhook_kubeconfig)))
        self.procs.start(
            "kube-apiserver",
            [
                binary("kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                # The "kubernetes" Service cannot have a loopback endpoint (validation
                # rejects 127.0.0.0/8) and nothing here runs in-cluster: skip it.
                "--endpoint-reconciler-type=none",
                f"--secure-port={ports['kube-apiserver']}",
                f"--cert-dir={sd / 'pki'}",
                f"--tls-cert-file={creds.apiserver.cert}",
                f"--tls-private-key-file={creds.apiserver.key}",
                f"--client-ca-file={creds.ca.cert}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={creds.sa_public}",
                f"--service-account-signing-key-file={creds.sa_private}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                # Every admission webhook call carries a client certificate, so webhook
                # servers can require one (ours: ``--webhook-client-ca``).
                f"--admission-control-config-file={admission}",
                "--allow-privileged=true",
                "--max-requests-inflight=1000",
                "--max-mutating-requests-inflight=500",
                "--profiling=false",
                *audit_flags,
                f"--v={v}",
            ],
            cwd=run_dir("kube-apiserver"),
            env=env,
        )
        kube = Kube(server, creds.ca.cert, creds.admin.cert, creds.admin.key)
        self._wait("kube-apiserver /readyz", lambda: kube.get_text("/readyz") == "ok", 90)
        timings["kube-apiserver"] = time.monotonic() - self._t0

        # --------------------------------------------- controller-manager, scheduler
        self.procs.start(
            "kube-controller-manager",
            [
                binary("kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                # No front-proxy (requestheader) CA is configured; do not look it up.
                "--authentication-skip-lookup=true",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['kube-controller-manager']}",
                f"--cert-dir={run_dir('kube-controller-manager')}",
                "--leader-elect=false",
                "--controllers=*",
                f"--service-account-private-key-file={creds.sa_private}",
                f"--root-ca-file={creds.ca.cert}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--use-service-account-credentials=false",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--profiling=false",
                f"--v={v}",
            ],
            cwd=run_dir("kube-controller-manager"),
            env=env,
        )
        sched_cfg = sd / "config" / "kube-scheduler.yaml"
        sched_cfg.write_text(yaml.safe_dump(manifests.scheduler_config(kubeconfig)))
        self.procs.start(
            "kube-scheduler",
            [
                binary("kube-scheduler"),
                f"--config={sched_cfg}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                # No front-proxy (requestheader) CA is configured; do not look it up.
                "--authentication-skip-lookup=true",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['kube-scheduler']}",
                f"--cert-dir={run_dir('kube-scheduler')}",
                "--profiling=false",
                f"--v={v}",
            ],
            cwd=run_dir("kube-scheduler"),
            env=env,
        )

        # ---------------------------------------------------------------- kwok
        kwok_src = binaries.module_source("kwok", "sigs.k8s.io/kwok").dir
        kwok_cfg = sd / "config" / "kwok.yaml"
        kwok_cfg.write_text(manifests.kwok_config(kwok_src, self.topology))
        node_list = list(manifests.nodes(self.topology))
        for node in node_list:
            kube.apply(node)
            kube.merge_patch_status(node, node["status"])
        self.procs.start(
            "kwok",
            [
                binary("kwok"),
                f"--kubeconfig={kubeconfig}",
                f"--config={kwok_cfg}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={manifests.KWOK_NODE_ANNOTATION}=fake",
                f"--server-address=127.0.0.1:{ports['kwok']}",
                f"--cidr={POD_CIDR}",
                "--node-ip=127.0.0.1",
                "--node-lease-duration-seconds=40",
            ],
            cwd=run_dir("kwok"),
            env=env,
        )
        # ---------------------------------------------------------------- kueue
        kueue_src = binaries.module_source("kueue", "sigs.k8s.io/kueue").dir
        crds = manifests.kueue_crds(kueue_src)
        # Creating a CRD costs the apiserver about a second of CPU (OpenAPI
        # rebuild); overlap the requests.
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(kube.apply, crds))

        def crds_established() -> bool:
            for crd in crds:
                obj = kube.get(
                    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
                )
                conds = (obj or {}).get("status", {}).get("conditions") or []
                if not any(
                    c.get("type") == "Established" and c.get("status") == "True" for c in conds
                ):
                    return False
            return True

        self._wait(f"{len(crds)} Kueue CRDs Established", crds_established, 60)
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}})

        pki.ensure_kueue_metrics_cert()
        cert_dir = sd / "kueue-certs"
        shutil.copyfile(creds.webhook.cert, cert_dir / "tls.crt")
        shutil.copyfile(creds.webhook.key, cert_dir / "tls.key")
        kueue_cfg = sd / "config" / "kueue.yaml"
        kueue_cfg.write_text(
            yaml.safe_dump(
                manifests.kueue_config(
                    self.topology,
                    webhook_port=ports["kueue-webhook"],
                    health_port=ports["kueue-health"],
                    metrics_port=ports["kueue-metrics"],
                    cert_dir=cert_dir,
                ),
                sort_keys=False,
            )
        )
        # Established is not enough: Kueue's first act is to index Workloads, and it exits
        # if discovery does not list them yet (seen on a loaded machine).
        def kueue_kinds_discoverable() -> bool:
            listed = kube.get(f"/apis/{KUEUE_GROUP_VERSION}") or {}
            kinds = {r.get("kind") for r in listed.get("resources") or []}
            return {"Workload", "ClusterQueue", "LocalQueue", "ResourceFlavor"} <= kinds

        self._wait("Kueue's kinds in discovery", kueue_kinds_discoverable, 60)
        self.procs.start(
            "kueue",
            [
                binary("kueue"),
                f"--config={kueue_cfg}",
                f"--kubeconfig={kubeconfig}",
                # The visibility API server needs an APIService routed through a
                # Service, which a process on loopback cannot back; leave it off.
                "--feature-gates=VisibilityOnDemand=false",
                f"--zap-log-level={max(self.verbosity, 2) if self.verbosity else 'info'}",
            ],
            cwd=run_dir("kueue"),
            env=env,
        )
        # The control plane settles while Kueue starts.
        self._wait(
            "kube-controller-manager /healthz",
            lambda: _http_ok(f"https://127.0.0.1:{ports['kube-controller-manager']}/healthz"),
            60,
        )
        self._wait(
            "kube-scheduler /healthz",
            lambda: _http_ok(f"https://127.0.0.1:{ports['kube-scheduler']}/healthz"),
            60,
        )
        timings["controllers"] = time.monotonic() - self._t0

        def nodes_ready() -> bool:
            for node in node_list:
                obj = kube.get(f"/api/v1/nodes/{node['metadata']['name']}")
                conds = (obj or {}).get("status", {}).get("conditions") or []
                if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                    return False
            return True

        self._wait(f"{len(node_list)} kwok nodes Ready", nodes_ready, 60, proc="kwok")
        timings["nodes"] = time.monotonic() - self._t0

        self._wait(
            "Kueue /readyz (webhook server listening)",
            lambda: _http_ok(f"http://127.0.0.1:{ports['kueue-health']}/readyz"),
            120,
            proc="kueue",
        )
        timings["kueue"] = time.monotonic() - self._t0

        for webhook_config in manifests.kueue_webhook_configurations(
            kueue_src,
            port=ports["kueue-webhook"],
            ca_bundle=creds.ca.cert.read_bytes(),
            frameworks=self.topology.frameworks,
        ):
            kube.apply(webhook_config)

        probe = manifests.probe_job(self.topology)

        def job_webhook_active() -> bool:
            out = kube.create(probe, dry_run=True)
            return bool(out.get("spec", {}).get("suspend"))

        # With Kueue's batch/job integration off (another controller, e.g. ours, owns
        # Jobs through externalFrameworks) nothing of Kueue's suspends Jobs; the queue
        # objects below still go through Kueue's own webhooks.
        if "batch/job" in self.topology.frameworks:
            self._wait(
                "Kueue's Job webhook to suspend a queued Job (dry run)",
                job_webhook_active,
                60,
                proc="kueue",
            )

        for obj in manifests.queues(self.topology):
            kube.apply(obj)

        def queue_active() -> bool:
            cq = kube.get(
                f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{self.topology.cluster_queue}"
            )
            conds = (cq or {}).get("status", {}).get("conditions") or []
            return any(c.get("type") == "Active" and c.get("status") == "True" for c in conds)

        self._wait(
            f"ClusterQueue {self.topology.cluster_queue} Active", queue_active, 60, proc="kueue"
        )

        ns = self.topology.local_queue_namespace
        self._wait(
            f"ServiceAccount {ns}/default",
            lambda: kube.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default") is not None,
            60,
            proc="kube-controller-manager",
        )
        timings["kueue_ready"] = time.monotonic() - self._t0

        return ClusterInfo(
            state_dir=str(sd),
            kubeconfig=str(kubeconfig),
            server=server,
            ports=ports,
            bin_dir=str(bin_dir),
            versions=_read_versions(bin_dir),
            ca_cert=str(creds.ca.cert),
            admin_cert=str(creds.admin.cert),
            admin_key=str(creds.admin.key),
            started_at=time.time(),
            webhook_client_ca=str(creds.webhook_client_ca.cert),
        )

    def _wait(
        self, what: str, probe: Callable[[], bool], timeout: float, proc: str | None = None
    ) -> None:
        self._step(f"waiting for {what}")
        names = [r.name for r in self.procs.records()]

        def guarded() -> bool:
            for name in names:
                self.procs.check_alive(name)
            return probe()

        def diagnostics() -> str:
            if proc is None:
                return ""
            return f"\nlast lines of {proc} log:\n{tail(self.procs.log_dir / f'{proc}.log')}"

        wait_for(what, guarded, timeout, on_timeout=diagnostics)


@contextmanager
def running_cluster(
    state_dir: Path | None = None, topology: manifests.Topology | None = None
) -> Iterator[ClusterInfo]:
    """Start a cluster for the duration of a ``with`` block (used by pytest fixtures)."""
    cluster = LocalCluster(state_dir, topology)
    info = cluster.up()
    try:
        yield info
    finally:
        cluster.down()
