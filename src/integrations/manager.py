"""Our external-framework manager: installed integrations beside a real Kueue manager.

Kueue lists the kinds (``JobFlow.v1alpha1.api.practice.com``,
``AppWrapper.v1beta2.workload.codeflare.dev``, a user's ``SparkApp.v1.example.com``) in
``integrations.externalFrameworks`` and leaves them to us. The integrations are plugins
(:mod:`jobframework.plugins`): this project's reference integrations and any a user's
distribution declares are run alike. This process (or coroutine, to embed it) does the
rest, for each integration it runs (those the Configuration lists, else all of
:data:`~integrations.catalog.DEFAULT_INTEGRATIONS`, unless told otherwise):

1. installs the integration's CRDs and waits until they are ``Established``;
2. serves its webhooks (Kueue's base webhook for the kind, plus the kind's own rules)
   from one :class:`~jobframework.webhook.WebhookServer` on loopback with a locally
   generated CA, and registers Mutating/ValidatingWebhookConfigurations pointing at its
   URL; it then proves the path apiserver → webhook works with a dry-run probe object
   per integration that must come back suspended;
3. runs the integration's controllers and Kueue's generic reconciler for the kind in
   one :class:`~jobframework.runtime.manager.Manager`.

On shutdown it deletes the webhook configurations it created *before* it stops
serving, so the API server never calls a dead URL with ``failurePolicy: Fail``.

It reads the Kueue ``Configuration`` its Kueue runs with (:mod:`jobframework.config`):
its feature gates, ``waitForPodsReady``, ``manageJobsWithoutQueueName``,
``managedJobsNamespaceSelector``, ``labelKeysToCopy`` and ``objectRetentionPolicies``
reach the generic reconciler and the webhooks, and its ``integrations.externalFrameworks``
picks the integrations to run. Without one (:attr:`ManagerOptions.kueue_config`
None) it uses the configuration Kueue v0.19.2 runs with when given none. The AppWrapper
integration also follows the AppWrapper operator's own configuration
(:attr:`ManagerOptions.appwrapper_config`, upstream's defaults when None).

It needs an admin-like identity (it writes CRDs and webhook configurations). Run it::

    python -m integrations run --kubeconfig ~/.kube/config [--integrations jobflow,daemonjob]
    python -m integrations run --kueue-config-from-cluster   # Kueue's ConfigMap

or embed it::

    async with ExternalFrameworkManager(client) as mgr:
        ...  # our kinds are now admitted through Kueue
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import tempfile
import time
from collections.abc import Awaitable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from integrations.catalog import DEFAULT_INTEGRATIONS
from jobframework.admittedstate import PrivilegedUsers, own_username
from jobframework.config import (
    MANAGER_CACHE_TRANSFORM,
    Configuration,
    ConfigurationError,
    default_configuration,
    group_kind_concurrency_from,
    reconciler_options_from,
)
from jobframework.constants import DEFAULT_KUEUE_VERSION, KueueVersion
from jobframework.integrations import IntegrationManager
from jobframework.plugins import (
    Integration,
    Wiring,
    by_framework_name,
    installed_integrations,
    load_integrations,
)
from jobframework.queuelookup import CachedQueueLookup
from jobframework.runtime.client import Client
from jobframework.runtime.client.discovery import NoKindMatchError
from jobframework.runtime.errors import ApiError, NotFound
from jobframework.runtime.healthz import ping
from jobframework.runtime.leaderelection import LeaderElectionConfig
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object
from jobframework.webhook import (
    CertRotator,
    WebhookResource,
    WebhookServer,
    WebhookSpec,
    mutating_webhook_configuration,
    rule,
    validating_webhook_configuration,
    write_serving_certs,
)
from jobframework.webhook.certrotator import (
    DEFAULT_BUNDLE_PROPAGATION_DELAY,
    DEFAULT_CA_VALIDITY,
    DEFAULT_CERT_VALIDITY,
    DEFAULT_CHECK_INTERVAL,
    DEFAULT_LOOKAHEAD,
)

if TYPE_CHECKING:
    from integrations.appwrapper.config import AppWrapperConfig

log = logging.getLogger("integrations.manager")

CRD_GVK: Final = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
MUTATING_GVK: Final = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING_GVK: Final = GVK("admissionregistration.k8s.io", "v1",
                            "ValidatingWebhookConfiguration")
#: Field manager of the objects this manager applies.
FIELD_MANAGER: Final = "kueue-jobframework"
#: Defaults of the in-cluster deployment (``config/default``).
DEFAULT_MANAGER_NAMESPACE: Final = "kueue-jobframework-system"
DEFAULT_WEBHOOK_SERVICE: Final = "kueue-jobframework-webhook-service"
DEFAULT_CERT_SECRET: Final = "kueue-jobframework-webhook-server-cert"
#: The Lease of ``--leader-elect``.
DEFAULT_LEADER_ELECTION_ID: Final = "kueue-jobframework.api.practice.com"
CertManagement = Literal["self-signed", "files", "internal"]
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
#: The framework name of the AppWrapper integration, which takes
#: :attr:`ManagerOptions.appwrapper_config` (named here so that the manager imports the
#: integration only through its plugin).
APPWRAPPER_FRAMEWORK: Final = "AppWrapper.v1beta2.workload.codeflare.dev"


@attrs.frozen(kw_only=True)
class CertRotation:
    """Timings of the ``internal`` certificate management (Kueue's defaults; shorten
    them only to watch a rotation happen)."""

    ca_validity: dt.timedelta = DEFAULT_CA_VALIDITY
    cert_validity: dt.timedelta = DEFAULT_CERT_VALIDITY
    #: Renew a certificate once it expires within this window.
    lookahead: dt.timedelta = DEFAULT_LOOKAHEAD
    check_interval: dt.timedelta = DEFAULT_CHECK_INTERVAL
    #: How long a new CA is trusted next to the old one before it signs the serving cert.
    bundle_propagation_delay: dt.timedelta = DEFAULT_BUNDLE_PROPAGATION_DELAY


@attrs.frozen(kw_only=True)
class ManagerOptions:
    """How :class:`ExternalFrameworkManager` runs."""

    #: Where the webhook server listens; the API server must reach it there.
    webhook_host: str = "127.0.0.1"
    #: 0 picks a free port.
    webhook_port: int = 0
    #: Where the serving certificate is written (a temporary directory when None).
    cert_dir: Path | None = None
    #: A CA bundle: the webhook server then requires client certificates signed by it
    #: (the API server's, from its AdmissionConfiguration). None: no client auth.
    webhook_client_ca: Path | None = None
    #: The integrations to run, by installed name (:mod:`jobframework.plugins`).
    #: None: those :attr:`kueue_config` lists in ``integrations.externalFrameworks``, or
    #: all of :data:`~integrations.catalog.DEFAULT_INTEGRATIONS` when it lists none.
    integrations: tuple[str, ...] | None = None
    #: Name of both webhook configurations.
    webhook_configuration_name: str = "kueue-jobframework"
    install_crds: bool = True
    register_webhooks: bool = True
    #: The namespace of the dry-run objects that prove the webhook path (None: no probe).
    probe_namespace: str | None = "default"
    health_probe_bind_address: str | None = None
    metrics_bind_address: str | None = None
    #: Seconds to wait for CRDs, the cache and the webhook probe.
    ready_timeout: float = 120.0
    #: Keep the Workloads' ``PodsReady`` condition, as Kueue's own integrations do when its
    #: Configuration has ``waitForPodsReady`` (on by default in Kueue v0.19). None: as
    #: :attr:`kueue_config` says; a bool overrides it.
    wait_for_pods_ready: bool | None = None
    #: The Kueue Configuration (loaded by :mod:`jobframework.config`) our reconcilers and
    #: webhooks follow. None: Kueue v0.19.2's defaults (what Kueue runs with no config).
    kueue_config: Configuration | None = None
    #: The Kueue release we run beside (our version profile, not part of Kueue's document).
    kueue_version: KueueVersion = DEFAULT_KUEUE_VERSION
    #: Lease-based leader election for several replicas: only the Lease holder runs the
    #: controllers, every replica serves the webhooks. None: this process leads alone.
    leader_election: LeaderElectionConfig | None = None
    #: The URL the API server calls the webhooks at when it is not this process's own
    #: (a load balancer in front of several replicas). The configurations registered
    #: point at it and are left in place on stop: the other replicas still serve them.
    webhook_url: str | None = None
    #: Where the serving certificate comes from: ``self-signed`` (a CA of this process's
    #: own, for one process out of the cluster), ``files`` (``tls.crt``/``tls.key``/
    #: ``ca.crt`` in :attr:`cert_dir`, kept current by cert-manager or the like; followed
    #: when rotated) or ``internal`` (:class:`~jobframework.webhook.CertRotator`: a CA
    #: kept in a Secret that every replica shares, as Kueue's internal cert management).
    cert_management: CertManagement = "self-signed"
    #: The manager's own namespace: its Lease and its certificate Secret.
    namespace: str = DEFAULT_MANAGER_NAMESPACE
    #: The Service in front of the webhooks (the serving certificate's DNS names).
    webhook_service_name: str = DEFAULT_WEBHOOK_SERVICE
    #: The Secret the ``internal`` certificate management keeps its CA and cert in.
    cert_secret_name: str = DEFAULT_CERT_SECRET
    #: Extra DNS names of the serving certificate (``internal``), e.g. ``localhost``.
    cert_extra_dns_names: tuple[str, ...] = ()
    #: Timings of the ``internal`` certificate management.
    cert_rotation: CertRotation = CertRotation()
    #: Usernames, besides Kueue's controller manager, cluster admins (``system:masters``)
    #: and this manager's own identity, allowed to change the admission stored on our
    #: jobs (``jobframework.admittedstate``): e.g. another replica's identity when it
    #: cannot be asked, or a Kueue installed elsewhere than ``kueue-system``.
    privileged_users: tuple[str, ...] = ()
    #: Groups allowed the same.
    privileged_groups: tuple[str, ...] = ()
    #: Ask the API server who this manager is (a SelfSubjectReview) and allow that
    #: username too: its own writes of the admission must pass its own webhooks.
    privileged_self: bool = True
    #: The AppWrapper operator's configuration (upstream's ``appwrapper-operator-config``,
    #: read by :func:`integrations.appwrapper.config.load_operator_config`), given to the
    #: AppWrapper integration's ``setup``. None: upstream's defaults.
    appwrapper_config: AppWrapperConfig | None = None


def select_integrations(config: Configuration, requested: Sequence[str] | None = None
                        ) -> tuple[str, ...]:
    """The integrations to run: ``requested`` when given, else the installed ones listed in
    ``integrations.externalFrameworks``, else all of :data:`DEFAULT_INTEGRATIONS`.

    Raises :class:`~jobframework.config.ConfigurationError` when the configuration lists
    external frameworks but none of ours (the manager would have nothing to do).
    """
    if requested is not None:
        return tuple(requested)
    external = config.external_frameworks()
    if not external:
        return DEFAULT_INTEGRATIONS
    ours = tuple(by_framework_name(external))
    if not ours:
        raise ConfigurationError([
            "integrations.externalFrameworks: lists none of the installed integrations "
            f"({', '.join(installed_integrations())}); pass --integrations to run some "
            "anyway"])
    return ours


def webhook_specs(paths: Sequence[str], resources: Sequence[WebhookResource]
                   ) -> tuple[list[WebhookSpec], list[WebhookSpec]]:
    """(mutating, validating) specs for controller-runtime style webhook ``paths``
    (``/mutate-<group with dashes>-<version>-<kind>``) of the kinds in ``resources``."""
    by_path = {r.path_suffix: r for r in resources}
    mutating: list[WebhookSpec] = []
    validating: list[WebhookSpec] = []
    for path in paths:
        verb, _, rest = path.lstrip("/").partition("-")
        try:
            res = by_path[rest]
        except KeyError:
            raise ValueError(f"webhook path {path!r} serves no kind of the integrations "
                             "run") from None
        # As Kueue's markers: defaulting on create only (on update it would suspend an
        # admitted job again), validation on create and update.
        operations: tuple[Literal["CREATE", "UPDATE"], ...] = (
            ("CREATE",) if verb == "mutate" else ("CREATE", "UPDATE"))
        # The API server wants a name of at least three DNS labels ("mjob.batch" is not).
        group = res.group if res.group.count(".") >= 1 else f"{res.group}.kueue-jobframework.io"
        spec = WebhookSpec(
            name=f"{verb[0]}{res.kind.lower()}.{group}",
            path=path,
            rules=[rule(res.group, res.version, res.plural, operations)],
            namespace_selector=res.namespace_selector,
            timeout_seconds=10,
        )
        (mutating if verb == "mutate" else validating).append(spec)
    return mutating, validating


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


#: Status codes of a start-up request worth repeating: a conflict, throttling, a server
#: error or an API server that is not ready (restarting, behind a lossy connection).
_TRANSIENT_CODES: Final = frozenset({409, 429, 500, 502, 503, 504})


def _transient(err: BaseException) -> bool:
    if isinstance(err, ApiError):
        return err.code in _TRANSIENT_CODES
    # Transport errors: a cut connection, a refused one, a read that timed out.
    return isinstance(err, OSError | TimeoutError) or type(err).__module__.startswith("aiohttp")


async def _with_retries(what: str, call: Any, limit: float, *, delay: float = 1.0) -> Any:
    """Await ``call()`` again while it fails with a transient error, for up to ``limit``
    seconds (``delay`` apart, doubling up to 8 s). A Deployment would restart a manager
    that gave up at the first dropped request; this one rides it out, as its informers do."""
    deadline = time.monotonic() + limit
    while True:
        try:
            return await call()
        except Exception as err:
            if not _transient(err) or time.monotonic() + delay > deadline:
                raise
            log.warning("%s failed (%s); retrying in %.0fs", what, err, delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 8.0)


class ExternalFrameworkManager:
    """Runs the installed integrations chosen against ``client``'s cluster (see the module
    docstring).

    :meth:`start` returns once everything serves; :meth:`stop` undoes what start did
    (webhook configurations first). Use it as an async context manager.
    """

    def __init__(self, client: Client, options: ManagerOptions | None = None) -> None:
        self.client = client
        self.options = options or ManagerOptions()
        self.manager: Manager | None = None
        self.webhook_server: WebhookServer | None = None
        #: The Kueue Configuration followed (given, or v0.19.2's defaults).
        self.kueue_config: Configuration = self.options.kueue_config or default_configuration()
        #: The integrations run, and what each one's ``setup`` registered.
        self.integrations: list[Integration] = load_integrations(
            select_integrations(self.kueue_config, self.options.integrations))
        if (self.options.appwrapper_config is not None
                and not any(i.framework_name == APPWRAPPER_FRAMEWORK
                            for i in self.integrations)):
            log.warning("an AppWrapper operator configuration was given, but the AppWrapper "
                        "integration is not run: it is not used")
        if self.options.kueue_config is not None:
            listed = set(self.kueue_config.external_frameworks())
            for integration in self.integrations:
                if integration.framework_name not in listed:
                    log.warning("running %s, but Kueue's Configuration does not list %s in "
                                "integrations.externalFrameworks", integration.name,
                                integration.framework_name)
        self.wiring: dict[str, Wiring] = {}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._task: asyncio.Task[None] | None = None
        self._registered: list[GVK] = []
        #: The ``internal`` certificate management, once started.
        self.cert_rotator: CertRotator | None = None

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
            if opts.cert_management == "files":
                raise ValueError("cert_management 'files' needs cert_dir (where the "
                                 "certificate files are mounted)")
            self._tmp = tempfile.TemporaryDirectory(prefix="kueue-jf-webhook-")
            cert_dir = Path(self._tmp.name)
        ca_bundle: bytes | None = None
        if opts.cert_management == "self-signed":
            hosts = (("127.0.0.1", "localhost")
                     if opts.webhook_host in ("127.0.0.1", "localhost", "0.0.0.0")
                     else (opts.webhook_host, "127.0.0.1", "localhost"))
            ca_bundle = write_serving_certs(cert_dir, hosts).ca_bundle
        im = IntegrationManager()
        for integration in self.integrations:
            integration.register(im)
        # Workers per controller as setup_controllers(configuration=...) gives them.
        concurrency = group_kind_concurrency_from(
            self.kueue_config, [i.gvk for i in self.integrations])
        mgr = Manager(self.client, health_probe_bind_address=opts.health_probe_bind_address,
                      metrics_bind_address=opts.metrics_bind_address,
                      graceful_shutdown_timeout=10.0, cache_sync_timeout=opts.ready_timeout,
                      group_kind_concurrency=concurrency,
                      leader_election=opts.leader_election,
                      # No reconciler reads managedFields (a third of each object);
                      # equal keys and short values are shared between cached objects.
                      cache_options={"transform": MANAGER_CACHE_TRANSFORM})
        self.manager = mgr
        # Its controller_runtime_webhook_* metrics are served with the manager's.
        server = WebhookServer(host=opts.webhook_host, port=opts.webhook_port, cert_dir=cert_dir,
                               client_ca_file=opts.webhook_client_ca,
                               shutdown_timeout=5.0, metrics_registry=mgr.get_metrics().registry)
        self.webhook_server = server
        ours = {i.framework_name for i in self.integrations}
        for kind_arg in self.kueue_config.external_frameworks():
            if kind_arg not in ours:
                # Kueue treats them as Kueue-managed owners (WithEnabledExternalFrameworks).
                im.register_external_job_type(kind_arg)
        kueue = reconciler_options_from(self.kueue_config, kueue_version=opts.kueue_version,
                                        integration_manager=im)
        if opts.wait_for_pods_ready is not None:
            kueue = attrs.evolve(kueue, wait_for_pods_ready=opts.wait_for_pods_ready)
        kueue = attrs.evolve(kueue, privileged_users=await self._privileged_users(
            kueue.privileged_users))
        if kueue.queues is None:
            # The webhooks read the queues from here: the namespace's `default` LocalQueue
            # (DefaultLocalQueueExist) and whether a job's queue requires MultiKueue's
            # admission check (ApplyDefaultForManagedBy).
            try:
                kueue = attrs.evolve(kueue, queues=await _with_retries(
                    "reading the queue kinds", lambda: CachedQueueLookup.shared(
                        mgr.get_cache()), opts.ready_timeout))
            except NoKindMatchError as err:
                log.warning("Kueue's queue kinds are not served (%s): jobs get no default "
                            "LocalQueue and are not handed to MultiKueue", err)
        for integration in self.integrations:
            extra: dict[str, Any] = {}
            if (integration.framework_name == APPWRAPPER_FRAMEWORK
                    and opts.appwrapper_config is not None):
                extra["config"] = opts.appwrapper_config
            self.wiring[integration.name] = await integration.setup(
                mgr, webhook_server=server, kueue=kueue, **extra)
        if opts.cert_management == "internal":
            rotator = CertRotator(
                self.client, secret_namespace=opts.namespace, secret_name=opts.cert_secret_name,
                service_name=opts.webhook_service_name, service_namespace=opts.namespace,
                extra_dns_names=opts.cert_extra_dns_names, cert_dir=cert_dir,
                mutating_webhooks=(opts.webhook_configuration_name,),
                validating_webhooks=(opts.webhook_configuration_name,),
                ca_validity=opts.cert_rotation.ca_validity,
                cert_validity=opts.cert_rotation.cert_validity,
                lookahead=opts.cert_rotation.lookahead,
                check_interval=opts.cert_rotation.check_interval,
                bundle_propagation_delay=opts.cert_rotation.bundle_propagation_delay)
            self.cert_rotator = rotator
            # Every replica runs it (it needs no leadership): the Secret is shared.
            mgr.add(rotator)
            mgr.add_readyz_check("certs", rotator.checker())
        mgr.add_readyz_check("webhook", server.started_checker())
        # Liveness: answered by the event loop itself, so a wedged loop fails it.
        mgr.add_healthz_check("ping", ping)
        self._task = asyncio.create_task(mgr.start(), name="integrations-manager")
        if opts.cert_management == "internal":
            await self._until_ready("the serving certificate", rotator.wait_ready())
            certs = rotator.certificates
            ca_bundle = certs.ca_bundle if certs is not None else None
        elif opts.cert_management == "files":
            ca_bundle = (cert_dir / "ca.crt").read_bytes() if (cert_dir / "ca.crt").exists() \
                else None
        await server.listen()
        log.info("webhook server listening at %s", server.url())
        if self.cert_rotator is not None:
            self.cert_rotator.add_listener(server.cert_watcher.read_certificate)
        # With leader election a replica may wait long for the Lease: it serves webhooks
        # meanwhile, and counts as started once its cache has synced.
        await self._until_ready(
            "the manager's cache to sync",
            mgr.get_cache().wait_for_cache_sync() if opts.leader_election else mgr.elected())
        if opts.register_webhooks:
            if ca_bundle is None:
                raise ValueError("no CA bundle to register the webhooks with (cert_dir has "
                                 "no ca.crt)")
            await self.register_webhooks(opts.webhook_url or server.url(), ca_bundle)
        log.info("integrations running: %s (webhooks at %s)",
                 ", ".join(i.name for i in self.integrations),
                 opts.webhook_url or server.url())

    async def _privileged_users(self, base: PrivilegedUsers) -> PrivilegedUsers:
        """``base`` plus the configured identities and this manager's own."""
        opts = self.options
        users = list(opts.privileged_users)
        if opts.privileged_self:
            me = await own_username(self.client)
            if me is not None:
                users.append(me)
        privileged = base.including(users, opts.privileged_groups)
        log.info("the admission stored on jobs may be changed by users %s and groups %s",
                 ", ".join(sorted(privileged.usernames)) or "-",
                 ", ".join(sorted(privileged.groups)) or "-")
        return privileged

    async def _until_ready(self, what: str, waiter: Awaitable[Any]) -> None:
        """Wait for ``waiter``, failing when the manager stops or time runs out."""
        assert self._task is not None
        pending = asyncio.ensure_future(waiter)
        done, _ = await asyncio.wait({pending, self._task}, timeout=self.options.ready_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if pending not in done:
            pending.cancel()
            if self._task in done:
                await self._task  # raises the manager's error
                raise RuntimeError("the manager stopped while starting")
            raise TimeoutError(f"timed out waiting for {what}")
        pending.result()

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
        """Apply the integrations' CRDs and wait until all are Established."""
        crds = self.crds()
        for crd in crds:
            await _with_retries(
                f"applying the CRD {crd['metadata']['name']}",
                lambda crd=crd: self.client.apply(crd, field_manager=FIELD_MANAGER, force=True),
                self.options.ready_timeout)

        async def established() -> bool:
            for crd in crds:
                obj = await self.client.get(CRD_GVK, crd["metadata"]["name"])
                conds = (obj.get("status") or {}).get("conditions") or []
                if not any(c.get("type") == "Established" and c.get("status") == "True"
                           for c in conds):
                    return False
            return True

        await _eventually("our CRDs to be Established", established,
                          self.options.ready_timeout)
        log.info("CRDs installed: %s", ", ".join(c["metadata"]["name"] for c in crds))

    async def register_webhooks(self, url: str, ca_bundle: bytes) -> None:
        """Point webhook configurations at ``url`` and prove the path works (dry run)."""
        paths = [p for wiring in self.wiring.values() for p in wiring.webhook_paths]
        mutating, validating = webhook_specs(
            paths, [r for i in self.integrations for r in i.webhook_resources()])
        name = self.options.webhook_configuration_name
        for gvk, specs, build in ((MUTATING_GVK, mutating, mutating_webhook_configuration),
                                  (VALIDATING_GVK, validating,
                                   validating_webhook_configuration)):
            if not specs:
                continue
            config = build(name, specs, ca_bundle=ca_bundle, url=url)
            if self.options.webhook_url is None:
                # Ours alone: deleted on stop. A shared URL's stay for the other replicas.
                self._registered.append(gvk)
            await _with_retries(
                f"applying {gvk.kind} {name}",
                lambda config=config: self.client.apply(config, field_manager=FIELD_MANAGER,
                                                        force=True),
                self.options.ready_timeout)
        ns = self.options.probe_namespace
        if ns is None or not mutating:
            return
        for integration in self.integrations:
            probe = integration.probe_object(ns)

            async def suspended(probe: Object = probe) -> bool:
                out = await self.client.create(probe, dry_run=True)
                return bool((out.get("spec") or {}).get("suspend"))

            await _eventually(f"our {integration.gvk.kind} webhook to suspend a queued "
                              f"{integration.gvk.kind} (dry run)", suspended,
                              self.options.ready_timeout)
        log.info("webhook configurations %s registered and answering", name)

    def crds(self) -> list[Object]:
        """The CRDs of the integrations this manager runs."""
        return [crd for integration in self.integrations for crd in integration.load_crds()]


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
