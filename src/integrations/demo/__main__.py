"""``python -m integrations.demo``: the seed's JobFlows through real Kueue, live.

By default it brings up the local control plane (``jobframework.testing.cluster``,
building it the first time) and tears it down at the end. With ``--kubeconfig PATH``
(or ``--use-current-context`` for ``$KUBECONFIG``) it uses your cluster instead, which
must run Kueue with ``JobFlow.v1alpha1.api.practice.com`` in
``integrations.externalFrameworks`` and have a LocalQueue ``user-queue``; that cluster
is left running. Logs go to a file; the console shows progress only.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from integrations.catalog import DEFAULT_INTEGRATIONS
from integrations.demo.core import DemoOptions, DemoResult, run_demo
from integrations.manager import ManagerOptions
from jobframework.runtime.client.rest import RestClient


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m integrations.demo",
        description="Run the JobFlow, DaemonJob and AppWrapper samples through real Kueue "
                    "and show what happens.")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--kubeconfig", type=Path,
                       help="use this cluster (Kueue installed) instead of a local one")
    where.add_argument("--use-current-context", action="store_true",
                       help="use $KUBECONFIG (or ~/.kube/config) instead of a local cluster")
    p.add_argument("--context", help="kubeconfig context (with --kubeconfig)")
    p.add_argument("--namespace", default="default")
    p.add_argument("--queue", default="user-queue", help="LocalQueue for the JobFlows")
    p.add_argument("--no-quota-flows", action="store_true",
                   help="only the seed's samples (skip the two JobFlows competing for quota)")
    p.add_argument("--step-time", default="3s",
                   help="how long each pod of the quota JobFlows runs (default 3s)")
    p.add_argument("--pod-run-ms", type=int, default=2000,
                   help="local cluster: how long a sample's pod runs (default 2000)")
    p.add_argument("--webhook-host", default="127.0.0.1",
                   help="address of our webhook server; the API server must reach it")
    p.add_argument("--keep", action="store_true",
                   help="keep the JobFlows (and the local cluster) when done")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds for the JobFlows, then for the DaemonJobs and AppWrappers")
    p.add_argument("--kinds", default=",".join(DEFAULT_INTEGRATIONS),
                   help="comma-separated integrations to show "
                        f"(default: {','.join(DEFAULT_INTEGRATIONS)})")
    p.add_argument("--log-file", type=Path, help="where logs go (default: printed at start)")
    return p


def _setup_logging(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)


def _say(line: str) -> None:
    print(line, flush=True)


async def _demo(kubeconfig: str | None, context: str | None, options: DemoOptions) -> DemoResult:
    async with await RestClient.from_kubeconfig(kubeconfig, context) as client:
        return await run_demo(client, options, _say)


def _report(result: DemoResult, took: float) -> None:
    _say("")
    _say(result.table)
    _say("")
    for file, message in result.rejected.items():
        _say(f"rejected as expected: {file}: {message}")
    if result.ok:
        others = f" and {len(result.others)} other objects their expected states" \
            if result.others else ""
        _say(f"all {len(result.states)} JobFlows reached Succeed{others} ({took:.0f}s)")
    else:
        for problem in result.problems:
            _say(f"PROBLEM: {problem}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 when every JobFlow reached ``Succeed``)."""
    args = _parser().parse_args(argv)
    t0 = time.monotonic()
    local = args.kubeconfig is None and not args.use_current_context
    cluster = None
    state_dir: Path | None = None
    kubeconfig: str | None = str(args.kubeconfig) if args.kubeconfig else None
    failed = True
    try:
        if local:
            from jobframework.testing.cluster import LocalCluster, Topology, cache_root

            state_dir = cache_root() / "clusters" / f"demo-{os.getpid()}"
            log_file = args.log_file or cache_root() / "demo.log"
            _setup_logging(log_file)
            _say(f"logs: {log_file}")
            _say("starting a local control plane + Kueue (the first run builds it from Go "
                 "modules: that takes a while)...")
            cluster = LocalCluster(state_dir, Topology(pod_run_ms=args.pod_run_ms),
                                   log=lambda m: _say(f"  {m}"))
            info = cluster.up()
            kubeconfig = info.kubeconfig
            _say(f"cluster up in {time.monotonic() - t0:.0f}s "
                 f"(Kubernetes {info.versions.get('kubernetes', '?')}, "
                 f"Kueue {info.versions.get('kueue', '?')})")
        else:
            from jobframework.testing.cluster import cache_root

            log_file = args.log_file or cache_root() / "demo.log"
            _setup_logging(log_file)
            _say(f"logs: {log_file}")
        options = DemoOptions(
            namespace=args.namespace, queue=args.queue, quota_flows=not args.no_quota_flows,
            step_time=args.step_time, create_sample_node=local,
            manager_options=ManagerOptions(webhook_host=args.webhook_host,
                                           probe_namespace=args.namespace),
            timeout=args.timeout, cleanup=not args.keep,
            kinds=tuple(k.strip() for k in args.kinds.split(",") if k.strip()))
        result = asyncio.run(_demo(kubeconfig, args.context, options))
        _report(result, time.monotonic() - t0)
        failed = not result.ok
        return 0 if result.ok else 1
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except Exception as err:
        logging.getLogger("integrations.demo").error("demo failed", exc_info=True)
        _say(f"demo failed: {err} (details in the log file)")
        return 1
    finally:
        if cluster is not None and not args.keep:
            _say("stopping the local cluster...")
            cluster.down()
            if state_dir is not None and not failed:
                shutil.rmtree(state_dir, ignore_errors=True)
            elif state_dir is not None:
                _say(f"cluster logs kept in {state_dir}/logs")
        elif cluster is not None:
            _say(f"cluster left running: export KUBECONFIG={kubeconfig}")


if __name__ == "__main__":
    sys.exit(main())
