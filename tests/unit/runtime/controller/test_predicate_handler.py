"""Predicates filter events; handlers map events to requests."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jobframework.runtime.clock import ManualClock
from jobframework.runtime.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
)
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.predicate import (
    AnnotationChangedPredicate,
    Funcs,
    GenerationChangedPredicate,
    LabelChangedPredicate,
    LabelSelectorPredicate,
    ResourceVersionChangedPredicate,
    and_,
    new_predicate_funcs,
    not_,
    or_,
)
from jobframework.runtime.reconcile import Request
from jobframework.runtime.source import (
    Channel,
    CreateEvent,
    DeleteEvent,
    GenericEvent,
    Kind,
    UpdateEvent,
)
from jobframework.runtime.workqueue import RateLimitingQueue

from .helpers import settle, until

JOB = GVK("batch", "v1", "Job")


def obj(name: str = "a", ns: str = "ns", *, gen: int = 1, rv: str = "1",
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        owners: list[dict[str, Any]] | None = None) -> Object:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "generation": gen,
                            "resourceVersion": rv}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def drain(q: RateLimitingQueue[Request]) -> list[Request]:
    out = []
    while len(q):
        item = q.get_nowait()
        q.done(item)
        out.append(item)
    return out


def queue() -> RateLimitingQueue[Request]:
    return RateLimitingQueue(clock=ManualClock())


# -- predicates ----------------------------------------------------------------------


def test_generation_changed_ignores_status_only_updates() -> None:
    p = GenerationChangedPredicate()
    assert not p.update(UpdateEvent(obj(gen=1, rv="1"), obj(gen=1, rv="2")))
    assert p.update(UpdateEvent(obj(gen=1), obj(gen=2)))
    assert p.create(CreateEvent(obj()))
    assert p.delete(DeleteEvent(obj()))
    assert p.generic(GenericEvent(obj()))
    assert not p.update(UpdateEvent({}, obj())), "no metadata: filtered"


def test_label_annotation_and_rv_predicates() -> None:
    assert LabelChangedPredicate().update(UpdateEvent(obj(labels={"a": "1"}),
                                                      obj(labels={"a": "2"})))
    assert not LabelChangedPredicate().update(UpdateEvent(obj(labels={"a": "1"}),
                                                          obj(labels={"a": "1"}, gen=3)))
    assert LabelChangedPredicate().update(UpdateEvent(obj(), obj(labels={"a": "1"})))
    assert AnnotationChangedPredicate().update(
        UpdateEvent(obj(annotations={"x": "1"}), obj(annotations={})))
    assert not AnnotationChangedPredicate().update(
        UpdateEvent(obj(annotations={"x": "1"}), obj(annotations={"x": "1"}, rv="9")))
    assert ResourceVersionChangedPredicate().update(UpdateEvent(obj(rv="1"), obj(rv="2")))
    assert not ResourceVersionChangedPredicate().update(UpdateEvent(obj(rv="1"), obj(rv="1")))


def test_combinators_and_funcs() -> None:
    gen = GenerationChangedPredicate()
    lab = LabelChangedPredicate()
    only_labels = UpdateEvent(obj(labels={"a": "1"}), obj(labels={"a": "2"}))
    only_gen = UpdateEvent(obj(gen=1), obj(gen=2))
    assert or_(gen, lab).update(only_labels)
    assert or_(gen, lab).update(only_gen)
    assert not and_(gen, lab).update(only_labels)
    assert not_(gen).update(only_labels)
    assert not or_().create(CreateEvent(obj()))
    assert and_().create(CreateEvent(obj()))
    no_deletes = Funcs(delete=lambda e: False)
    assert no_deletes.create(CreateEvent(obj())) and not no_deletes.delete(DeleteEvent(obj()))
    named_b = new_predicate_funcs(lambda o: o["metadata"]["name"] == "b")
    assert named_b.update(UpdateEvent(obj("a"), obj("b")))
    assert not named_b.create(CreateEvent(obj("a")))
    sel = LabelSelectorPredicate("team=x")
    assert sel.create(CreateEvent(obj(labels={"team": "x"})))
    assert not sel.delete(DeleteEvent(obj(labels={"team": "y"})))


# -- handlers ------------------------------------------------------------------------


def test_enqueue_for_object() -> None:
    q = queue()
    h = EnqueueRequestForObject()
    h.create(CreateEvent(obj("a")), q)
    h.update(UpdateEvent(obj("a"), obj("a", rv="2")), q)
    h.delete(DeleteEvent(obj("b")), q)
    h.generic(GenericEvent(obj("c", ns="")), q)
    assert drain(q) == [Request.of("ns", "a"), Request.of("ns", "b"), Request.of("", "c")]


def controller_ref(kind: str, name: str, *, api_version: str = "batch/v1",
                   controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
            "controller": controller}


def test_enqueue_for_owner_maps_only_the_controller_of_the_right_kind() -> None:
    q = queue()
    h = EnqueueRequestForOwner(JOB, owner_namespaced=True)
    child = obj("pod", owners=[
        controller_ref("Job", "not-controller", controller=False),
        controller_ref("ReplicaSet", "rs", api_version="apps/v1"),
        controller_ref("Job", "owner", api_version="batch/v2"),  # any version matches
    ])
    h.create(CreateEvent(child), q)
    assert drain(q) == [Request.of("ns", "owner")]
    all_owners = EnqueueRequestForOwner(JOB, only_controller=False, owner_namespaced=True)
    all_owners.create(CreateEvent(child), q)
    assert set(drain(q)) == {Request.of("ns", "owner"), Request.of("ns", "not-controller")}


def test_enqueue_for_owner_update_enqueues_old_and_new_owner() -> None:
    q = queue()
    h = EnqueueRequestForOwner(JOB)
    old = obj("pod", owners=[controller_ref("Job", "j1")])
    new = obj("pod", owners=[controller_ref("Job", "j2")])
    h.update(UpdateEvent(old, new), q)
    assert drain(q) == [Request.of("ns", "j1"), Request.of("ns", "j2")]


async def test_enqueue_for_cluster_scoped_owner_resolved_through_mapper() -> None:
    class Mapper:
        async def rest_mapping(self, gvk: GVK) -> Any:
            class M:
                namespaced = False
            return M()

    q = queue()
    h = EnqueueRequestForOwner(GVK("", "v1", "Node"))
    await h.resolve(Mapper())  # type: ignore[arg-type]
    h.create(CreateEvent(obj("pod", owners=[controller_ref("Node", "n1", api_version="v1")])),
             q)
    assert drain(q) == [Request.of("", "n1")]


async def test_map_func_sync_and_async() -> None:
    q = queue()
    h = EnqueueRequestsFromMapFunc(
        lambda o: [Request.of("other", o["metadata"]["name"] + "-x")])
    h.update(UpdateEvent(obj("a"), obj("b")), q)
    assert drain(q) == [Request.of("other", "a-x"), Request.of("other", "b-x")]

    async def amap(o: Object) -> list[Request]:
        await asyncio.sleep(0)
        return [Request.of("async", o["metadata"]["name"])]

    ha = EnqueueRequestsFromMapFunc(amap)
    ha.create(CreateEvent(obj("c")), q)
    await until(lambda: len(q) == 1)
    assert drain(q) == [Request.of("async", "c")]

    def broken(o: Object) -> list[Request]:
        raise RuntimeError("bad map")

    EnqueueRequestsFromMapFunc(broken).create(CreateEvent(obj()), q)  # logged, not raised
    assert drain(q) == []


# -- sources -------------------------------------------------------------------------


class FakeInformer:
    def __init__(self) -> None:
        self.handlers: list[tuple[Any, Any, Any]] = []
        self.options: list[dict[str, Any]] = []
        self.synced = asyncio.Event()

    def add_event_handler(self, on_add: Any, on_update: Any, on_delete: Any,
                          **options: Any) -> None:
        self.handlers.append((on_add, on_update, on_delete))
        self.options.append(options)

    async def wait_for_sync(self) -> None:
        await self.synced.wait()


class FakeCache:
    def __init__(self) -> None:
        self.informers: dict[GVK, FakeInformer] = {}

    async def get_informer(self, gvk: GVK) -> FakeInformer:
        return self.informers.setdefault(gvk, FakeInformer())


class Tombstone:
    def __init__(self, key: str, obj: Object) -> None:
        self.key = key
        self.obj = obj


async def test_kind_source_applies_predicates_and_unwraps_tombstones() -> None:
    cache = FakeCache()
    seen: list[DeleteEvent] = []

    class Recording(EnqueueRequestForObject):
        def delete(self, event: DeleteEvent, queue: RateLimitingQueue[Request]) -> None:
            seen.append(event)
            super().delete(event, queue)

    src = Kind(cache, JOB, Recording(), GenerationChangedPredicate())
    q = queue()
    await src.start(q)
    on_add, on_update, on_delete = cache.informers[JOB].handlers[0]
    on_add(obj("a"))
    on_update(obj("b", gen=1), obj("b", gen=1, rv="5"))  # status-only: filtered
    on_update(obj("c", gen=1), obj("c", gen=2))
    on_delete(Tombstone("ns/d", obj("d")))
    assert drain(q) == [Request.of("ns", "a"), Request.of("ns", "c"), Request.of("ns", "d")]
    assert seen[0].delete_state_unknown
    waiter = asyncio.create_task(src.wait_for_sync())
    await settle()
    assert not waiter.done()
    cache.informers[JOB].synced.set()
    await asyncio.wait_for(waiter, 1)


async def test_kind_source_asks_for_uncopied_objects_only_when_nothing_writes() -> None:
    class Subclassed(EnqueueRequestForObject):
        def create(self, event: CreateEvent, queue: RateLimitingQueue[Request]) -> None:
            super().create(event, queue)

    cases: list[tuple[Any, tuple[Any, ...], bool]] = [
        (EnqueueRequestForObject(), (), True),
        (EnqueueRequestForOwner(JOB), (), True),
        (EnqueueRequestForObject(), (GenerationChangedPredicate(), LabelChangedPredicate(),
                                     AnnotationChangedPredicate(),
                                     ResourceVersionChangedPredicate(),
                                     LabelSelectorPredicate("a=b")), True),
        # Code of the user's might change what it is given: copies.
        (EnqueueRequestForObject(), (GenerationChangedPredicate(),
                                     Funcs(update=lambda e: True)), False),
        (EnqueueRequestsFromMapFunc(lambda o: []), (), False),
        (Subclassed(), (), False),
    ]
    for handler, predicates, read_only in cases:
        cache = FakeCache()
        await Kind(cache, JOB, handler, *predicates).start(queue())
        assert cache.informers[JOB].options == ([{"read_only": True}] if read_only else [{}])


async def test_kind_source_survives_a_failing_handler() -> None:
    cache = FakeCache()

    class Broken(EnqueueRequestForObject):
        def create(self, event: CreateEvent, queue: RateLimitingQueue[Request]) -> None:
            raise RuntimeError("handler bug")

    await Kind(cache, JOB, Broken()).start(queue())
    on_add, _, _ = cache.informers[JOB].handlers[0]
    on_add(obj())  # must not raise into the informer


async def test_channel_source_delivers_generic_events() -> None:
    events: asyncio.Queue[GenericEvent] = asyncio.Queue()
    src = Channel(events, EnqueueRequestForObject(),
                  new_predicate_funcs(lambda o: o["metadata"]["name"] != "skip"))
    q = queue()
    await src.start(q)
    events.put_nowait(GenericEvent(obj("skip")))
    events.put_nowait(GenericEvent(obj("x")))
    await until(lambda: len(q) == 1)
    await settle()
    assert drain(q) == [Request.of("ns", "x")]
    await src.stop()


@pytest.mark.parametrize("payload", [42, None])
def test_unknown_delete_payload_is_rejected(payload: object) -> None:
    from jobframework.runtime.source import _unwrap_tombstone

    with pytest.raises(TypeError):
        _unwrap_tombstone(payload)
