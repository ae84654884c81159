"""Validation messages, directly and through the in-memory API server's admission chain."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.jobflow import (
    JOBFLOW_GVK,
    JobFlowWebhook,
    JobTemplateWebhook,
    validate_jobflow,
    validate_jobflow_update,
    validate_jobtemplate,
)
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import GroupVersionResource, Object
from jobframework.testing import APIServer
from jobframework.webhook import AdmissionRequest, admission_hook, with_custom_validator

from .helpers import flow, jobflow, jobtemplate


def messages(obj: Object) -> list[str]:
    return [str(e) for e in validate_jobflow(obj)]


def test_valid_flow_has_no_errors() -> None:
    assert messages(jobflow("wf", [flow("a"), flow("b", "a"), flow("c", ref="tpl")])) == []


def test_no_flows_and_too_many_flows() -> None:
    assert messages(jobflow("wf", [])) == [
        "spec.flows: Required value: a JobFlow needs at least one flow"]
    many = [flow(f"s{i}") for i in range(19)]
    assert messages(jobflow("wf", many)) == [
        "spec.flows: Too many: 19: must have at most 18 items: a Kueue Workload holds at "
        "most 18 PodSets, one per flow"]
    assert messages(jobflow("wf", many[:18])) == []


def reverse_chain(n: int) -> list[dict[str, Any]]:
    """``s0`` depends on ``s1``, ``s1`` on ``s2``...: a recursive search goes ``n`` deep."""
    return [flow(f"s{i}", *([f"s{i + 1}"] if i + 1 < n else [])) for i in range(n)]


SIZE_ERROR_1500 = ("spec.flows: Too many: 1500: must have at most 18 items: a Kueue "
                   "Workload holds at most 18 PodSets, one per flow")


def test_an_oversized_spec_gets_the_size_error_alone() -> None:
    """1,500 reverse-chained steps: one error, the steps are not walked (the cycle search
    ran anyway and raised RecursionError)."""
    many = reverse_chain(1500)
    many[0]["name"] = "Not_A_Label"  # not looked at: the size error is alone
    assert messages(jobflow("wf", many, managedBy="nope")) == [SIZE_ERROR_1500]


async def test_the_webhook_denies_1500_chained_steps_with_the_size_error() -> None:
    hook = admission_hook(with_custom_validator(JobFlowWebhook()))
    request = AdmissionRequest.for_object(
        "CREATE", jobflow("wf", reverse_chain(1500)), uid="u1",
        resource=GroupVersionResource("api.practice.com", "v1alpha1", "jobflows"))
    response = (await hook(request.to_review()))["response"]
    assert response["allowed"] is False
    assert (response["status"]["code"], response["status"]["message"]) == (
        403, SIZE_ERROR_1500), "a denial, not the handler's 500"


def test_too_many_dependencies_is_one_error() -> None:
    deps = ["a"] * 19
    assert messages(jobflow("wf", [flow("a"), flow("b", *deps)])) == [
        "spec.flows[1].dependencies: Too many: 19: must have at most 18 items"]
    assert messages(jobflow("wf", [flow("a"), flow("b", *deps[:18])]))[0] == \
        'spec.flows[1].dependencies[1]: Duplicate value: "a"'


def test_duplicate_flow_names() -> None:
    assert messages(jobflow("wf", [flow("a"), flow("b"), flow("a")])) == [
        'spec.flows[2].name: Duplicate value: "a"']


def test_unknown_dependency_is_named() -> None:
    # The original operator's example-job-error.yaml: job3 depends on a "job2" that does
    # not exist (the flow is "job2-error-container").
    wf = jobflow("wf", [flow("job1"), flow("job2-error-container", "job1"),
                        flow("job3", "job1", "job2")])
    assert messages(wf) == [
        'spec.flows[2].dependencies[1]: Not found: "job2": no flow of this JobFlow has '
        "this name"]
    assert messages(jobflow("wf", [flow("a"), flow("b", "a", "a")])) == [
        'spec.flows[1].dependencies[1]: Duplicate value: "a"']


def test_cycles_are_named() -> None:
    wf = jobflow("wf", [flow("root"), flow("a", "c"), flow("b", "a"), flow("c", "b")])
    assert messages(wf) == [
        "spec.flows[1].dependencies: Invalid value: dependency cycle: a -> c -> b -> a"]
    assert messages(jobflow("wf", [flow("self", "self")])) == [
        "spec.flows[0].dependencies: Invalid value: dependency cycle: self -> self"]


def test_template_and_ref_exclusive_and_required() -> None:
    both = flow("a")
    both["jobTemplateRef"] = "tpl"
    neither = {"name": "b"}
    empty = {"name": "c", "jobTemplate": {"template": {"spec": {}}}}
    bad_ref = {"name": "d", "jobTemplateRef": "Bad_Name"}
    got = messages(jobflow("wf", [both, neither, empty, bad_ref]))
    assert got[0] == "spec.flows[0].jobTemplateRef: Forbidden: may not be set together with " \
        "jobTemplate"
    assert got[1] == "spec.flows[1]: Required value: one of jobTemplate or jobTemplateRef " \
        "is required"
    assert got[2] == "spec.flows[2].jobTemplate.template.spec.containers: Required value: " \
        "a flow's Job needs at least one container"
    assert got[3].startswith('spec.flows[3].jobTemplateRef: Invalid value: "Bad_Name": '
                             "a lowercase RFC 1123 subdomain")
    assert len(got) == 4


def test_invalid_and_too_long_child_names() -> None:
    got = messages(jobflow("wf", [flow("Step_1")]))
    assert len(got) == 1
    assert got[0].startswith('spec.flows[0].name: Invalid value: "Step_1": a lowercase RFC '
                             "1123 label")
    long_name = "x" * 60
    got = messages(jobflow(long_name, [flow("step")]))
    assert got == [
        f'spec.flows[0].name: Invalid value: "step": the child Job name "{long_name}-step" '
        "is invalid: must be no more than 63 characters"]
    assert messages(jobflow("wf", [{"name": "", "jobTemplateRef": "t"}])) == [
        "spec.flows[0].name: Required value"]


def test_share_volume_mounts_and_reserved_labels() -> None:
    f = flow("a")
    f["shareVolumeMounts"] = [{"name": "nope", "mountPath": "/d"}]
    wf = jobflow("wf", [f], shareVolumes=[{"name": "v", "emptyDir": {}},
                                         {"name": "v", "emptyDir": {}}],
                 globalParams={"labels": {"jobflow.api.practice.com/flow": "x"}})
    assert messages(wf) == [
        'spec.shareVolumes[1].name: Duplicate value: "v"',
        "spec.globalParams.labels[jobflow.api.practice.com/flow]: Forbidden: this label is "
        "set by the JobFlow controller on its Jobs",
        'spec.flows[0].shareVolumeMounts[0].name: Not found: "nope": no spec.shareVolumes '
        "entry has this name",
    ]


def test_steps_frozen_once_started() -> None:
    old = jobflow("wf", [flow("a"), flow("b", "a")], suspend=True)
    new = copy.deepcopy(old)
    new["spec"]["flows"][1]["dependencies"] = []
    assert [str(e) for e in validate_jobflow_update(old, new)] == [], \
        "a suspended flow without Jobs may still change"
    running = copy.deepcopy(old)
    running["spec"]["suspend"] = False
    assert [str(e) for e in validate_jobflow_update(running, new)] == [
        "spec.flows: Forbidden: may not be changed once the JobFlow has started (it is not "
        "suspended or it has Jobs)"]
    evicted = copy.deepcopy(old)
    evicted["status"] = {"state": "Running", "jobStatusList": {"wf-a/default": {}}}
    assert len(validate_jobflow_update(evicted, new)) == 1
    # Kueue's own changes (suspend, annotations) are always allowed.
    kueue = copy.deepcopy(running)
    kueue["spec"]["suspend"] = True
    kueue["metadata"]["annotations"] = {"x": "y"}
    assert validate_jobflow_update(running, kueue) == []


def test_jobtemplate_needs_a_container() -> None:
    assert validate_jobtemplate(jobtemplate("t")) == []
    bad = jobtemplate("t")
    bad["spec"]["jobTemplate"]["template"]["spec"]["containers"] = []
    assert [str(e) for e in validate_jobtemplate(bad)] == [
        "spec.jobTemplate.template.spec.containers: Required value: a Job needs at least "
        "one container"]


def _install(server: APIServer) -> None:
    for resource, validator in (("jobflows", JobFlowWebhook()),
                                ("jobtemplates", JobTemplateWebhook())):
        rules: list[dict[str, Any]] = [{"operations": ["CREATE", "UPDATE"],
                                        "apiGroups": ["api.practice.com"],
                                        "apiVersions": ["v1alpha1"],
                                        "resources": [resource]}]
        server.add_validating_webhook(admission_hook(with_custom_validator(validator)),
                                      name=f"v{resource}.api.practice.com", rules=rules)


async def test_api_server_rejects_with_the_field_message(server: APIServer) -> None:
    _install(server)
    api = server.client()
    with pytest.raises(ApiError) as info:
        await api.create(jobflow("wf", [flow("a", "b"), flow("b", "a")]))
    assert "spec.flows[0].dependencies: Invalid value: dependency cycle: a -> b -> a" \
        in str(info.value)
    created = await api.create(jobflow("wf", [flow("a"), flow("b", "a")]))
    # Not suspended: it has started, so its steps are frozen.
    created["spec"]["flows"][1]["dependencies"] = []
    with pytest.raises(ApiError) as info:
        await api.update(created)
    assert "spec.flows: Forbidden: may not be changed once the JobFlow has started" \
        in str(info.value)
    bad = jobtemplate("t")
    del bad["spec"]["jobTemplate"]["template"]["spec"]["containers"]
    with pytest.raises(ApiError):
        await api.create(bad)
    assert (await api.get(JOBFLOW_GVK, "wf", namespace="default"))["spec"]["flows"][1][
        "dependencies"] == ["a"]
