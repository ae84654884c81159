"""Quota integrity: a tenant cannot steer or widen what Kueue admitted for a DaemonJob.

The admission and the run's node list are fixed when Kueue starts the DaemonJob; only
privileged users may change them (the Kueue webhook's update rule), and the controller
checks both against the Workload before it creates or resumes a node Job: written past
the webhook, a change stops the DaemonJob instead of starting Jobs the Workload does not
count, or on nodes of another flavor.
"""

from __future__ import annotations

import json

import pytest

from integrations.daemonjob import DAEMONJOB_GVK, JOB_GVK
from integrations.daemonjob.api import NODES_ANNOTATION, POD_SETS_INFO_ANNOTATION
from integrations.daemonjob.setup import DaemonJobKueueWebhook
from jobframework.admittedstate import KUEUE_CONTROLLER_MANAGER_USER
from jobframework.admittedworkload import REASON_ADMISSION_MISMATCH, AdmissionGuard
from jobframework.indexer import owner_reference_index_key, workload_owner_index_func
from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import Object
from jobframework.testing import APIServer
from jobframework.webhook import admission_hook, with_custom_validator

from .helpers import WORKLOAD, Harness, Kueue
from .test_kueue import ON_DEMAND, started

TENANT = "alice"


@pytest.fixture
async def k(h: Harness) -> Kueue:
    kq = Kueue(h)
    await kq.flavor("on-demand", "on-demand")
    await kq.flavor("spot", "spot")
    # The controller under Kueue reads the DaemonJob's Workload, as setup() wires it.
    h.reader.indexes[(WORKLOAD, owner_reference_index_key(DAEMONJOB_GVK))] = \
        workload_owner_index_func(DAEMONJOB_GVK)
    h.rec.admission_guard = AdmissionGuard(h.reader, DAEMONJOB_GVK)
    return kq


def install_webhook(server: APIServer, k: Kueue) -> None:
    server.add_validating_webhook(
        admission_hook(with_custom_validator(DaemonJobKueueWebhook(
            server.client(), integration_manager=k.im))),
        name="vdaemonjob.api.practice.com",
        rules=[{"operations": ["UPDATE"], "apiGroups": ["api.practice.com"],
                "apiVersions": ["v1alpha1"], "resources": ["daemonjobs"]}])


def with_annotation(dj: Object, key: str, value: str) -> Object:
    dj["metadata"]["annotations"][key] = value
    return dj


async def widened(h: Harness) -> str:
    """Three more on-demand nodes, and the run's node list naming them too."""
    await h.add_nodes("od3", "od4", "od5", **ON_DEMAND)
    nodes = json.loads((await h.get())["metadata"]["annotations"][NODES_ANNOTATION])
    return json.dumps(sorted([*nodes, "od3", "od4", "od5"]))


async def test_tenant_cannot_change_the_nodes_or_the_admission(
        h: Harness, k: Kueue, server: APIServer) -> None:
    await started(h, k)
    install_webhook(server, k)
    tenant = server.client(user=TENANT)
    value = await widened(h)
    with pytest.raises(ApiError) as info:
        await tenant.update(with_annotation(await h.get(), NODES_ANNOTATION, value))
    assert info.value.code == 403
    assert f"metadata.annotations[{NODES_ANNOTATION}]" in str(info.value)
    steered = json.dumps([{"name": "main", "count": 3, "nodeSelector": {
        "instance-type": "spot"}, "tolerations": [{"operator": "Exists"}]}])
    with pytest.raises(ApiError) as info:
        await tenant.update(with_annotation(await h.get(), POD_SETS_INFO_ANNOTATION, steered))
    assert f"metadata.annotations[{POD_SETS_INFO_ANNOTATION}]" in str(info.value)
    assert sorted(json.loads((await h.get())["metadata"]["annotations"][NODES_ANNOTATION])) \
        == ["od1", "od2", "sp1"]

    # Kueue's identity may (as may our manager's, the test's admin).
    kueue = server.client(user=KUEUE_CONTROLLER_MANAGER_USER)
    updated = await kueue.update(with_annotation(await h.get(), NODES_ANNOTATION, value))
    assert "od5" in updated["metadata"]["annotations"][NODES_ANNOTATION]


async def test_nodes_added_past_the_webhook_start_no_extra_job(h: Harness, k: Kueue) -> None:
    await started(h, k)
    assert sorted(await h.jobs()) == ["dj-od1", "dj-od2"]
    value = await widened(h)
    await h.api.update(with_annotation(await h.get(), NODES_ANNOTATION, value))

    await h.reconcile()
    assert sorted(await h.jobs()) == ["dj-od1", "dj-od2"], \
        "no Job on a node the Workload does not count"
    dj = await h.get()
    assert dj["spec"]["suspend"] is True
    assert POD_SETS_INFO_ANNOTATION not in dj["metadata"]["annotations"]
    (message,) = [m for t, r, m in h.recorder.events
                  if (t, r) == ("Warning", REASON_ADMISSION_MISMATCH)]
    assert "would run 6 pods" in message and "admitted 3" in message

    # The next pass suspends the running node Jobs, as for any suspended DaemonJob.
    await h.reconcile()
    assert all(j["spec"]["suspend"] for j in (await h.jobs()).values())


async def test_an_admission_written_past_the_webhook_stops_the_daemonjob(
        h: Harness, k: Kueue) -> None:
    await started(h, k)
    # A node Job to create again: the one of od2 is deleted (as its owner may).
    await h.api.delete(JOB_GVK, "dj-od2", namespace="default")
    await h.server.settle()
    steered = json.dumps([{"name": "main", "count": 3, "annotations": {}, "labels": {},
                           "nodeSelector": {"instance-type": "spot"},
                           "tolerations": [{"operator": "Exists"}]}])
    await h.api.update(with_annotation(await h.get(), POD_SETS_INFO_ANNOTATION, steered))

    await h.reconcile()
    assert "dj-od2" not in await h.jobs(), "no Job runs the tenant's nodeSelector"
    assert (await h.get())["spec"]["suspend"] is True
    (message,) = [m for _, r, m in h.recorder.events if r == REASON_ADMISSION_MISMATCH]
    assert '"instance-type":"spot"' in message and '"instance-type":"on-demand"' in message

    # Kueue's reconciler starts it again with the Workload's own admission (its first
    # passes update the Workload's reclaimable pods).
    await h.reconcile()
    for _ in range(3):
        await k.reconcile()
    assert (await h.get())["spec"]["suspend"] is False
    await h.reconcile()
    pod = (await h.jobs())["dj-od2"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"instance-type": "on-demand"}
