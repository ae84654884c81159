"""The ``pkg/workload`` helpers the generic job reconciler relies on.

Reads work on :class:`~jobframework.api.Workload` models; writes go through a
:class:`~jobframework.runtime.client.Client` with Kueue's write methods:

- metadata and spec changes (finalizers, ``spec.active``, queue name, priority) are full
  updates (PUT, guarded by ``resourceVersion``);
- admission status (``Finished``, eviction clearing, on hold) is server-side applied
  with force under the field manager ``kueue-admission`` (:func:`apply_admission_status`):
  the body carries what Kueue's admission owns, so a field it omits (``status.admission``
  after an eviction) is removed;
- other status writes (``PodsReady``, reclaimable pods, custom conditions) are applied
  under their own field manager (:func:`apply_status`).

Status writes are *strict* by default, as Kueue's ``patching.PatchStatus`` and
``PatchAdmissionStatus``: they carry the Workload's ``resourceVersion``, so a write from a
stale read fails with a Conflict and the reconcile is retried. ``strict=False`` is Kueue's
``WithLooseOnApply`` (apply only; a merge patch always carries the version).

With the ``WorkloadRequestUseMergePatch`` gate, status writes are JSON merge patches
instead (``status.admission`` then explicitly set to null).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import constants as c
from .api.conditions import CONDITION_FALSE, CONDITION_TRUE, Condition, set_condition
from .api.workload import ReclaimablePod, Workload, WorkloadStatus
from .constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from .runtime import errors
from .runtime.client import Client, PatchType
from .runtime.clock import Clock, parse_time, rfc3339
from .runtime.objects import GVK, Object

WORKLOAD_GVK = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "Workload")
WORKLOAD_PRIORITY_CLASS_GVK = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "WorkloadPriorityClass")
PRIORITY_CLASS_GVK = GVK("scheduling.k8s.io", "v1", "PriorityClass")
RESOURCE_FLAVOR_GVK = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "ResourceFlavor")
NAMESPACE_GVK = GVK("", "v1", "Namespace")

#: Conditions Kueue's admission owns (``patching.PatchAdmissionStatus``).
ADMISSION_MANAGED_CONDITIONS = (
    c.WORKLOAD_QUOTA_RESERVED, c.WORKLOAD_BLOCKED_ON_PREEMPTION_GATES, c.WORKLOAD_EVICTED,
    c.WORKLOAD_ADMITTED, c.WORKLOAD_PREEMPTED, c.WORKLOAD_REQUEUED,
    c.WORKLOAD_DEACTIVATION_TARGET, c.WORKLOAD_FINISHED, c.WORKLOAD_PODS_READY,
)

#: Optional (pointer) status fields copied into the ``kueue-admission`` body when set.
_ADMISSION_STATUS_POINTERS = ("accumulatedPastExecutionTimeSeconds", "clusterName")
#: List status fields copied into the ``kueue-admission`` body when not empty.
_ADMISSION_STATUS_LISTS = (
    "nominatedClusterNames", "unhealthyNodes", "preemptionGates", "admissionChecks",
)


# --- reads --------------------------------------------------------------------------------


def from_object(obj: Mapping[str, Any]) -> Workload:
    """The Workload model of a JSON object."""
    return Workload.from_dict(dict(obj))


def key(wl: Workload) -> str:
    """``<namespace>/<name>`` (``workload.Key``)."""
    return f"{wl.namespace}/{wl.name}"


def has_quota_reservation(wl: Workload) -> bool:
    """``QuotaReserved=True``."""
    return wl.has_quota_reservation()


def is_admitted(wl: Workload) -> bool:
    """``Admitted=True``."""
    return wl.is_admitted()


def is_finished(wl: Workload) -> bool:
    """``Finished=True``."""
    return wl.is_finished()


def is_evicted(wl: Workload) -> bool:
    """``Evicted=True``."""
    return wl.is_evicted()


def is_active(wl: Workload) -> bool:
    """``spec.active`` unset or true."""
    return wl.is_active()


def has_all_checks_ready(wl: Workload) -> bool:
    """Every admission check is ``Ready`` (``HasAllChecksReady``)."""
    checks = (wl.status.admission_checks if wl.status else None) or []
    return all(ch.state == c.CHECK_STATE_READY for ch in checks)


def has_topology_assignments_pending(wl: Workload) -> bool:
    """Some pod set assignment has no topology assignment yet and its delayed topology
    request is still ``Pending`` (``HasTopologyAssignmentsPending``)."""
    admission = wl.status.admission if wl.status else None
    if admission is None:
        return False
    return any(a.topology_assignment is None and a.delayed_topology_request == "Pending"
               for a in admission.pod_set_assignments)


def is_evicted_due_to_deactivation_by_kueue(wl: Workload) -> bool:
    """Evicted with a ``DeactivatedDueTo...`` reason."""
    return wl.is_evicted_due_to_deactivation_by_kueue()


def owned_by_single_pod(wl: Workload) -> bool:
    """Exactly one owner reference, to a ``v1`` Pod (``OwnedBySinglePod``)."""
    refs = wl.metadata.owner_references or []
    return len(refs) == 1 and refs[0].api_version == "v1" and refs[0].kind == "Pod"


def reclaimable_pods_are_equal(a: Sequence[ReclaimablePod], b: Sequence[ReclaimablePod]) -> bool:
    """Same name→count pairs, order ignored (``ReclaimablePodsAreEqual``)."""
    if len(a) != len(b):
        return False
    ma = {p.name: p.count for p in a}
    return all(ma.get(p.name) == p.count for p in b) and len(ma) == len(a)


def limit_reclaimable_pods_to_pod_set_sizes(
    wl: Workload, pods: Iterable[ReclaimablePod]
) -> list[ReclaimablePod]:
    """Clamp each count to its pod set's count (``LimitReclaimablePodsToPodSetSizes``)."""
    sizes = {ps.name or c.DEFAULT_PODSET_NAME: ps.count for ps in wl.spec.pod_sets}
    out: list[ReclaimablePod] = []
    for p in pods:
        size = sizes.get(p.name)
        out.append(ReclaimablePod(name=p.name, count=min(p.count, size)
                                  if size is not None else p.count))
    return out


# --- in-memory condition changes ----------------------------------------------------------


def _conditions(wl: Workload) -> list[Condition]:
    if wl.status is None:
        wl.status = WorkloadStatus()
    if wl.status.conditions is None:
        wl.status.conditions = []
    return wl.status.conditions


def _generation(wl: Workload) -> int | None:
    return wl.metadata.generation or None


def new_condition(
    type_: str, status: str, reason: str, message: str, *, generation: int | None = None,
    now: dt.datetime | None = None,
) -> Condition:
    """A condition with a truncated message (``api.TruncateConditionMessage``)."""
    cond = Condition(type=type_, status=status, reason=reason,
                     message=c.truncate_condition_message(message))
    if generation:
        cond.observed_generation = generation
    if now is not None:
        cond.last_transition_time = rfc3339(now)
    return cond


def set_workload_condition(wl: Workload, cond: Condition, now: dt.datetime) -> bool:
    """``meta.SetStatusCondition`` on the Workload, stamping ``now`` when status changes."""
    return set_condition(_conditions(wl), cond, now=now)


def set_finished_condition(wl: Workload, reason: str, message: str, now: dt.datetime) -> bool:
    """``Finished=True`` with ``reason``/``message`` and ``observedGeneration``."""
    return set_workload_condition(wl, new_condition(
        c.WORKLOAD_FINISHED, CONDITION_TRUE, reason, message,
        generation=_generation(wl), now=now), now)


def set_requeued_condition(
    wl: Workload, reason: str, message: str, status: bool, now: dt.datetime
) -> bool:
    """``Requeued`` with the eviction's reason and message (``SetRequeuedCondition``)."""
    return set_workload_condition(wl, new_condition(
        c.WORKLOAD_REQUEUED, CONDITION_TRUE if status else CONDITION_FALSE, reason, message,
        generation=_generation(wl), now=now), now)


def sync_admitted_condition(
    wl: Workload, now: dt.datetime, *, features: FeatureGates = DEFAULT_FEATURES
) -> bool:
    """Make ``Admitted`` agree with reservation and checks (``SyncAdmittedCondition``).

    On a True→False transition the admitted time is added to
    ``status.accumulatedPastExecutionTimeSeconds``. The reasons follow the gate
    ``UnadmittedWorkloadsObservability`` and the version profile: under v0.19 (gate off
    by default) unready checks give ``UnsatisfiedChecks`` and, with the gate on, the
    condition is re-derived even when its status already agrees.
    """
    has_reservation = wl.has_quota_reservation()
    checks_ready = has_all_checks_ready(wl)
    topology_ready = not has_topology_assignments_pending(wl)
    admitted = wl.is_admitted()
    observability = features.enabled(FeatureGate.UNADMITTED_WORKLOADS_OBSERVABILITY)
    as_v0_19 = features.profile.admitted_sync_follows_observability
    if as_v0_19 and observability:
        # v0.19.2 keeps both conditions absent until something sets QuotaReserved.
        if (wl.find_condition(c.WORKLOAD_QUOTA_RESERVED) is None
                and wl.find_condition(c.WORKLOAD_ADMITTED) is None
                and not features.enabled(FeatureGate.UNADMITTED_WORKLOADS_EXPLICIT_STATUS)):
            return False
    elif admitted == (has_reservation and checks_ready and topology_ready):
        return False
    status, reason, message = CONDITION_TRUE, c.ADMITTED_REASON_ADMITTED, c.MSG_ADMITTED
    if not has_reservation and not checks_ready and not observability:
        status, reason = CONDITION_FALSE, c.ADMITTED_REASON_NO_RESERVATION_UNSATISFIED_CHECKS
        message = c.MSG_NO_RESERVATION_UNSATISFIED_CHECKS
    elif not has_reservation:
        status, reason, message = (CONDITION_FALSE, c.ADMITTED_REASON_NO_RESERVATION,
                                   c.MSG_NO_RESERVATION)
    elif not checks_ready:
        status, reason = CONDITION_FALSE, c.ADMITTED_REASON_UNSATISFIED_ADMISSION_CHECKS
        if as_v0_19 and not observability:
            reason = c.ADMITTED_REASON_UNSATISFIED_CHECKS
        message = "The workload has not all checks ready"
    elif not topology_ready:
        status, reason = CONDITION_FALSE, c.ADMITTED_REASON_PENDING_DELAYED_TOPOLOGY_REQUESTS
        message = "There are pending delayed topology requests"
    if admitted and status == CONDITION_FALSE:
        cond = wl.find_condition(c.WORKLOAD_ADMITTED)
        if cond is not None and cond.last_transition_time:
            elapsed = int((now - parse_time(cond.last_transition_time)).total_seconds())
            assert wl.status is not None
            wl.status.accumulated_past_execution_time_seconds = (
                (wl.status.accumulated_past_execution_time_seconds or 0) + elapsed)
    return set_workload_condition(wl, new_condition(
        c.WORKLOAD_ADMITTED, status, reason, message, generation=_generation(wl), now=now), now)


def unset_quota_reservation_with_condition(
    wl: Workload, reason: str, message: str, now: dt.datetime,
    *, features: FeatureGates = DEFAULT_FEATURES,
) -> bool:
    """``QuotaReserved=False``, no admission, ``Admitted`` re-synced
    (``UnsetQuotaReservationWithCondition``)."""
    changed = set_workload_condition(wl, new_condition(
        c.WORKLOAD_QUOTA_RESERVED, CONDITION_FALSE, reason, message,
        generation=_generation(wl), now=now), now)
    assert wl.status is not None
    if wl.status.admission is not None:
        wl.status.admission = None
        changed = True
    if sync_admitted_condition(wl, now, features=features):
        changed = True
    return changed


# --- writes ---------------------------------------------------------------------------------


def _base(wl: Workload) -> Object:
    """What identifies the Workload in a status apply (Kueue's ``baseSSAWorkload``).

    The uid, name and namespace, the generation and the labels and annotations, each left
    out when empty as Go's ``omitempty`` does; strict writes add the resourceVersion.
    """
    meta: dict[str, Any] = {}
    if wl.metadata.uid:
        meta["uid"] = wl.metadata.uid
    meta["name"] = wl.name
    meta["namespace"] = wl.namespace
    if wl.metadata.generation:
        meta["generation"] = wl.metadata.generation
    if wl.metadata.annotations:
        meta["annotations"] = dict(wl.metadata.annotations)
    if wl.metadata.labels:
        meta["labels"] = dict(wl.metadata.labels)
    return {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload", "metadata": meta}


def _status_dict(wl: Workload) -> dict[str, Any]:
    return wl.status.to_dict() if wl.status is not None else {}


async def _write_status(
    client: Client, wl: Workload, body: dict[str, Any], manager: str,
    features: FeatureGates, *, nulls: Sequence[str] = (), strict: bool = True,
) -> Object:
    if features.enabled(FeatureGate.WORKLOAD_REQUEST_USE_MERGE_PATCH):
        status = dict(body)
        if "conditions" in status:
            # A merge patch replaces lists whole: send every condition the Workload has.
            status["conditions"] = [cond.to_dict() for cond in wl.conditions()]
        for name in nulls:
            status.setdefault(name, None)
        patch: Object = {"status": status}
        if wl.metadata.resource_version:
            patch["metadata"] = {"resourceVersion": wl.metadata.resource_version}
        stored = await client.patch(WORKLOAD_GVK, wl.name, patch, namespace=wl.namespace,
                                    patch_type=PatchType.MERGE, subresource="status",
                                    field_manager=manager)
    else:
        applied = _base(wl)
        if strict and wl.metadata.resource_version:
            applied["metadata"]["resourceVersion"] = wl.metadata.resource_version
        applied["status"] = body
        stored = await client.apply(applied, field_manager=manager, force=True,
                                    subresource="status")
    # Later writes of the same in-memory Workload must not conflict with this one.
    wl.metadata.resource_version = (stored.get("metadata") or {}).get("resourceVersion")
    return stored


def admission_status_body(wl: Workload) -> dict[str, Any]:
    """The ``status`` Kueue's admission applies (``admissionStatusPatch`` +
    ``admissionChecksStatusPatch``), empty fields left out as Go's ``omitempty`` does.

    It holds the admission; the requeue state when it has a count or a time; the
    ``resourceRequests`` while there is no admission (an admission's assignments
    supersede them, so they are then left out); the admission-managed conditions in
    Kueue's order; the accumulated time, scheduling-stats evictions, cluster names,
    unhealthy nodes, preemption gates and admission checks. ``reclaimablePods`` and
    other conditions belong to other managers.
    """
    status = _status_dict(wl)
    body: dict[str, Any] = {}
    if status.get("admission") is not None:
        body["admission"] = status["admission"]
    requeue = status.get("requeueState") or {}
    if requeue.get("count") is not None or requeue.get("requeueAt") is not None:
        body["requeueState"] = requeue
    if status.get("admission") is None and status.get("resourceRequests"):
        body["resourceRequests"] = status["resourceRequests"]
    by_type = {cond.get("type"): cond for cond in status.get("conditions") or []}
    conditions = [by_type[t] for t in ADMISSION_MANAGED_CONDITIONS if t in by_type]
    if conditions:
        body["conditions"] = conditions
    for name in _ADMISSION_STATUS_POINTERS:
        if status.get(name) is not None:
            body[name] = status[name]
    if status.get("schedulingStats") is not None:
        evictions = status["schedulingStats"].get("evictions")
        body["schedulingStats"] = {"evictions": evictions} if evictions else {}
    for name in _ADMISSION_STATUS_LISTS:
        if status.get(name):
            body[name] = status[name]
    return body


async def apply_admission_status(
    client: Client, wl: Workload, *, features: FeatureGates = DEFAULT_FEATURES,
    strict: bool = True,
) -> Object:
    """Write what Kueue's admission owns, under ``kueue-admission`` (``PatchAdmissionStatus``).

    The body is :func:`admission_status_body`; a field it leaves out (say, a cleared
    ``admission``) is removed from the Workload when ``kueue-admission`` owned it alone.
    Strict (the Workload's ``resourceVersion`` is sent) unless ``strict=False``
    (``WithLooseOnApply``).
    """
    body = admission_status_body(wl)
    return await _write_status(client, wl, body, c.ADMISSION_NAME, features,
                               nulls=("admission",), strict=strict)


async def apply_status(
    client: Client, wl: Workload, body: dict[str, Any], field_manager: str,
    *, features: FeatureGates = DEFAULT_FEATURES, strict: bool = True,
    nulls: Sequence[str] = (),
) -> Object:
    """Apply ``body`` (a partial ``status``) under ``field_manager`` (``PatchStatus``);
    strict unless ``strict=False``. ``nulls`` names the fields a merge patch (the
    ``WorkloadRequestUseMergePatch`` gate) clears when ``body`` leaves them out."""
    return await _write_status(client, wl, body, field_manager, features, strict=strict,
                               nulls=nulls)


async def apply_conditions(
    client: Client, wl: Workload, conditions: Iterable[Condition], field_manager: str,
    now: dt.datetime, *, features: FeatureGates = DEFAULT_FEATURES,
) -> Object:
    """``PatchStatus`` whose update sets each of ``conditions`` (``meta.SetStatusCondition``).

    A server-side apply starts from an empty status (Kueue's ``baseSSAWorkload``), so each
    condition is sent as given: its own ``lastTransitionTime``, or ``now`` when it has
    none, whatever the stored condition of that type says; the Workload's own copy then
    takes the sent conditions, as the server stores them. With the
    ``WorkloadRequestUseMergePatch`` gate they are set on the Workload's conditions instead
    (a condition whose status did not change keeps its time) and all are sent.
    """
    if features.enabled(FeatureGate.WORKLOAD_REQUEST_USE_MERGE_PATCH):
        for cond in conditions:
            set_workload_condition(wl, cond.model_copy(deep=True), now)
        return await apply_status(client, wl, {"conditions": []}, field_manager,
                                  features=features)
    sent: list[Condition] = []
    for cond in conditions:
        set_condition(sent, cond.model_copy(deep=True), now=now)
    own = _conditions(wl)
    for cond in sent:
        index = next((i for i, x in enumerate(own) if x.type == cond.type), None)
        if index is None:
            own.append(cond.model_copy(deep=True))
        else:
            own[index] = cond.model_copy(deep=True)
    return await apply_status(client, wl, {"conditions": [x.to_dict() for x in sent]},
                              field_manager, features=features)


async def finish(
    client: Client, wl: Workload, reason: str, message: str, clock: Clock,
    *, features: FeatureGates = DEFAULT_FEATURES,
) -> None:
    """Mark the Workload ``Finished=True`` (``workload.Finish``); no-op when finished."""
    if wl.is_finished():
        return
    set_finished_condition(wl, reason, message, clock.now())
    await apply_admission_status(client, wl, features=features)


async def set_condition_and_update(
    client: Client, wl: Workload, cond: Condition, field_manager: str, clock: Clock,
    *, features: FeatureGates = DEFAULT_FEATURES,
) -> Object:
    """Set one condition and write it (``SetConditionAndUpdate``).

    The condition gets the Workload's generation as ``observedGeneration``, a truncated
    message and ``lastTransitionTime`` now: a server-side apply sends that time even when
    the stored condition's status is unchanged (see :func:`apply_conditions`).
    """
    now = clock.now()
    cond.observed_generation = _generation(wl)
    if cond.observed_generation is None:
        cond.__pydantic_fields_set__.discard("observed_generation")
    cond.message = c.truncate_condition_message(cond.message or "")
    cond.last_transition_time = rfc3339(now)
    return await apply_conditions(client, wl, [cond], field_manager, now, features=features)


async def update_reclaimable_pods(
    client: Client, wl: Workload, pods: Sequence[ReclaimablePod],
    *, features: FeatureGates = DEFAULT_FEATURES,
) -> Object:
    """Write ``status.reclaimablePods`` under ``kueue-reclaimable-pods``.

    No pods means no field in the body (Go's ``omitempty``): the apply then removes the
    list this manager owned; a merge patch sets it to null.
    """
    body = {"reclaimablePods": [p.to_dict() for p in pods]} if pods else {}
    return await apply_status(client, wl, body, c.RECLAIMABLE_PODS_MANAGER,
                              features=features, nulls=("reclaimablePods",))


async def update(client: Client, wl: Workload) -> Workload:
    """PUT the Workload (guarded by its resourceVersion); returns the stored one."""
    return from_object(await client.update(wl.to_dict()))


async def remove_finalizer(client: Client, wl: Workload) -> bool:
    """Drop ``kueue.x-k8s.io/resource-in-use`` with an update, only if present."""
    finalizers = wl.metadata.finalizers or []
    if c.RESOURCE_IN_USE_FINALIZER_NAME not in finalizers:
        return False
    remaining = [f for f in finalizers if f != c.RESOURCE_IN_USE_FINALIZER_NAME]
    wl.metadata.finalizers = remaining or None
    if not remaining:
        # Go's omitempty: no finalizers means no field at all.
        wl.metadata.__pydantic_fields_set__.discard("finalizers")
    stored = await client.update(wl.to_dict())
    wl.metadata.resource_version = (stored.get("metadata") or {}).get("resourceVersion")
    return True


async def delete(client: Client, wl: Workload) -> bool:
    """Remove the finalizer then delete unless already deleting (``workload.Delete``).

    Returns whether a delete was requested.
    """
    await remove_finalizer(client, wl)
    if wl.metadata.deletion_timestamp:
        return False
    await client.delete(WORKLOAD_GVK, wl.name, namespace=wl.namespace)
    return True


async def finalize_orphaned_workload(
    client: Client, wl: Workload, can_finish: bool, clock: Clock,
    *, features: FeatureGates = DEFAULT_FEATURES,
) -> None:
    """The owner is gone: finish (``OwnerNotFound``) and release the finalizer.

    Finishing needs the ``FinishOrphanedWorkloads`` gate, a Workload not being deleted and
    ``can_finish``; NotFound is tolerated on both writes.
    """
    if (features.enabled(FeatureGate.FINISH_ORPHANED_WORKLOADS)
            and not wl.metadata.deletion_timestamp and can_finish and not wl.is_finished()):
        set_finished_condition(wl, c.FINISHED_REASON_OWNER_NOT_FOUND, c.MSG_OWNER_NOT_FOUND,
                               clock.now())
        try:
            await apply_admission_status(client, wl, features=features)
        except errors.NotFound:
            return
    with contextlib.suppress(errors.NotFound):
        await remove_finalizer(client, wl)
