"""``setup``: the AppWrapper integration wired into a running manager over the in-memory
server: the framework controller, the generic reconciler queueing AppWrappers in Kueue,
and the webhook paths, served through the server's admission chain."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from integrations.appwrapper import (
    APPWRAPPER_GVK,
    FRAMEWORK_NAME,
    USER_LABEL,
    load_crds,
    register,
    setup,
)
from integrations.appwrapper.config import AppWrapperConfig, ConfigError, FaultToleranceConfig
from integrations.appwrapper.controller import AppWrapperReconciler
from jobframework import constants as c
from jobframework.integrations import IntegrationManager
from jobframework.reconciler import ReconcilerOptions
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.errors import ApiError
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import APIServer
from jobframework.testing.authorization import AccessRule, Authorizer, AuthorizingClient
from jobframework.testing.running import running, until
from jobframework.webhook import WebhookServer

from .helpers import NS, appwrapper, deployment, job

MUTATE = "/mutate-workload-codeflare-dev-v1beta2-appwrapper"
VALIDATE = "/validate-workload-codeflare-dev-v1beta2-appwrapper"
WORKLOAD = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")
JOB = GVK("batch", "v1", "Job")
TS = "2026-01-01T00:00:00Z"


def new_server() -> APIServer:
    server = APIServer(ManualClock(), builtin_defaults=True)
    for crd in load_crds():
        server.register_crd(crd)
    server.register_kind(WORKLOAD, "workloads", True)
    for kind, plural, namespaced in (("LocalQueue", "localqueues", True),
                                     ("ClusterQueue", "clusterqueues", False),
                                     ("ResourceFlavor", "resourceflavors", False)):
        server.register_kind(GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, kind), plural, namespaced,
                             status_subresource=kind != "ResourceFlavor")
    return server


def install(server: APIServer, hooks: WebhookServer, paths: tuple[str, ...]) -> None:
    """Serve the registered paths through the in-memory server, as the manager's
    webhook configurations do (mutating on CREATE, validating on CREATE and UPDATE)."""
    for path in paths:
        mutating = path.startswith("/mutate")
        ops = ["CREATE"] if mutating else ["CREATE", "UPDATE"]
        rules: list[dict[str, Any]] = [{"operations": ops, "apiGroups": [APPWRAPPER_GVK.group],
                                        "apiVersions": [APPWRAPPER_GVK.version],
                                        "resources": ["appwrappers"]}]
        add = server.add_mutating_webhook if mutating else server.add_validating_webhook
        add(hooks.as_admission_hook(path), rules=rules)


async def test_standalone_setup_serves_upstreams_webhook() -> None:
    """Without Kueue: the controller and upstream's webhook (user labels, default queue,
    invariants, RBAC); nothing suspends an AppWrapper, so it runs at once."""
    server = new_server()
    authorizer = Authorizer([AccessRule(groups=("system:masters",)),
                             AccessRule(users=("alice",), resources=("appwrappers",)),
                             AccessRule(users=("alice",), verbs=("create",),
                                        resources=("jobs",))])
    client = AuthorizingClient(server.client(), authorizer)
    mgr = Manager(client, clock=server.clock)  # type: ignore[arg-type]
    hooks = WebhookServer()
    wiring = await setup(mgr, webhook_server=hooks,
                         config=AppWrapperConfig(default_queue_name="dq", autopilot=None))
    assert wiring.webhook_paths == (MUTATE, VALIDATE)
    assert wiring.kueue_reconciler is None
    assert isinstance(wiring.appwrapper_reconciler, AppWrapperReconciler)
    install(server, hooks, wiring.webhook_paths)

    alice = server.client(user="alice")
    with pytest.raises(ApiError) as info:
        await alice.create(appwrapper([deployment(1)]))
    assert "User alice is not authorized to create deployments in default" in str(info.value)

    async with running(mgr):
        created = await alice.create(appwrapper([job(1, name="j")], suspend=False))
        assert created["metadata"]["labels"][USER_LABEL] == "alice"
        assert created["metadata"]["labels"][c.QUEUE_LABEL] == "dq"

        async def job_created() -> bool:
            return len((await server.client().list(JOB, namespace=NS)).items) == 1
        await until(job_created, "the wrapped Job")


async def test_kueue_setup_queues_and_admits() -> None:
    """With Kueue: the webhook suspends a queued AppWrapper, the generic reconciler makes
    its Workload; once admitted the controller creates the wrapped Job with the flavor."""
    server = new_server()
    api = server.client()
    client = AuthorizingClient(api, Authorizer())
    mgr = Manager(client, clock=server.clock)  # type: ignore[arg-type]
    im = IntegrationManager()
    register(im)
    register(im)  # idempotent
    assert im.get_integration(FRAMEWORK_NAME) is not None
    hooks = WebhookServer()
    wiring = await setup(mgr, webhook_server=hooks,
                         kueue=ReconcilerOptions(clock=server.clock, integration_manager=im),
                         config=AppWrapperConfig(autopilot=None))
    assert wiring.kueue_reconciler is not None
    assert wiring.webhook_paths == (MUTATE, VALIDATE)
    install(server, hooks, wiring.webhook_paths)
    await api.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "ResourceFlavor",
                      "metadata": {"name": "spot"}, "spec": {"nodeLabels": {"tier": "spot"}}})

    async def workloads() -> list[Object]:
        return list((await api.list(WORKLOAD, namespace=NS)).items)

    async with running(mgr):
        aw = appwrapper([job(2, name="j")], labels={c.QUEUE_LABEL: "user-queue"},
                        suspend=False)
        created = await api.create(aw)
        assert created["spec"]["suspend"] is True, "the Kueue webhook suspended it"

        async def has_workload() -> bool:
            return len(await workloads()) == 1
        await until(has_workload, "the Workload")
        (wl,) = await workloads()
        assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("aw-0", 2)]
        assert (await api.list(JOB, namespace=NS)).items == [], "still queued"

        await api.apply({"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
                         "metadata": {"name": wl["metadata"]["name"], "namespace": NS},
                         "status": {
                             "conditions": [
                                 {"type": "QuotaReserved", "status": "True",
                                  "reason": "QuotaReserved", "message": "reserved",
                                  "lastTransitionTime": TS},
                                 {"type": "Admitted", "status": "True", "reason": "Admitted",
                                  "message": "admitted", "lastTransitionTime": TS}],
                             "admission": {"clusterQueue": "cq", "podSetAssignments": [
                                 {"name": "aw-0", "flavors": {"cpu": "spot"}, "count": 2}]}}},
                        field_manager=c.ADMISSION_NAME, force=True, subresource="status")

        async def job_created() -> bool:
            return len((await api.list(JOB, namespace=NS)).items) == 1
        await until(job_created, "the wrapped Job")
        (wrapped,) = (await api.list(JOB, namespace=NS)).items
        assert wrapped["spec"]["template"]["spec"]["nodeSelector"] == {"tier": "spot"}


async def test_invalid_config_is_refused() -> None:
    """An invalid operator configuration stops setup (the controller validates it)."""
    server = new_server()
    mgr = Manager(server.client(), clock=server.clock)
    bad = AppWrapperConfig(fault_tolerance=FaultToleranceConfig(
        success_ttl=dt.timedelta(0)))
    with pytest.raises(ConfigError):
        await setup(mgr, config=bad)
