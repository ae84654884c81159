"""``python -m jobframework.scaffold``: option checks, the files it renders, and the
generated package itself (its tests, ruff, mypy --strict, the plugin contract, and
``deploy render`` once installed)."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobframework.plugins import ENTRY_POINT_GROUP, integration_from_module
from jobframework.scaffold import (
    LINE_LENGTH,
    MAX_KIND_LENGTH,
    TODO_MARKER,
    PodSetOption,
    ScaffoldError,
    parse_pod_sets,
    plural_of,
    render,
    resolve,
    scaffold,
)
from jobframework.scaffold.__main__ import main

SPARKAPP: dict[str, Any] = {
    "group": "analytics.example.com", "version": "v1", "kind": "SparkApp",
    "pod_sets": "driver:1,executor:3", "partial_admission": "executor"}


def error_of(**options: Any) -> ScaffoldError:
    with pytest.raises(ScaffoldError) as info:
        resolve(**{**SPARKAPP, **options})
    return info.value


def run(args: list[str], cwd: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    """``args`` run by this interpreter with ``paths`` first on its path: the generated
    package is not installed."""
    inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), *inherited])}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240, check=False)


# --- options ------------------------------------------------------------------------------


def test_defaults_come_from_the_kind() -> None:
    options = resolve(group="analytics.example.com", version="v1", kind="SparkApp")
    assert (options.name, options.package, options.distribution, options.plural) == (
        "sparkapp", "sparkapp_integration", "sparkapp-integration", "sparkapps")
    assert options.pod_sets == (PodSetOption("main", 1),)
    assert options.partial_admission is None
    assert options.framework_name == "SparkApp.v1.analytics.example.com"
    assert options.job_class == "SparkAppJob"
    assert resolve(group="a.io", version="v1", kind="RenderJob").job_class == "RenderJobAdapter"
    named = resolve(group="a.io", version="v1", kind="SparkApp", name="spark-app")
    assert (named.package, named.distribution) == ("spark_app_integration",
                                                   "spark-app-integration")


@pytest.mark.parametrize(("kind", "plural"), [
    ("SparkApp", "sparkapps"), ("Batch", "batches"), ("Policy", "policies"),
    ("Gateway", "gateways"), ("Index", "indexes"), ("Mesh", "meshes"),
])
def test_plural_of(kind: str, plural: str) -> None:
    assert plural_of(kind) == plural


def test_pod_sets_in_text_form() -> None:
    assert parse_pod_sets("driver:1, executor:3,shuffle") == (
        PodSetOption("driver", 1), PodSetOption("executor", 3), PodSetOption("shuffle", 1))
    options = resolve(group="a.io", version="v1", kind="SparkApp",
                      pod_sets={"driver": 1, "worker-group": 4})
    assert [options.pod_set_field(ps.name) for ps in options.pod_sets] == [
        "driver", "workerGroup"]


@pytest.mark.parametrize(("options", "option", "detail"), [
    ({"group": "Analytics.example.com"}, "group", "a lowercase RFC 1123 subdomain"),
    ({"group": "analytics"}, "group", "at least one dot"),
    ({"group": "batch.k8s.io"}, "group", "reserved for Kubernetes' own APIs"),
    ({"group": "a." * 32 + "io"}, "group", "no more than 63 characters"),
    ({"version": "1"}, "version", "must be v<N>, v<N>alpha<M> or v<N>beta<M>"),
    ({"version": "v1alpha"}, "version", "must be v<N>"),
    ({"version": "v0"}, "version", "must be v<N>"),
    ({"kind": "sparkApp"}, "kind", "must be CamelCase"),
    ({"kind": "Spark_App"}, "kind", "must be CamelCase"),
    ({"kind": "SPARK"}, "kind", "not all capitals"),
    ({"kind": "S" + "a" * MAX_KIND_LENGTH}, "kind", "no more than 40 characters"),
    ({"kind": "Generic"}, "kind", "GenericJob would shadow a name"),
    ({"plural": "Spark_Apps"}, "plural", "RFC 1123 label"),
    ({"pod_sets": "driver:0"}, "pod_sets", "pod set 'driver': count 0 must be at least 1"),
    ({"pod_sets": "driver:x"}, "pod_sets", "count 'x' is not a whole number"),
    ({"pod_sets": "Driver:1"}, "pod_sets", "pod set 'Driver': a lowercase RFC 1123 label"),
    ({"pod_sets": "1st:1"}, "pod_sets", "must start with a letter"),
    ({"pod_sets": "driver,class"}, "pod_sets", "pod set 'class': is a reserved word"),
    ({"pod_sets": "driver,suspend"}, "pod_sets", "reserved word"),
    ({"pod_sets": "driver,json"}, "pod_sets", "reserved word"),  # BaseModel.json
    ({"pod_sets": "driver,driver"}, "pod_sets", "same spec field as pod set 'driver'"),
    ({"pod_sets": "a" * 31}, "pod_sets", "no more than 30 characters"),
    ({"pod_sets": ",".join(f"p{i}" for i in range(19))}, "pod_sets", "at most 18"),
    ({"pod_sets": ",driver"}, "pod_sets", "expected NAME[:COUNT]"),
    ({"partial_admission": "shuffle"}, "partial_admission", "'shuffle' is not a pod set"),
    ({"partial_admission": "driver"}, "partial_admission", "needs a count of at least 2"),
    ({"name": "Spark"}, "name", "RFC 1123 label"),
    ({"name": "jobflow"}, "name", "installed distribution kueue-jobframework"),
    ({"package": "class"}, "package", "must be a Python package name"),
    ({"package": "json"}, "package", "is taken"),
    ({"package": "jobframework"}, "package", "is taken"),
    ({"distribution": "-spark"}, "distribution", "must be a distribution name"),
    ({"distribution": "Kueue_JobFramework"}, "distribution", "kueue-jobframework's own"),
])
def test_a_bad_option_is_named(options: dict[str, Any], option: str, detail: str) -> None:
    err = error_of(**options)
    assert err.option == option
    assert detail in err.detail
    assert str(err).startswith(f"{option}: ")


def test_the_command_line_names_the_bad_flag(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--group", "analytics.example.com", "--version", "v1", "--kind", "SparkApp",
              "--pod-sets", "driver:1,executor:1", "--partial-admission", "executor",
              "--output", str(tmp_path / "out")])
    assert info.value.code == 2
    assert "error: --partial-admission: pod set 'executor' has 1 pod" in capsys.readouterr().err
    assert not (tmp_path / "out").exists(), "nothing written"


def test_existing_files_are_kept_without_force(tmp_path: Path) -> None:
    written = scaffold(output=tmp_path, **SPARKAPP)
    assert tmp_path / "pyproject.toml" in written
    (tmp_path / "pyproject.toml").write_text("mine")
    with pytest.raises(ScaffoldError) as info:
        scaffold(output=tmp_path, **SPARKAPP)
    assert info.value.option == "output"
    assert "already holds README.md, pyproject.toml, src/" in info.value.detail
    assert (tmp_path / "pyproject.toml").read_text() == "mine"
    scaffold(output=tmp_path, force=True, **SPARKAPP)
    assert (tmp_path / "pyproject.toml").read_text().startswith("[build-system]")


# --- what it renders ----------------------------------------------------------------------


def test_it_renders_an_installable_project() -> None:
    files = render(resolve(**SPARKAPP))
    pkg = "src/sparkapp_integration"
    assert sorted(files) == sorted([
        "pyproject.toml", "README.md", f"{pkg}/__init__.py", f"{pkg}/py.typed",
        f"{pkg}/api.py", f"{pkg}/crds/sparkapps.yaml", f"{pkg}/job.py",
        f"{pkg}/controller.py", f"{pkg}/webhook.py", f"{pkg}/setup.py", f"{pkg}/rbac.py",
        "tests/test_sparkapp.py", "tests/test_plugin.py"])
    project = tomllib.loads(files["pyproject.toml"])
    assert project["project"]["name"] == "sparkapp-integration"
    assert project["project"]["entry-points"][ENTRY_POINT_GROUP] == {
        "sparkapp": "sparkapp_integration"}
    assert any(d.startswith("kueue-jobframework") for d in project["project"]["dependencies"])
    assert project["tool"]["setuptools"]["package-data"] == {
        "sparkapp_integration": ["py.typed", "crds/*.yaml"]}
    assert project["tool"]["mypy"]["strict"] is True
    assert project["tool"]["ruff"]["line-length"] == LINE_LENGTH
    for path, text in files.items():
        if path.endswith(".py"):
            ast.parse(text, path)  # valid Python
    for module in ("api", "job", "controller", "webhook", "rbac"):
        assert TODO_MARKER in files[f"{pkg}/{module}.py"], module
    assert "async def test_admitted_partially" in files["tests/test_sparkapp.py"]
    plain = render(resolve(group="a.io", version="v1", kind="SparkApp"))
    assert "async def test_admitted_partially" not in plain["tests/test_sparkapp.py"]


def test_the_crd_has_suspend_a_template_per_pod_set_and_a_status() -> None:
    files = render(resolve(**{**SPARKAPP, "pod_sets": "driver:1,worker-group:3",
                              "partial_admission": "worker-group"}))
    [crd] = list(yaml.safe_load_all(files["src/sparkapp_integration/crds/sparkapps.yaml"]))
    assert crd["metadata"]["name"] == "sparkapps.analytics.example.com"
    spec = crd["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == (
        "analytics.example.com", "Namespaced", "SparkApp")
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    props = schema["spec"]["properties"]
    assert schema["spec"]["required"] == ["driver", "workerGroup"]
    assert list(props) == ["suspend", "driver", "workerGroup"]
    assert props["suspend"]["type"] == "boolean"
    driver, workers = props["driver"]["properties"], props["workerGroup"]["properties"]
    assert (driver["replicas"]["default"], workers["replicas"]["default"]) == (1, 3)
    assert "minReplicas" not in driver
    assert workers["minReplicas"]["minimum"] == 1
    assert workers["template"] == {"description": "The pods' PodTemplateSpec.",
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}
    status = schema["status"]["properties"]
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert set(status["podSets"]["items"]["properties"]) == {
        "name", "jobName", "active", "ready", "succeeded", "failed"}


@pytest.mark.parametrize("options", [
    {"group": "a" * 30 + "." + "b" * 32, "version": "v10beta20", "kind": "K" + "x" * 39,
     "name": "n" * 40, "package": "p" * 40, "distribution": "d" * 40,
     "pod_sets": "worker-group:2," + "a" * 30 + ":2,z:3", "partial_admission": "a" * 30},
    {"group": "x.io", "version": "v1", "kind": "Ab"},
])
def test_long_and_short_names_keep_the_lines_within_bounds(options: dict[str, Any],
                                                           tmp_path: Path) -> None:
    scaffold(output=tmp_path, **options)
    ruff = run(["-m", "ruff", "check", "--no-cache", "src", "tests"], tmp_path)
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr


# --- the generated package ----------------------------------------------------------------


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[Path]:
    """A SparkApp integration scaffolded into a temporary folder."""
    root = tmp_path / "sparkapp"
    scaffold(output=root, **SPARKAPP)
    yield root


def test_the_generated_package_passes_its_tests_ruff_and_mypy(generated: Path) -> None:
    src = generated / "src"
    tests = run(["-m", "pytest", "-q", "-p", "no:cacheprovider"], generated, src)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    # Six lifecycle tests, the partial admission one and four of the plugin contract.
    assert "11 passed" in tests.stdout.splitlines()[-1]
    ruff = run(["-m", "ruff", "check", "--no-cache", "src", "tests"], generated, src)
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr
    mypy = run(["-m", "mypy", "--strict"], generated, src)
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr
    assert "Success: no issues found in 9 source files" in mypy.stdout


def test_the_generated_package_is_a_plugin(generated: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(generated / "src"))
    try:
        module = importlib.import_module("sparkapp_integration")
        integration = integration_from_module("sparkapp", module)
        assert integration.framework_name == "SparkApp.v1.analytics.example.com"
        assert [crd["metadata"]["name"] for crd in integration.load_crds()] == [
            "sparkapps.analytics.example.com"]
        probe = integration.probe_object("ns")
        assert probe["metadata"]["namespace"] == "ns"
        assert set(probe["spec"]) == {"driver", "executor"}
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "sparkapp_integration"]:
            del sys.modules[name]


def test_deploy_render_takes_the_generated_package_once_installed(generated: Path,
                                                                  tmp_path: Path) -> None:
    # Installed as pip leaves a distribution: its metadata with the entry point, on the path.
    site = tmp_path / "site"
    info = site / "sparkapp_integration-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sparkapp-integration\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nsparkapp = sparkapp_integration\n")
    out = tmp_path / "deploy"
    rendered = run(["-m", "integrations.deploy", "render", "--integrations", "sparkapp",
                    "--output", str(out), "--no-cert-manager-overlay"],
                   tmp_path, generated / "src", site)
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    [crd] = [d for d in yaml.safe_load_all((out / "crds.yaml").read_text()) if d]
    assert crd["metadata"]["name"] == "sparkapps.analytics.example.com"
    assert "SparkApp.v1.analytics.example.com" in (out / "kueue-config-patch.yaml").read_text()
    webhooks = list(yaml.safe_load_all((out / "webhooks.yaml").read_text()))
    paths = {hook["clientConfig"]["service"]["path"] for doc in webhooks if doc
             for hook in doc["webhooks"]}
    assert paths == {"/mutate-analytics-example-com-v1-sparkapp",
                     "/validate-analytics-example-com-v1-sparkapp"}
    rbac = (out / "rbac.yaml").read_text()
    assert "sparkapps/status" in rbac and "sparkapps/finalizers" in rbac
