"""Job lifecycles of every registered integration under faults, on the real control plane
with a real Kueue; the invariants are checked while the run goes (see ``harness``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from integrations.catalog import reference_names
from jobframework.testing.cluster import ClusterInfo, LocalCluster

from .harness import FaultRun, RunSettings
from .tenant import BAD_OUTCOMES, HOSTILE_KINDS

pytestmark = [pytest.mark.faults, pytest.mark.timeout(3600)]


def settings_from(config: pytest.Config) -> RunSettings:
    names = config.getoption("--faults-integrations")
    integrations = tuple(n for n in names.split(",") if n) if names else reference_names()
    unknown = set(integrations) - set(reference_names())
    if unknown:
        raise pytest.UsageError(f"--faults-integrations: unknown {sorted(unknown)}; "
                                f"known: {sorted(reference_names())}")
    return RunSettings(
        seed=config.getoption("--faults-seed"),
        lifecycles=config.getoption("--faults-lifecycles"),
        kills=config.getoption("--faults-kills"),
        compactions=config.getoption("--faults-compactions"),
        apiserver_restarts=config.getoption("--faults-apiserver-restarts"),
        hostile=config.getoption("--faults-hostile"),
        integrations=integrations)


def write_report(config: pytest.Config, directory: Path, report: object,
                 suffix: str = "") -> Path:
    """The JSON report at ``--faults-report`` (the load run's beside it, ``-load``)."""
    out = config.getoption("--faults-report")
    path = Path(out) if out else directory / "faults-report.json"
    if suffix:
        path = path.with_name(f"{path.stem}{suffix}{path.suffix}")
    path.write_text(json.dumps(attrs.asdict(report), indent=2, default=str) + "\n")
    return path


async def test_every_integration_survives_faults_with_no_violation(
        request: pytest.FixtureRequest, faults_cluster: tuple[LocalCluster, ClusterInfo],
        faults_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, info = faults_cluster
    settings = settings_from(request.config)

    def say(line: str) -> None:
        with capsys.disabled():
            print(line, flush=True)

    run = FaultRun(cluster, info, settings, faults_dir, say)
    report = await run.run()
    path = write_report(request.config, faults_dir, report)
    say(report.summary())
    say(f"report: {path}")
    # Every registered integration took part, every lifecycle ended as planned.
    assert set(report.by_kind) == set(settings.integrations)
    assert report.lifecycles == settings.lifecycles
    assert report.outcomes.get("not-finished", 0) == 0, report.outcomes
    assert report.kills == settings.kills, "every planned SIGKILL hit a running manager"
    assert report.compactions == settings.compactions
    assert report.apiserver_restarts == settings.apiserver_restarts
    assert report.violations == [], "\n".join(
        f"{v['rule']}: {v['kind']} {v['namespace']}/{v['name']}: {v['message']}"
        for v in report.violations)
    # The placement rules judged what ran: every running pod's node against its flavor.
    assert report.watcher["pods_placement_checked"] > 0
    attacked = set(HOSTILE_KINDS) & set(settings.integrations)
    if settings.hostile > 0 and attacked:
        assert_tenant_held_off(report.tenant, attacked)


def assert_tenant_held_off(tenant: dict[str, Any], attacked: set[str]) -> None:
    """The tenant attacked every kind it could, each edit met its protection at least
    once, and none took effect (those are violations too, named as they happened).

    An eviction may come first: a scaled child is then stopped rather than set back, and
    a JobFlow readmitted with its edited JobTemplate (Kueue sizes the new Workload from
    it); the run's other attacks still meet the protection.
    """
    assert set(tenant["lifecycles"]) == attacked, tenant["lifecycles"]
    outcomes: dict[str, dict[str, int]] = tenant["outcomes"]
    expected: dict[str, tuple[str, ...]] = {
        "admission": ("refused",), "scale": ("set-back",), "claim": ("suspended",)}
    if "daemonjob" in attacked:
        expected["nodes"] = ("refused",)
    if "jobflow" in attacked:
        expected["template"] = ("ignored", "readmitted-with-it")
    for attempt, good in expected.items():
        met = sum(outcomes.get(attempt, {}).get(outcome, 0) for outcome in good)
        assert met >= 1, (attempt, outcomes)
    took_effect = {(a, o): n for a, by in outcomes.items() for o, n in by.items()
                   if o in BAD_OUTCOMES}
    assert not took_effect, took_effect
