"""Single Kueue v0.19.2 cases the older modules do not run as such: one each of
``utils_test.go`` ``TestSanitizePodSets``, ``validation_test.go`` ``TestValidateJobOnUpdate``
and ``job_controller_test.go`` ``TestPodSetsInfo``. Each test names its Go case in a
``kueue_case`` marker."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.batchjob import BatchJob
from jobframework.api import PodSet
from jobframework.constants import FeatureGates
from jobframework.podset import PodSetInfo, sanitize_pod_sets
from jobframework.validation import validate_job_on_update

PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
SLICE = "kueue.x-k8s.io/workload-slice-name"


def env(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"name": n, "value": v} for n, v in pairs]


@pytest.mark.kueue_case("TestSanitizePodSets/containers only")
def test_sanitize_containers_only() -> None:
    """The last value of a repeated variable wins."""
    ps = PodSet.from_dict({"name": "test", "count": 1, "template": {"spec": {
        "containers": [{"name": "c1", "env": env(("ENV1", "value1"), ("ENV1", "value2"))}]}}})
    sanitize_pod_sets([ps])
    assert ps.template == {"spec": {"containers": [{"name": "c1",
                                                    "env": env(("ENV1", "value2"))}]}}


@pytest.mark.kueue_case(
    "TestValidateJobOnUpdate/prebuilt workload invalid annotation format, "
    "WorkloadIdentifierAnnotations enabled",
)
def test_prebuilt_invalid_annotation_format_on_update(kit: Any) -> None:
    old = kit.make_job("test-job", "ns1", annotations={PREBUILT: "workload name"}, suspend=True)
    new = kit.make_job("test-job", "ns1", annotations={PREBUILT: "workload name"}, suspend=True)
    errs = validate_job_on_update(kit.FakeJob(old), kit.FakeJob(new), lambda ns: False,
                                  features=FeatureGates(WorkloadIdentifierAnnotations=True))
    assert [(e.type.value, str(e.field)) for e in errs] == [
        ("FieldValueInvalid", f"metadata.annotations[{PREBUILT}]")]


@pytest.mark.kueue_case("TestPodSetsInfo/replace stale workload slice annotation")
async def test_replace_stale_workload_slice_annotation() -> None:
    """With elastic jobs on, the slice name annotation of the pod template is replaced (no
    conflict), and restored."""
    obj: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job", "namespace": "ns"},
        "spec": {"parallelism": 1, "suspend": True, "template": {
            "metadata": {"annotations": {SLICE: "old-slice"}},
            "spec": {"containers": [{"name": "c"}]}}}}
    original = copy.deepcopy(obj)
    job = BatchJob(obj, features=FeatureGates(ElasticJobsViaWorkloadSlices=True))
    await job.run_with_pod_sets_info(None, [  # type: ignore[arg-type]
        PodSetInfo(annotations={SLICE: "new-slice"})])
    want = copy.deepcopy(original)
    want["spec"]["template"]["metadata"]["annotations"][SLICE] = "new-slice"
    want["spec"]["suspend"] = False
    assert obj == want
    assert job.restore_pod_sets_info([PodSetInfo(annotations={SLICE: "old-slice"})]) is True
    job.suspend()
    assert obj == original
