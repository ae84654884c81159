"""WebhookBuilder: controller-runtime's paths, skip-if-served, custom paths."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.runtime.objects import GVK
from jobframework.webhook import (
    AdmissionRequest,
    Warnings,
    WebhookBuilder,
    WebhookServer,
    mutate_path,
    validate_path,
)

JOB = GVK("batch", "v1", "Job")


class JobWebhook:
    async def default(self, obj: dict[str, Any], request: AdmissionRequest) -> None:
        obj["spec"]["suspend"] = True
        obj["spec"].pop("futureField", None)

    async def validate_create(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        raise ValueError("no creates today")

    async def validate_update(self, old: Any, new: Any, request: AdmissionRequest) -> Warnings:
        return None

    async def validate_delete(self, obj: Any, request: AdmissionRequest) -> Warnings:
        return None


@pytest.mark.parametrize(
    ("gvk", "mutate", "validate"),
    [
        (JOB, "/mutate-batch-v1-job", "/validate-batch-v1-job"),
        (GVK("", "v1", "Pod"), "/mutate--v1-pod", "/validate--v1-pod"),
        (GVK("kubeflow.org", "v1", "PyTorchJob"), "/mutate-kubeflow-org-v1-pytorchjob",
         "/validate-kubeflow-org-v1-pytorchjob"),
    ],
)
def test_paths_match_controller_runtime_and_kueue(gvk: GVK, mutate: str, validate: str) -> None:
    assert (mutate_path(gvk), validate_path(gvk)) == (mutate, validate)


async def test_complete_registers_working_handlers(server: WebhookServer, make_request: Any,
                                                   job: Any) -> None:
    hook = JobWebhook()
    paths = (WebhookBuilder(server).for_(JOB).with_defaulter(hook).with_validator(hook)
             .complete())
    assert paths == ["/mutate-batch-v1-job", "/validate-batch-v1-job"]
    mutate = server.handlers["/mutate-batch-v1-job"]
    resp = await mutate.handle(make_request("CREATE", job()))
    assert {(op["op"], op["path"]) for op in resp.patches} == {
        ("add", "/spec/suspend"), ("remove", "/spec/futureField")}
    resp = await server.handlers["/validate-batch-v1-job"].handle(make_request("CREATE", job()))
    assert (resp.allowed, resp.message) == (False, "no creates today")
    # A second registration of the same kind leaves the served paths alone.
    first = server.handlers["/validate-batch-v1-job"]
    assert WebhookBuilder(server).for_(JOB).with_validator(JobWebhook()).complete() == []
    assert server.handlers["/validate-batch-v1-job"] is first


async def test_patch_options_reach_the_defaulter(server: WebhookServer, make_request: Any,
                                                 job: Any) -> None:
    def no_removals(ops: Any, ctx: Any) -> list[Any]:
        return [op for op in ops if op["op"] != "remove"]

    WebhookBuilder(server).for_(JOB).with_defaulter(JobWebhook(),
                                                    patch_filter=no_removals).complete()
    resp = await server.handlers["/mutate-batch-v1-job"].handle(make_request("CREATE", job()))
    assert [op["op"] for op in resp.patches] == ["add"]


def test_custom_paths_and_errors(server: WebhookServer) -> None:
    paths = (WebhookBuilder(server).for_(JOB).with_defaulter(JobWebhook())
             .with_defaulter_custom_path("/custom/mutate_job").complete())
    assert paths == ["/custom/mutate_job"]
    with pytest.raises(ValueError, match="does not match this regex"):
        WebhookBuilder(server).with_validator_custom_path("/bad path")
    with pytest.raises(ValueError, match="for_"):
        WebhookBuilder(server).with_validator(JobWebhook()).complete()
    with pytest.raises(ValueError, match="a defaulter, a validator, or both"):
        WebhookBuilder(server).for_(JOB).complete()
