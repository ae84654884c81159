"""The external-framework manager reads Kueue's Configuration: the CLI, which reference
integrations run, and the options their reconcilers and webhooks get."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import attrs
import pytest

from integrations.__main__ import main, parser
from integrations.catalog import DEFAULT_INTEGRATIONS
from integrations.manager import ExternalFrameworkManager, ManagerOptions, select_integrations
from jobframework.config import (
    API_VERSION,
    KIND,
    Configuration,
    ConfigurationError,
    default_configuration,
    parse_configuration,
)
from jobframework.constants import FeatureGate, KueueVersion
from jobframework.plugins import Wiring
from jobframework.reconciler import ReconcilerOptions
from jobframework.runtime.manager import Manager
from jobframework.testing import APIServer
from jobframework.webhook import WebhookServer

JOBFLOW = "JobFlow.v1alpha1.api.practice.com"
APPWRAPPER = "AppWrapper.v1beta2.workload.codeflare.dev"


def config(**fields: Any) -> Configuration:
    return parse_configuration({"apiVersion": API_VERSION, "kind": KIND, **fields})


# --- the CLI --------------------------------------------------------------------------------


def test_cli_defaults_keep_todays_behaviour() -> None:
    args = parser().parse_args(["run"])
    assert args.kueue_config is None
    assert args.kueue_config_from_cluster is False
    assert args.integrations is None
    assert args.wait_for_pods_ready is None
    assert args.kueue_version is KueueVersion.V0_19
    assert args.kueue_namespace == "kueue-system"
    assert args.kueue_configmap == "kueue-manager-config"


def test_cli_kueue_config_flags() -> None:
    args = parser().parse_args(["run", "--kueue-config", "/etc/kueue.yaml",
                                 "--kueue-version", "main", "--no-wait-for-pods-ready",
                                 "--integrations", "jobflow"])
    assert args.kueue_config == Path("/etc/kueue.yaml")
    assert args.kueue_version is KueueVersion.MAIN
    assert args.wait_for_pods_ready is False
    assert args.integrations == ("jobflow",)
    args = parser().parse_args(["run", "--kueue-config-from-cluster",
                                 "--kueue-namespace", "k", "--kueue-configmap", "cm"])
    assert (args.kueue_config_from_cluster, args.kueue_namespace, args.kueue_configmap) == (
        True, "k", "cm")


def test_cli_file_and_cluster_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["run", "--kueue-config", "x", "--kueue-config-from-cluster"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_cli_help_documents_the_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--kueue-config PATH" in out
    assert "--kueue-config-from-cluster" in out
    assert "Kueue v0.19.2's defaults apply" in out


def test_invalid_config_file_exits_with_the_field_path(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "kueue.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\n"
                    "waitForPodsReady:\n  timeout: abc\n")
    with caplog.at_level(logging.ERROR, logger="integrations"):
        code = main(["run", "--kueue-config", str(path), "--kubeconfig",
                     str(tmp_path / "no-kubeconfig")])
    assert code == 2
    assert 'waitForPodsReady.timeout: invalid duration "abc"' in caplog.text


# --- which integrations run -----------------------------------------------------------------


def test_without_external_frameworks_all_integrations_run() -> None:
    assert select_integrations(default_configuration()) == DEFAULT_INTEGRATIONS


def test_external_frameworks_pick_the_integrations() -> None:
    cfg = config(integrations={"externalFrameworks": [APPWRAPPER, "Foo.v1.example.com",
                                                      JOBFLOW]})
    # In the Configuration's order; entries of no installed integration are left alone.
    assert select_integrations(cfg) == ("appwrapper", "jobflow")
    assert select_integrations(cfg, ("daemonjob",)) == ("daemonjob",), \
        "--integrations says otherwise"


def test_external_frameworks_with_none_of_ours_is_a_startup_error() -> None:
    cfg = config(integrations={"externalFrameworks": ["Foo.v1.example.com"]})
    with pytest.raises(ConfigurationError, match=r"lists none of the installed integrations "
                                                 r"\(appwrapper, batchjob, daemonjob, jobflow\)"):
        select_integrations(cfg)


def test_manager_runs_what_the_configuration_lists(caplog: pytest.LogCaptureFixture) -> None:
    client = APIServer().client()
    cfg = config(integrations={"externalFrameworks": [JOBFLOW]})
    mgr = ExternalFrameworkManager(client, ManagerOptions(kueue_config=cfg))
    assert [i.name for i in mgr.integrations] == ["jobflow"]
    with caplog.at_level(logging.WARNING, logger="integrations.manager"):
        mgr = ExternalFrameworkManager(client, ManagerOptions(
            kueue_config=cfg, integrations=("jobflow", "appwrapper")))
    assert [i.name for i in mgr.integrations] == ["jobflow", "appwrapper"]
    assert f"does not list {APPWRAPPER}" in caplog.text
    assert f"does not list {JOBFLOW}" not in caplog.text
    default = ExternalFrameworkManager(client)
    assert tuple(i.name for i in default.integrations) == DEFAULT_INTEGRATIONS
    assert default.kueue_config == default_configuration()


# --- the options the integrations get -------------------------------------------------------


@attrs.frozen
class _Wiring:
    webhook_paths: tuple[str, ...] = ()


async def _kueue_options(options: ManagerOptions) -> ReconcilerOptions:
    """Start the manager on the in-memory server with each integration's ``setup``
    replaced by a recorder; return the ReconcilerOptions the integrations received."""
    client = APIServer().client()
    mgr = ExternalFrameworkManager(client, attrs.evolve(
        options, install_crds=False, register_webhooks=False, probe_namespace=None,
        ready_timeout=10.0))
    seen: list[ReconcilerOptions] = []

    async def setup(mgr: Manager, *, webhook_server: WebhookServer | None = None,
                    kueue: ReconcilerOptions | None = None) -> Wiring:
        assert kueue is not None
        seen.append(kueue)
        return _Wiring()

    mgr.integrations = [attrs.evolve(i, setup=setup) for i in mgr.integrations]
    async with mgr:
        pass
    assert len(seen) == len(mgr.integrations)
    return seen[0]


async def test_configuration_reaches_the_integrations() -> None:
    cfg = config(manageJobsWithoutQueueName=True,
                 featureGates={"ShortWorkloadNames": True},
                 integrations={"externalFrameworks": [JOBFLOW, "Foo.v1.example.com"],
                               "labelKeysToCopy": ["team"]},
                 managedJobsNamespaceSelector={"matchLabels": {"kueue": "on"}},
                 objectRetentionPolicies={"workloads": {"afterDeactivatedByKueue": "1m"}})
    kueue = await _kueue_options(ManagerOptions(kueue_config=cfg))
    assert kueue.features.enabled(FeatureGate.SHORT_WORKLOAD_NAMES)
    assert kueue.features.version is KueueVersion.V0_19
    assert kueue.manage_jobs_without_queue_name is True
    assert kueue.wait_for_pods_ready is True
    assert kueue.label_keys_to_copy == {"team"}
    assert kueue.workload_retention_policy is not None
    assert kueue.workload_retention_policy.after_deactivated_by_kueue == 60
    assert kueue.managed_jobs_namespace_selector is not None
    assert kueue.managed_jobs_namespace_selector.matches({"kueue": "on"})
    assert not kueue.managed_jobs_namespace_selector.matches({})
    assert kueue.integration_manager is not None
    assert set(kueue.integration_manager.external_job_types()) == {"Foo.v1.example.com"}, \
        "other external kinds are Kueue-managed owners; ours are integrations"


async def test_kueue_version_and_pods_ready_override() -> None:
    cfg = config(featureGates={"DisableWaitForPodsReady": False})
    kueue = await _kueue_options(ManagerOptions(
        kueue_config=cfg, kueue_version=KueueVersion.MAIN, wait_for_pods_ready=False,
        integrations=("jobflow",)))
    assert kueue.features.version is KueueVersion.MAIN
    assert kueue.wait_for_pods_ready is False
    defaults = await _kueue_options(ManagerOptions(integrations=("jobflow",)))
    assert defaults.wait_for_pods_ready is True, "Kueue v0.19.2 keeps PodsReady by default"
    assert defaults.manage_jobs_without_queue_name is False
    assert defaults.managed_jobs_namespace_selector is not None
    assert not defaults.managed_jobs_namespace_selector.matches(
        {"kubernetes.io/metadata.name": "kueue-system"})


def test_run_goes_through_the_public_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m integrations run`` is ``jobframework.runtime.run`` around the manager:
    the event loop asked for, the collector tuned, stopped by the runner's signal event."""
    import asyncio

    from jobframework.runtime import runner

    calls: list[dict[str, Any]] = []

    def fake_run(main: Any, **kwargs: Any) -> None:
        coro = main(asyncio.Event())
        assert asyncio.iscoroutine(coro)
        coro.close()
        calls.append(kwargs)

    monkeypatch.setattr(runner, "run", fake_run)
    assert main(["run", "--kubeconfig", "/nonexistent"]) == 0
    assert main(["run", "--kubeconfig", "/nonexistent", "--event-loop", "asyncio"]) == 0
    assert calls == [{"event_loop": "auto", "gc_tuning": True},
                     {"event_loop": "asyncio", "gc_tuning": True}]


def test_event_loop_uvloop_without_uvloop_is_a_one_line_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import sys

    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    before = gc.get_threshold()
    with pytest.raises(SystemExit, match=r"^--event-loop uvloop: uvloop is not installed"):
        main(["run", "--kubeconfig", "/nonexistent", "--event-loop", "uvloop"])
    assert gc.get_threshold() == before, "nothing was changed before the refusal"
