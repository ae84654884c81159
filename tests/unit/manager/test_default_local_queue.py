"""The ``default`` LocalQueue in the shipped wiring (Kueue's ``DefaultLocalQueueExist``).

Kueue's webhooks label a job without a queue name ``kueue.x-k8s.io/queue-name: default``
when its namespace has an active LocalQueue named ``default``, and refuse an update that
drops the queue name there. Our webhooks learn it from the queues they are given: the
shipped manager's, and the one ``setup_integration`` / ``setup_controllers`` build when
given none. Each path is checked on the in-memory API server, through its admission chain.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Sequence
from typing import Final

import attrs
import pytest

from integrations.batchjob import CALLBACKS as BATCHJOB_CALLBACKS
from integrations.batchjob import FRAMEWORK_NAME as BATCHJOB
from integrations.catalog import reference_names
from integrations.manager import ExternalFrameworkManager, ManagerOptions
from jobframework import constants as c
from jobframework.integrations import IntegrationManager
from jobframework.plugins import Integration, load_integrations
from jobframework.reconciler import ReconcilerOptions, setup_controllers
from jobframework.runtime import errors
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import APIServer
from jobframework.testing.authorization import Authorizer, AuthorizingClient
from jobframework.testing.kueue import register_kueue_kinds
from jobframework.testing.pytest_plugin import wire_webhooks
from jobframework.testing.running import running
from jobframework.webhook import WebhookServer

#: Has a LocalQueue named ``default``.
WITH_DEFAULT: Final = "team-a"
#: Has a LocalQueue of another name only.
WITHOUT_DEFAULT: Final = "team-b"
NO_DEFAULT_QUEUE: Final = (
    'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": '
    "queue-name must not be empty in namespace with default queue")
JOB: Final = GVK("batch", "v1", "Job")
#: The batch Job integration's name among the installed ones.
BATCHJOB_NAME: Final = "batchjob"


def _server(integrations: Sequence[Integration]) -> APIServer:
    server = APIServer(builtin_defaults=True)
    register_kueue_kinds(server)
    for integration in integrations:
        for crd in integration.load_crds():
            server.register_crd(crd)
    return server


async def _queues(server: APIServer) -> None:
    """The two namespaces and their LocalQueues, and a Ready node (DaemonJob's webhook
    refuses a DaemonJob no node can run)."""
    admin = server.client()
    node = await admin.create({"apiVersion": "v1", "kind": "Node",
                               "metadata": {"name": "n1"}})
    node["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    await admin.update_status(node)
    for ns in (WITH_DEFAULT, WITHOUT_DEFAULT):
        await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for ns, name in ((WITH_DEFAULT, "default"), (WITHOUT_DEFAULT, "user-queue")):
        await admin.create({"apiVersion": c.KUEUE_API_VERSION, "kind": "LocalQueue",
                            "metadata": {"name": name, "namespace": ns},
                            "spec": {"clusterQueue": "cq"}})


def _client(server: APIServer) -> AuthorizingClient:
    """The manager's client: AppWrapper's webhook asks SubjectAccessReviews (all allowed)."""
    return AuthorizingClient(server.client(), Authorizer())


def _unqueued(integration: Integration, namespace: str) -> Object:
    obj = integration.probe_object(namespace)
    obj["metadata"]["name"] = f"{integration.name}-no-queue"
    del obj["metadata"]["labels"][c.QUEUE_LABEL]
    return obj


async def _check_defaulting(server: APIServer, integrations: Sequence[Integration]) -> None:
    """Every integration's job is labelled ``default`` where that queue exists, and left
    alone elsewhere."""
    admin = server.client()
    for integration in integrations:
        labelled = await admin.create(_unqueued(integration, WITH_DEFAULT))
        # AppWrapper's own webhook adds its user labels too.
        assert labelled["metadata"]["labels"][c.QUEUE_LABEL] == "default", integration.name
        left = await admin.create(_unqueued(integration, WITHOUT_DEFAULT))
        assert c.QUEUE_LABEL not in (left["metadata"].get("labels") or {}), integration.name


async def _check_update_rule(server: APIServer) -> None:
    """A suspended Job may not drop its queue name in a namespace with a default queue."""
    admin = server.client()
    job = await admin.get(JOB, "batchjob-no-queue", namespace=WITH_DEFAULT)
    assert job["spec"]["suspend"] is True
    dropped = copy.deepcopy(job)
    del dropped["metadata"]["labels"][c.QUEUE_LABEL]
    with pytest.raises(errors.ApiError) as err:
        await admin.update(dropped)
    assert NO_DEFAULT_QUEUE in str(err.value)
    # Where no default queue exists, the same edit is allowed (the Job suspended first, as
    # one that was queued would be: a running Job may not change its queue at all).
    other = await admin.get(JOB, "batchjob-no-queue", namespace=WITHOUT_DEFAULT)
    other["metadata"]["labels"] = {c.QUEUE_LABEL: "user-queue"}
    other["spec"]["suspend"] = True
    other = await admin.update(other)
    del other["metadata"]["labels"][c.QUEUE_LABEL]
    await admin.update(other)


async def test_the_shipped_manager_applies_the_default_local_queue() -> None:
    integrations = load_integrations(list(reference_names()))
    server = _server(integrations)
    await _queues(server)
    efm = ExternalFrameworkManager(_client(server), ManagerOptions(
        integrations=tuple(i.name for i in integrations), install_crds=False,
        register_webhooks=False, probe_namespace=None, ready_timeout=30.0))
    assert {i.name for i in efm.integrations} == {i.name for i in integrations}
    async with efm:
        assert efm.webhook_server is not None
        wire_webhooks(server, efm.webhook_server,
                      [p for w in efm.wiring.values() for p in w.webhook_paths])
        await _check_defaulting(server, efm.integrations)
        await _check_update_rule(server)


@contextlib.asynccontextmanager
async def _started(mgr: Manager) -> AsyncIterator[None]:
    async with running(mgr):
        await asyncio.wait_for(mgr.get_cache().wait_for_cache_sync(), 30)
        yield


async def test_setup_integration_without_queues_builds_them() -> None:
    # What a program embedding the integrations does: setup(mgr, kueue=options) with no
    # queues in the options.
    integrations = load_integrations(list(reference_names()))
    server = _server(integrations)
    await _queues(server)
    im = IntegrationManager()
    for integration in integrations:
        integration.register(im)
    options = ReconcilerOptions(integration_manager=im)
    assert options.queues is None
    mgr = Manager(_client(server))
    webhooks = WebhookServer()
    paths: list[str] = []
    for integration in integrations:
        paths.extend((await integration.setup(mgr, webhook_server=webhooks,
                                              kueue=options)).webhook_paths)
    wire_webhooks(server, webhooks, paths)
    async with _started(mgr):
        await _check_defaulting(server, integrations)
        await _check_update_rule(server)


async def test_setup_controllers_without_queues_builds_them() -> None:
    [batchjob] = load_integrations([BATCHJOB_NAME])
    server = _server([batchjob])
    await _queues(server)
    im = IntegrationManager()
    im.register_integration(BATCHJOB, BATCHJOB_CALLBACKS)
    mgr = Manager(server.client())
    webhooks = WebhookServer()
    done = await setup_controllers(mgr, im, webhook_server=webhooks,
                                   enabled_frameworks=[BATCHJOB])
    assert done == {BATCHJOB}
    wire_webhooks(server, webhooks, ["/mutate-batch-v1-job", "/validate-batch-v1-job"])
    async with _started(mgr):
        await _check_defaulting(server, [batchjob])
        await _check_update_rule(server)


async def test_given_queues_are_used_as_they_are() -> None:
    # A lookup in the options wins: here one that knows no default queue anywhere.
    [batchjob] = load_integrations([BATCHJOB_NAME])
    server = _server([batchjob])
    await _queues(server)
    im = IntegrationManager()
    im.register_integration(BATCHJOB, BATCHJOB_CALLBACKS)
    mgr = Manager(server.client())
    webhooks = WebhookServer()

    @attrs.frozen
    class NoQueues:
        def cluster_queue_for_local_queue(self, namespace: str, name: str) -> None:
            return None

        def admission_check_controllers(self, cluster_queue: str) -> list[str]:
            return []

        def default_local_queue_exist(self, namespace: str) -> bool:
            return False

    await setup_controllers(mgr, im, webhook_server=webhooks, enabled_frameworks=[BATCHJOB],
                            options=ReconcilerOptions(queues=NoQueues()))
    wire_webhooks(server, webhooks, ["/mutate-batch-v1-job"])
    async with _started(mgr):
        created = await server.client().create(_unqueued(batchjob, WITH_DEFAULT))
        assert c.QUEUE_LABEL not in (created["metadata"].get("labels") or {})
