"""Wiring the JobFlow integration into a manager and a webhook server."""

from __future__ import annotations

from typing import Final

import attrs

from jobframework.runtime.manager import Manager
from jobframework.webhook import WebhookBuilder, WebhookServer

from .api import JOBFLOW_GVK, JOBTEMPLATE_GVK
from .controller import JobFlowReconciler, JobTemplateReconciler, setup_controllers
from .webhook import JobFlowWebhook, JobTemplateWebhook

#: The name Kueue's configuration uses for this kind in ``integrations.externalFrameworks``.
FRAMEWORK_NAME: Final = f"{JOBFLOW_GVK.kind}.{JOBFLOW_GVK.version}.{JOBFLOW_GVK.group}"


@attrs.frozen
class JobFlowSetup:
    """What :func:`setup` registered."""

    jobflow_reconciler: JobFlowReconciler
    jobtemplate_reconciler: JobTemplateReconciler
    webhook_paths: tuple[str, ...] = ()


def setup_webhooks(server: WebhookServer) -> list[str]:
    """Serve the JobFlow and JobTemplate validators; returns the paths registered."""
    paths = WebhookBuilder(server).for_(JOBFLOW_GVK).with_validator(JobFlowWebhook()).complete()
    paths += WebhookBuilder(server).for_(JOBTEMPLATE_GVK) \
        .with_validator(JobTemplateWebhook()).complete()
    return paths


async def setup(mgr: Manager, *, webhook_server: WebhookServer | None = None) -> JobFlowSetup:
    """Register the indexes, the DAG and JobTemplate controllers, and the webhooks."""
    flows, templates = await setup_controllers(mgr)
    paths = setup_webhooks(webhook_server) if webhook_server is not None else []
    return JobFlowSetup(flows, templates, tuple(paths))
