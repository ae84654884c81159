"""``setup_controllers``: the batch/job integration wired from a configuration, with its
webhook in the in-memory API server's admission chain."""

from __future__ import annotations

import asyncio
import contextlib

from integrations.batchjob import CALLBACKS, FRAMEWORK_NAME
from jobframework import constants as c
from jobframework.integrations import IntegrationCallbacks, IntegrationManager
from jobframework.reconciler import (
    ReconcilerOptions,
    new_noop_reconciler_factory,
    setup_controllers,
)
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK
from jobframework.webhook import WebhookServer, rule

from .helpers import World, base_job

MISSING = GVK("example.com", "v1", "Missing")


async def test_enabled_integration_gets_controller_webhook_and_indexes() -> None:
    w = World()
    await w.setup()
    im = IntegrationManager()
    im.register_integration(FRAMEWORK_NAME, CALLBACKS)
    im.register_integration("example.com/missing", IntegrationCallbacks(
        new_reconciler=new_noop_reconciler_factory(MISSING),
        setup_webhook=lambda *a, **k: None, job_type=MISSING))
    mgr = Manager(w.client, clock=w.clock)
    webhooks = WebhookServer()
    done = await setup_controllers(
        mgr, im, options=ReconcilerOptions(clock=w.clock), webhook_server=webhooks,
        enabled_frameworks=[FRAMEWORK_NAME, "example.com/missing"])
    assert done == {FRAMEWORK_NAME}, "an API that is not served gets no controller"
    assert "job" in mgr._controller_names
    w.server.add_mutating_webhook(webhooks.as_admission_hook("/mutate-batch-v1-job"),
                                  rules=[rule("batch", "v1", "jobs", ["CREATE"])])
    task = asyncio.create_task(mgr.start())
    try:
        created = await w.create_job(base_job(suspend=False))
        assert created["spec"]["suspend"] is True, "the webhook suspends queued jobs"
        for i in range(3000):
            if w.workloads():
                break
            await asyncio.sleep(0)
            if i % 20 == 19:
                w.clock.advance(0.01)
        [wl] = w.workloads()
        assert wl["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-uid"}
    finally:
        await mgr.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task
