"""``deploy render`` ships the AppWrapper operator's ConfigMap (upstream's name, key and
defaults) and mounts it into the Deployment, whose ``--appwrapper-config`` reads it."""

from __future__ import annotations

import pathlib
from typing import Literal

import pytest

from integrations.__main__ import appwrapper_config
from integrations.__main__ import parser as cli_parser
from integrations.appwrapper.config import (
    AppWrapperConfig,
    operator_config_map,
    parse_operator_config,
)
from integrations.deploy.render import APPWRAPPER_CONFIG, APPWRAPPER_CONFIG_DIR, render
from jobframework.runtime.objects import Object

NS = "kjf-test"


def _deployment(files: dict[str, list[Object]]) -> Object:
    (deployment,) = files["deployment.yaml"]
    return deployment


def test_the_configmap_is_upstreams_with_its_defaults() -> None:
    files = render(namespace=NS)
    assert APPWRAPPER_CONFIG in files["kustomization.yaml"][0]["resources"]
    (cm,) = files[APPWRAPPER_CONFIG]
    expected = operator_config_map(NS)
    expected["metadata"]["labels"] = {"app.kubernetes.io/name": "kueue-jobframework"}
    assert cm == expected
    assert cm["metadata"]["name"] == "appwrapper-operator-config"
    assert parse_operator_config(cm["data"]["config.yaml"]) == AppWrapperConfig()


@pytest.mark.parametrize("cert_management", ["internal", "cert-manager"])
def test_the_deployment_mounts_it_and_the_manager_reads_it(
        cert_management: Literal["internal", "cert-manager"], tmp_path: pathlib.Path) -> None:
    files = render(namespace=NS, cert_management=cert_management)
    pod = _deployment(files)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volume = next(v for v in pod["volumes"] if v["name"] == "appwrapper-config")
    assert volume == {"name": "appwrapper-config",
                      "configMap": {"name": "appwrapper-operator-config"}}
    mount = next(m for m in container["volumeMounts"] if m["name"] == "appwrapper-config")
    assert mount == {"name": "appwrapper-config", "mountPath": APPWRAPPER_CONFIG_DIR,
                     "readOnly": True}
    # The certificate volume keeps its place (the cert-manager patches address it by index).
    assert pod["volumes"][1]["name"] == "cert"
    args = cli_parser().parse_args(container["args"])
    assert args.appwrapper_config == pathlib.Path(APPWRAPPER_CONFIG_DIR) / "config.yaml"
    # As the kubelet presents the ConfigMap: one file per key in the mounted directory.
    (cm,) = files[APPWRAPPER_CONFIG]
    mounted = tmp_path / "mount"
    mounted.mkdir()
    for key, text in cm["data"].items():
        (mounted / key).write_text(text)
    args.appwrapper_config = mounted / args.appwrapper_config.name
    assert appwrapper_config(args) == AppWrapperConfig()


def test_no_configmap_without_the_appwrapper_integration() -> None:
    files = render(["jobflow", "daemonjob"], namespace=NS)
    assert APPWRAPPER_CONFIG not in files
    assert APPWRAPPER_CONFIG not in files["kustomization.yaml"][0]["resources"]
    pod = _deployment(files)["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp", "cert"]
    assert "--appwrapper-config" not in pod["containers"][0]["args"]
