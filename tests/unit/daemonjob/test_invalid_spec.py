"""A DaemonJob written while the validating webhook was not called (its configuration
removed): the controller runs the webhook's rules again, reports what breaks them, lists no
node, creates no Job and never retries; Kueue finishes its Workload."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.daemonjob.api import NODES_ANNOTATION
from jobframework.runtime.objects import Object

from .helpers import WORKLOAD, Harness, Kueue, daemonjob, queued

ALWAYS = ('invalid spec: spec.template.spec.restartPolicy: Unsupported value: "Always": '
          'supported values: "Never", "OnFailure"')


@pytest.fixture
async def k(h: Harness) -> Kueue:
    kq = Kueue(h)
    await kq.flavor("on-demand", "on-demand")
    return kq


def failed(obj: Object) -> dict[str, Any]:
    (cond,) = [x for x in obj["status"]["conditions"] if x["type"] == "Failed"]
    return dict(cond)


async def test_invalid_daemonjob_fails_once_and_creates_nothing(h: Harness) -> None:
    await h.add_nodes("n1", "n2")
    await h.api.create(daemonjob(pod={"restartPolicy": "Always"}))
    assert (await h.reconcile()).is_zero()
    assert await h.jobs() == {}
    dj = await h.get()
    assert NODES_ANNOTATION not in dj["metadata"].get("annotations", {}), "no run fixed"
    assert dj["status"]["state"] == "Failed"
    assert "desired" not in dj["status"], "no node listed: Kueue never counts them"
    cond = failed(dj)
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "InvalidSpec",
                                                                 ALWAYS)
    assert h.recorder.events == [("Warning", "Failed", ALWAYS)]
    await h.reconcile()
    assert (await h.get())["metadata"]["resourceVersion"] == dj["metadata"]["resourceVersion"]
    assert len(h.recorder.events) == 1, "said once"


@pytest.mark.parametrize("pod", [
    {"containers": 576},
    {"tolerations": ["NoSchedule"]},
    {"nodeSelector": {"zone": 1}},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": 3}}}},
], ids=["containers", "tolerations", "nodeSelector", "affinity"])
async def test_pod_template_parts_of_the_wrong_type_are_reported(
        h: Harness, pod: dict[str, Any]) -> None:
    """Kept as sent by the CRD: refused by the webhook naming the field, so reported the
    same way, never read as what they should be."""
    await h.add_nodes("n1")
    await h.api.create(daemonjob(pod=pod))
    await h.reconcile()
    message = failed(await h.get())["message"]
    assert message.startswith(f"invalid spec: spec.template.spec.{next(iter(pod))}"), message
    assert await h.jobs() == {}


async def test_made_invalid_after_it_started_stops_its_jobs(h: Harness, k: Kueue) -> None:
    await h.add_nodes("n1", "n2", **{"instance-type": "on-demand"})
    await h.api.create(queued())
    await h.reconcile()
    await k.reconcile()
    await k.admit("on-demand")
    await k.reconcile()
    await h.reconcile()
    assert set(await h.jobs()) == {"dj-n1", "dj-n2"}
    dj = await h.get()
    dj["spec"]["selector"] = {"matchLabels": {"a": "b"}}
    await h.api.update(dj)
    await h.reconcile()
    assert all(j["spec"]["suspend"] for j in (await h.jobs()).values()), "stopped"
    dj = await h.get()
    assert failed(dj)["message"] == ("invalid spec: spec.selector: Forbidden: each node's "
                                     "Job gets its own generated selector")
    assert dj["status"]["desired"] == 2, "what Kueue counts is kept"
    await k.reconcile()
    (wl,) = (await h.api.list(WORKLOAD, namespace="default")).items
    finished = next(x for x in wl["status"]["conditions"] if x["type"] == "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "Failed")
    assert finished["message"] == failed(dj)["message"]


async def test_queued_invalid_daemonjob_never_gets_a_workload(h: Harness, k: Kueue) -> None:
    await h.add_nodes("n1")
    await h.api.create(queued(pod={"restartPolicy": "Always"}))
    await h.reconcile()
    await k.reconcile()
    assert (await h.api.list(WORKLOAD, namespace="default")).items == []


async def test_null_affinity_is_unset(h: Harness) -> None:
    """Helm renders an empty ``affinity:`` as null, which the webhook accepts: the node
    Jobs are pinned as without it."""
    await h.add_nodes("n1", "n2")
    await h.api.create(daemonjob(pod={"affinity": None}))
    await h.reconcile()
    jobs = await h.jobs()
    assert set(jobs) == {"dj-n1", "dj-n2"}
    terms = jobs["dj-n1"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                       "values": ["n1"]}]}]


async def test_a_generation_already_acted_on_is_not_checked_again(h: Harness) -> None:
    """Accepted by an older, laxer webhook (``Node 1`` was read as ``node1``) and already
    run: an upgrade does not fail it; editing it does."""
    await h.add_nodes("n1")
    dj = await h.api.create(daemonjob(excludeNodeList="Node 1"))
    dj["status"] = {"state": "Running", "observedGeneration": dj["metadata"]["generation"]}
    await h.api.update_status(dj)
    await h.reconcile()
    assert set(await h.jobs()) == {"dj-n1"}
    assert (await h.get())["status"]["state"] == "Running"
    dj = await h.get()
    dj["spec"]["failurePolicy"] = "Continue"
    await h.api.update(dj)
    await h.reconcile()
    dj = await h.get()
    assert dj["status"]["state"] == "Failed"
    assert failed(dj)["message"].startswith(
        'invalid spec: spec.excludeNodeList: Invalid value: "Node 1": entry 1 ("Node 1") '
        "is not a node name")
    assert (await h.jobs())["dj-n1"]["spec"]["suspend"] is True
