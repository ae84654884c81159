"""A prebuilt Workload that is an elastic job's scaled-up slice (Kueue v0.19.2
``ensureOneWorkload``): the replacement describes the job as it is about to become, so
the reconciler takes it without the in-sync check instead of finishing it ``OutOfSync``.

Kueue's Go tests have no case for it (the MultiKueue e2e scale-up exercises it); these
cases pin each part of the condition: the gate, the job's ``elastic-job`` annotation and
the slice's ``workload-slice-replacement-for`` annotation.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobframework import constants as c
from jobframework.api import PodSet
from jobframework.constants import FeatureGates
from jobframework.reconciler import PrebuiltWorkloadNotFoundError

from .helpers import MockJob, World

ELASTIC = {c.ELASTIC_JOB_ANNOTATION: c.ELASTIC_JOB_ANNOTATION_VALUE}
REPLACES = {c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION: "default/old-slice"}
OUT_OF_SYNC = ("True", "OutOfSync", "The prebuilt workload is out of sync with its user job")


async def prebuilt_world(*, gate: bool, job_annotations: dict[str, str],
                         slice_annotations: dict[str, str]) -> World:
    """A suspended job naming the prebuilt Workload ``new-slice`` of 3 pods, while the job
    itself still asks for 1 (it has not been synced to the scale-up yet)."""
    w = World(features=FeatureGates(ElasticJobsViaWorkloadSlices=gate))
    await w.create_job(labels={c.PREBUILT_WORKLOAD_LABEL: "new-slice"},
                       annotations=job_annotations)
    spec: dict[str, Any] = {"annotations": slice_annotations} if slice_annotations else {}
    created = await w.create_workload("new-slice", count=3, **spec)
    # Prebuilt by someone else (MultiKueue's manager): no owner yet.
    del created["metadata"]["ownerReferences"]
    del created["metadata"]["labels"]
    await w.client.update(created)
    return w


def the_slice(w: World) -> dict[str, Any]:
    [wl] = w.workloads()
    assert wl["metadata"]["name"] == "new-slice"
    return wl


def finished(wl: dict[str, Any]) -> tuple[str, str, str] | None:
    for cond in (wl.get("status") or {}).get("conditions") or []:
        if cond["type"] == "Finished":
            return cond["status"], cond["reason"], cond["message"]
    return None


async def test_scaled_up_prebuilt_slice_is_taken_without_the_in_sync_check() -> None:
    w = await prebuilt_world(gate=True, job_annotations=ELASTIC, slice_annotations=REPLACES)
    await w.reconcile(MockJob([PodSet(name="main", count=1)]))
    wl = the_slice(w)
    assert finished(wl) is None
    # Ownership is still taken first, as for any prebuilt Workload.
    [owner] = wl["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Job", "test-job", "test-job", True)
    assert wl["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-job"}
    assert wl["spec"]["podSets"][0]["count"] == 3  # not rewritten to the job's count
    assert w.job()["spec"]["suspend"] is True
    assert w.recorder.events == []


async def test_scaled_up_prebuilt_slice_is_admitted_and_started_as_it_is() -> None:
    # Past the skipped check the slice is the job's Workload: its admission starts the job.
    w = await prebuilt_world(gate=True, job_annotations=ELASTIC, slice_annotations=REPLACES)
    await w.reconcile(MockJob([PodSet(name="main", count=1)]))
    await w.client.apply(
        {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
         "metadata": {"name": "new-slice", "namespace": "default"},
         "status": {"conditions": [
             {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
              "message": "m", "lastTransitionTime": w.ts()},
             {"type": "Admitted", "status": "True", "reason": "Admitted",
              "message": "m", "lastTransitionTime": w.ts()}],
             "admission": {"clusterQueue": "cq",
                           "podSetAssignments": [{"name": "main", "count": 3}]}}},
        field_manager=c.ADMISSION_NAME, force=True, subresource="status")
    job = MockJob([PodSet(name="main", count=1)])
    await w.reconcile(job)
    assert finished(the_slice(w)) is None
    assert w.job()["spec"]["suspend"] is False
    assert job.run_infos is not None and [i.count for i in job.run_infos] == [3]
    assert w.recorder.events == [("Normal", "Started", "Admitted by clusterQueue cq")]


@pytest.mark.parametrize(("gate", "job_annotations", "slice_annotations"), [
    pytest.param(False, ELASTIC, REPLACES, id="gate-off"),
    pytest.param(True, {}, REPLACES, id="job-not-elastic"),
    pytest.param(True, ELASTIC, {}, id="slice-replaces-none"),
])
async def test_other_out_of_sync_prebuilt_workloads_are_still_finished(
    gate: bool, job_annotations: dict[str, str], slice_annotations: dict[str, str],
) -> None:
    w = await prebuilt_world(gate=gate, job_annotations=job_annotations,
                             slice_annotations=slice_annotations)
    with pytest.raises(PrebuiltWorkloadNotFoundError):
        await w.reconcile(MockJob([PodSet(name="main", count=1)]))
    assert finished(the_slice(w)) == OUT_OF_SYNC
