"""Two manager replicas on the real control plane: the leader is SIGKILLed mid-run.

Both processes run ``python -m integrations run --leader-elect`` with the ``internal``
certificate management (one CA in a shared Secret) behind a loopback
:class:`~jobframework.testing.balancer.TCPBalancer`, the stand-in of the webhook Service.
While JobFlows are being created, the leader is killed: the other replica must take the
Lease within the lease duration (plus one retry period), no create may be refused (the
survivor serves the webhook all along), and every JobFlow must finish with exactly one
Workload. A graceful stop then releases the Lease at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import signal
import socket
import ssl
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from integrations.jobflow import JOBFLOW_GVK
from integrations.manager import (
    MUTATING_GVK,
    VALIDATING_GVK,
    CertRotation,
    ExternalFrameworkManager,
    ManagerOptions,
)
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import AlreadyExists, ApiError
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.balancer import TCPBalancer
from jobframework.testing.cluster import COMPLETE_DELAY_ANNOTATION, ClusterInfo

from .helpers import (
    NS,
    QUEUE_LABEL,
    Cleanup,
    delete,
    eventually,
    get_or_none,
    is_true,
    own_queue,
)

pytestmark = pytest.mark.cluster

LEASE_GVK = GVK("coordination.k8s.io", "v1", "Lease")
SECRET_GVK = GVK("", "v1", "Secret")
NAMESPACE_GVK = GVK("", "v1", "Namespace")
MANAGER_NS = "kueue-jobframework-system"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 6.0, 4.0, 1.0
FLOWS = 24


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Replica:
    """One ``python -m integrations run`` process."""

    def __init__(self, index: int, name: str, kubeconfig: str, lb_port: int,
                 logs: Path) -> None:
        self.index = index
        self.webhook_port = free_port()
        self.probe_port = free_port()
        self.log_path = logs / f"replica-{index}.log"
        self.args = [
            sys.executable, "-m", "integrations", "run", "--kubeconfig", kubeconfig,
            "--integrations", "jobflow", "--namespace", MANAGER_NS,
            "--leader-elect", "--leader-election-id", name,
            "--lease-duration", str(LEASE_DURATION), "--renew-deadline", str(RENEW_DEADLINE),
            "--retry-period", str(RETRY_PERIOD),
            "--cert-management", "internal", "--cert-secret-name", name,
            "--webhook-service-name", name, "--cert-dns-name", "localhost",
            "--webhook-url", f"https://localhost:{lb_port}",
            "--webhook-configuration-name", name,
            "--webhook-port", str(self.webhook_port),
            "--health-probe-bind-address", f"127.0.0.1:{self.probe_port}",
            "--metrics-bind-address", f"127.0.0.1:{self.probe_port}",
        ]
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.log = self.log_path.open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            *self.args, stdout=self.log, stderr=asyncio.subprocess.STDOUT)

    async def get(self, path: str) -> tuple[int, str]:
        try:
            async with aiohttp.ClientSession() as session, session.get(
                    f"http://127.0.0.1:{self.probe_port}{path}",
                    timeout=aiohttp.ClientTimeout(total=2)) as resp:
                return resp.status, await resp.text()
        except (aiohttp.ClientError, TimeoutError):
            return 0, ""

    async def ready(self) -> bool:
        return (await self.get("/readyz"))[0] == 200

    async def leading(self) -> bool:
        status, text = await self.get("/metrics")
        return status == 200 and any(
            line.startswith("leader_election_master_status") and line.endswith(" 1.0")
            for line in text.splitlines())

    def tail(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    async def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if self.proc is None or self.proc.returncode is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return await asyncio.wait_for(self.proc.wait(), 60)
        except TimeoutError:
            self.proc.kill()
            return await self.proc.wait()


def flow(name: str, queue: str) -> Object:
    return {"apiVersion": JOBFLOW_GVK.api_version, "kind": JOBFLOW_GVK.kind,
            "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: queue}},
            "spec": {"flows": [{"name": "only", "jobTemplate": {
                "template": {
                    "metadata": {"annotations": {COMPLETE_DELAY_ANNOTATION: "2s"}},
                    "spec": {"containers": [{
                        "name": "main", "image": "registry.example/fake:1",
                        "resources": {"requests": {"cpu": "100m"}}}]}}}}]}}


@pytest.fixture
async def replicas(client: RestClient, cluster_info: ClusterInfo, tmp_path: Path
                   ) -> AsyncIterator[tuple[list[Replica], TCPBalancer, str]]:
    name = f"ha-{uuid.uuid4().hex[:6]}"
    with contextlib.suppress(AlreadyExists):
        await client.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": MANAGER_NS}})
    lb_port = free_port()
    reps = [Replica(i, name, cluster_info.kubeconfig, lb_port, tmp_path) for i in (0, 1)]
    lb = TCPBalancer([("127.0.0.1", r.webhook_port) for r in reps], port=lb_port)
    await lb.start()
    try:
        for r in reps:
            await r.start()
        yield reps, lb, name
    finally:
        for r in reps:
            await r.stop()
        await lb.stop()
        # The configurations point at the balancer, gone now: remove them.
        for gvk in (MUTATING_GVK, VALIDATING_GVK):
            await delete(client, gvk, name, None)
        await delete(client, SECRET_GVK, name, MANAGER_NS)
        await delete(client, LEASE_GVK, name, MANAGER_NS)


async def test_leader_killed_mid_run_survivor_takes_over_and_nothing_is_lost(
        client: RestClient, cleanup: Cleanup,
        replicas: tuple[list[Replica], TCPBalancer, str]) -> None:
    reps, lb, name = replicas
    queue = await own_queue(client, cleanup, "ha", cpu="50")

    async def all_ready() -> bool:
        for r in reps:
            assert r.proc is not None and r.proc.returncode is None, r.tail()
        return all([await r.ready() for r in reps])

    await eventually("both replicas ready (webhooks served, certificates written)",
                     all_ready, 120)
    # One CA for both: the Secret they share; the configurations trust it.
    hooks = (await client.get(VALIDATING_GVK, name))["webhooks"]
    assert {h["clientConfig"]["url"].rsplit("/", 1)[0] for h in hooks} == {
        f"https://localhost:{lb.port}"}
    assert all(h["clientConfig"].get("caBundle") for h in hooks)

    async def one_leader() -> Replica | None:
        leaders = [r for r in reps if await r.leading()]
        assert len(leaders) <= 1, "two replicas lead at once"
        return leaders[0] if leaders else None

    leader = await eventually("a leader", one_leader, 60)
    survivor = reps[1 - leader.index]
    assert not await survivor.leading()
    # controller-runtime's metric names, the webhook's, and Kueue's job metrics.
    _, text = await leader.get("/metrics")
    for metric in ("controller_runtime_reconcile_total", "workqueue_depth",
                   "controller_runtime_webhook_requests_total",
                   "leader_election_master_status", "kueue_workload_creation_latency_seconds"):
        assert f"# TYPE {metric} " in text, f"{metric} not served"

    refused: list[str] = []
    names: list[str] = []

    async def create_flows() -> None:
        for i in range(FLOWS):
            fname = f"{name}-{i:02d}"
            try:
                await client.create(flow(fname, queue.name))
                names.append(fname)
                cleanup.insert(0, (JOBFLOW_GVK, fname, NS))
            except ApiError as err:
                refused.append(f"{fname}: {err}")
            await asyncio.sleep(0.25)

    # The API server keeps its connection to whichever replica it reached first: send
    # it to the leader, so that the kill below cuts the webhook path it is using.
    lb.prefer(("127.0.0.1", leader.webhook_port))
    await lb.cut()
    creator = asyncio.create_task(create_flows())
    await eventually("a few JobFlows created", lambda: _true(len(names) >= 6), 60)
    before = dict(lb.stats.connections)
    assert before.get(("127.0.0.1", leader.webhook_port), 0) > 0, (
        f"the leader served no webhook call before the kill: {lb.stats}")
    assert leader.proc is not None
    leader.proc.kill()  # SIGKILL: no release of the Lease, no goodbye
    killed_at = time.monotonic()
    await leader.proc.wait()
    await eventually("the survivor to lead", survivor.leading, 60)
    takeover = time.monotonic() - killed_at
    await creator
    print(f"takeover {takeover:.1f}s after SIGKILL; {len(names)} creates, {len(refused)} "
          f"refused; balancer {lb.stats}")
    assert refused == [], f"creates refused while the leader died: {refused}"
    # The Lease goes after its duration, plus up to a retry period to notice.
    assert takeover <= LEASE_DURATION + 2 * RETRY_PERIOD + 3.0, (
        f"takeover took {takeover:.1f}s (lease {LEASE_DURATION}s)")
    # The leader served webhooks until it died; then the survivor did.
    assert lb.stats.connections.get(("127.0.0.1", leader.webhook_port), 0) > 0, lb.stats
    assert lb.stats.connections.get(("127.0.0.1", survivor.webhook_port), 0) > 0, lb.stats

    async def finished() -> bool:
        for fname in names:
            obj = await client.get(JOBFLOW_GVK, fname, namespace=NS)
            if (obj.get("status") or {}).get("state") != "Succeed":
                return False
        return True

    await eventually(f"all {len(names)} JobFlows to succeed", finished, 240)

    async def flow_workloads() -> list[Object]:
        items = (await client.list(GVK("kueue.x-k8s.io", "v1beta2", "Workload"),
                                   namespace=NS)).items
        return [wl for wl in items
                if any(r["name"].startswith(name)
                       for r in wl["metadata"].get("ownerReferences") or [])]

    async def workloads_finished() -> bool:
        return all(is_true(wl, "Finished") for wl in await flow_workloads())

    # A JobFlow's state turns Succeed first; the reconcile that follows marks its
    # Workload Finished (as Kueue's does after the job's own status).
    await eventually("every JobFlow's Workload to be Finished", workloads_finished, 60)
    owners: dict[str, int] = {}
    for wl in await flow_workloads():
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "JobFlow" and ref["name"].startswith(name):
                owners[ref["name"]] = owners.get(ref["name"], 0) + 1
    assert owners == {fname: 1 for fname in names}, "a JobFlow without or with two Workloads"

    # A graceful stop releases the Lease at once (no waiting out its duration).
    assert await survivor.stop(signal.SIGTERM) == 0, survivor.tail()
    lease = await client.get(LEASE_GVK, name, namespace=MANAGER_NS)
    assert not lease["spec"].get("holderIdentity"), lease["spec"]
    assert await get_or_none(client, MUTATING_GVK, name, None) is not None, (
        "a replica stopping must leave the shared configurations to the others")


async def _true(value: bool) -> bool:
    return value




async def _served_cert(port: int) -> bytes:
    """The DER certificate a fresh TLS connection to the webhook port is served."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                              server_hostname="localhost")
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return bytes(der)


async def test_certificates_rotate_with_no_failed_admission(client: RestClient) -> None:
    """Short lifetimes: the serving certificate is renewed several times and the CA once
    (trusted next to the old one first) while dry-run creates go through the webhooks."""
    name = f"rot-{uuid.uuid4().hex[:6]}"
    with contextlib.suppress(AlreadyExists):
        await client.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": MANAGER_NS}})
    port = free_port()
    rotation = CertRotation(
        ca_validity=dt.timedelta(seconds=40), cert_validity=dt.timedelta(seconds=16),
        lookahead=dt.timedelta(seconds=8), check_interval=dt.timedelta(seconds=1),
        bundle_propagation_delay=dt.timedelta(seconds=2))
    options = ManagerOptions(
        integrations=("jobflow",), cert_management="internal", namespace=MANAGER_NS,
        webhook_service_name=name, cert_secret_name=name, cert_extra_dns_names=("localhost",),
        webhook_port=port, webhook_url=f"https://localhost:{port}",
        webhook_configuration_name=name, cert_rotation=rotation)
    served: set[bytes] = set()
    bundles: set[str] = set()
    failures: list[str] = []
    admitted = 0
    try:
        async with ExternalFrameworkManager(client, options):
            deadline = time.monotonic() + 50
            while time.monotonic() < deadline:
                try:
                    out = await client.create(flow(f"{name}-probe", "user-queue"),
                                              dry_run=True)
                    assert out["spec"].get("suspend") is True  # the webhook ran
                    admitted += 1
                except ApiError as err:
                    failures.append(str(err))
                served.add(await _served_cert(port))
                hooks = (await client.get(VALIDATING_GVK, name))["webhooks"]
                bundles.update(h["clientConfig"]["caBundle"] for h in hooks)
                await asyncio.sleep(0.25)
    finally:
        for gvk in (MUTATING_GVK, VALIDATING_GVK):
            await delete(client, gvk, name, None)
        await delete(client, SECRET_GVK, name, MANAGER_NS)
    print(f"{admitted} admissions, {len(failures)} failed; {len(served)} serving certs, "
          f"{len(bundles)} caBundles seen")
    assert failures == [], failures[:3]
    assert admitted > 50
    assert len(served) >= 3, "the serving certificate was not renewed"
    # One CA, then old+new, then the new one alone (at least the first two seen).
    assert len(bundles) >= 2, "the CA was not rotated"
