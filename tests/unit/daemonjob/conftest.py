"""Fixtures: an in-memory server serving the DaemonJob CRD, and a reconciler harness."""

from __future__ import annotations

import pytest

from integrations.daemonjob import load_crds
from jobframework.runtime.clock import ManualClock
from jobframework.testing import APIServer

from .helpers import Harness


@pytest.fixture
def server() -> APIServer:
    srv = APIServer(ManualClock(), builtin_defaults=True)
    for crd in load_crds():
        srv.register_crd(crd)
    return srv


@pytest.fixture
def h(server: APIServer) -> Harness:
    return Harness(server)
