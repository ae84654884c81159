"""The load run: many jobs across every registered integration in one run, the invariants
checked throughout, the manager's memory and work-queue depth recorded over time.
``nox -s faults -- --load 2000``."""

from __future__ import annotations

from pathlib import Path

import pytest

from integrations.catalog import reference_names
from jobframework.testing.cluster import ClusterInfo, LocalCluster

from .harness import FaultRun, RunSettings
from .test_fault_run import write_report

pytestmark = [pytest.mark.faults, pytest.mark.load, pytest.mark.timeout(7200)]


async def test_load_across_every_integration_keeps_the_invariants(
        request: pytest.FixtureRequest, faults_cluster: tuple[LocalCluster, ClusterInfo],
        faults_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, info = faults_cluster
    n = request.config.getoption("--faults-load")
    # No injected faults: the load alone, with room for 48 pods at once.
    settings = RunSettings(
        name="load", seed=request.config.getoption("--faults-seed"), lifecycles=n, kills=0,
        compactions=0, integrations=reference_names(), concurrency=96, quota_cpu="12",
        high_priority=0.0, deactivations=0.0, deletions=0.02, use_proxy=False, hostile=0.0,
        finish_timeout=max(900.0, n * 1.0), sample_every=2.0)

    def say(line: str) -> None:
        with capsys.disabled():
            print(line, flush=True)

    report = await FaultRun(cluster, info, settings, faults_dir, say).run()
    path = write_report(request.config, faults_dir, report, "-load")
    rss = [s[1] for s in report.samples]
    depth = [s[2] for s in report.samples]
    say(report.summary())
    say(f"manager RSS peak {max(rss, default=0):.0f} MB, last {rss[-1] if rss else 0:.0f} MB; "
        f"work-queue depth peak {max(depth, default=0)}, last {depth[-1] if depth else 0}; "
        f"{len(report.samples)} samples in {path}")
    assert report.lifecycles == n
    assert report.outcomes.get("not-finished", 0) == 0, report.outcomes
    assert report.samples, "the manager's memory and queue depth were sampled"
    assert report.violations == [], "\n".join(
        f"{v['rule']}: {v['kind']} {v['namespace']}/{v['name']}: {v['message']}"
        for v in report.violations)
