"""The ``"http"`` contract backend: RestClient → HTTPFront → in-memory APIServer.

Every contract test then exercises the real REST client (URLs, content types, Status
parsing, discovery, the NDJSON watch stream) against in-memory server semantics.
Registered in ``conftest._FACTORIES`` through a lazy import (this module imports conftest).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

from jobframework.runtime.client.rest import Timeouts
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer, ManualClock
from jobframework.testing.http import serve_http

from .conftest import Backend, _wait_established


@contextlib.asynccontextmanager
async def http_backend() -> AsyncIterator[Backend]:
    """A fresh in-memory server behind a loopback HTTP front, and a RestClient on it."""
    clock = ManualClock()
    server = APIServer(clock)
    async with await serve_http(server) as front, \
            front.client(timeouts=Timeouts(read=30.0, watch_inactivity=30.0)) as client:
        namespace = f"test-{secrets.token_hex(4)}"
        await client.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": namespace}})

        async def install_crd(manifest: dict[str, Any]) -> None:
            await client.create(manifest)
            await _wait_established(client, manifest["metadata"]["name"])
            # Served once discovery lists it (the mapper re-reads discovery on a miss).
            spec = manifest["spec"]
            for version in spec["versions"]:
                if version.get("served", True):
                    await client.rest_mapper.rest_mapping(
                        GVK(spec["group"], version["name"], spec["names"]["kind"]))

        async def advance(seconds: float) -> None:
            # Small clock steps with real (tiny) pauses: an event crosses a socket before
            # the client sees it, which takes more than a few loop turns.
            steps = max(1, int(seconds * 10))
            for _ in range(steps):
                clock.advance(seconds / steps)
                for _ in range(5):
                    await asyncio.sleep(0)
                await asyncio.sleep(0.002)

        yield Backend("http", client, namespace, install_crd, server.settle, advance)
