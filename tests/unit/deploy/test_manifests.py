"""The in-cluster manifests: the committed ones are the render of the code, and the render
has what a production deployment needs."""

from __future__ import annotations

import io
import pathlib
import shutil
import subprocess
from collections.abc import Iterable
from contextlib import redirect_stdout
from typing import Any, Literal

import pytest
import yaml

from integrations.__main__ import manager_options
from integrations.__main__ import parser as cli_parser
from integrations.catalog import DEFAULT_INTEGRATIONS, reference_names
from integrations.deploy import (
    WEBHOOK_CONFIGURATION_NAME,
    KueueConfigPatchError,
    cert_manager_overlay,
    integration_rbac,
    patch_configmap,
    patch_configuration,
    render,
    render_text,
    rules_for,
)
from integrations.deploy.__main__ import main
from integrations.deploy.render import (
    CERT_DIR,
    GENERATED_HEADER,
    SELECTOR,
    WEBHOOK_SERVICE,
    manager_args,
    webhook_paths,
)
from integrations.manager import ManagerOptions
from jobframework.config import CONFIGMAP_KEY, parse_configuration
from jobframework.plugins import load_integration
from jobframework.rbac import PolicyRule
from jobframework.runtime.objects import Object

ROOT = pathlib.Path(__file__).resolve().parents[3]
CONFIG = ROOT / "config"
REGENERATE = "python -m integrations.deploy render --output config/default"
NS = "kueue-jobframework-system"


def _objects(files: dict[str, list[Object]]) -> dict[tuple[str, str, str], Object]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
            for name, objects in files.items() if name not in (
                "kustomization.yaml", "kueue-config-patch.yaml")
            for o in objects}


def _one(files: dict[str, list[Object]], kind: str) -> Object:
    (obj,) = [o for objects in files.values() for o in objects if o["kind"] == kind]
    return obj


# --- no drift -----------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", ["default", "cert-manager"])
def test_committed_manifests_are_the_render(folder: str) -> None:
    expected = render_text(render() if folder == "default"
                           else cert_manager_overlay(base="../default"))
    directory = CONFIG / folder
    committed = {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.glob("*"))}
    hint = f"config/{folder} differs from the code's render: run `{REGENERATE}`"
    assert sorted(committed) == sorted(expected), hint
    for name, text in expected.items():
        assert committed[name] == text, f"{hint} ({name} differs)"


def test_render_command_writes_the_same_files(tmp_path: pathlib.Path) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["render", "--output", str(tmp_path / "config" / "default")]) == 0
    for folder in ("default", "cert-manager"):
        written = {p.name: p.read_text() for p in (tmp_path / "config" / folder).glob("*")}
        committed = {p.name: p.read_text() for p in (CONFIG / folder).glob("*")}
        assert written == committed, f"`{REGENERATE}` does not reproduce config/{folder}"
    assert len(out.getvalue().splitlines()) == len(list((tmp_path / "config").rglob("*.yaml")))


def test_render_removes_its_stale_files_only(tmp_path: pathlib.Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "old.yaml").write_text(GENERATED_HEADER + "---\n{}\n")
    (base / "mine.yaml").write_text("kind: Mine\n")
    with redirect_stdout(io.StringIO()):
        main(["render", "--output", str(base), "--no-cert-manager-overlay"])
    assert not (base / "old.yaml").exists()
    assert (base / "mine.yaml").exists()
    assert not (tmp_path / "cert-manager").exists()


# --- the Deployment -----------------------------------------------------------------------------


def test_deployment_runs_replicated_non_root_and_read_only() -> None:
    deployment = _one(render(), "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["requests"] and container["resources"]["limits"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == SELECTOR
    assert spec["selector"]["matchLabels"] == spec["template"]["metadata"]["labels"] == SELECTOR


def test_deployment_probes_ports_and_args() -> None:
    (container,) = _one(render(), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8081}
    assert {p["containerPort"] for p in container["ports"]} == {9443, 8080, 8081}
    args = container["args"]
    assert args[:10] == ["run", "--in-cluster", "--leader-elect", "--webhook-port", "9443",
                         "--health-probe-bind-address", ":8081",
                         "--metrics-bind-address", ":8080", "--cert-dir"]
    assert args[args.index("--integrations") + 1] == ",".join(DEFAULT_INTEGRATIONS)
    assert "--kueue-config-from-cluster" in args
    assert "--cert-management" not in args
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


@pytest.mark.parametrize("cert_management", ["internal", "cert-manager"])
def test_deployment_args_are_the_managers_in_cluster_options(
        cert_management: Literal["internal", "cert-manager"],
        monkeypatch: pytest.MonkeyPatch) -> None:
    files = render(cert_management=cert_management)
    (container,) = _one(files, "Deployment")["spec"]["template"]["spec"]["containers"]
    monkeypatch.setenv("POD_NAMESPACE", NS)
    args = cli_parser().parse_args(container["args"])
    assert args.kueue_config_from_cluster and args.in_cluster
    options = manager_options(args)
    assert options.integrations == DEFAULT_INTEGRATIONS
    assert (options.webhook_host, options.webhook_port) == ("0.0.0.0", 9443)
    assert options.health_probe_bind_address == ":8081"
    assert options.metrics_bind_address == ":8080"
    assert options.leader_election is not None and options.leader_election.namespace == NS
    assert not options.install_crds and not options.register_webhooks
    assert options.cert_dir == pathlib.Path(CERT_DIR)
    assert options.cert_management == ("internal" if cert_management == "internal"
                                       else "files")
    assert options.webhook_service_name == WEBHOOK_SERVICE
    assert options.webhook_configuration_name == WEBHOOK_CONFIGURATION_NAME


def test_deployment_certificate_volume() -> None:
    pod = _one(render(), "Deployment")["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[CERT_DIR]] == {"name": "cert", "emptyDir": {}}
    assert volumes[mounts["/tmp"]] == {"name": "tmp", "emptyDir": {}}

    cm = _one(render(cert_management="cert-manager"), "Deployment")["spec"]["template"]["spec"]
    (container,) = cm["containers"]
    cert = next(v for v in cm["volumes"] if v["name"] == "cert")
    assert cert == {"name": "cert",
                    "secret": {"secretName": "kueue-jobframework-webhook-server-cert"}}
    assert next(m for m in container["volumeMounts"] if m["name"] == "cert")["readOnly"] is True
    assert container["args"] == manager_args(DEFAULT_INTEGRATIONS,
                                             cert_management="cert-manager")


def test_services_pdb_and_namespace() -> None:
    files = render()
    (namespace,) = files["namespace.yaml"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    (service,) = files["service.yaml"]
    assert service["metadata"]["name"] == WEBHOOK_SERVICE
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": 9443,
                                         "protocol": "TCP"}]
    (metrics,) = files["metrics-service.yaml"]
    assert metrics["spec"]["ports"][0]["port"] == 8080
    (pdb,) = files["pdb.yaml"]
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": SELECTOR}}
    assert {s["spec"]["selector"]["app.kubernetes.io/component"]
            for s in (service, metrics)} == {"controller-manager"}


def test_kustomization_lists_every_resource_but_the_kueue_patch() -> None:
    files = render()
    (kustomization,) = files["kustomization.yaml"]
    assert sorted(kustomization["resources"]) == sorted(
        set(files) - {"kustomization.yaml", "kueue-config-patch.yaml"})
    assert "namespace" not in kustomization, "a namespace transformer would move the Role " \
        "in Kueue's namespace"


# --- webhooks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("integrations", [DEFAULT_INTEGRATIONS, reference_names(), ("batchjob",)])
def test_webhooks_cover_every_kind_of_the_integrations(integrations: tuple[str, ...]) -> None:
    files = render(integrations)
    configs = {o["kind"]: o for o in files["webhooks.yaml"]}
    for config in configs.values():
        assert config["metadata"]["name"] == WEBHOOK_CONFIGURATION_NAME
        for hook in config["webhooks"]:
            assert hook["clientConfig"]["service"]["name"] == WEBHOOK_SERVICE
            assert hook["clientConfig"]["service"]["namespace"] == NS
            assert hook["clientConfig"]["service"]["port"] == 443
            assert "caBundle" not in hook["clientConfig"]
            assert hook["failurePolicy"] == "Fail"
    served = {p for name in integrations for p in webhook_paths(name)}
    hooks = [h for c in configs.values() for h in c["webhooks"]]
    assert {h["clientConfig"]["service"]["path"] for h in hooks} == served
    intercepted = {(r["apiGroups"][0], r["resources"][0], op)
                   for h in hooks for r in h["rules"] for op in r["operations"]}
    for name in integrations:
        for res in load_integration(name).webhook_resources():
            assert (res.group, res.plural, "CREATE") in intercepted, (name, res.kind)
            assert (res.group, res.plural, "UPDATE") in intercepted, (name, res.kind)
        gvk = load_integration(name).gvk
        mutating = [h for h in configs["MutatingWebhookConfiguration"]["webhooks"]
                    if h["rules"][0]["apiGroups"] == [gvk.group]
                    and h["name"].startswith(f"m{gvk.kind.lower()}.")]
        assert mutating and mutating[0]["rules"][0]["operations"] == ["CREATE"], name


def test_webhook_configuration_name_is_the_managers() -> None:
    assert ManagerOptions().webhook_configuration_name == WEBHOOK_CONFIGURATION_NAME


def test_cert_manager_annotations() -> None:
    files = render(cert_management="cert-manager")
    for config in files["webhooks.yaml"]:
        assert config["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": f"{NS}/kueue-jobframework-serving-cert"}
    kinds = {o["kind"]: o for o in files["certificate.yaml"]}
    assert kinds["Certificate"]["spec"]["dnsNames"][0] == f"{WEBHOOK_SERVICE}.{NS}.svc"
    assert kinds["Certificate"]["spec"]["secretName"] == "kueue-jobframework-webhook-server-cert"
    assert "certificate.yaml" in files["kustomization.yaml"][0]["resources"]


# --- RBAC ---------------------------------------------------------------------------------------


def _rendered_rules(files: dict[str, list[Object]]) -> list[tuple[str | None, PolicyRule]]:
    out: list[tuple[str | None, PolicyRule]] = []
    for obj in files["rbac.yaml"]:
        if obj["kind"] not in ("ClusterRole", "Role"):
            continue
        for r in obj["rules"]:
            out.append((obj["metadata"].get("namespace"), PolicyRule(
                r["apiGroups"], r["resources"], r["verbs"], r.get("resourceNames", ()))))
    return out


def _covered(rendered: Iterable[tuple[str | None, PolicyRule]], needed: PolicyRule,
             namespace: str) -> bool:
    want_ns = None if needed.cluster_wide else (
        namespace if needed.namespace == "@manager" else needed.namespace)
    names = needed.resource_names or ("",)
    return all(
        any(ns == want_ns and r.allows(v, g, res, name=n, namespace=None)
            for ns, r in rendered)
        for g in needed.groups for res in needed.resources for v in needed.verbs
        for n in names)


@pytest.mark.parametrize("name", list(reference_names()))
def test_rbac_includes_each_integrations_rules(name: str) -> None:
    files = render([name])
    rendered = _rendered_rules(files)
    for needed in (*integration_rbac(name), *rules_for([name])):
        assert _covered(rendered, needed, NS), (name, needed)


def test_rbac_roles_and_bindings() -> None:
    files = render()
    objects = files["rbac.yaml"]
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects}
    assert ("ClusterRole", None, "kueue-jobframework-manager-role") in roles
    assert ("Role", NS, "kueue-jobframework-leader-election-role") in roles
    assert ("Role", NS, "kueue-jobframework-manager-role") in roles
    assert ("Role", "kueue-system", "kueue-jobframework-manager-role") in roles
    for binding in (o for o in objects if o["kind"].endswith("Binding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount",
                                        "name": "kueue-jobframework-controller-manager",
                                        "namespace": NS}]
    (election,) = [o for o in objects if o["metadata"]["name"].endswith("election-role")]
    assert election["rules"] == [{"apiGroups": ["coordination.k8s.io"],
                                  "resources": ["leases"],
                                  "verbs": ["get", "create", "update"]}]
    cluster = next(o for o in objects if o["kind"] == "ClusterRole")
    granted = {(g, r) for rule in cluster["rules"] for g in rule["apiGroups"]
               for r in rule["resources"]}
    assert ("apiextensions.k8s.io", "customresourcedefinitions") not in granted, \
        "in-cluster mode installs no CRDs"
    assert not any("*" in rule["verbs"] or "*" in rule["resources"]
                   for rule in cluster["rules"])


def test_rbac_command_prints_the_rbac_manifest() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["rbac"]) == 0
    assert list(yaml.safe_load_all(out.getvalue())) == render()["rbac.yaml"]


# --- CRDs and Kueue's Configuration ----------------------------------------------------------


def test_crds_of_every_integration() -> None:
    files = render(reference_names())
    names = {c["metadata"]["name"] for c in files["crds.yaml"]}
    assert names == {"jobflows.api.practice.com", "jobtemplates.api.practice.com",
                     "daemonjobs.api.practice.com", "appwrappers.workload.codeflare.dev"}
    assert "crds.yaml" not in render(["batchjob"])


def _kueue_document(**integrations: Any) -> dict[str, Any]:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": "kueue-system",
            "integrations": {"frameworks": ["batch/job", "workload.codeflare.dev/appwrapper"],
                             **integrations}}


def test_kueue_configuration_patch() -> None:
    patched = patch_configuration(_kueue_document(externalFrameworks=["Other.v1.x.io"]),
                                  DEFAULT_INTEGRATIONS)
    assert patched["integrations"] == {
        "frameworks": ["batch/job"],
        "externalFrameworks": ["Other.v1.x.io", "JobFlow.v1alpha1.api.practice.com",
                               "DaemonJob.v1alpha1.api.practice.com",
                               "AppWrapper.v1beta2.workload.codeflare.dev"]}
    assert patch_configuration(patched, DEFAULT_INTEGRATIONS) == patched, "idempotent"
    # Kueue accepts what comes out.
    config = parse_configuration(patched)
    assert "AppWrapper.v1beta2.workload.codeflare.dev" in config.external_frameworks()
    (fragment,) = render()["kueue-config-patch.yaml"]
    assert fragment["integrations"]["externalFrameworks"] == \
        patched["integrations"]["externalFrameworks"][1:]


def test_kueue_configuration_patch_cannot_empty_the_frameworks() -> None:
    with pytest.raises(KueueConfigPatchError, match=r"reads as \[batch/job\]"):
        patch_configuration({"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                             "kind": "Configuration"}, ["batchjob"])
    with pytest.raises(KueueConfigPatchError):  # both built-ins gone: nothing left
        patch_configuration(_kueue_document(), ["batchjob", "appwrapper"])
    ok = patch_configuration({"integrations": {"frameworks": ["batch/job", "pod"]}},
                             ["batchjob"])
    assert ok["integrations"]["frameworks"] == ["pod"]


def test_kueue_config_command_patches_the_configmap(tmp_path: pathlib.Path) -> None:
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system",
                              "uid": "1", "resourceVersion": "7", "annotations": {
                                  "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
                 "data": {CONFIGMAP_KEY: yaml.safe_dump(_kueue_document())}}
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(configmap))
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["kueue-config", str(path)]) == 0
    patched = yaml.safe_load(out.getvalue())
    assert patched == patch_configmap(configmap, DEFAULT_INTEGRATIONS)
    assert patched["metadata"] == {"name": "kueue-manager-config", "namespace": "kueue-system"}
    document = yaml.safe_load(patched["data"][CONFIGMAP_KEY])
    assert document["integrations"]["frameworks"] == ["batch/job"]


# --- kustomize ----------------------------------------------------------------------------------


def _kustomize(folder: pathlib.Path) -> dict[tuple[str, str, str], Object]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its kustomize) is not installed")
    built = subprocess.run([kubectl, "kustomize", str(folder)], check=True,
                           capture_output=True, text=True).stdout
    return _objects({"built": [o for o in yaml.safe_load_all(built) if o]})


def test_kustomize_builds_the_base_as_rendered() -> None:
    assert _kustomize(CONFIG / "default") == _objects(render())


def test_kustomize_builds_the_overlay_as_the_cert_manager_render() -> None:
    assert _kustomize(CONFIG / "cert-manager") == _objects(render(cert_management="cert-manager"))


def test_render_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown integration"):
        render(["nope"])
    with pytest.raises(ValueError, match="replicas"):
        render(replicas=0)
