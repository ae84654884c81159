"""benchmarks/profile_cpu.py still runs: every scenario at a tiny size, no timing asserted."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

PROFILE_CPU = Path(__file__).resolve().parents[2] / "benchmarks" / "profile_cpu.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_profile_cpu", PROFILE_CPU)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = _load()


def test_every_scenario_runs_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    assert harness.main(["--jobs", "3", "--reconcile-jobs", "3", "--reviews", "5",
                         "--requests", "5", "--repeat", "1", "--loop", "asyncio",
                         "--output", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    lifecycle = results["lifecycle"]
    assert lifecycle["transport"] == "http" and lifecycle["cpu_ms_per_job"] > 0
    assert set(lifecycle["phases_ms_per_job"]) == {"create", "admit", "run", "finish"}
    assert lifecycle["requests_per_job"]["POST workloads"] == 1
    assert set(results["reconcile"]) == {"pending", "running"}
    assert results["webhook"]["mutate"]["us_per_review"] > 0
    assert results["webhook"]["validate"]["us_per_review"] > 0
    assert {"get", "create", "patch"} <= set(results["http"])
    watch = results["watch"]
    # 3 Jobs and their Workloads: every lifecycle step is an event of one or the other.
    assert watch["events"] >= 3 * 6 and watch["us_per_event"] > 0 and watch["us_per_copy"] > 0


def test_profiles_split_the_time_between_components(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    assert harness.main(["--scenario", "lifecycle", "--transport", "memory", "--jobs", "3",
                         "--repeat", "1", "--loop", "asyncio", "--profile", "--sample",
                         "--gc-time", "--top", "5", "--output", str(out)]) == 0
    lifecycle = json.loads(out.read_text())["results"]["lifecycle"]
    profile = lifecycle["profile"]
    assert {"server", "reconciler"} <= set(profile["components"])
    assert abs(sum(v["share"] for v in profile["components"].values()) - 1) < 0.02
    assert len(profile["top_own_time"]) == 5
    assert lifecycle["sampled"]["cpu_ms_per_unit"] > 0


def test_library_time_goes_to_the_code_that_called_it() -> None:
    # caller (ours) -> json.loads (library): json's own time is charged to the caller.
    ours = (str(Path(harness.__file__).parents[1] / "src" / "jobframework" / "reconciler.py"),
            1, "reconcile")
    lib = ("/usr/lib/python3.11/json/decoder.py", 1, "raw_decode")

    class Stats:
        stats = {ours: (1, 1, 0.25, 1.0, {}),
                 lib: (1, 1, 0.75, 0.75, {ours: (1, 1, 0.75, 0.75)})}

    parts = harness.attribute(Stats())  # type: ignore[arg-type]
    assert parts == {"reconciler": 1.0}
