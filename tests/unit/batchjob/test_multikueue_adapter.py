"""Kueue v0.19.2 ``pkg/controller/jobs/job/job_multikueue_adapter_test.go`` against
:class:`~integrations.batchjob.BatchJobMultiKueueAdapter`, on two in-memory API servers
(the manager's and a worker's).

Each Go case is one test carrying its name in a ``kueue_case`` marker; the Go tests'
objects are built like ``testingjobs/job.MakeJob``. Where Go's fake client leaves UIDs and
generations empty, ours sets them, so the elastic cases compute the slice name from the
stored Job. Further tests below the Go cases pin behaviour the Go file leaves implicit
(the worker copy's cleanup on a defaulting server, background deletion, the watcher side,
the registration).
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
from typing import Any

import pytest

from integrations.batchjob import CALLBACKS, FRAMEWORK_NAME, JOB_GVK, BatchJobMultiKueueAdapter
from integrations.batchjob.multikueue import (
    SUSPENDED_CONDITION_MESSAGE,
    SUSPENDED_CONDITION_REASON,
)
from jobframework import constants as c
from jobframework import workloadslicing
from jobframework.constants import DEFAULT_FEATURES, FeatureGate
from jobframework.integrations import IntegrationManager
from jobframework.multikueue import MultiKueueAdapter, MultiKueueWatcher
from jobframework.naming import get_workload_name_for_owner_with_gvk_and_generation
from jobframework.runtime import errors
from jobframework.runtime.client import Client
from jobframework.runtime.clock import ManualClock, rfc3339
from jobframework.runtime.objects import GVK, Object, ObjectKey
from jobframework.testing import APIServer

NS = "ns"
MK = c.MULTIKUEUE_CONTROLLER_NAME
START = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
ELASTIC = (workloadslicing.ENABLED_ANNOTATION_KEY, workloadslicing.ENABLED_ANNOTATION_VALUE)
#: ``batchv1.JobSuccessCriteriaMet=False``: a running Job's condition in the SyncJob cases.
RUNNING = {"type": "SuccessCriteriaMet", "status": "False"}
COMPLETE = {"type": "Complete", "status": "True"}
FAILED = {"type": "Failed", "status": "True"}
POD = GVK("", "v1", "Pod")

WIA_OFF = DEFAULT_FEATURES.with_gates(
    **{FeatureGate.WORKLOAD_IDENTIFIER_ANNOTATIONS.value: False})
WIA_ON = DEFAULT_FEATURES.with_gates(**{FeatureGate.WORKLOAD_IDENTIFIER_ANNOTATIONS.value: True})
ELASTIC_ON = DEFAULT_FEATURES.with_gates(
    **{FeatureGate.ELASTIC_JOBS_VIA_WORKLOAD_SLICES.value: True})


class J:
    """A Job built like Kueue's ``testingjobs/job.MakeJob``: suspended, parallelism 1, one
    container ``c``."""

    def __init__(self, name: str = "job1", namespace: str = NS) -> None:
        self.obj: dict[str, Any] = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"parallelism": 1, "suspend": True, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:non-existing"}]}}},
        }

    def clone(self) -> J:
        out = J()
        out.obj = copy.deepcopy(self.obj)
        return out

    def suspend(self, value: bool) -> J:
        self.obj["spec"]["suspend"] = value
        return self

    def managed_by(self, value: str) -> J:
        self.obj["spec"]["managedBy"] = value
        return self

    def parallelism(self, value: int) -> J:
        self.obj["spec"]["parallelism"] = value
        return self

    def label(self, key: str, value: str) -> J:
        self.obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> J:
        self.obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def elastic(self) -> J:
        return self.annotation(*ELASTIC)

    def prebuilt_label(self, name: str) -> J:
        return self.label(c.PREBUILT_WORKLOAD_LABEL, name)

    def prebuilt_annotation(self, name: str) -> J:
        return self.annotation(c.PREBUILT_WORKLOAD_ANNOTATION, name)

    def origin(self, value: str = "origin1") -> J:
        return self.label(c.MULTIKUEUE_ORIGIN_LABEL, value)

    def active(self, n: int) -> J:
        self.obj.setdefault("status", {})["active"] = n
        return self

    def condition(self, cond: dict[str, Any]) -> J:
        self.obj.setdefault("status", {}).setdefault("conditions", []).append(dict(cond))
        return self

    def get(self) -> Object:
        return copy.deepcopy(self.obj)


def clusters(*, builtin_defaults: bool = False) -> tuple[APIServer, APIServer]:
    """The manager's and a worker's API server, each with namespace ``ns``."""
    return (APIServer(ManualClock(START), builtin_defaults=builtin_defaults),
            APIServer(ManualClock(START), builtin_defaults=builtin_defaults))


async def seed(client: Client, *jobs: J) -> None:
    """Create the Jobs (and ``ns``); a Job's status is written through ``status``, as on
    a real server."""
    with contextlib.suppress(errors.AlreadyExists):
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for j in jobs:
        obj = j.get()
        status = obj.pop("status", None)
        created = await client.create(obj)
        if status:
            created["status"] = status
            await client.update_status(created)


def _drop_empty(value: Any) -> Any:
    # cmpopts.EquateEmpty on JSON: an empty map or list equals an absent field.
    if isinstance(value, dict):
        out = {k: _drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [_drop_empty(v) for v in value]
    return value


def shape(obj: Object) -> Object:
    """What Go's comparison sees: name, namespace, labels, annotations, spec, status
    (server-set metadata ignored, empty equals absent)."""
    meta = obj.get("metadata") or {}
    return _drop_empty({
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "labels", "annotations")},
        "spec": obj.get("spec"), "status": obj.get("status")})


async def jobs(client: Client) -> list[Object]:
    return sorted((shape(j) for j in (await client.list(JOB_GVK, namespace=NS)).items),
                  key=lambda j: j["metadata"]["name"])


async def stored(client: Client, name: str = "test") -> Object:
    return await client.get(JOB_GVK, name, namespace=NS)


KEY1 = ObjectKey(NS, "job1")
KEY = ObjectKey(NS, "test")


# --- TestMultiKueueAdapter --------------------------------------------------------------------

BASE = J().suspend(False)
BASE_MK = BASE.clone().managed_by(MK)


async def _sync_job1(features: Any = WIA_OFF) -> tuple[Client, Client, bool]:
    return await _run_sync(features, BASE_MK)


async def _run_sync(features: Any, manager_job: J, *worker_jobs: J
                    ) -> tuple[Client, Client, bool]:
    manager, worker = (s.client() for s in clusters())
    await seed(manager, manager_job)
    await seed(worker, *worker_jobs)
    adapter = BatchJobMultiKueueAdapter(features=features)
    deferred = await adapter.sync_job(manager, worker, KEY1, "wl1", "origin1")
    return manager, worker, deferred


@pytest.mark.kueue_case("TestMultiKueueAdapter/sync creates missing remote job")
async def test_sync_creates_missing_remote_job() -> None:
    manager, worker, deferred = await _sync_job1()
    assert deferred is False
    assert await jobs(manager) == [shape(BASE_MK.get())]
    # No managedBy on the copy; the prebuilt name is a label with the gate off.
    assert await jobs(worker) == [shape(BASE.clone().prebuilt_label("wl1").origin().get())]


@pytest.mark.kueue_case("TestMultiKueueAdapter/sync intermediate status from remote job")
async def test_sync_intermediate_status_from_remote_job() -> None:
    remote = BASE.clone().prebuilt_label("wl1").origin().active(2)
    manager, worker, deferred = await _run_sync(WIA_OFF, BASE_MK, remote)
    assert deferred is False
    assert await jobs(manager) == [shape(BASE_MK.clone().active(2).get())]
    assert await jobs(worker) == [shape(remote.get())]


@pytest.mark.kueue_case(
    "TestMultiKueueAdapter/sync intermediate status from remote suspended job")
async def test_sync_intermediate_status_from_remote_suspended_job() -> None:
    # Both suspended (an evicted worker Job): its draining ``active`` count is mirrored.
    remote = BASE.clone().prebuilt_label("wl1").origin().suspend(True).active(2)
    local = BASE_MK.clone().suspend(True)
    manager, worker, deferred = await _run_sync(WIA_OFF, local, remote)
    assert deferred is False
    assert await jobs(manager) == [shape(local.clone().active(2).get())]
    assert await jobs(worker) == [shape(remote.get())]


@pytest.mark.kueue_case("TestMultiKueueAdapter/sync final status from remote job")
async def test_sync_final_status_from_remote_job() -> None:
    remote = BASE.clone().prebuilt_label("wl1").origin().condition(COMPLETE)
    manager, worker, _ = await _run_sync(WIA_OFF, BASE_MK, remote)
    assert await jobs(manager) == [shape(BASE_MK.clone().condition(COMPLETE).get())]
    assert await jobs(worker) == [shape(remote.get())]


@pytest.mark.kueue_case("TestMultiKueueAdapter/remote job is deleted")
async def test_remote_job_is_deleted() -> None:
    manager, worker = (s.client() for s in clusters())
    await seed(manager)
    await seed(worker, BASE.clone().prebuilt_label("wl1").origin().active(2))
    adapter = BatchJobMultiKueueAdapter(features=WIA_OFF)
    await adapter.delete_remote_object(manager, worker, KEY1)
    assert await jobs(worker) == []
    assert await jobs(manager) == []
    # Deleting what is already gone is no error.
    await adapter.delete_remote_object(manager, worker, KEY1)


@pytest.mark.kueue_case("TestMultiKueueAdapter/missing job is not considered managed")
async def test_missing_job_is_not_considered_managed() -> None:
    manager, _ = (s.client() for s in clusters())
    await seed(manager)
    # Go answers (false, "", NotFound); the Python protocol raises the error instead.
    with pytest.raises(errors.NotFound):
        await BatchJobMultiKueueAdapter().is_job_managed_by_kueue(manager, KEY1)
    assert await jobs(manager) == []


@pytest.mark.kueue_case(
    "TestMultiKueueAdapter/job with wrong managedBy is not considered managed")
async def test_job_with_wrong_managed_by_is_not_considered_managed() -> None:
    manager, _ = (s.client() for s in clusters())
    await seed(manager, BASE)
    managed = await BatchJobMultiKueueAdapter().is_job_managed_by_kueue(manager, KEY1)
    assert managed == (False, 'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" '
                              'not ""')
    other = BASE.clone().managed_by("example.com/other")
    other.obj["metadata"]["name"] = "job2"
    await seed(manager, other)
    assert await BatchJobMultiKueueAdapter().is_job_managed_by_kueue(
        manager, ObjectKey(NS, "job2")) == (
        False, 'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not '
               '"example.com/other"')
    assert (await jobs(manager))[0] == shape(BASE.get())


@pytest.mark.kueue_case("TestMultiKueueAdapter/job managedBy multikueue")
async def test_job_managed_by_multikueue() -> None:
    manager, _ = (s.client() for s in clusters())
    await seed(manager, BASE_MK)
    assert await BatchJobMultiKueueAdapter().is_job_managed_by_kueue(manager, KEY1) == (True, "")
    assert await jobs(manager) == [shape(BASE_MK.get())]


@pytest.mark.kueue_case(
    "TestMultiKueueAdapter/sync creates missing remote job, WorkloadIdentifierAnnotations enabled")
async def test_sync_creates_missing_remote_job_with_workload_identifier_annotations() -> None:
    manager, worker, _ = await _sync_job1(WIA_ON)
    assert await jobs(manager) == [shape(BASE_MK.get())]
    assert await jobs(worker) == [shape(BASE.clone().prebuilt_annotation("wl1").origin().get())]


# --- Test_multiKueueAdapter_SyncJob ----------------------------------------------------------


def new_job() -> J:
    return J("test")


async def sync_case(local: list[J], remote: list[J], *, features: Any = DEFAULT_FEATURES,
                    origin: str = "origin1",
                    ) -> tuple[APIServer, APIServer, BatchJobMultiKueueAdapter]:
    """The Go harness: the worker's Jobs get the origin label before the call."""
    manager, worker = clusters()
    await seed(manager.client(), *local)
    await seed(worker.client(), *(
        j if (j.obj["metadata"].get("labels") or {}).get(c.MULTIKUEUE_ORIGIN_LABEL)
        else j.clone().origin(origin) for j in remote))
    return manager, worker, BatchJobMultiKueueAdapter(features=features,
                                                      clock=ManualClock(START))


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/FailureToRetrieveLocalJob")
async def test_sync_job_failure_to_retrieve_local_job() -> None:
    manager, worker, adapter = await sync_case([], [])
    with pytest.raises(errors.NotFound):
        await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1")
    assert await jobs(worker.client()) == []


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/FailureToRetrieveRemoteJob")
async def test_sync_job_failure_to_retrieve_remote_job() -> None:
    local = new_job().managed_by("parent")
    manager, worker, adapter = await sync_case([local], [])
    worker.faults.fail("get", error=500, gvk=JOB_GVK)
    with pytest.raises(errors.InternalError):
        await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1")
    assert shape(await stored(manager.client())) == shape(local.get())
    assert await jobs(worker.client()) == []  # no copy created on a failed read


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/RemoteJobNotFound")
async def test_sync_job_remote_job_not_found() -> None:
    local = new_job().managed_by("parent")
    manager, worker, adapter = await sync_case([local], [], features=WIA_OFF)
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1") is False
    assert shape(await stored(manager.client())) == shape(local.get())
    # The copy drops managedBy (whatever its value) and names the empty workload name.
    assert shape(await stored(worker.client())) == shape(
        new_job().origin().prebuilt_label("").get())


@pytest.mark.kueue_case(
    "Test_multiKueueAdapter_SyncJob/RemoteJobInProgress_LocalIsManagedButStillSuspended")
async def test_sync_job_remote_in_progress_local_still_suspended() -> None:
    # Both suspended: the status is mirrored, not deferred.
    remote = new_job().condition(RUNNING)
    manager, worker, adapter = await sync_case([new_job()], [remote])
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1") is False
    assert shape(await stored(manager.client())) == shape(new_job().condition(RUNNING).get())
    assert shape(await stored(worker.client())) == shape(remote.clone().origin().get())


@pytest.mark.kueue_case(
    "Test_multiKueueAdapter_SyncJob/RemoteJobInProgress_LocalIsManagedAndUnsuspended")
async def test_sync_job_remote_in_progress_local_unsuspended() -> None:
    remote = new_job().condition(RUNNING)
    manager, worker, adapter = await sync_case([new_job().suspend(False)], [remote])
    before = await stored(manager.client())
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1") is False
    after = await stored(manager.client())
    assert shape(after) == shape(new_job().suspend(False).condition(RUNNING).get())
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    assert shape(await stored(worker.client())) == shape(remote.clone().origin().get())


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/RemoteJobFinished_Completed")
async def test_sync_job_remote_finished_completed() -> None:
    manager, worker, adapter = await sync_case([new_job().suspend(False)],
                                               [new_job().condition(COMPLETE)])
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1") is False
    assert shape(await stored(manager.client())) == shape(
        new_job().suspend(False).condition(COMPLETE).get())


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/RemoteJobFinished_Failed")
async def test_sync_job_remote_finished_failed() -> None:
    manager, worker, adapter = await sync_case(
        [new_job().suspend(False)], [new_job().suspend(False).condition(FAILED)])
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1") is False
    assert shape(await stored(manager.client())) == shape(
        new_job().suspend(False).condition(FAILED).get())


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/ElasticJob_RemoteInSync")
async def test_sync_job_elastic_remote_in_sync() -> None:
    local = new_job().elastic().condition(RUNNING)
    remote = new_job().elastic().prebuilt_label("test-workload").condition(RUNNING)
    manager, worker, adapter = await sync_case([local], [remote], features=ELASTIC_ON)
    rv = (await stored(worker.client()))["metadata"]["resourceVersion"]
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "test-workload",
                                  "origin1") is False
    assert shape(await stored(manager.client())) == shape(local.get())
    got = await stored(worker.client())
    assert shape(got) == shape(remote.clone().origin().get())
    assert got["metadata"]["resourceVersion"] == rv  # nothing written


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/ElasticJob_LocalIsStale")
async def test_sync_job_elastic_local_is_stale() -> None:
    # A scale-up seen with the old slice's name: the worker keeps its size and name.
    local = new_job().elastic().parallelism(2).condition(RUNNING)
    remote = new_job().elastic().prebuilt_label("test-workload").condition(RUNNING)
    manager, worker, adapter = await sync_case([local], [remote], features=ELASTIC_ON)
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "test-workload",
                                  "origin1") is False
    assert shape(await stored(manager.client())) == shape(local.get())
    assert shape(await stored(worker.client())) == shape(remote.clone().origin().get())


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/ElasticJob_WorkloadNameOnlyChange_EdgeCase")
async def test_sync_job_elastic_workload_name_only_change() -> None:
    local = new_job().elastic().condition(RUNNING)
    remote = new_job().elastic().condition(RUNNING)
    manager, worker, adapter = await sync_case([local], [remote], features=ELASTIC_ON)
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "test-workload-new",
                                  "origin1") is False
    assert shape(await stored(manager.client())) == shape(local.get())
    assert shape(await stored(worker.client())) == shape(
        remote.clone().origin().prebuilt_annotation("test-workload-new").get())


async def _current_slice(client: Client) -> str:
    meta = (await stored(client))["metadata"]
    return get_workload_name_for_owner_with_gvk_and_generation(
        "test", meta["uid"], JOB_GVK, meta["generation"])


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/ElasticJob_RemoteOutOfSync")
async def test_sync_job_elastic_remote_out_of_sync() -> None:
    # Go's fake client has no UID or generation: the same name function gives its literal.
    assert get_workload_name_for_owner_with_gvk_and_generation(
        "test", "", JOB_GVK, 0) == "job-test-f53b2"
    local = new_job().elastic().parallelism(22).condition(RUNNING)
    remote = new_job().elastic().prebuilt_label("test-workload").condition(RUNNING)
    manager, worker, adapter = await sync_case([local], [remote], features=ELASTIC_ON)
    name = await _current_slice(manager.client())
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, name,
                                  "origin1") is False
    assert shape(await stored(manager.client())) == shape(local.get())
    # With WorkloadIdentifierAnnotations (on) the new name is an annotation; the old label
    # stays.
    assert shape(await stored(worker.client())) == shape(
        remote.clone().origin().prebuilt_annotation(name).parallelism(22).get())


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/ElasticJob_RemoteOutOfSync_PatchFailure")
async def test_sync_job_elastic_remote_out_of_sync_patch_failure() -> None:
    local = new_job().elastic().parallelism(22).condition(RUNNING)
    remote = new_job().elastic().prebuilt_label("test-workload").condition(RUNNING)
    manager, worker, adapter = await sync_case([local], [remote], features=ELASTIC_ON)
    name = await _current_slice(manager.client())
    worker.faults.fail("patch", error=500, gvk=JOB_GVK)
    with pytest.raises(errors.InternalError) as err:
        await adapter.sync_job(manager.client(), worker.client(), KEY, name, "origin1")
    assert str(err.value).startswith("failed to patch remote job: ")
    assert shape(await stored(manager.client())) == shape(local.get())
    assert shape(await stored(worker.client())) == shape(remote.clone().origin().get())


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob/ElasticJob_DeferredWhenLocalSuspended")
async def test_sync_job_elastic_deferred_when_local_suspended() -> None:
    # The elastic sync runs, and the deferred status sync is still reported.
    local = new_job().elastic().parallelism(22).condition(RUNNING)
    remote = new_job().elastic().suspend(False).prebuilt_label("test-workload").condition(
        RUNNING)
    manager, worker, adapter = await sync_case([local], [remote], features=ELASTIC_ON)
    name = await _current_slice(manager.client())
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, name,
                                  "origin1") is True
    assert (await stored(worker.client()))["spec"]["parallelism"] == 22
    conditions = (await stored(manager.client()))["status"]["conditions"]
    assert [cond["type"] for cond in conditions] == ["SuccessCriteriaMet", "Suspended"]


# --- Test_multiKueueAdapter_SyncJob_DeferredWhenLocalSuspended -------------------------------


@pytest.mark.kueue_case("Test_multiKueueAdapter_SyncJob_DeferredWhenLocalSuspended")
async def test_sync_job_deferred_when_local_suspended() -> None:
    # The worker runs, the manager's Job is still suspended: ``active`` is not mirrored,
    # the manager's Job gets a Suspended=True condition, and the sync is deferred.
    remote = new_job().origin().suspend(False).active(1)
    manager, worker, adapter = await sync_case([new_job()], [remote])
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1") is True
    got = await stored(manager.client())
    assert got["status"] == {"conditions": [{
        "type": "Suspended", "status": "True", "reason": SUSPENDED_CONDITION_REASON,
        "message": SUSPENDED_CONDITION_MESSAGE, "lastTransitionTime": rfc3339(START),
        "lastProbeTime": rfc3339(START)}]}
    assert (SUSPENDED_CONDITION_REASON, SUSPENDED_CONDITION_MESSAGE) == (
        "MultiKueueAdapter", "Set by MultiKueue adapter")
    # Again: still deferred, and the condition already there means no second write.
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1") is True
    again = await stored(manager.client())
    assert again["metadata"]["resourceVersion"] == got["metadata"]["resourceVersion"]
    assert shape(await stored(worker.client())) == shape(remote.get())


# --- beyond the Go file -----------------------------------------------------------------------


async def test_remote_finished_is_mirrored_onto_a_suspended_local_job() -> None:
    # Without this the manager's Job would wait suspended for a run that is over.
    remote = new_job().suspend(False).condition(COMPLETE)
    manager, worker, adapter = await sync_case([new_job()], [remote])
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1") is False
    assert (await stored(manager.client()))["status"] == {"conditions": [COMPLETE]}


async def test_a_stopping_local_job_counts_as_unsuspended() -> None:
    # Kueue's IsSuspended is false mid-stop (the stopping annotation): the status syncs.
    local = new_job().annotation(c.STOPPING_ANNOTATION, "true")
    remote = new_job().suspend(False).active(3)
    manager, worker, adapter = await sync_case([local], [remote])
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1") is False
    assert (await stored(manager.client()))["status"] == {"active": 3}


async def test_a_false_suspended_condition_is_replaced_not_duplicated() -> None:
    # A Suspended=False condition is updated in place to True.
    stale = {"type": "Suspended", "status": "False", "reason": "JobResumed",
             "message": "resumed", "lastTransitionTime": "2026-01-01T00:00:00Z",
             "lastProbeTime": "2026-01-01T00:00:00Z"}
    manager, worker, adapter = await sync_case([new_job().condition(stale)],
                                               [new_job().suspend(False).active(1)])
    assert await adapter.sync_job(manager.client(), worker.client(), KEY, "", "origin1") is True
    conditions = (await stored(manager.client()))["status"]["conditions"]
    assert conditions == [{**stale, "status": "True", "reason": SUSPENDED_CONDITION_REASON,
                           "message": SUSPENDED_CONDITION_MESSAGE,
                           "lastTransitionTime": rfc3339(START),
                           "lastProbeTime": rfc3339(START)}]


async def test_the_copy_drops_the_selector_and_controller_labels() -> None:
    # The manager's API server gave its Job a selector and controller-uid labels; a
    # worker's would refuse them (it generates its own), so the copy carries neither. The
    # worker here does no defaulting, so what is stored is what the adapter sent.
    manager = APIServer(ManualClock(START), builtin_defaults=True).client()
    worker = APIServer(ManualClock(START)).client()
    local = BASE_MK.clone()
    local.obj["spec"]["template"]["metadata"] = {"labels": {"app": "x"}}
    await seed(manager, local)
    got = await stored(manager, "job1")
    uid = got["metadata"]["uid"]
    assert got["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert got["spec"]["template"]["metadata"]["labels"] == {
        "app": "x", "controller-uid": uid, "batch.kubernetes.io/controller-uid": uid,
        "job-name": "job1", "batch.kubernetes.io/job-name": "job1"}
    await seed(worker)
    await BatchJobMultiKueueAdapter().sync_job(manager, worker, KEY1, "wl1", "origin1")
    copy_ = await stored(worker, "job1")
    assert "selector" not in copy_["spec"] and "managedBy" not in copy_["spec"]
    # Kueue keeps ``batch.kubernetes.io/job-name``: the same name on the worker.
    assert copy_["spec"]["template"]["metadata"]["labels"] == {
        "app": "x", "batch.kubernetes.io/job-name": "job1"}
    assert copy_["metadata"]["labels"][c.MULTIKUEUE_ORIGIN_LABEL] == "origin1"
    assert copy_["metadata"]["annotations"][c.PREBUILT_WORKLOAD_ANNOTATION] == "wl1"


async def test_the_copy_keeps_only_name_namespace_labels_and_annotations() -> None:
    manager, worker = (s.client() for s in clusters())
    local = BASE_MK.clone().label(c.QUEUE_LABEL, "mk-queue").annotation("a", "b")
    await seed(manager, local)
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u-1"}
    job = await stored(manager, "job1")
    job["metadata"]["ownerReferences"] = [owner]
    job["metadata"]["finalizers"] = ["example.com/keep"]
    await manager.update(job)
    await seed(worker)
    await BatchJobMultiKueueAdapter().sync_job(manager, worker, KEY1, "wl1", "origin1")
    meta = (await stored(worker, "job1"))["metadata"]
    assert "ownerReferences" not in meta and "finalizers" not in meta
    assert meta["labels"] == {c.QUEUE_LABEL: "mk-queue", c.MULTIKUEUE_ORIGIN_LABEL: "origin1"}
    assert meta["annotations"] == {"a": "b", c.PREBUILT_WORKLOAD_ANNOTATION: "wl1"}


async def test_delete_propagates_in_the_background() -> None:
    # Jobs orphan their pods by default; the adapter's delete takes them along.
    _, worker_server = clusters()
    worker = worker_server.client()
    await seed(worker, BASE.clone().origin())
    job = await stored(worker, "job1")
    await worker.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS, "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": "job1",
            "uid": job["metadata"]["uid"], "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}})
    await BatchJobMultiKueueAdapter().delete_remote_object(worker, worker, KEY1)
    await worker_server.settle()
    assert (await worker.list(POD, namespace=NS)).items == []


def test_watcher_side() -> None:
    adapter = BatchJobMultiKueueAdapter(features=WIA_OFF)
    assert isinstance(adapter, MultiKueueAdapter) and isinstance(adapter, MultiKueueWatcher)
    assert adapter.gvk() == GVK("batch", "v1", "Job")
    assert adapter.get_empty_list() == {"apiVersion": "batch/v1", "kind": "JobList",
                                        "items": []}
    assert adapter.workload_keys_for(BASE.clone().prebuilt_label("wl1").get()) == [
        ObjectKey(NS, "wl1")]
    with pytest.raises(ValueError, match=r"^no prebuilt workload found for job: ns/job1$"):
        adapter.workload_keys_for(BASE.get())
    with pytest.raises(ValueError, match=r"^not a job$"):
        adapter.workload_keys_for({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "p", "namespace": NS, "labels": {c.PREBUILT_WORKLOAD_LABEL: "wl1"}}})


def test_registered_as_the_batch_job_integrations_adapter() -> None:
    assert isinstance(CALLBACKS.multikueue_adapter, BatchJobMultiKueueAdapter)
    m = IntegrationManager()
    m.register_integration(FRAMEWORK_NAME, CALLBACKS)
    adapters = m.get_multikueue_adapters([FRAMEWORK_NAME])
    assert list(adapters) == ["batch/v1, Kind=Job"]
    assert adapters["batch/v1, Kind=Job"] is CALLBACKS.multikueue_adapter
    assert m.get_multikueue_adapters([]) == {}
