"""The Kueue side of the Simulation operator: everything that does not depend on kopf.

A ``Simulation`` (``science.example.com/v1``) runs ``spec.parallelism`` pods of
``spec.template`` as one batch/v1 Job while ``spec.suspend`` is false; its own controller
(the kopf handlers of ``simulation_operator.py``) creates that Job and reports
``status.active``, ``status.ready``, ``status.succeeded`` and ``status.phase``. This module holds:

- the CRD (:data:`SIMULATION_CRD`) and the Kueue adapter (:class:`SimulationJob`, a
  ``GenericJob``), registered as :data:`FRAMEWORK_NAME`, the name Kueue's Configuration
  lists in ``integrations.externalFrameworks``;
- :class:`EmbeddedKueue`, which runs the jobframework in the operator's event loop: it
  installs the CRD, serves Kueue's webhook for the kind, points the API server at it and
  runs the generic reconciler in a :class:`~jobframework.runtime.manager.Manager`. kopf's
  ``@kopf.on.startup`` handler awaits :meth:`EmbeddedKueue.start` and its
  ``@kopf.on.cleanup`` handler :meth:`EmbeddedKueue.stop`.

See ``docs/kopf.md`` for how to run it and what a kopf operator must take care of.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from jobframework import BaseWebhook, NoopWebhook, setup_base_webhook
from jobframework.api import PodSet
from jobframework.config import Configuration
from jobframework.indexer import setup_workload_owner_index
from jobframework.integrations import IntegrationCallbacks, IntegrationManager
from jobframework.interface import FinishedResult, GenericJob
from jobframework.podset import PodSetInfo, merge_into_template, restore_pod_spec
from jobframework.reconciler import new_generic_reconciler_factory, setup_controllers
from jobframework.runtime.client import Client
from jobframework.runtime.errors import NotFound
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object
from jobframework.webhook import (
    WebhookServer,
    WebhookSpec,
    mutate_path,
    mutating_webhook_configuration,
    rule,
    validate_path,
    validating_webhook_configuration,
    write_serving_certs,
)

log = logging.getLogger("simulation.kueue")

SIMULATION_GVK: Final = GVK("science.example.com", "v1", "Simulation")
PLURAL: Final = "simulations"
#: Its entry in Kueue's ``integrations.externalFrameworks`` (``Kind.version.group``), and
#: the name it is registered under, so ``setup_controllers(configuration=...)`` finds it.
FRAMEWORK_NAME: Final = "Simulation.v1.science.example.com"
#: Field manager of what the operator writes itself (CRD, webhook configurations).
FIELD_MANAGER: Final = "simulation-operator"
#: Name of both webhook configurations.
WEBHOOK_CONFIGURATION: Final = "simulation-kueue"

CRD_GVK: Final = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
MUTATING_GVK: Final = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING_GVK: Final = GVK("admissionregistration.k8s.io", "v1",
                            "ValidatingWebhookConfiguration")

SIMULATION_CRD: Final[Object] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{SIMULATION_GVK.group}"},
    "spec": {
        "group": SIMULATION_GVK.group, "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "simulation", "kind": "Simulation",
                  "listKind": "SimulationList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "additionalPrinterColumns": [
                {"name": "Suspended", "type": "boolean", "jsonPath": ".spec.suspend"},
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                {"name": "Active", "type": "integer", "jsonPath": ".status.active"}],
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "required": ["parallelism", "template"],
                         "properties": {
                             "suspend": {"type": "boolean"},
                             "parallelism": {"type": "integer", "minimum": 1},
                             "template": {"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": True}}},
                "status": {"type": "object", "properties": {
                    "active": {"type": "integer"},
                    "ready": {"type": "integer"},
                    "succeeded": {"type": "integer"},
                    "phase": {"type": "string",
                              "enum": ["Pending", "Running", "Succeeded", "Failed"]}}}}}},
        }],
    },
}


# --------------------------------------------------------------------------- the adapter


class SimulationJob(GenericJob):
    """How Kueue sees a Simulation: one pod set of ``spec.parallelism`` pods."""

    def __init__(self, obj: Object | None = None) -> None:
        self.obj: Object = obj if obj is not None else {}

    def object(self) -> Object:
        return self.obj

    def gvk(self) -> GVK:
        return SIMULATION_GVK

    def is_suspended(self) -> bool:
        return bool(self.obj.get("spec", {}).get("suspend"))

    def suspend(self) -> None:
        self.obj.setdefault("spec", {})["suspend"] = True

    def is_active(self) -> bool:
        # The operator copies the Job's active pods until the Job is gone, so Kueue
        # releases the quota only once the pods of an evicted Simulation have stopped.
        return int((self.obj.get("status") or {}).get("active", 0)) > 0

    async def pods_ready(self, client: Client) -> bool:
        # As Kueue's batch/v1 Job: pods that already succeeded count as ready.
        status = self.obj.get("status") or {}
        done = int(status.get("ready", 0)) + int(status.get("succeeded", 0))
        return done >= int(self.obj["spec"]["parallelism"])

    def finished(self) -> FinishedResult:
        phase = (self.obj.get("status") or {}).get("phase")
        return FinishedResult(f"Simulation {phase}", phase == "Succeeded",
                              phase in ("Succeeded", "Failed"))

    async def pod_sets(self, client: Client) -> list[PodSet]:
        spec = self.obj["spec"]
        return [PodSet(name="main", count=int(spec["parallelism"]),
                       template=copy.deepcopy(spec["template"]))]

    async def run_with_pod_sets_info(self, client: Client,
                                     pod_sets_info: Sequence[PodSetInfo]) -> None:
        # Admitted: the flavor's node selector and tolerations go into the template, and
        # the operator's field handler on spec.suspend starts the Job.
        self.obj["spec"]["suspend"] = False
        merge_into_template(self.obj["spec"]["template"], pod_sets_info[0])

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        return restore_pod_spec(self.obj["spec"]["template"], pod_sets_info[0])


def setup_simulation_webhook(server: WebhookServer, client: Any, /, *,
                             noop_webhook: bool = False, **options: Any) -> list[str]:
    """Kueue's defaulting (suspend queued Simulations) and validation for the kind."""
    webhook = NoopWebhook() if noop_webhook else BaseWebhook(SimulationJob, client, **options)
    return setup_base_webhook(server, SIMULATION_GVK, webhook)


CALLBACKS: Final = IntegrationCallbacks(
    new_job=SimulationJob,
    new_reconciler=new_generic_reconciler_factory(SimulationJob),
    setup_webhook=setup_simulation_webhook,
    job_type=SIMULATION_GVK,
    setup_indexes=lambda indexer: setup_workload_owner_index(indexer, SIMULATION_GVK),
)


def register(manager: IntegrationManager) -> None:
    """Register the integration in ``manager`` under :data:`FRAMEWORK_NAME`."""
    manager.register_integration(FRAMEWORK_NAME, CALLBACKS)


def webhook_specs() -> tuple[list[WebhookSpec], list[WebhookSpec]]:
    """(mutating, validating) webhooks of the kind, as Kueue's markers declare them:
    defaulting on create only (on update it would suspend an admitted Simulation again),
    validation on create and update."""
    group, version = SIMULATION_GVK.group, SIMULATION_GVK.version
    return (
        [WebhookSpec(name=f"msimulation.{group}", path=mutate_path(SIMULATION_GVK),
                     rules=[rule(group, version, PLURAL, ("CREATE",))], timeout_seconds=10)],
        [WebhookSpec(name=f"vsimulation.{group}", path=validate_path(SIMULATION_GVK),
                     rules=[rule(group, version, PLURAL, ("CREATE", "UPDATE"))],
                     timeout_seconds=10)],
    )


def probe_object(namespace: str) -> Object:
    """A queued Simulation that the mutating webhook must suspend (created as a dry run)."""
    return {"apiVersion": SIMULATION_GVK.api_version, "kind": "Simulation",
            "metadata": {"name": "webhook-probe", "namespace": namespace,
                         "labels": {"kueue.x-k8s.io/queue-name": "webhook-probe"}},
            "spec": {"parallelism": 1, "template": {"spec": {"containers": [
                {"name": "probe", "image": "busybox"}]}}}}


# --------------------------------------------------------------------------- embedding


async def _eventually(what: str, probe: Any, limit: float) -> None:
    """Await ``probe()`` every half second until it returns true; ``TimeoutError`` after
    ``limit`` seconds, naming ``what`` and the last error."""
    deadline = asyncio.get_running_loop().time() + limit
    last: Exception | None = None
    while True:
        try:
            if await probe():
                return
        except Exception as err:  # not there yet: keep trying, remember why
            last = err
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"timed out waiting for {what}" + (f": {last}" if last else ""))
        await asyncio.sleep(0.5)


class EmbeddedKueue:
    """The Simulation's Kueue webhook and generic reconciler, run in the caller's loop.

    Args:
        client: the operator's API client (``await RestClient.auto()``).
        kueue_config: the Configuration the cluster's Kueue runs with; it must list
            :data:`FRAMEWORK_NAME` in ``integrations.externalFrameworks``.
        webhook_host, webhook_port: where the webhook server listens (port 0: any free
            one, known once :meth:`start` has listened).
        cert_dir: ``tls.crt`` and ``tls.key`` mounted from a Secret (cert-manager's, say);
            the webhook configurations are then the deployment's, pointing at a Service.
            None: a CA and serving certificate are made for this run, and :meth:`start`
            registers webhook configurations calling the server's own URL (loopback, for an
            operator run beside a local control plane), which :meth:`stop` deletes.
        install_crd: apply :data:`SIMULATION_CRD` first (an operator whose manifests ship
            the CRD passes False).
        probe_namespace: where the dry-run probe proves the webhook suspends queued
            Simulations before :meth:`start` returns.
    """

    def __init__(self, client: Client, kueue_config: Configuration, *,
                 webhook_host: str = "127.0.0.1", webhook_port: int = 0,
                 cert_dir: str | Path | None = None, install_crd: bool = True,
                 probe_namespace: str = "default", timeout: float = 120.0) -> None:
        if FRAMEWORK_NAME not in kueue_config.external_frameworks():
            # Kueue would treat the Simulation's Jobs as jobs of their own, and a
            # manageJobsWithoutQueueName Kueue would queue them twice.
            raise ValueError(
                f"Kueue's Configuration does not list {FRAMEWORK_NAME} in "
                "integrations.externalFrameworks: add it there and restart Kueue")
        self.client = client
        self.kueue_config = kueue_config
        self.webhook_host = webhook_host
        self.webhook_port = webhook_port
        self.cert_dir = Path(cert_dir) if cert_dir is not None else None
        self.install_crd = install_crd
        self.probe_namespace = probe_namespace
        self.timeout = timeout
        self.manager: Manager | None = None
        self.webhook_server: WebhookServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._registered: list[GVK] = []

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The manager's task once started (done: the manager has stopped or failed)."""
        return self._task

    async def start(self) -> None:
        """CRD, then webhook, then manager: return once queued Simulations are suspended
        on create and the reconciler's cache has synced. Undoes itself on failure."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        # 1. The CRD: the API server must serve the kind before the manager watches it.
        if self.install_crd:
            await self.client.apply(SIMULATION_CRD, field_manager=FIELD_MANAGER, force=True)
            await _eventually("the Simulation CRD to be Established", self._established,
                              self.timeout)
        # 2. The webhook server, with the integration's Kueue webhook on it.
        ca_bundle: bytes | None = None
        cert_dir = self.cert_dir
        if cert_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="simulation-webhook-")
            cert_dir = Path(self._tmp.name)
            # The API server dials the URL of server.url(): loopback for these hosts.
            loopback = ("127.0.0.1", "localhost")
            hosts = loopback if self.webhook_host in (*loopback, "0.0.0.0") \
                else (self.webhook_host, *loopback)
            ca_bundle = write_serving_certs(cert_dir, hosts).ca_bundle
        integrations = IntegrationManager()
        register(integrations)
        mgr = Manager(self.client, graceful_shutdown_timeout=10.0,
                      cache_sync_timeout=self.timeout)
        server = WebhookServer(host=self.webhook_host, port=self.webhook_port,
                               cert_dir=cert_dir, shutdown_timeout=5.0)
        self.manager, self.webhook_server = mgr, server
        # Kueue's own Configuration decides queue defaulting, waitForPodsReady, the
        # feature gates and the worker counts (groupKindConcurrency), as for Kueue's
        # manager; FRAMEWORK_NAME in its externalFrameworks enables the integration.
        done = await setup_controllers(mgr, integrations, webhook_server=server,
                                       configuration=self.kueue_config)
        if FRAMEWORK_NAME not in done:
            raise RuntimeError(f"setup_controllers did not set up {FRAMEWORK_NAME}")
        await server.listen()
        # 3. The manager, as a task of this loop; its cache must sync before the webhook
        # admits Simulations its reconciler would otherwise see late.
        self._task = asyncio.create_task(mgr.start(), name="simulation-kueue-manager")
        elected = asyncio.ensure_future(mgr.elected())
        finished, _ = await asyncio.wait({elected, self._task}, timeout=self.timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        if elected not in finished:
            elected.cancel()
            if self._task in finished:
                await self._task  # raises the manager's error
            raise TimeoutError("timed out waiting for the manager's cache to sync")
        # 4. The API server calls the webhook from now on.
        if ca_bundle is not None:
            await self._register_webhooks(server.url(), ca_bundle)
        await _eventually("the webhook to suspend a queued Simulation (dry run)",
                          self._webhook_suspends, self.timeout)
        log.info("Kueue side running: webhooks at %s", server.url())

    async def stop(self) -> None:
        """Webhook configurations first (the API server must not call a server that is
        going away), then the manager, then the webhook server."""
        for gvk in reversed(self._registered):
            with contextlib.suppress(NotFound):
                await self.client.delete(gvk, WEBHOOK_CONFIGURATION)
        self._registered.clear()
        if self.manager is not None and self._task is not None:
            await self.manager.stop()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._task
        if self.webhook_server is not None:
            await self.webhook_server.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    async def _established(self) -> bool:
        crd = await self.client.get(CRD_GVK, SIMULATION_CRD["metadata"]["name"])
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    async def _register_webhooks(self, url: str, ca_bundle: bytes) -> None:
        mutating, validating = webhook_specs()
        for gvk, manifest in (
                (MUTATING_GVK, mutating_webhook_configuration(
                    WEBHOOK_CONFIGURATION, mutating, ca_bundle=ca_bundle, url=url)),
                (VALIDATING_GVK, validating_webhook_configuration(
                    WEBHOOK_CONFIGURATION, validating, ca_bundle=ca_bundle, url=url))):
            self._registered.append(gvk)
            await self.client.apply(manifest, field_manager=FIELD_MANAGER, force=True)

    async def _webhook_suspends(self) -> bool:
        out = await self.client.create(probe_object(self.probe_namespace), dry_run=True)
        return bool((out.get("spec") or {}).get("suspend"))
