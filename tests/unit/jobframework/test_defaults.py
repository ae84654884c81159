"""Webhook defaulting, after Kueue's defaults_test.go and base_webhook_test.go."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.constants import FeatureGates
from jobframework.defaults import (
    StaticQueueLookup,
    apply_default_for_managed_by,
    apply_default_for_suspend,
    apply_default_local_queue,
    apply_default_workload_priority_class,
    namespace_matches_selector,
    workload_should_be_suspended,
)
from jobframework.integrations import (
    IntegrationCallbacks,
    IntegrationManager,
    WorkloadOwnerNotFoundError,
)
from jobframework.runtime.errors import InternalError
from jobframework.runtime.objects import GVK
from jobframework.runtime.selectors import LabelSelector

Q = "kueue.x-k8s.io/queue-name"
WPC = "kueue.x-k8s.io/priority-class"
SELECTOR = LabelSelector.from_dict({"matchExpressions": [
    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["unmanaged-ns"]}]})


def ns(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}}


def noop(*a: Any, **k: Any) -> None:
    return None


def manager() -> IntegrationManager:
    m = IntegrationManager()
    job = GVK("batch", "v1", "Job")
    m.register_integration("batch/job", IntegrationCallbacks(
        new_reconciler=noop, setup_webhook=noop, job_type=job))
    m.enable_integration("batch/job")
    return m


@pytest.fixture
def parent(kit: Any) -> dict[str, Any]:
    return kit.make_job("parent", "managed-ns", labels={Q: "default"}, uid="parent")


@pytest.mark.kueue_case(
    "TestWorkloadShouldBeSuspended/job with queue name",
    "TestWorkloadShouldBeSuspended/job with queue name manageJobs",
    "TestWorkloadShouldBeSuspended/job without queue name",
    "TestWorkloadShouldBeSuspended/job without queue name with manageJobs",
    "TestWorkloadShouldBeSuspended/job without queue name but with managed parent with manageJobs",
    "TestWorkloadShouldBeSuspended/job without queue name with manageJobs with feature disabled",
    "TestWorkloadShouldBeSuspended/job without queue name with manageJobs in unmanaged ns",
)
@pytest.mark.parametrize(
    ("case", "mjwqn", "want"),
    [
        ("job with queue name", False, True),
        ("job with queue name manageJobs", True, True),
        ("job without queue name", False, False),
        ("job without queue name with manageJobs", True, True),
        ("job without queue name but with managed parent with manageJobs", True, False),
        # v0.19.2 sets no gate in this case: its inputs are those of the case above but one.
        ("job without queue name with manageJobs with feature disabled", True, True),
        ("job without queue name with manageJobs in unmanaged ns", True, False),
    ],
)
async def test_workload_should_be_suspended(kit: Any, parent: dict[str, Any], case: str,
                                            mjwqn: bool, want: bool) -> None:
    namespace = "unmanaged-ns" if "unmanaged ns" in case else "managed-ns"
    labels = {Q: "queue"} if "with queue name" in case else None
    owner = parent if "managed parent" in case else None
    obj = kit.make_job(namespace=namespace, labels=labels, owner=owner)
    reader = kit.MemReader(ns("managed-ns"), ns("unmanaged-ns"), parent)
    got = await workload_should_be_suspended(manager(), reader, obj, mjwqn, SELECTOR)
    assert got is want


async def test_nil_selector_matches_everything(kit: Any) -> None:
    obj = kit.make_job(namespace="unmanaged-ns")
    reader = kit.MemReader()
    assert await workload_should_be_suspended(manager(), reader, obj, True, None)
    assert reader.gets == []


@pytest.mark.kueue_case(
    "TestWorkloadShouldBeSuspended/job with ownerReference to a deleted known parent while "
    "terminating (GC teardown)",
    "TestWorkloadShouldBeSuspended/job with ownerReference to a deleted known parent while "
    "terminating, without tolerance",
    "TestWorkloadShouldBeSuspended/job with ownerReference to a deleted known parent while "
    "terminating, gate disabled",
    "TestWorkloadShouldBeSuspended/job with ownerReference to a missing parent while not "
    "terminating (cache lag)",
)
@pytest.mark.parametrize(
    ("deleting", "tolerance", "gate", "want_error"),
    [
        (True, True, True, False),   # GC teardown: skipped, not suspended
        (True, False, True, True),   # without tolerance
        (True, True, False, True),   # gate disabled
        (False, True, True, True),   # cache lag: not deleting
    ],
)
async def test_missing_parent(kit: Any, parent: dict[str, Any], deleting: bool,
                              tolerance: bool, gate: bool, want_error: bool) -> None:
    obj = kit.make_job(namespace="managed-ns", labels={Q: "queue"}, owner=parent)
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    features = FeatureGates(SkipAncestorCheckForDeletedWorkloads=gate)
    reader = kit.MemReader(ns("managed-ns"))
    if want_error:
        with pytest.raises(WorkloadOwnerNotFoundError):
            await workload_should_be_suspended(manager(), reader, obj, False, SELECTOR,
                                               deleting_object_tolerance=tolerance,
                                               features=features)
    else:
        assert not await workload_should_be_suspended(
            manager(), reader, obj, False, SELECTOR, deleting_object_tolerance=tolerance,
            features=features)


async def test_namespace_read_error(kit: Any) -> None:
    with pytest.raises(RuntimeError, match=r"^failed to get namespace: boom$"):
        await namespace_matches_selector(kit.MemReader(fail=InternalError("boom")), "x",
                                         SELECTOR)


@pytest.mark.parametrize(("labels", "suspend", "mjwqn", "want"), [
    ({Q: "queue"}, None, False, True),
    ({Q: "queue"}, None, True, True),
    (None, None, False, None),
    ({Q: "queue"}, False, False, True),
])
async def test_apply_default_for_suspend(kit: Any, labels: dict[str, str] | None,
                                         suspend: bool | None, mjwqn: bool,
                                         want: bool | None) -> None:
    job = kit.FakeJob(kit.make_job(namespace="managed-ns", labels=labels, suspend=suspend))
    await apply_default_for_suspend(manager(), job, kit.MemReader(ns("managed-ns")), mjwqn,
                                    SELECTOR)
    assert job.obj["spec"].get("suspend") is want


async def test_apply_default_for_suspend_tolerates_deleting(kit: Any,
                                                            parent: dict[str, Any]) -> None:
    obj = kit.make_job(namespace="managed-ns", labels={Q: "q"}, owner=parent)
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    job = kit.FakeJob(obj)
    await apply_default_for_suspend(manager(), job, kit.MemReader(), False, SELECTOR)
    assert not job.is_suspended()


@pytest.mark.kueue_case(
    "TestApplyDefaultLocalQueueWithManagedJobsNamespaceSelector/job in managed namespace gets "
    "default queue label",
    "TestApplyDefaultLocalQueueWithManagedJobsNamespaceSelector/job in unmanaged namespace does "
    "not get default queue label",
    "TestApplyDefaultLocalQueueWithManagedJobsNamespaceSelector/job in managed namespace with "
    "existing queue label is not overwritten",
)
@pytest.mark.parametrize(("namespace", "labels", "want"), [
    ("managed-ns", None, "default"),
    ("unmanaged-ns", None, None),
    ("managed-ns", {Q: "other"}, "other"),
])
async def test_apply_default_local_queue(kit: Any, namespace: str,
                                         labels: dict[str, str] | None,
                                         want: str | None) -> None:
    obj = kit.make_job(namespace=namespace, labels=labels)
    await apply_default_local_queue(manager(), kit.MemReader(ns(namespace)), obj,
                                    lambda n: True, SELECTOR)
    assert obj["metadata"].get("labels", {}).get(Q) == want


async def test_default_local_queue_needs_default_queue_and_unmanaged_owner(
        kit: Any, parent: dict[str, Any]) -> None:
    reader = kit.MemReader(ns("managed-ns"))
    obj = kit.make_job(namespace="managed-ns")
    await apply_default_local_queue(manager(), reader, obj, lambda n: False, SELECTOR)
    assert "labels" not in obj["metadata"]
    child = kit.make_job(namespace="managed-ns", owner=parent)
    await apply_default_local_queue(manager(), reader, child, lambda n: True, SELECTOR)
    assert "labels" not in child["metadata"]
    assert reader.gets == []  # the namespace is read only when the label would be set


WPC_DEFAULT = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
               "metadata": {"name": "default"}, "value": 100}


@pytest.mark.kueue_case(
    "TestApplyDefaultWorkloadPriorityClass/feature gate enabled, no label, default WPC exists",
    "TestApplyDefaultWorkloadPriorityClass/feature gate disabled, no label, default WPC exists",
    "TestApplyDefaultWorkloadPriorityClass/feature gate enabled, label already set",
    "TestApplyDefaultWorkloadPriorityClass/feature gate enabled, no label, default WPC does not "
    "exist",
    "TestApplyDefaultWorkloadPriorityClass/feature gate enabled, owner managed by kueue",
)
@pytest.mark.parametrize(("gate", "labels", "wpc_exists", "owned", "want"), [
    (True, None, True, False, "default"),
    (False, None, True, False, None),
    (True, {WPC: "high"}, True, False, "high"),
    (True, None, False, False, None),
    (True, None, True, True, None),
])
async def test_apply_default_workload_priority_class(
        kit: Any, parent: dict[str, Any], gate: bool, labels: dict[str, str] | None,
        wpc_exists: bool, owned: bool, want: str | None) -> None:
    obj = kit.make_job(namespace="managed-ns", labels=labels, owner=parent if owned else None)
    reader = kit.MemReader(*([WPC_DEFAULT] if wpc_exists else []))
    await apply_default_workload_priority_class(
        manager(), reader, obj, features=FeatureGates(WorkloadPriorityClassDefaulting=gate))
    assert obj["metadata"].get("labels", {}).get(WPC) == want


async def test_default_wpc_lookup_error_is_ignored(kit: Any) -> None:
    obj = kit.make_job()
    reader = kit.MemReader(fail=InternalError("x"))
    await apply_default_workload_priority_class(
        manager(), reader, obj, features=FeatureGates(WorkloadPriorityClassDefaulting=True))
    assert reader.gets == [("WorkloadPriorityClass", "default")]
    assert "labels" not in obj["metadata"]


LOOKUP = StaticQueueLookup(
    local_queues=[
        {"metadata": {"name": "multikueue", "namespace": "default"},
         "spec": {"clusterQueue": "cluster-queue"}},
        {"metadata": {"name": "queue", "namespace": "default"}, "spec": {"clusterQueue": "plain"}},
    ],
    cluster_queues=[
        {"metadata": {"name": "cluster-queue"},
         "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "ac"}]}}},
        {"metadata": {"name": "plain"}, "spec": {}},
    ],
    admission_checks=[{"metadata": {"name": "ac"},
                       "spec": {"controllerName": "kueue.x-k8s.io/multikueue"}}],
)


@pytest.mark.parametrize(("queue", "managed_by", "want"), [
    ("multikueue", None, "kueue.x-k8s.io/multikueue"),
    ("multikueue", "someone-else", "someone-else"),
    ("queue", None, None),
    ("missing", None, None),
    (None, None, None),
])
def test_apply_default_for_managed_by(kit: Any, queue: str | None, managed_by: str | None,
                                      want: str | None) -> None:
    obj = kit.make_job(labels={Q: queue} if queue else None)
    if managed_by:
        obj["spec"]["managedBy"] = managed_by
    job = kit.ManagedByJob(obj)
    apply_default_for_managed_by(job, LOOKUP)
    assert job.managed_by() == want


def test_managed_by_ignores_jobs_without_the_capability(kit: Any) -> None:
    job = kit.FakeJob(kit.make_job(labels={Q: "multikueue"}))
    apply_default_for_managed_by(job, LOOKUP)
    assert "managedBy" not in job.obj["spec"]
