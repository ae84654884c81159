"""A scriptable loopback HTTP server standing in for an API server, for RestClient tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import pytest
from aiohttp import web

from jobframework.runtime.client.rest import RestClient

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CORE_V1 = {
    "kind": "APIResourceList", "groupVersion": "v1",
    "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
         "verbs": ["get", "list"]},
        {"name": "pods/status", "singularName": "", "namespaced": True, "kind": "Pod",
         "verbs": ["get", "patch", "update"]},
        {"name": "pods/eviction", "singularName": "", "namespaced": True, "kind": "Eviction",
         "verbs": ["create"]},
        {"name": "namespaces", "singularName": "namespace", "namespaced": False,
         "kind": "Namespace", "verbs": ["get"]},
    ],
}
BATCH_V1 = {
    "kind": "APIResourceList", "groupVersion": "batch/v1",
    "resources": [
        {"name": "jobs", "singularName": "job", "namespaced": True, "kind": "Job",
         "verbs": ["get"]},
        {"name": "jobs/status", "singularName": "", "namespaced": True, "kind": "Job",
         "verbs": ["get"]},
    ],
}


def classic_discovery(extra_groups: dict[str, dict[str, Any]] | None = None
                      ) -> dict[str, Any]:
    """Path → body for classic discovery of core/v1, batch/v1 and ``extra_groups``."""
    groups = {"batch/v1": BATCH_V1, **(extra_groups or {})}
    docs: dict[str, Any] = {
        "/api": {"kind": "APIVersions", "versions": ["v1"]},
        "/api/v1": CORE_V1,
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": gv.split("/")[0],
             "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
             "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]}}
            for gv in groups
        ]},
    }
    for gv, doc in groups.items():
        docs[f"/apis/{gv}"] = doc
    return docs


@attrs.define
class Recorded:
    """One request the fake server received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@attrs.define
class FakeAPI:
    """Serves discovery documents, then routes everything else to ``handler``."""

    url: str = ""
    requests: list[Recorded] = attrs.Factory(list)
    discovery: dict[str, Any] = attrs.Factory(classic_discovery)
    handler: Handler | None = None

    def calls(self, method: str | None = None) -> list[Recorded]:
        """Non-discovery requests, optionally of one method."""
        return [r for r in self.requests
                if not (r.method == "GET" and r.path in self.discovery)
                and (method is None or r.method == method)]

    def reply(self, body: Any, status: int = 200) -> None:
        """Answer every non-discovery request with ``body``."""
        async def handler(_: web.Request) -> web.StreamResponse:
            return web.json_response(body, status=status)
        self.handler = handler

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(Recorded(request.method, request.path, dict(request.query),
                                      dict(request.headers), body))
        if request.method == "GET" and request.path in self.discovery:
            return web.json_response(self.discovery[request.path])
        if self.handler is None:
            return web.json_response(
                {"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound",
                 "message": "no handler"}, status=404)
        return await self.handler(request)


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeAPI]:
    api = FakeAPI()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api._serve)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    api.url = f"http://127.0.0.1:{port}"
    yield api
    await runner.cleanup()


@pytest.fixture
async def client(fake_api: FakeAPI) -> AsyncIterator[RestClient]:
    c = RestClient.from_url(fake_api.url, token="s3cret")
    yield c
    await c.close()
