"""The client contract suite: behaviour every ``Client`` backend must share.

Every test here takes the ``backend`` fixture and talks to it only through
``backend.client`` (a :class:`jobframework.runtime.client.Client`) and the few helpers of
:class:`Backend`. The tests assert only what a real kube-apiserver does too, so the same
suite runs against the in-memory server, the HTTP front over it, and a real cluster.

Backends are named in :data:`BACKENDS`: ``"memory"`` (the in-memory client),
``"http"`` (the REST client through ``jobframework.testing.http`` to the same server) and
``"cluster"`` (the REST client on the real control plane of
``jobframework.testing.cluster``, marked ``cluster``: ``nox -s integration`` runs it; see
``_cluster_backend.py``).
To add one:

1. write an async context manager ``_<name>_backend(request)`` that yields a
   :class:`Backend`
   (a client on the backend, a fresh namespace created for the test, ``install_crd`` that
   creates a CRD through the client (on a shared cluster: tolerating one that exists)
   and waits until it is ``Established`` *and* served,
   ``settle`` that waits for asynchronous effects, ``advance`` that lets clock time pass);
2. add it to :data:`_FACTORIES` (:data:`BACKENDS` follows);
3. if it needs an external process (``"cluster"``), mark the parameter with
   ``pytest.mark.cluster`` in :func:`_params` so the default run deselects it, and get
   the session's cluster with ``request.getfixturevalue(...)`` inside the factory
   (move the ``cluster_info`` fixture of ``tests/integration/conftest.py`` to
   ``tests/conftest.py`` so both directories see it).

``"cluster"`` will be the real control plane of ``jobframework.testing.cluster``, where
``settle`` cannot know what to wait for: tests therefore check asynchronous outcomes with
:meth:`Backend.eventually`, which retries an assertion (after ``settle``) until it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import pytest

from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer, ManualClock

#: Seconds :meth:`Backend.eventually` keeps trying on the real cluster.
CLUSTER_PATIENCE = 90.0

WIDGET = GVK("example.com", "v1", "Widget")
GADGET = GVK("example.com", "v1", "Gadget")
CONFIGMAP = GVK("", "v1", "ConfigMap")
NAMESPACE = GVK("", "v1", "Namespace")
JOB = GVK("batch", "v1", "Job")
CRD = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")

#: A namespaced test kind with a status subresource and keyed lists.
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                  "listKind": "WidgetList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {
                            "size": {"type": "integer", "minimum": 0},
                            "color": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "parts": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["name"],
                                "items": {"type": "object", "required": ["name"],
                                          "properties": {
                                              "name": {"type": "string"},
                                              "count": {"type": "integer"}}},
                            },
                        },
                    },
                    "status": {
                        "type": "object",
                        "properties": {
                            "phase": {"type": "string"},
                            "observedGeneration": {"type": "integer"},
                            "conditions": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["type"],
                                "items": {"type": "object", "required": ["type", "status"],
                                          "properties": {
                                              "type": {"type": "string"},
                                              "status": {"type": "string"},
                                              "reason": {"type": "string"},
                                              "message": {"type": "string"}}},
                            },
                        },
                    },
                },
            }},
        }],
    },
}

#: A cluster-scoped test kind without a status subresource.
GADGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Cluster",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                  "listKind": "GadgetList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object",
                               "x-kubernetes-preserve-unknown-fields": True},
                },
            }},
        }],
    },
}


@attrs.define
class Backend:
    """One backend under test, as the contract tests see it."""

    name: str
    client: Client
    #: A namespace created for this test only.
    namespace: str
    _install_crd: Callable[[dict[str, Any]], Awaitable[None]]
    _settle: Callable[[], Awaitable[None]]
    _advance: Callable[[float], Awaitable[None]]

    async def install_crd(self, manifest: dict[str, Any]) -> None:
        """Create a CRD through the client and wait until its kinds are served."""
        await self._install_crd(copy.deepcopy(manifest))

    async def settle(self) -> None:
        """Wait for asynchronous effects (garbage collection, namespace cleanup)."""
        await self._settle()

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` of server time pass (a manual clock, or real time)."""
        await self._advance(seconds)

    async def eventually(
        self, check: Callable[[], Awaitable[None]], *, attempts: int = 200,
        delay: float = 0.1,
    ) -> None:
        """Retry ``check`` (assertions, ``pytest.raises``) after settling until it passes.

        In-memory backends get ``attempts`` tries. The real cluster gets
        :data:`CLUSTER_PATIENCE` seconds instead: kube-controller-manager's garbage
        collector starts watching a newly installed custom resource only at its next
        discovery resync (every 30 s), so collecting the dependents of a Widget can take
        that long the first time.
        """
        deadline = time.monotonic() + CLUSTER_PATIENCE if self.name == "cluster" else None
        attempt = 0
        while True:
            await self.settle()
            try:
                await check()
                return
            except (AssertionError, pytest.fail.Exception):
                attempt += 1
                if deadline is None and attempt >= attempts:
                    raise
                if deadline is not None and time.monotonic() > deadline:
                    raise
                if self.name != "memory":
                    await asyncio.sleep(delay)

    def widget(self, name: str, **spec: Any) -> dict[str, Any]:
        """A Widget manifest in the test namespace."""
        return {"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": dict(spec)}

    def configmap(self, name: str, **data: str) -> dict[str, Any]:
        """A ConfigMap manifest in the test namespace."""
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": self.namespace},
                "data": dict(data)}


async def _wait_established(client: Client, name: str) -> None:
    for _ in range(600):
        crd = await client.get(CRD, name)
        conditions = (crd.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True"
               for c in conditions):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"CRD {name} never became Established")


@contextlib.asynccontextmanager
async def _memory_backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    clock = ManualClock()
    server = APIServer(clock, builtin_defaults=True)
    client = server.client()
    namespace = f"test-{secrets.token_hex(4)}"
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": namespace}})

    async def install_crd(manifest: dict[str, Any]) -> None:
        await client.create(manifest)
        await _wait_established(client, manifest["metadata"]["name"])

    async def advance(seconds: float) -> None:
        # Small steps, so every watcher observes each deadline it passes.
        steps = max(1, int(seconds * 10))
        for _ in range(steps):
            clock.advance(seconds / steps)
            for _ in range(5):
                await asyncio.sleep(0)

    yield Backend("memory", client, namespace, install_crd, server.settle, advance)


@contextlib.asynccontextmanager
async def _http_backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    from jobframework.testing.http import serve_http

    clock = ManualClock()
    server = APIServer(clock, builtin_defaults=True)
    async with await serve_http(server) as front, front.client() as client:
        namespace = f"test-{secrets.token_hex(4)}"
        await client.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": namespace}})

        async def install_crd(manifest: dict[str, Any]) -> None:
            await client.create(manifest)
            await _wait_established(client, manifest["metadata"]["name"])

        async def settle() -> None:
            await server.settle()
            await asyncio.sleep(0.005)  # let loopback traffic through

        async def advance(seconds: float) -> None:
            steps = max(1, int(seconds * 10))
            for _ in range(steps):
                clock.advance(seconds / steps)
                await asyncio.sleep(0.002)

        yield Backend("http", client, namespace, install_crd, settle, advance)


@contextlib.asynccontextmanager
async def _cluster_backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    from ._cluster_backend import cluster_backend

    async with cluster_backend(request) as b:
        yield b


_FACTORIES: dict[
    str, Callable[[pytest.FixtureRequest], contextlib.AbstractAsyncContextManager[Backend]]
] = {
    "memory": _memory_backend,
    "http": _http_backend,
    "cluster": _cluster_backend,
}
BACKENDS = list(_FACTORIES)


def _params() -> list[Any]:
    return [pytest.param(name, id=name,
                         marks=[pytest.mark.cluster] if name == "cluster" else [])
            for name in BACKENDS]


@pytest.fixture(params=_params())
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """A fresh backend (and namespace) for one test."""
    async with _FACTORIES[request.param](request) as b:
        yield b


@pytest.fixture
async def widgets(backend: Backend) -> Backend:
    """The backend with the Widget CRD installed."""
    await backend.install_crd(WIDGET_CRD)
    return backend
