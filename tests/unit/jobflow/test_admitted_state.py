"""Quota integrity: a tenant cannot steer or resize what Kueue admitted for a JobFlow.

The admission the DAG controller acts on (the pod-sets-info annotation, and the JobTemplates
read at admission) may be changed only by privileged users (the Kueue webhook's update
rule), and the controller checks it against the Workload before it creates or resumes a
Job: written past the webhook, a changed admission stops the JobFlow instead of reaching
a Job. An edited JobTemplate is for the next admission, never for a step of this one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from integrations.jobflow import JOBFLOW_GVK, JOBTEMPLATE_GVK, JobFlowKueueWebhook
from integrations.jobflow.admission import ADMITTED_TEMPLATES_ANNOTATION
from integrations.jobflow.api import POD_SETS_INFO_ANNOTATION
from jobframework.admittedstate import (
    DEFAULT_PRIVILEGED_USERS,
    KUEUE_CONTROLLER_MANAGER_USER,
    service_account_username,
)
from jobframework.admittedworkload import REASON_ADMISSION_MISMATCH, AdmissionGuard
from jobframework.indexer import owner_reference_index_key, workload_owner_index_func
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import Object
from jobframework.testing import APIServer
from jobframework.testing.admission import RegisteredWebhook
from jobframework.webhook import admission_hook, with_custom_validator

from .helpers import Harness, flow, jobtemplate
from .test_kueue import WORKLOAD, Kueue, queued

TENANT = "alice"
#: Our manager's ServiceAccount as a deployment would configure it.
MANAGER = service_account_username("kueue-jobframework-system",
                                   "kueue-jobframework-controller-manager")
#: What a tenant writes to run on another flavor's nodes.
STEERED = [{"name": "a", "count": 1, "annotations": {}, "labels": {},
            "nodeSelector": {"zone": "z2-reserved"},
            "tolerations": [{"operator": "Exists"}]}]


@pytest.fixture
async def k(h: Harness) -> Kueue:
    kq = Kueue(h)
    await kq.flavor("f1", "z1")
    # The DAG controller under Kueue: it reads the JobFlow's Workload through the owner
    # index, as setup() wires it.
    h.reader.indexes[(WORKLOAD, owner_reference_index_key(JOBFLOW_GVK))] = \
        workload_owner_index_func(JOBFLOW_GVK)
    h.rec.admission_guard = AdmissionGuard(h.reader, JOBFLOW_GVK)
    return kq


def install_webhook(server: APIServer, k: Kueue) -> RegisteredWebhook:
    webhook = JobFlowKueueWebhook(
        server.client(), integration_manager=k.im,
        privileged_users=DEFAULT_PRIVILEGED_USERS.including([MANAGER]))
    return server.add_validating_webhook(
        admission_hook(with_custom_validator(webhook)), name="vjobflow.api.practice.com",
        rules=[{"operations": ["CREATE", "UPDATE"], "apiGroups": ["api.practice.com"],
                "apiVersions": ["v1alpha1"], "resources": ["jobflows"]}])


async def admitted(h: Harness, k: Kueue, flows: list[dict[str, Any]]) -> Object:
    """A queued JobFlow admitted in flavor f1 (zone z1) and started by Kueue's reconciler."""
    await h.api.create(queued("wf", flows))
    await k.reconcile()
    await k.admit("f1")
    await k.reconcile()
    wf = await h.get("wf")
    assert wf["spec"]["suspend"] is False
    return wf


def annotated(wf: Object, key: str, value: str) -> Object:
    wf["metadata"]["annotations"][key] = value
    return wf


async def test_tenant_cannot_change_the_admission(h: Harness, k: Kueue,
                                                  server: APIServer) -> None:
    install_webhook(server, k)
    wf = await admitted(h, k, [flow("a")])
    tenant = server.client(user=TENANT)
    with pytest.raises(ApiError) as info:
        await tenant.update(annotated(wf, POD_SETS_INFO_ANNOTATION, json.dumps(STEERED)))
    assert info.value.code == 403
    assert f"metadata.annotations[{POD_SETS_INFO_ANNOTATION}]" in str(info.value)
    assert "'alice'" in str(info.value)
    stored = json.loads((await h.get("wf"))["metadata"]["annotations"][
        POD_SETS_INFO_ANNOTATION])
    assert stored[0]["nodeSelector"] == {"zone": "z1"}, "the admission is Kueue's"

    wf = await h.get("wf")
    del wf["metadata"]["annotations"][POD_SETS_INFO_ANNOTATION]
    with pytest.raises(ApiError):
        await tenant.update(wf)  # removing it is a change too

    # The rule is about the admission only: the tenant still edits the rest.
    wf = await h.get("wf")
    wf["metadata"].setdefault("labels", {})["team"] = "a"
    assert (await tenant.update(wf))["metadata"]["labels"]["team"] == "a"


@pytest.mark.parametrize("user", [KUEUE_CONTROLLER_MANAGER_USER, MANAGER, "admin"])
async def test_privileged_users_may_change_the_admission(h: Harness, k: Kueue,
                                                         server: APIServer, user: str) -> None:
    install_webhook(server, k)
    wf = await admitted(h, k, [flow("a")])
    updated = await server.client(user=user).update(
        annotated(wf, POD_SETS_INFO_ANNOTATION, json.dumps(STEERED)))
    assert "z2-reserved" in updated["metadata"]["annotations"][POD_SETS_INFO_ANNOTATION]


async def test_an_admission_written_past_the_webhook_stops_the_jobflow(
        h: Harness, k: Kueue) -> None:
    wf = await admitted(h, k, [flow("a")])
    await h.api.update(annotated(wf, POD_SETS_INFO_ANNOTATION, json.dumps(STEERED)))

    await h.reconcile("wf")
    assert await h.jobs() == {}, "no Job runs the tenant's nodeSelector and tolerations"
    wf = await h.get("wf")
    assert wf["spec"]["suspend"] is True
    assert POD_SETS_INFO_ANNOTATION not in wf["metadata"].get("annotations", {})
    ((type_, _, message),) = [e for e in h.recorder.events
                                   if e[1] == REASON_ADMISSION_MISMATCH]
    assert type_ == "Warning"
    assert '"zone":"z2-reserved"' in message and '"zone":"z1"' in message

    # Kueue's reconciler starts it again with the Workload's own admission.
    await k.reconcile()
    await h.reconcile("wf")
    pod = (await h.jobs())["wf-a"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"zone": "z1"}
    assert pod["tolerations"] == [{"key": "zone", "operator": "Equal", "value": "z1",
                                   "effect": "NoSchedule"}]


async def test_an_admission_without_its_workload_starts_nothing(h: Harness, k: Kueue) -> None:
    # Not queued: no Workload ever admits it, whatever it carries.
    wf = await h.api.create(queued("wf", [flow("a")]))
    del wf["metadata"]["labels"]
    wf["spec"]["suspend"] = False
    wf["metadata"]["annotations"] = {POD_SETS_INFO_ANNOTATION: json.dumps(STEERED)}
    await h.api.update(wf)
    await h.reconcile("wf")
    assert await h.jobs() == {}
    assert (await h.get("wf"))["spec"]["suspend"] is True
    assert REASON_ADMISSION_MISMATCH in h.recorder.reasons()


async def test_a_jobflow_kueue_does_not_queue_is_not_checked(h: Harness, k: Kueue) -> None:
    wf = await h.api.create(queued("wf", [flow("a")]))
    del wf["metadata"]["labels"]
    wf["spec"]["suspend"] = False
    await h.api.update(wf)
    await h.reconcile("wf")
    assert list(await h.jobs()) == ["wf-a"]
    assert REASON_ADMISSION_MISMATCH not in h.recorder.reasons()


async def test_an_edited_jobtemplate_does_not_resize_the_next_step(
        h: Harness, k: Kueue) -> None:
    await h.api.create(jobtemplate("tpl", parallelism=1))
    await admitted(h, k, [flow("a"), flow("b", "a", ref="tpl")])
    await h.reconcile("wf")
    assert list(await h.jobs()) == ["wf-a"]

    # The tenant owns the JobTemplate: nothing stops them from editing it.
    tpl = await h.api.get(JOBTEMPLATE_GVK, "tpl", namespace="default")
    tpl["spec"]["jobTemplate"]["parallelism"] = 50
    await h.api.update(tpl)
    await h.complete("wf-a")
    await h.reconcile("wf")
    job_b = (await h.jobs())["wf-b"]
    assert job_b["spec"]["parallelism"] == 1, "the step runs what was admitted"
    assert job_b["spec"]["suspend"] is False

    # Kueue's reconciler sees the JobFlow as it was admitted: no requeue.
    await k.reconcile()
    wf = await h.get("wf")
    assert wf["spec"]["suspend"] is False
    assert [ps["count"] for ps in (await k.workload())["spec"]["podSets"]] == [1, 1]


async def test_the_template_snapshot_written_past_the_webhook_stops_the_jobflow(
        h: Harness, k: Kueue, server: APIServer) -> None:
    await h.api.create(jobtemplate("tpl", parallelism=1))
    wf = await admitted(h, k, [flow("a"), flow("b", "a", ref="tpl")])
    snapshot = json.loads(wf["metadata"]["annotations"][ADMITTED_TEMPLATES_ANNOTATION])
    assert snapshot["b"]["parallelism"] == 1
    snapshot["b"]["parallelism"] = 50

    hook = install_webhook(server, k)
    with pytest.raises(ApiError):
        await server.client(user=TENANT).update(
            annotated(wf, ADMITTED_TEMPLATES_ANNOTATION, json.dumps(snapshot)))
    server.remove_webhook(hook)  # the webhook's configuration removed, say

    await h.api.update(annotated(await h.get("wf"), ADMITTED_TEMPLATES_ANNOTATION,
                                 json.dumps(snapshot)))
    await h.reconcile("wf")
    await h.complete("wf-a")
    await h.reconcile("wf")
    assert "wf-b" not in await h.jobs()
    wf = await h.get("wf")
    assert wf["spec"]["suspend"] is True
    assert ADMITTED_TEMPLATES_ANNOTATION not in wf["metadata"].get("annotations", {})
    (message,) = [m for _, r, m in h.recorder.events if r == REASON_ADMISSION_MISMATCH]
    assert "would run 50 pods" in message and "admitted 1" in message
