"""Handlers wired into the in-memory API server's admission chain, in process and over HTTPS."""

from __future__ import annotations

import json
import ssl
from typing import Any

import aiohttp
import pytest

from jobframework.runtime import errors
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer
from jobframework.webhook import (
    AdmissionHook,
    AdmissionRequest,
    ValidationError,
    Warnings,
    WebhookServer,
    rule,
    with_custom_defaulter,
    with_custom_validator,
)

JOB = GVK("batch", "v1", "Job")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def new_job(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"parallelism": 1, "somethingNewer": {"x": 1}},
    }


class SuspendQueued:
    """Suspends jobs that name a queue (Kueue's ApplyDefaultForSuspend, reduced)."""

    async def default(self, obj: dict[str, Any], request: AdmissionRequest) -> None:
        if obj["metadata"].get("labels", {}).get(QUEUE_LABEL):
            obj["spec"]["suspend"] = True


class QueueRules:
    """Invalid names → 422 Invalid; queue-name changes on running jobs → 403 aggregate."""

    async def validate_create(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        queue = obj["metadata"].get("labels", {}).get(QUEUE_LABEL, "")
        if queue and not queue.islower():
            path = f"metadata.labels[{QUEUE_LABEL}]"
            raise errors.new_invalid("Job", obj["metadata"]["name"], [{
                "reason": "FieldValueInvalid", "field": path,
                "message": f'Invalid value: "{queue}": must be lower case'}], group="batch")
        return None

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any],
                              request: AdmissionRequest) -> Warnings:
        before = old["metadata"].get("labels", {}).get(QUEUE_LABEL, "")
        after = new["metadata"].get("labels", {}).get(QUEUE_LABEL, "")
        if before != after and not new["spec"].get("suspend"):
            raise ValidationError([{"field": f"metadata.labels[{QUEUE_LABEL}]",
                                    "message": f'Invalid value: "{after}": field is immutable',
                                    "reason": "FieldValueInvalid"}])
        return ["queue checked"]

    async def validate_delete(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        return None


def wire(api: APIServer, mutate: AdmissionHook, validate: AdmissionHook) -> None:
    api.add_mutating_webhook(mutate, name="mjob.kb.io",
                             rules=[rule("batch", "v1", "jobs", ["CREATE"])])
    api.add_validating_webhook(validate, name="vjob.kb.io",
                               rules=[rule("batch", "v1", "jobs", ["CREATE", "UPDATE"])])


@pytest.fixture
def webhooks(server: WebhookServer) -> WebhookServer:
    server.register("/mutate-batch-v1-job", with_custom_defaulter(SuspendQueued()))
    server.register("/validate-batch-v1-job", with_custom_validator(QueueRules()))
    return server


async def exercise(api: APIServer) -> None:
    client = api.client()
    created = await client.create(new_job("queued", **{QUEUE_LABEL: "user-queue"}))
    assert created["spec"]["suspend"] is True
    assert created["spec"]["somethingNewer"] == {"x": 1}
    plain = await client.create(new_job("plain"))
    assert "suspend" not in plain["spec"]

    with pytest.raises(errors.Invalid) as invalid:
        await client.create(new_job("loud", **{QUEUE_LABEL: "USER"}))
    assert str(invalid.value.message) == (
        'admission webhook "vjob.kb.io" denied the request: Job.batch "loud" is invalid: '
        f'metadata.labels[{QUEUE_LABEL}]: Invalid value: "USER": must be lower case')
    assert invalid.value.causes == [{
        "reason": "FieldValueInvalid", "field": f"metadata.labels[{QUEUE_LABEL}]",
        "message": 'Invalid value: "USER": must be lower case'}]
    with pytest.raises(errors.NotFound):
        await client.get(JOB, "loud", namespace="default")

    plain["metadata"]["labels"][QUEUE_LABEL] = "late"
    with pytest.raises(errors.Forbidden) as forbidden:
        await client.update(plain)
    assert forbidden.value.message == (
        'admission webhook "vjob.kb.io" denied the request: '
        f'metadata.labels[{QUEUE_LABEL}]: Invalid value: "late": field is immutable')
    created["metadata"]["labels"]["team"] = "a"
    await client.update(created)
    assert "queue checked" in api.admission.warnings


async def test_in_process_hooks_mutate_and_deny(webhooks: WebhookServer) -> None:
    api = APIServer(ManualClock())
    wire(api, webhooks.as_admission_hook("/mutate-batch-v1-job"),
         webhooks.as_admission_hook("/validate-batch-v1-job"))
    await exercise(api)


async def test_the_same_through_https(webhooks: WebhookServer,
                                      client_ssl: ssl.SSLContext) -> None:
    await webhooks.listen()

    def over_https(path: str) -> AdmissionHook:
        async def call(review: dict[str, Any]) -> dict[str, Any]:
            connector = aiohttp.TCPConnector(ssl=client_ssl)
            async with aiohttp.ClientSession(connector=connector) as session, session.post(
                webhooks.url(path), data=json.dumps(review),
                headers={"Content-Type": "application/json"},
            ) as resp:
                out: dict[str, Any] = await resp.json()
                return out
        return call

    api = APIServer(ManualClock())
    wire(api, over_https("/mutate-batch-v1-job"), over_https("/validate-batch-v1-job"))
    await exercise(api)
