"""The real-control-plane benchmark at a tiny size, its ``--embedded`` side included: it
runs end to end and reports every figure (no timing is asserted; ``nox -s bench-cluster``
is where figures come from)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "cluster.py"


@pytest.mark.timeout(900)
def test_cluster_benchmark_runs_every_side_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--jobs", "5", "--memory", "20", "--embedded",
         "--output", str(out)],
        capture_output=True, text=True, timeout=850)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "N=5: throughput" in proc.stdout, proc.stdout[-3000:]
    results = json.loads(out.read_text())
    sides = {s["side"]: s for s in results["sides"]}
    assert set(sides) == {"kueue", "python", "embedded"}
    for side in sides.values():
        assert side["jobs"] == 5 and side["throughput"] > 0 and side["p99"] >= side["p50"] > 0
        assert side["requests_per_job"]["benchmark"]["create"] == 1.0
        # Each side's Started events were found after its unsuspends in the audit log.
        assert side["event_lag_p99"] >= side["event_lag_p50"] >= 0, side
        # The API server timed each side's Job webhooks: the mutating and validating
        # calls of the creates and the validating call of each unsuspend.
        assert set(side["job_webhook_ms"]) >= {"admit CREATE", "validating CREATE",
                                               "validating UPDATE"}, side
        assert all(ms > 0 for ms in side["job_webhook_ms"].values()), side
    # Our managers wrote (Workloads, the unsuspend patches) and their CPU and memory were
    # read: the shipped one and the one embedded the documented way.
    for ours in ("python", "embedded"):
        assert sides[ours]["requests_per_job"]["ours"]["create"] >= 1.0, ours
        assert sides[ours]["cpu_ms_per_job"] > 0 and sides[ours]["peak_rss_mb"] > 0, ours
    embedded = results["comparison"][0]["embedded"]
    assert embedded["ratio_to_shipped"]["throughput"] > 0, embedded
    assert embedded["ratio_to_kueue"]["p99"] > 0, embedded
    assert "  embedded: " in proc.stdout, proc.stdout[-3000:]
    # The pair's row sets our CPU against Kueue's job reconciler and webhooks (at 5 Jobs the
    # difference of Kueue's two runs is noise, so only its presence is checked).
    assert {"kueue_job_cpu_ms_per_job", "cpu_ratio"} <= set(results["comparison"][0])
    assert results["memory"]["objects"] == 40 and results["memory"]["rss_full_mb"] > 0
