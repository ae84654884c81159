"""Fixtures for the in-memory API server's own tests."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer, InMemoryClient, ManualClock

WIDGET = GVK("example.com", "v1", "Widget")
CONFIGMAP = GVK("", "v1", "ConfigMap")

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
             "schema": {"openAPIV3Schema": {
                 "type": "object",
                 "properties": {
                     "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                     "status": {"type": "object",
                                "x-kubernetes-preserve-unknown-fields": True}}}}},
            {"name": "v1beta1", "served": True, "storage": False,
             "subresources": {"status": {}},
             "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
        ],
    },
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def server(clock: ManualClock) -> APIServer:
    srv = APIServer(clock, watch_history=50)
    srv.register_crd(copy.deepcopy(WIDGET_CRD))
    return srv


@pytest.fixture
def client(server: APIServer) -> InMemoryClient:
    return server.client()


def widget(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": namespace}, "spec": dict(spec)}


def configmap(name: str, namespace: str = "default", **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": dict(data)}


async def turns(n: int = 10) -> None:
    for _ in range(n):
        await asyncio.sleep(0)
