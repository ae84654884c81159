"""Kueue v0.19.2 ``pkg/controller/jobframework/defaults_test.go`` cases not covered by
``test_defaults.py``: ``TestApplyDefaultLocalQueue`` (no namespace filtering: a ``None``
selector) and ``TestApplyDefaultLocalQueueWithManagedJobsNamespaceSelectorSkipsNamespaceRead``
(a job that will not be labelled must not need its namespace read).

Each case's pytest id is ``<GoTest>/<Go case name>``.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.defaults import apply_default_local_queue
from jobframework.integrations import IntegrationCallbacks, IntegrationManager
from jobframework.runtime.objects import GVK, Object
from jobframework.runtime.selectors import LabelSelector

Q = "kueue.x-k8s.io/queue-name"


def noop(*a: Any, **k: Any) -> None:
    return None


def manager() -> IntegrationManager:
    m = IntegrationManager()
    m.register_integration("batch/job", IntegrationCallbacks(
        new_reconciler=noop, setup_webhook=noop, job_type=GVK("batch", "v1", "Job")))
    m.enable_integration("batch/job")
    return m


class NamespaceReadFails:
    """A reader whose every Namespace read fails (Kueue's Get interceptor)."""

    def __init__(self) -> None:
        self.gets: list[str] = []

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        self.gets.append(gvk.kind)
        raise RuntimeError("the namespace was read")

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def job(queue: str | None = None) -> Object:
    meta: dict[str, Any] = {"name": "test-job", "namespace": "ns"}
    if queue is not None:
        meta["labels"] = {Q: queue}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"template": {"spec": {"containers": []}}}}


_A = "TestApplyDefaultLocalQueue"


@pytest.mark.parametrize(("obj", "default_exists", "want"), [
    pytest.param(job(), True, "default", id=f"{_A}/a job with no queue gets the default one"),
    pytest.param(job("other"), True, "other", id=f"{_A}/an existing queue is not overwritten"),
    pytest.param(job(), False, None, id=f"{_A}/no default queue in the namespace"),
])
async def test_apply_default_local_queue_without_selector(obj: Object, default_exists: bool,
                                                          want: str | None) -> None:
    reader = NamespaceReadFails()
    await apply_default_local_queue(manager(), reader, obj, lambda ns: default_exists, None)
    assert (obj["metadata"].get("labels") or {}).get(Q) == want
    assert reader.gets == []


_S = "TestApplyDefaultLocalQueueWithManagedJobsNamespaceSelectorSkipsNamespaceRead"


@pytest.mark.parametrize(("obj", "default_exists", "want"), [
    pytest.param(job(), False, None, id=f"{_S}/no default queue in the namespace"),
    pytest.param(job("other"), True, "other", id=f"{_S}/the job already names a queue"),
])
async def test_namespace_not_read_unless_labelling(obj: Object, default_exists: bool,
                                                   want: str | None) -> None:
    reader = NamespaceReadFails()
    # The empty selector (labels.Everything()) would match; the read itself would fail.
    await apply_default_local_queue(manager(), reader, obj, lambda ns: default_exists,
                                    LabelSelector())
    assert (obj["metadata"].get("labels") or {}).get(Q) == want
    assert reader.gets == []


async def test_a_namespace_read_does_happen_when_labelling() -> None:
    """Counter-check for the two cases above: the reader does fail when consulted."""
    reader = NamespaceReadFails()
    with pytest.raises(RuntimeError, match="failed to get namespace"):
        await apply_default_local_queue(manager(), reader, job(), lambda ns: True,
                                        LabelSelector())
    assert reader.gets == ["Namespace"]
