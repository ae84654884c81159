"""Kueue's job_controller_test.go GenericJob method tests for batch/v1 Job (§2, J1-J51)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.batchjob import BatchJob, terminal_indexes_count
from jobframework import constants as c
from jobframework.api import ReclaimablePod
from jobframework.constants import FeatureGates
from jobframework.podset import InvalidPodsetInfoError, InvalidPodSetUpdateError, PodSetInfo


def job(parallelism: int | None = None, completions: int | None = None,
        status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c"}]}}, **spec}
    if parallelism is not None:
        s["parallelism"] = parallelism
    if completions is not None:
        s["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "job", "namespace": "ns"}, "spec": s, "status": status or {}}


@pytest.mark.kueue_case(
    "TestPodsReady/parallelism = completions; no progress",
    "TestPodsReady/parallelism = completions; not enough progress",
    "TestPodsReady/parallelism = completions; all ready",
    "TestPodsReady/parallelism = completions; some ready, some succeeded",
    "TestPodsReady/parallelism = completions; all succeeded",
    "TestPodsReady/parallelism < completions; reaching parallelism is enough",
    "TestPodsReady/parallelism > completions; reaching completions is enough",
    "TestPodsReady/parallelism specified only; not enough progress",
    "TestPodsReady/parallelism specified only; all ready",
)
@pytest.mark.parametrize(("p", "comp", "status", "want"), [
    (3, 3, {}, False),
    (3, 3, {"ready": 1, "succeeded": 1}, False),
    (3, 3, {"ready": 3}, True),
    (3, 3, {"ready": 2, "succeeded": 1}, True),
    (3, 3, {"succeeded": 3}, True),
    (2, 3, {"ready": 2}, True),
    (3, 2, {"ready": 2}, True),
    (3, None, {"ready": 2}, False),
    (3, None, {"ready": 3}, True),
])
async def test_j1_j9_pods_ready(p: int, comp: int | None, status: dict[str, Any],
                                want: bool) -> None:
    assert await BatchJob(job(p, comp, status)).pods_ready(None) is want  # type: ignore[arg-type]


@pytest.mark.kueue_case("TestPodSetsInfo/append")
async def test_j10_append_then_restore() -> None:
    obj = job(1)
    obj["spec"]["suspend"] = True
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"orig-key": "orig-val"}
    obj["spec"]["template"]["spec"]["tolerations"] = [{"key": "orig-t-key", "operator": "Equal",
                                                       "value": "orig-t-val",
                                                       "effect": "NoSchedule"}]
    original = copy.deepcopy(obj)
    j = BatchJob(obj)
    orig_info = PodSetInfo.from_pod_set((await j.pod_sets(None))[0])  # type: ignore[arg-type]
    new_t = {"key": "new-t-key", "operator": "Equal", "value": "new-t-val",
             "effect": "NoSchedule"}
    await j.run_with_pod_sets_info(None, [PodSetInfo(  # type: ignore[arg-type]
        name="main", count=1, node_selector={"new-key": "new-val"}, tolerations=[new_t])])
    spec = obj["spec"]["template"]["spec"]
    assert obj["spec"]["suspend"] is False
    assert spec["nodeSelector"] == {"orig-key": "orig-val", "new-key": "new-val"}
    assert [t["key"] for t in spec["tolerations"]] == ["orig-t-key", "new-t-key"]
    assert j.restore_pod_sets_info([orig_info]) is True
    j.suspend()
    assert obj == original


@pytest.mark.kueue_case("TestPodSetsInfo/update")
async def test_j11_conflicting_update_is_permanent() -> None:
    obj = job(1)
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"orig-key": "orig-val"}
    j = BatchJob(obj)
    with pytest.raises(InvalidPodSetUpdateError):
        await j.run_with_pod_sets_info(None, [PodSetInfo(  # type: ignore[arg-type]
            name="main", count=1, node_selector={"orig-key": "new-val"})])
    assert obj["spec"]["suspend"] is False
    assert obj["spec"]["template"]["spec"]["nodeSelector"] == {"orig-key": "orig-val"}


@pytest.mark.kueue_case("TestPodSetsInfo/parallelism")
async def test_j13_partial_admission_parallelism() -> None:
    obj = job(5)
    obj["metadata"]["annotations"] = {c.JOB_MIN_PARALLELISM_ANNOTATION: "2"}
    original = copy.deepcopy(obj)
    j = BatchJob(obj)
    await j.run_with_pod_sets_info(None, [PodSetInfo(name="main", count=2)])  # type: ignore[arg-type]
    assert obj["spec"]["parallelism"] == 2 and obj["spec"]["suspend"] is False
    assert j.restore_pod_sets_info([PodSetInfo(name="main", count=5)]) is True
    del obj["spec"]["suspend"]
    assert obj == original


@pytest.mark.kueue_case("TestPodSetsInfo/noInfoOnRun")
async def test_j14_no_info_on_run() -> None:
    obj = job(5)
    obj["metadata"]["annotations"] = {c.JOB_MIN_PARALLELISM_ANNOTATION: "2"}
    with pytest.raises(InvalidPodsetInfoError,
                       match="invalid podset infos: expecting 1 podset, got 0"):
        await BatchJob(obj).run_with_pod_sets_info(None, [])  # type: ignore[arg-type]
    assert obj["spec"]["suspend"] is False


@pytest.mark.kueue_case(
    "TestPodSets/no partial admission",
    "TestPodSets/partial admission",
    "TestPodSets/with required topology annotation",
    "TestPodSets/with preferred topology annotation",
    "TestPodSets/with slice-only topology",
    "TestPodSets/with slice-only topology if TAS is disabled",
    "TestPodSets/with slice-only topology - only podset slice required topology annotation",
    "TestPodSets/with slice-only topology - only podset slice size annotation",
    "TestPodSets/without preferred topology annotation if TAS is disabled",
    "TestPodSets/without required topology annotation if TAS is disabled",
)
@pytest.mark.parametrize(("tas", "annotations", "min_par", "want_request"), [
    (False, {}, None, None),
    (False, {}, "2", None),
    (True, {c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/block"}, None,
     {"required": "cloud.com/block",
      "podIndexLabel": "batch.kubernetes.io/job-completion-index"}),
    (True, {c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION: "cloud.com/block"}, None,
     {"preferred": "cloud.com/block",
      "podIndexLabel": "batch.kubernetes.io/job-completion-index"}),
    (True, {c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/block",
            c.PODSET_SLICE_SIZE_ANNOTATION: "1"}, None,
     {"podIndexLabel": "batch.kubernetes.io/job-completion-index",
      "podSetSliceRequiredTopology": "cloud.com/block", "podSetSliceSize": 1}),
    (False, {c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/block",
             c.PODSET_SLICE_SIZE_ANNOTATION: "1"}, None, None),
    (True, {c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/block"}, None,
     {"podIndexLabel": "batch.kubernetes.io/job-completion-index"}),
    (True, {c.PODSET_SLICE_SIZE_ANNOTATION: "1"}, None,
     {"podIndexLabel": "batch.kubernetes.io/job-completion-index"}),
    (False, {c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION: "cloud.com/block"}, None, None),
    (False, {c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/block"}, None, None),
])
async def test_j15_j24_pod_sets(tas: bool, annotations: dict[str, str], min_par: str | None,
                                want_request: dict[str, Any] | None) -> None:
    obj = job(3)
    if annotations:
        obj["spec"]["template"]["metadata"] = {"annotations": annotations}
    if min_par:
        obj["metadata"]["annotations"] = {c.JOB_MIN_PARALLELISM_ANNOTATION: min_par}
    [ps] = await BatchJob(obj, features=FeatureGates(TopologyAwareScheduling=tas)).pod_sets(
        None)  # type: ignore[arg-type]
    assert ps.name == "main" and ps.count == 3
    assert ps.min_count == (int(min_par) if min_par else None)
    assert ps.template == obj["spec"]["template"]
    got = ps.topology_request.to_dict() if ps.topology_request else None
    assert got == want_request


@pytest.mark.kueue_case("TestCleanLabels/feature enabled")
async def test_j25_clean_labels() -> None:
    obj = job(1)
    obj["spec"]["template"]["metadata"] = {"labels": {
        "foo": "bar", "batch.kubernetes.io/job-name": "job", "controller-uid": "x",
        "batch.kubernetes.io/controller-uid": "x"}}
    [ps] = await BatchJob(obj).pod_sets(None)  # type: ignore[arg-type]
    assert ps.template["metadata"]["labels"] == {"foo": "bar",
                                                 "batch.kubernetes.io/job-name": "job"}


@pytest.mark.kueue_case(
    "TestTerminalIndexesCount/empty",
    "TestTerminalIndexesCount/zero completions",
    "TestTerminalIndexesCount/single completed index",
    "TestTerminalIndexesCount/single failed index",
    "TestTerminalIndexesCount/single range",
    "TestTerminalIndexesCount/mixed intervals",
    "TestTerminalIndexesCount/completed and failed indexes",
    "TestTerminalIndexesCount/overlapping terminal indexes",
    "TestTerminalIndexesCount/contained failed indexes",
    "TestTerminalIndexesCount/surviving low indexes",
    "TestTerminalIndexesCount/all completed within range",
    "TestTerminalIndexesCount/range straddling the cap",
    "TestTerminalIndexesCount/all removed (above the cap)",
    "TestTerminalIndexesCount/failed range straddling the cap",
    "TestTerminalIndexesCount/all failed removed (above the cap)",
    "TestTerminalIndexesCount/stale failed index after scale-down",
    "TestTerminalIndexesCount/cap applied to completed and failed",
    "TestTerminalIndexesCount/range capped tighter",
    "TestTerminalIndexesCount/discrete indexes",
    "TestTerminalIndexesCount/discrete indexes partly above",
    "TestTerminalIndexesCount/malformed interval skipped",
    "TestTerminalIndexesCount/malformed range end skipped",
)
@pytest.mark.parametrize(("completed", "failed", "completions", "want"), [
    ("", "", 10, 0), ("0-9", "", 0, 0), ("0", "", 10, 1), ("", "1", 10, 1),
    ("0-4", "", 10, 5), ("0-4,7,9-11", "", 10, 7), ("0-2,7", "3-5,8", 10, 8),
    ("0-4", "3-7", 10, 8), ("0-9", "2-3", 10, 10), ("0-8", "", 10, 9), ("0-14", "", 10, 10),
    ("5-19", "", 10, 5), ("10-19", "", 10, 0), ("", "5-19", 10, 5), ("", "10-19", 10, 0),
    ("", "4", 3, 0), ("0-1", "2-19", 5, 5), ("0-4", "", 3, 3), ("3,5,7", "", 10, 3),
    ("3,5,12", "", 10, 2), ("abc,0-2", "", 10, 3), ("0-x,4", "", 10, 1),
])
def test_j26_j47_terminal_indexes(completed: str, failed: str, completions: int,
                                  want: int) -> None:
    assert terminal_indexes_count(completed, failed, completions) == want


@pytest.mark.kueue_case(
    "TestReclaimablePods/indexed Job reclaims its completed indexes",
    "TestReclaimablePods/indexed Job holds quota for a retryable failure",
    "TestReclaimablePods/indexed Job reclaims completed and failed indexes",
    "TestReclaimablePods/indexed Job with empty terminal indexes holds quota",
)
@pytest.mark.parametrize(("status", "want"), [
    ({"succeeded": 4, "completedIndexes": "0-3"}, [ReclaimablePod(name="main", count=4)]),
    ({"succeeded": 1, "failed": 1, "completedIndexes": "0"},
     [ReclaimablePod(name="main", count=1)]),
    ({"succeeded": 1, "failed": 1, "completedIndexes": "0", "failedIndexes": "1"},
     [ReclaimablePod(name="main", count=2)]),
    ({"succeeded": 4}, []),
])
async def test_j48_j51_reclaimable_pods_indexed(status: dict[str, Any],
                                                want: list[ReclaimablePod]) -> None:
    obj = job(8, 8, status, completionMode="Indexed", backoffLimitPerIndex=1)
    assert await BatchJob(obj).reclaimable_pods(None) == want  # type: ignore[arg-type]


async def test_reclaimable_pods_non_indexed() -> None:
    # 10 completions, 4 in parallel, 8 done: 2 remain, so 2 of the 4 slots are free.
    obj = job(4, 10, {"succeeded": 8})
    assert await BatchJob(obj).reclaimable_pods(None) == [  # type: ignore[arg-type]
        ReclaimablePod(name="main", count=2)]


def test_finished_and_suspension_markers() -> None:
    obj = job(1, status={"conditions": [{"type": "Failed", "status": "True",
                                         "message": "BackoffLimitExceeded"}]})
    j = BatchJob(obj)
    assert j.finished() == ("BackoffLimitExceeded", False, True)
    obj["spec"]["suspend"] = True
    assert j.is_suspended()
    obj["metadata"]["annotations"] = {c.STOPPING_ANNOTATION: "true"}
    assert not j.is_suspended(), "a Job in the middle of a stop is not suspended yet"
    assert j.pod_label_selector() == "batch.kubernetes.io/job-name=job"


@pytest.mark.parametrize(("managed_by", "multikueue", "want"), [
    (None, True, True), ("kubernetes.io/job-controller", True, True),
    ("other", True, False), (None, False, False),
])
def test_can_default_managed_by(managed_by: str | None, multikueue: bool, want: bool) -> None:
    obj = job(1)
    if managed_by:
        obj["spec"]["managedBy"] = managed_by
    j = BatchJob(obj, features=FeatureGates(MultiKueue=multikueue))
    assert j.can_default_managed_by() is want
    j.set_managed_by(c.MULTIKUEUE_CONTROLLER_NAME)
    assert j.managed_by() == c.MULTIKUEUE_CONTROLLER_NAME
