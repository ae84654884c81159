"""Helpers for the JobFlow tests: an indexed reader, a reconciler harness, builders.

The in-memory server does not run the batch/v1 Job controller, so tests play it: they
write the ``Complete``/``Failed`` conditions (and pod counts) on Job status themselves.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from integrations.jobflow import JOB_GVK, JOBFLOW_GVK
from integrations.jobflow.controller import (
    CREATED_BY_TEMPLATE_INDEX,
    OWNER_UID_INDEX,
    TEMPLATE_REF_INDEX,
    JobFlowReconciler,
    JobTemplateReconciler,
    created_by_template_values,
    owner_uid_values,
    template_ref_values,
)
from jobframework.runtime.client import ObjectList
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.reconcile import Request, Result
from jobframework.testing import APIServer, InMemoryClient

IndexFn = Callable[[Object], list[str]]


class IndexedClient:
    """The in-memory client plus ``matching_fields`` computed with the controller's index
    functions (what the manager's cache answers, without running informers)."""

    def __init__(self, api: InMemoryClient) -> None:
        self.api = api
        self.indexes: dict[tuple[GVK, str], IndexFn] = {
            (JOB_GVK, OWNER_UID_INDEX): owner_uid_values,
            (JOBFLOW_GVK, TEMPLATE_REF_INDEX): template_ref_values,
            (JOB_GVK, CREATED_BY_TEMPLATE_INDEX): created_by_template_values,
        }
        self.lists: list[tuple[GVK, str | None, dict[str, str] | None]] = []
        #: Names the "cache" does not show yet (a lagging informer).
        self.hidden: set[str] = set()

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        return await self.api.get(gvk, name, namespace=namespace)

    async def list(self, gvk: GVK, *, namespace: str | None = None,
                   matching_fields: Mapping[str, str] | None = None) -> ObjectList:
        self.lists.append((gvk, namespace, dict(matching_fields or {}) or None))
        out = await self.api.list(gvk, namespace=namespace)
        items = [o for o in out.items if o["metadata"]["name"] not in self.hidden]
        for index, value in (matching_fields or {}).items():
            fn = self.indexes[(gvk, index)]
            items = [o for o in items if value in fn(o)]
        return attrs.evolve(out, items=items)


class FakeRecorder:
    """Records ``(type, reason, message)`` of each event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str,
              **_: Any) -> None:
        self.events.append((type, reason, message))

    def reasons(self) -> list[str]:
        return [r for _, r, _ in self.events]


def container(name: str = "main", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.28", "command": ["sh", "-c", "true"], **extra}


def job_template(**extra: Any) -> dict[str, Any]:
    """A minimal JobSpec."""
    spec: dict[str, Any] = {"template": {"spec": {"containers": [container()]}}}
    spec.update(extra)
    return spec


def flow(name: str, *deps: str, ref: str = "", **tmpl: Any) -> dict[str, Any]:
    f: dict[str, Any] = {"name": name, "dependencies": list(deps)}
    if ref:
        f["jobTemplateRef"] = ref
    else:
        f["jobTemplate"] = job_template(**tmpl)
    return f


def jobflow(name: str, flows: list[dict[str, Any]], *, namespace: str = "default",
            **spec: Any) -> Object:
    return {"apiVersion": "api.practice.com/v1alpha1", "kind": "JobFlow",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"flows": flows, **spec}}


def jobtemplate(name: str, *, namespace: str = "default", **extra: Any) -> Object:
    return {"apiVersion": "api.practice.com/v1alpha1", "kind": "JobTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"jobTemplate": job_template(**extra)}}


def finish(job: Object, ok: bool = True, reason: str = "", message: str = "") -> Object:
    """``job`` as the Job controller leaves it when it completes or fails."""
    job = copy.deepcopy(job)
    status = job.setdefault("status", {})
    if ok:
        status["succeeded"] = int(job["spec"].get("completions") or 1)
        cond = {"type": "Complete", "status": "True"}
    else:
        status["failed"] = 1
        cond = {"type": "Failed", "status": "True", "reason": reason or "BackoffLimitExceeded",
                "message": message or "Job has reached the specified backoff limit"}
    status["active"] = 0
    status["conditions"] = [*status.get("conditions", []), cond]
    return job


class Harness:
    """A JobFlow reconciler on an in-memory server, called directly."""

    def __init__(self, server: APIServer) -> None:
        self.server = server
        self.api = server.client()
        self.reader = IndexedClient(self.api)
        self.recorder = FakeRecorder()
        assert isinstance(server.clock, ManualClock)
        self.rec = JobFlowReconciler(self.reader, self.api, self.recorder,
                                     clock=server.clock)
        self.templates = JobTemplateReconciler(self.reader, self.api)

    async def reconcile(self, name: str, namespace: str = "default") -> Result:
        return await self.rec.reconcile(Request.of(namespace, name))

    async def get(self, name: str, namespace: str = "default") -> Object:
        return await self.api.get(JOBFLOW_GVK, name, namespace=namespace)

    async def jobs(self, namespace: str = "default") -> dict[str, Object]:
        return {j["metadata"]["name"]: j
                for j in (await self.api.list(JOB_GVK, namespace=namespace)).items}

    async def set_job_status(self, name: str, status: dict[str, Any],
                             namespace: str = "default") -> Object:
        job = await self.api.get(JOB_GVK, name, namespace=namespace)
        job["status"] = {**job.get("status", {}), **status}
        return await self.api.update_status(job)

    async def complete(self, name: str, namespace: str = "default") -> Object:
        job = await self.api.get(JOB_GVK, name, namespace=namespace)
        return await self.api.update_status(finish(job))

    async def fail(self, name: str, namespace: str = "default", **kw: str) -> Object:
        job = await self.api.get(JOB_GVK, name, namespace=namespace)
        return await self.api.update_status(finish(job, False, **kw))
