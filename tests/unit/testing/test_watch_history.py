"""Watch specifics of the in-memory server: bounded history, bookmarks, timeouts, faults."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.runtime.client import WatchEvent
from jobframework.testing import APIServer, InMemoryClient, ManualClock

from .conftest import CONFIGMAP, WIDGET, configmap, turns, widget


async def collect(stream: AsyncIterator[WatchEvent], into: list[WatchEvent]) -> None:
    async for event in stream:
        into.append(event)


async def test_history_evicts_and_then_reports_gone(client: InMemoryClient) -> None:
    first = await client.create(configmap("cm", v="0"))
    start_rv = first["metadata"]["resourceVersion"]
    for i in range(60):  # history holds 50 events per resource
        await client.patch(CONFIGMAP, "cm", {"data": {"v": str(i + 1)}}, namespace="default")
    stream = client.watch(CONFIGMAP, namespace="default", resource_version=start_rv)
    with pytest.raises(errors.Gone) as exc:
        await stream.__anext__()
    assert exc.value.message.startswith(f"too old resource version: {start_rv} (")
    oldest_kept = int(exc.value.message.rsplit("(", 1)[1].rstrip(")"))
    assert oldest_kept > int(start_rv)
    # Resuming from the oldest rv still covered works and replays exactly what is kept.
    ok = client.watch(CONFIGMAP, namespace="default", resource_version=str(oldest_kept))
    event = await ok.__anext__()
    assert int(event.object["metadata"]["resourceVersion"]) == oldest_kept + 1
    await ok.aclose()  # type: ignore[attr-defined]


async def test_history_is_per_resource(client: InMemoryClient) -> None:
    w = await client.create(widget("w"))
    for i in range(60):
        await client.create(configmap(f"cm{i}"))
    stream = client.watch(WIDGET, namespace="default",
                          resource_version=w["metadata"]["resourceVersion"])
    await client.patch(WIDGET, "w", {"spec": {"a": 1}}, namespace="default")
    event = await stream.__anext__()
    assert event.type == "MODIFIED"
    await stream.aclose()  # type: ignore[attr-defined]


async def test_compact_makes_every_older_rv_gone(server: APIServer,
                                                 client: InMemoryClient) -> None:
    created = await client.create(configmap("cm"))
    await client.create(configmap("cm-b"))
    server.faults.compact()
    with pytest.raises(errors.Gone):
        await client.watch(CONFIGMAP, resource_version=created["metadata"][
            "resourceVersion"]).__anext__()
    # From the current rv it is fine.
    stream = client.watch(CONFIGMAP, resource_version=server.resource_version)
    await client.create(configmap("cm2"))
    assert (await stream.__anext__()).object["metadata"]["name"] == "cm2"
    await stream.aclose()  # type: ignore[attr-defined]


async def test_expire_next_watch_fails_once(server: APIServer, client: InMemoryClient) -> None:
    server.faults.expire_next_watch()
    rv = server.resource_version
    with pytest.raises(errors.Gone):
        await client.watch(CONFIGMAP, resource_version=rv).__anext__()
    stream = client.watch(CONFIGMAP, resource_version=rv)
    await client.create(configmap("cm"))
    assert (await stream.__anext__()).type == "ADDED"
    await stream.aclose()  # type: ignore[attr-defined]


async def test_drop_watches_ends_streams(server: APIServer, client: InMemoryClient) -> None:
    events: list[WatchEvent] = []
    task = asyncio.ensure_future(collect(
        client.watch(CONFIGMAP, resource_version=server.resource_version,
                     allow_bookmarks=False), events))
    await turns()
    await client.create(configmap("a"))
    await turns()
    assert server.faults.drop_watches() == 1
    await asyncio.wait_for(task, 1)
    assert [e.object["metadata"]["name"] for e in events] == ["a"]


async def test_bookmarks_follow_the_clock(clock: ManualClock, server: APIServer,
                                          client: InMemoryClient) -> None:
    events: list[WatchEvent] = []
    task = asyncio.ensure_future(collect(
        client.watch(CONFIGMAP, resource_version=server.resource_version), events))
    await turns()
    assert events == []
    clock.advance(0.5)
    await turns()
    assert events == []
    clock.advance(0.5)
    await turns()
    assert [e.type for e in events] == ["BOOKMARK"]
    assert events[0].object == {"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"resourceVersion": server.resource_version}}
    await client.create(configmap("a"))
    clock.advance(1.0)
    await turns()
    assert [e.type for e in events] == ["BOOKMARK", "ADDED", "BOOKMARK"]
    # A bookmark never claims an rv below an event it follows.
    assert int(events[2].object["metadata"]["resourceVersion"]) >= int(
        events[1].object["metadata"]["resourceVersion"])
    server.faults.drop_watches()
    await task


async def test_no_bookmarks_unless_allowed(clock: ManualClock, server: APIServer,
                                           client: InMemoryClient) -> None:
    events: list[WatchEvent] = []
    task = asyncio.ensure_future(collect(
        client.watch(CONFIGMAP, resource_version=server.resource_version,
                     allow_bookmarks=False, timeout_seconds=10), events))
    await turns()
    for _ in range(9):
        clock.advance(1)
        await turns()
    assert events == []
    assert not task.done()
    clock.advance(1)
    await turns()
    assert task.done()


async def test_watch_events_are_copies(server: APIServer, client: InMemoryClient) -> None:
    stream = client.watch(CONFIGMAP, namespace="default",
                          resource_version=server.resource_version, allow_bookmarks=False)
    other = client.watch(CONFIGMAP, namespace="default",
                         resource_version=server.resource_version, allow_bookmarks=False)
    await client.create(configmap("a", k="v"))
    first = await stream.__anext__()
    first.object["data"]["k"] = "mutated"
    second = await other.__anext__()
    assert second.object["data"]["k"] == "v"
    got = await client.get(CONFIGMAP, "a", namespace="default")
    assert got["data"]["k"] == "v"
    for s in (stream, other):
        await s.aclose()  # type: ignore[attr-defined]


async def test_watch_in_other_version_rewrites_api_version(
    server: APIServer, client: InMemoryClient,
) -> None:
    from jobframework.runtime.objects import GVK

    beta = GVK("example.com", "v1beta1", "Widget")
    stream = client.watch(beta, namespace="default", resource_version=server.resource_version)
    await client.create(widget("w"))
    event = await stream.__anext__()
    assert event.object["apiVersion"] == "example.com/v1beta1"
    got = await client.get(beta, "w", namespace="default")
    assert got["apiVersion"] == "example.com/v1beta1"
    await stream.aclose()  # type: ignore[attr-defined]


async def test_finalized_delete_emits_modified_then_deleted(
    server: APIServer, client: InMemoryClient,
) -> None:
    obj: dict[str, Any] = widget("w")
    obj["metadata"]["finalizers"] = ["x/y"]
    stream = client.watch(WIDGET, namespace="default", resource_version=server.resource_version)
    await client.create(obj)
    await client.delete(WIDGET, "w", namespace="default")
    held = await client.get(WIDGET, "w", namespace="default")
    held["metadata"]["finalizers"] = []
    await client.update(held)
    types = [(await stream.__anext__()).type for _ in range(3)]
    assert types == ["ADDED", "MODIFIED", "DELETED"]
    await stream.aclose()  # type: ignore[attr-defined]


async def test_invalid_resource_version_is_bad_request(client: InMemoryClient) -> None:
    with pytest.raises(errors.BadRequest):
        await client.watch(CONFIGMAP, resource_version="abc").__anext__()


async def test_watch_from_a_future_rv_skips_events_up_to_it(
    server: APIServer, client: InMemoryClient,
) -> None:
    future = int(server.resource_version) + 2
    stream = client.watch(CONFIGMAP, resource_version=str(future), allow_bookmarks=False)
    task = asyncio.ensure_future(stream.__anext__())
    await turns()
    for name in ("a", "b", "c"):
        await client.create(configmap(name))
    event = await asyncio.wait_for(task, 1)
    assert event.object["metadata"]["name"] == "c"
    await stream.aclose()  # type: ignore[attr-defined]


async def test_delayed_events_arrive_late_and_hold_back_bookmarks(
    clock: ManualClock, server: APIServer, client: InMemoryClient,
) -> None:
    events: list[WatchEvent] = []
    task = asyncio.ensure_future(collect(
        client.watch(CONFIGMAP, resource_version=server.resource_version), events))
    await turns()
    server.faults.delay_events(5.0, gvk=CONFIGMAP)
    created = await client.create(configmap("late"))
    await client.create(widget("on-time"))  # other kinds are not delayed
    clock.advance(1.0)
    await turns()
    # A bookmark came, but it does not claim the undelivered write's rv.
    assert [e.type for e in events] == ["BOOKMARK"]
    assert int(events[0].object["metadata"]["resourceVersion"]) < int(
        created["metadata"]["resourceVersion"])
    clock.advance(4.0)
    await turns()
    assert [e.type for e in events if e.type != "BOOKMARK"] == ["ADDED"]
    server.faults.delay_events(0, gvk=CONFIGMAP)
    await client.create(configmap("prompt"))
    await turns()
    assert events[-1].object["metadata"]["name"] == "prompt"
    server.faults.drop_watches()
    await task
