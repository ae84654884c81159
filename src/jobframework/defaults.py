"""Webhook defaulting of jobs (``defaults.go`` and ``WorkloadShouldBeSuspended``).

Each function edits the job in memory, as the base webhook's ``Default`` does, and reads
the cluster only where Kueue does (ancestors, the namespace, the default
WorkloadPriorityClass). The managedBy defaulting reads no API at all: it asks a
:class:`QueueLookup` (Kueue asks its in-memory queue manager and cache).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from . import constants as c
from .constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from .integrations import IntegrationManager
from .interface import GenericJob, JobWithManagedBy
from .runtime.client import Reader, get_read_only
from .runtime.objects import GVK, Object, is_being_deleted, namespace_of
from .runtime.selectors import LabelSelector
from .validation import queue_name_for_object, workload_priority_class_name

NAMESPACE_GVK = GVK("", "v1", "Namespace")
WORKLOAD_PRIORITY_CLASS_GVK = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "WorkloadPriorityClass")


async def namespace_matches_selector(
    reader: Reader, namespace: str, selector: LabelSelector | None
) -> bool:
    """Whether the namespace's labels match; a None selector matches every namespace.

    Raises ``RuntimeError("failed to get namespace: <err>")`` when the read fails.
    """
    if selector is None:
        return True
    try:
        ns = await get_read_only(reader, NAMESPACE_GVK, namespace)
    except Exception as err:
        raise RuntimeError(f"failed to get namespace: {err}") from err
    labels = (ns.get("metadata") or {}).get("labels") or {}
    return selector.matches(labels)


async def workload_should_be_suspended(
    manager: IntegrationManager,
    reader: Reader,
    obj: Object,
    manage_jobs_without_queue_name: bool,
    managed_jobs_namespace_selector: LabelSelector | None,
    *,
    deleting_object_tolerance: bool = False,
    features: FeatureGates = DEFAULT_FEATURES,
) -> bool:
    """Whether a new job must be created suspended (``WorkloadShouldBeSuspended``).

    False for jobs with a Kueue-managed ancestor (the reconciler suspends children); true
    for jobs with a queue name; for jobs without one, true when jobs without queue names
    are managed and the namespace matches the selector. With ``deleting_object_tolerance``
    (webhook call sites) and ``SkipAncestorCheckForDeletedWorkloads``, an object being
    deleted is never suspended and its (possibly gone) ancestors are not looked up.
    """
    if (deleting_object_tolerance
            and features.enabled(FeatureGate.SKIP_ANCESTOR_CHECK_FOR_DELETED_WORKLOADS)
            and is_being_deleted(obj)):
        return False
    ancestor = await manager.find_ancestor_job_managed_by_kueue(
        reader, obj, manage_jobs_without_queue_name)
    if ancestor is not None:
        return False
    if queue_name_for_object(obj):
        return True
    if manage_jobs_without_queue_name:
        return await namespace_matches_selector(
            reader, namespace_of(obj), managed_jobs_namespace_selector)
    return False


async def apply_default_for_suspend(
    manager: IntegrationManager,
    job: GenericJob,
    reader: Reader,
    manage_jobs_without_queue_name: bool,
    managed_jobs_namespace_selector: LabelSelector | None,
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> None:
    """Suspend the job when it should be (``ApplyDefaultForSuspend``)."""
    suspend = await workload_should_be_suspended(
        manager, reader, job.object(), manage_jobs_without_queue_name,
        managed_jobs_namespace_selector, deleting_object_tolerance=True, features=features)
    if suspend and not job.is_suspended():
        job.suspend()


async def apply_default_local_queue(
    manager: IntegrationManager,
    reader: Reader,
    obj: Object,
    default_queue_exist: Callable[[str], bool],
    managed_jobs_namespace_selector: LabelSelector | None,
) -> None:
    """Label the job ``kueue.x-k8s.io/queue-name: default`` when a ``default`` LocalQueue
    exists, the job has no queue name, its owner is not Kueue-managed and its namespace is
    managed (``ApplyDefaultLocalQueue``)."""
    if not default_queue_exist(namespace_of(obj)):
        return
    if queue_name_for_object(obj):
        return
    if manager.is_owner_managed_by_kueue_for_object(obj):
        return
    # The namespace is read only when the label is about to be set.
    if not await namespace_matches_selector(reader, namespace_of(obj),
                                            managed_jobs_namespace_selector):
        return
    obj.setdefault("metadata", {})
    labels = obj["metadata"].setdefault("labels", {})
    labels[c.QUEUE_LABEL] = c.DEFAULT_LOCAL_QUEUE_NAME


async def apply_default_workload_priority_class(
    manager: IntegrationManager,
    reader: Reader,
    obj: Object,
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> None:
    """Label the job ``kueue.x-k8s.io/priority-class: default`` when that
    WorkloadPriorityClass exists (gate ``WorkloadPriorityClassDefaulting``); lookup errors
    are ignored, as Kueue only logs them."""
    if not features.enabled(FeatureGate.WORKLOAD_PRIORITY_CLASS_DEFAULTING):
        return
    if workload_priority_class_name(obj):
        return
    if manager.is_owner_managed_by_kueue_for_object(obj):
        return
    try:
        await reader.get(WORKLOAD_PRIORITY_CLASS_GVK, c.DEFAULT_WORKLOAD_PRIORITY_CLASS_NAME)
    except Exception:
        # NotFound means there is no default; other errors Kueue only logs.
        return
    obj.setdefault("metadata", {})
    labels = obj["metadata"].setdefault("labels", {})
    labels[c.WORKLOAD_PRIORITY_CLASS_LABEL] = c.DEFAULT_WORKLOAD_PRIORITY_CLASS_NAME


@runtime_checkable
class QueueLookup(Protocol):
    """What managedBy defaulting needs to know about queues (no API calls).

    A lookup that also answers :class:`DefaultLocalQueueLookup` (both of ours do) gives
    the webhooks the ``default`` LocalQueue too, as Kueue's queue manager does.
    """

    def cluster_queue_for_local_queue(self, namespace: str, name: str) -> str | None:
        """The ClusterQueue a LocalQueue points at, or None when unknown."""

    def admission_check_controllers(self, cluster_queue: str) -> Iterable[str]:
        """``spec.controllerName`` of every admission check of a ClusterQueue."""


@runtime_checkable
class DefaultLocalQueueLookup(Protocol):
    """A queue lookup that knows whether a namespace has an active LocalQueue named
    ``default`` (Kueue's queue manager ``DefaultLocalQueueExist``)."""

    def default_local_queue_exist(self, namespace: str) -> bool:
        """Whether ``namespace`` has a LocalQueue named ``default`` that is not stopped."""


def default_local_queue_exist_of(queues: object) -> Callable[[str], bool] | None:
    """The ``default_local_queue_exist`` of a queue lookup, or None when it has none.

    The webhooks take it from their ``queues`` when not given one explicitly, so every
    caller that passes queues (the manager, ``setup_controllers``, ``setup_integration``)
    applies the ``default`` LocalQueue as Kueue does.
    """
    if isinstance(queues, DefaultLocalQueueLookup):
        return queues.default_local_queue_exist
    return None


def local_queue_is_active(local_queue: Mapping[str, Any]) -> bool:
    """Whether Kueue's queue manager holds the LocalQueue: ``spec.stopPolicy`` unset or
    ``None`` (a held or draining queue is taken out of the queueing system)."""
    policy = (local_queue.get("spec") or {}).get("stopPolicy")
    return policy is None or policy == "None"


class StaticQueueLookup:
    """A :class:`QueueLookup` over fixed LocalQueue, ClusterQueue and AdmissionCheck objects."""

    def __init__(
        self,
        local_queues: Iterable[Mapping[str, Any]] = (),
        cluster_queues: Iterable[Mapping[str, Any]] = (),
        admission_checks: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        # Kueue's queue manager holds only active LocalQueues: a stopped one feeds no
        # ClusterQueue and is no namespace's default.
        self._lq = {(namespace_of(q), (q.get("metadata") or {}).get("name", "")):
                    (q.get("spec") or {}).get("clusterQueue") for q in local_queues
                    if local_queue_is_active(q)}
        self._cq: dict[str, list[str]] = {}
        for cq in cluster_queues:
            rules = ((cq.get("spec") or {}).get("admissionChecksStrategy") or {}).get(
                "admissionChecks") or []
            self._cq[(cq.get("metadata") or {}).get("name", "")] = [
                r.get("name", "") for r in rules]
        self._ac = {(a.get("metadata") or {}).get("name", ""):
                    (a.get("spec") or {}).get("controllerName", "") for a in admission_checks}

    def cluster_queue_for_local_queue(self, namespace: str, name: str) -> str | None:
        """The ClusterQueue of a LocalQueue, or None."""
        return self._lq.get((namespace, name))

    def admission_check_controllers(self, cluster_queue: str) -> list[str]:
        """Controllers of the ClusterQueue's admission checks that exist."""
        return [self._ac[n] for n in self._cq.get(cluster_queue, []) if n in self._ac]

    def default_local_queue_exist(self, namespace: str) -> bool:
        """Whether ``namespace`` has an active LocalQueue named ``default``."""
        return (namespace, c.DEFAULT_LOCAL_QUEUE_NAME) in self._lq


def apply_default_for_managed_by(job: GenericJob, queues: QueueLookup) -> None:
    """Set ``managedBy: kueue.x-k8s.io/multikueue`` when the job's LocalQueue feeds a
    ClusterQueue with a MultiKueue admission check (``ApplyDefaultForManagedBy``)."""
    if not isinstance(job, JobWithManagedBy) or not job.can_default_managed_by():
        return
    obj = job.object()
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if c.QUEUE_LABEL not in labels:
        return
    cq = queues.cluster_queue_for_local_queue(namespace_of(obj), labels[c.QUEUE_LABEL])
    if cq is None:
        return
    if c.MULTIKUEUE_CONTROLLER_NAME in queues.admission_check_controllers(cq):
        job.set_managed_by(c.MULTIKUEUE_CONTROLLER_NAME)
