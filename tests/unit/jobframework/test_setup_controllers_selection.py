"""``setup_controllers(configuration=...)`` selects a user's integration by the kind its
``externalFrameworks`` entry names, whatever name the integration was registered under,
and never ignores arguments it cannot honour.

The misconfiguration these tests guard against was a quota bypass: a SparkApp integration
registered as ``analytics.example.com/sparkapp`` and listed in Kueue's Configuration as
``SparkApp.v1.analytics.example.com`` got no controller and a no-op webhook, so queued
SparkApps were created unsuspended and ran outside Kueue.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from jobframework import constants as c
from jobframework.api import PodSet
from jobframework.config import API_VERSION, KIND, Configuration, parse_configuration
from jobframework.integrations import IntegrationError, IntegrationManager
from jobframework.interface import FinishedResult, GenericJob
from jobframework.podset import PodSetInfo
from jobframework.reconciler import (
    ReconcilerOptions,
    frameworks_from_configuration,
    setup_controllers,
)
from jobframework.runtime.client import Client
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import APIServer, register_kueue_kinds
from jobframework.testing.pytest_plugin import callbacks_for, wire_webhooks
from jobframework.testing.running import running, until
from jobframework.webhook import WebhookServer

SPARKAPP = GVK("analytics.example.com", "v1", "SparkApp")
SPARKAPP_KIND_ARG = "SparkApp.v1.analytics.example.com"
REGISTERED_AS = "analytics.example.com/sparkapp"
OTHER = GVK("analytics.example.com", "v1", "Other")


class SparkApp(GenericJob):
    """A driver and its executors (only what the selection needs)."""

    def __init__(self, obj: Object | None = None) -> None:
        self.obj: Object = obj if obj is not None else {}

    def object(self) -> Object:
        return self.obj

    def gvk(self) -> GVK:
        return SPARKAPP

    def is_suspended(self) -> bool:
        return bool(self.obj.get("spec", {}).get("suspend"))

    def suspend(self) -> None:
        self.obj.setdefault("spec", {})["suspend"] = True

    def is_active(self) -> bool:
        return False

    async def pod_sets(self, client: Client) -> list[PodSet]:
        return [PodSet(name="driver", count=1,
                       template=copy.deepcopy(self.obj["spec"]["template"]))]

    async def run_with_pod_sets_info(self, client: Client,
                                     pod_sets_info: Sequence[PodSetInfo]) -> None:
        self.obj["spec"]["suspend"] = False

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        return False

    def finished(self) -> FinishedResult:
        return FinishedResult("", False, False)

    async def pods_ready(self, client: Client) -> bool:
        return False


class Other(SparkApp):
    def gvk(self) -> GVK:
        return OTHER


def configuration(*, frameworks: Sequence[str] = (),
                  external: Sequence[str] = ()) -> Configuration:
    return parse_configuration({"apiVersion": API_VERSION, "kind": KIND, "integrations": {
        "frameworks": list(frameworks), "externalFrameworks": list(external)}})


def sparkapp_manager(name: str = REGISTERED_AS) -> IntegrationManager:
    im = IntegrationManager()
    im.register_integration(name, callbacks_for(SparkApp))
    return im


async def world() -> tuple[APIServer, Manager]:
    server = APIServer(ManualClock())
    register_kueue_kinds(server)
    server.register_kind(SPARKAPP, "sparkapps", True)
    return server, Manager(server.client(), clock=server.clock)


def sparkapp(name: str) -> Object:
    return {"apiVersion": "analytics.example.com/v1", "kind": "SparkApp",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {c.QUEUE_LABEL: "user-queue"}},
            "spec": {"template": {"spec": {"containers": [{"name": "driver"}]}}}}


async def test_an_external_framework_entry_selects_the_integration_of_its_kind() -> None:
    server, mgr = await world()
    im = sparkapp_manager()
    webhooks = WebhookServer()
    done = await setup_controllers(mgr, im, options=ReconcilerOptions(clock=server.clock),
                                   webhook_server=webhooks,
                                   configuration=configuration(external=[SPARKAPP_KIND_ARG]))
    assert done == {REGISTERED_AS}
    assert im.enabled_integrations() == {REGISTERED_AS}
    assert "sparkapp" in mgr._controller_names
    # The real webhook, not the no-op one: a queued SparkApp is created suspended ...
    wire_webhooks(server, webhooks, list(webhooks.handlers))
    client = server.client()
    async with running(mgr):
        await mgr.elected()
        created = await client.create(sparkapp("pi"))
        assert created["spec"]["suspend"] is True

        # ... and gets its Workload from the reconciler.
        async def workloads() -> list[Object]:
            return list(server.objects(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload"),
                                       "default"))

        [wl] = await until(workloads, "the SparkApp's Workload")
        assert wl["metadata"]["name"].startswith("sparkapp-pi-")


async def test_an_entry_naming_the_registered_name_still_selects_it() -> None:
    _, mgr = await world()
    im = sparkapp_manager(SPARKAPP_KIND_ARG)
    done = await setup_controllers(mgr, im, configuration=configuration(
        external=[SPARKAPP_KIND_ARG]))
    assert done == {SPARKAPP_KIND_ARG}


async def test_an_unlisted_kind_gets_no_controller() -> None:
    _, mgr = await world()
    im = sparkapp_manager()
    done = await setup_controllers(mgr, im, configuration=configuration(
        frameworks=["batch/job"], external=["Foo.v1.example.com"]))
    assert done == frozenset()
    assert "sparkapp" not in mgr._controller_names


def test_the_selection_in_the_configurations_order_without_duplicates() -> None:
    im = sparkapp_manager()
    # integrations.frameworks takes Kueue's names only: one registered under one of them.
    im.register_integration("batch/job", callbacks_for(Other))
    cfg = configuration(frameworks=["pod", "batch/job"],
                        external=["Foo.v1.example.com", SPARKAPP_KIND_ARG,
                                  "Other.v1.analytics.example.com"])
    assert frameworks_from_configuration(cfg, im) == ["batch/job", REGISTERED_AS]


def test_an_entry_naming_one_integration_whose_kind_is_anothers_is_an_error() -> None:
    im = IntegrationManager()
    # Registered under the SparkApp's kind argument, but an Other job ...
    im.register_integration(SPARKAPP_KIND_ARG, callbacks_for(Other))
    # ... while the SparkApp integration has another name.
    im.register_integration(REGISTERED_AS, callbacks_for(SparkApp))
    with pytest.raises(IntegrationError) as info:
        frameworks_from_configuration(configuration(external=[SPARKAPP_KIND_ARG]), im)
    assert str(info.value) == (
        f'externalFrameworks entry "{SPARKAPP_KIND_ARG}" selects several registered '
        f'integrations: "{SPARKAPP_KIND_ARG}", "{REGISTERED_AS}" (by name, then by job '
        "kind); register the integration of that kind under one name only")


async def test_two_integrations_of_the_kind_are_an_error_naming_both() -> None:
    _, mgr = await world()
    im = sparkapp_manager()
    im.register_integration("spark", callbacks_for(SparkApp))
    with pytest.raises(IntegrationError, match=f'"{REGISTERED_AS}", "spark"'):
        await setup_controllers(mgr, im, configuration=configuration(
            external=[SPARKAPP_KIND_ARG]))
    assert im.enabled_integrations() == frozenset()


@pytest.mark.parametrize("given", [
    {"enabled_frameworks": [REGISTERED_AS]},
    {"external_frameworks": [SPARKAPP_KIND_ARG]},
    {"enabled_frameworks": [], "external_frameworks": []},
], ids=["enabled_frameworks", "external_frameworks", "both, empty"])
async def test_framework_lists_with_a_configuration_are_refused(given: dict[str, Any]) -> None:
    _, mgr = await world()
    im = sparkapp_manager()
    with pytest.raises(TypeError) as info:
        await setup_controllers(mgr, im, configuration=configuration(
            external=[SPARKAPP_KIND_ARG]), **given)
    message = str(info.value)
    for name in given:
        assert name in message
    assert "cannot be given with configuration" in message
    assert im.enabled_integrations() == frozenset()


async def test_without_a_configuration_the_lists_decide() -> None:
    _, mgr = await world()
    im = sparkapp_manager()
    assert await setup_controllers(mgr, im, enabled_frameworks=[REGISTERED_AS],
                                   external_frameworks=[SPARKAPP_KIND_ARG]) == {REGISTERED_AS}
    assert set(im.external_job_types()) == {SPARKAPP_KIND_ARG}
