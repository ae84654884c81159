"""The ``"cluster"`` contract backend: RestClient → a real kube-apiserver.

The cluster is the session's :func:`cluster_info` (``tests/conftest.py``): etcd,
kube-apiserver, controller-manager (garbage collector, namespace controller), scheduler,
kwok and Kueue from ``jobframework.testing.cluster``. Each test gets a fresh namespace
(deleted afterwards without waiting). CRDs are shared by the whole session: installing
one that exists is fine, as long as it is the same manifest.

Nothing here can control time: ``advance`` sleeps for real and ``settle`` yields only
briefly, so tests check asynchronous outcomes with ``Backend.eventually``.
Registered in ``conftest._FACTORIES`` through a lazy import (this module imports conftest).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.runtime.client.rest import RestClient, Timeouts
from jobframework.runtime.objects import GVK

from .conftest import CRD, NAMESPACE, Backend, _wait_established


@contextlib.asynccontextmanager
async def cluster_backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """A RestClient on the session's real cluster, in a namespace of its own."""
    info = request.getfixturevalue("cluster_info")
    client = await RestClient.from_kubeconfig(
        info.kubeconfig, timeouts=Timeouts(read=30.0, watch_inactivity=60.0))
    async with client:
        namespace = f"test-{secrets.token_hex(4)}"
        await client.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": namespace}})

        async def install_crd(manifest: dict[str, Any]) -> None:
            name = manifest["metadata"]["name"]
            try:
                await client.create(manifest)
            except errors.AlreadyExists:
                existing = await client.get(CRD, name)
                if _normalized(existing["spec"]) != _normalized(manifest["spec"]):
                    raise AssertionError(
                        f"CRD {name} exists on the shared cluster with another spec") from None
            await _wait_established(client, name)
            # Served once discovery lists it (the mapper re-reads discovery on a miss).
            spec = manifest["spec"]
            for version in spec["versions"]:
                if version.get("served", True):
                    gvk = GVK(spec["group"], version["name"], spec["names"]["kind"])
                    for attempt in range(100):
                        try:
                            await client.rest_mapper.rest_mapping(gvk)
                            break
                        except Exception:
                            if attempt == 99:
                                raise
                            await asyncio.sleep(0.1)

        async def settle() -> None:
            await asyncio.sleep(0.02)

        async def advance(seconds: float) -> None:
            await asyncio.sleep(seconds)

        try:
            yield Backend("cluster", client, namespace, install_crd, settle, advance)
        finally:
            with contextlib.suppress(errors.ApiError):
                await client.delete(NAMESPACE, namespace)


def _normalized(spec: dict[str, Any]) -> Any:
    """The parts of a CRD spec a test manifest sets (the server adds defaults)."""
    return (spec.get("group"), spec.get("scope"), spec.get("names", {}).get("kind"),
            [(v.get("name"), v.get("schema")) for v in spec.get("versions", [])])
