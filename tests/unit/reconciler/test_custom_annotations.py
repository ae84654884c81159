"""``JobWithCustomAnnotations`` (Kueue v0.19.2 ``GetCustomAnnotations(ctx, c, podSets)``):
an elastic job's annotations derived from its pod sets, written before its workload slice
is matched. Kueue's Go tests exercise it through RayJob's ``TestGetCustomAnnotations``
(the integration is not ported here), so these cases use a mock job."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from jobframework import constants as c
from jobframework.api import PodSet
from jobframework.constants import FeatureGates
from jobframework.interface import JobWithCustomAnnotations
from jobframework.reconciler import ReconcileError
from jobframework.runtime import errors
from jobframework.runtime.client import Client

from .helpers import JOB_GVK, MockJob, World

ELASTIC = {c.ELASTIC_JOB_ANNOTATION: c.ELASTIC_JOB_ANNOTATION_VALUE}
SIZES = "example.com/replica-sizes"


class SizedJob(MockJob):
    """Annotates the job with its pod sets' counts, as RayJob's replica sizes."""

    def __init__(self, *counts: int, fail: Exception | None = None) -> None:
        super().__init__([PodSet(name=f"ps{i}", count=n) for i, n in enumerate(counts)])
        self.seen: list[list[tuple[str, int]]] = []
        self.fail = fail

    async def get_custom_annotations(self, client: Client,
                                     pod_sets: Sequence[PodSet]) -> dict[str, str]:
        self.seen.append([(ps.name or "", ps.count) for ps in pod_sets])
        if self.fail is not None:
            raise self.fail
        return {SIZES: ",".join(str(ps.count) for ps in pod_sets)}


async def elastic_world() -> World:
    w = World(features=FeatureGates(ElasticJobsViaWorkloadSlices=True))
    await w.create_job(annotations=ELASTIC)
    return w


async def test_custom_annotations_are_computed_from_the_pod_sets_and_written() -> None:
    w = await elastic_world()
    job = SizedJob(2, 3)
    assert isinstance(job, JobWithCustomAnnotations)
    await w.reconcile(job)
    assert job.seen == [[("ps0", 2), ("ps1", 3)]]
    assert w.job()["metadata"]["annotations"] == {**ELASTIC, SIZES: "2,3"}
    [wl] = w.workloads()
    assert [p["count"] for p in wl["spec"]["podSets"]] == [2, 3]


async def test_unchanged_custom_annotations_are_not_written_again() -> None:
    w = await elastic_world()
    await w.reconcile(SizedJob(2))
    version = w.job()["metadata"]["resourceVersion"]
    job = SizedJob(2)
    await w.reconcile(job)
    assert job.seen == [[("ps0", 2)]]
    assert w.job()["metadata"]["resourceVersion"] == version


async def test_custom_annotations_are_not_asked_of_a_job_that_is_not_elastic() -> None:
    w = World(features=FeatureGates(ElasticJobsViaWorkloadSlices=True))
    await w.create_job()
    job = SizedJob(2)
    await w.reconcile(job)
    assert job.seen == []
    assert SIZES not in (w.job()["metadata"].get("annotations") or {})


async def test_custom_annotations_failure_fails_the_reconcile_with_gos_message() -> None:
    w = await elastic_world()
    boom = errors.InternalError("ray cluster unreachable")
    with pytest.raises(ReconcileError, match=r"^failed to get custom annotations based on pod "
                                             r"sets from job test-job: ") as raised:
        await w.reconcile(SizedJob(2, fail=boom))
    assert raised.value.__cause__ is boom
    assert w.workloads() == []


async def test_custom_annotations_write_failure_keeps_the_typed_error_as_its_cause() -> None:
    w = await elastic_world()
    w.server.faults.fail("patch", error=errors.new_conflict("jobs", "test-job", "stale",
                                                            "batch"), gvk=JOB_GVK)
    with pytest.raises(ReconcileError, match=r"^failed to update custom annotations on job "
                                             r"test-job: ") as raised:
        await w.reconcile(SizedJob(2))
    assert isinstance(raised.value.__cause__, errors.Conflict)
    assert SIZES not in (w.job()["metadata"].get("annotations") or {})
