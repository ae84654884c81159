"""Kueue's elastic-job (workload slice) cases of TestReconciler (§1, 50-55) and
reconciler_test.go (R2-R5)."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework import constants as c
from jobframework.constants import FeatureGates, KueueVersion
from jobframework.naming import generate_workload_name_with_extra

from .helpers import JOB_GVK, World, base_job, base_wl, pod_set

NORMAL, WARNING = "Normal", "Warning"
WPC = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"}


async def world(**options: Any) -> World:
    w = World(**options)
    await w.setup()
    await w.wpc("test-wpc", 100)
    await w.wpc("test-wpc-high", 200)
    return w


def elastic_job(label: str | None = None, *, suspend: bool = True) -> dict[str, Any]:
    job = base_job(suspend=suspend)
    job["metadata"]["annotations"] = {c.ELASTIC_JOB_ANNOTATION: "true"}
    if label:
        job["metadata"]["labels"][c.WORKLOAD_PRIORITY_CLASS_LABEL] = label
    return job


def with_wpc(wl: dict[str, Any], name: str = "test-wpc", value: int = 100) -> dict[str, Any]:
    wl["spec"]["priorityClassRef"] = {**WPC, "name": name}
    wl["spec"]["priority"] = value
    return wl


def slice_name(generation: int = 1) -> str:
    return generate_workload_name_with_extra("job", "test-uid", JOB_GVK, str(generation))


@pytest.mark.kueue_case(
    "TestReconciler/the workload slice is left alone when the class does not exist",
    "TestReconciler/the workload slice is updated when priority class has changed for suspended "
    "job",
)
@pytest.mark.parametrize(("case", "label", "error", "want"), [
    ("50 missing class", "missing-wpc", True, ("test-wpc", 100)),
    ("51 class changed", "test-wpc-high", False, ("test-wpc-high", 200)),
])
@pytest.mark.parametrize("version", [KueueVersion.V0_19, KueueVersion.MAIN],
                         ids=["v0.19", "main"])
async def test_50_51_slice_priority(case: str, label: str, error: bool,
                                    want: tuple[str, int], version: KueueVersion) -> None:
    w = await world(features=FeatureGates(version=version))
    job = await w.create_job(elastic_job(label))
    await w.create_workload(with_wpc(base_wl("job", reserved=False)), owner=job)
    if error:
        with pytest.raises(Exception, match="prepare workload priority"):
            await w.reconcile()
        # Main records WorkloadPriorityClassNotFound; v0.19.2 only returns the error.
        assert w.recorder.events == ([] if version is KueueVersion.V0_19 else [
            (WARNING, "WorkloadPriorityClassNotFound",
             'WorkloadPriorityClass "missing-wpc" not found')])
    else:
        await w.reconcile()
        assert w.recorder.events == [(NORMAL, "UpdatedWorkload",
                                      "Updated workload priority class: ns/job")]
    got = w.workload("job")
    assert (got["spec"]["priorityClassRef"]["name"], got["spec"]["priority"]) == want, case


@pytest.mark.kueue_case(
    "TestReconciler/the workload slice takes both a count and a priority class change",
)
async def test_52_slice_takes_count_and_class_change() -> None:
    w = await world()
    job = await w.create_job(elastic_job("test-wpc-high"))
    await w.create_workload(with_wpc(base_wl("job", count=5, reserved=False)), owner=job)
    await w.reconcile()
    got = w.workload("job")
    assert got["spec"]["podSets"][0]["count"] == 10
    assert (got["spec"]["priorityClassRef"]["name"], got["spec"]["priority"]) == (
        "test-wpc-high", 200)
    assert w.recorder.events == [(NORMAL, "UpdatedWorkload",
                                  "Updated workload priority class: ns/job")]


@pytest.mark.kueue_case(
    "TestReconciler/the workload slice and its retained admitted slice both follow the label",
)
async def test_53_slice_and_retained_admitted_slice_follow_the_label() -> None:
    w = await world()
    job = await w.create_job(elastic_job("test-wpc-high"))
    await w.create_workload(with_wpc(base_wl("admitted")), owner=job)
    w.clock.advance(1)
    replacement = with_wpc(base_wl("replacement", reserved=False))
    replacement["metadata"]["annotations"] = {
        c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION: "ns/admitted"}
    await w.create_workload(replacement, owner=job)
    await w.reconcile()
    for name in ("admitted", "replacement"):
        got = w.workload(name)
        assert (got["spec"]["priorityClassRef"]["name"], got["spec"]["priority"]) == (
            "test-wpc-high", 200)
        assert "Finished" not in {x["type"] for x in
                                  (got.get("status") or {}).get("conditions") or []}
    assert w.recorder.events == [
        (NORMAL, "UpdatedWorkload", "Updated workload priority class: ns/replacement"),
        (NORMAL, "UpdatedWorkload", "Updated workload priority class: ns/admitted")]


@pytest.mark.kueue_case(
    "TestReconciler/the admitted slice follows the label when a scale-up replaces it",
)
async def test_54_scale_up_of_an_admitted_slice_creates_a_replacement() -> None:
    w = await world()
    job = await w.create_job(elastic_job("test-wpc-high"))
    await w.create_workload(with_wpc(base_wl("admitted", count=5)), owner=job)
    await w.reconcile()
    got = w.workload("admitted")
    assert (got["spec"]["priorityClassRef"]["name"], got["spec"]["priority"]) == (
        "test-wpc-high", 200)
    name = slice_name(job["metadata"]["generation"])
    new = w.workload(name)
    assert new["spec"]["podSets"][0]["count"] == 10
    assert new["spec"]["queueName"] == "foo"
    assert new["spec"]["priorityClassRef"] == {**WPC, "name": "test-wpc-high"}
    assert new["spec"]["priority"] == 200
    assert new["metadata"]["annotations"] == {
        c.ELASTIC_JOB_ANNOTATION: "true", c.WORKLOAD_SLICE_NAME_ANNOTATION: "admitted",
        c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION: "ns/admitted"}
    assert new["metadata"]["labels"] == {c.JOB_UID_LABEL: "test-uid"}
    assert w.recorder.events == [
        (NORMAL, "UpdatedWorkload", "Updated workload priority class: ns/admitted"),
        (NORMAL, "CreatedWorkload", f"Created Workload: ns/{name}")]


@pytest.mark.kueue_case(
    "TestReconciler/a workload slice that reserved quota with no priority class is left alone",
)
async def test_55_reserved_slice_without_class_is_left_alone() -> None:
    w = await world()
    job = await w.create_job(elastic_job("test-wpc-high"))
    created = await w.create_workload(base_wl("job"), owner=job)
    await w.reconcile()
    assert w.workload("job")["metadata"]["resourceVersion"] == (
        created["metadata"]["resourceVersion"])
    assert w.recorder.events == []


@pytest.mark.kueue_case(
    "TestReconcileGenericJob/handle job with no workload (elasticJobsViaWorkloadSlicesEnabled = "
    "false)",
    "TestReconcileGenericJob/handle job with no workload (elasticJobsViaWorkloadSlicesEnabled = "
    "false and elastic job annotation)",
    "TestReconcileGenericJob/handle job with no workload (elasticJobsViaWorkloadSlicesEnabled = "
    "true)",
    "TestReconcileGenericJob/handle job with no workload (elasticJobsViaWorkloadSlicesEnabled = "
    "true and elastic job annotation)",
)
@pytest.mark.parametrize(("gate", "annotated", "elastic_name"), [
    (False, False, False), (False, True, False), (True, False, False), (True, True, True)])
async def test_r1_r4_workload_names(gate: bool, annotated: bool, elastic_name: bool) -> None:
    w = await world(features=FeatureGates(ElasticJobsViaWorkloadSlices=gate))
    job = elastic_job() if annotated else base_job()
    job = await w.create_job(job)
    await w.reconcile()
    [wl] = w.workloads()
    if elastic_name:
        name = slice_name(job["metadata"]["generation"])
        assert wl["metadata"]["name"] == name
        assert wl["metadata"]["annotations"] == {c.ELASTIC_JOB_ANNOTATION: "true",
                                                 c.WORKLOAD_SLICE_NAME_ANNOTATION: name}
    else:
        assert wl["metadata"]["name"] == "job-job-b3219"
        assert "annotations" not in wl["metadata"]


@pytest.mark.kueue_case(
    "TestReconcileGenericJob/update workload to match job (one existing workload)",
)
async def test_r5_slice_with_other_pod_sets_is_updated_in_place() -> None:
    w = await world()
    job = await w.create_job(elastic_job())
    await w.create_workload(base_wl("job-1", reserved=False, pod_sets=[pod_set(2, name="old")]),
                            owner=job)
    await w.reconcile()
    got = w.workload("job-1")
    assert [(p["name"], p["count"]) for p in got["spec"]["podSets"]] == [("main", 10)]
    assert "annotations" not in got["metadata"]


async def test_running_elastic_job_is_not_stopped_while_its_slice_waits() -> None:
    w = await world()
    job = await w.create_job(elastic_job(suspend=False))
    await w.create_workload(base_wl("job", reserved=False), owner=job)
    await w.reconcile()
    assert w.job()["spec"]["suspend"] is False
    assert w.recorder.events == []


async def test_extra_slices_are_finished() -> None:
    w = await world()
    job = await w.create_job(elastic_job())
    await w.create_workload(base_wl("old"), owner=job)
    w.clock.advance(1)
    await w.create_workload(base_wl("stray", reserved=False), owner=job)
    await w.reconcile()
    conds = {x["type"]: (x["status"], x["reason"], x["message"])
             for x in w.workload("stray")["status"]["conditions"]}
    assert conds["Finished"] == ("True", "OutOfSync",
                                 "The workload slice is out of sync with its parent job")


async def test_webhook_gates_elastic_pods_and_rejects_partial_admission() -> None:
    from integrations.batchjob import BatchJobWebhook
    from jobframework.field import AggregateError

    obj = elastic_job()
    await BatchJobWebhook(None).default(obj)
    assert obj["spec"]["template"]["spec"]["schedulingGates"] == [
        {"name": c.ELASTIC_JOB_SCHEDULING_GATE}]
    await BatchJobWebhook(None).default(obj)
    assert len(obj["spec"]["template"]["spec"]["schedulingGates"]) == 1
    obj["metadata"]["annotations"][c.JOB_MIN_PARALLELISM_ANNOTATION] = "5"
    with pytest.raises(AggregateError, match="partial admission and elastic job cannot be "
                                             "used together"):
        await BatchJobWebhook(None).validate_create(obj)
