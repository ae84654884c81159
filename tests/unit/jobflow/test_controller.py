"""The DAG controller, called directly on the in-memory server (the test plays the Job
controller by writing Job conditions)."""

from __future__ import annotations

from typing import Any

from integrations.jobflow import JOB_GVK, JOBFLOW_GVK, JOBTEMPLATE_GVK
from integrations.jobflow.api import CREATED_BY_TEMPLATE_ANNOTATION, ConditionType
from integrations.jobflow.controller import OWNER_UID_INDEX
from jobframework.runtime.objects import Object
from jobframework.runtime.reconcile import Request

from .helpers import Harness, container, flow, jobflow, jobtemplate


def cond(obj: Object, type_: ConditionType) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == type_.value:
            return dict(c)
    return None


def phases(obj: Object) -> dict[str, str]:
    return {f["name"]: f["phase"] for f in obj["status"]["flows"]}


SEED_DAG = [flow("job1"), flow("job2", "job1"), flow("job3", "job1", "job2"), flow("job4"),
            flow("job5", "job4", "job2")]


async def test_seed_dag_runs_in_dependency_order(h: Harness) -> None:
    await h.api.create(jobflow("wf", SEED_DAG))
    await h.reconcile("wf")
    assert set(await h.jobs()) == {"wf-job1", "wf-job4"}
    wf = await h.get("wf")
    assert wf["status"]["state"] == "Running"
    assert phases(wf) == {"job1": "Running", "job2": "Pending", "job3": "Pending",
                          "job4": "Running", "job5": "Pending"}
    assert wf["status"]["totalFlows"] == 5 and wf["status"]["completedFlows"] == 0

    await h.complete("wf-job4")
    await h.reconcile("wf")
    assert set(await h.jobs()) == {"wf-job1", "wf-job4"}, "job5 also needs job2"
    await h.complete("wf-job1")
    await h.reconcile("wf")
    assert set(await h.jobs()) == {"wf-job1", "wf-job2", "wf-job4"}
    await h.complete("wf-job2")
    await h.reconcile("wf")
    assert set(await h.jobs()) == {f"wf-job{i}" for i in range(1, 6)}
    await h.complete("wf-job3")
    await h.complete("wf-job5")
    await h.reconcile("wf")
    wf = await h.get("wf")
    assert wf["status"]["state"] == "Succeed"
    assert wf["status"]["completedFlows"] == 5
    assert set(wf["status"]["jobStatusList"]) == {f"wf-job{i}/default" for i in range(1, 6)}
    assert cond(wf, ConditionType.SUCCEEDED)["status"] == "True"  # type: ignore[index]
    assert h.recorder.reasons().count("Created") == 5
    assert h.recorder.reasons().count("Succeeded") == 1
    await h.reconcile("wf")
    assert h.recorder.reasons().count("Succeeded") == 1, "the Succeed event is sent once"


async def test_children_are_read_through_the_owner_uid_index(h: Harness) -> None:
    wf = await h.api.create(jobflow("wf", [flow("a")]))
    await h.reconcile("wf")
    job_lists = [x for x in h.reader.lists if x[0] == JOB_GVK]
    assert job_lists and all(
        ns == "default" and fields == {OWNER_UID_INDEX: wf["metadata"]["uid"]}
        for _, ns, fields in job_lists), "never a cluster-wide scan"


async def test_same_name_in_two_namespaces_do_not_mix(h: Harness) -> None:
    await h.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    await h.api.create(jobflow("wf", [flow("a")]))
    await h.api.create(jobflow("wf", [flow("a")], namespace="other"))
    await h.reconcile("wf")
    await h.reconcile("wf", "other")
    await h.complete("wf-a", "other")
    await h.reconcile("wf")
    await h.reconcile("wf", "other")
    assert (await h.get("wf"))["status"]["state"] == "Running"
    assert (await h.get("wf", "other"))["status"]["state"] == "Succeed"
    assert list((await h.get("wf"))["status"]["jobStatusList"]) == ["wf-a/default"]


async def test_a_job_with_completions_completes_by_condition(h: Harness) -> None:
    await h.api.create(jobflow("wf", [flow("a", completions=3, parallelism=3), flow("b", "a")]))
    await h.reconcile("wf")
    await h.set_job_status("wf-a", {"succeeded": 1, "active": 2})
    await h.reconcile("wf")
    assert "wf-b" not in await h.jobs()
    await h.set_job_status("wf-a", {"succeeded": 3, "active": 0})
    await h.reconcile("wf")
    assert "wf-b" not in await h.jobs(), "counts alone are not completion"
    await h.complete("wf-a")
    await h.reconcile("wf")
    assert "wf-b" in await h.jobs()


async def test_failure_stops_new_jobs_and_running_siblings(h: Harness) -> None:
    await h.api.create(jobflow("wf", [flow("a"), flow("b", "a"), flow("c"), flow("d", "c")]))
    await h.reconcile("wf")
    await h.fail("wf-a", reason="BackoffLimitExceeded", message="Job has reached the "
                 "specified backoff limit")
    await h.reconcile("wf")
    jobs = await h.jobs()
    assert set(jobs) == {"wf-a", "wf-c"}
    assert jobs["wf-c"]["spec"]["suspend"] is True, "the running sibling is stopped"
    wf = await h.get("wf")
    assert wf["status"]["state"] == "Failed"
    assert wf["status"]["failedFlow"] == "a"
    assert phases(wf) == {"a": "Failed", "b": "Skipped", "c": "Stopped", "d": "Skipped"}
    failed = cond(wf, ConditionType.FAILED)
    assert failed is not None and failed["reason"] == "FlowFailed"
    assert failed["message"] == ("flow a (Job wf-a) failed: BackoffLimitExceeded: Job has "
                                 "reached the specified backoff limit")
    assert ("Warning", "Failed", failed["message"]) in h.recorder.events
    # Later passes still keep status current but never create Jobs.
    await h.complete("wf-c")
    await h.reconcile("wf")
    assert set(await h.jobs()) == {"wf-a", "wf-c"}
    assert phases(await h.get("wf"))["c"] == "Succeeded"


async def test_missing_template_waits_then_proceeds(h: Harness) -> None:
    await h.api.create(jobflow("wf", [flow("a"), flow("b", "a", ref="tpl")]))
    await h.reconcile("wf")
    await h.complete("wf-a")
    await h.reconcile("wf")
    wf = await h.get("wf")
    assert "wf-b" not in await h.jobs()
    assert phases(wf)["b"] == "WaitingForTemplate"
    missing = cond(wf, ConditionType.TEMPLATE_MISSING)
    assert missing is not None and missing["status"] == "True"
    assert "'tpl'" in missing["message"]
    assert "JobTemplateNotFound" in h.recorder.reasons()
    # The JobTemplate watch maps the new template to this JobFlow through the index.
    tpl = await h.api.create(jobtemplate("tpl", parallelism=2))
    assert await h.rec.jobflows_for_template(tpl) == [Request.of("default", "wf")]
    await h.reconcile("wf")
    job = (await h.jobs())["wf-b"]
    assert job["metadata"]["annotations"][CREATED_BY_TEMPLATE_ANNOTATION] == "default.tpl"
    assert job["spec"]["parallelism"] == 2
    wf = await h.get("wf")
    assert cond(wf, ConditionType.TEMPLATE_MISSING)["status"] == "False"  # type: ignore[index]
    # Only the template of the flow about to start is read, not every template each pass.
    assert phases(wf) == {"a": "Succeeded", "b": "Running"}


async def test_dependency_list_follows_jobs(h: Harness) -> None:
    await h.api.create(jobtemplate("tpl.v1"))
    await h.api.create(jobflow("wf", [flow("a", ref="tpl.v1"), flow("b", ref="tpl.v1")]))
    await h.reconcile("wf")
    await h.templates.reconcile(Request.of("default", "tpl.v1"))
    tpl = await h.api.get(JOBTEMPLATE_GVK, "tpl.v1", namespace="default")
    assert tpl["status"]["dependencyList"] == ["wf-a", "wf-b"]
    for name in ("wf-a", "wf-b"):
        await h.api.delete(JOB_GVK, name, namespace="default")
    await h.server.settle()
    await h.templates.reconcile(Request.of("default", "tpl.v1"))
    tpl = await h.api.get(JOBTEMPLATE_GVK, "tpl.v1", namespace="default")
    assert "dependencyList" not in tpl.get("status", {}), "cleared when no Job is left"


async def test_globals_reach_job_and_pod(h: Harness) -> None:
    f = flow("a")
    f["jobTemplate"]["template"]["spec"]["initContainers"] = [container("init")]
    await h.api.create(jobflow("wf", [f], globalParams={
        "env": [{"name": "FOO", "value": "bar"}], "labels": {"key1": "value1"},
        "annotations": {"key2": "value2"}, "nodeName": "minikube"}))
    await h.reconcile("wf")
    job = (await h.jobs())["wf-a"]
    assert job["metadata"]["labels"]["key1"] == "value1"
    assert job["metadata"]["annotations"]["key2"] == "value2"
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"]["key1"] == "value1"
    assert pod["metadata"]["annotations"]["key2"] == "value2"
    assert pod["spec"]["nodeName"] == "minikube"
    assert pod["spec"]["restartPolicy"] == "Never"
    for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert {"name": "FOO", "value": "bar"} in c["env"]


async def test_suspended_flow_creates_nothing_and_suspends_running_jobs(h: Harness) -> None:
    await h.api.create(jobflow("wf", [flow("a"), flow("b", "a")], suspend=True))
    await h.reconcile("wf")
    assert await h.jobs() == {}
    wf = await h.get("wf")
    assert wf["status"]["state"] == "Pending"
    assert cond(wf, ConditionType.SUSPENDED)["status"] == "True"  # type: ignore[index]
    wf["spec"]["suspend"] = False
    await h.api.update(wf)
    await h.reconcile("wf")
    assert (await h.jobs())["wf-a"]["spec"]["suspend"] is False
    wf = await h.get("wf")
    wf["spec"]["suspend"] = True
    await h.api.update(wf)
    await h.reconcile("wf")
    assert (await h.jobs())["wf-a"]["spec"]["suspend"] is True
    assert phases(await h.get("wf"))["a"] == "Suspended"
    wf = await h.get("wf")
    wf["spec"]["suspend"] = False
    await h.api.update(wf)
    await h.reconcile("wf")
    assert (await h.jobs())["wf-a"]["spec"]["suspend"] is False
    assert cond(await h.get("wf"), ConditionType.SUSPENDED)["status"] == "False"  # type: ignore[index]


async def test_invalid_child_is_reported_not_retried(h: Harness) -> None:
    # A global label value the API server refuses on the Job (no webhook rule about it):
    # reported on the flow.
    await h.api.create(jobflow("wf", [flow("step")],
                               globalParams={"labels": {"team": "not a label value"}}))
    await h.reconcile("wf")
    wf = await h.get("wf")
    entry = wf["status"]["flows"][0]
    assert entry["phase"] == "Pending" and entry["reason"] == "FailedCreate"
    assert "FailedCreate" in h.recorder.reasons()
    assert await h.jobs() == {}


async def test_deleted_jobflow_is_ignored(h: Harness) -> None:
    await h.reconcile("missing")
    assert await h.jobs() == {}


async def test_lagging_cache_does_not_regress_status(h: Harness) -> None:
    await h.api.create(jobflow("wf", [flow("a")]))
    assert (await h.reconcile("wf")).is_zero()
    before = (await h.get("wf"))["status"]
    assert before["flows"][0]["phase"] == "Running"
    h.reader.hidden.add("wf-a")     # the informer has not delivered the Job yet
    result = await h.reconcile("wf")
    assert result.requeue, "retried once the cache catches up"
    assert (await h.get("wf"))["status"] == before, "no Pending flash"
    assert len(await h.jobs()) == 1


async def test_terminating_while_deletion_waits_on_a_finalizer(h: Harness) -> None:
    wf = jobflow("wf", [flow("a"), flow("b", "a")])
    wf["metadata"]["finalizers"] = ["example.com/hold"]
    await h.api.create(wf)
    await h.reconcile("wf")
    await h.api.delete(JOBFLOW_GVK, "wf", namespace="default")
    await h.complete("wf-a")
    await h.reconcile("wf")
    assert (await h.get("wf"))["status"]["state"] == "Terminating"
    assert set(await h.jobs()) == {"wf-a"}, "nothing starts while the flow is deleted"
