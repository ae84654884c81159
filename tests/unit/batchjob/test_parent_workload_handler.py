"""The batch Job controller's watch of Workloads (Kueue's ``parentWorkloadHandler``):
a Workload's create and the new state of its updates reconcile the child Jobs of the
Workload's owner; deletes do not; the informer hands it its stored objects."""

from __future__ import annotations

import asyncio
from typing import Any

from integrations.batchjob.setup import _OnWorkloadCreateOrUpdate, watch_child_jobs
from jobframework.runtime.reconcile import Request
from jobframework.runtime.source import CreateEvent, DeleteEvent, Kind, UpdateEvent
from jobframework.workload import WORKLOAD_GVK


def workload(owner_uid: str | None) -> dict[str, Any]:
    refs = [] if owner_uid is None else [{"apiVersion": "jobset.x-k8s.io/v1alpha2",
                                         "kind": "JobSet", "name": owner_uid,
                                         "uid": owner_uid, "controller": True}]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "wl", "namespace": "ns", "ownerReferences": refs}}


class Queue:
    def __init__(self) -> None:
        self.added: list[Request] = []

    def add(self, item: Request) -> None:
        self.added.append(item)


async def test_the_new_state_of_an_update_is_mapped_and_deletes_are_ignored() -> None:
    asked: list[str | None] = []

    async def children(uid: str) -> list[Request]:
        return [Request.of("ns", f"child-of-{uid}")]

    def fn(wl: dict[str, Any]) -> Any:
        refs = wl["metadata"]["ownerReferences"]
        asked.append(refs[0]["uid"] if refs else None)
        return children(refs[0]["uid"]) if refs else []

    handler = _OnWorkloadCreateOrUpdate(fn, read_only=True)
    q = Queue()
    handler.create(CreateEvent(workload("a")), q)  # type: ignore[arg-type]
    handler.update(UpdateEvent(workload("old"), workload("new")), q)  # type: ignore[arg-type]
    handler.delete(DeleteEvent(workload("gone")), q)  # type: ignore[arg-type]
    handler.update(UpdateEvent(workload(None), workload(None)), q)  # type: ignore[arg-type]
    for _ in range(5):
        await asyncio.sleep(0)
    assert asked == ["a", "new", None]
    assert q.added == [Request.of("ns", "child-of-a"), Request.of("ns", "child-of-new")]


async def test_the_watch_registers_for_uncopied_objects() -> None:
    options: list[dict[str, Any]] = []

    class Informer:
        def add_event_handler(self, *handlers: Any, **kwargs: Any) -> None:
            options.append(kwargs)

    class Cache:
        def get_informer(self, gvk: Any) -> Informer:
            return Informer()

    class Builder:
        def watches(self, gvk: Any, handler: Any) -> Any:
            self.watched = (gvk, handler)
            return self

    builder = Builder()
    watch_child_jobs(builder, client=None)  # type: ignore[arg-type]
    gvk, handler = builder.watched
    assert gvk == WORKLOAD_GVK and isinstance(handler, _OnWorkloadCreateOrUpdate)
    await Kind(Cache(), gvk, handler).start(Queue())  # type: ignore[arg-type]
    assert options == [{"read_only": True}]
    # A Workload without an owner costs no cache read and no task.
    assert handler.fn(workload(None)) == []
