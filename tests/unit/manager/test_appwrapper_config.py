"""The AppWrapper operator's configuration in the manager: ``--appwrapper-config`` read,
refused with the field's path, and applied end to end on the in-memory API server (the
webhook's default queue and RBAC check, the controller's scheduler name and fault
tolerance timers)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final

import pytest

from integrations.__main__ import appwrapper_config, main, manager_options, parser
from integrations.appwrapper.api import APPWRAPPER_GVK
from integrations.appwrapper.config import AppWrapperConfig, parse_operator_config
from integrations.manager import ExternalFrameworkManager, ManagerOptions
from jobframework import constants as c
from jobframework.plugins import load_integrations
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import APIServer
from jobframework.testing.kueue import register_kueue_kinds
from jobframework.testing.pytest_plugin import wire_webhooks
from jobframework.testing.running import until

NS: Final = "team-a"
WORKLOAD: Final = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")
POD: Final = GVK("", "v1", "Pod")
TS: Final = "2026-01-01T00:00:00Z"

#: Every value differs from upstream's default; the timers make one failed pod fail the
#: AppWrapper at once (upstream's defaults wait a minute, then reset it up to 3 times).
CONFIG: Final = """\
appwrapper:
  defaultQueueName: team-queue
  schedulerName: custom-scheduler
  userRBACAdmissionCheck: false
  autopilot: null
  faultTolerance:
    failureGracePeriod: 0
    retryLimit: 0
"""


# --- the flag -----------------------------------------------------------------------------------


def test_the_flag_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    args = parser().parse_args(["run", "--appwrapper-config", str(path)])
    assert args.appwrapper_config == path
    config = appwrapper_config(args)
    assert config == parse_operator_config(CONFIG)
    assert manager_options(args, appwrapper_config=config).appwrapper_config == config
    assert appwrapper_config(parser().parse_args(["run"])) is None
    assert manager_options(parser().parse_args(["run"])).appwrapper_config is None


def test_a_bad_file_exits_naming_the_field(tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("appwrapper:\n  faultTolerance:\n    failureGracePeriod: 30s\n")
    with caplog.at_level(logging.ERROR, logger="integrations"):
        code = main(["run", "--appwrapper-config", str(path), "--kubeconfig",
                     str(tmp_path / "no-kubeconfig")])
    assert code == 2
    assert (f"invalid AppWrapper operator configuration ({path}): "
            "appwrapper.faultTolerance.failureGracePeriod: expected integer nanoseconds "
            "(Go's time.Duration), got '30s' (30s is 30000000000)") in caplog.text
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="integrations"):
        code = main(["run", "--appwrapper-config", str(tmp_path / "absent.yaml")])
    assert code == 2
    assert "absent.yaml): cannot read the file" in caplog.text


def test_the_loaded_configuration_reaches_the_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jobframework.runtime import runner

    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    seen: list[Any] = []

    def fake_run(run: Any, **kwargs: Any) -> None:
        seen.append(run.keywords["appwrapper_config"])

    monkeypatch.setattr(runner, "run", fake_run)
    assert main(["run", "--appwrapper-config", str(path)]) == 0
    assert seen == [parse_operator_config(CONFIG)]


def test_the_manager_names_the_integrations_framework() -> None:
    from integrations.appwrapper import FRAMEWORK_NAME
    from integrations.manager import APPWRAPPER_FRAMEWORK

    assert APPWRAPPER_FRAMEWORK == FRAMEWORK_NAME


def test_a_configuration_without_the_integration_is_warned_about(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="integrations.manager"):
        ExternalFrameworkManager(APIServer().client(), ManagerOptions(
            integrations=("jobflow",), appwrapper_config=AppWrapperConfig()))
    assert "the AppWrapper integration is not run" in caplog.text


# --- end to end -----------------------------------------------------------------------------


def _appwrapper(name: str) -> Object:
    """A wrapped Pod, without a queue label."""
    return {"apiVersion": APPWRAPPER_GVK.api_version, "kind": APPWRAPPER_GVK.kind,
            "metadata": {"name": name, "namespace": NS},
            "spec": {"components": [{"template": {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-pod"},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox",
                     "resources": {"requests": {"cpu": "100m"}}}]}}}]}}


async def _admit(server: APIServer, name: str) -> None:
    """Kueue's admission of the AppWrapper's Workload, as Kueue writes it."""
    api = server.client()

    async def workload() -> bool:
        return len((await api.list(WORKLOAD, namespace=NS)).items) == 1
    await until(workload, f"the Workload of {name}")
    (wl,) = (await api.list(WORKLOAD, namespace=NS)).items
    pod_set = wl["spec"]["podSets"][0]["name"]
    await api.apply({
        "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
        "metadata": {"name": wl["metadata"]["name"], "namespace": NS},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "reserved", "lastTransitionTime": TS},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "admitted", "lastTransitionTime": TS}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": pod_set, "flavors": {"cpu": "default"}, "count": 1}]}}},
        field_manager=c.ADMISSION_NAME, force=True, subresource="status")


async def test_the_manager_applies_a_non_default_configuration(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    config = appwrapper_config(parser().parse_args(["run", "--appwrapper-config", str(path)]))
    assert config is not None
    [integration] = load_integrations(["appwrapper"])
    server = APIServer(builtin_defaults=True)
    register_kueue_kinds(server)
    for crd in integration.load_crds():
        server.register_crd(crd)
    api = server.client()
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await api.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                      "metadata": {"name": "default"}, "spec": {}})
    # The manager's own client answers no SubjectAccessReview: with upstream's
    # userRBACAdmissionCheck (true) the webhook would refuse every AppWrapper here.
    efm = ExternalFrameworkManager(api, ManagerOptions(
        integrations=("appwrapper",), install_crds=False, register_webhooks=False,
        probe_namespace=None, ready_timeout=30.0, appwrapper_config=config))
    async with efm:
        assert efm.webhook_server is not None
        wire_webhooks(server, efm.webhook_server,
                      [p for w in efm.wiring.values() for p in w.webhook_paths])
        created = await api.create(_appwrapper("aw"))
        # defaultQueueName: the queue label, then Kueue's webhook suspends it.
        assert created["metadata"]["labels"][c.QUEUE_LABEL] == "team-queue"
        assert created["spec"]["suspend"] is True
        await _admit(server, "aw")

        async def pod_created() -> bool:
            return len((await api.list(POD, namespace=NS)).items) == 1
        await until(pod_created, "the wrapped Pod")
        (pod,) = (await api.list(POD, namespace=NS)).items
        # schedulerName, injected where the template names none.
        assert pod["spec"]["schedulerName"] == "custom-scheduler"
        # autopilot: null: no anti-affinity for the Autopilot labels.
        assert "affinity" not in pod["spec"]

        async def running() -> bool:
            aw = await api.get(APPWRAPPER_GVK, "aw", namespace=NS)
            return (aw.get("status") or {}).get("phase") == "Running"
        await until(running, "the AppWrapper Running")
        pod["status"] = {"phase": "Failed", "containerStatuses": [{
            "name": "c", "state": {"terminated": {"exitCode": 1}}}]}
        await api.update_status(pod)

        # failureGracePeriod 0 and retryLimit 0: Failed at once, never reset.
        async def failed() -> bool:
            aw = await api.get(APPWRAPPER_GVK, "aw", namespace=NS)
            return (aw.get("status") or {}).get("phase") == "Failed"
        await until(failed, "the AppWrapper Failed")
        aw = await api.get(APPWRAPPER_GVK, "aw", namespace=NS)
        assert not aw["status"].get("resettingCount")
