"""Our manager's CPU per Job, two versions of our source side by side on one cluster.

Comparing two runs of ``cluster.py`` mixes in what differs between them (the machine's
load, the cluster's age, Kueue's pace). Here one local control plane (Kueue's batch/job
off, Jobs an external framework, as ``cluster.py``'s ``python`` side) serves rounds in the
order A B B A A B …; each round starts a fresh manager (``python -m integrations run
--integrations batchjob``) from one version's ``src`` directory (``PYTHONPATH``), waits
until its start-up work is over, creates ``--jobs`` queued Jobs 16 at a time into a new
namespace and reads the manager's CPU time once every Job is unsuspended and the manager
has gone quiet again (so work it defers past the last unsuspend, such as events, counts).
It prints each round and the median CPU ms per Job of each version, and their ratio B/A.

    python benchmarks/cluster_ab.py --baseline HEAD~3            # that commit vs src/
    python benchmarks/cluster_ab.py --a /tmp/old/src --b src --jobs 300 --rounds 3
    nox -s bench-cluster-ab -- --baseline main

A version is a ``src`` directory, or with ``--baseline REF`` a git ref of this checkout
(its ``src`` extracted to a temporary directory) against this checkout's ``src``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cluster import (
    JOB,
    PYTHON_TOPOLOGY,
    _suspends,
    job_manifest,
    our_manager,
    proc_cpu_seconds,
    setup_cluster_queue,
    setup_namespace,
    wait_for,
)
from jobframework.runtime.client.rest import RestClient, Timeouts
from jobframework.testing.cluster import LocalCluster, cache_root

ROOT = Path(__file__).resolve().parent.parent
#: A manager is settled when it used less than this CPU time in one second.
QUIET_CPU_SECONDS = 0.03


async def until_quiet(pid: int, limit: float = 120.0) -> None:
    """Wait until the manager ``pid`` spends less than QUIET_CPU_SECONDS in a second."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = proc_cpu_seconds(pid)
        await asyncio.sleep(1.0)
        if proc_cpu_seconds(pid) - before < QUIET_CPU_SECONDS:
            return
    raise TimeoutError(f"manager {pid} still busy after {limit:.0f} s")


async def one_round(client: RestClient, kubeconfig: str, src: str, ns: str, jobs: int,
                    log: Path) -> tuple[float, float]:
    """CPU ms per Job and Jobs unsuspended per second of one fresh manager from ``src``."""
    async with our_manager(kubeconfig, log, pythonpath=src) as pid:
        await wait_for("the Job webhook to suspend a queued Job",
                       lambda: _suspends(client, "bench-probe"), 180)
        await setup_namespace(client, ns)
        # Earlier rounds' Jobs are reconciled once at start-up: wait that out.
        await until_quiet(pid)
        cpu0, t0 = proc_cpu_seconds(pid), time.monotonic()
        sem = asyncio.Semaphore(16)

        async def create(i: int) -> None:
            async with sem:
                await client.create(job_manifest(i, ns))

        await asyncio.gather(*(create(i) for i in range(jobs)))
        deadline = time.monotonic() + max(300.0, jobs * 0.5)
        while True:
            listed = await client.list(JOB, namespace=ns)
            if sum(j["spec"].get("suspend") is False for j in listed.items) == jobs:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{ns}: not every Job was unsuspended")
            await asyncio.sleep(0.3)
        seconds = time.monotonic() - t0
        # The work that trails the last unsuspend (events, PodsReady writes as pods start)
        # is the Jobs' too: a version that defers it must not look cheaper.
        await until_quiet(pid)
        return (proc_cpu_seconds(pid) - cpu0) * 1000 / jobs, jobs / seconds


async def compare(a: str, b: str, jobs: int, rounds: int,
                  say: Callable[[str], None]) -> dict[str, float]:
    """Run the rounds; returns each version's median CPU ms per Job and the ratio B/A."""
    state = cache_root() / "clusters" / f"bench-ab-{os.getpid()}"
    cluster = LocalCluster(state, PYTHON_TOPOLOGY)
    say("starting a local cluster...")
    info = cluster.up()
    cpu: dict[str, list[float]] = {"A": [], "B": []}
    try:
        async with await RestClient.from_kubeconfig(
                info.kubeconfig, timeouts=Timeouts(read=60.0)) as client:
            await setup_cluster_queue(client)
            await setup_namespace(client, "bench-probe")
            order = [side for r in range(rounds)
                     for side in (("A", "B") if r % 2 == 0 else ("B", "A"))]
            for i, side in enumerate(order):
                ms, rate = await one_round(client, str(info.kubeconfig),
                                           a if side == "A" else b, f"ab-{i}", jobs,
                                           state / "logs" / f"manager-{i}-{side}.log")
                cpu[side].append(ms)
                say(f"round {i} {side}: {ms:.2f} ms CPU per Job, {rate:.1f} Jobs/s")
    finally:
        cluster.down()
        shutil.rmtree(state, ignore_errors=True)
    med_a, med_b = statistics.median(cpu["A"]), statistics.median(cpu["B"])
    return {"a_ms": round(med_a, 2), "b_ms": round(med_b, 2), "ratio": round(med_b / med_a, 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", help="version A: a src directory")
    p.add_argument("--b", default=str(ROOT / "src"), help="version B (default: ./src)")
    p.add_argument("--baseline", metavar="REF",
                   help="version A is this git ref's src (extracted to a temporary dir)")
    p.add_argument("--jobs", type=int, default=300, help="Jobs per round")
    p.add_argument("--rounds", type=int, default=2, help="pairs of rounds (A B, then B A)")
    args = p.parse_args(argv)
    if (args.a is None) == (args.baseline is None):
        p.error("give one of --a or --baseline")

    def say(line: str) -> None:
        print(line, flush=True)

    with contextlib.ExitStack() as stack:
        a = args.a
        if args.baseline is not None:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ab-")))
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, "src"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
            a = str(tmp / "src")
        out = asyncio.run(compare(a, args.b, args.jobs, args.rounds, say))
    say(f"A {out['a_ms']} ms, B {out['b_ms']} ms CPU per Job (medians): B/A {out['ratio']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
