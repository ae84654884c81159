"""``python -m integrations run --kubeconfig PATH``: our external-framework manager.

Runs the reference integrations (their CRDs, webhooks on loopback, controllers and
Kueue's generic reconciler) against a cluster whose Kueue lists them in
``integrations.externalFrameworks``; see :mod:`integrations.manager`.

It follows the Kueue Configuration given by ``--kueue-config PATH`` (the file Kueue's
``--config`` reads) or ``--kueue-config-from-cluster`` (Kueue's ConfigMap); with neither,
the configuration Kueue v0.19.2 runs with when given none (all defaults).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from integrations.catalog import DEFAULT_INTEGRATIONS, MODULES
from integrations.manager import ManagerOptions, run
from jobframework.config import (
    CONFIGMAP_KEY,
    DEFAULT_CONFIGMAP_NAME,
    DEFAULT_NAMESPACE,
    ConfigurationError,
    load_configuration,
    load_configuration_from_configmap,
)
from jobframework.constants import DEFAULT_KUEUE_VERSION, KueueVersion
from jobframework.runtime.client.rest import RestClient


def _integrations(value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in MODULES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown integration(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(MODULES)}")
    return names


def _parser() -> argparse.ArgumentParser:
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
    r.add_argument("--integrations", type=_integrations, default=None,
                   help="comma-separated reference integrations to run, of "
                        f"{', '.join(MODULES)} (default: those the Kueue Configuration "
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
    r.add_argument("--webhook-host", default="127.0.0.1",
                   help="address the webhook server listens on (the API server must reach it)")
    r.add_argument("--webhook-port", type=int, default=0, help="0 picks a free port")
    r.add_argument("--cert-dir", type=Path, help="serving certificate directory (default: temp)")
    r.add_argument("--health-probe-bind-address", help="host:port for /healthz and /readyz")
    r.add_argument("--metrics-bind-address", help="host:port for /metrics")
    r.add_argument("--no-wait-for-pods-ready", dest="wait_for_pods_ready",
                   action="store_const", const=False, default=None,
                   help="do not keep the Workloads' PodsReady condition, whatever the Kueue "
                        "Configuration says")
    r.add_argument("--log-level", default="INFO")
    r.add_argument("--event-loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                   help="auto: uvloop when installed (pip install 'kueue-jobframework[speed]'"
                        "; about a third less CPU per job, most of it TLS), else asyncio's")
    return parser


def _runner(choice: str) -> Callable[[Coroutine[Any, Any, None]], None]:
    """How to run the manager's coroutine: ``asyncio.run``, or uvloop's loop."""
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise SystemExit("--event-loop uvloop: uvloop is not installed "
                                 "(pip install 'kueue-jobframework[speed]')") from None
        else:
            return uvloop.run
    return asyncio.run


async def _run(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # A bad file fails before we connect anywhere.
    kueue_config = (load_configuration(args.kueue_config, namespace=args.kueue_namespace)
                    if args.kueue_config is not None else None)
    async with await RestClient.from_kubeconfig(args.kubeconfig, args.context) as client:
        if args.kueue_config_from_cluster:
            kueue_config = await load_configuration_from_configmap(
                client, args.kueue_namespace, args.kueue_configmap)
        options = ManagerOptions(
            integrations=args.integrations, webhook_host=args.webhook_host,
            webhook_port=args.webhook_port, cert_dir=args.cert_dir,
            health_probe_bind_address=args.health_probe_bind_address,
            metrics_bind_address=args.metrics_bind_address,
            wait_for_pods_ready=args.wait_for_pods_ready,
            kueue_config=kueue_config, kueue_version=args.kueue_version)
        await run(client, options, stop)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        _runner(args.event_loop)(_run(args))
    except KeyboardInterrupt:
        return 130
    except ConfigurationError as err:
        # A bad Configuration is the operator's to fix: say which field, no traceback.
        logging.getLogger("integrations").error("%s", err)
        return 2
    except Exception as err:
        logging.getLogger("integrations").error("manager failed: %s", err, exc_info=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
