"""benchmarks/run.py still runs: every benchmark at size 3, no timing asserted."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

RUN_PY = Path(__file__).resolve().parents[2] / "benchmarks" / "run.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_run", RUN_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolves the module through sys.modules while building Result.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _load()


@pytest.mark.parametrize("name", sorted(bench.BENCHMARKS))
async def test_benchmark_completes_with_positive_figures(name: str) -> None:
    result = await bench.BENCHMARKS[name](3)
    assert result.name == name and result.size == 3
    assert result.subject_rate > 0 and result.baseline_rate > 0 and result.ratio > 0
    assert all(value >= 0 for value in result.extra.values())


async def test_batchjob_counts_the_reconciles_that_did_the_work() -> None:
    result = await bench.bench_batchjob(3)
    # At least one reconcile creates each Workload and one more starts each Job; the
    # writes are at least the Workload create and the Job unsuspend.
    assert result.extra["reconciles_per_job"] >= 2
    assert result.extra["api_writes_per_job"] >= 2
    assert result.extra["api_writes_per_job_create_phase"] >= 1


def test_main_writes_the_table_and_results(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.json"
    assert bench.main(["--scale", "0", "--repeat", "1", "--only", "workqueue",
                       "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "workqueue" in printed and "ratio" in printed
    doc = json.loads(out.read_text())
    [entry] = doc["results"]
    assert entry["size"] == 3
    assert entry["ratio"] == pytest.approx(entry["subject_rate"] / entry["baseline_rate"])
