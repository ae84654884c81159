"""The kopf example (docs/examples/kopf_operator) run in-process on the in-memory server.

kopf itself runs, with the example's handlers loaded as ``kopf run`` loads them, against
the in-memory API server's HTTP front; its startup handler starts the embedded Kueue side
(CRD, webhook server over TLS, webhook configurations by URL, manager). The in-memory
server does not call webhooks named by WebhookConfigurations, so the test forwards its
admission requests for Simulations to the URL the example registered, as kube-apiserver
would. The stand-in Kueue admits and evicts; the test plays the batch/v1 Job
controller by writing the status of the Job kopf creates. The same example runs through
the real Kueue in ``tests/integration/test_kopf_cluster.py``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import attrs
import pytest
import yaml

from jobframework.runtime.client import Client
from jobframework.runtime.errors import NotFound
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import APIServer, KueueStandIn
from jobframework.testing.http import serve_http

pytest.importorskip("kopf", reason="the [kopf] extra is not installed")
import kopf  # after the skip: kopf is an optional extra

EXAMPLE_DIR = Path(__file__).parents[3] / "docs" / "examples" / "kopf_operator"
SIMULATION = GVK("science.example.com", "v1", "Simulation")
JOB = GVK("batch", "v1", "Job")
MUTATING = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Generous: kopf, the manager and the webhook exchange over loopback sockets.
LIMIT = 60.0


async def eventually(what: str, probe: Callable[[], Awaitable[Any]]) -> Any:
    """Poll ``probe`` until it returns something true; fail after :data:`LIMIT` seconds."""
    deadline = time.monotonic() + LIMIT
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@contextlib.contextmanager
def example_operator() -> Iterator[tuple[Any, ModuleType]]:
    """A fresh kopf registry with the example's handlers, imported as ``kopf run`` imports
    them (the example's folder first on ``sys.path``); the previous registry afterwards."""
    previous = kopf.get_default_registry()
    registry = kopf.OperatorRegistry()
    kopf.set_default_registry(registry)
    sys.path.insert(0, str(EXAMPLE_DIR))
    names = ("simulation_operator", "simulation_kueue")
    for name in names:
        sys.modules.pop(name, None)
    try:
        yield registry, importlib.import_module("simulation_operator")
    finally:
        kopf.set_default_registry(previous)
        sys.path.remove(str(EXAMPLE_DIR))
        for name in names:
            sys.modules.pop(name, None)


def forward_to_registered(server: APIServer, gvk: GVK
                          ) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """An in-process admission hook sending each review to the URL of the example's
    ``gvk`` configuration, trusting its ``caBundle``, for the operations its rule names
    (the others, and all while there is no configuration, are allowed)."""

    async def hook(review: dict[str, Any]) -> dict[str, Any]:
        configs = server.objects(gvk)
        [webhook] = configs[0]["webhooks"] if configs else [None]
        if webhook is None or review["request"]["operation"] not in \
                webhook["rules"][0]["operations"]:
            return {**review, "response": {"uid": review["request"]["uid"], "allowed": True}}
        client_config = webhook["clientConfig"]
        ctx = ssl.create_default_context(
            cadata=base64.b64decode(client_config["caBundle"]).decode())
        async with aiohttp.ClientSession() as session, session.post(
                client_config["url"], json=review, ssl=ctx) as resp:
            resp.raise_for_status()
            answer: dict[str, Any] = await resp.json()
            return answer

    return hook


@attrs.frozen
class Env:
    """The in-memory cluster a test runs the example against."""

    server: APIServer
    kueue: KueueStandIn
    client: Client
    #: The HTTP front's URL (what ``$KUBECONFIG`` names).
    url: str


@pytest.fixture
async def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Env]:
    """The in-memory server behind its HTTP front (``$KUBECONFIG`` points at it), the
    stand-in Kueue with one flavor and queue, and ``$KUEUE_CONFIG`` listing the kind."""
    server = APIServer()
    kueue = KueueStandIn(server)
    client = server.client()
    await kueue.resource_flavor("on-demand", node_labels={"instance-type": "on-demand"})
    await kueue.cluster_queue("cq", {"on-demand": {"cpu": "4"}})
    await kueue.local_queue("user-queue", "cq")
    rules = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [SIMULATION.group],
              "apiVersions": [SIMULATION.version], "resources": ["simulations"]}]
    server.add_mutating_webhook(forward_to_registered(server, MUTATING), rules=rules)
    server.add_validating_webhook(forward_to_registered(server, VALIDATING), rules=rules)
    async with await serve_http(server) as front:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "memory",
            "clusters": [{"name": "memory", "cluster": {"server": front.url}}],
            "users": [{"name": "admin", "user": {"token": "unused"}}],
            "contexts": [{"name": "memory", "context": {"cluster": "memory",
                                                        "user": "admin"}}]}))
        kueue_config = tmp_path / "kueue.yaml"
        kueue_config.write_text(yaml.safe_dump({
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "integrations": {"frameworks": ["batch/job"],
                             "externalFrameworks": ["Simulation.v1.science.example.com"]}}))
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        monkeypatch.setenv("KUEUE_CONFIG", str(kueue_config))
        for name in ("WEBHOOK_CERT_DIR", "WEBHOOK_HOST", "WEBHOOK_PORT", "INSTALL_CRD"):
            monkeypatch.delenv(name, raising=False)
        yield Env(server, kueue, client, front.url)


@contextlib.asynccontextmanager
async def running_operator(env: Env) -> AsyncIterator[ModuleType]:
    """kopf running the example until the block ends, then stopped as on SIGTERM."""
    with example_operator() as (registry, module):

        @kopf.on.login(registry=registry)
        def login(**_: Any) -> Any:
            # kopf's own login would go through kubernetes-asyncio's global configuration.
            return kopf.ConnectionInfo(server=env.url)

        stop = asyncio.Event()
        task = asyncio.create_task(kopf.operator(
            registry=registry, clusterwide=True, standalone=True, stop_flag=stop))
        try:
            await eventually("the example's webhook configurations", lambda: registered(env))
            yield module
        finally:
            stop.set()
            await asyncio.wait_for(task, LIMIT)


async def registered(env: Env) -> bool:
    return bool(env.server.objects(MUTATING)) and bool(env.server.objects(VALIDATING))


def simulation(name: str, parallelism: int = 2) -> Object:
    return {"apiVersion": "science.example.com/v1", "kind": "Simulation",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {QUEUE_LABEL: "user-queue"}},
            "spec": {"parallelism": parallelism, "template": {"spec": {"containers": [
                {"name": "main", "image": "busybox",
                 "resources": {"requests": {"cpu": "1"}}}]}}}}


async def get_or_none(client: Client, gvk: GVK, name: str) -> Object | None:
    try:
        return await client.get(gvk, name, namespace="default")
    except NotFound:
        return None


def condition(obj: Object, ctype: str) -> tuple[str, str] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == ctype:
            return cond["status"], cond.get("reason", "")
    return None


async def test_queued_simulation_runs_through_kopf_is_evicted_and_finishes(env: Env) -> None:
    client, kueue = env.client, env.kueue
    async with running_operator(env):
        # Our webhook (over TLS, registered by URL) suspends the queued Simulation.
        created = await client.create(simulation("sim"))
        assert created["spec"]["suspend"] is True

        async def workload() -> Object | None:
            with contextlib.suppress(LookupError):
                return await kueue.workload_for(created)
            return None

        wl = await eventually("the Simulation's Workload", workload)
        assert wl["metadata"]["name"].startswith("simulation-sim-")
        assert wl["spec"]["queueName"] == "user-queue"
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 2)]
        # Suspended: kopf's handlers ran (on create and on the field) and made no Job.
        async def handled() -> Object | None:
            sim = await client.get(SIMULATION, "sim", namespace="default")
            annotations = sim["metadata"].get("annotations") or {}
            return sim if "kopf.zalando.org/last-handled-configuration" in annotations \
                else None

        sim = await eventually("kopf to handle the new Simulation", handled)
        assert sim["status"] == {"active": 0, "ready": 0, "succeeded": 0, "phase": "Pending"}
        assert await get_or_none(client, JOB, "sim") is None

        await kueue.admit(wl)
        # The reconciler unsuspends with the flavor's node selector; kopf's field handler
        # on spec.suspend creates the Job from that template.
        job = await eventually("kopf to create the Job",
                               lambda: get_or_none(client, JOB, "sim"))
        assert [(r["kind"], r["name"], r["controller"])
                for r in job["metadata"]["ownerReferences"]] == [("Simulation", "sim", True)]
        assert job["spec"]["parallelism"] == job["spec"]["completions"] == 2
        assert job["spec"]["template"]["spec"]["nodeSelector"] == {"instance-type": "on-demand"}

        # The Job controller's part: both pods run and are ready.
        await client.patch(JOB, "sim", {"status": {"active": 2, "ready": 2}},
                           namespace="default", subresource="status")

        wl_name = wl["metadata"]["name"]

        async def pods_ready() -> Object | None:
            wl = await kueue.workload(wl_name)
            return wl if condition(wl, "PodsReady") == ("True", "Started") else None

        await eventually("PodsReady=True from the status kopf copied", pods_ready)
        sim = await client.get(SIMULATION, "sim", namespace="default")
        assert sim["status"] == {"active": 2, "ready": 2, "succeeded": 0,
                                 "phase": "Running"}

        # Preempted: the reconciler suspends it, kopf deletes the Job, the quota is
        # released once the Simulation reports no active pods.
        await kueue.evict(wl_name, "Preempted")

        async def released() -> Object | None:
            wl = await kueue.workload(wl_name)
            return wl if condition(wl, "QuotaReserved") == ("False", "Pending") else None

        await eventually("the quota released after kopf deleted the Job", released)
        assert await get_or_none(client, JOB, "sim") is None
        sim = await client.get(SIMULATION, "sim", namespace="default")
        assert sim["spec"]["suspend"] is True
        assert "nodeSelector" not in sim["spec"]["template"]["spec"]
        assert sim["status"] == {"active": 0, "ready": 0, "succeeded": 0, "phase": "Pending"}

        # Admitted again: a new Job, which completes.
        await kueue.schedule()

        first_uid = job["metadata"]["uid"]

        async def new_job() -> Object | None:
            job = await get_or_none(client, JOB, "sim")
            return job if job is not None and job["metadata"]["uid"] != first_uid else None

        await eventually("kopf to create the Job again", new_job)
        await client.patch(JOB, "sim", {"status": {"active": 0, "ready": 0, "succeeded": 2,
                                                   "conditions": [{"type": "Complete",
                                                                   "status": "True"}]}},
                           namespace="default", subresource="status")

        async def finished() -> Object | None:
            wl = await kueue.workload(wl_name)
            return wl if condition(wl, "Finished") == ("True", "Succeeded") else None

        await eventually("the Workload to finish", finished)
        sim = await client.get(SIMULATION, "sim", namespace="default")
        assert sim["status"]["phase"] == "Succeeded"
        # No timers, daemons or deletion handlers: kopf put no finalizer on it.
        assert not sim["metadata"].get("finalizers")
    # kopf's cleanup handler took the webhook configurations away.
    assert not await registered(env)



async def test_refuses_to_run_beside_a_kueue_that_does_not_list_the_kind(
        env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Kueue would treat the Simulation's Jobs as jobs of their own: the startup handler
    fails permanently, so kopf stops, rather than run the operator outside Kueue."""
    other = tmp_path / "other-kueue.yaml"
    other.write_text(yaml.safe_dump({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "integrations": {"frameworks": ["batch/job"]}}))
    monkeypatch.setenv("KUEUE_CONFIG", str(other))
    with example_operator() as (registry, _):
        kopf.on.login(registry=registry)(lambda **_: kopf.ConnectionInfo(server=env.url))
        # kopf ends with its ActivityError (not exported); the handler's error is logged.
        with pytest.raises(Exception, match="One or more handlers failed"):
            await asyncio.wait_for(kopf.operator(registry=registry, clusterwide=True,
                                                 standalone=True), LIMIT)
    assert "Activity 'start_kueue' failed permanently: Kueue's Configuration does not " \
        "list Simulation.v1.science.example.com in integrations.externalFrameworks" \
        in caplog.text
    # It stopped before the CRD and the webhook.
    assert not env.server.objects(GVK("apiextensions.k8s.io", "v1",
                                      "CustomResourceDefinition"))
    assert not await registered(env)
