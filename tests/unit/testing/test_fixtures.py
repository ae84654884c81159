"""The pytest plugin's fixtures."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from jobframework.testing import APIServer, InMemoryClient, ManualClock

from .conftest import WIDGET, WIDGET_CRD, widget

pytest_plugins = ["jobframework.testing.fixtures"]


@pytest.fixture
def crds() -> list[Mapping[str, Any]]:
    return [copy.deepcopy(WIDGET_CRD)]


async def test_fixtures_share_one_server_and_clock(
    manual_clock: ManualClock, api_server: APIServer, api_client: InMemoryClient,
) -> None:
    assert api_server.clock is manual_clock
    assert api_client.server is api_server
    created = await api_client.create(widget("w"))
    assert created["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    manual_clock.advance(60)
    later = await api_client.create(widget("w2"))
    assert later["metadata"]["creationTimestamp"] == "2026-01-01T00:01:00Z"
    assert [o["metadata"]["name"] for o in api_server.objects(WIDGET)] == ["w", "w2"]
