"""``GenericJob.pod_sets`` returns pod sets the caller owns (Kueue's ``PodSets`` contract).

``job_pod_sets`` sanitizes the pod sets in place, as Kueue's ``JobPodSets`` does, without
copying them first: every reference integration must build them afresh, sharing nothing
with the job's object, or the reconciler would rewrite the job it is reading.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.unit.appwrapper.helpers import appwrapper, component
from tests.unit.daemonjob.helpers import daemonjob
from tests.unit.jobflow.helpers import flow, jobflow

from integrations.appwrapper.job import AppWrapperJob
from integrations.batchjob import BatchJob
from integrations.daemonjob.controller import NODES_ANNOTATION
from integrations.daemonjob.controller import POD_SETS_INFO_ANNOTATION as DJ_INFOS
from integrations.daemonjob.job import DaemonJobJob
from integrations.jobflow.controller import POD_SETS_INFO_ANNOTATION as JF_INFOS
from integrations.jobflow.job import JobFlowJob
from jobframework.api import PodSet
from jobframework.childjobs import infos_to_json
from jobframework.constants import FeatureGates
from jobframework.interface import GenericJob
from jobframework.podset import PodSetInfo
from jobframework.reconciler import job_pod_sets

TAS = FeatureGates(TopologyAwareScheduling=True)


def pod_spec() -> dict[str, Any]:
    """A pod spec with every kind of nested value, and an env var given twice."""
    return {
        "containers": [{
            "name": "c", "image": "busybox",
            "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}],
            "resources": {"requests": {"cpu": "10m"}, "limits": {"cpu": "20m"}},
        }],
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "t", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
        "volumes": [{"name": "v", "emptyDir": {}}],
        "schedulingGates": [{"name": "g"}],
    }


def template() -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}, "annotations": {
                "kueue.x-k8s.io/podset-preferred-topology": "rack"}},
            "spec": pod_spec()}


def running_info(name: str) -> str:
    return infos_to_json([PodSetInfo(name=name, count=1, node_selector={"flavor": "f1"},
                                     labels={"l": "v"}, annotations={"a": "v"},
                                     tolerations=[{"key": "f", "operator": "Exists"}])])


def batch_job(suspend: bool) -> GenericJob:
    return BatchJob({"apiVersion": "batch/v1", "kind": "Job",
                     "metadata": {"name": "j", "namespace": "ns", "annotations": {}},
                     "spec": {"parallelism": 2, "suspend": suspend, "template": template()},
                     "status": {}}, features=TAS)


def daemon_job(suspend: bool) -> GenericJob:
    dj = daemonjob(suspend=suspend, pod={k: v for k, v in pod_spec().items()
                                         if k != "containers"})
    dj["spec"]["template"] = template()
    if not suspend:
        dj["metadata"]["annotations"] = {NODES_ANNOTATION: '["n1"]', DJ_INFOS: running_info("main")}
    return DaemonJobJob(dj)


def job_flow(suspend: bool) -> GenericJob:
    jf = jobflow("jf", [flow("a", template=template()), flow("b", "a", template=template())],
                 suspend=suspend)
    if not suspend:
        jf["metadata"]["annotations"] = {JF_INFOS: running_info("a")}
    return JobFlowJob(jf)


def app_wrapper(suspend: bool) -> GenericJob:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "inner"},
           "spec": {"parallelism": 2, "template": template()}}
    return AppWrapperJob(appwrapper([component(job)], suspend=suspend), features=TAS)


def scribble(value: Any) -> None:
    """Change every map and list reachable from ``value`` in place."""
    if isinstance(value, dict):
        for v in list(value.values()):
            scribble(v)
        value["scribbled"] = True
    elif isinstance(value, list):
        for v in list(value):
            scribble(v)
        value.append("scribbled")


def scribble_pod_set(ps: PodSet) -> None:
    scribble(ps.template)
    if ps.topology_request is not None:
        ps.topology_request.required = "scribbled"
    ps.count = -1


JOBS = {"batchjob": batch_job, "daemonjob": daemon_job, "jobflow": job_flow,
        "appwrapper": app_wrapper}


@pytest.mark.parametrize("suspend", [True, False], ids=["suspended", "running"])
@pytest.mark.parametrize("kind", sorted(JOBS))
async def test_pod_sets_share_nothing_with_the_job(kind: str, suspend: bool) -> None:
    job = JOBS[kind](suspend)
    before = copy.deepcopy(job.object())
    first = await job.pod_sets(None)  # type: ignore[arg-type]  # no reference reads here
    assert first, "the fixture has pods"
    expected = [ps.to_dict() for ps in first]
    for ps in first:
        scribble_pod_set(ps)
    assert job.object() == before, "changing the pod sets changed the job"
    again = await job.pod_sets(None)  # type: ignore[arg-type]
    assert [ps.to_dict() for ps in again] == expected, "an earlier result is shared"


@pytest.mark.parametrize("kind", sorted(JOBS))
async def test_job_pod_sets_sanitizes_without_touching_the_job(kind: str) -> None:
    job = JOBS[kind](True)
    before = copy.deepcopy(job.object())
    pod_sets = await job_pod_sets(job, None)  # type: ignore[arg-type]
    for ps in pod_sets:
        for container in ps.template["spec"]["containers"]:
            # AppWrapper's pod sets keep only what Kueue compares: no env there.
            assert container.get("env", [{"name": "A", "value": "2"}]) == [
                {"name": "A", "value": "2"}], "duplicate env vars are folded (last value wins)"
    assert job.object() == before, "the job keeps its own env vars"
