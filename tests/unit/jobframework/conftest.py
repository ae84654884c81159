"""Shared fixtures: a minimal batch/v1 Job adapter and an in-memory reader."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from jobframework.api import PodSet
from jobframework.interface import FinishedResult, GenericJob
from jobframework.podset import PodSetInfo
from jobframework.runtime.client import Client
from jobframework.runtime.errors import new_not_found
from jobframework.runtime.objects import GVK, Object

JOB_GVK = GVK("batch", "v1", "Job")


class FakeJob(GenericJob):
    """A batch/v1 Job seen through GenericJob (``spec.suspend``, one pod set)."""

    def __init__(self, obj: Object, gvk: GVK = JOB_GVK) -> None:
        self.obj = obj
        self._gvk = gvk

    def object(self) -> Object:
        return self.obj

    def is_suspended(self) -> bool:
        return bool(self.obj.setdefault("spec", {}).get("suspend"))

    def suspend(self) -> None:
        self.obj.setdefault("spec", {})["suspend"] = True

    async def run_with_pod_sets_info(self, client: Client,
                                     pod_sets_info: Sequence[PodSetInfo]) -> None:
        self.obj["spec"]["suspend"] = False

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        return False

    def finished(self) -> FinishedResult:
        return FinishedResult("", False, False)

    async def pod_sets(self, client: Client) -> list[PodSet]:
        return [PodSet(name="main", count=1)]

    def is_active(self) -> bool:
        return False

    async def pods_ready(self, client: Client) -> bool:
        return False

    def gvk(self) -> GVK:
        return self._gvk


class ManagedByJob(FakeJob):
    """A FakeJob with ``spec.managedBy`` (JobWithManagedBy)."""

    def can_default_managed_by(self) -> bool:
        return self.obj["spec"].get("managedBy") in (None, "kubernetes.io/job-controller")

    def managed_by(self) -> str | None:
        value = self.obj["spec"].get("managedBy")
        return str(value) if value is not None else None

    def set_managed_by(self, value: str | None) -> None:
        self.obj["spec"]["managedBy"] = value


def make_job(name: str = "job", namespace: str = "default", *, suspend: bool | None = None,
             labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
             owner: Object | None = None, uid: str | None = None) -> Object:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or name}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner is not None:
        meta["ownerReferences"] = [{
            "apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
            "controller": True}]
    spec: dict[str, Any] = {}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


class MemReader:
    """A Reader over a fixed set of objects, keyed by kind and name."""

    def __init__(self, *objs: Object, fail: Exception | None = None) -> None:
        self.objs = {(o["kind"], (o["metadata"] or {}).get("namespace", ""),
                      o["metadata"]["name"]): o for o in objs}
        self.fail = fail
        self.gets: list[tuple[str, str]] = []

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        self.gets.append((gvk.kind, name))
        if self.fail is not None:
            raise self.fail
        obj = self.objs.get((gvk.kind, namespace or "", name))
        if obj is None:
            plural = gvk.kind.lower() + ("es" if gvk.kind.endswith("s") else "s")
            raise new_not_found(plural, name, gvk.group)
        return copy.deepcopy(obj)

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class Kit:
    """The helpers above, handed to tests through the ``kit`` fixture."""

    FakeJob = FakeJob
    ManagedByJob = ManagedByJob
    MemReader = MemReader
    make_job = staticmethod(make_job)
    JOB_GVK = JOB_GVK


@pytest.fixture
def kit() -> type[Kit]:
    """Test helpers (conftest modules cannot be imported under importlib mode)."""
    return Kit
