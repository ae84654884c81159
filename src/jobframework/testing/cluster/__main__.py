"""``python -m jobframework.testing.cluster build|up|down|status|env``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jobframework.testing.cluster import binaries
from jobframework.testing.cluster.cluster import LocalCluster, default_state_dir
from jobframework.testing.cluster.manifests import FlavorSpec, Topology


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jobframework.testing.cluster",
        description="Real etcd + kube-apiserver + controller-manager + scheduler + kwok + Kueue "
        "on 127.0.0.1, built from the Go pins in tests/cluster.",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="state directory (default: $KUEUE_JF_CLUSTER_DIR or "
        "${KUEUE_JF_CACHE:-~/.cache/kueue-jobframework}/clusters/<--name>)",
    )
    parser.add_argument("--name", default="default", help="cluster name (selects the state dir)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the binaries for the current pins (no-op when cached)")
    up = sub.add_parser("up", help="build if needed, start the cluster, print the kubeconfig path")
    up.add_argument("--no-build", action="store_true", help="fail instead of building")
    up.add_argument("--pod-run-ms", type=int, default=2000, help="Running -> Succeeded delay")
    up.add_argument("--pod-start-ms", type=int, default=0, help="Pending -> Running delay")
    up.add_argument("--nodes-per-flavor", type=int, default=2)
    up.add_argument("--quota-cpu", default="4", help="ClusterQueue cpu quota per flavor")
    up.add_argument("--quota-memory", default="8Gi", help="ClusterQueue memory quota per flavor")
    up.add_argument("-v", "--verbosity", type=int, default=0, help="component log verbosity")
    sub.add_parser("down", help="stop every process started by `up`")
    status = sub.add_parser(
        "status", help="report processes and health (exit 0 up, 3 down, 1 degraded)"
    )
    status.add_argument("--json", action="store_true")
    sub.add_parser("env", help="print `export KUBECONFIG=...` for a running cluster")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    state_dir = args.state_dir or default_state_dir(args.name)
    if args.command == "build":
        print(binaries.build())
        return 0
    if args.command == "up":
        flavors = tuple(
            FlavorSpec(
                name,
                nodes=args.nodes_per_flavor,
                quota_cpu=args.quota_cpu,
                quota_memory=args.quota_memory,
            )
            for name in ("on-demand", "spot")
        )
        topology = Topology(
            flavors=flavors, pod_run_ms=args.pod_run_ms, pod_start_ms=args.pod_start_ms
        )
        # `up` returns and the cluster keeps running for later commands and test runs.
        cluster = LocalCluster(state_dir, topology, verbosity=args.verbosity,
                               die_with_parent=False)
        existing = cluster.info()
        if existing is not None and cluster.status()["state"] == "up":
            print(f"export KUBECONFIG={existing.kubeconfig}")
            print(f"# already up ({state_dir}); `down` first to restart", file=sys.stderr)
            return 0
        try:
            info = cluster.up(build=not args.no_build)
        except (RuntimeError, TimeoutError, PermissionError, OSError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"export KUBECONFIG={info.kubeconfig}")
        print(
            f"# server {info.server}; logs in {info.state_dir}/logs; "
            f"up in {info.timings.get('total', 0):.1f}s",
            file=sys.stderr,
        )
        return 0
    cluster = LocalCluster(state_dir)
    if args.command == "down":
        stopped = cluster.down()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return 0
    if args.command == "env":
        existing = cluster.info()
        if existing is None:
            print(f"no cluster in {state_dir}", file=sys.stderr)
            return 1
        print(f"export KUBECONFIG={existing.kubeconfig}")
        return 0
    report = cluster.status()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"state: {report['state']}  ({report['state_dir']})")
        if "server" in report:
            print(f"server: {report['server']}\nkubeconfig: {report['kubeconfig']}")
        for name, proc in report["processes"].items():
            print(f"  {name:<24} pid {proc['pid']:<8} {'running' if proc['alive'] else 'DEAD'}")
        for name, result in report.get("checks", {}).items():
            print(f"  check {name}: {result}")
    # Exit status: 0 up, 3 down (nothing running), 1 degraded or partial.
    return {"up": 0, "down": 3}.get(report["state"], 1)


if __name__ == "__main__":
    sys.exit(main())
