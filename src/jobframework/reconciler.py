"""The generic job reconciler: Kueue's ``ReconcileGenericJob`` for any :class:`GenericJob`.

One reconcile drives a job and its Workload one step toward agreement, level-based:

1. load the job; gone or being deleted ⇒ finish its orphaned Workloads (``OwnerNotFound``)
   and release their finalizers;
2. skip jobs in namespaces the ``managed_jobs_namespace_selector`` rejects, jobs without a
   queue name (unless ``manage_jobs_without_queue_name``), and suspend *child* jobs of a
   Kueue-managed ancestor until the ancestor's Workload is admitted;
3. make sure exactly one matching Workload exists (prebuilt, equivalent, updated in place
   for a suspended job, extras deleted), then keep its AdmissionGatedBy annotation and
   priority in sync with the job;
4. react to the Workload: finished ⇒ finalize; deleted ⇒ stop the job; job finished ⇒
   finish the Workload; none ⇒ create it; reclaimable pods and ``PodsReady`` ⇒ write them;
   evicted ⇒ stop the job, restore its templates and release the quota; admitted ⇒ start
   the job with the admission's pod set info; running without admission ⇒ stop it.

Conditions, events, field managers and error messages are Kueue's, byte for byte. Writes
to the job are JSON merge patches carrying the job's ``resourceVersion``; Workload spec and
metadata changes are updates; Workload status changes are server-side applies (see
:mod:`jobframework.workload`).

Elastic jobs (``kueue.x-k8s.io/elastic-job: "true"``) get workload slices: a scale-up of
an admitted job creates a replacement slice (see :mod:`jobframework.workloadslicing`). A
job that is also a :class:`~jobframework.composable.ComposableJob` is loaded, matched,
built, started and stopped through its own methods. Kueue's job metrics (workload
creation latency, time to ready) are recorded in :attr:`JobReconciler.metrics` (see
:mod:`jobframework.metrics`).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import attrs

from . import constants as c
from . import workload as wlpkg
from . import workloadslicing
from .api.base import ObjectMeta, OwnerReference
from .api.conditions import CONDITION_FALSE, CONDITION_TRUE, Condition, find_condition
from .api.workload import PodSet, PriorityClassRef, Workload, WorkloadSpec
from .composable import ComposableJob, evicted_stop_reason
from .constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from .field import go_quote
from .indexer import list_owned_workloads, setup_workload_owner_index
from .integrations import EventRecorderLike as EventRecorderLike
from .integrations import (
    IntegrationCallbacks,
    IntegrationError,
    IntegrationManager,
    ManagedOwnersChainLimitReachedError,
    parse_kind_arg,
)
from .integrations import ReconcilerFactory as ReconcilerFactory
from .interface import (
    GenericJob,
    JobWithCustomAnnotations,
    JobWithCustomQueueNameChange,
    JobWithCustomStop,
    JobWithCustomWorkloadActivation,
    JobWithCustomWorkloadConditions,
    JobWithFinalize,
    JobWithOnHold,
    JobWithPriorityClass,
    JobWithReclaimablePods,
    JobWithSkip,
    StopError,
    StopReason,
    TopLevelJob,
)
from .metrics import (
    JobMetrics,
    job_metrics_for,
    record_workload_creation_latency,
)
from .multikueue import should_skip_local_execution
from .naming import get_workload_name_for_owner_with_gvk
from .options import ReconcilerOptionOverrides as ReconcilerOptionOverrides
from .options import ReconcilerOptions as ReconcilerOptions
from .options import WorkloadRetentionPolicy as WorkloadRetentionPolicy
from .options import process_options as process_options
from .podset import (
    PodSetInfo,
    is_permanent,
    merge_into_template,
    pod_sets_info_from_status,
    pod_sets_info_from_workload_spec,
    sanitize_pod_sets,
)
from .queuelookup import CachedQueueLookup
from .reconcile_errors import ExtraWorkloadsError as ExtraWorkloadsError
from .reconcile_errors import NoMatchingWorkloadsError as NoMatchingWorkloadsError
from .reconcile_errors import PrebuiltWorkloadNotFoundError as PrebuiltWorkloadNotFoundError
from .reconcile_errors import ReconcileError as ReconcileError
from .reconcile_errors import UnretryableError as UnretryableError
from .reconcile_errors import is_unretryable_error as is_unretryable_error
from .runtime import errors
from .runtime.builder import ControllerBuilder
from .runtime.client import Client, PatchType, PropagationPolicy, get_read_only
from .runtime.client.discovery import NoKindMatchError
from .runtime.clock import Clock, parse_time
from .runtime.objects import (
    GVK,
    Object,
    annotations_of,
    is_being_deleted,
    json_copy,
    labels_of,
    name_of,
    namespace_of,
    owner_reference,
    resource_version_of,
    uid_of,
)
from .runtime.reconcile import Request, Result
from .runtime.workqueue import ItemExponentialFailureRateLimiter
from .validation import (
    is_valid_label_value,
    maximum_execution_time_seconds,
    prebuilt_workload_name_for,
    queue_name,
    queue_name_for_object,
    workload_priority_class_name,
)
from .workload import (
    NAMESPACE_GVK,
    PRIORITY_CLASS_GVK,
    WORKLOAD_GVK,
    WORKLOAD_PRIORITY_CLASS_GVK,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .config import Configuration

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"


# --- errors ---------------------------------------------------------------------------------


def _wrap(message: str, err: BaseException) -> ReconcileError:
    wrapped = ReconcileError(f"{message}: {err}")
    wrapped.__cause__ = err
    return wrapped


# --- job patches ----------------------------------------------------------------------------


def create_merge_patch(original: Any, modified: Any) -> Any:
    """The RFC 7386 merge patch turning ``original`` into ``modified`` (lists replaced)."""
    if not isinstance(original, dict) or not isinstance(modified, dict):
        return copy.deepcopy(modified)
    patch: dict[str, Any] = {}
    for k, v in modified.items():
        if k not in original:
            patch[k] = copy.deepcopy(v)
        elif original[k] != v:
            if isinstance(original[k], dict) and isinstance(v, dict):
                patch[k] = create_merge_patch(original[k], v)
            else:
                patch[k] = copy.deepcopy(v)
    for k in original:
        if k not in modified:
            patch[k] = None
    return patch


async def patch_object(
    client: Client, obj: Object, mutate: Callable[[], Awaitable[Any] | Any],
    *, subresource: str | None = None,
) -> None:
    """Mutate ``obj`` in place and send the difference as a merge patch (``clientutil.Patch``).

    The patch carries the object's ``resourceVersion`` (optimistic lock); ``obj`` is
    replaced by the stored object. If ``mutate`` raises, nothing is sent.
    """
    original = copy.deepcopy(obj)
    result = mutate()
    if inspect.isawaitable(result):
        await result
    patch = create_merge_patch(original, obj)
    if subresource == "status":
        patch = {"status": patch["status"]} if "status" in patch else {}
    if not patch:
        return
    patch.setdefault("metadata", {})["resourceVersion"] = resource_version_of(original)
    gvk = GVK.of(original)
    stored = await client.patch(gvk, name_of(original), patch,
                                namespace=namespace_of(original) or None,
                                patch_type=PatchType.MERGE, subresource=subresource)
    obj.clear()
    obj.update(stored)


# --- pod sets and equivalence -----------------------------------------------------------------


def _unset(model: Any, field: str) -> None:
    setattr(model, field, None)
    model.__pydantic_fields_set__.discard(field)


async def job_pod_sets(
    job: GenericJob, client: Client, *, features: FeatureGates = DEFAULT_FEATURES
) -> list[PodSet]:
    """``job.pod_sets()`` with env vars de-duplicated (``JobPodSets``), in place: the
    pod sets are the caller's (see :meth:`GenericJob.pod_sets`)."""
    pod_sets = list(await job.pod_sets(client))
    for ps in pod_sets:
        # ``template`` is required in the Workload API: always serialize it.
        ps.template = ps.template
    sanitize_pod_sets(pod_sets)
    if not features.enabled(FeatureGate.PARTIAL_ADMISSION):
        for ps in pod_sets:
            _unset(ps, "min_count")
    return pod_sets


_ZERO: tuple[Any, ...] = (None, "", 0, False, [], {})


def _is_zero(v: Any) -> bool:
    return any(v == z and type(v) is type(z) for z in _ZERO if z is not None) or v is None


_QUANTITY_MAPS = frozenset({"requests", "limits", "overhead", "capacity", "allocatable"})


def go_semantic_equal(a: Any, b: Any, *, quantities: bool = False) -> bool:
    """apimachinery's ``Semantic.DeepEqual`` over JSON decoded into Go structs.

    An absent field equals its zero value (``""``, ``0``, ``false``, nil/empty list or
    map), and values of resource maps (``requests``, ``limits``...) compare as quantities.
    """
    from .validation import quantity_value

    if a is b or (type(a) is type(b) and a == b):
        # Equal JSON is semantically equal (the common case: the job's pod sets against
        # its own Workload's), decided in C before walking the values one by one.
        return True
    if _is_zero(a) and _is_zero(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return all(go_semantic_equal(a.get(k), b.get(k),
                                     quantities=quantities or k in _QUANTITY_MAPS)
                   for k in {*a, *b})
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(go_semantic_equal(x, y)
                                        for x, y in zip(a, b, strict=True))
    if quantities and a != b:
        qa, qb = quantity_value(a), quantity_value(b)
        if qa is not None and qb is not None:
            return qa == qb
    return bool(a == b)


def compare_pod_sets(a: PodSet, b: PodSet, ignore_tolerations: bool) -> bool:
    """Kueue's ``ComparePodSets``: count, minCount, tolerations, (init)containers."""
    if a.count != b.count:
        return False
    if (a.min_count if a.min_count is not None else -1) != (
            b.min_count if b.min_count is not None else -1):
        return False
    sa = a.template.get("spec") or {}
    sb = b.template.get("spec") or {}
    if not ignore_tolerations and not go_semantic_equal(sa.get("tolerations"),
                                                         sb.get("tolerations")):
        return False
    return (go_semantic_equal(sa.get("initContainers"), sb.get("initContainers"))
            and go_semantic_equal(sa.get("containers"), sb.get("containers")))


def compare_pod_set_slices(
    a: Sequence[PodSet], b: Sequence[PodSet], ignore_tolerations: bool
) -> bool:
    """Kueue's ``ComparePodSetSlices``: same length, pairwise :func:`compare_pod_sets`."""
    return len(a) == len(b) and all(compare_pod_sets(x, y, ignore_tolerations)
                                    for x, y in zip(a, b, strict=True))


async def expected_running_pod_sets(
    client: Client, wl: Workload, *, features: FeatureGates = DEFAULT_FEATURES
) -> list[PodSet] | None:
    """The spec pod sets as they run once the admission is injected; None if unknown."""
    if not wl.has_quota_reservation():
        return None
    try:
        infos = await pod_sets_info_from_status(client, wl, features=features)
    except Exception:
        return None
    by_name = {i.name: i for i in infos or []}
    partial = wl.can_be_partially_admitted()
    # Only the template is changed in place (the merge) and ``count`` reassigned: a
    # shallow copy with its own template is enough.
    running = [ps.model_copy(update={"template": json_copy(ps.template)})
               for ps in wl.spec.pod_sets]
    for ps in running:
        info = by_name.get(ps.name or c.DEFAULT_PODSET_NAME)
        if info is None:
            return None
        try:
            merge_into_template(ps.template, info, features=features)
        except Exception:
            return None
        if partial and ps.min_count is not None:
            ps.count = info.count
    return running


async def equivalent_to_workload(
    client: Client, job: GenericJob, wl: Workload, *, features: FeatureGates = DEFAULT_FEATURES
) -> bool:
    """Whether ``wl`` still describes ``job`` (Kueue's ``EquivalentToWorkload``)."""
    obj = job.object()
    owner = wl.metadata.controller_ref()
    if owner is None or owner.name != name_of(obj):
        return False
    if features.enabled(FeatureGate.FINISH_ORPHANED_WORKLOADS) and owner.uid != uid_of(obj):
        return False
    wl_max = wl.spec.maximum_execution_time_seconds
    job_max = maximum_execution_time_seconds(job)
    if (wl_max if wl_max is not None else -1) != (job_max if job_max is not None else -1):
        return False
    pod_sets = await job_pod_sets(job, client, features=features)
    admitted = wl.is_admitted()
    running = await expected_running_pod_sets(client, wl, features=features)
    if running is not None:
        if compare_pod_set_slices(pod_sets, running, admitted):
            return True
        # Admitted but still suspended: compare with what was stored.
        return job.is_suspended() and compare_pod_set_slices(pod_sets, wl.spec.pod_sets,
                                                             admitted)
    return compare_pod_set_slices(pod_sets, wl.spec.pod_sets, admitted)


# --- priority -------------------------------------------------------------------------------


async def extract_priority(
    client: Client, recorder: EventRecorderLike, obj: Object, pod_sets: Sequence[PodSet],
    job: GenericJob | None = None, *, features: FeatureGates = DEFAULT_FEATURES,
) -> tuple[PriorityClassRef | None, int]:
    """The Workload's priority class and value for a job (``ExtractPriority``).

    The job's WorkloadPriorityClass label wins (a missing class raises NotFound; under the
    ``main`` version profile it also records a Warning ``WorkloadPriorityClassNotFound``
    event, which v0.19.2 never emits); else the job's own PriorityClass
    (``JobWithPriorityClass``) or the first pod template's ``priorityClassName``; else the
    lowest global-default PriorityClass; else 0.
    """
    wpc = workload_priority_class_name(obj)
    if wpc:
        try:
            found = await client.get(WORKLOAD_PRIORITY_CLASS_GVK, wpc)
        except errors.NotFound:
            if features.profile.records_priority_class_not_found:
                recorder.event(obj, WARNING, c.REASON_WORKLOAD_PRIORITY_CLASS_NOT_FOUND,
                               c.MSG_WPC_NOT_FOUND.format(wpc))
            raise
        return (PriorityClassRef(group=c.WORKLOAD_PRIORITY_CLASS_GROUP,
                                 kind=c.WORKLOAD_PRIORITY_CLASS_KIND, name=wpc),
                int(found.get("value") or 0))
    if job is not None and isinstance(job, JobWithPriorityClass):
        name = job.priority_class()
    else:
        name = next((n for ps in pod_sets
                     if (n := (ps.template.get("spec") or {}).get("priorityClassName"))), "")
    if not name:
        listed = await client.list(PRIORITY_CLASS_GVK)
        defaults = [pc for pc in listed.items if pc.get("globalDefault")]
        if not defaults:
            return None, 0
        best = min(defaults, key=lambda pc: int(pc.get("value") or 0))
        return (PriorityClassRef(group=c.POD_PRIORITY_CLASS_GROUP,
                                 kind=c.POD_PRIORITY_CLASS_KIND, name=name_of(best)),
                int(best.get("value") or 0))
    pc = await client.get(PRIORITY_CLASS_GVK, name)
    return (PriorityClassRef(group=c.POD_PRIORITY_CLASS_GROUP, kind=c.POD_PRIORITY_CLASS_KIND,
                             name=name), int(pc.get("value") or 0))


def propagate_admission_gated_by_annotation(
    obj: Object, wl: Workload, *, features: FeatureGates = DEFAULT_FEATURES
) -> bool:
    """Copy (or remove) ``kueue.x-k8s.io/admission-gated-by`` from the job; returns changed."""
    if not features.enabled(FeatureGate.ADMISSION_GATED_BY):
        return False
    value = annotations_of(obj).get(c.ADMISSION_GATED_BY_ANNOTATION)
    current = (wl.metadata.annotations or {}).get(c.ADMISSION_GATED_BY_ANNOTATION)
    if value == current:
        return False
    annotations = dict(wl.metadata.annotations or {})
    if value is None:
        annotations.pop(c.ADMISSION_GATED_BY_ANNOTATION, None)
    else:
        annotations[c.ADMISSION_GATED_BY_ANNOTATION] = value
    wl.metadata.annotations = annotations
    return True


# --- the reconciler -------------------------------------------------------------------------


class JobReconciler:
    """The generic reconciler state shared by every job kind (Kueue's ``JobReconciler``)."""

    def __init__(
        self,
        client: Client,
        recorder: EventRecorderLike,
        options: ReconcilerOptions | None = None,
        **overrides: Unpack[ReconcilerOptionOverrides],
    ) -> None:
        opts = process_options(options, **overrides)
        self.client = client
        self.recorder = recorder
        self.options = opts
        self.features = opts.features
        self.clock = opts.clock
        self.integration_manager = opts.integration_manager or IntegrationManager()
        self.manage_jobs_without_queue_name = opts.manage_jobs_without_queue_name
        self.managed_jobs_namespace_selector = opts.managed_jobs_namespace_selector
        self.wait_for_pods_ready = (opts.wait_for_pods_ready and not self.features.enabled(
            FeatureGate.DISABLE_WAIT_FOR_PODS_READY))
        self.label_keys_to_copy = opts.label_keys_to_copy
        self.annotations_to_copy = opts.annotations_to_copy
        self.workload_retention_policy = opts.workload_retention_policy
        #: Where Kueue's job metrics are recorded (see :mod:`jobframework.metrics`).
        self.metrics = opts.metrics if opts.metrics is not None else JobMetrics(
            local_queue_metrics=opts.local_queue_metrics)

    def _event(self, obj: Object, type_: str, reason: str, message: str) -> None:
        self.recorder.event(obj, type_, reason, message)

    # -- entry point -------------------------------------------------------------------

    async def reconcile_generic_job(self, request: Request, job: GenericJob) -> Result:
        """Reconcile one job (``ReconcileGenericJob``); raises to be retried."""
        try:
            return await self._reconcile(request, job)
        except Exception as err:
            if is_unretryable_error(err):
                log.debug("unretryable error for %s: %s", request, err)
                return Result()
            raise

    async def _reconcile(self, req: Request, job: GenericJob) -> Result:
        obj = job.object()
        # 1. Load the job (a ComposableJob loads its members itself).
        if isinstance(job, ComposableJob):
            should_finalize = await job.load(self.client, req.key)
        else:
            try:
                fetched = await self.client.get(job.gvk(), req.name, namespace=req.namespace)
            except errors.NotFound:
                should_finalize = True
                obj.clear()
            else:
                obj.clear()
                obj.update(fetched)
                should_finalize = is_being_deleted(obj)
        # 2. Skip.
        if isinstance(job, JobWithSkip) and job.skip():
            return Result()
        # 3. Finalize.
        if should_finalize:
            await self._finalize(req, job)
            return Result()
        # 4-5. Namespace selector, always respected.
        try:
            ns = await get_read_only(self.client, NAMESPACE_GVK, req.namespace)
        except errors.NotFound:
            log.debug("namespace %s not found; skipping selector check", req.namespace)
            return Result()
        selector = self.managed_jobs_namespace_selector
        if selector is not None and not selector.matches(labels_of(ns)):
            return Result()
        # 6. Top-level detection.
        ancestor: Object | None = None
        if isinstance(job, TopLevelJob) and job.is_top_level():
            is_top_level = True
        else:
            try:
                ancestor = await self.integration_manager.find_ancestor_job_managed_by_kueue(
                    self.client, obj, self.manage_jobs_without_queue_name)
            except ManagedOwnersChainLimitReachedError:
                self._event(obj, WARNING, c.REASON_JOB_NESTING_TOO_DEEP,
                            c.MSG_JOB_NESTING_TOO_DEEP)
                raise
            is_top_level = ancestor is None
        # 7. Queue-name and selector gating.
        if not self.manage_jobs_without_queue_name and not queue_name(job):
            if is_top_level or not queue_name_for_object(ancestor or {}):
                return Result()
        elif self.manage_jobs_without_queue_name and not queue_name(job):
            ns = await get_read_only(self.client, NAMESPACE_GVK, req.namespace)
            if selector is not None and not selector.matches(labels_of(ns)):
                return Result()
        if not is_top_level:
            assert ancestor is not None
            await self._handle_child_job(job, obj, ancestor)
            return Result()
        # 8. Exactly one workload.
        wl = await self._ensure_one_workload(job, obj)
        return await self._reconcile_with_workload(job, obj, wl)

    async def _reconcile_with_workload(
        self, job: GenericJob, obj: Object, wl: Workload | None
    ) -> Result:
        now = self.clock.now
        # 9.1 Custom conditions.
        if isinstance(job, JobWithCustomWorkloadConditions) and wl is not None:
            conditions, updated = job.custom_workload_conditions(wl)
            if updated:
                await wlpkg.apply_conditions(
                    self.client, wl, conditions,
                    c.custom_conditions_field_manager(job.gvk().kind), now(),
                    features=self.features)
                return Result()
        # 9.2 Custom activation.
        if isinstance(job, JobWithCustomWorkloadActivation) and wl is not None:
            active = job.is_workload_active()
            if wl.is_active() != active:
                wl.spec.active = active
                wl = await wlpkg.update(self.client, wl)
        # 9.3 Workload finished.
        if wl is not None and wl.is_finished():
            await self._finalize_job(job)
            self._event(obj, NORMAL, c.REASON_FINISHED_WORKLOAD,
                        c.MSG_WORKLOAD_FINISHED.format(wlpkg.key(wl)))
            await wlpkg.remove_finalizer(self.client, wl)
            return Result()
        # 9.4 Workload being deleted.
        if wl is not None and wl.metadata.deletion_timestamp:
            await self._stop_job(job, wl, StopReason.WORKLOAD_DELETED, c.MSG_WORKLOAD_DELETED)
            await wlpkg.remove_finalizer(self.client, wl)
            return Result()
        # 9.5 On hold.
        if isinstance(job, JobWithOnHold) and job.is_on_hold():
            if (wl is not None and wl.has_quota_reservation()
                    and wlpkg.unset_quota_reservation_with_condition(
                        wl, c.WORKLOAD_ON_HOLD, c.MSG_JOB_ON_HOLD, now(), features=self.features)):
                try:
                    await wlpkg.apply_admission_status(self.client, wl, features=self.features)
                except errors.ApiError as err:  # returned: the reconcile is retried
                    raise _wrap("putting workload on hold", err) from err
            return Result()
        # 9.6 Job finished.
        message, success, finished = job.finished()
        if finished:
            if wl is not None and not wl.is_finished():
                reason = c.FINISHED_REASON_SUCCEEDED if success else c.FINISHED_REASON_FAILED
                with contextlib.suppress(errors.NotFound):
                    await wlpkg.finish(self.client, wl, reason, message, self.clock,
                                       features=self.features)
                self._event(obj, NORMAL, c.REASON_FINISHED_WORKLOAD,
                            c.MSG_WORKLOAD_FINISHED.format(wlpkg.key(wl)))
            await self._finalize_job(job)
            return Result()
        # 9.7 No workload.
        if wl is None:
            return await self._handle_job_with_no_workload(job, obj)
        # 9.8 Reclaimable pods.
        if (self.features.enabled(FeatureGate.RECLAIMABLE_PODS)
                and isinstance(job, JobWithReclaimablePods)):
            pods = wlpkg.limit_reclaimable_pods_to_pod_set_sizes(
                wl, await job.reclaimable_pods(self.client))
            current = (wl.status.reclaimable_pods if wl.status else None) or []
            if not wlpkg.reclaimable_pods_are_equal(pods, current):
                await wlpkg.update_reclaimable_pods(self.client, wl, pods,
                                                    features=self.features)
                return Result()
        # 9.9 PodsReady.
        if self.wait_for_pods_ready:
            cond = await self._pods_ready_condition(job, wl)
            if not _has_condition_with_type_and_reason(wl, cond):
                ready_at = self.clock.now()
                try:
                    await wlpkg.set_condition_and_update(
                        self.client, wl, cond, c.PODS_READY_FIELD_MANAGER, self.clock,
                        features=self.features)
                except errors.NotFound:
                    return Result()
                # Time to ready: only the first start, not a recovery.
                if cond.status == CONDITION_TRUE and cond.reason == c.WORKLOAD_STARTED:
                    await self.metrics.record_pods_ready(self.client, wl, ready_at, self.clock)
                return Result()
        # 9.10 Eviction.
        evicted = wl.find_condition(c.WORKLOAD_EVICTED)
        if evicted is not None and evicted.status == CONDITION_TRUE:
            return await self._handle_eviction(job, obj, wl, evicted)
        # 9.11 Suspended job.
        if job.is_suspended():
            if wl.is_admitted():
                try:
                    await self._start_job(job, obj, wl)
                except Exception as err:
                    if is_permanent(err):
                        await wlpkg.finish(self.client, wl, c.FAILED_TO_START_FINISHED_REASON,
                                           str(err), self.clock, features=self.features)
                        return Result()
                    raise
                return Result()
            if wl.has_quota_reservation():
                self._record_admission_check_update(obj, wl, job)
            if isinstance(job, JobWithCustomQueueNameChange):
                await job.custom_queue_name_change(self.client, wl)
            else:
                await queue_name_change(self.client, job, wl)
            return Result()
        # 9.12 Running without admission (an elastic job's pods wait on scheduling gates).
        if not wl.is_admitted() and not workloadslicing.enabled(obj, features=self.features):
            await self._stop_job(job, wl, StopReason.NOT_ADMITTED, c.MSG_NOT_ADMITTED)
        return Result()

    # -- steps ---------------------------------------------------------------------------

    async def _finalize(self, req: Request, job: GenericJob) -> None:
        try:
            if isinstance(job, ComposableJob):
                children = await job.list_child_workloads(self.client, req.key)
            else:
                children = [wlpkg.from_object(item) for item in await list_owned_workloads(
                    self.client, job.gvk(), req.namespace, req.name)]
            for wl in children:
                await wlpkg.finalize_orphaned_workload(
                    self.client, wl, wl.metadata.controller_ref() is not None, self.clock,
                    features=self.features)
            if job.object() and is_being_deleted(job.object()):
                await self._finalize_job(job)
        except errors.NotFound:
            pass

    async def _finalize_job(self, job: GenericJob) -> None:
        if isinstance(job, JobWithFinalize):
            await job.finalize(self.client)

    async def _handle_child_job(self, job: GenericJob, obj: Object, ancestor: Object) -> None:
        if job.finished().finished or job.is_suspended():
            return
        if await self._should_suspend_child_job(obj, ancestor):
            await patch_object(self.client, obj, job.suspend)
            self._event(obj, NORMAL, c.REASON_SUSPENDED, c.MSG_CHILD_JOB_SUSPENDED)

    async def _should_suspend_child_job(self, obj: Object, ancestor: Object) -> bool:
        wls = await workloadslicing.find_not_finished_workloads(self.client, ancestor,
                                                                GVK.of(ancestor))
        if not wls:
            return True
        latest = wls[-1]
        if (workloadslicing.enabled(obj, features=self.features)
                or workloadslicing.enabled(ancestor, features=self.features)):
            return latest.is_evicted()
        return not latest.is_admitted()

    async def _ensure_one_workload(self, job: GenericJob, obj: Object) -> Workload | None:
        prebuilt = prebuilt_workload_name_for(obj, features=self.features)
        if prebuilt:
            return await self._ensure_prebuilt_workload(job, obj, prebuilt)
        if workloadslicing.enabled(obj, features=self.features):
            compatible, slice_wl = await self._ensure_workload_slices(job, obj)
            if compatible:
                return slice_wl
        match, to_delete = await self._find_matching_workloads(job, obj)
        to_update: Workload | None = None
        if (match is None and to_delete and job.is_suspended()
                and not to_delete[0].has_quota_reservation()):
            to_update = to_delete.pop(0)
        if match is None and not job.is_suspended() and not job.finished().finished:
            w = to_delete[0] if len(to_delete) == 1 else None
            msg = c.MSG_MISSING_WORKLOAD if w is None else c.MSG_NO_MATCHING_WORKLOAD
            try:
                await self._stop_job(job, w, StopReason.NO_MATCHING_WORKLOAD, msg)
            except Exception as err:
                raise _wrap("stopping job with no matching workload", err) from err
        deleted = 0
        for wl in to_delete:
            try:
                requested = await wlpkg.delete(self.client, wl)
            except errors.NotFound:
                continue
            except errors.ApiError as err:
                raise _wrap("deleting not matching workload", err) from err
            if requested:
                deleted += 1
                self._event(obj, NORMAL, c.REASON_DELETED_WORKLOAD,
                            c.MSG_DELETED_NOT_MATCHING_WORKLOAD.format(wlpkg.key(wl)))
        if deleted:
            if match is None:
                raise NoMatchingWorkloadsError(len(to_delete))
            raise ExtraWorkloadsError(len(to_delete))
        if to_update is not None:
            return await self._update_workload_to_match_job(job, obj, to_update)
        if match is not None:
            await self._update_admission_gated_by(obj, match)
            await update_workload_priority(
                self.client, self.recorder, job, [match], features=self.features)
        return match

    async def _ensure_prebuilt_workload(
        self, job: GenericJob, obj: Object, name: str
    ) -> Workload | None:
        try:
            wl = wlpkg.from_object(await self.client.get(
                WORKLOAD_GVK, name, namespace=namespace_of(obj)))
        except errors.NotFound:
            return None
        owner = wl.metadata.controller_ref()
        if owner is not None and owner.uid != uid_of(obj):
            log.info("the workload %s is already owned by another object", wlpkg.key(wl))
            return None
        if isinstance(job, ComposableJob):
            await job.ensure_workload_owned_by_all_members(self.client, self.recorder, wl)
        else:
            wl = await ensure_prebuilt_workload_ownership(self.client, wl, obj)
        # A scale-up's replacement slice describes the job as it is about to become, not
        # as it is: finishing it OutOfSync would drop the remote objects of a job that
        # has not been synced yet (MultiKueue workers), so it is taken as it is.
        if workloadslicing.enabled(obj, features=self.features) and workloadslicing.scaled_up(wl):
            log.debug("workload slice %s: skipping the prebuilt in-sync check", wlpkg.key(wl))
            return wl
        if isinstance(job, ComposableJob):
            equivalent = await job.equivalent_to_workload(self.client, wl)
        else:
            equivalent = await equivalent_to_workload(self.client, job, wl,
                                                      features=self.features)
        if not equivalent:
            await wlpkg.finish(self.client, wl, c.FINISHED_REASON_OUT_OF_SYNC,
                               c.MSG_PREBUILT_OUT_OF_SYNC, self.clock, features=self.features)
            return None
        return wl

    async def _find_matching_workloads(
        self, job: GenericJob, obj: Object
    ) -> tuple[Workload | None, list[Workload]]:
        del obj  # the job's own object
        if isinstance(job, ComposableJob):
            return await job.find_matching_workloads(self.client, self.recorder)
        return await find_matching_workloads(self.client, job, features=self.features)

    async def _update_workload_to_match_job(
        self, job: GenericJob, obj: Object, wl: Workload
    ) -> Workload:
        try:
            new_wl = await self._construct_workload(job)
        except Exception as err:
            raise _wrap("can't construct workload for update", err) from err
        await self._prepare_workload(job, obj, new_wl, wl.spec.active)
        wl.spec = new_wl.spec
        try:
            updated = await wlpkg.update(self.client, wl)
        except errors.ApiError as err:
            raise _wrap("updating existed workload", err) from err
        self._event(obj, NORMAL, c.REASON_UPDATED_WORKLOAD,
                    c.MSG_UPDATED_NOT_MATCHING_WORKLOAD.format(wlpkg.key(wl)))
        return updated

    async def _update_admission_gated_by(self, obj: Object, wl: Workload) -> None:
        await update_admission_gated_by(self.client, self.recorder, obj, wl,
                                        features=self.features)

    async def _construct_workload(self, job: GenericJob) -> Workload:
        if isinstance(job, ComposableJob):
            return await job.construct_composable_workload(
                self.client, self.recorder, self.label_keys_to_copy, self.annotations_to_copy)
        return await construct_workload(self.client, job, self.label_keys_to_copy,
                                        self.annotations_to_copy, features=self.features)

    async def _prepare_workload(
        self, job: GenericJob, obj: Object, wl: Workload, active: bool | None
    ) -> None:
        propagate_admission_gated_by_annotation(obj, wl, features=self.features)
        await prepare_workload_priority(self.client, self.recorder, obj, wl, job,
                                        features=self.features)
        if not self.features.enabled(FeatureGate.PARTIAL_ADMISSION):
            for ps in wl.spec.pod_sets:
                _unset(ps, "min_count")
        if workloadslicing.enabled(obj, features=self.features):
            await workloadslicing.prepare_workload_slice(self.client, obj, job.gvk(), wl)
        elif active is not None:
            wl.spec.active = active

    # -- elastic jobs (workload slices, see :mod:`jobframework.workloadslicing`) ---------

    async def _ensure_workload_slices(
        self, job: GenericJob, obj: Object
    ) -> tuple[bool, Workload | None]:
        """The workload slice of an elastic job (the reconciler's part of
        ``EnsureWorkloadSlices``): the job's custom annotations, then
        :func:`~jobframework.workloadslicing.ensure_workload_slices`, then the priority.

        Returns ``(compatible, wl)``: not compatible ⇒ use the ordinary matching; a
        compatible ``None`` ⇒ a new slice is to be created.
        """
        try:
            pod_sets = await job_pod_sets(job, self.client, features=self.features)
        except Exception as err:
            raise _wrap("failed to retrieve pod sets from job", err) from err
        if isinstance(job, JobWithCustomAnnotations):
            try:
                extra = await job.get_custom_annotations(self.client, pod_sets)
            except Exception as err:
                raise _wrap("failed to get custom annotations based on pod sets from job "
                            f"{name_of(obj)}", err) from err
            if any(annotations_of(obj).get(k) != v for k, v in extra.items()):
                try:
                    await patch_object(self.client, obj, lambda: obj.setdefault(
                        "metadata", {}).setdefault("annotations", {}).update(extra))
                except Exception as err:
                    raise _wrap(f"failed to update custom annotations on job {name_of(obj)}",
                                err) from err
        wl, compatible = await workloadslicing.ensure_workload_slices(
            self.client, self.clock, pod_sets, obj, job.gvk(), features=self.features)
        if compatible:
            await self._sync_workload_slice_priority(job, wl)
        return compatible, wl

    async def _sync_workload_slice_priority(self, job: GenericJob, wl: Workload | None) -> None:
        """Follow a priority-class label change on the live slices
        (``syncWorkloadSlicePriority``): ``wl`` and the quota-reserved slice it waits
        behind, if another."""
        targets = [wl] if wl is not None else []
        retained = await workloadslicing.find_latest_active_workload(
            self.client, job.object(), job.gvk())
        if retained is not None and (wl is None or retained.name != wl.name):
            targets.append(retained)
        if targets:
            await update_workload_priority(self.client, self.recorder, job, targets,
                                           features=self.features)

    async def _handle_job_with_no_workload(self, job: GenericJob, obj: Object) -> Result:
        prebuilt = prebuilt_workload_name_for(obj, features=self.features)
        if prebuilt:
            await self._stop_job(job, None, StopReason.NO_MATCHING_WORKLOAD,
                                 c.MSG_PREBUILT_MISSING)
        if job.is_active() and not workloadslicing.enabled(obj, features=self.features):
            log.debug("job is suspended but still has active pods, waiting")
            return Result()
        if prebuilt:
            raise PrebuiltWorkloadNotFoundError()
        wl = await self._construct_workload(job)
        if workloadslicing.enabled(obj, features=self.features):
            wl.metadata.name = workloadslicing.new_workload_slice_name(
                job, features=self.features)
        await self._prepare_workload(job, obj, wl, None)
        try:
            created = await self.client.create(wl.to_dict())
        except errors.AlreadyExists:
            # Most often our previous pass created it and the cache has not seen it yet:
            # requeue with backoff (as Go's returned error would) but without an error
            # log and traceback; the next pass finds it through the owner index.
            log.info("workload %s already exists, not yet in the cache; requeuing",
                     wlpkg.key(wl))
            return Result(requeue=True)
        self._event(obj, NORMAL, c.REASON_CREATED_WORKLOAD,
                    c.MSG_CREATED_WORKLOAD.format(wlpkg.key(wl)))
        record_workload_creation_latency(self.metrics, obj, job.gvk().kind,
                                         wlpkg.from_object(created), features=self.features)
        return Result()

    async def _pods_ready_condition(self, job: GenericJob, wl: Workload) -> Condition:
        def cond(status: str, reason: str, message: str) -> Condition:
            return Condition(type=c.WORKLOAD_PODS_READY, status=status, reason=reason,
                             message=message)

        not_ready = (CONDITION_FALSE, c.WORKLOAD_WAIT_FOR_START, c.MSG_PODS_READY_WAIT_FOR_START)
        if not wl.is_admitted():
            return cond(*not_ready)
        previous = wl.find_condition(c.WORKLOAD_PODS_READY)
        if await job.pods_ready(self.client):
            reason = c.WORKLOAD_STARTED
            if previous is not None and previous.reason in (c.WORKLOAD_WAIT_FOR_RECOVERY,
                                                            c.WORKLOAD_RECOVERED):
                reason = c.WORKLOAD_RECOVERED
            return cond(CONDITION_TRUE, reason, c.MSG_PODS_READY_RUNNING)
        recovering = (CONDITION_FALSE, c.WORKLOAD_WAIT_FOR_RECOVERY,
                      c.MSG_PODS_READY_WAIT_FOR_RECOVERY)
        if previous is None:
            return cond(*not_ready)
        if previous.status == CONDITION_TRUE or previous.reason == c.WORKLOAD_WAIT_FOR_RECOVERY:
            return cond(*recovering)
        return cond(*not_ready)

    async def _handle_eviction(
        self, job: GenericJob, obj: Object, wl: Workload, evicted: Condition
    ) -> Result:
        message = evicted.message or ""
        reason = evicted.reason or ""
        await self._stop_job(job, wl, StopReason.WORKLOAD_EVICTED, message)
        if wl.has_quota_reservation() and not job.is_active():
            requeued = reason in (c.EVICTED_BY_PREEMPTION, c.EVICTED_DUE_TO_NODE_FAILURES)
            if (self.features.enabled(FeatureGate.SKIP_REASSIGNMENT_FOR_POD_OWNED_WORKLOADS)
                    and wlpkg.owned_by_single_pod(wl)
                    and (wl.metadata.annotations or {}).get(
                        c.IS_GROUP_WORKLOAD_ANNOTATION_KEY) != "true"):
                requeued = False
            now = self.clock.now()
            updated = wlpkg.set_requeued_condition(wl, reason, message, requeued, now)
            pending = (c.QUOTA_RESERVED_REASON_PENDING_EVALUATION if self.features.enabled(
                FeatureGate.UNADMITTED_WORKLOADS_OBSERVABILITY) else c.WORKLOAD_PENDING)
            if wlpkg.unset_quota_reservation_with_condition(wl, pending, message, now,
                                                            features=self.features):
                updated = True
            if updated:
                try:
                    await wlpkg.apply_admission_status(self.client, wl, features=self.features,
                                                       strict=True)
                except errors.ApiError as err:
                    raise _wrap("clearing admission", err) from err
        return await self._handle_workload_after_deactivated_policy(job, obj, wl)

    async def _handle_workload_after_deactivated_policy(
        self, job: GenericJob, obj: Object, wl: Workload
    ) -> Result:
        policy = self.workload_retention_policy
        if policy is None or policy.after_deactivated_by_kueue is None:
            return Result()
        if wl.is_active() or not wl.is_evicted_due_to_deactivation_by_kueue():
            return Result()
        evicted = wl.find_condition(c.WORKLOAD_EVICTED)
        assert evicted is not None
        since = parse_time(evicted.last_transition_time or "")
        remaining = (since - self.clock.now()).total_seconds() + policy.after_deactivated_by_kueue
        if remaining > 0:
            return Result(requeue_after=remaining)
        try:
            await self.client.delete(job.gvk(), name_of(obj), namespace=namespace_of(obj),
                                     propagation_policy=PropagationPolicy.BACKGROUND)
        except errors.NotFound:
            return Result()
        self._event(obj, NORMAL, c.REASON_DELETED, c.MSG_DEACTIVATION_RETENTION_DELETED)
        await self._finalize_job(job)
        return Result()

    async def _start_job(self, job: GenericJob, obj: Object, wl: Workload) -> None:
        infos = await pod_sets_info_from_status(self.client, wl, features=self.features)
        assert wl.status is not None and wl.status.admission is not None
        msg = c.MSG_ADMITTED_BY_CLUSTER_QUEUE.format(wl.status.admission.cluster_queue)
        if isinstance(job, ComposableJob):
            if (self.features.enabled(FeatureGate.MULTIKUEUE)
                    and await should_skip_local_execution(self.client, wl)):
                log.debug("workload %s has a MultiKueue admission check, not run locally",
                          wlpkg.key(wl))
                return
            await job.run(self.client, wl, infos or [], self.recorder, msg)
            return

        async def run() -> None:
            await job.run_with_pod_sets_info(self.client, infos or [])

        await patch_object(self.client, obj, run)
        self._event(obj, NORMAL, c.REASON_STARTED, msg)

    async def _stop_job(
        self, job: GenericJob, wl: Workload | None, reason: StopReason, message: str
    ) -> None:
        obj = job.object()
        infos = pod_sets_info_from_workload_spec(wl.spec.pod_sets) if wl is not None else None
        # Checked first: a ComposableJob's ``stop`` would also pass for JobWithCustomStop.
        # A custom stop that failed after stopping something raises StopError: what it
        # stopped still gets its event (Go records stoppedNow, then returns the error).
        failure: Exception | None = None
        if isinstance(job, ComposableJob):
            try:
                stopped = await job.stop(self.client, infos or [],
                                         evicted_stop_reason(reason, wl), message)
            except StopError as err:
                stopped, failure = err.stopped, err.error
            for member in stopped:
                self._event(member, NORMAL, c.REASON_STOPPED, c.truncate_event_message(message))
            if failure is not None:
                raise failure
            return
        if isinstance(job, JobWithCustomStop):
            try:
                stopped_now = await job.stop(self.client, infos or [], reason, message)
            except StopError as err:
                stopped_now, failure = err.stopped_now, err.error
            if stopped_now:
                self._event(obj, NORMAL, c.REASON_STOPPED, c.truncate_event_message(message))
            if failure is not None:
                raise failure
            return
        if job.is_suspended():
            return

        def stop() -> None:
            job.suspend()
            if infos:
                job.restore_pod_sets_info(infos)

        await patch_object(self.client, obj, stop)
        self._event(obj, NORMAL, c.REASON_STOPPED, c.truncate_event_message(message))

    def _record_admission_check_update(
        self, obj: Object, wl: Workload, job: GenericJob | None = None
    ) -> None:
        checks = (wl.status.admission_checks if wl.status else None) or []
        parts = [f"{ch.name}: {ch.message}" for ch in checks
                 if ch.state == c.CHECK_STATE_PENDING and ch.message]
        if parts:
            message = c.truncate_event_message("; ".join(parts))
            if isinstance(job, ComposableJob):
                job.for_each(lambda member: self._event(
                    member, NORMAL, c.REASON_UPDATED_ADMISSION_CHECK, message))
            else:
                self._event(obj, NORMAL, c.REASON_UPDATED_ADMISSION_CHECK, message)


def _set_annotations(obj: Object, annotations: Mapping[str, str] | None) -> None:
    meta = obj.setdefault("metadata", {})
    if annotations:
        meta["annotations"] = dict(annotations)
    else:
        meta.pop("annotations", None)


def _has_condition_with_type_and_reason(wl: Workload, cond: Condition) -> bool:
    found = find_condition(wl.conditions(), cond.type)
    return found is not None and found.status == cond.status and found.reason == cond.reason


# --- module-level helpers (exported in Kueue) --------------------------------------------------


async def queue_name_change(client: Client, job: GenericJob, wl: Workload) -> None:
    """Update ``spec.queueName`` when the job's queue label changed (``QueueNameChange``)."""
    want = queue_name(job)
    if (wl.spec.queue_name or "") != want:
        wl.spec.queue_name = want
        if not want:
            _unset(wl.spec, "queue_name")  # Go's ``omitempty``: no ``queueName: ""``
        await wlpkg.update(client, wl)


async def ensure_prebuilt_workload_ownership(
    client: Client, wl: Workload, obj: Object
) -> Workload:
    """Make ``obj`` the controller of a prebuilt Workload and label its UID
    (``EnsurePrebuiltWorkloadOwnership``); returns the stored Workload."""
    owner = wl.metadata.controller_ref()
    if owner is not None and owner.uid == uid_of(obj):
        return wl
    refs = [r for r in wl.metadata.owner_references or [] if r.uid != uid_of(obj)]
    refs.append(OwnerReference.model_validate(owner_reference(obj)))
    wl.metadata.owner_references = refs
    uid = uid_of(obj)
    if not is_valid_label_value(uid):
        wl.metadata.labels = {**(wl.metadata.labels or {}), c.JOB_UID_LABEL: uid}
    return await wlpkg.update(client, wl)


async def find_matching_workloads(
    client: Client, job: GenericJob, *, features: FeatureGates = DEFAULT_FEATURES
) -> tuple[Workload | None, list[Workload]]:
    """The job's Workload and the ones to delete (``FindMatchingWorkloads``).

    Of the Workloads the job owns (through the owner index), the first one
    :func:`equivalent_to_workload` accepts is the match; every other is to be deleted.
    Every Workload is compared, so a comparison error surfaces whatever the order.
    """
    obj = job.object()
    owned = await list_owned_workloads(client, job.gvk(), namespace_of(obj), name_of(obj))
    match: Workload | None = None
    to_delete: list[Workload] = []
    for item in owned:
        wl = wlpkg.from_object(item)
        equivalent = await equivalent_to_workload(client, job, wl, features=features)
        if match is None and equivalent:
            match = wl
        else:
            to_delete.append(wl)
    return match, to_delete


async def prepare_workload_priority(
    client: Client,
    recorder: EventRecorderLike,
    obj: Object,
    wl: Workload,
    job: GenericJob | None = None,
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> None:
    """Set ``wl``'s priority class reference and value from the job
    (``PrepareWorkloadPriority``), as :func:`extract_priority` resolves them; ``job``
    stands for Go's custom priority-class function (a :class:`JobWithPriorityClass`)."""
    ref, priority = await extract_priority(client, recorder, obj, wl.spec.pod_sets, job,
                                           features=features)
    if ref is None:
        _unset(wl.spec, "priority_class_ref")
    else:
        wl.spec.priority_class_ref = ref
    wl.spec.priority = priority


def record_admission_gated_by_update_event(recorder: EventRecorderLike, obj: Object) -> None:
    """The ``UpdatedWorkload`` event of a propagated AdmissionGatedBy annotation
    (``RecordAdmissionGatedByUpdateEvent``)."""
    recorder.event(obj, NORMAL, c.REASON_UPDATED_WORKLOAD, c.MSG_UPDATED_ADMISSION_GATED_BY.format(
        annotations_of(obj).get(c.ADMISSION_GATED_BY_ANNOTATION, "")))


async def update_admission_gated_by(
    client: Client,
    recorder: EventRecorderLike,
    obj: Object,
    wl: Workload,
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> None:
    """Copy the job's ``kueue.x-k8s.io/admission-gated-by`` annotation to its Workload and
    patch it (``UpdateAdmissionGatedBy``); an event only when it changed.

    Nothing with the ``AdmissionGatedBy`` gate off. ``wl`` gets the new annotations and
    resourceVersion.
    """
    if not features.enabled(FeatureGate.ADMISSION_GATED_BY):
        return
    if (annotations_of(obj).get(c.ADMISSION_GATED_BY_ANNOTATION)
            == (wl.metadata.annotations or {}).get(c.ADMISSION_GATED_BY_ANNOTATION)):
        return  # nothing to propagate (checked first: the dump below is not cheap)
    before = wl.to_dict()
    if not propagate_admission_gated_by_annotation(obj, wl, features=features):
        return
    try:
        await patch_object(client, before, lambda: _set_annotations(
            before, wl.metadata.annotations))
    except errors.ApiError as err:
        raise _wrap("updating the AdmissionGatedBy of existing workload", err) from err
    wl.metadata.resource_version = resource_version_of(before)
    record_admission_gated_by_update_event(recorder, obj)


async def construct_workload(
    client: Client,
    job: GenericJob,
    label_keys_to_copy: frozenset[str] = frozenset(),
    annotations_to_copy: frozenset[str] = frozenset(),
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> Workload:
    """A new Workload for ``job`` (``ConstructWorkload``/``NewWorkload``), not yet prepared."""
    obj = job.object()
    pod_sets = await job_pod_sets(job, client, features=features)
    name = get_workload_name_for_owner_with_gvk(name_of(obj), uid_of(obj), job.gvk(),
                                                features=features)
    labels = {k: v for k, v in labels_of(obj).items() if k in label_keys_to_copy}
    uid = uid_of(obj)
    if not is_valid_label_value(uid):
        labels[c.JOB_UID_LABEL] = uid
    else:
        log.debug("validation of the owner job UID label has failed; not adding it")
    annotations = {k: v for k, v in annotations_of(obj).items()
                   if k.startswith(c.PROV_REQ_ANNOTATION_PREFIX)}
    if features.enabled(FeatureGate.CUSTOM_METRIC_LABELS):
        annotations.update({k: v for k, v in annotations_of(obj).items()
                            if k in annotations_to_copy})
    meta: dict[str, Any] = {
        "name": name, "namespace": namespace_of(obj),
        "finalizers": [c.RESOURCE_IN_USE_FINALIZER_NAME],
        "owner_references": [OwnerReference.model_validate(owner_reference(obj))],
    }
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"pod_sets": pod_sets}
    if queue_name(job):
        spec["queue_name"] = queue_name(job)
    max_exec = maximum_execution_time_seconds(job)
    if max_exec is not None:
        spec["maximum_execution_time_seconds"] = max_exec
    return Workload(metadata=ObjectMeta(**meta), spec=WorkloadSpec(**spec))


async def update_workload_priority(
    client: Client,
    recorder: EventRecorderLike,
    job: GenericJob,
    workloads: Workload | Sequence[Workload],
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> None:
    """Follow a change of the job's WorkloadPriorityClass label (``UpdateWorkloadPriority``).

    ``workloads`` is one Workload (v0.19.2's exported signature) or several (main's);
    Workloads backed by a pod PriorityClass, and quota-reserved ones without a class, are
    left alone; the class is resolved once for the whole set.
    """
    if isinstance(workloads, Workload):
        workloads = [workloads]
    obj = job.object()
    job_class = workload_priority_class_name(obj)
    same: list[Workload] = []
    change: list[Workload] = []
    for wl in workloads:
        ref = wl.spec.priority_class_ref
        if ref is None and wl.has_quota_reservation():
            continue
        if ref is not None and (ref.group != c.WORKLOAD_PRIORITY_CLASS_GROUP
                                or ref.kind != c.WORKLOAD_PRIORITY_CLASS_KIND):
            continue
        name = (ref.name or "") if ref is not None else ""
        (same if name == job_class else change).append(wl)
    if not change:
        return
    try:
        ref, priority = await extract_priority(client, recorder, obj,
                                               change[0].spec.pod_sets, job, features=features)
    except Exception as err:
        raise _wrap("prepare workload priority", err) from err
    for wl in [*same, *change]:
        current = wl.spec.priority_class_ref
        if wl.spec.priority == priority and (
                (current.to_dict() if current else None) == (ref.to_dict() if ref else None)):
            continue
        wl.spec.priority_class_ref = ref.model_copy(deep=True) if ref is not None else None
        if ref is None:
            _unset(wl.spec, "priority_class_ref")
        wl.spec.priority = priority
        try:
            stored = await wlpkg.update(client, wl)
        except errors.ApiError as err:
            raise _wrap("updating existing workload", err) from err
        wl.metadata.resource_version = stored.metadata.resource_version
        recorder.event(obj, NORMAL, c.REASON_UPDATED_WORKLOAD,
                       c.MSG_UPDATED_PRIORITY_CLASS.format(wlpkg.key(wl)))


def get_pod_sets_info_from_workload(wl: Workload | None) -> list[PodSetInfo] | None:
    """The original templates' info of a Workload (``GetPodSetsInfoFromWorkload``)."""
    return None if wl is None else pod_sets_info_from_workload_spec(wl.spec.pod_sets)


def new_reconciler(
    client: Client, recorder: EventRecorderLike, options: ReconcilerOptions | None = None,
    **overrides: Unpack[ReconcilerOptionOverrides],
) -> JobReconciler:
    """A :class:`JobReconciler` (``NewReconciler``); an integration manager is created
    when none is given."""
    return JobReconciler(client, recorder, options, **overrides)


# --- factories ------------------------------------------------------------------------------

#: Extra controller wiring (``ReconcilerSetup``): ``(builder, client) -> builder``.
ReconcilerSetup = Callable[[ControllerBuilder, Client], ControllerBuilder]


class GenericReconciler:
    """A controller-runtime reconciler for one job kind, built by the factory."""

    def __init__(
        self,
        job_reconciler: JobReconciler,
        new_job: Callable[[], GenericJob],
        setup: Sequence[ReconcilerSetup] = (),
    ) -> None:
        self.job_reconciler = job_reconciler
        self.new_job = new_job
        self.setup = tuple(setup)

    async def reconcile(self, request: Request) -> Result:
        """Reconcile a fresh job object of the kind."""
        return await self.job_reconciler.reconcile_generic_job(request, self.new_job())

    def setup_with_manager(self, mgr: Any) -> None:
        """``For(job).Owns(Workload)``, named after the lower-case Kind, plus the setups.

        Without a ``metrics`` option, Kueue's job metrics go to the manager's registry (its
        ``/metrics`` endpoint).
        """
        if self.job_reconciler.options.metrics is None and hasattr(mgr, "get_metrics"):
            self.job_reconciler.metrics = job_metrics_for(
                mgr.get_metrics().registry,
                local_queue_metrics=self.job_reconciler.options.local_queue_metrics)
        gvk = self.new_job().gvk()
        builder = (ControllerBuilder(mgr).named(gvk.kind.lower()).for_(gvk)
                   .owns(WORKLOAD_GVK))
        for f in self.setup:
            builder = f(builder, mgr.get_client())
        builder.complete(self)


class GenericReconcilerFactory(Protocol):
    """What :func:`new_generic_reconciler_factory` returns: a
    :class:`~jobframework.integrations.ReconcilerFactory` (``(client, indexer, recorder,
    options=None, **overrides)``; the overrides are :class:`ReconcilerOptions` fields)
    whose reconciler is a :class:`GenericReconciler`."""

    def __call__(self, client: Client, indexer: Any, recorder: EventRecorderLike,
                 options: ReconcilerOptions | None = None,
                 **overrides: Unpack[ReconcilerOptionOverrides]) -> GenericReconciler:
        ...


def new_generic_reconciler_factory(
    new_job: Callable[[], GenericJob], *setup: ReconcilerSetup
) -> GenericReconcilerFactory:
    """A factory building the generic reconciler of ``new_job``'s kind
    (``NewGenericReconcilerFactory``).

    Call it as ``factory(client, indexer, recorder, options=None, **overrides)``;
    ``indexer`` may be None (indexes are set up by the integration's ``setup_indexes``).
    """

    def factory(
        client: Client, indexer: Any, recorder: EventRecorderLike,
        options: ReconcilerOptions | None = None,
        **overrides: Unpack[ReconcilerOptionOverrides],
    ) -> GenericReconciler:
        del indexer
        return GenericReconciler(new_reconciler(client, recorder, options, **overrides),
                                 new_job, setup)

    return factory


class NoopReconciler:
    """A reconciler that does nothing (for integrations whose API is absent)."""

    def __init__(self, gvk: GVK) -> None:
        self.gvk = gvk

    async def reconcile(self, request: Request) -> Result:
        """Nothing to do."""
        del request
        return Result()

    def setup_with_manager(self, mgr: Any) -> None:
        """Registers nothing."""
        del mgr
        log.info("Skipped reconciler setup for %s", self.gvk)


def new_noop_reconciler_factory(gvk: GVK) -> Callable[..., NoopReconciler]:
    """A factory of :class:`NoopReconciler` (``NewNoopReconcilerFactory``)."""

    def factory(*args: Any, **kwargs: Any) -> NoopReconciler:
        del args, kwargs
        return NoopReconciler(gvk)

    return factory


async def setup_indexes_for(indexer: Any, gvk: GVK) -> None:
    """The workload owner index of ``gvk`` (the common ``SetupIndexes`` of integrations)."""
    await setup_workload_owner_index(indexer, gvk)


# --- wiring every enabled integration ------------------------------------------------------


#: First delay of :func:`wait_for_api` (Kueue's ``baseBackoffWaitForIntegration``).
WAIT_FOR_API_BASE_BACKOFF = 1.0
#: Longest delay of :func:`wait_for_api` (Kueue's ``maxBackoffWaitForIntegration``).
WAIT_FOR_API_MAX_BACKOFF = 120.0


async def wait_for_api(
    rest_mapper: Any,
    gvk: GVK,
    action: Callable[[], Awaitable[None] | None],
    *,
    clock: Clock,
) -> None:
    """Run ``action`` once the server serves ``gvk`` (Kueue's ``WaitForAPI``).

    Runs it at once when the REST mapping exists; otherwise polls the mapping with an
    exponential backoff (1 s doubling to 2 min, on ``clock``) until it does. Errors other
    than "no kind match" are logged and retried. Cancel the task to give up.
    """
    limiter = ItemExponentialFailureRateLimiter[str](WAIT_FOR_API_BASE_BACKOFF,
                                                     WAIT_FOR_API_MAX_BACKOFF)
    item = str(gvk)
    while True:
        try:
            await rest_mapper.rest_mapping(gvk)
        except NoKindMatchError:
            pass
        except Exception as err:
            log.error("failed to get the REST mapping of %s: %s", gvk, err)
        else:
            limiter.forget(item)
            result = action()
            if inspect.isawaitable(result):
                await result
            return
        await clock.sleep(limiter.when(item))


class APIWaiter:
    """A manager runnable running :func:`wait_for_api`; it does not wait for leadership,
    as Kueue starts ``WaitForAPI`` beside the manager (controllers it adds still do)."""

    def __init__(self, rest_mapper: Any, gvk: GVK,
                 action: Callable[[], Awaitable[None] | None], *, clock: Clock) -> None:
        self.rest_mapper = rest_mapper
        self.gvk = gvk
        self.action = action
        self.clock = clock

    async def start(self) -> None:
        """Poll until the API is served, then run the action."""
        await wait_for_api(self.rest_mapper, self.gvk, self.action, clock=self.clock)

    def need_leader_election(self) -> bool:
        """False: the wait runs on every replica."""
        return False

    def __repr__(self) -> str:
        return f"APIWaiter({self.gvk})"


async def webhook_queues(mgr: Any, options: ReconcilerOptions) -> Any:
    """The queue lookup the webhooks of ``mgr`` consult: ``options.queues`` when given,
    else the manager cache's shared :class:`~jobframework.queuelookup.CachedQueueLookup`
    (Kueue's webhooks always have its queue manager), or None when the server serves no
    Kueue queue kinds.

    The lookup gives the webhooks the ``default`` LocalQueue of a namespace
    (``DefaultLocalQueueExist``) and the queues' MultiKueue admission checks
    (``managedBy`` defaulting).
    """
    if options.queues is not None:
        return options.queues
    try:
        return await CachedQueueLookup.shared(mgr.get_cache())
    except NoKindMatchError as err:
        log.warning("Kueue's queue kinds are not served (%s): the webhooks apply no "
                    "default LocalQueue and hand no job to MultiKueue", err)
        return None


async def setup_integration(
    mgr: Any,
    callbacks: IntegrationCallbacks,
    options: ReconcilerOptions,
    *,
    reporting_controller: str,
    webhook_server: Any = None,
    webhook_options: Mapping[str, Any] | None = None,
) -> tuple[GenericReconciler, list[str]]:
    """One integration on ``mgr``, set up by itself as :func:`setup_controllers` sets up
    each framework: its indexes, its generic reconciler (events reported as
    ``reporting_controller``) and, given a server, its Kueue webhook with the options'
    queue settings plus ``webhook_options``. Returns the reconciler and the webhook paths.

    The webhook's queues are :func:`webhook_queues`: ``options.queues``, or one lookup
    following the manager's LocalQueues, ClusterQueues and AdmissionChecks (shared by
    every integration set up on ``mgr``), so a job without a queue name gets the
    namespace's ``default`` LocalQueue as in Kueue.

    This is what a reference integration's ``setup`` runs when it is given Kueue options.
    """
    if callbacks.setup_indexes is not None:
        indexed = callbacks.setup_indexes(mgr.get_cache())
        if inspect.isawaitable(indexed):
            await indexed
    if callbacks.new_reconciler is None:
        raise IntegrationError("the integration has no reconciler factory")
    # A reference integration's factory is a generic one (new_generic_reconciler_factory).
    reconciler = cast("GenericReconciler", callbacks.new_reconciler(
        mgr.get_client(), mgr.get_cache(), mgr.get_event_recorder_for(reporting_controller),
        options))
    reconciler.setup_with_manager(mgr)
    paths: list[str] = []
    if webhook_server is not None and callbacks.setup_webhook is not None:
        paths = list(callbacks.setup_webhook(
            webhook_server, mgr.get_client(), **dict(webhook_options or {}),
            integration_manager=options.integration_manager,
            manage_jobs_without_queue_name=options.manage_jobs_without_queue_name,
            managed_jobs_namespace_selector=options.managed_jobs_namespace_selector,
            queues=await webhook_queues(mgr, options), features=options.features))
    return reconciler, paths


def _apply_manager_options(mgr: Any, configuration: Configuration,
                           integration_manager: IntegrationManager,
                           enabled: Collection[str]) -> None:
    """What Kueue's manager takes from its Configuration besides the options: the worker
    counts under ``mgr``'s own entries, and the cache transform unless it has one."""
    from .config import MANAGER_CACHE_TRANSFORM, group_kind_concurrency_from

    cache = mgr.get_cache()
    # Before setup_indexes creates the integrations' informers, so their objects are lean.
    if getattr(cache, "transform", MANAGER_CACHE_TRANSFORM) is None:
        cache.transform = MANAGER_CACHE_TRANSFORM
    if not hasattr(mgr, "group_kind_concurrency"):
        return  # not our Manager: its builder does not read the table either
    kinds = []
    for name in integration_manager.get_integrations_list():
        cb = integration_manager.get_integration(name)
        gvk = cb.get_gvk() if cb is not None and name in enabled else None
        if gvk is not None:
            kinds.append(gvk)
    mgr.group_kind_concurrency = {**group_kind_concurrency_from(configuration, kinds),
                                  **mgr.group_kind_concurrency}


def frameworks_from_configuration(configuration: Configuration,
                                  integration_manager: IntegrationManager) -> list[str]:
    """The registered integrations a Kueue Configuration enables, in its order: each of
    its ``integrations.frameworks`` registered under that name, and for each
    ``externalFrameworks`` entry the integration registered under that name or, failing
    that, the one whose job kind it names (``Kind.version.group`` of
    :meth:`~jobframework.integrations.IntegrationCallbacks.get_gvk`), so that
    ``SparkApp.v1.analytics.example.com`` selects an integration registered as
    ``analytics.example.com/sparkapp``. Names of no registered integration are left out
    (Kueue's own integrations, other external controllers' kinds).

    Raises :class:`~jobframework.integrations.IntegrationError` naming the entry and the
    integrations when an entry selects more than one (its name is one integration's and
    its kind another's, or two integrations share its kind).
    """
    by_kind: dict[GVK, list[str]] = {}
    for name in integration_manager.get_integrations_list():
        cb = integration_manager.get_integration(name)
        gvk = cb.get_gvk() if cb is not None else None
        if gvk is not None:
            by_kind.setdefault(gvk, []).append(name)
    selected = [n for n in configuration.frameworks()
                if integration_manager.get_integration(n) is not None]
    for entry in configuration.external_frameworks():
        named = [entry] if integration_manager.get_integration(entry) is not None else []
        gvk = parse_kind_arg(entry)
        of_kind = [n for n in by_kind.get(gvk, []) if n != entry] if gvk is not None else []
        matches = named + of_kind
        if len(matches) > 1:
            raise IntegrationError(
                f"externalFrameworks entry {go_quote(entry)} selects several registered "
                f"integrations: {', '.join(go_quote(m) for m in matches)} (by name, then "
                "by job kind); register the integration of that kind under one name only")
        if not matches:
            log.info("externalFrameworks entry %s names no registered integration; its "
                     "kind is left to its own controller", entry)
        selected.extend(m for m in matches if m not in selected)
    return selected


async def setup_controllers(
    mgr: Any,
    integration_manager: IntegrationManager,
    *,
    options: ReconcilerOptions | None = None,
    webhook_server: Any = None,
    enabled_frameworks: Sequence[str] | None = None,
    external_frameworks: Sequence[str] | None = None,
    configuration: Configuration | None = None,
) -> frozenset[str]:
    """Set up the controllers, webhooks and indexes of the configured integrations
    (Kueue's ``SetupControllers`` + ``SetupIndexes``); returns the names set up now.

    Without ``configuration`` the frameworks set up are ``enabled_frameworks`` (default
    ``["batch/job"]``, Kueue's default) and the kinds of ``external_frameworks``
    (``Kind.version.group``) are registered as externally managed.

    With ``configuration`` (Kueue's Configuration, see :mod:`jobframework.config`), the
    options are :func:`~jobframework.config.reconciler_options_from` it over ``options``;
    the frameworks set up are :func:`frameworks_from_configuration`: its
    ``integrations.frameworks`` registered in ``integration_manager`` under those names,
    and the integrations its ``externalFrameworks`` entries name, by registered name or
    by job kind (the others are Kueue's own or another controller's); every
    ``externalFrameworks`` kind is registered as externally managed. The configuration
    decides alone: passing ``enabled_frameworks`` or ``external_frameworks`` with it
    raises :class:`TypeError` rather than ignoring them.

    Returns the names of the frameworks whose controllers were set up by this call (not
    those waiting for their API; see below).

    Each enabled framework whose API the server serves gets its reconciler (events
    reported as ``<framework>-<manager name>-controller``) and its webhook, and is marked
    enabled in ``integration_manager``; a disabled one gets a no-op webhook. A framework
    whose API is missing (no REST mapping) gets its webhook now and an :class:`APIWaiter`
    on ``mgr`` that sets up its reconcilers, and marks it enabled, once the API appears
    (Kueue's ``WaitForAPI``). Other REST mapping errors fail the setup.

    With ``configuration``, each controller also gets its workers from the
    Configuration's ``controller.groupKindConcurrency``, as Kueue's manager does
    (:func:`~jobframework.config.group_kind_concurrency_from`: Kueue v0.19.2's shipped
    table, 5 for the enabled job kinds, the document's entries over both); entries the
    manager was built with (``Manager(group_kind_concurrency=...)``) win, as options
    given in code win over Kueue's file. Without it, the manager's table alone decides
    (one worker per controller unless it says otherwise). A manager whose cache has no
    transform of its own gets :data:`~jobframework.config.MANAGER_CACHE_TRANSFORM` for
    the informers created from then on (Kueue's manager strips ``managedFields`` from
    its cache too), so an embedded integration caches what the shipped manager does.

    With a webhook server, the webhooks' queues are :func:`webhook_queues` (the options'
    ``queues``, else a lookup following the manager's Kueue queue objects), which gives
    them the namespaces' ``default`` LocalQueues as Kueue's webhooks have.
    """
    if configuration is not None:
        given = [arg for arg, value in (("enabled_frameworks", enabled_frameworks),
                                        ("external_frameworks", external_frameworks))
                 if value is not None]
        if given:
            # Silently preferring one source would enable what the user did not ask for
            # (or serve no-op webhooks for what they did).
            raise TypeError(
                f"setup_controllers: {' and '.join(given)} cannot be given with "
                "configuration, which decides the frameworks (its integrations.frameworks "
                "and externalFrameworks)")
        from .config import reconciler_options_from
        options = reconciler_options_from(configuration, base=options)
        external_frameworks = configuration.external_frameworks()
        enabled_frameworks = frameworks_from_configuration(configuration,
                                                           integration_manager)
    if enabled_frameworks is None:
        enabled_frameworks = (c.DEFAULT_FRAMEWORK,)
    if external_frameworks is None:
        external_frameworks = ()
    opts = attrs.evolve(options or ReconcilerOptions(),
                        integration_manager=integration_manager)
    # Marked enabled only once its controller exists, as Kueue's setupControllerAndWebhook.
    enabled = integration_manager.configure(enabled_frameworks, external_frameworks,
                                            mark_enabled=False)
    if configuration is not None:
        _apply_manager_options(mgr, configuration, integration_manager, enabled)
    await integration_manager.setup_indexes(mgr.get_cache(), enabled)
    if webhook_server is not None:
        opts = attrs.evolve(opts, queues=await webhook_queues(mgr, opts))
    webhook_options: dict[str, Any] = {
        "integration_manager": integration_manager,
        "manage_jobs_without_queue_name": opts.manage_jobs_without_queue_name,
        "managed_jobs_namespace_selector": opts.managed_jobs_namespace_selector,
        "queues": opts.queues,
        "features": opts.features,
    }

    def setup_reconcilers(name: str, cb: IntegrationCallbacks) -> None:
        recorder = mgr.get_event_recorder_for(f"{name}-{opts.manager_name}-controller")
        assert cb.new_reconciler is not None
        for factory in (cb.new_reconciler, *cb.new_additional_reconcilers):
            reconciler = factory(mgr.get_client(), mgr.get_cache(), recorder, options=opts)
            reconciler.setup_with_manager(mgr)

    def deferred(name: str, cb: IntegrationCallbacks) -> Callable[[], None]:
        def action() -> None:
            log.info("API of %s is now served, setting up its controller", name)
            try:
                setup_reconcilers(name, cb)
            except Exception as err:
                # Kueue logs and gives up: the manager keeps running without it.
                log.error("failed to set up the controller of %s: %s", name, err,
                          exc_info=err)
                return
            # Its webhook was set up before the wait; a second one on the same path
            # would be ignored (controller-runtime) or rejected, so it is not redone.
            integration_manager.enable_integration(name)
        return action

    done: set[str] = set()
    for name in integration_manager.get_integrations_list():
        cb = integration_manager.get_integration(name)
        assert cb is not None and cb.new_reconciler is not None
        if name not in enabled:
            if webhook_server is not None and cb.setup_webhook is not None:
                cb.setup_webhook(webhook_server, mgr.get_client(), noop_webhook=True)
            continue
        prefix = f"jobFrameworkName {go_quote(name)}"
        gvk = cb.get_gvk()
        if gvk is None:
            raise IntegrationError(f"{prefix}: failed to map the job kind")
        try:
            await mgr.get_client().rest_mapper.rest_mapping(gvk)
        except NoKindMatchError as err:
            log.info("API of %s (%s) is not served yet, deferring its controller: %s",
                     name, gvk, err)
            if webhook_server is not None and cb.setup_webhook is not None:
                cb.setup_webhook(webhook_server, mgr.get_client(), **webhook_options)
            mgr.add(APIWaiter(mgr.get_client().rest_mapper, gvk, deferred(name, cb),
                              clock=mgr.clock))
            continue
        except Exception as err:
            raise IntegrationError(f"{prefix}: {err}") from err
        setup_reconcilers(name, cb)
        if webhook_server is not None and cb.setup_webhook is not None:
            cb.setup_webhook(webhook_server, mgr.get_client(), **webhook_options)
        integration_manager.enable_integration(name)
        done.add(name)
    return frozenset(done)
