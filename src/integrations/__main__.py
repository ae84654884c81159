"""``python -m integrations run --kubeconfig PATH``: our external-framework manager.

Runs the reference integrations (their CRDs, webhooks on loopback, controllers and
Kueue's generic reconciler) against a cluster whose Kueue lists them in
``integrations.externalFrameworks``; see :mod:`integrations.manager`.

It follows the Kueue Configuration given by ``--kueue-config PATH`` (the file Kueue's
``--config`` reads) or ``--kueue-config-from-cluster`` (Kueue's ConfigMap); with neither,
the configuration Kueue v0.19.2 runs with when given none (all defaults). The AppWrapper
integration follows ``--appwrapper-config PATH``: the document of the AppWrapper
operator's ``appwrapper-operator-config`` ConfigMap (upstream's defaults without it).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from integrations._logging import configure_logging
from integrations.catalog import DEFAULT_INTEGRATIONS, parse_integrations
from integrations.deploy.render import SERVICE_ACCOUNT
from integrations.manager import (
    DEFAULT_CERT_SECRET,
    DEFAULT_LEADER_ELECTION_ID,
    DEFAULT_MANAGER_NAMESPACE,
    DEFAULT_WEBHOOK_SERVICE,
    CertManagement,
    ManagerOptions,
    run,
)
from jobframework.admittedstate import service_account_username
from jobframework.config import (
    CONFIGMAP_KEY,
    DEFAULT_CONFIGMAP_NAME,
    DEFAULT_NAMESPACE,
    Configuration,
    ConfigurationError,
    load_configuration,
    load_configuration_from_configmap,
)
from jobframework.constants import DEFAULT_KUEUE_VERSION, KueueVersion
from jobframework.plugins import IntegrationLoadError
from jobframework.runtime import runner
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.leaderelection import LeaderElectionConfig
from jobframework.webhook.server import DEFAULT_CERT_DIR

if TYPE_CHECKING:
    from integrations.appwrapper.config import AppWrapperConfig

#: The ServiceAccount of Kueue's controller manager (in its namespace).
KUEUE_SERVICE_ACCOUNT = "kueue-controller-manager"
#: ``--cert-management``: ``cert-manager`` is ``files`` (the mounted Secret's files).
CERT_MANAGEMENT_CHOICES = ("self-signed", "internal", "cert-manager", "files")


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m integrations``."""
    parser = argparse.ArgumentParser(prog="python -m integrations",
                                     description="Reference integrations for Kueue.")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser(
        "run", help="run the external-framework manager",
        description="Run the reference integrations beside a Kueue manager, following "
                    "the Kueue Configuration (config.kueue.x-k8s.io/v1beta2) that Kueue "
                    "runs with: its featureGates, waitForPodsReady, "
                    "manageJobsWithoutQueueName, managedJobsNamespaceSelector, "
                    "integrations.labelKeysToCopy and "
                    "objectRetentionPolicies.workloads.afterDeactivatedByKueue apply, and "
                    "integrations.externalFrameworks picks the integrations to run. With "
                    "neither --kueue-config nor --kueue-config-from-cluster, Kueue "
                    "v0.19.2's defaults apply (what Kueue runs with when given no "
                    "configuration).")
    r.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, ~/.kube/config)")
    r.add_argument("--context", help="kubeconfig context (default: the current one)")
    r.add_argument("--integrations", type=parse_integrations, default=None,
                   help="comma-separated integrations to run, by the names installed "
                        "distributions declare (entry-point group "
                        "kueue_jobframework.integrations; ours: appwrapper, batchjob, "
                        "daemonjob, jobflow) (default: those the Kueue Configuration "
                        "lists in integrations.externalFrameworks, else "
                        f"{','.join(DEFAULT_INTEGRATIONS)})")
    source = r.add_mutually_exclusive_group()
    source.add_argument("--kueue-config", type=Path, metavar="PATH",
                        help="Kueue's Configuration file (what Kueue's --config reads)")
    source.add_argument("--kueue-config-from-cluster", action="store_true",
                        help=f"read Kueue's Configuration from its ConfigMap (key "
                             f"{CONFIGMAP_KEY}; see --kueue-namespace, --kueue-configmap)")
    r.add_argument("--kueue-namespace", default=DEFAULT_NAMESPACE,
                   help="Kueue's namespace: where its ConfigMap is, and the default of the "
                        f"Configuration's namespace (default: {DEFAULT_NAMESPACE})")
    r.add_argument("--kueue-configmap", default=DEFAULT_CONFIGMAP_NAME,
                   help=f"name of Kueue's ConfigMap (default: {DEFAULT_CONFIGMAP_NAME})")
    r.add_argument("--kueue-version", type=KueueVersion, choices=list(KueueVersion),
                   default=DEFAULT_KUEUE_VERSION,
                   help="the Kueue release we run beside: its feature-gate defaults and "
                        "behaviour apply where the Configuration says nothing (default: "
                        f"{DEFAULT_KUEUE_VERSION.value})")
    r.add_argument("--appwrapper-config", type=Path, metavar="PATH", default=None,
                   help="the AppWrapper operator's configuration: the YAML document of its "
                        "appwrapper-operator-config ConfigMap (key config.yaml, e.g. that "
                        "ConfigMap mounted as a volume); its appwrapper section applies "
                        "(default: upstream v1.2.2's defaults)")
    r.add_argument("--webhook-host", default=None,
                   help="address the webhook server listens on (the API server must reach "
                        "it; default: 127.0.0.1, or 0.0.0.0 with --in-cluster)")
    r.add_argument("--webhook-port", type=int, default=None,
                   help="0 picks a free port (default: 0, or 9443 with --in-cluster)")
    r.add_argument("--cert-dir", type=Path, help="serving certificate directory (default: temp)")
    r.add_argument("--webhook-client-ca", type=Path, default=None, metavar="PATH",
                   help="require webhook clients to present a certificate signed by this CA "
                        "bundle (the API server's, set in its AdmissionConfiguration; "
                        "default: no client authentication)")
    r.add_argument("--privileged-user", action="append", default=[], metavar="NAME",
                   help="a username allowed, besides Kueue's controller manager (in "
                        "--kueue-namespace), cluster admins (system:masters) and this "
                        "manager's own identity, to change the admission Kueue stored on our "
                        "jobs (repeatable; see docs/deploy.md)")
    r.add_argument("--privileged-group", action="append", default=[], metavar="NAME",
                   help="a group allowed the same (repeatable)")
    r.add_argument("--health-probe-bind-address", help="host:port for /healthz and /readyz")
    r.add_argument("--metrics-bind-address", help="host:port for /metrics")
    r.add_argument("--no-wait-for-pods-ready", dest="wait_for_pods_ready",
                   action="store_const", const=False, default=None,
                   help="do not keep the Workloads' PodsReady condition, whatever the Kueue "
                        "Configuration says")
    r.add_argument("--log-level", default="INFO")
    r.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="json: one JSON object per line (time, level, logger, msg, and the "
                        "exception when there is one), for log collectors")
    dep = r.add_argument_group(
        "deployment", "in the cluster (config/default) or several replicas out of it")
    dep.add_argument("--in-cluster", action="store_true",
                     help="run as the in-cluster Deployment: the pod's service account, "
                          "webhooks on 0.0.0.0:9443 behind the webhook Service, CRDs and "
                          "webhook configurations left to the manifests, certificates from "
                          "--cert-management (default internal)")
    dep.add_argument("--namespace", default=None,
                     help="the manager's namespace: its Lease and certificate Secret "
                          f"(default: $POD_NAMESPACE, else {DEFAULT_MANAGER_NAMESPACE})")
    dep.add_argument("--leader-elect", action="store_true",
                     help="elect a leader through a Lease: only it runs the controllers; "
                          "every replica serves the webhooks")
    dep.add_argument("--leader-election-id", default=DEFAULT_LEADER_ELECTION_ID,
                     help="the Lease's name (default: %(default)s)")
    dep.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS",
                     help="how long a replica waits before taking an unrenewed Lease "
                          "(default: %(default)s)")
    dep.add_argument("--renew-deadline", type=float, default=10.0, metavar="SECONDS",
                     help="how long the leader retries renewing before it gives up "
                          "(default: %(default)s)")
    dep.add_argument("--retry-period", type=float, default=2.0, metavar="SECONDS",
                     help="the interval between election attempts (default: %(default)s)")
    dep.add_argument("--cert-management", choices=CERT_MANAGEMENT_CHOICES, default=None,
                     help="self-signed: a CA of this process's own (the out-of-cluster "
                          "default); internal: a CA kept in a Secret shared by the replicas, "
                          "rotated before expiry, its caBundle patched into the webhook "
                          "configurations (the in-cluster default); cert-manager (or files): "
                          "tls.crt/tls.key/ca.crt in --cert-dir, followed when rotated")
    dep.add_argument("--webhook-url", default=None,
                     help="register the webhooks at this URL instead of this process's own "
                          "(a load balancer in front of several replicas); the "
                          "configurations are then left in place on exit")
    dep.add_argument("--webhook-service-name", default=DEFAULT_WEBHOOK_SERVICE,
                     help="the webhook Service (the certificate's DNS names; default: "
                          "%(default)s)")
    dep.add_argument("--cert-secret-name", default=DEFAULT_CERT_SECRET,
                     help="the Secret of --cert-management internal (default: %(default)s)")
    dep.add_argument("--cert-dns-name", action="append", default=[], metavar="NAME",
                     help="an extra DNS name of the serving certificate (repeatable)")
    dep.add_argument("--webhook-configuration-name", default="kueue-jobframework",
                     help="the Mutating/ValidatingWebhookConfigurations' name (default: "
                          "%(default)s)")
    r.add_argument("--event-loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                   help="auto: uvloop when installed (pip install 'kueue-jobframework[speed]'"
                        "; about a third less CPU per job, most of it TLS), else asyncio's")
    return parser


async def _run(args: argparse.Namespace, stop: asyncio.Event, *,
               appwrapper_config: AppWrapperConfig | None = None) -> None:
    # A bad file fails before we connect anywhere.
    kueue_config = (load_configuration(args.kueue_config, namespace=args.kueue_namespace)
                    if args.kueue_config is not None else None)
    connect = (RestClient.in_cluster() if args.in_cluster and args.kubeconfig is None
               else RestClient.from_kubeconfig(args.kubeconfig, args.context))
    async with await connect as client:
        if args.kueue_config_from_cluster:
            kueue_config = await load_configuration_from_configmap(
                client, args.kueue_namespace, args.kueue_configmap)
        await run(client, manager_options(args, kueue_config,
                                          appwrapper_config=appwrapper_config), stop)


def appwrapper_config(args: argparse.Namespace) -> AppWrapperConfig | None:
    """The AppWrapper operator configuration of ``--appwrapper-config`` (None without it).

    Raises :class:`~integrations.appwrapper.config.ConfigError` naming the file and each
    bad field. The AppWrapper integration is imported only when the flag is given.
    """
    if args.appwrapper_config is None:
        return None
    from integrations.appwrapper.config import load_operator_config

    config = load_operator_config(args.appwrapper_config)
    # As upstream's operator logs the configuration it starts with.
    logging.getLogger("integrations").info(
        "AppWrapper operator configuration from %s: %s", args.appwrapper_config,
        config.to_dict())
    return config


def manager_options(args: argparse.Namespace,
                    kueue_config: Configuration | None = None, *,
                    appwrapper_config: AppWrapperConfig | None = None) -> ManagerOptions:
    """The :class:`ManagerOptions` the ``run`` arguments ask for (the configuration files
    loaded by the caller: ``kueue_config``, ``appwrapper_config``)."""
    namespace = args.namespace or os.environ.get("POD_NAMESPACE") or DEFAULT_MANAGER_NAMESPACE
    chosen = args.cert_management or ("internal" if args.in_cluster else "self-signed")
    cert_management: CertManagement = (
        "files" if chosen in ("cert-manager", "files")
        else "internal" if chosen == "internal" else "self-signed")
    in_cluster = bool(args.in_cluster)
    if cert_management == "files" and args.cert_dir is None and in_cluster:
        args.cert_dir = DEFAULT_CERT_DIR
    leader_election = None
    if args.leader_elect:
        leader_election = LeaderElectionConfig(
            name=args.leader_election_id, namespace=namespace,
            lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
            retry_period=args.retry_period)
    return ManagerOptions(
        integrations=args.integrations,
        webhook_host=args.webhook_host or ("0.0.0.0" if in_cluster else "127.0.0.1"),
        webhook_port=args.webhook_port if args.webhook_port is not None
        else (9443 if in_cluster else 0),
        cert_dir=args.cert_dir, webhook_client_ca=args.webhook_client_ca,
        health_probe_bind_address=args.health_probe_bind_address,
        metrics_bind_address=args.metrics_bind_address,
        wait_for_pods_ready=args.wait_for_pods_ready,
        kueue_config=kueue_config, kueue_version=args.kueue_version,
        # In the cluster the manifests install the CRDs and the webhook configurations.
        install_crds=not in_cluster, register_webhooks=not in_cluster,
        probe_namespace=None if in_cluster else "default",
        leader_election=leader_election, webhook_url=args.webhook_url,
        cert_management=cert_management, namespace=namespace,
        webhook_service_name=args.webhook_service_name,
        cert_secret_name=args.cert_secret_name,
        cert_extra_dns_names=tuple(args.cert_dns_name),
        webhook_configuration_name=args.webhook_configuration_name,
        privileged_users=privileged_users(args, namespace),
        privileged_groups=tuple(args.privileged_group),
        appwrapper_config=appwrapper_config)


def privileged_users(args: argparse.Namespace, namespace: str) -> tuple[str, ...]:
    """The usernames of ``--privileged-user``, plus Kueue's controller manager in
    ``--kueue-namespace`` and, with ``--in-cluster``, the manager's own ServiceAccount in
    ``namespace`` (the manager also asks the API server who it is: this covers a server
    that cannot say)."""
    users = list(args.privileged_user)
    users.append(service_account_username(args.kueue_namespace, KUEUE_SERVICE_ACCOUNT))
    if args.in_cluster:
        users.append(service_account_username(namespace, SERVICE_ACCOUNT))
    return tuple(dict.fromkeys(users))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        aw_config = appwrapper_config(args)
    except ValueError as err:  # the file's ConfigError: which file, which fields
        logging.getLogger("integrations").error("%s", err)
        return 2
    try:
        # The public runner (jobframework.runtime.run): the event loop, the collector
        # tuned for a long-lived process, and SIGTERM/SIGINT to stop.
        runner.run(functools.partial(_run, args, appwrapper_config=aw_config),
                   event_loop=args.event_loop, gc_tuning=args.command == "run")
    except runner.EventLoopNotInstalledError as err:
        raise SystemExit(f"--event-loop {args.event_loop}: {err}") from None
    except KeyboardInterrupt:
        return 130
    except (ConfigurationError, IntegrationLoadError) as err:
        # A bad Configuration or a broken plugin is the operator's to fix: say which
        # field or distribution, no traceback.
        logging.getLogger("integrations").error("%s", err)
        return 2
    except Exception as err:
        logging.getLogger("integrations").error("manager failed: %s", err, exc_info=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
