"""Fault injection: failing calls, latency on the manual clock."""

from __future__ import annotations

import asyncio

import pytest

from jobframework.runtime import errors
from jobframework.testing import APIServer, InMemoryClient, ManualClock

from .conftest import CONFIGMAP, WIDGET, configmap, turns, widget


async def test_fail_next_n_matching_calls(server: APIServer, client: InMemoryClient) -> None:
    rule = server.faults.fail("create", error=429, times=2, gvk=CONFIGMAP)
    await client.create(widget("w"))  # other kind: unaffected
    for _ in range(2):
        with pytest.raises(errors.TooManyRequests) as exc:
            await client.create(configmap("a"))
        assert exc.value.code == 429
    assert await client.create(configmap("a"))
    assert rule.hits == 2


async def test_fail_by_name_and_custom_error(server: APIServer, client: InMemoryClient) -> None:
    await client.create(configmap("a"))
    await client.create(configmap("b"))
    custom = errors.new_conflict("configmaps", "b", "custom reason")
    server.faults.fail("update", error=custom, name="b", times=None)
    a = await client.get(CONFIGMAP, "a", namespace="default")
    await client.update(a)
    b = await client.get(CONFIGMAP, "b", namespace="default")
    for _ in range(3):
        with pytest.raises(errors.Conflict) as exc:
            await client.update(b)
        assert exc.value.message == custom.message
    server.faults.clear()
    await client.update(b)


async def test_status_subresource_faults(server: APIServer, client: InMemoryClient) -> None:
    obj = await client.create(widget("w"))
    server.faults.fail("update", error=500, subresource="status")
    await client.update(obj)
    obj["status"] = {"a": 1}
    with pytest.raises(errors.InternalError):
        await client.update_status(obj)
    assert (await client.update_status(obj))["status"] == {"a": 1}


async def test_failures_cover_every_verb(server: APIServer, client: InMemoryClient) -> None:
    await client.create(configmap("a"))
    server.faults.fail("*", error=503, times=None)
    calls = [
        client.get(CONFIGMAP, "a", namespace="default"),
        client.list(CONFIGMAP),
        client.create(configmap("b")),
        client.patch(CONFIGMAP, "a", {"data": {"x": "y"}}, namespace="default"),
        client.delete(CONFIGMAP, "a", namespace="default"),
        client.watch(CONFIGMAP).__anext__(),
    ]
    for call in calls:
        with pytest.raises(errors.ServiceUnavailable):
            await call


async def test_latency_waits_for_the_clock(clock: ManualClock, server: APIServer,
                                           client: InMemoryClient) -> None:
    server.faults.delay(2.0, "get", times=1)
    await client.create(configmap("a"))
    task = asyncio.ensure_future(client.get(CONFIGMAP, "a", namespace="default"))
    await turns()
    assert not task.done()
    clock.advance(1.9)
    await turns()
    assert not task.done()
    clock.advance(0.1)
    await turns()
    assert task.done()
    assert task.result()["metadata"]["name"] == "a"
    # times=1: the next get is immediate.
    assert await client.get(CONFIGMAP, "a", namespace="default")


def test_unknown_verb_is_rejected(server: APIServer) -> None:
    with pytest.raises(ValueError):
        server.faults.fail("frobnicate")


async def test_removed_rule_stops_matching(server: APIServer, client: InMemoryClient) -> None:
    rule = server.faults.fail("get", times=None, gvk=WIDGET)
    server.faults.remove(rule)
    await client.create(widget("w"))
    assert await client.get(WIDGET, "w", namespace="default")
