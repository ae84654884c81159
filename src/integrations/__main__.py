"""``python -m integrations run --kubeconfig PATH``: our external-framework manager.

Runs the reference integrations (their CRDs, webhooks on loopback, controllers and
Kueue's generic reconciler) against a cluster whose Kueue lists them in
``integrations.externalFrameworks``; see :mod:`integrations.manager`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from integrations.catalog import DEFAULT_INTEGRATIONS, MODULES
from integrations.manager import ManagerOptions, run
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
    r = sub.add_parser("run", help="run the external-framework manager")
    r.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, ~/.kube/config)")
    r.add_argument("--context", help="kubeconfig context (default: the current one)")
    r.add_argument("--integrations", type=_integrations, default=DEFAULT_INTEGRATIONS,
                   help="comma-separated reference integrations to run, of "
                        f"{', '.join(MODULES)} (default: {','.join(DEFAULT_INTEGRATIONS)})")
    r.add_argument("--webhook-host", default="127.0.0.1",
                   help="address the webhook server listens on (the API server must reach it)")
    r.add_argument("--webhook-port", type=int, default=0, help="0 picks a free port")
    r.add_argument("--cert-dir", type=Path, help="serving certificate directory (default: temp)")
    r.add_argument("--health-probe-bind-address", help="host:port for /healthz and /readyz")
    r.add_argument("--metrics-bind-address", help="host:port for /metrics")
    r.add_argument("--no-wait-for-pods-ready", dest="wait_for_pods_ready",
                   action="store_false",
                   help="do not keep the Workloads' PodsReady condition (match a Kueue "
                        "Configuration with waitForPodsReady disabled)")
    r.add_argument("--log-level", default="INFO")
    return parser


async def _run(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    options = ManagerOptions(
        integrations=args.integrations, webhook_host=args.webhook_host,
        webhook_port=args.webhook_port, cert_dir=args.cert_dir,
        health_probe_bind_address=args.health_probe_bind_address,
        metrics_bind_address=args.metrics_bind_address,
        wait_for_pods_ready=args.wait_for_pods_ready)
    async with await RestClient.from_kubeconfig(args.kubeconfig, args.context) as client:
        await run(client, options, stop)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        logging.getLogger("integrations").error("manager failed: %s", err, exc_info=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
