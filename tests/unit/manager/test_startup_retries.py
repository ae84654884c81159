"""The manager's start-up requests ride out transient errors (the fault suite saw a manager
exit on one dropped request) and give up at once on the others."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.manager import _with_retries
from jobframework.runtime import errors
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer

CONFIGMAP = GVK("", "v1", "ConfigMap")


def configmap() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}, "data": {"a": "1"}}


@pytest.mark.parametrize("error", [
    errors.InternalError("etcd leader changed"),
    errors.TooManyRequests("slow down"),
    errors.ServiceUnavailable("apiserver is shutting down"),
    errors.Conflict("the object has been modified"),
])
async def test_a_transient_error_is_retried(error: errors.ApiError) -> None:
    server = APIServer()
    client = server.client()
    rule = server.faults.fail("patch", error=error, times=2)
    out = await _with_retries("applying cm", lambda: client.apply(
        configmap(), field_manager="test"), 10.0, delay=0.01)
    assert out["data"] == {"a": "1"}
    assert rule.hits == 2
    assert (await client.get(CONFIGMAP, "cm", namespace="default"))["data"] == {"a": "1"}


async def test_a_transport_error_is_retried() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionResetError("connection reset by peer")
        return "ok"

    assert await _with_retries("flaky", flaky, 10.0, delay=0.01) == "ok"
    assert calls == 3


async def test_a_permanent_error_is_raised_at_once() -> None:
    server = APIServer()
    client = server.client()
    rule = server.faults.fail("patch", error=errors.Forbidden("no"), times=None)
    with pytest.raises(errors.Forbidden):
        await _with_retries("applying cm", lambda: client.apply(
            configmap(), field_manager="test"), 10.0, delay=0.01)
    assert rule.hits == 1


async def test_retries_stop_at_the_limit() -> None:
    server = APIServer()
    client = server.client()
    rule = server.faults.fail("patch", error=errors.InternalError("down"), times=None)
    with pytest.raises(errors.InternalError):
        await _with_retries("applying cm", lambda: client.apply(
            configmap(), field_manager="test"), 0.1, delay=0.02)
    assert 2 <= rule.hits <= 6
