"""EventRecorder: events.k8s.io/v1 fields, series aggregation, spam filter, never raising."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from jobframework.runtime.clock import ManualClock, parse_time
from jobframework.runtime.events import EVENT_GVK, EventBroadcaster, EventRecorder
from jobframework.testing import APIServer

from .helpers import settle, tick, until

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "p1", "namespace": "default", "uid": "u-1",
                    "resourceVersion": "7"}}
JOB = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"name": "j1", "namespace": "default", "uid": "u-2"}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u-3"}}


@pytest.fixture
def server() -> APIServer:
    return APIServer(ManualClock())


async def events(server: APIServer) -> list[dict[str, Any]]:
    return (await server.client().list(EVENT_GVK, namespace="default")).items


def recorder(b: EventBroadcaster) -> EventRecorder:
    return b.new_recorder("kueue-jobframework", "kueue-jobframework-host1")


async def test_event_fields(server: APIServer) -> None:
    async with EventBroadcaster(server.client(), clock=server.clock) as b:
        recorder(b).event(POD, "Normal", "Started", "pod started", related=JOB)
        recorder(b).event(NODE, "Warning", "Pressure", "disk", action="Evicting")
        await b.flush()
    pod_ev, node_ev = sorted(await events(server), key=lambda e: e["reason"], reverse=True)
    assert pod_ev["metadata"]["name"].startswith("p1.")
    assert pod_ev["regarding"] == {"apiVersion": "v1", "kind": "Pod", "name": "p1",
                                   "namespace": "default", "uid": "u-1",
                                   "resourceVersion": "7"}
    assert pod_ev["related"]["kind"] == "Job" and pod_ev["related"]["name"] == "j1"
    assert pod_ev["note"] == "pod started"
    assert pod_ev["type"] == "Normal"
    assert pod_ev["reason"] == pod_ev["action"] == "Started"
    assert pod_ev["reportingController"] == "kueue-jobframework"
    assert pod_ev["reportingInstance"] == "kueue-jobframework-host1"
    assert parse_time(pod_ev["eventTime"]) == server.clock.now()
    assert "series" not in pod_ev
    assert node_ev["metadata"]["namespace"] == "default", "cluster-scoped: default namespace"
    assert node_ev["action"] == "Evicting"
    assert "namespace" not in node_ev["regarding"]


async def test_identical_events_aggregate_into_series(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    async with EventBroadcaster(server.client(), clock=clock) as b:
        rec = recorder(b)
        rec.event(POD, "Warning", "Failed", "boom")
        await b.flush()
        clock.advance(10)
        rec.event(POD, "Warning", "Failed", "boom")
        rec.event(POD, "Warning", "Failed", "boom")
        await b.flush()
        (ev,) = await events(server)
        assert ev["series"]["count"] == 3
        assert parse_time(ev["series"]["lastObservedTime"]) == clock.now()
        rec.eventf(POD, "Warning", "Failed", "boom %d", 2)  # different note: a new Event
        rec.event(POD, "Normal", "Failed", "boom")  # different type: a new Event
        await b.flush()
    assert len(await events(server)) == 3


async def test_series_update_recreates_an_expired_event(server: APIServer) -> None:
    async with EventBroadcaster(server.client(), clock=server.clock) as b:
        rec = recorder(b)
        rec.event(JOB, "Normal", "Created", "x")
        await b.flush()
        (ev,) = await events(server)
        await server.client().delete(EVENT_GVK, ev["metadata"]["name"], namespace="default")
        rec.event(JOB, "Normal", "Created", "x")
        await b.flush()
    (again,) = await events(server)
    assert again["series"]["count"] == 2


async def test_spam_filter_token_bucket_per_object(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    async with EventBroadcaster(server.client(), clock=clock) as b:
        rec = recorder(b)
        for i in range(30):
            rec.event(POD, "Normal", "Tick", f"message {i}")
        rec.event(JOB, "Normal", "Tick", "other object has its own bucket")
        await b.flush()
        assert b.dropped_rate_limited == 5
        assert len(await events(server)) == 26
        clock.advance(299)
        rec.event(POD, "Normal", "Tick", "still limited")
        clock.advance(1)
        rec.event(POD, "Normal", "Tick", "one token after 5 minutes")
        rec.event(POD, "Normal", "Tick", "and no more")
        await b.flush()
        assert b.dropped_rate_limited == 7
        notes = {e["note"] for e in await events(server)}
        assert "one token after 5 minutes" in notes and "and no more" not in notes


async def test_never_raises_and_retries_on_api_failure(
    server: APIServer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    rule = server.faults.fail("create", gvk=EVENT_GVK, error=500, times=2)
    async with EventBroadcaster(server.client(), clock=clock, retry_seconds=10) as b:
        rec = recorder(b)
        rec.event(POD, "Normal", "Started", "eventually written")
        await b.flush()
        assert await events(server) == []
        await tick(clock, 10)
        await b.flush()
        await tick(clock, 10)
        await b.flush()
        assert rule.hits == 2
        assert [e["note"] for e in await events(server)] == ["eventually written"]
        with caplog.at_level(logging.ERROR):
            rec.event(POD, "Bogus", "Started", "bad type")
            rec.event({"kind": "NoMetadata"}, "Normal", "X", "no object")
            rec.eventf(POD, "Normal", "Fmt", "%d %d", 1)  # bad format args: still recorded
        await b.flush()
        assert "unsupported event type" in caplog.text
        assert b.failed == 0


async def test_gives_up_after_max_attempts(server: APIServer) -> None:
    clock = server.clock
    assert isinstance(clock, ManualClock)
    server.faults.fail("create", gvk=EVENT_GVK, error=503, times=None)
    async with EventBroadcaster(server.client(), clock=clock, max_attempts=3,
                                retry_seconds=1) as b:
        recorder(b).event(POD, "Normal", "Started", "never written")
        for _ in range(5):
            await b.flush()
            await tick(clock, 1)
        assert b.failed == 1
    assert await events(server) == []


async def test_bounded_queue_drops_when_full(server: APIServer) -> None:
    b = EventBroadcaster(server.client(), clock=server.clock, queue_size=2)
    rec = recorder(b)
    for i in range(3):
        rec.event(POD, "Normal", "R", f"m{i}")  # not started: the queue fills up
    assert b.dropped_queue_full == 1
    b.start()
    await b.flush()
    await b.shutdown()
    assert len(await events(server)) == 2


async def test_shutdown_sends_what_is_queued(server: APIServer) -> None:
    b = EventBroadcaster(server.client(), clock=server.clock)
    b.start()
    recorder(b).event(POD, "Normal", "Bye", "sent on shutdown")
    await b.shutdown()
    await settle()
    assert [e["note"] for e in await events(server)] == ["sent on shutdown"]


async def test_long_notes_are_truncated(server: APIServer) -> None:
    async with EventBroadcaster(server.client(), clock=server.clock) as b:
        recorder(b).event(POD, "Normal", "Long", "x" * 5000)
        await b.flush()
    (ev,) = await events(server)
    assert len(ev["note"]) == 1024 and ev["note"].endswith("...")



class GatedClient:
    """The in-memory client, but every Event write waits for ``gate`` and is counted."""

    def __init__(self, server: APIServer) -> None:
        self.inner = server.client()
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.most_in_flight = 0
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def _held(self, verb: str, call: Any) -> Any:
        self.calls.append(verb)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            return await call
        finally:
            self.in_flight -= 1

    async def create(self, obj: Any, **kw: Any) -> Any:
        return await self._held("create", self.inner.create(obj, **kw))

    async def patch(self, *args: Any, **kw: Any) -> Any:
        return await self._held("patch", self.inner.patch(*args, **kw))


async def test_a_slow_write_does_not_hold_back_the_events_behind_it(server: APIServer) -> None:
    # client-go writes each event in a goroutine of its own; written one at a time, a
    # burst of Job creates left our Started events seconds behind the Jobs on a real cluster.
    client = GatedClient(server)
    async with EventBroadcaster(client, clock=server.clock,  # type: ignore[arg-type]
                                max_concurrent_writes=3) as b:
        rec = recorder(b)
        for i in range(5):
            rec.event({**POD, "metadata": {**POD["metadata"], "name": f"p{i}"}},
                      "Normal", "Started", "started")
        await until(lambda: client.in_flight == 3, what="three writes in flight")
        await settle()
        assert client.in_flight == 3, "never more than max_concurrent_writes"
        client.gate.set()
        await b.flush()
    assert client.most_in_flight == 3
    assert sorted(e["metadata"]["name"].split(".")[0] for e in await events(server)) == [
        f"p{i}" for i in range(5)]


async def test_a_repeat_during_its_own_write_is_sent_after_it(server: APIServer) -> None:
    client = GatedClient(server)
    async with EventBroadcaster(client, clock=server.clock) as b:  # type: ignore[arg-type]
        rec = recorder(b)
        rec.event(POD, "Warning", "Failed", "boom")
        await until(lambda: client.in_flight == 1, what="the create in flight")
        rec.event(POD, "Warning", "Failed", "boom")  # same series, while it is being created
        await settle()
        assert client.calls == ["create"], "one correlated event is not written twice at once"
        client.gate.set()
        await b.flush()
    assert client.calls == ["create", "patch"]
    (ev,) = await events(server)
    assert ev["series"]["count"] == 2


def test_max_concurrent_writes_must_be_positive(server: APIServer) -> None:
    with pytest.raises(ValueError, match="max_concurrent_writes"):
        EventBroadcaster(server.client(), max_concurrent_writes=0)
