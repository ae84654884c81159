"""Contract: watch from a resourceVersion, selectors, bookmarks, timeouts, 410 Gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from jobframework.runtime import errors
from jobframework.runtime.client import WatchEvent

from .conftest import WIDGET, Backend


async def next_event(stream: AsyncIterator[WatchEvent], *, bookmarks: bool = False) -> WatchEvent:
    """The next event (skipping bookmarks unless asked), failing after a while."""
    while True:
        event = await asyncio.wait_for(stream.__anext__(), timeout=5)
        if bookmarks or event.type != "BOOKMARK":
            return event


async def test_watch_from_list_resource_version_sees_later_writes(widgets: Backend) -> None:
    await widgets.client.create(widgets.widget("before"))
    listed = await widgets.client.list(WIDGET, namespace=widgets.namespace)
    stream = widgets.client.watch(WIDGET, namespace=widgets.namespace,
                                  resource_version=listed.resource_version)
    try:
        created = await widgets.client.create(widgets.widget("w1", size=1))
        event = await next_event(stream)
        assert event.type == "ADDED"
        assert event.object["metadata"]["name"] == "w1"
        assert event.object["metadata"]["resourceVersion"] == created["metadata"][
            "resourceVersion"]
        created["spec"]["size"] = 2
        updated = await widgets.client.update(created)
        event = await next_event(stream)
        assert event.type == "MODIFIED"
        assert event.object["spec"]["size"] == 2
        assert event.object["metadata"]["resourceVersion"] == updated["metadata"][
            "resourceVersion"]
        await widgets.client.delete(WIDGET, "w1", namespace=widgets.namespace)
        event = await next_event(stream)
        assert event.type == "DELETED"
        assert event.object["metadata"]["name"] == "w1"
        assert event.object["spec"]["size"] == 2
        assert int(event.object["metadata"]["resourceVersion"]) > int(
            updated["metadata"]["resourceVersion"])
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_watch_replays_history_after_resource_version(widgets: Backend) -> None:
    first = await widgets.client.create(widgets.widget("w1", size=1))
    await widgets.client.update(dict(first, spec={"size": 2}))
    await widgets.client.create(widgets.widget("w2"))
    stream = widgets.client.watch(WIDGET, namespace=widgets.namespace,
                                  resource_version=first["metadata"]["resourceVersion"])
    try:
        seen = [(e.type, e.object["metadata"]["name"])
                for e in [await next_event(stream), await next_event(stream)]]
        assert seen == [("MODIFIED", "w1"), ("ADDED", "w2")]
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_watch_without_resource_version_starts_with_current_state(
    widgets: Backend,
) -> None:
    await widgets.client.create(widgets.widget("a"))
    await widgets.client.create(widgets.widget("b"))
    stream = widgets.client.watch(WIDGET, namespace=widgets.namespace)
    try:
        names = sorted([(await next_event(stream)).object["metadata"]["name"],
                        (await next_event(stream)).object["metadata"]["name"]])
        assert names == ["a", "b"]
        await widgets.client.create(widgets.widget("c"))
        event = await next_event(stream)
        assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "c")
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_watch_label_selector_turns_unmatching_into_deleted(widgets: Backend) -> None:
    listed = await widgets.client.list(WIDGET, namespace=widgets.namespace)
    stream = widgets.client.watch(WIDGET, namespace=widgets.namespace,
                                  label_selector="pick=yes",
                                  resource_version=listed.resource_version)
    try:
        obj = widgets.widget("w1")
        obj["metadata"]["labels"] = {"pick": "no"}
        obj = await widgets.client.create(obj)
        obj["metadata"]["labels"] = {"pick": "yes"}
        obj = await widgets.client.update(obj)
        event = await next_event(stream)
        assert event.type == "ADDED"
        assert event.object["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
        obj["metadata"]["labels"] = {"pick": "no"}
        obj = await widgets.client.update(obj)
        event = await next_event(stream)
        assert event.type == "DELETED"
        assert event.object["metadata"]["name"] == "w1"
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_watch_field_selector_on_name(widgets: Backend) -> None:
    listed = await widgets.client.list(WIDGET, namespace=widgets.namespace)
    stream = widgets.client.watch(WIDGET, namespace=widgets.namespace,
                                  field_selector="metadata.name=target",
                                  resource_version=listed.resource_version)
    try:
        await widgets.client.create(widgets.widget("other"))
        await widgets.client.create(widgets.widget("target"))
        event = await next_event(stream)
        assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "target")
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_watch_from_too_old_resource_version_is_gone(widgets: Backend) -> None:
    stream = widgets.client.watch(WIDGET, namespace=widgets.namespace, resource_version="1")
    with pytest.raises(errors.Gone) as exc:
        await next_event(stream)
    assert exc.value.code == 410
    assert exc.value.message.startswith("too old resource version: 1 (")


async def test_watch_timeout_ends_stream_with_bookmarks(widgets: Backend) -> None:
    listed = await widgets.client.list(WIDGET, namespace=widgets.namespace)
    # Only labelled Widgets are watched, so the unlabelled one created below moves the
    # resource version without an event: kube-apiserver sends its bookmarks (one before
    # the timeout among them) only once the resource version has moved past the watch's.
    stream = widgets.client.watch(WIDGET, namespace=widgets.namespace,
                                  label_selector="contract=watched",
                                  resource_version=listed.resource_version,
                                  allow_bookmarks=True, timeout_seconds=5)
    events: list[WatchEvent] = []

    async def drain() -> None:
        async for event in stream:
            events.append(event)

    task = asyncio.ensure_future(drain())
    await widgets.advance(1)
    await widgets.client.create(widgets.widget("progress", size=1))
    await widgets.advance(5)
    # The stream ends by itself at the timeout.
    await asyncio.wait_for(task, timeout=10)
    assert [e.type for e in events if e.type != "BOOKMARK"] == []
    bookmarks = [e for e in events if e.type == "BOOKMARK"]
    assert bookmarks, "expected at least one BOOKMARK before the timeout"
    for event in bookmarks:
        assert event.object["kind"] == "Widget"
        assert int(event.object["metadata"]["resourceVersion"]) >= int(
            listed.resource_version)
