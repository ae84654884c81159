"""The DaemonJob webhook: every rule with its field path, the defaulting, the create-time
eligible-node check, the update rules, Kueue's base webhook, and the API server's
admission chain."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from integrations.daemonjob import (
    DAEMONJOB_GVK,
    FRAMEWORK_NAME,
    NODES_ANNOTATION,
    DaemonJobKueueWebhook,
    DaemonJobWebhook,
    load_samples,
    probe_object,
    validate_daemonjob,
    validate_daemonjob_update,
)
from integrations.daemonjob.webhook import default_daemonjob, eligible_node_errors, has_started
from jobframework import constants as c
from jobframework.integrations import IntegrationManager
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import GroupVersionResource, Object
from jobframework.testing import APIServer
from jobframework.webhook import (
    AdmissionRequest,
    ValidationError,
    admission_hook,
    with_custom_defaulter,
    with_custom_validator,
)

from .helpers import Harness, daemonjob, node, queued

AFFINITY_PATH = ("spec.template.spec.affinity.nodeAffinity."
                 "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")
DNS1123 = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
           "characters, '-' or '.', and must start and end with an alphanumeric character "
           "(e.g. 'example.com', regex used for validation is "
           "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def messages(obj: Object) -> list[str]:
    return [str(e) for e in validate_daemonjob(obj)]


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def test_valid_daemonjobs_have_no_errors() -> None:
    (sample,) = load_samples()["example.yaml"]
    assert messages(sample) == []
    assert messages(daemonjob("x" * 63, failurePolicy="Continue", excludeNodeList="",
                              pod={"restartPolicy": "OnFailure"})) == []
    assert messages(daemonjob(excludeNodeList=" n1 ,ip-10-0-0-1.ec2.internal ")) == []
    assert messages(daemonjob(pod=affinity(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}))) == []
    assert messages(probe_object("default")) == []


def test_name_too_long() -> None:
    assert messages(daemonjob("x" * 64)) == [
        "metadata.name: Too long: may not be more than 63 bytes"]


def test_containers_required() -> None:
    dj = daemonjob()
    dj["spec"]["template"]["spec"]["containers"] = []
    assert messages(dj) == ["spec.template.spec.containers: Required value: a node's Job "
                            "needs at least one container"]
    del dj["spec"]["template"]
    assert messages(dj) == ["spec.template.spec.containers: Required value: a node's Job "
                            "needs at least one container"]


def test_restart_policy_always_refused() -> None:
    assert messages(daemonjob(pod={"restartPolicy": "Always"})) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
        '"Never", "OnFailure"']


def test_exclude_list_entries() -> None:
    assert messages(daemonjob(excludeNodeList="a,,b, node 1,Bad_Name")) == [
        'spec.excludeNodeList: Invalid value: "a,,b, node 1,Bad_Name": entry 2 is empty',
        'spec.excludeNodeList: Invalid value: "a,,b, node 1,Bad_Name": entry 4 ("node 1") '
        "is not a node name: " + DNS1123,
        'spec.excludeNodeList: Invalid value: "a,,b, node 1,Bad_Name": entry 5 ("Bad_Name") '
        "is not a node name: " + DNS1123,
    ]
    assert messages(daemonjob(excludeNodeList="n1,")) == [
        'spec.excludeNodeList: Invalid value: "n1,": entry 2 is empty']
    assert messages(daemonjob(excludeNodeList=["n1"])) == [
        'spec.excludeNodeList: Invalid value: ["n1"]: must be a comma-separated string of '
        "node names"]


def test_failure_policy_values() -> None:
    assert messages(daemonjob(failurePolicy="Retry")) == [
        'spec.failurePolicy: Unsupported value: "Retry": supported values: "FailFast", '
        '"Continue"']
    assert messages(daemonjob(failurePolicy="FailFast")) == []


def test_global_node_name_and_reserved_labels() -> None:
    dj = daemonjob(globalParams={"nodeName": "n1", "labels": {
        "daemonjob.api.practice.com/name": "x", "daemonjob.api.practice.com/node": "y",
        "team": "a"}})
    assert messages(dj) == [
        "spec.globalParams.nodeName: Forbidden: a DaemonJob pins each Job to its own node",
        "spec.globalParams.labels[daemonjob.api.practice.com/name]: Forbidden: this label is "
        "set by the DaemonJob controller on its Jobs",
        "spec.globalParams.labels[daemonjob.api.practice.com/node]: Forbidden: this label is "
        "set by the DaemonJob controller on its Jobs",
    ]


def test_managed_by_is_the_daemonjobs_own() -> None:
    # No longer refused (it was while it meant the node Jobs' managedBy): it names the
    # controller of the DaemonJob (test_multikueue.py has the MultiKueue rules).
    assert messages(daemonjob(managedBy="api.practice.com/daemonjob-controller")) == []
    assert messages(daemonjob(managedBy="example.com/other")) == []
    assert messages(daemonjob(managedBy="other")) == [
        'spec.managedBy: Invalid value: "other": must be a domain-prefixed path '
        '(such as "acme.io/foo")']


def test_selector_fields_forbidden() -> None:
    assert messages(daemonjob(selector={"matchLabels": {"a": "b"}}, manualSelector=True)) == [
        "spec.selector: Forbidden: each node's Job gets its own generated selector",
        "spec.manualSelector: Forbidden: each node's Job gets its own generated selector"]


def test_node_affinity_that_selects_nothing() -> None:
    assert messages(daemonjob(pod=affinity())) == [
        f"{AFFINITY_PATH}: Required value: an empty list of terms selects no node"]
    ok = {"matchExpressions": [{"key": "a", "operator": "Exists"}]}
    assert messages(daemonjob(pod=affinity(ok, {}, {"matchExpressions": []}))) == [
        f"{AFFINITY_PATH}[1]: Invalid value: a term without requirements selects no node",
        f"{AFFINITY_PATH}[2]: Invalid value: a term without requirements selects no node"]


def test_every_error_is_reported_at_once() -> None:
    dj = daemonjob("x" * 70, failurePolicy="Nope", pod={"restartPolicy": "Always"})
    assert [m.split(":")[0] for m in messages(dj)] == [
        "metadata.name", "spec.template.spec.restartPolicy", "spec.failurePolicy"]


# --- defaulting --------------------------------------------------------------------------


def test_restart_policy_defaulting() -> None:
    dj = daemonjob()
    default_daemonjob(dj)
    assert dj["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    on_failure = daemonjob(pod={"restartPolicy": "OnFailure"})
    default_daemonjob(on_failure)
    assert on_failure["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure", \
        "kept, where the original operator forced Never"
    bare: Object = {"metadata": {"name": "x"}, "spec": {}}
    default_daemonjob(bare)
    assert bare["spec"] == {"template": {"spec": {"restartPolicy": "Never"}}}
    no_spec: Object = {"metadata": {"name": "x"}}
    default_daemonjob(no_spec)
    assert no_spec == {"metadata": {"name": "x"}}


# --- updates -----------------------------------------------------------------------------


FROZEN = ("spec.excludeNodeList: Forbidden: may not be changed once the DaemonJob has started "
          "(it is not suspended, or it has fixed its nodes or has Jobs)")


def test_spec_frozen_once_started() -> None:
    old = daemonjob(suspend=True)
    new = copy.deepcopy(old)
    new["spec"]["excludeNodeList"] = "n1"
    assert not has_started(old)
    assert validate_daemonjob_update(old, new) == [], "a held DaemonJob may still change"
    running = copy.deepcopy(old)
    running["spec"]["suspend"] = False
    assert [str(e) for e in validate_daemonjob_update(running, new)] == [FROZEN]
    fixed = copy.deepcopy(old)
    fixed["metadata"]["annotations"] = {NODES_ANNOTATION: '["n1"]'}
    assert has_started(fixed)
    assert [str(e) for e in validate_daemonjob_update(fixed, new)] == [FROZEN]
    with_jobs = copy.deepcopy(old)
    with_jobs["status"] = {"state": "Running", "jobStatusList": {"dj-n1/default": {}}}
    assert [str(e) for e in validate_daemonjob_update(with_jobs, new)] == [FROZEN]
    # Kueue's own changes (suspend, annotations) are always allowed.
    kueue = copy.deepcopy(running)
    kueue["spec"]["suspend"] = True
    kueue["metadata"]["annotations"] = {"x": "y"}
    assert validate_daemonjob_update(running, kueue) == []
    # The create rules apply to updates too.
    bad = copy.deepcopy(old)
    bad["spec"]["failurePolicy"] = "Retry"
    assert [str(e).split(":")[0] for e in validate_daemonjob_update(old, bad)] == [
        "spec.failurePolicy"]


def test_template_changes_are_frozen_too() -> None:
    running = daemonjob()
    new = copy.deepcopy(running)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.36"
    assert [str(e) for e in validate_daemonjob_update(running, new)] == [
        "spec.template: Forbidden: may not be changed once the DaemonJob has started (it is "
        "not suspended, or it has fixed its nodes or has Jobs)"]


# --- the create-time eligible-node check ---------------------------------------------------


async def test_no_eligible_node_is_refused_on_create(h: Harness) -> None:
    await h.add_node(node("n1", ready=False))
    await h.add_nodes("n2")
    errs = await eligible_node_errors(h.api, daemonjob(excludeNodeList="n2"))
    assert [str(e) for e in errs] == [
        "spec: Invalid value: no node is eligible, of 2 nodes: 1 is excluded by "
        "spec.excludeNodeList, 1 is not Ready"]
    assert await eligible_node_errors(h.api, daemonjob()) == []
    hook = DaemonJobWebhook(h.api)
    with pytest.raises(ValidationError, match="no node is eligible"):
        await hook.validate_create(*_create(daemonjob(excludeNodeList="n2")))
    assert await hook.validate_create(*_create(daemonjob())) is None
    # Without a reader (or when Nodes cannot be listed) there is no check.
    assert await DaemonJobWebhook().validate_create(
        *_create(daemonjob(excludeNodeList="n2"))) is None


class _Unlisted:
    async def list(self, *_: Any, **__: Any) -> Any:
        raise ApiError("forbidden")


async def test_nodes_that_cannot_be_listed_are_not_checked() -> None:
    assert await eligible_node_errors(_Unlisted(), daemonjob()) == []  # type: ignore[arg-type]


def _create(obj: Object) -> tuple[Object, AdmissionRequest]:
    return obj, AdmissionRequest.for_object(
        "CREATE", obj, resource=GroupVersionResource("api.practice.com", "v1alpha1",
                                                     "daemonjobs"), uid="1")


# --- Kueue's base webhook ------------------------------------------------------------------


def _kueue_hook(server: APIServer) -> DaemonJobKueueWebhook:
    im = IntegrationManager()
    im.register_external_job_type(FRAMEWORK_NAME)
    return DaemonJobKueueWebhook(server.client(), integration_manager=im)


async def test_kueue_webhook_suspends_queued_daemonjobs(h: Harness) -> None:
    await h.add_nodes("n1")
    hook = _kueue_hook(h.server)
    dj = queued()
    dj["spec"]["suspend"] = False
    await hook.default(dj)
    assert dj["spec"]["suspend"] is True
    assert dj["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    plain = daemonjob()
    await hook.default(plain)
    assert "suspend" not in plain["spec"], "not queued: not Kueue's"
    assert await hook.validate_create(dj) is None


async def test_kueue_webhook_applies_the_daemonjob_rules(h: Harness) -> None:
    await h.add_nodes("n1")
    hook = _kueue_hook(h.server)
    with pytest.raises(Exception, match=re.escape('spec.failurePolicy: Unsupported value: '
                                                  '"Retry"')):
        await hook.validate_create(queued(failurePolicy="Retry"))
    with pytest.raises(ValidationError, match=re.escape(
            "no node is eligible, of 1 node: 1 is excluded by spec.excludeNodeList")):
        await hook.validate_create(queued(excludeNodeList="n1"))
    old = queued()
    old["spec"]["suspend"] = False
    new = copy.deepcopy(old)
    new["spec"]["excludeNodeList"] = "n1"
    with pytest.raises(Exception, match=re.escape("spec.excludeNodeList: Forbidden: may not "
                                                  "be changed")):
        await hook.validate_update(old, new)


# --- through the API server --------------------------------------------------------------


def _install(server: APIServer, hook: Any) -> None:
    rules: list[dict[str, Any]] = [{"operations": ["CREATE", "UPDATE"],
                                    "apiGroups": ["api.practice.com"],
                                    "apiVersions": ["v1alpha1"], "resources": ["daemonjobs"]}]
    server.add_mutating_webhook(admission_hook(with_custom_defaulter(hook)),
                                name="mdaemonjob.api.practice.com", rules=rules)
    server.add_validating_webhook(admission_hook(with_custom_validator(hook)),
                                  name="vdaemonjob.api.practice.com", rules=rules)


async def test_api_server_defaults_and_rejects(h: Harness) -> None:
    await h.add_nodes("n1")
    _install(h.server, DaemonJobWebhook(h.api))
    with pytest.raises(ApiError) as info:
        await h.api.create(daemonjob(pod={"restartPolicy": "Always"}))
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Always"' in str(info.value)
    with pytest.raises(ApiError) as info:
        await h.api.create(daemonjob(excludeNodeList="n1"))
    assert "no node is eligible, of 1 node: 1 is excluded by spec.excludeNodeList" \
        in str(info.value)
    created = await h.api.create(daemonjob())
    assert created["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    created["spec"]["excludeNodeList"] = "n1"
    with pytest.raises(ApiError) as info:
        await h.api.update(created)
    assert FROZEN in str(info.value)
    stored = await h.api.get(DAEMONJOB_GVK, "dj", namespace="default")
    assert "excludeNodeList" not in stored["spec"]
    assert c.QUEUE_LABEL not in stored["metadata"].get("labels", {})


async def test_api_server_with_the_kueue_webhook_suspends_queued_daemonjobs(
    h: Harness,
) -> None:
    await h.add_nodes("n1")
    _install(h.server, _kueue_hook(h.server))
    dj = queued()
    dj["spec"]["suspend"] = False
    created = await h.api.create(dj)
    assert created["spec"]["suspend"] is True, "queued: held until Kueue admits it"
    assert created["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    plain = await h.api.create(daemonjob("plain"))
    assert "suspend" not in plain["spec"]
    with pytest.raises(ApiError) as info:
        await h.api.create(queued("bad", excludeNodeList="n1"))
    assert "no node is eligible, of 1 node: 1 is excluded by spec.excludeNodeList" \
        in str(info.value)
