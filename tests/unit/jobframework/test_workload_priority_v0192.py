"""Kueue v0.19.2 ``pkg/controller/jobframework/workload_priority_test.go``
(``TestUpdateWorkloadPriority``) against :func:`jobframework.reconciler.update_workload_priority`.

Each case's pytest id is ``TestUpdateWorkloadPriority/<Go case name>``. The job is ``ns/job``
labelled with the WorkloadPriorityClass ``high``; the helper is invoked once per step on
Workloads read afresh from the in-memory API server (as a reconcile would), and the stored
Workloads are checked afterwards. Reads of the class and Workload writes go through a
counting client wrapper, which can also alter what a read returns or fail a write (Kueue's
interceptor funcs).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from integrations.batchjob import BatchJob
from jobframework import constants as c
from jobframework.api import Workload
from jobframework.reconciler import ReconcileError, update_workload_priority
from jobframework.runtime import errors
from jobframework.runtime.objects import GVK, Object

from ..batchjob.helpers import WORKLOAD, WPC, World, base_job, cond

GO = "TestUpdateWorkloadPriority"


@dataclass
class Stats:
    class_reads: int = 0
    workload_writes: int = 0


@dataclass
class Interceptors:
    """What the wrapper does on top of the real client (``interceptor.Funcs``)."""
    #: Called after the class ``high`` was read, with the stats and the object read.
    on_class_read: Callable[[Stats, Object], None] | None = None
    #: Called before a Workload update; an exception it raises fails the write.
    on_workload_update: Callable[[Stats, Object], None] | None = None


class CountingClient:
    """Delegates to the in-memory client, counting class reads and Workload writes."""

    def __init__(self, inner: Any, stats: Stats, icpt: Interceptors) -> None:
        self._inner = inner
        self._stats = stats
        self._icpt = icpt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def get(self, gvk: GVK, name: str, **kwargs: Any) -> Object:
        obj: Object = await self._inner.get(gvk, name, **kwargs)
        if gvk == WPC and name == "high":
            self._stats.class_reads += 1
            if self._icpt.on_class_read is not None:
                self._icpt.on_class_read(self._stats, obj)
        return obj

    async def update(self, obj: Object, **kwargs: Any) -> Object:
        if obj.get("kind") == "Workload":
            self._stats.workload_writes += 1
            if self._icpt.on_workload_update is not None:
                self._icpt.on_workload_update(self._stats, obj)
        result: Object = await self._inner.update(obj, **kwargs)
        return result


@dataclass
class Step:
    before: Callable[[World], Awaitable[None]] | None = None
    want_error: bool = False


@dataclass
class Case:
    class_value: int
    workloads: list[Object]
    steps: list[Step]
    #: name -> (priorityClassRef name or None if not asserted, priority or None)
    want: dict[str, tuple[str | None, int | None]]
    icpt: Interceptors = field(default_factory=Interceptors)
    want_class_reads: int | None = None
    want_workload_writes: int | None = None
    want_distinct_refs: bool = False


def wl(name: str, ref: str | None = None, priority: int | None = None) -> Object:
    obj: Object = {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
                   "metadata": {"name": name, "namespace": "ns"},
                   "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {
                       "containers": [{"name": "c", "image": "i"}]}}}]}}
    if ref is not None:
        obj["spec"]["priorityClassRef"] = {"group": c.WORKLOAD_PRIORITY_CLASS_GROUP,
                                           "kind": c.WORKLOAD_PRIORITY_CLASS_KIND,
                                           "name": ref}
    if priority is not None:
        obj["spec"]["priority"] = priority
    return obj


def every_read_differs(stats: Stats, obj: Object) -> None:
    obj["value"] = 100 * stats.class_reads


def fail_second_once() -> Callable[[Stats, Object], None]:
    armed = [True]

    def hook(stats: Stats, obj: Object) -> None:
        if obj["metadata"]["name"] == "second" and armed[0]:
            armed[0] = False
            raise errors.Conflict("simulated conflict")
    return hook


def fail_second_write(stats: Stats, obj: Object) -> None:
    if stats.workload_writes == 2:
        raise errors.Conflict("simulated conflict")


def raise_class_to(value: int) -> Callable[[World], Awaitable[None]]:
    async def before(w: World) -> None:
        current = await w.client.get(WPC, "high")
        current["value"] = value
        await w.client.update(current)
    return before


def reserved(name: str) -> Object:
    obj = wl(name)
    obj["status"] = {"conditions": [cond("QuotaReserved", "True", "AdmittedByTest", "reserved",
                                         "2026-01-02T03:04:05Z")]}
    return obj


CASES = [
    pytest.param(Case(
        class_value=100,
        workloads=[wl("first", "low", 10), wl("second", "low", 10)],
        icpt=Interceptors(on_class_read=every_read_differs),
        steps=[Step()],
        want={"first": ("high", 100), "second": ("high", 100)},
        want_class_reads=1, want_distinct_refs=True,
    ), id=f"{GO}/resolves the class once for the whole set"),
    pytest.param(Case(
        class_value=100,
        workloads=[reserved("reserved")],
        steps=[Step()],
        want={"reserved": ("", None)},
        want_workload_writes=0,
    ), id=f"{GO}/leaves a quota-reserved workload with no priority class alone"),
    pytest.param(Case(
        class_value=200,
        workloads=[wl("first", "high", 100), wl("second", "low", 10)],
        steps=[Step()],
        want={"first": ("high", 200), "second": ("high", 200)},
        want_class_reads=1,
    ), id=f"{GO}/converges a workload that already names the class but holds a stale value"),
    pytest.param(Case(
        class_value=100,
        workloads=[wl("first", "low", 10), wl("second", "low", 10)],
        icpt=Interceptors(on_workload_update=fail_second_once()),
        steps=[Step(want_error=True), Step(before=raise_class_to(200))],
        want={"first": ("high", 200), "second": ("high", 200)},
    ), id=f"{GO}/converges after a conflict when the class value changes before the retry"),
    pytest.param(Case(
        class_value=200,
        workloads=[wl("stale", "high", 100), wl("transitioning", "low", 10)],
        icpt=Interceptors(on_workload_update=fail_second_write),
        steps=[Step(want_error=True), Step()],
        want={"stale": (None, 200), "transitioning": (None, 200)},
    ), id=f"{GO}/keeps a retry marker when a write fails"),
]


@pytest.mark.parametrize("case", CASES)
async def test_update_workload_priority(case: Case) -> None:
    w = World()
    await w.setup()
    await w.wpc("high", case.class_value)
    job = base_job()
    job["metadata"]["labels"][c.WORKLOAD_PRIORITY_CLASS_LABEL] = "high"
    job = await w.create_job(job)
    names = []
    for obj in case.workloads:
        await w.create_workload(obj)
        names.append(obj["metadata"]["name"])
    stats = Stats()
    client = CountingClient(w.client, stats, case.icpt)

    live: list[Workload] = []
    for step in case.steps:
        if step.before is not None:
            await step.before(w)
        live = [Workload.from_dict(await w.client.get(WORKLOAD, n, namespace="ns")) for n in names]
        if step.want_error:
            with pytest.raises(ReconcileError):
                await update_workload_priority(client, w.recorder, BatchJob(job), live)
        else:
            await update_workload_priority(client, w.recorder, BatchJob(job), live)

    for name, (ref_name, priority) in case.want.items():
        spec = w.workload(name)["spec"]
        if ref_name is not None:
            assert (spec.get("priorityClassRef") or {}).get("name", "") == ref_name, name
        if priority is not None:
            assert spec.get("priority") == priority, name
    if case.want_class_reads is not None:
        assert stats.class_reads == case.want_class_reads
    if case.want_workload_writes is not None:
        assert stats.workload_writes == case.want_workload_writes
    if case.want_distinct_refs:
        first, second = live[0].spec.priority_class_ref, live[1].spec.priority_class_ref
        assert first is not None
        assert second is not None
        assert first is not second
