"""Tests here marked ``cluster`` use the session fixture ``cluster_info``.

It lives in ``tests/conftest.py``, so the contract suite's ``cluster`` backend and these
tests share one real cluster per session (start-ups are slow on a small machine). The
fixtures below are shared by the integrations' cluster tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jobframework.runtime.client.rest import RestClient
from jobframework.testing.cluster import ClusterInfo

from .helpers import Cleanup, delete


@pytest.fixture
async def client(cluster_info: ClusterInfo) -> AsyncIterator[RestClient]:
    """An admin client of the session's cluster."""
    async with await RestClient.from_kubeconfig(cluster_info.kubeconfig) as c:
        yield c


@pytest.fixture
async def cleanup(client: RestClient) -> AsyncIterator[Cleanup]:
    """Objects to delete after the test, in list order (put jobs first, queues after)."""
    todo: Cleanup = []
    yield todo
    for gvk, name, namespace in todo:
        await delete(client, gvk, name, namespace)
