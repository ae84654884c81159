"""The in-cluster manifests of the manager, rendered from the code.

:func:`render` returns a kustomize base as file name → objects: the Namespace, the
ServiceAccount, the RBAC gathered from the code's declarations (:mod:`.rbac`), the
Deployment, the webhook and metrics Services, the PodDisruptionBudget, the webhook
configurations (built from the paths each integration's webhook setup registers), the
integrations' CRDs, the AppWrapper operator's ConfigMap with upstream's defaults (mounted
into the Deployment, when the AppWrapper integration runs) and, outside the
kustomization's resources, the fragment of Kueue's Configuration to merge
(:mod:`.kueue_config`). :func:`cert_manager_overlay` is the overlay that hands the
serving certificate to cert-manager; :func:`write` writes both.

Nothing here is hand-maintained: ``config/default`` and ``config/cert-manager`` in the
repository are this module's output, and a unit test fails when they differ from a fresh
render (``python -m integrations.deploy render --output config/default`` rewrites them).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Final, Literal

import jsonpatch
import yaml

from integrations.catalog import DEFAULT_INTEGRATIONS
from integrations.manager import (
    APPWRAPPER_FRAMEWORK,
    DEFAULT_CERT_SECRET,
    DEFAULT_MANAGER_NAMESPACE,
    DEFAULT_WEBHOOK_SERVICE,
    webhook_specs,
)
from jobframework.config import CONFIGMAP_KEY, DEFAULT_CONFIGMAP_NAME
from jobframework.config import DEFAULT_NAMESPACE as KUEUE_NAMESPACE
from jobframework.plugins import check_names, load_integration, load_integrations
from jobframework.runtime.objects import Object
from jobframework.webhook import (
    ServiceRef,
    mutating_webhook_configuration,
    validating_webhook_configuration,
)

from .kueue_config import configuration_patch, replaced_builtins
from .rbac import WEBHOOK_CONFIGURATION_NAME, rbac_objects, rules_for, user_roles

__all__ = [
    "APPWRAPPER_CONFIG",
    "APPWRAPPER_CONFIG_DIR",
    "CERTIFICATE",
    "CERT_DIR",
    "CERT_SECRET",
    "DEFAULT_IMAGE",
    "DEFAULT_NAMESPACE",
    "DEPLOYMENT",
    "GENERATED_HEADER",
    "HEALTH_PORT",
    "ISSUER",
    "KUEUE_CONFIG_PATCH",
    "METRICS_PORT",
    "METRICS_SERVICE",
    "PREFIX",
    "SELECTOR",
    "SERVICE_ACCOUNT",
    "WEBHOOK_PORT",
    "WEBHOOK_SERVICE",
    "CertManagement",
    "cert_manager_overlay",
    "manager_args",
    "rbac_manifests",
    "render",
    "render_text",
    "to_yaml",
    "webhook_paths",
    "write",
]

CertManagement = Literal["internal", "cert-manager"]

#: The namespace the manager runs in (the manager's default ``--namespace``).
DEFAULT_NAMESPACE: Final = DEFAULT_MANAGER_NAMESPACE
#: Prefix of the names of every object.
PREFIX: Final = "kueue-jobframework"
SERVICE_ACCOUNT: Final = f"{PREFIX}-controller-manager"
DEPLOYMENT: Final = f"{PREFIX}-controller-manager"
#: The webhook Service (the manager's default ``--webhook-service-name``).
WEBHOOK_SERVICE: Final = DEFAULT_WEBHOOK_SERVICE
METRICS_SERVICE: Final = f"{PREFIX}-metrics-service"
#: The Secret of the serving certificate: kept by the manager (``internal``, its default
#: ``--cert-secret-name``) or written by cert-manager (``cert-manager``).
CERT_SECRET: Final = DEFAULT_CERT_SECRET
CERTIFICATE: Final = f"{PREFIX}-serving-cert"
ISSUER: Final = f"{PREFIX}-selfsigned-issuer"
#: Where the manager finds (or writes) ``tls.crt`` and ``tls.key``.
CERT_DIR: Final = "/tmp/k8s-webhook-server/serving-certs"
WEBHOOK_PORT: Final = 9443
HEALTH_PORT: Final = 8081
METRICS_PORT: Final = 8080
#: The file of the Kueue Configuration fragment (not a kustomize resource).
KUEUE_CONFIG_PATCH: Final = "kueue-config-patch.yaml"
#: The file of the AppWrapper operator's ConfigMap (``appwrapper-operator-config``).
APPWRAPPER_CONFIG: Final = "appwrapper-config.yaml"
#: Where the Deployment mounts that ConfigMap (its ``config.yaml`` is the manager's
#: ``--appwrapper-config``).
APPWRAPPER_CONFIG_DIR: Final = "/etc/appwrapper"
#: The UID and GID the image runs as (``USER`` in the Containerfile).
RUN_AS: Final = 65532

_LABELS: Final = {"app.kubernetes.io/name": PREFIX}
#: The labels selecting the manager's pods.
SELECTOR: Final = {**_LABELS, "app.kubernetes.io/component": "controller-manager"}

GENERATED_HEADER: Final = (
    "# Generated from the code by `python -m integrations.deploy render` (docs/deploy.md).\n"
    "# Do not edit: change the code and render again.\n")


def _default_image() -> str:
    try:
        return f"{PREFIX}:{version('kueue-jobframework')}"
    except PackageNotFoundError:  # running from a source tree that was never installed
        return f"{PREFIX}:latest"


#: The image the Deployment runs (build it from the Containerfile; override with
#: ``--image`` or kustomize's ``images``).
DEFAULT_IMAGE: Final = _default_image()


def _labels(**extra: str) -> dict[str, str]:
    return {**_LABELS, **extra}


def _meta(name: str, namespace: str | None = None, **labels: str) -> Object:
    meta: Object = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = _labels(**labels)
    return meta


def _check_integrations(integrations: Sequence[str]) -> tuple[str, ...]:
    return check_names(integrations)


# --- the pieces -----------------------------------------------------------------------------


def _runs_appwrapper(integrations: Sequence[str]) -> bool:
    return any(i.framework_name == APPWRAPPER_FRAMEWORK
               for i in load_integrations(integrations))


def _appwrapper_config_path() -> str:
    from integrations.appwrapper.config import OPERATOR_CONFIGMAP_KEY

    return f"{APPWRAPPER_CONFIG_DIR}/{OPERATOR_CONFIGMAP_KEY}"


def manager_args(integrations: Sequence[str], *, kueue_namespace: str = KUEUE_NAMESPACE,
                 cert_management: CertManagement = "internal") -> list[str]:
    """The container's arguments (after the image's ``python -m integrations``)."""
    args = ["run", "--in-cluster", "--leader-elect",
            "--webhook-port", str(WEBHOOK_PORT),
            "--health-probe-bind-address", f":{HEALTH_PORT}",
            "--metrics-bind-address", f":{METRICS_PORT}",
            "--cert-dir", CERT_DIR,
            "--integrations", ",".join(integrations),
            "--kueue-config-from-cluster", "--kueue-namespace", kueue_namespace]
    if _runs_appwrapper(integrations):
        args += ["--appwrapper-config", _appwrapper_config_path()]
    if cert_management != "internal":
        args += ["--cert-management", cert_management]
    return args


def _deployment(integrations: Sequence[str], *, namespace: str, image: str, replicas: int,
                kueue_namespace: str) -> Object:
    container: Object = {
        "name": "manager",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": manager_args(integrations, kueue_namespace=kueue_namespace),
        "env": [
            {"name": "POD_NAMESPACE",
             "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "ports": [
            {"name": "webhook-server", "containerPort": WEBHOOK_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
            {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": HEALTH_PORT},
                           "initialDelaySeconds": 5, "periodSeconds": 10},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": HEALTH_PORT},
                          "initialDelaySeconds": 15, "periodSeconds": 20},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                      "limits": {"cpu": "1", "memory": "1Gi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        # /tmp first: the certificate directory is mounted inside it.
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"},
                         {"name": "cert", "mountPath": CERT_DIR}],
    }
    volumes: list[Object] = [{"name": "tmp", "emptyDir": {}}, {"name": "cert", "emptyDir": {}}]
    if _runs_appwrapper(integrations):
        from integrations.appwrapper.config import OPERATOR_CONFIGMAP_NAME

        # After the certificate's: the cert-manager patches address that one by index.
        # Read once at start, as upstream reads its ConfigMap: restart to apply a change.
        volumes.append({"name": "appwrapper-config",
                        "configMap": {"name": OPERATOR_CONFIGMAP_NAME}})
        container["volumeMounts"].append({"name": "appwrapper-config",
                                          "mountPath": APPWRAPPER_CONFIG_DIR,
                                          "readOnly": True})
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "namespace": namespace, "labels": dict(SELECTOR)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(SELECTOR)},
            "template": {
                "metadata": {"labels": dict(SELECTOR),
                             "annotations": {"kubectl.kubernetes.io/default-container":
                                             "manager"}},
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "securityContext": {
                        "runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS,
                        "fsGroup": RUN_AS, "seccompProfile": {"type": "RuntimeDefault"}},
                    "affinity": {"podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 100,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": dict(SELECTOR)},
                                "topologyKey": "kubernetes.io/hostname"}}]}},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def webhook_paths(name: str) -> list[str]:
    """The paths the webhook setup of the installed integration ``name`` registers (its
    ``CALLBACKS.setup_webhook``, run on a server that never listens)."""
    return load_integration(name).webhook_paths()


def rbac_manifests(integrations: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE,
                   kueue_namespace: str = KUEUE_NAMESPACE,
                   kueue_configmap: str = DEFAULT_CONFIGMAP_NAME) -> list[Object]:
    """``rbac.yaml``: the ClusterRole, Roles and bindings of the manager's ServiceAccount,
    from the rules the code declares (:func:`~integrations.deploy.rbac.rules_for`)."""
    rules = rules_for(_check_integrations(integrations), kueue_namespace=kueue_namespace,
                      kueue_configmap=kueue_configmap)
    return rbac_objects(rules, prefix=PREFIX, namespace=namespace,
                        service_account=SERVICE_ACCOUNT, labels=_labels())


def _webhook_configurations(integrations: Sequence[str], namespace: str) -> list[Object]:
    paths: list[str] = []
    resources = []
    for integration in load_integrations(integrations):
        paths += integration.webhook_paths()
        resources += integration.webhook_resources()
    mutating, validating = webhook_specs(paths, resources)
    service = ServiceRef(WEBHOOK_SERVICE, namespace, 443)
    out: list[Object] = []
    for specs, build in ((mutating, mutating_webhook_configuration),
                         (validating, validating_webhook_configuration)):
        if specs:
            config = build(WEBHOOK_CONFIGURATION_NAME, specs, service=service)
            config["metadata"]["labels"] = _labels()
            out.append(config)
    return out


def _appwrapper_config_map(integrations: Sequence[str], namespace: str) -> list[Object]:
    """The AppWrapper operator's ConfigMap with upstream's defaults (what upstream creates
    when it finds none), when the AppWrapper integration runs."""
    if not _runs_appwrapper(integrations):
        return []
    from integrations.appwrapper.config import operator_config_map

    config_map = operator_config_map(namespace)
    config_map["metadata"]["labels"] = _labels()
    return [config_map]


def _crds(integrations: Sequence[str]) -> list[Object]:
    out: list[Object] = []
    for integration in load_integrations(integrations):
        for crd in integration.load_crds():
            crd = copy.deepcopy(crd)
            crd.pop("status", None)
            out.append(crd)
    return out


def _kustomization(resources: Sequence[str], patches: Sequence[Object] = ()) -> Object:
    out: Object = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                   "resources": list(resources)}
    if patches:
        out["patches"] = list(patches)
    return out


# --- cert-manager ---------------------------------------------------------------------------


def _cert_manager_objects(namespace: str) -> list[Object]:
    service = f"{WEBHOOK_SERVICE}.{namespace}.svc"
    return [
        {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
         "metadata": _meta(ISSUER, namespace), "spec": {"selfSigned": {}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
         "metadata": _meta(CERTIFICATE, namespace),
         "spec": {"dnsNames": [service, f"{service}.cluster.local"],
                  "issuerRef": {"kind": "Issuer", "name": ISSUER},
                  "secretName": CERT_SECRET}},
    ]


def _cert_manager_patches(namespace: str) -> list[tuple[dict[str, str], list[Object]]]:
    """(kustomize target, JSON patch) pairs turning the base into the cert-manager form:
    the certificate volume becomes cert-manager's Secret (mounted read-only), the manager
    is told so, and cert-manager's CA injector fills the webhooks' ``caBundle``."""
    deployment = {"group": "apps", "version": "v1", "kind": "Deployment",
                  "name": DEPLOYMENT, "namespace": namespace}
    pod = "/spec/template/spec"
    inject = [{"op": "add", "path": "/metadata/annotations",
               "value": {"cert-manager.io/inject-ca-from": f"{namespace}/{CERTIFICATE}"}}]
    return [
        (deployment, [
            {"op": "test", "path": f"{pod}/volumes/1/name", "value": "cert"},
            {"op": "replace", "path": f"{pod}/volumes/1",
             "value": {"name": "cert", "secret": {"secretName": CERT_SECRET}}},
            {"op": "test", "path": f"{pod}/containers/0/volumeMounts/1/name", "value": "cert"},
            {"op": "add", "path": f"{pod}/containers/0/volumeMounts/1/readOnly",
             "value": True},
            {"op": "add", "path": f"{pod}/containers/0/args/-", "value": "--cert-management"},
            {"op": "add", "path": f"{pod}/containers/0/args/-", "value": "cert-manager"},
        ]),
        ({"group": "admissionregistration.k8s.io", "version": "v1",
          "kind": "MutatingWebhookConfiguration", "name": WEBHOOK_CONFIGURATION_NAME}, inject),
        ({"group": "admissionregistration.k8s.io", "version": "v1",
          "kind": "ValidatingWebhookConfiguration", "name": WEBHOOK_CONFIGURATION_NAME},
         inject),
    ]


def _matches(obj: Object, target: Mapping[str, str]) -> bool:
    api_version = f"{target['group']}/{target['version']}" if target.get("group") \
        else target["version"]
    meta = obj.get("metadata") or {}
    return (obj.get("apiVersion") == api_version and obj.get("kind") == target["kind"]
            and meta.get("name") == target["name"]
            and ("namespace" not in target or meta.get("namespace") == target["namespace"]))


def cert_manager_overlay(*, base: str = "../default", namespace: str = DEFAULT_NAMESPACE
                         ) -> dict[str, list[Object]]:
    """The kustomize overlay over the base at ``base`` (a path relative to the overlay)
    that lets cert-manager issue the serving certificate: a self-signed Issuer and a
    Certificate for the webhook Service, the Deployment mounting its Secret and passing
    ``--cert-management cert-manager``, and ``cert-manager.io/inject-ca-from`` on the
    webhook configurations."""
    patches = [{"target": target, "patch": yaml.safe_dump(ops, sort_keys=False)}
               for target, ops in _cert_manager_patches(namespace)]
    return {"kustomization.yaml": [_kustomization([base, "certificate.yaml"], patches)],
            "certificate.yaml": _cert_manager_objects(namespace)}


# --- the whole ----------------------------------------------------------------------------


def render(
    integrations: Sequence[str] = DEFAULT_INTEGRATIONS,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    image: str = DEFAULT_IMAGE,
    replicas: int = 2,
    cert_management: CertManagement = "internal",
    kueue_namespace: str = KUEUE_NAMESPACE,
    kueue_configmap: str = DEFAULT_CONFIGMAP_NAME,
) -> dict[str, list[Object]]:
    """The kustomize base running ``integrations`` (installed integration names, see
    :mod:`jobframework.plugins`): file name → objects, ``kustomization.yaml`` included.

    With ``cert_management="cert-manager"`` the base is self-contained in that form (what
    the base plus :func:`cert_manager_overlay` builds to, plus the Issuer and Certificate
    in ``certificate.yaml``). ``kueue_namespace`` and ``kueue_configmap`` say where
    Kueue's ConfigMap is (read by the manager; a Role there grants it).
    """
    names = _check_integrations(integrations)
    if replicas < 1:
        raise ValueError("replicas must be at least 1")
    files: dict[str, list[Object]] = {
        "namespace.yaml": [{"apiVersion": "v1", "kind": "Namespace",
                            "metadata": _meta(namespace, **{
                                "pod-security.kubernetes.io/enforce": "restricted"})}],
        "crds.yaml": _crds(names),
        "serviceaccount.yaml": [{"apiVersion": "v1", "kind": "ServiceAccount",
                                 "metadata": _meta(SERVICE_ACCOUNT, namespace)}],
        "rbac.yaml": rbac_manifests(names, namespace=namespace,
                                    kueue_namespace=kueue_namespace,
                                    kueue_configmap=kueue_configmap),
        "service.yaml": [{
            "apiVersion": "v1", "kind": "Service",
            "metadata": _meta(WEBHOOK_SERVICE, namespace),
            "spec": {"selector": dict(SELECTOR), "ports": [
                {"name": "https", "port": 443, "targetPort": WEBHOOK_PORT,
                 "protocol": "TCP"}]}}],
        "metrics-service.yaml": [{
            "apiVersion": "v1", "kind": "Service",
            "metadata": _meta(METRICS_SERVICE, namespace),
            "spec": {"selector": dict(SELECTOR), "ports": [
                {"name": "http-metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT,
                 "protocol": "TCP"}]}}],
        APPWRAPPER_CONFIG: _appwrapper_config_map(names, namespace),
        "deployment.yaml": [_deployment(names, namespace=namespace, image=image,
                                        replicas=replicas, kueue_namespace=kueue_namespace)],
        "pdb.yaml": [{
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": _meta(DEPLOYMENT, namespace),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": dict(SELECTOR)}}}],
        "webhooks.yaml": _webhook_configurations(names, namespace),
    }
    # Who may use the kinds: a namespace's editors and viewers (see user_roles).
    files["user-roles.yaml"] = user_roles(files["crds.yaml"], prefix=PREFIX,
                                          labels=_labels())
    for empty in ("crds.yaml", "user-roles.yaml"):
        if not files[empty]:
            del files[empty]
    if not files[APPWRAPPER_CONFIG]:
        del files[APPWRAPPER_CONFIG]
    resources = list(files)
    if cert_management == "cert-manager":
        for target, ops in _cert_manager_patches(namespace):
            for objects in files.values():
                for i, obj in enumerate(objects):
                    if _matches(obj, target):
                        objects[i] = jsonpatch.apply_patch(obj, ops)
        files["certificate.yaml"] = _cert_manager_objects(namespace)
        resources.append("certificate.yaml")
    elif cert_management != "internal":
        raise ValueError(f"cert_management must be 'internal' or 'cert-manager', not "
                         f"{cert_management!r}")
    files[KUEUE_CONFIG_PATCH] = [configuration_patch(names)]
    files["kustomization.yaml"] = [_kustomization(resources)]
    return files


# --- YAML -----------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Block style, keys in insertion order, multi-line strings as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def to_yaml(objects: Sequence[Any]) -> str:
    """``objects`` as a multi-document YAML stream (keys in the objects' order)."""
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         explicit_start=True, width=100)


def _kueue_patch_header(integrations: Sequence[str], kueue_namespace: str,
                        kueue_configmap: str) -> str:
    drop = replaced_builtins(integrations)
    lines = [
        "# Not a kustomize resource: the change to make to Kueue's Configuration (the",
        f"# {CONFIGMAP_KEY} key of Kueue's {kueue_configmap} ConfigMap) so",
        "# that Kueue leaves these kinds to this manager. Merge the externalFrameworks below",
    ]
    if drop:
        lines.append("# into it, and remove from integrations.frameworks: " + ", ".join(drop)
                     + ".")
    else:
        lines.append("# into it.")
    lines += [
        "# Or let the command do both to the live ConfigMap:",
        f"#   kubectl -n {kueue_namespace} get configmap {kueue_configmap} -o yaml \\",
        "#     | python -m integrations.deploy kueue-config --integrations "
        + ",".join(integrations) + " - | kubectl apply -f -",
        "# then restart Kueue's controller manager to load it.",
    ]
    return "\n".join(lines) + "\n"


def render_text(files: Mapping[str, Sequence[Object]], *,
                integrations: Sequence[str] = DEFAULT_INTEGRATIONS,
                kueue_namespace: str = KUEUE_NAMESPACE,
                kueue_configmap: str = DEFAULT_CONFIGMAP_NAME) -> dict[str, str]:
    """File name → its text (the generated-file header, then the YAML)."""
    out: dict[str, str] = {}
    for name, objects in files.items():
        header = GENERATED_HEADER
        if name == KUEUE_CONFIG_PATCH:
            header += _kueue_patch_header(integrations, kueue_namespace, kueue_configmap)
        out[name] = header + to_yaml(objects)
    return out


def _write_folder(directory: Path, texts: Mapping[str, str]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    for stale in sorted(directory.glob("*.yaml")):
        if stale.name not in texts and stale.read_text(encoding="utf-8").startswith(
                GENERATED_HEADER):
            stale.unlink()
    written = []
    for name, text in texts.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def write(
    directory: str | os.PathLike[str],
    integrations: Sequence[str] = DEFAULT_INTEGRATIONS,
    *,
    cert_manager_directory: str | os.PathLike[str] | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    image: str = DEFAULT_IMAGE,
    replicas: int = 2,
    cert_management: CertManagement = "internal",
    kueue_namespace: str = KUEUE_NAMESPACE,
    kueue_configmap: str = DEFAULT_CONFIGMAP_NAME,
) -> list[Path]:
    """Write the base (:func:`render`) into ``directory`` and, given
    ``cert_manager_directory``, the cert-manager overlay referring to it. Generated YAML
    files no longer rendered are removed; returns the paths written."""
    base = Path(directory)
    names = _check_integrations(integrations)
    files = render(names, namespace=namespace, image=image, replicas=replicas,
                   cert_management=cert_management, kueue_namespace=kueue_namespace,
                   kueue_configmap=kueue_configmap)
    written = _write_folder(base, render_text(files, integrations=names,
                                              kueue_namespace=kueue_namespace,
                                              kueue_configmap=kueue_configmap))
    if cert_manager_directory is not None:
        overlay = Path(cert_manager_directory)
        relative = Path(os.path.relpath(base.resolve(), overlay.resolve())).as_posix()
        written += _write_folder(overlay, render_text(
            cert_manager_overlay(base=relative, namespace=namespace), integrations=names))
    return written
