"""A stop that fails part-way (Kueue v0.19.2 ``stopJob`` and the batch Job's ``Stop``).

Go's ``Stop`` returns ``(stoppedNow, err)``: when resetting ``status.startTime`` fails
after the job was suspended, the reconciler still records ``Stopped`` and then returns the
error, which keeps its API class through ``%w`` (``apierrors.IsConflict``). Here the stop
raises :class:`~jobframework.interface.StopError` and the reconciler raises the typed
error it carries. Kueue's Go tests have no case for these error paths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from integrations.batchjob import BatchJob
from jobframework import constants as c
from jobframework.api import Workload
from jobframework.composable import ComposableJob, EventRecorder
from jobframework.interface import JobWithCustomStop, StopError, StopReason
from jobframework.podset import PodSetInfo
from jobframework.reconciler import ReconcileError
from jobframework.runtime import errors
from jobframework.runtime.client import Client
from jobframework.runtime.objects import Object, ObjectKey

from .helpers import JOB_GVK, WORKLOAD, MockJob, World, admitted_status

STARTED = "2026-01-02T03:00:00Z"
NOT_ADMITTED = ("Normal", "Stopped", "Not admitted by cluster queue")
RESET_FAILURES = [
    pytest.param(errors.new_conflict("jobs", "test-job", "the object has been modified",
                                     "batch"), id="Conflict"),
    pytest.param(errors.new_not_found("jobs", "test-job", "batch"), id="NotFound"),
    pytest.param(errors.InternalError("etcd is down"), id="InternalError"),
]


async def running_job(w: World, *, suspend: bool = False,
                      annotations: dict[str, str] | None = None) -> Object:
    """The Job running since ``STARTED`` (or suspended with that startTime left)."""
    await w.create_job(annotations=annotations)
    job = w.job()
    job["spec"]["suspend"] = suspend
    job = await w.client.update(job)
    job["status"] = {"startTime": STARTED, "active": 0}
    return await w.client.update_status(job)


def fail_reset(w: World, error: errors.ApiError) -> None:
    """Fail the next write to the Job's status (the startTime reset)."""
    w.server.faults.fail("patch", error=error, gvk=JOB_GVK, subresource="status")


# --- the batch Job's Stop -------------------------------------------------------------------


@pytest.mark.parametrize("error", RESET_FAILURES)
async def test_reset_failure_after_suspending_is_a_stop_error_with_the_typed_error(
    error: errors.ApiError,
) -> None:
    w = World()
    job = BatchJob(await running_job(w))
    fail_reset(w, error)
    with pytest.raises(StopError) as raised:
        await job.stop(w.client, [], StopReason.NOT_ADMITTED, "m")
    assert raised.value.stopped_now is True
    cause = raised.value.error
    assert type(cause) is type(error)
    assert str(cause) == f"reset status: {error.message}"
    assert (cause.code, cause.reason) == (error.code, error.reason)
    assert isinstance(cause.__cause__, type(error))
    stored = w.job()
    assert stored["spec"]["suspend"] is True
    assert stored["metadata"]["annotations"][c.STOPPING_ANNOTATION] == "true"
    assert stored["status"]["startTime"] == STARTED


async def test_reset_failure_on_an_already_suspended_job_raises_the_typed_error() -> None:
    # Go: Stop returns (false, err) and no Stopped is recorded, so there is nothing to carry.
    w = World()
    job = BatchJob(await running_job(w, suspend=True))
    fail_reset(w, errors.new_conflict("jobs", "test-job", "stale", "batch"))
    with pytest.raises(errors.Conflict, match=r"^reset status: Operation cannot be fulfilled"):
        await job.stop(w.client, [], StopReason.NOT_ADMITTED, "m")


async def test_suspend_failure_raises_the_typed_error() -> None:
    w = World()
    job = BatchJob(await running_job(w))
    w.server.faults.fail("patch", error=errors.new_not_found("jobs", "test-job", "batch"),
                         gvk=JOB_GVK)
    with pytest.raises(errors.NotFound, match=r'^suspend: jobs.batch "test-job" not found$'):
        await job.stop(w.client, [], StopReason.NOT_ADMITTED, "m")
    assert w.job()["spec"]["suspend"] is False


async def test_restore_failure_raises_the_typed_error_without_stopped_now() -> None:
    # Interrupted after its suspend: marked stopping, so this call suspends "again" with no
    # write, then its restore (the first write) fails. Go returns (false, err) for it.
    w = World()
    job = BatchJob(await running_job(w, suspend=True,
                                     annotations={c.STOPPING_ANNOTATION: "true"}))
    stored = w.job()
    del stored["status"]["startTime"]
    job = BatchJob(await w.client.update_status(stored))
    w.server.faults.fail("patch", error=errors.InternalError("etcd is down"), gvk=JOB_GVK)
    with pytest.raises(errors.InternalError, match=r"^restore info: etcd is down$"):
        await job.stop(w.client, [], StopReason.NOT_ADMITTED, "m")


# --- the reconciler -------------------------------------------------------------------------


@pytest.mark.parametrize("error", RESET_FAILURES)
async def test_reconciler_records_stopped_then_raises_the_typed_reset_error(
    error: errors.ApiError,
) -> None:
    w = World()
    await w.create_job()
    await w.reconcile(BatchJob())  # creates the (pending) Workload
    await running_job_again(w)
    fail_reset(w, error)
    with pytest.raises(type(error), match=r"^reset status: ") as raised:
        await w.reconcile(BatchJob())
    assert isinstance(raised.value.__cause__, type(error))
    assert w.recorder.events[-1] == NOT_ADMITTED
    # The next pass resumes the interrupted stop (the job is still marked stopping).
    await w.reconcile(BatchJob())
    stored = w.job()
    assert stored["spec"]["suspend"] is True
    assert "startTime" not in stored.get("status", {})
    assert c.STOPPING_ANNOTATION not in (stored["metadata"].get("annotations") or {})
    assert w.recorder.events[-2:] == [NOT_ADMITTED, NOT_ADMITTED]


async def running_job_again(w: World) -> None:
    job = w.job()
    job["spec"]["suspend"] = False
    job = await w.client.update(job)
    job["status"] = {"startTime": STARTED, "active": 1}
    await w.client.update_status(job)
    w.recorder.events.clear()


async def test_stop_of_a_job_without_workload_keeps_the_typed_error_as_its_cause() -> None:
    # Go: fmt.Errorf("stopping job with no matching workload: %w", err) still IsConflict.
    w = World()
    await running_job(w)
    fail_reset(w, errors.new_conflict("jobs", "test-job", "stale", "batch"))
    with pytest.raises(ReconcileError, match=r"^stopping job with no matching workload: "
                                             r"reset status: ") as raised:
        await w.reconcile(BatchJob())
    assert isinstance(raised.value.__cause__, errors.Conflict)
    assert w.recorder.events == [
        ("Normal", "Stopped", "Missing Workload; unable to restore pod templates")]


class FailingStop(MockJob):
    """JobWithCustomStop whose stop fails after (or before) stopping the job."""

    stopped_now = True

    async def stop(self, client: Client, pod_sets_info: Sequence[PodSetInfo],
                   stop_reason: StopReason, event_msg: str) -> bool:
        raise StopError(errors.InternalError("late failure"), stopped_now=self.stopped_now)


@pytest.mark.parametrize(("stopped_now", "events"), [
    (True, [("Normal", "Stopped", "preempted")]),
    (False, []),
])
async def test_custom_stop_error_records_stopped_only_when_stopped_now(
    stopped_now: bool, events: list[tuple[str, str, str]],
) -> None:
    w = World()
    await w.create_job(suspend=False)
    await w.create_workload(status=admitted_status(w, evicted=("Preempted", "preempted")))
    job = FailingStop()
    job.stopped_now = stopped_now
    assert isinstance(job, JobWithCustomStop)
    with pytest.raises(errors.InternalError, match=r"^late failure$"):
        await w.reconcile(job)
    assert w.recorder.events == events


class HalfStoppedPair(MockJob):
    """A ComposableJob of one member whose stop fails after stopping it."""

    async def load(self, client: Client, key: ObjectKey) -> bool:
        self.obj.clear()
        self.obj.update(await client.get(JOB_GVK, key.name, namespace=key.namespace))
        return False

    async def run(self, client: Client, wl: Workload, pod_sets_info: Sequence[PodSetInfo],
                  recorder: EventRecorder, msg: str) -> None:
        raise AssertionError("not run")

    async def construct_composable_workload(
        self, client: Client, recorder: EventRecorder, label_keys_to_copy: frozenset[str],
        annotations_to_copy: frozenset[str],
    ) -> Workload:
        raise AssertionError("not constructed")

    async def list_child_workloads(self, client: Client, parent: ObjectKey) -> list[Workload]:
        listed = await client.list(WORKLOAD, namespace=parent.namespace)
        return [Workload.from_dict(o) for o in listed.items]

    async def find_matching_workloads(
        self, client: Client, recorder: EventRecorder
    ) -> tuple[Workload | None, list[Workload]]:
        [wl] = await self.list_child_workloads(client, ObjectKey.of(self.obj))
        return wl, []

    async def stop(self, client: Client, pod_sets_info: Sequence[PodSetInfo], stop_reason: str,
                   event_msg: str) -> list[Object]:
        self.obj["spec"]["suspend"] = True
        member = await client.update(self.obj)
        raise StopError(errors.new_conflict("jobs", "other", "stale", "batch"),
                        stopped=[member])

    def for_each(self, f: Callable[[Object], None]) -> None:
        f(self.obj)

    async def ensure_workload_owned_by_all_members(
        self, client: Client, recorder: EventRecorder, wl: Workload
    ) -> None:
        raise AssertionError("not prebuilt")

    async def equivalent_to_workload(self, client: Client, wl: Workload) -> bool:
        return True


async def test_composable_stop_error_records_stopped_for_the_stopped_members() -> None:
    w = World()
    await w.create_job(suspend=False)
    await w.create_workload(status=admitted_status(w, evicted=("Preempted", "preempted")))
    job = HalfStoppedPair()
    assert isinstance(job, ComposableJob)
    with pytest.raises(errors.Conflict):
        await w.reconcile(job)
    assert w.recorder.events == [("Normal", "Stopped", "preempted")]
    assert w.job()["spec"]["suspend"] is True


def test_stop_error_carries_its_parts() -> None:
    err = errors.InternalError("boom")
    wrapped = StopError(err, stopped_now=True)
    assert (wrapped.error, wrapped.stopped_now, wrapped.stopped, str(wrapped)) == (
        err, True, [], "boom")


@pytest.mark.parametrize("error", [
    *RESET_FAILURES,
    pytest.param(errors.from_status({"kind": "Status", "status": "Failure", "code": 422,
                                     "reason": "Invalid", "message": "bad",
                                     "details": {"causes": [{"field": "spec"}]}}),
                 id="Invalid-from-server"),
])
def test_wrap_keeps_the_class_and_the_servers_answer(error: errors.ApiError) -> None:
    try:
        raise error
    except errors.ApiError as raised:
        wrapped = errors.wrap("reset status", raised)
    assert type(wrapped) is type(error)
    assert (wrapped.message, str(wrapped)) == (f"reset status: {error.message}",) * 2
    assert (wrapped.code, wrapped.reason, wrapped.details, wrapped.status) == (
        error.code, error.reason, error.details, error.status)
    assert wrapped.__cause__ is error and wrapped.__traceback__ is None
    assert error.message == str(error) != wrapped.message  # the original is untouched
