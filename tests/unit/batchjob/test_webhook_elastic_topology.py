"""The batch Job webhook rejects required/preferred topology on elastic Jobs (Kueue's
``validateTopologyRequest``): only unconstrained topology is supported with workload slices."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.batchjob import BatchJobWebhook
from jobframework import constants as c
from jobframework.constants import FeatureGates
from jobframework.field import AggregateError

REQUIRED_MSG = ("spec.template.metadata.annotations.kueue.x-k8s.io/podset-required-topology: "
                "Forbidden: required topology is not supported with elastic jobs")
PREFERRED_MSG = ("spec.template.metadata.annotations.kueue.x-k8s.io/podset-preferred-topology: "
                 "Forbidden: preferred topology is not supported with elastic jobs")


def job(*, elastic: bool = True, **template_annotations: str) -> dict[str, Any]:
    annotations = {c.ELASTIC_JOB_ANNOTATION: c.ELASTIC_JOB_ANNOTATION_VALUE} if elastic else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "job", "namespace": "default", "uid": "uid",
                         "labels": {c.QUEUE_LABEL: "queue"}, "annotations": annotations},
            "spec": {"suspend": True, "parallelism": 2, "completions": 2,
                     "template": {"metadata": {"annotations": dict(template_annotations)},
                                  "spec": {"containers": [{"name": "c"}]}}}}


def topology(mode: str, level: str = "rack") -> dict[str, str]:
    key = {"required": c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
           "preferred": c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
           "unconstrained": c.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION}[mode]
    return {key: "true" if mode == "unconstrained" else level}


async def create_errors(obj: dict[str, Any], features: FeatureGates | None = None) -> list[str]:
    try:
        await BatchJobWebhook(None, features=features or FeatureGates()).validate_create(obj)
    except AggregateError as agg:
        return [str(e) for e in agg.errors]
    return []


@pytest.mark.kueue_case(
    "TestValidateCreate/elastic job with required topology is rejected",
    "TestValidateCreate/elastic job with preferred topology is rejected",
    "TestValidateCreate/elastic job with unconstrained topology is accepted",
)
@pytest.mark.parametrize(("mode", "want"), [
    ("required", [REQUIRED_MSG]),
    ("preferred", [PREFERRED_MSG]),
    ("unconstrained", []),
])
async def test_elastic_job_allows_only_unconstrained_topology(mode: str,
                                                              want: list[str]) -> None:
    assert await create_errors(job(**topology(mode))) == want


async def test_non_elastic_job_keeps_its_topology_request() -> None:
    assert await create_errors(job(elastic=False, **topology("required"))) == []
    assert await create_errors(job(elastic=False, **topology("preferred"))) == []


async def test_annotation_alone_is_not_elastic_without_the_gate() -> None:
    gate_off = FeatureGates(ElasticJobsViaWorkloadSlices=False)
    assert await create_errors(job(**topology("required")), gate_off) == []


async def test_no_topology_validation_without_tas() -> None:
    tas_off = FeatureGates(TopologyAwareScheduling=False)
    assert await create_errors(job(**topology("required")), tas_off) == []
    # Malformed annotations are not looked at either, as in Kueue.
    assert await create_errors(job(**topology("required", "not a label!")), tas_off) == []


async def test_malformed_annotations_are_reported_alone() -> None:
    """Kueue returns the annotation errors before it looks at elasticity."""
    errs = await create_errors(job(**topology("required", "not a label!")))
    assert errs and REQUIRED_MSG not in errs
    assert all("podset-required-topology" in e for e in errs)


async def test_both_topologies_report_the_annotation_conflict_only() -> None:
    errs = await create_errors(job(**topology("required"), **topology("preferred")))
    assert len(errs) == 1 and "must not contain more than one topology annotation" in errs[0]


async def test_update_to_elastic_job_with_required_topology_is_rejected() -> None:
    old = job(elastic=True)
    new = job(elastic=True, **topology("required"))
    with pytest.raises(AggregateError) as agg:
        await BatchJobWebhook(None).validate_update(old, new)
    assert REQUIRED_MSG in [str(e) for e in agg.value.errors]
    # Unconstrained stays allowed on update.
    await BatchJobWebhook(None).validate_update(old, job(**topology("unconstrained")))
