"""Integrations as plugins (jobframework.plugins): entry points, loading, errors; the
manager's webhook configuration specs."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import pytest

from integrations.__main__ import main as run_main
from integrations.catalog import DEFAULT_INTEGRATIONS, parse_integrations, reference_names
from integrations.deploy import render
from integrations.deploy.__main__ import main as deploy_main
from integrations.manager import webhook_specs
from jobframework.plugins import (
    ENTRY_POINT_GROUP,
    Integration,
    IntegrationLoadError,
    UnknownIntegrationError,
    by_framework_name,
    installed_integrations,
    integration_from_module,
    load_integration,
    load_integrations,
)
from jobframework.runtime.objects import GVK

#: A user's integration module: jobflow's machinery under a kind name of its own.
WIDGET_MODULE = """
from integrations import jobflow as _jf

FRAMEWORK_NAME = "Widget.v1.example.com"
RBAC = _jf.RBAC
CALLBACKS = _jf.CALLBACKS
load_crds = _jf.load_crds
register = _jf.register
setup = _jf.setup
probe_object = _jf.probe_object
"""


def install_distribution(root: Path, monkeypatch: pytest.MonkeyPatch, dist: str,
                         entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """An installed distribution as pip leaves it: a ``.dist-info`` with its entry points,
    and its modules, on ``sys.path``."""
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    for name, text in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(root))
    for name in modules:
        monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.fixture
def widget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_distribution(tmp_path / "widget", monkeypatch, "widget-integration",
                         {"widget": "widget_integration"},
                         {"widget_integration": WIDGET_MODULE})


def test_the_reference_integrations_are_entry_points_of_this_distribution() -> None:
    installed = installed_integrations()
    assert reference_names() == ("appwrapper", "batchjob", "daemonjob", "jobflow")
    for name in reference_names():
        assert installed[name].distribution == "kueue-jobframework"
        assert installed[name].value == f"integrations.{name}"
    assert set(DEFAULT_INTEGRATIONS) < set(reference_names())
    frameworks = {name: load_integration(name).framework_name for name in reference_names()}
    assert frameworks == {"appwrapper": "AppWrapper.v1beta2.workload.codeflare.dev",
                          "batchjob": "Job.v1.batch",
                          "daemonjob": "DaemonJob.v1alpha1.api.practice.com",
                          "jobflow": "JobFlow.v1alpha1.api.practice.com"}


def test_builtins_replaced_are_declared_by_the_integrations() -> None:
    assert load_integration("batchjob").replaces_builtin == "batch/job"
    assert load_integration("appwrapper").replaces_builtin == \
        "workload.codeflare.dev/appwrapper"
    assert load_integration("jobflow").replaces_builtin is None


def test_a_users_distribution_is_loaded_like_ours(widget: None) -> None:
    entry = installed_integrations()["widget"]
    assert entry.distribution == "widget-integration"
    integration = load_integration("widget")
    assert integration.name == "widget"
    assert integration.distribution == "widget-integration"
    assert integration.gvk == GVK("example.com", "v1", "Widget")
    assert integration.rbac == load_integration("jobflow").rbac
    assert "widget" not in reference_names()
    assert by_framework_name(["Widget.v1.example.com", "Other.v1.example.com",
                              "JobFlow.v1alpha1.api.practice.com"]) == ["widget", "jobflow"]
    assert parse_integrations("widget, jobflow,widget") == ("widget", "jobflow")


def test_deploy_render_takes_a_users_integration(widget: None) -> None:
    files = render(["widget"])
    [patch] = files["kueue-config-patch.yaml"]
    assert patch["integrations"]["externalFrameworks"] == ["Widget.v1.example.com"]
    [deployment] = files["deployment.yaml"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--integrations") + 1] == "widget"
    # Its CRDs, webhooks and RBAC are those its module declares (jobflow's, here).
    assert files["crds.yaml"] == render(["jobflow"])["crds.yaml"]
    assert files["webhooks.yaml"] == render(["jobflow"])["webhooks.yaml"]
    assert files["rbac.yaml"] == render(["jobflow"])["rbac.yaml"]


def test_unknown_names_list_what_is_installed(widget: None) -> None:
    with pytest.raises(UnknownIntegrationError,
                       match=r"^unknown integration\(s\) nope; installed: appwrapper, "
                             r"batchjob, daemonjob, jobflow, widget$"):
        load_integration("nope")
    with pytest.raises(argparse.ArgumentTypeError, match=r"unknown integration.*bogus"):
        parse_integrations("jobflow,bogus")
    with pytest.raises(argparse.ArgumentTypeError, match="none given"):
        parse_integrations(" , ")


def test_unknown_name_on_the_command_lines(capsys: pytest.CaptureFixture[str]) -> None:
    for main, argv in ((run_main, ["run", "--integrations", "nope"]),
                       (deploy_main, ["render", "--integrations", "nope"])):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "unknown integration(s) nope; installed: appwrapper, batchjob" in err


def test_a_plugin_that_fails_to_import_names_its_distribution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    install_distribution(tmp_path, monkeypatch, "broken-integration",
                         {"broken": "broken_integration"},
                         {"broken_integration": "raise RuntimeError('no spark here')\n"})
    with pytest.raises(IntegrationLoadError,
                       match=r"integration 'broken' \(distribution broken-integration, "
                             r"broken_integration\) failed to load: RuntimeError: no spark "
                             r"here"):
        load_integration("broken")
    assert deploy_main(["render", "--integrations", "broken",
                        "--output", str(tmp_path / "out")]) == 2
    assert "distribution broken-integration" in capsys.readouterr().err
    # Chosen from a Configuration, a broken plugin fails too: its kind would run unmanaged.
    with pytest.raises(IntegrationLoadError, match="broken-integration"):
        by_framework_name(["JobFlow.v1alpha1.api.practice.com"])


def test_a_plugin_missing_part_of_the_contract_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_distribution(tmp_path, monkeypatch, "half-integration",
                         {"half": "half_integration"},
                         {"half_integration": WIDGET_MODULE.replace("RBAC = _jf.RBAC", "")})
    with pytest.raises(IntegrationLoadError, match="integration 'half' does not export 'RBAC'"):
        load_integration("half")


def test_two_distributions_declaring_one_name(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    install_distribution(tmp_path / "a", monkeypatch, "jobflow-fork", {"jobflow": "fork"}, {})
    with pytest.raises(IntegrationLoadError,
                       match=r"'jobflow' is declared twice: by jobflow-fork \(fork\) and by "
                             r"kueue-jobframework \(integrations.jobflow\)"):
        installed_integrations()


def test_an_entry_point_may_name_an_integration_object(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    install_distribution(tmp_path, monkeypatch, "objs", {"w2": "objs_integration:INTEGRATION"},
                         {"objs_integration": WIDGET_MODULE + textwrap.dedent("""
                             import sys
                             from jobframework.plugins import integration_from_module
                             INTEGRATION = integration_from_module("w", sys.modules[__name__])
                             """)})
    integration = load_integration("w2")
    assert isinstance(integration, Integration)
    assert (integration.name, integration.distribution) == ("w2", "objs")


def test_a_builtin_framework_name_needs_an_external_one() -> None:
    import integrations.batchjob as module

    class NoExternal:
        def __getattr__(self, name: str) -> object:
            if name == "EXTERNAL_FRAMEWORK_NAME":
                raise AttributeError(name)
            return getattr(module, name)

    with pytest.raises(IntegrationLoadError, match=r"'batch/job' is not Kind\.version\.group"):
        integration_from_module("x", NoExternal())


def test_duplicates_are_dropped_in_order() -> None:
    assert [i.name for i in load_integrations(["jobflow", "batchjob", "jobflow"])] == [
        "jobflow", "batchjob"]


def test_jobflow_surface() -> None:
    jf = load_integration("jobflow")
    assert jf.framework_name == "JobFlow.v1alpha1.api.practice.com"
    assert jf.gvk == GVK("api.practice.com", "v1alpha1", "JobFlow")
    assert {c["metadata"]["name"] for c in jf.load_crds()} == {
        "jobflows.api.practice.com", "jobtemplates.api.practice.com"}
    probe = jf.probe_object("ns1")
    assert probe["metadata"]["namespace"] == "ns1"
    assert probe["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "probe"
    assert not probe["spec"].get("suspend")


def test_webhook_specs_from_paths_and_crds() -> None:
    resources = load_integration("jobflow").webhook_resources()
    paths = ["/mutate-api-practice-com-v1alpha1-jobflow",
             "/validate-api-practice-com-v1alpha1-jobflow",
             "/validate-api-practice-com-v1alpha1-jobtemplate"]
    mutating, validating = webhook_specs(paths, resources)
    assert [s.name for s in mutating] == ["mjobflow.api.practice.com"]
    assert [s.name for s in validating] == ["vjobflow.api.practice.com",
                                            "vjobtemplate.api.practice.com"]
    rule = validating[1].rules[0]
    assert rule["resources"] == ["jobtemplates"]
    assert rule["apiGroups"] == ["api.practice.com"]
    assert rule["operations"] == ["CREATE", "UPDATE"]
    assert mutating[0].rules[0]["operations"] == ["CREATE"]


def test_webhook_path_of_an_unknown_kind_is_an_error() -> None:
    resources = load_integration("jobflow").webhook_resources()
    with pytest.raises(ValueError, match="/validate-example-com-v1-widget"):
        webhook_specs(["/validate-example-com-v1-widget"], resources)


def test_batchjob_surface_and_its_webhooks_skip_system_namespaces() -> None:
    # batch/v1 has no CRD of ours: the Job webhooks come from webhook_resources(), scoped
    # as Kueue's own (kube-system and kueue-system left alone).
    bj = load_integration("batchjob")
    assert bj.framework_name == "Job.v1.batch"
    assert bj.gvk == GVK("batch", "v1", "Job")
    assert bj.load_crds() == []
    assert bj.probe_object("ns1")["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "probe"
    assert "batchjob" not in DEFAULT_INTEGRATIONS
    assert by_framework_name(["Job.v1.batch"]) == ["batchjob"]
    mutating, validating = webhook_specs(
        ["/mutate-batch-v1-job", "/validate-batch-v1-job"], bj.webhook_resources())
    # Webhook names need three DNS labels: a one-label group gets our domain.
    assert [s.name for s in mutating + validating] == [
        "mjob.batch.kueue-jobframework.io", "vjob.batch.kueue-jobframework.io"]
    assert validating[0].rules[0]["resources"] == ["jobs"]
    selector = mutating[0].namespace_selector
    assert selector is not None
    assert selector["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]
