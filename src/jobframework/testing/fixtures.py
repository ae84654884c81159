"""pytest fixtures for tests on the in-memory API server.

Enable them in a ``conftest.py``::

    pytest_plugins = ["jobframework.testing.fixtures"]

and use ``manual_clock``, ``api_server`` and ``api_client`` in tests. Each test gets a
fresh server on a fresh :class:`~jobframework.runtime.clock.ManualClock`; CRDs listed
by a ``crds`` fixture (override it in your conftest) are registered first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ..runtime.clock import ManualClock
from .client import InMemoryClient
from .server import APIServer


@pytest.fixture
def manual_clock() -> ManualClock:
    """A clock that moves only when the test advances it."""
    return ManualClock()


@pytest.fixture
def crds() -> list[Mapping[str, Any]]:
    """CRD manifests to register on ``api_server`` (override to add yours)."""
    return []


@pytest.fixture
def api_server(manual_clock: ManualClock, crds: list[Mapping[str, Any]]) -> APIServer:
    """A fresh in-memory API server on ``manual_clock`` with ``crds`` registered."""
    server = APIServer(manual_clock)
    for crd in crds:
        server.register_crd(crd)
    return server


@pytest.fixture
def api_client(api_server: APIServer) -> InMemoryClient:
    """A client of ``api_server`` acting as ``admin``."""
    return api_server.client()
