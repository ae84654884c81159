"""GenericJob contract, optional capabilities and StopReason."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from jobframework.api import PodSet
from jobframework.interface import (
    FinishedResult,
    GenericJob,
    JobWithCustomStop,
    JobWithManagedBy,
    JobWithPodLabelSelector,
    StopReason,
    TopLevelJob,
)
from jobframework.podset import PodSetInfo, merge_into_template, restore_pod_spec
from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK, Object


class SampleJob(GenericJob):
    """A minimal CRD adapter: one pod set under spec.template."""

    def __init__(self, obj: Object) -> None:
        self.obj = obj

    def object(self) -> Object:
        return self.obj

    def is_suspended(self) -> bool:
        return bool(self.obj["spec"].get("suspend"))

    def suspend(self) -> None:
        self.obj["spec"]["suspend"] = True

    async def run_with_pod_sets_info(self, client: Client,
                                     pod_sets_info: Sequence[PodSetInfo]) -> None:
        self.obj["spec"]["suspend"] = False
        merge_into_template(self.obj["spec"]["template"], pod_sets_info[0])

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        return restore_pod_spec(self.obj["spec"]["template"], pod_sets_info[0])

    def finished(self) -> FinishedResult:
        return FinishedResult("", True, self.obj.get("status", {}).get("done", False))

    async def pod_sets(self, client: Client) -> list[PodSet]:
        return [PodSet(name="main", count=1, template=self.obj["spec"]["template"])]

    def is_active(self) -> bool:
        return False

    async def pods_ready(self, client: Client) -> bool:
        return True

    def gvk(self) -> GVK:
        return GVK("example.com", "v1", "Sample")

    def pod_label_selector(self) -> str:
        return "app=sample"

    def is_top_level(self) -> bool:
        return True


def test_abstract_methods_are_enforced() -> None:
    class Incomplete(GenericJob):
        def object(self) -> Object:
            return {}

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()  # type: ignore[abstract]


async def test_sample_job_lifecycle() -> None:
    job = SampleJob({"spec": {"suspend": True, "template": {"spec": {"containers": []}}}})
    assert job.is_suspended()
    await job.run_with_pod_sets_info(None, [PodSetInfo(labels={"kueue.x-k8s.io/podset": "main"})])  # type: ignore[arg-type]
    assert not job.is_suspended()
    assert job.obj["spec"]["template"]["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "main"}
    job.suspend()
    assert job.restore_pod_sets_info([PodSetInfo()])
    assert job.obj["spec"]["template"] == {"spec": {"containers": []}}, "restored exactly"
    assert job.finished() == FinishedResult(message="", success=True, finished=False)


def test_optional_capabilities_are_structural() -> None:
    job = SampleJob({"spec": {}})
    assert isinstance(job, JobWithPodLabelSelector)
    assert isinstance(job, TopLevelJob)
    assert not isinstance(job, JobWithCustomStop)
    assert not isinstance(job, JobWithManagedBy)


def test_stop_reason_values() -> None:
    assert [r.value for r in StopReason] == [
        "WorkloadDeleted", "WorkloadEvicted", "NoMatchingWorkload", "NotAdmitted"]
    assert StopReason.NOT_ADMITTED == "NotAdmitted"


def test_capability_checks_are_decided_per_class() -> None:
    from jobframework.interface import JobWithSkip

    class Skips:
        def skip(self) -> bool:
            return True

    class Plain:
        pass

    class SkipsToo(Plain):
        def skip(self) -> bool:
            return False

    # Asked twice (the second answer comes from the per-class verdict), per class.
    for _ in range(2):
        assert isinstance(Skips(), JobWithSkip)
        assert not isinstance(Plain(), JobWithSkip)
        assert isinstance(SkipsToo(), JobWithSkip)
