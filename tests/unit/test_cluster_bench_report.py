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


def side(name: str, pair: int, throughput: float, p99: float, cpu: float | None) -> Any:
    return bench.SideResult(
        side=name, jobs=500, seconds=500 / throughput, throughput=throughput, p50=p99 / 2,
        p99=p99, requests_per_job={"ours": {"create": 2.0, "patch": 2.5}, "kueue": {}},
        cpu_ms_per_job=cpu, pair=pair)


def test_pairs_are_compared_within_themselves_and_summarised_by_their_median() -> None:
    results = [
        side("kueue", 0, 25.0, 16.0, None), side("python", 0, 20.0, 20.0, 10.0),
        # A slower second pair: both sides slowed, the ratio is what counts.
        side("python", 1, 11.0, 30.0, 9.0), side("kueue", 1, 10.0, 33.0, None),
        side("kueue", 2, 24.0, 16.0, None), side("python", 2, 21.6, 17.6, 9.5),
    ]
    lines: list[str] = []
    rows = bench.report(results, lines.append)
    assert [(r["pair"], r["throughput"]["ratio"]) for r in rows] == [
        (0, 0.8), (1, 1.1), (2, 0.9)]
    summary = bench.summary(rows, lines.append)
    assert summary == [{
        "jobs": 500, "pairs": 3,
        "throughput": {"median_ratio": 0.9, "ratios": [0.8, 1.1, 0.9]},
        "p50": {"median_ratio": 1.1, "ratios": [1.25, 0.909, 1.1]},
        "p99": {"median_ratio": 1.1, "ratios": [1.25, 0.909, 1.1]},
        "ours_cpu_ms_per_job": {"median": 9.5, "runs": [10.0, 9.0, 9.5]},
    }]
    assert any(line.startswith("\nN=500, 3 pairs: throughput ratio median 0.9")
               for line in lines)


def test_one_pair_has_no_summary() -> None:
    rows = bench.report([side("kueue", 0, 25.0, 16.0, None),
                         side("python", 0, 20.0, 20.0, 10.0)], lambda line: None)
    assert bench.summary(rows, lambda line: None) == []
