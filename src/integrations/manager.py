"""Our external-framework manager: the JobFlow integration beside a real Kueue manager.

Kueue lists ``JobFlow.v1alpha1.api.practice.com`` in ``integrations.externalFrameworks``
and leaves JobFlows to us. This process (or coroutine, to embed it) does the rest:

1. installs the JobFlow and JobTemplate CRDs shipped in :mod:`integrations.jobflow`
   and waits until they are ``Established``;
2. serves the JobFlow webhooks (Kueue's base webhook for JobFlows, the JobTemplate
   validator) from a :class:`~jobframework.webhook.WebhookServer` on loopback with a
   locally generated CA, and registers Mutating/ValidatingWebhookConfigurations
   pointing at its URL; it then proves the path apiserver → webhook works with a
   dry-run JobFlow that must come back suspended;
3. runs the JobFlow DAG and JobTemplate controllers and Kueue's generic reconciler for
   JobFlows in a :class:`~jobframework.runtime.manager.Manager`.

On shutdown it deletes the webhook configurations it created *before* it stops
serving, so the API server never calls a dead URL with ``failurePolicy: Fail``.

It needs an admin-like identity (it writes CRDs and webhook configurations). Run it::

    python -m integrations run --kubeconfig ~/.kube/config

or embed it::

    async with ExternalFrameworkManager(client) as mgr:
        ...  # JobFlows are now admitted through Kueue
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

import attrs

from integrations.jobflow import JOBFLOW_GVK, JOBTEMPLATE_GVK, load_crds, register, setup
from integrations.jobflow.setup import JobFlowSetup
from jobframework.integrations import IntegrationManager
from jobframework.reconciler import ReconcilerOptions
from jobframework.runtime.client import Client
from jobframework.runtime.errors import NotFound
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object
from jobframework.webhook import (
    WebhookServer,
    WebhookSpec,
    mutating_webhook_configuration,
    rule,
    validating_webhook_configuration,
    write_serving_certs,
)

log = logging.getLogger("integrations.manager")

CRD_GVK: Final = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
MUTATING_GVK: Final = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING_GVK: Final = GVK("admissionregistration.k8s.io", "v1",
                            "ValidatingWebhookConfiguration")
#: Field manager of the objects this manager applies.
FIELD_MANAGER: Final = "kueue-jobframework"
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"


@attrs.frozen(kw_only=True)
class ManagerOptions:
    """How :class:`ExternalFrameworkManager` runs."""

    #: Where the webhook server listens; the API server must reach it there.
    webhook_host: str = "127.0.0.1"
    #: 0 picks a free port.
    webhook_port: int = 0
    #: Where the serving certificate is written (a temporary directory when None).
    cert_dir: Path | None = None
    #: Name of both webhook configurations.
    webhook_configuration_name: str = "kueue-jobframework-jobflow"
    install_crds: bool = True
    register_webhooks: bool = True
    #: The namespace of the dry-run JobFlow that proves the webhook path (None: no probe).
    probe_namespace: str | None = "default"
    health_probe_bind_address: str | None = None
    metrics_bind_address: str | None = None
    #: Seconds to wait for CRDs, the cache and the webhook probe.
    ready_timeout: float = 120.0
    #: Keep the Workloads' ``PodsReady`` condition, as Kueue's own integrations do when its
    #: Configuration has ``waitForPodsReady`` (on by default in Kueue v0.19).
    wait_for_pods_ready: bool = True


def _webhook_specs(paths: Sequence[str]) -> tuple[list[WebhookSpec], list[WebhookSpec]]:
    """(mutating, validating) specs for the paths :func:`setup` registered."""
    resources = {JOBFLOW_GVK.kind.lower(): "jobflows", JOBTEMPLATE_GVK.kind.lower(): "jobtemplates"}
    mutating: list[WebhookSpec] = []
    validating: list[WebhookSpec] = []
    for path in paths:
        verb, _, rest = path.lstrip("/").partition("-")
        kind = rest.rsplit("-", 1)[-1]
        resource = resources[kind]
        # As Kueue's markers: defaulting on create only (on update it would suspend an
        # admitted JobFlow again), validation on create and update.
        operations: tuple[Literal["CREATE", "UPDATE"], ...] = (
            ("CREATE",) if verb == "mutate" else ("CREATE", "UPDATE"))
        spec = WebhookSpec(
            name=f"{verb[0]}{kind}.{JOBFLOW_GVK.group}",
            path=path,
            rules=[rule(JOBFLOW_GVK.group, JOBFLOW_GVK.version, resource, operations)],
            timeout_seconds=10,
        )
        (mutating if verb == "mutate" else validating).append(spec)
    return mutating, validating


def _probe_jobflow(namespace: str) -> Object:
    """A minimal queued JobFlow; the mutating webhook must suspend it."""
    return {
        "apiVersion": JOBFLOW_GVK.api_version, "kind": JOBFLOW_GVK.kind,
        "metadata": {"name": "kueue-jobframework-webhook-probe", "namespace": namespace,
                     "labels": {QUEUE_LABEL: "probe"}},
        "spec": {"flows": [{"name": "probe", "jobTemplate": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "probe"}]}}}}]},
    }


async def _eventually(what: str, probe: Any, limit: float, interval: float = 0.25) -> Any:
    """Poll the coroutine function ``probe`` until it returns a truthy value."""
    deadline = time.monotonic() + limit
    last: BaseException | None = None
    while True:
        try:
            value = await probe()
            if value:
                return value
        except Exception as err:  # not ready yet: keep the last error for the message
            last = err
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {limit:.0f}s waiting for {what}"
                               + (f": {last}" if last else ""))
        await asyncio.sleep(interval)


class ExternalFrameworkManager:
    """Runs the JobFlow integration against ``client``'s cluster (see the module docstring).

    :meth:`start` returns once everything serves; :meth:`stop` undoes what start did
    (webhook configurations first). Use it as an async context manager.
    """

    def __init__(self, client: Client, options: ManagerOptions | None = None) -> None:
        self.client = client
        self.options = options or ManagerOptions()
        self.manager: Manager | None = None
        self.webhook_server: WebhookServer | None = None
        self.wiring: JobFlowSetup | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._task: asyncio.Task[None] | None = None
        self._registered: list[GVK] = []

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Install the CRDs, serve and register the webhooks, start the controllers."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        opts = self.options
        if opts.install_crds:
            await self.install_crds()
        cert_dir = opts.cert_dir
        if cert_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kueue-jf-webhook-")
            cert_dir = Path(self._tmp.name)
        hosts = ("127.0.0.1", "localhost") if opts.webhook_host in ("127.0.0.1", "localhost") \
            else (opts.webhook_host, "127.0.0.1", "localhost")
        certs = write_serving_certs(cert_dir, hosts)
        server = WebhookServer(host=opts.webhook_host, port=opts.webhook_port, cert_dir=cert_dir,
                               shutdown_timeout=5.0)
        self.webhook_server = server

        im = IntegrationManager()
        register(im)
        mgr = Manager(self.client, health_probe_bind_address=opts.health_probe_bind_address,
                      metrics_bind_address=opts.metrics_bind_address,
                      graceful_shutdown_timeout=10.0, cache_sync_timeout=opts.ready_timeout)
        self.manager = mgr
        self.wiring = await setup(mgr, webhook_server=server,
                                  kueue=ReconcilerOptions(
                                      integration_manager=im,
                                      wait_for_pods_ready=opts.wait_for_pods_ready))
        mgr.add_readyz_check("webhook", server.started_checker())
        await server.listen()
        log.info("webhook server listening at %s", server.url())
        self._task = asyncio.create_task(mgr.start(), name="jobflow-manager")
        elected = asyncio.ensure_future(mgr.elected())
        done, _ = await asyncio.wait({elected, self._task}, timeout=opts.ready_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            elected.cancel()
            await self._task  # raises the manager's error
            raise RuntimeError("the manager stopped while starting")
        if not done:
            elected.cancel()
            raise TimeoutError("timed out waiting for the manager's cache to sync")
        if opts.register_webhooks:
            await self.register_webhooks(server.url(), certs.ca_bundle)
        log.info("JobFlow integration running (webhooks at %s)", server.url())

    async def wait(self) -> None:
        """Return when the manager stops (raising its error, if it failed)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        """Delete our webhook configurations, stop the controllers and the server."""
        for gvk in reversed(self._registered):
            try:
                await self.client.delete(gvk, self.options.webhook_configuration_name)
            except NotFound:
                pass
            except Exception as err:  # keep shutting down; say what was left behind
                log.warning("could not delete %s %s: %s", gvk.kind,
                            self.options.webhook_configuration_name, err)
        self._registered.clear()
        if self.manager is not None and self._task is not None:
            await self.manager.stop()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._task
        self._task = None
        if self.webhook_server is not None:
            await self.webhook_server.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    async def __aenter__(self) -> ExternalFrameworkManager:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    # -- steps -----------------------------------------------------------------------

    async def install_crds(self) -> None:
        """Apply the JobFlow and JobTemplate CRDs and wait until both are Established."""
        crds = load_crds()
        for crd in crds:
            await self.client.apply(crd, field_manager=FIELD_MANAGER, force=True)

        async def established() -> bool:
            for crd in crds:
                obj = await self.client.get(CRD_GVK, crd["metadata"]["name"])
                conds = (obj.get("status") or {}).get("conditions") or []
                if not any(c.get("type") == "Established" and c.get("status") == "True"
                           for c in conds):
                    return False
            return True

        await _eventually("the JobFlow CRDs to be Established", established,
                          self.options.ready_timeout)
        log.info("CRDs installed: %s", ", ".join(c["metadata"]["name"] for c in crds))

    async def register_webhooks(self, url: str, ca_bundle: bytes) -> None:
        """Point webhook configurations at ``url`` and prove the path works (dry run)."""
        assert self.wiring is not None
        mutating, validating = _webhook_specs(self.wiring.webhook_paths)
        name = self.options.webhook_configuration_name
        for gvk, specs, build in ((MUTATING_GVK, mutating, mutating_webhook_configuration),
                                  (VALIDATING_GVK, validating,
                                   validating_webhook_configuration)):
            if not specs:
                continue
            config = build(name, specs, ca_bundle=ca_bundle, url=url)
            self._registered.append(gvk)
            await self.client.apply(config, field_manager=FIELD_MANAGER, force=True)
        ns = self.options.probe_namespace
        if ns is None or not mutating:
            return
        probe = _probe_jobflow(ns)

        async def suspended() -> bool:
            out = await self.client.create(probe, dry_run=True)
            return bool((out.get("spec") or {}).get("suspend"))

        await _eventually("our JobFlow webhook to suspend a queued JobFlow (dry run)",
                          suspended, self.options.ready_timeout)
        log.info("webhook configurations %s registered and answering", name)


async def run(client: Client, options: ManagerOptions | None = None,
              stop: asyncio.Event | None = None) -> None:
    """Run the manager until ``stop`` is set (or the manager fails), then clean up."""
    async with ExternalFrameworkManager(client, options) as mgr:
        waiter = asyncio.ensure_future(stop.wait() if stop is not None else asyncio.Event().wait())
        runner = asyncio.ensure_future(mgr.wait())
        try:
            done, _ = await asyncio.wait({waiter, runner}, return_when=asyncio.FIRST_COMPLETED)
            if runner in done:
                runner.result()
        finally:
            waiter.cancel()
            runner.cancel()
