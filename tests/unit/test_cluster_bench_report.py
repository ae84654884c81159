"""benchmarks/cluster.py's report of several pairs of runs (``--pairs``): each pair's
ratio is taken within the pair, and the summary is the median of those ratios. (The
benchmark itself runs on the real control plane: tests/integration/test_benchmark_smoke.py.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

CLUSTER_PY = Path(__file__).resolve().parents[2] / "benchmarks" / "cluster.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_cluster", CLUSTER_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks the module up while building
    spec.loader.exec_module(module)
    return module


bench = _load()


def side(name: str, pair: int, throughput: float, p99: float, cpu: float | None,
         kueue_cpu: float | None = None, rss: float | None = None) -> Any:
    return bench.SideResult(
        side=name, jobs=500, seconds=500 / throughput, throughput=throughput, p50=p99 / 2,
        p99=p99, requests_per_job={"ours": {"create": 2.0, "patch": 2.5}, "kueue": {}},
        cpu_ms_per_job=cpu, pair=pair, kueue_cpu_ms_per_job=kueue_cpu, peak_rss_mb=rss)


def test_pairs_are_compared_within_themselves_and_summarised_by_their_median() -> None:
    results = [
        # Kueue's process: 14 ms per Job with its own Job integration, 8 beside ours.
        side("kueue", 0, 25.0, 16.0, None, 14.0), side("python", 0, 20.0, 20.0, 10.0, 8.0),
        # A slower second pair: both sides slowed, the ratio is what counts.
        side("python", 1, 11.0, 30.0, 9.0, 9.0), side("kueue", 1, 10.0, 33.0, None, 14.0),
        side("kueue", 2, 24.0, 16.0, None, 12.0), side("python", 2, 21.6, 17.6, 9.5, 7.0),
    ]
    lines: list[str] = []
    rows = bench.report(results, lines.append)
    assert [(r["pair"], r["throughput"]["ratio"]) for r in rows] == [
        (0, 0.8), (1, 1.1), (2, 0.9)]
    assert [(r["kueue_job_cpu_ms_per_job"], r["cpu_ratio"]) for r in rows] == [
        (6.0, 1.667), (5.0, 1.8), (5.0, 1.9)]
    summary = bench.summary(rows, lines.append)
    assert summary == [{
        "jobs": 500, "pairs": 3,
        "throughput": {"median_ratio": 0.9, "ratios": [0.8, 1.1, 0.9]},
        "p50": {"median_ratio": 1.1, "ratios": [1.25, 0.909, 1.1]},
        "p99": {"median_ratio": 1.1, "ratios": [1.25, 0.909, 1.1]},
        "ours_cpu_ms_per_job": {"median": 9.5, "runs": [10.0, 9.0, 9.5]},
        "cpu_ratio": {"median_ratio": 1.8, "ratios": [1.667, 1.8, 1.9]},
    }]
    assert any(line.startswith("\nN=500, 3 pairs: throughput ratio median 0.9")
               and "in CPU per Job median 1.8" in line for line in lines)


def test_cpu_ratio_needs_kueues_cpu_on_both_sides() -> None:
    rows = bench.report([side("kueue", 0, 25.0, 16.0, None, 14.0),
                         side("python", 0, 20.0, 20.0, 10.0)], lambda line: None)
    assert rows[0]["kueue_job_cpu_ms_per_job"] is None and rows[0]["cpu_ratio"] is None


def test_one_pair_has_no_summary() -> None:
    rows = bench.report([side("kueue", 0, 25.0, 16.0, None),
                         side("python", 0, 20.0, 20.0, 10.0)], lambda line: None)
    assert bench.summary(rows, lambda line: None) == []


def _audit_line(agent: str, verb: str, resource: str, name: str, at: float,
                code: int = 200, subresource: str | None = None) -> str:
    import datetime as dt
    import json

    stamp = dt.datetime.fromtimestamp(at, dt.UTC).isoformat().replace("+00:00", "Z")
    ref = {"resource": resource, "name": name}
    if subresource:
        ref["subresource"] = subresource
    return json.dumps({"stage": "ResponseComplete", "userAgent": agent, "verb": verb,
                       "objectRef": ref, "responseStatus": {"code": code},
                       "requestReceivedTimestamp": stamp, "stageTimestamp": stamp})


def test_audit_summary_measures_how_late_the_started_event_is(tmp_path: Path) -> None:
    ours = f"{bench.OUR_AGENT}/v0.1"
    lines = [
        _audit_line(ours, "create", "events", "j1.a", 100.0),          # CreatedWorkload
        _audit_line("kube-controller-manager/v1.36", "update", "jobs", "j1", 100.5,
                    subresource="status"),                             # not the unsuspend
        _audit_line(ours, "patch", "jobs", "j1", 101.0),               # unsuspend
        _audit_line(ours, "patch", "jobs", "j1", 150.0),               # a later write
        _audit_line(ours, "create", "events", "j1.b", 105.0),          # Started, 4 s late
        _audit_line(ours, "patch", "jobs", "j2", 102.0),
        _audit_line(ours, "create", "events", "j2.x", 102.0, code=403),  # refused
        _audit_line(ours, "create", "events", "j2.y", 102.25),
        _audit_line("kueue/v0.19.2", "patch", "jobs", "j3", 103.0),    # Kueue's own side
        _audit_line("kueue/v0.19.2", "create", "events", "j3.c", 103.5),
        _audit_line(ours, "patch", "jobs", "j4", 104.0),               # no event yet
    ]
    audit = tmp_path / "audit.log"
    audit.write_text("\n".join(lines) + "\n")
    out = bench.count_requests(audit, 0)
    assert sorted(out.event_lags) == [0.25, 0.5, 4.0]
    assert out.counts[("ours", "create")] == 4 and out.counts[("ours", "patch")] == 4


def test_job_webhook_latency_from_the_api_servers_metrics() -> None:
    metrics = "\n".join([
        "# HELP apiserver_admission_webhook_admission_duration_seconds [STABLE] ...",
        'apiserver_admission_webhook_admission_duration_seconds_bucket{name="mjob.kb.io",'
        'operation="CREATE",rejected="false",type="admit",le="0.005"} 3',
        'apiserver_admission_webhook_admission_duration_seconds_sum{name="mjob.kb.io",'
        'operation="CREATE",rejected="false",type="admit"} 0.5',
        'apiserver_admission_webhook_admission_duration_seconds_count{name="mjob.kb.io",'
        'operation="CREATE",rejected="false",type="admit"} 10',
        # A rejected call is a call too: its series adds to the same key.
        'apiserver_admission_webhook_admission_duration_seconds_sum{name="mjob.kb.io",'
        'operation="CREATE",rejected="true",type="admit"} 0.1',
        'apiserver_admission_webhook_admission_duration_seconds_count{name="mjob.kb.io",'
        'operation="CREATE",rejected="true",type="admit"} 2',
        'apiserver_admission_webhook_admission_duration_seconds_sum{'
        'name="vjob.batch.kueue-jobframework.io",operation="UPDATE",rejected="false",'
        'type="validating"} 0.03',
        'apiserver_admission_webhook_admission_duration_seconds_count{'
        'name="vjob.batch.kueue-jobframework.io",operation="UPDATE",rejected="false",'
        'type="validating"} 3',
        # Not a Job webhook.
        'apiserver_admission_webhook_admission_duration_seconds_sum{name="mworkload.kb.io",'
        'operation="CREATE",rejected="false",type="admit"} 9',
        'apiserver_admission_webhook_admission_duration_seconds_count{name="mworkload.kb.io",'
        'operation="CREATE",rejected="false",type="admit"} 1',
    ])
    totals = bench.job_webhook_totals(metrics)
    assert totals == {"admit CREATE": (0.6, 12.0), "validating UPDATE": (0.03, 3.0)}
    before = {"admit CREATE": (0.2, 4.0)}
    # Only calls inside the window count: (0.6 - 0.2) s over 8 calls; no call, no mean.
    assert bench.mean_ms(before, totals) == {"admit CREATE": 50.0, "validating UPDATE": 10.0}
    assert bench.mean_ms(totals, totals) == {}


# --- the embedded side (--embedded) ---------------------------------------------------------


def test_the_embedded_side_is_set_against_go_kueue_and_the_shipped_manager() -> None:
    results = [
        side("kueue", 0, 25.0, 16.0, None, 14.0), side("python", 0, 20.0, 20.0, 10.0, 8.0, 80.0),
        side("embedded", 0, 19.0, 22.0, 11.0, 8.0, 88.0),
        # The second pair runs the other way round: embedded, python, kueue.
        side("embedded", 1, 10.5, 33.0, 9.0, 9.0, 84.0),
        side("python", 1, 10.0, 30.0, 9.0, 9.0, 80.0),
        side("kueue", 1, 10.0, 33.0, None, 14.0),
    ]
    lines: list[str] = []
    rows = bench.report(results, lines.append)
    # The shipped manager's row is as without --embedded.
    assert [(r["pair"], r["throughput"]["ratio"], r["cpu_ratio"]) for r in rows] == [
        (0, 0.8, 1.667), (1, 1.0, 1.8)]
    first = rows[0]["embedded"]
    assert first["ratio_to_kueue"] == {"throughput": 0.76, "p50": 1.375, "p99": 1.375}
    assert first["ratio_to_shipped"] == {"throughput": 0.95, "p50": 1.1, "p99": 1.1,
                                         "cpu_ms_per_job": 1.1, "peak_rss_mb": 1.1}
    assert (first["cpu_ms_per_job"], first["peak_rss_mb"],
            first["job_controller_writes_per_job"]) == (11.0, 88.0, 4.5)
    assert rows[1]["embedded"]["ratio_to_shipped"]["throughput"] == 1.05
    assert any(line.startswith("  embedded: 19.0 Jobs/s (x0.76 Go, x0.95 shipped)")
               for line in lines), lines
    assert any(line.startswith("  [embedded] requests per Job: ") for line in lines)

    summary = bench.summary(rows, lines.append)
    embedded = summary[0]["embedded"]
    assert embedded["pairs"] == 2
    assert embedded["ratio_to_shipped"]["throughput"] == {"median_ratio": 1.0,
                                                          "ratios": [0.95, 1.05]}
    assert embedded["ratio_to_shipped"]["peak_rss_mb"] == {"median_ratio": 1.075,
                                                           "ratios": [1.1, 1.05]}
    assert embedded["ratio_to_kueue"]["throughput"] == {"median_ratio": 0.905,
                                                        "ratios": [0.76, 1.05]}
    # The embedded/shipped ratios are shown beside how far the shipped/Go ones spread.
    assert any(line.startswith("  embedded / shipped, median of 2 pairs: throughput 1.0")
               and line.endswith("spread over 0.8-1.0 in the same pairs") for line in lines)


def test_without_the_embedded_side_rows_and_summary_have_no_embedded_part() -> None:
    rows = bench.report([side("kueue", 0, 25.0, 16.0, None), side("python", 0, 20.0, 20.0, 10.0),
                         side("kueue", 1, 25.0, 16.0, None), side("python", 1, 20.0, 20.0, 10.0)],
                        lambda line: None)
    assert all("embedded" not in r for r in rows)
    assert "embedded" not in bench.summary(rows, lambda line: None)[0]


def test_one_embedded_pair_has_its_ratios_but_no_embedded_summary() -> None:
    rows = bench.report([side("kueue", 0, 25.0, 16.0, None), side("python", 0, 20.0, 20.0, 10.0),
                         side("embedded", 0, 20.0, 20.0, 10.0)], lambda line: None)
    assert rows[0]["embedded"]["ratio_to_shipped"]["throughput"] == 1.0
    # Without a measured RSS the ratio is unknown, not zero.
    assert rows[0]["embedded"]["ratio_to_shipped"]["peak_rss_mb"] is None
    assert bench.embedded_summary(rows) is None
