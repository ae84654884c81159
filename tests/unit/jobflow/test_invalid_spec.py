"""A JobFlow or JobTemplate written while the validating webhook was not called (its
configuration removed): the controllers run the webhook's rules again, report what breaks
them, act on nothing and never retry."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.jobflow import JOBTEMPLATE_GVK, load_crds
from integrations.jobflow.controller import JobTemplateReconciler
from integrations.jobflow.webhook import validate_jobflow
from jobframework import constants as c
from jobframework.runtime.objects import Object
from jobframework.runtime.reconcile import Request
from jobframework.testing import APIServer

from .helpers import FakeRecorder, Harness, flow, jobflow, jobtemplate
from .test_kueue import Kueue, queued

CYCLE = [flow("a", "b"), flow("b", "a")]
CYCLE_MESSAGE = ("invalid spec: spec.flows[0].dependencies: Invalid value: "
                 "dependency cycle: a -> b -> a")


@pytest.fixture
async def k(h: Harness) -> Kueue:
    kq = Kueue(h)
    await kq.flavor("f1", "z1")
    return kq


def failed(obj: Object) -> dict[str, Any]:
    (cond,) = [x for x in obj["status"]["conditions"] if x["type"] == "Failed"]
    return dict(cond)


async def test_invalid_jobflow_fails_once_and_creates_nothing(h: Harness) -> None:
    await h.api.create(jobflow("wf", CYCLE))
    assert (await h.reconcile("wf")).is_zero()
    assert await h.jobs() == {}
    wf = await h.get("wf")
    assert wf["status"]["state"] == "Failed"
    cond = failed(wf)
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "InvalidSpec",
                                                                 CYCLE_MESSAGE)
    assert cond["message"] == f"invalid spec: {validate_jobflow(wf).to_aggregate()}", \
        "worded as the webhook's denial"
    assert cond["observedGeneration"] == wf["metadata"]["generation"]
    assert h.recorder.events == [("Warning", "Failed", CYCLE_MESSAGE)]
    # Level-based and terminal: another pass writes nothing and says nothing.
    assert (await h.reconcile("wf")).is_zero()
    assert (await h.get("wf"))["metadata"]["resourceVersion"] == \
        wf["metadata"]["resourceVersion"]
    assert len(h.recorder.events) == 1


def without_max_items(crd: Object) -> Object:
    """The JobFlow CRD as shipped before its ``maxItems`` bounds."""
    crd = copy.deepcopy(crd)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    flows = spec["properties"]["flows"]
    flows.pop("maxItems", None)
    flows["items"]["properties"]["dependencies"].pop("maxItems", None)
    return crd


async def test_oversized_chain_stored_past_the_webhook_fails_with_the_size_error(
        server: APIServer, h: Harness) -> None:
    """1,500 reverse-chained steps stored under a CRD without ``maxItems`` (created
    before the upgrade; the in-memory server does not ratchet validation, so it keeps
    serving that CRD): the controller fails the JobFlow with the webhook's size error
    instead of raising RecursionError on every pass."""
    (crd,) = [x for x in load_crds() if x["spec"]["names"]["kind"] == "JobFlow"]
    server.register_crd(without_max_items(crd))
    chain = [flow(f"s{i}", *([f"s{i + 1}"] if i + 1 < 1500 else [])) for i in range(1500)]
    await h.api.create(jobflow("wf", chain))
    assert (await h.reconcile("wf")).is_zero()
    assert await h.jobs() == {}
    wf = await h.get("wf")
    message = ("invalid spec: spec.flows: Too many: 1500: must have at most 18 items: a "
               "Kueue Workload holds at most 18 PodSets, one per flow")
    assert wf["status"]["state"] == "Failed"
    cond = failed(wf)
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "InvalidSpec",
                                                                 message)
    assert h.recorder.events == [("Warning", "Failed", message)]
    assert (await h.reconcile("wf")).is_zero(), "terminal: nothing more to do"
    assert len(h.recorder.events) == 1


async def test_every_error_is_listed(h: Harness) -> None:
    await h.api.create(jobflow("wf", [flow("a", "nope"), flow("a")]))
    await h.reconcile("wf")
    message = failed(await h.get("wf"))["message"]
    assert message == ('invalid spec: [spec.flows[0].dependencies[0]: Not found: "nope": no '
                       'flow of this JobFlow has this name, spec.flows[1].name: Duplicate '
                       'value: "a"]')


async def test_new_generation_is_checked_again(h: Harness) -> None:
    await h.api.create(jobflow("wf", CYCLE))
    await h.reconcile("wf")
    # Still invalid, another way: the message follows, and is said once more.
    wf = await h.get("wf")
    wf["spec"]["flows"] = [flow("a", "nope")]
    await h.api.update(wf)
    await h.reconcile("wf")
    wf = await h.get("wf")
    assert failed(wf)["message"] == ('invalid spec: spec.flows[0].dependencies[0]: Not found: '
                                     '"nope": no flow of this JobFlow has this name')
    assert failed(wf)["observedGeneration"] == wf["metadata"]["generation"] == 2
    assert [r for _, r, _ in h.recorder.events] == ["Failed", "Failed"]
    # Corrected: failed for an invalid spec is terminal (Kueue finished its Workload).
    wf["spec"]["flows"] = [flow("a")]
    await h.api.update(wf)
    await h.reconcile("wf")
    assert await h.jobs() == {}
    assert failed(await h.get("wf"))["reason"] == "InvalidSpec"
    assert len(h.recorder.events) == 2


async def test_made_invalid_after_it_started_stops_its_jobs(h: Harness) -> None:
    await h.api.create(jobflow("wf", [flow("a"), flow("b")]))
    await h.reconcile("wf")
    await h.complete("wf-b")
    wf = await h.get("wf")
    wf["spec"]["globalParams"] = {"labels": {"jobflow.api.practice.com/flow": "x"}}
    await h.api.update(wf)
    await h.reconcile("wf")
    jobs = await h.jobs()
    assert jobs["wf-a"]["spec"]["suspend"] is True, "the running Job is stopped"
    assert set(jobs) == {"wf-a", "wf-b"}
    wf = await h.get("wf")
    assert wf["status"]["state"] == "Failed"
    assert "spec.globalParams.labels[jobflow.api.practice.com/flow]: Forbidden" in \
        failed(wf)["message"]


async def test_invalid_managed_by_is_no_other_controller(h: Harness) -> None:
    await h.api.create(jobflow("wf", [flow("a")], managedBy="not-a-path"))
    await h.reconcile("wf")
    assert failed(await h.get("wf"))["message"].startswith(
        'invalid spec: spec.managedBy: Invalid value: "not-a-path"')


async def test_managed_elsewhere_gets_an_event_and_no_status(h: Harness) -> None:
    created = await h.api.create(jobflow("wf", CYCLE, managedBy=c.MULTIKUEUE_CONTROLLER_NAME))
    await h.reconcile("wf")
    await h.reconcile("wf")
    after = await h.get("wf")
    assert "status" not in after, "MultiKueue's to write"
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert h.recorder.events == [("Warning", "InvalidSpec", CYCLE_MESSAGE)], "once"


async def test_kueue_finishes_the_workload_of_an_invalid_jobflow(h: Harness, k: Kueue) -> None:
    """Admitted before the controller saw it (the cycle does not stop Kueue from building
    the Workload): the Failed state finishes the Workload as failed, with the message."""
    await h.api.create(queued("wf", CYCLE))
    await k.reconcile()
    await k.admit("f1")
    await k.reconcile()
    assert (await h.get("wf"))["spec"]["suspend"] is False
    await h.reconcile("wf")
    assert await h.jobs() == {}
    await k.reconcile()
    finished = next(x for x in (await k.workload())["status"]["conditions"]
                    if x["type"] == "Finished")
    assert (finished["status"], finished["reason"], finished["message"]) == (
        "True", "Failed", CYCLE_MESSAGE)


async def test_invalid_jobtemplate_gets_one_event_per_generation(h: Harness) -> None:
    recorder = FakeRecorder()
    templates = JobTemplateReconciler(h.reader, h.api, recorder)
    bad = jobtemplate("tpl")
    bad["spec"]["jobTemplate"]["template"]["spec"]["containers"] = "main"
    await h.api.create(bad)
    request = Request.of("default", "tpl")
    await templates.reconcile(request)
    await templates.reconcile(request)
    message = ('invalid spec: spec.jobTemplate.template.spec.containers: Invalid value: '
               '"string": must be an array')
    assert recorder.events == [("Warning", "InvalidSpec", message)]
    tpl = await h.api.get(JOBTEMPLATE_GVK, "tpl", namespace="default")
    tpl["spec"]["jobTemplate"]["template"]["spec"]["containers"] = []
    await h.api.update(tpl)
    await templates.reconcile(request)
    assert recorder.events[1:] == [("Warning", "InvalidSpec", (
        "invalid spec: spec.jobTemplate.template.spec.containers: Required value: a Job "
        "needs at least one container"))]
    # Valid again: nothing said; broken again the same way: said again.
    good = copy.deepcopy(jobtemplate("tpl")["spec"])
    tpl = await h.api.get(JOBTEMPLATE_GVK, "tpl", namespace="default")
    tpl["spec"] = good
    await h.api.update(tpl)
    await templates.reconcile(request)
    assert len(recorder.events) == 2
    assert "status" not in await h.api.get(JOBTEMPLATE_GVK, "tpl", namespace="default")
