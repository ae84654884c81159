"""The AppWrapper framework controller: the phase machine of upstream's
``internal/controller/appwrapper`` (project-codeflare/appwrapper v1.2.2).

:class:`AppWrapperReconciler` drives one AppWrapper per reconcile through its phases::

    "" ──► Suspended ──(suspend=false)──► Resuming ──(all created)──► Running ──► Succeeded
              ▲                             │  ▲                        │
              └──────── Suspending ◄────────┤  └── Resetting ◄──────────┤ (failure, retries left)
                       (suspend=true)       └──► Failed ◄───────────────┘ (fatal / no retries)

and writes the conditions Kueue's GenericJob reads (``QuotaReserved`` = quota held,
``ResourcesDeployed`` = wrapped objects or their pods exist, ``PodsReady``, ``Unhealthy``,
``DeletingResources``) with apimachinery's ``SetStatusCondition`` semantics: a
condition's ``lastTransitionTime`` moves only when its status changes, which is what the
timers measure from (see ``docs/appwrapper-lifecycle.md``).

- The first phase checks the components against the webhook's rules (structure, nested
  AppWrappers, namespaces, PodSet paths and inference, 1 to 8 PodSets): an AppWrapper
  written while the webhook was not called and breaking them goes from ``""`` straight to
  Failed with ``Unhealthy=True`` ``CreateFailed`` naming the fields (upstream retries that
  pass forever, or fails it only once admitted).
- Components are created in order with a controller owner reference and the pod-set
  injection of :func:`~.podsets.inject_pod_set_infos`, each step recorded in
  ``status.componentStatus``; an Invalid or unknown-kind create is fatal (Failed), other
  errors are retried for the admission grace period, then reset.
- Events are upstream v1.2.2's: a specific reason (``ExternallySuspended``,
  ``CreateFailed``, ``FoundFailedPods``, ...), the action (``Suspending`` or
  ``Unhealthy``) and the bare message, all Normal.
- Deletion is two-stage: background deletes first; once the forceful-deletion grace
  period (from ``DeletingResources``' transition) has passed, the labelled pods are
  deleted with grace period 0, then the components again. ``ResourcesDeployed`` turns
  False only when every component *and* every labelled pod is gone.
- Every timer reads the reconciler's clock (the manager's), so a ``ManualClock`` makes
  tests deterministic.

Held to the admission (not upstream's; :mod:`.children`): while Running, a component
of a kind whose PodSets are inferred that makes more pods than ``componentStatus``
counts is set back (Warning ``AdmittedSizeRestored``), or, when it cannot be, the
AppWrapper fails (``Unhealthy=True`` ``ResizedComponent``); in every phase, a batch/v1
Job naming the AppWrapper as its controller that is none of its components is suspended
(Warning ``ForeignJobSuspended``).

Watches: AppWrappers, and Pods carrying the AppWrapper label, which enqueue their
AppWrapper once Succeeded or Failed (upstream: Succeeded only, so it sees failures late);
Jobs controlled by an AppWrapper, on creation and when their suspension or size changes.
Wrapped objects of other kinds are *not* watched: the reconciler polls (5 s while
creating pods / deleting, 1 min when healthy) and reads them straight from the API server.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Final, Protocol

import attrs
from prometheus_client import Counter

from jobframework.admittedworkload import (
    REASON_ADMISSION_MISMATCH,
    AdmissionGuard,
    stop_message,
)
from jobframework.api.conditions import (
    CONDITION_FALSE,
    CONDITION_TRUE,
    CONDITION_UNKNOWN,
    find_condition,
    is_condition_true,
    set_condition,
)
from jobframework.childguard import ADMITTED_SIZE_RESTORED_REASON, suspend_foreign_job
from jobframework.constants import truncate_condition_message, truncate_event_message
from jobframework.reconciler import create_merge_patch
from jobframework.runtime.builder import ControllerBuilder
from jobframework.runtime.client.discovery import NoKindMatchError
from jobframework.runtime.client.interface import PropagationPolicy
from jobframework.runtime.clock import Clock, RealClock, parse_time
from jobframework.runtime.errors import AlreadyExists, ApiError, Forbidden, Invalid, NotFound
from jobframework.runtime.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from jobframework.runtime.events import NORMAL, WARNING
from jobframework.runtime.handler import EnqueueRequestsFromMapFunc
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import (
    GVK,
    Object,
    controller_of,
    is_being_deleted,
    labels_of,
    metadata,
    name_of,
    namespace_of,
    uid_of,
)
from jobframework.runtime.reconcile import Request, Result
from jobframework.runtime.selectors import LabelSelector

from .admission import admission_problem
from .api import (
    APPWRAPPER_CONTROLLER_NAME,
    APPWRAPPER_GVK,
    APPWRAPPER_LABEL,
    DELETION_ON_FAILURE_GRACE_PERIOD_ANNOTATION,
    FINALIZER,
    AppWrapperCondition,
    AppWrapperPhase,
)
from .children import JOB_GVK, foreign_jobs, restore_sizes, size_drifts
from .config import (
    AppWrapperConfig,
    admission_grace_duration,
    deletion_on_failure_grace_duration,
    failure_grace_duration,
    forceful_deletion_grace_duration,
    format_go_duration,
    retry_limit,
    retry_pause_duration,
    retryable_exit_codes,
    terminal_exit_codes,
    time_to_live_after_succeeded_duration,
    warmup_grace_duration,
)
from .faults import (
    NodeHealth,
    NodeHealthMonitor,
    PodStatusSummary,
    go_string_set,
    pod_status_summary,
)
from .podsets import clear_pod_set_infos, inject_pod_set_infos, replicas
from .resources import count_failed, finish_component, initial_component_status
from .webhook import AppWrapperWebhook

log = logging.getLogger(__name__)

__all__ = [
    "APPWRAPPER_CONTROLLER_RUNTIME_NAME",
    "EVENT_RECORDER_NAME",
    "EXTERNALLY_SUSPENDED_REASON",
    "AppWrapperReconciler",
    "ComponentStatusSummary",
    "setup_controllers",
]

POD_GVK: Final = GVK("", "v1", "Pod")
#: Job index: the UID of the AppWrapper named by the Job's controller owner reference.
OWNER_UID_INDEX: Final = "workload.codeflare.dev/owner-uid"
#: The ``Unhealthy`` reason (and event) of a component making more pods than admitted
#: that cannot be set back.
RESIZED_COMPONENT_REASON: Final = "ResizedComponent"
#: The controller's name in the manager (upstream: ``Named(AppWrapperKind)``).
APPWRAPPER_CONTROLLER_RUNTIME_NAME: Final = "AppWrapper"
#: The reporting controller of the events (upstream: ``GetEventRecorder("appwrappers")``).
EVENT_RECORDER_NAME: Final = "appwrappers"
#: The reason of the event recorded when ``spec.suspend`` interrupts Resuming, Running or
#: Resetting (its action is the phase entered, ``Suspending``).
EXTERNALLY_SUSPENDED_REASON: Final = "ExternallySuspended"
#: ``appwrapper_phase_total{namespace,phase}``: phase transitions.
PHASE_COUNTER_NAME: Final = "appwrapper_phase_total"

#: Polling intervals (seconds), as upstream.
CREATE_RETRY_INTERVAL: Final = 1.0
SHORT_POLL_INTERVAL: Final = 5.0
HEALTHY_POLL_INTERVAL: Final = 60.0

_RD: Final = AppWrapperCondition.RESOURCES_DEPLOYED.value
_QR: Final = AppWrapperCondition.QUOTA_RESERVED.value
_PR: Final = AppWrapperCondition.PODS_READY.value
_UH: Final = AppWrapperCondition.UNHEALTHY.value
_DR: Final = AppWrapperCondition.DELETING_RESOURCES.value
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: Errors of an API call the controller survives (API status, unknown kind, transport).
_CALL_ERRORS: Final = (ApiError, LookupError, OSError, TimeoutError)


class Recorder(Protocol):
    """Where events go (the runtime's ``EventRecorder`` is one)."""

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, *,
              action: str | None = None) -> None:
        """Record an event about ``obj`` (``action``: events.k8s.io's, default ``reason``)."""


class ComponentError(Exception):
    """A component cannot be created for a reason of our own (not an API error)."""


@attrs.define
class ComponentStatusSummary:
    """Upstream's ``componentStatusSummary``."""

    expected: int = 0
    deployed: int = 0
    failed: int = 0
    #: ``(index, object)`` of each deployed component, as read back (not upstream's).
    objects: list[tuple[int, Object]] = attrs.field(factory=list)


# --- small status helpers --------------------------------------------------------------------


def _status(aw: Object) -> dict[str, Any]:
    status = aw.get("status")
    if not isinstance(status, dict):
        status = aw["status"] = {}
    return status


def _conditions(holder: dict[str, Any]) -> list[dict[str, Any]]:
    conds = holder.get("conditions")
    if not isinstance(conds, list):
        conds = holder["conditions"] = []
    return conds


def _component_statuses(aw: Object) -> list[dict[str, Any]]:
    cs = _status(aw).get("componentStatus")
    return cs if isinstance(cs, list) else []


def _spec(aw: Mapping[str, Any]) -> dict[str, Any]:
    spec = aw.get("spec")
    return spec if isinstance(spec, dict) else {}


def _suspended(aw: Mapping[str, Any]) -> bool:
    return bool(_spec(aw).get("suspend"))


def _components(aw: Mapping[str, Any]) -> list[Any]:
    components = _spec(aw).get("components")
    return components if isinstance(components, list) else []


def _is_true(aw: Object, type_: str) -> bool:
    return is_condition_true(_status(aw).get("conditions") or [], type_)


def _transition_time(aw: Object, type_: str) -> dt.datetime:
    """``lastTransitionTime`` of a condition; the epoch when it is missing or unreadable,
    so a timer measured from it counts as expired rather than waiting forever."""
    cond = find_condition(_status(aw).get("conditions") or [], type_)
    value = cond.get("lastTransitionTime") if cond else None
    if not isinstance(value, str) or not value:
        return _EPOCH
    try:
        return parse_time(value)
    except ValueError:
        return _EPOCH


def _seconds(delta: dt.timedelta) -> float:
    return max(0.0, delta.total_seconds())


def owner_uid_values(job: Object) -> list[str]:
    """:data:`OWNER_UID_INDEX` values: the controlling AppWrapper's UID, if any."""
    ref = controller_of(job)
    if (ref is None or ref.get("kind") != APPWRAPPER_GVK.kind
            or str(ref.get("apiVersion") or "").split("/")[0] != APPWRAPPER_GVK.group):
        return []
    return [str(ref.get("uid") or "")]


class JobSpecChanged:
    """The Job events an AppWrapper acts on: creations, and updates that may start pods
    it did not admit (``suspend``, ``parallelism`` or ``completions`` changed); status
    updates are left to the polls, deletions to the component checks."""

    #: Reads the specs only: informers hand it their stored objects, uncopied.
    reads_events_only: ClassVar[bool] = True

    @staticmethod
    def _view(job: Mapping[str, Any]) -> tuple[Any, ...]:
        spec = job.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        return spec.get("suspend"), spec.get("parallelism"), spec.get("completions")

    def create(self, event: CreateEvent) -> bool:
        """Every creation (a Job claiming an AppWrapper is suspended at once)."""
        return True

    def update(self, event: UpdateEvent) -> bool:
        """Whether the suspension or the size changed."""
        return self._view(event.object_old) != self._view(event.object_new)

    def delete(self, event: DeleteEvent) -> bool:
        """Never: a deleted component is found by the polls, as upstream."""
        return False

    def generic(self, event: GenericEvent) -> bool:
        """Every generic event."""
        return True


class AppWrapperReconciler:
    """Reconciles AppWrappers (see the module docstring).

    Under Kueue, :attr:`admission_guard` (set by :func:`~.setup.setup`) has the
    admission the AppWrapper carries checked against its Workload before components are
    created (:mod:`.admission`).

    Args:
        client: reads AppWrappers and Pods (the manager's cached client) and does every
            write.
        recorder: where the events go (upstream v1.2.2's: reason ``ExternallySuspended``
            with action ``Suspending``, and the ``Unhealthy`` condition's reason with action
            ``Unhealthy``).
        config: the operator configuration (defaults: upstream's).
        api_reader: uncached reads of the wrapped objects (default: ``client``). A
            component missing from a lagging cache would fail the AppWrapper at once.
        clock: the manager's clock; every timer and condition timestamp uses it.
        node_health: the node monitor's state (Autopilot NoExecute nodes).
        phase_counter: the ``appwrapper_phase_total`` counter, when metrics are wanted.
    """

    #: Set under Kueue: the Workload the admission is checked against.
    admission_guard: AdmissionGuard | None = None
    #: Whether the client's cache has :data:`OWNER_UID_INDEX` (:func:`setup_controllers`);
    #: without it the namespace's Jobs are listed and filtered.
    job_owner_index: bool = False

    def __init__(
        self,
        client: Any,
        recorder: Recorder,
        config: AppWrapperConfig | None = None,
        *,
        api_reader: Any = None,
        clock: Clock | None = None,
        node_health: NodeHealth | None = None,
        phase_counter: Counter | None = None,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.config = config or AppWrapperConfig()
        self.api_reader = api_reader if api_reader is not None else client
        self.clock: Clock = clock or RealClock()
        self.node_health = node_health if node_health is not None else NodeHealth()
        self.phase_counter = phase_counter
        #: The webhook's component rules, without the SubjectAccessReview (the creator is
        #: unknown here). Like the webhook, they accept a kind not served yet: its CRD may
        #: be installed before admission; creating it fails it otherwise (NoKindMatch).
        self.validator = AppWrapperWebhook(None)

    # -- entry ------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        """One pass over the AppWrapper ``request`` names."""
        try:
            aw = await self.client.get(APPWRAPPER_GVK, request.name, namespace=request.namespace)
        except _CALL_ERRORS as err:
            # As upstream: a failed read ends the pass without a retry.
            if not isinstance(err, NotFound):
                log.info("could not read AppWrapper %s: %s", request, err)
            return Result()
        managed_by = _spec(aw).get("managedBy")
        if managed_by is not None and managed_by != APPWRAPPER_CONTROLLER_NAME:
            return Result()
        if is_being_deleted(aw):
            return await self._finalize(aw)
        # Whatever the phase: a Job claiming the AppWrapper it was not created by must not
        # run on the AppWrapper's admission (see .children).
        unsuspended = await self.suspend_foreign_jobs(aw)
        phase = _status(aw).get("phase") or ""
        handler = self._phases().get(str(phase))
        result = Result() if handler is None else await handler(aw)
        if unsuspended is not None:
            # Not left to the next poll (a minute when healthy): the claiming Job runs on
            # the AppWrapper's admission until a pass suspends it.
            raise unsuspended
        return result

    def _phases(self) -> dict[str, Callable[[Object], Awaitable[Result]]]:
        return {
            AppWrapperPhase.EMPTY.value: self._empty,
            AppWrapperPhase.SUSPENDED.value: self._suspended_phase,
            AppWrapperPhase.RESUMING.value: self._resuming,
            AppWrapperPhase.RUNNING.value: self._running,
            AppWrapperPhase.SUSPENDING.value: self._suspending,
            AppWrapperPhase.RESETTING.value: self._resetting,
            AppWrapperPhase.FAILED.value: self._failed,
            AppWrapperPhase.SUCCEEDED.value: self._succeeded,
        }

    # -- status writes ----------------------------------------------------------------------

    def _now(self) -> dt.datetime:
        return self.clock.now()

    def _set(self, holder: dict[str, Any], type_: str, status: str, reason: str,
             message: str = "") -> None:
        set_condition(_conditions(holder), {"type": type_, "status": status, "reason": reason,
                                            "message": message}, now=self._now())

    def _clear(self, holder: dict[str, Any], type_: str, reason: str, message: str = "") -> None:
        """Upstream's ``clearCondition``: set False only when currently True."""
        if is_condition_true(holder.get("conditions") or [], type_):
            self._set(holder, type_, CONDITION_FALSE, reason, message)

    async def _patch_status(self, aw: Object, orig: Mapping[str, Any]) -> None:
        """Send the status changes since ``orig`` as a merge patch carrying the
        resourceVersion read (controller-runtime's ``MergeFromWithOptimisticLock``);
        ``aw`` becomes the server's answer.

        Upstream patches without the lock; the fault suite caught what that costs: a pass
        working from a stale cache wrote ``Suspending`` over ``Succeeded``, and the
        AppWrapper lost its terminal state. With the lock that pass gets a Conflict and is
        retried from the fresh object.
        """
        patch = create_merge_patch(dict(orig), _status(aw))
        if not patch:
            return
        body: dict[str, Any] = {"status": patch}
        rv = (aw.get("metadata") or {}).get("resourceVersion")
        if rv:
            body["metadata"] = {"resourceVersion": rv}
        updated = await self.client.patch(APPWRAPPER_GVK, name_of(aw), body,
                                          namespace=namespace_of(aw), subresource="status")
        aw.clear()
        aw.update(updated)

    async def _transition(self, aw: Object, orig: Mapping[str, Any],
                          phase: AppWrapperPhase) -> Result:
        _status(aw)["phase"] = phase.value
        await self._patch_status(aw, orig)
        log.info("AppWrapper %s/%s: %s", namespace_of(aw), name_of(aw), phase.value)
        if self.phase_counter is not None:
            self.phase_counter.labels(namespace_of(aw), phase.value).inc()
        return Result()

    async def _reset_or_fail(self, aw: Object, orig: Mapping[str, Any], terminal: bool,
                             increment: int) -> Result:
        status = _status(aw)
        retries = int(status.get("resettingCount") or 0)
        if not terminal and retries < retry_limit(aw, self.config):
            if increment:
                # resettingCount is omitempty upstream: never write a zero.
                status["resettingCount"] = retries + increment
            return await self._transition(aw, orig, AppWrapperPhase.RESETTING)
        return await self._transition(aw, orig, AppWrapperPhase.FAILED)

    def _event(self, aw: Object, reason: str, action: str, message: str) -> None:
        """A Normal event, as upstream v1.2.2 records every one: the specific ``reason``,
        the ``action`` (the condition set or the phase entered), the bare message."""
        self.recorder.event(aw, NORMAL, reason, truncate_event_message(message),
                            action=action)

    def _unhealthy(self, aw: Object, reason: str, message: str) -> None:
        """``Unhealthy=True`` with ``reason`` and ``message``, and the event saying so."""
        self._set(_status(aw), _UH, CONDITION_TRUE, reason, message)
        self._event(aw, reason, _UH, message)

    async def _suspend_externally(self, aw: Object, orig: Mapping[str, Any],
                                  phase: AppWrapperPhase) -> Result:
        self._event(aw, EXTERNALLY_SUSPENDED_REASON, AppWrapperPhase.SUSPENDING.value,
                    f"Externally suspended while in the {phase.value} phase")
        return await self._transition(aw, orig, AppWrapperPhase.SUSPENDING)

    # -- deletion ----------------------------------------------------------------------------

    async def _finalize(self, aw: Object) -> Result:
        if FINALIZER not in (metadata(aw).get("finalizers") or []):
            return Result()
        status = _status(aw)
        orig = copy.deepcopy(status)
        updated = False
        if _is_true(aw, _RD):
            if not await self._delete_components(aw):
                if status.get("phase") != AppWrapperPhase.TERMINATING.value:
                    # For users; a failure here is ignored, the 5 s requeue retries anyway.
                    status["phase"] = AppWrapperPhase.TERMINATING.value
                    try:
                        await self._patch_status(aw, orig)
                    except _CALL_ERRORS as err:
                        log.info("could not mark %s/%s Terminating: %s", namespace_of(aw),
                                 name_of(aw), err)
                return Result(requeue_after=SHORT_POLL_INTERVAL)
            self._set(status, _RD, CONDITION_FALSE, AppWrapperPhase.TERMINATING.value,
                      "Resources successfully deleted")
            updated = True
        if _is_true(aw, _QR):
            self._set(status, _QR, CONDITION_FALSE, AppWrapperPhase.TERMINATING.value,
                      "No resources deployed")
            updated = True
        if updated:
            await self._patch_status(aw, orig)
        finalizers = [f for f in metadata(aw).get("finalizers") or [] if f != FINALIZER]
        aw["metadata"]["finalizers"] = finalizers
        try:
            await self.client.update(aw)
        except NotFound:
            # A previous pass (seen late by the cache) already removed it: gone for good.
            return Result()
        log.info("AppWrapper %s/%s: finalizer removed", namespace_of(aw), name_of(aw))
        return Result()

    # -- phases ------------------------------------------------------------------------------

    async def _empty(self, aw: Object) -> Result:
        status = _status(aw)
        orig = copy.deepcopy(status)
        # The webhook's rules, again (deviation): an AppWrapper written while the webhook
        # was not called and breaking them can never deploy. Upstream retries such a pass
        # with backoff forever, or fails it only once admitted (CreateFailed); here it
        # fails at once, the same way, before Kueue reserves quota for it.
        errs = await self.validator.spec_errors(aw)
        if errs:
            return await self._fail_invalid(aw, orig, f"invalid spec: {errs.to_aggregate()}")
        if len(_component_statuses(aw)) != len(_components(aw)):
            try:
                status["componentStatus"] = initial_component_status(aw)
            except (ValueError, TypeError, KeyError, AttributeError) as err:
                # Components are immutable: retrying cannot help.
                return await self._fail_invalid(aw, orig, f"cannot determine the PodSets: "
                                                          f"{err}")
        return await self._transition(aw, orig, AppWrapperPhase.SUSPENDED)

    async def _fail_invalid(self, aw: Object, orig: Mapping[str, Any], why: str) -> Result:
        """Empty → Failed with upstream's ``CreateFailed`` condition and event."""
        self._unhealthy(aw, "CreateFailed",
                        truncate_condition_message(f"error creating components: {why}"))
        return await self._transition(aw, orig, AppWrapperPhase.FAILED)

    async def _suspended_phase(self, aw: Object) -> Result:
        if _suspended(aw):
            return Result()
        finalizers = list(metadata(aw).get("finalizers") or [])
        if FINALIZER not in finalizers:
            aw["metadata"]["finalizers"] = [*finalizers, FINALIZER]
            updated = await self.client.update(aw)
            aw.clear()
            aw.update(updated)
            log.info("AppWrapper %s/%s: finalizer added", namespace_of(aw), name_of(aw))
        status = _status(aw)
        orig = copy.deepcopy(status)
        resuming = AppWrapperPhase.RESUMING.value
        self._set(status, _QR, CONDITION_TRUE, resuming, "Suspend is false")
        self._set(status, _RD, CONDITION_TRUE, resuming, "Suspend is false")
        self._set(status, _PR, CONDITION_FALSE, resuming, "Suspend is false")
        self._set(status, _UH, CONDITION_FALSE, resuming, "Suspend is false")
        return await self._transition(aw, orig, AppWrapperPhase.RESUMING)

    async def _resuming(self, aw: Object) -> Result:
        if _suspended(aw):
            return await self._suspend_externally(aw, copy.deepcopy(_status(aw)),
                                                  AppWrapperPhase.RESUMING)
        if self.admission_guard is not None:
            problem = await admission_problem(self.admission_guard, aw, self.client)
            if problem is not None:
                return await self._stop_for_admission(aw, problem)
        err, fatal = await self._create_components(aw)
        orig = copy.deepcopy(_status(aw))
        if err is None:
            return await self._transition(aw, orig, AppWrapperPhase.RUNNING)
        if not fatal:
            deadline = _transition_time(aw, _RD) + admission_grace_duration(aw, self.config)
            if self._now() < deadline:
                return Result(requeue_after=CREATE_RETRY_INTERVAL)
        self._unhealthy(aw, "CreateFailed", f"error creating components: {err}")
        if fatal:
            return await self._transition(aw, orig, AppWrapperPhase.FAILED)
        return await self._reset_or_fail(aw, orig, False, 1)

    async def _stop_for_admission(self, aw: Object, problem: str) -> Result:
        """Suspend the AppWrapper and drop its ``podSetInfos``, as Kueue stops a job that
        no longer matches its Workload: nothing is created, the next pass goes to
        Suspending, and Kueue starts it again with the Workload's admission."""
        updated = copy.deepcopy(aw)
        updated.setdefault("spec", {})["suspend"] = True
        clear_pod_set_infos(updated)
        await self.client.update(updated)
        self.recorder.event(aw, WARNING, REASON_ADMISSION_MISMATCH,
                            stop_message("AppWrapper", problem))
        return Result()

    async def _running(self, aw: Object) -> Result:
        status = _status(aw)
        orig = copy.deepcopy(status)
        if _suspended(aw):
            return await self._suspend_externally(aw, orig, AppWrapperPhase.RUNNING)
        comp = await self.component_status(aw)
        pods = await self.pod_status(aw)

        if comp.deployed != comp.expected:
            detail = (f"Only found {comp.deployed} deployed components, but was expecting "
                      f"{comp.expected}")
            self._unhealthy(aw, "MissingComponent", detail)
            return await self._transition(aw, orig, AppWrapperPhase.FAILED)

        if comp.failed > 0:
            detail = f"Found {comp.failed} failed components"
            self._unhealthy(aw, "FailedComponent", detail)
            return await self._reset_or_fail(aw, orig, pods.terminal_failure, 1)

        resized = await self.hold_components(aw, comp)
        if resized is not None:
            # Not upstream's (it never reads a component's size again): a component
            # making more pods than admitted that cannot be set back ends the run, as a
            # missing one does.
            self._unhealthy(aw, RESIZED_COMPONENT_REASON, truncate_condition_message(
                f"Components make more pods than admitted: {resized}"))
            return await self._transition(aw, orig, AppWrapperPhase.FAILED)

        if pods.succeeded >= pods.expected and pods.pending + pods.running + pods.failed == 0:
            msg = f"{pods.succeeded} pods succeeded and no running, pending, or failed pods"
            succeeded = AppWrapperPhase.SUCCEEDED.value
            self._set(status, _QR, CONDITION_FALSE, succeeded, msg)
            self._set(status, _RD, CONDITION_TRUE, succeeded, msg)
            return await self._transition(aw, orig, AppWrapperPhase.SUCCEEDED)

        if pods.failed > 0:
            # No message on purpose: a changing count would not move the timestamp anyway,
            # and upstream keeps it empty.
            self._set(status, _UH, CONDITION_TRUE, "FoundFailedPods", "")
            deadline = _transition_time(aw, _UH) + failure_grace_duration(aw, self.config)
            now = self._now()
            if now < deadline:
                await self._patch_status(aw, orig)
                return Result(requeue_after=_seconds(deadline - now))
            self._event(aw, "FoundFailedPods", _UH, f"{pods.failed} failed pods")
            return await self._reset_or_fail(aw, orig, pods.terminal_failure, 1)

        if pods.no_execute_nodes:
            detail = ("Workload contains pods using NoExecute resources on Nodes: "
                      f"{go_string_set(pods.no_execute_nodes)}")
            self._unhealthy(aw, "AutopilotNoExecute", detail)
            # An Autopilot-triggered migration does not count as a retry.
            return await self._reset_or_fail(aw, orig, False, 0)

        self._clear(status, _UH, "FoundNoFailedPods", "")

        if pods.running + pods.succeeded >= pods.expected:
            self._set(status, _PR, CONDITION_TRUE, "SufficientPodsReady",
                      f"{pods.running} pods running; {pods.succeeded} pods succeeded")
            await self._patch_status(aw, orig)
            return Result(requeue_after=HEALTHY_POLL_INTERVAL)

        details = (f"{pods.pending} pods pending; {pods.running} pods running; "
                   f"{pods.succeeded} pods succeeded")
        self._clear(status, _PR, "InsufficientPodsReady", details)
        if pods.pending + pods.running + pods.succeeded >= pods.expected:
            grace = warmup_grace_duration(aw, self.config)
        else:
            grace = admission_grace_duration(aw, self.config)
        if self._now() < _transition_time(aw, _RD) + grace:
            await self._patch_status(aw, orig)
            return Result(requeue_after=SHORT_POLL_INTERVAL)
        self._unhealthy(aw, "InsufficientPodsReady", details)
        return await self._reset_or_fail(aw, orig, pods.terminal_failure, 1)

    async def _suspending(self, aw: Object) -> Result:
        status = _status(aw)
        orig = copy.deepcopy(status)
        suspended = AppWrapperPhase.SUSPENDED.value
        # Undeployment always completes, whatever spec.suspend says by now.
        if _is_true(aw, _RD):
            if not await self._delete_components(aw):
                await self._patch_status(aw, orig)
                return Result(requeue_after=SHORT_POLL_INTERVAL)
            self._set(status, _RD, CONDITION_FALSE, suspended, "Suspend is true")
        self._set(status, _QR, CONDITION_FALSE, suspended, "Suspend is true")
        self._clear(status, _PR, suspended, "")
        self._clear(status, _UH, suspended, "")
        return await self._transition(aw, orig, AppWrapperPhase.SUSPENDED)

    async def _resetting(self, aw: Object) -> Result:
        status = _status(aw)
        orig = copy.deepcopy(status)
        if _suspended(aw):
            # Suspending trumps Resetting.
            return await self._suspend_externally(aw, orig, AppWrapperPhase.RESETTING)
        resetting = AppWrapperPhase.RESETTING.value
        self._clear(status, _PR, resetting, "")
        if _is_true(aw, _RD):
            if not await self._delete_components(aw):
                await self._patch_status(aw, orig)
                return Result(requeue_after=SHORT_POLL_INTERVAL)
            self._set(status, _RD, CONDITION_FALSE, resetting,
                      "Resources deleted for resetting AppWrapper")
        # The pause runs from the failure's detection, not from the end of deletion.
        deadline = _transition_time(aw, _UH) + retry_pause_duration(aw, self.config)
        now = self._now()
        if now < deadline:
            await self._patch_status(aw, orig)
            return Result(requeue_after=_seconds(deadline - now))
        self._set(status, _RD, CONDITION_TRUE, AppWrapperPhase.RESUMING.value,
                  "Reset complete; resuming")
        return await self._transition(aw, orig, AppWrapperPhase.RESUMING)

    async def _failed(self, aw: Object) -> Result:
        status = _status(aw)
        delay = deletion_on_failure_grace_duration(aw, self.config)
        orig = copy.deepcopy(status)
        suspended = _suspended(aw)
        if delay > dt.timedelta(0) and not suspended:
            # Debugging support: keep the failed resources (and the quota) for a while,
            # unless Kueue takes the quota back by suspending.
            self._set(status, _DR, CONDITION_FALSE, "DeletionPaused",
                      f"{DELETION_ON_FAILURE_GRACE_PERIOD_ANNOTATION} has value "
                      f"{format_go_duration(delay)}")
            deadline = _transition_time(aw, _DR) + delay
            now = self._now()
            if now < deadline:
                await self._patch_status(aw, orig)
                return Result(requeue_after=_seconds(deadline - now))
        if _is_true(aw, _RD):
            if not await self._delete_components(aw):
                await self._patch_status(aw, orig)
                return Result(requeue_after=SHORT_POLL_INTERVAL)
            message = "Resources deleted for failed AppWrapper"
            if delay > dt.timedelta(0) and suspended:
                message = "Kueue forced resource deletion by suspending AppWrapper"
            self._set(status, _RD, CONDITION_FALSE, AppWrapperPhase.FAILED.value, message)
        self._set(status, _QR, CONDITION_FALSE, AppWrapperPhase.FAILED.value,
                  "No resources deployed")
        await self._patch_status(aw, orig)
        return Result()

    async def _succeeded(self, aw: Object) -> Result:
        if not _is_true(aw, _RD):
            return Result()
        ttl = time_to_live_after_succeeded_duration(aw, self.config)
        # Measured from ResourcesDeployed's transition: the last deployment, not success.
        deadline = _transition_time(aw, _RD) + ttl
        now = self._now()
        if now < deadline:
            return Result(requeue_after=_seconds(deadline - now))
        status = _status(aw)
        orig = copy.deepcopy(status)
        if not await self._delete_components(aw):
            await self._patch_status(aw, orig)
            return Result(requeue_after=SHORT_POLL_INTERVAL)
        self._set(status, _RD, CONDITION_FALSE, AppWrapperPhase.SUCCEEDED.value,
                  f"Time to live after success of {format_go_duration(ttl)} expired")
        await self._patch_status(aw, orig)
        return Result()

    # -- creating components ---------------------------------------------------------------------

    async def _create_components(self, aw: Object) -> tuple[BaseException | None, bool]:
        """Create every component not yet deployed, in order; stop at the first error.

        Returns ``(error, fatal)``. Status is patched after each step, never carried over.
        """
        for idx in range(len(_components(aw))):
            if idx >= len(_component_statuses(aw)):
                return ComponentError(f"component {idx} has no componentStatus"), True
            cs = _component_statuses(aw)[idx]
            if is_condition_true(cs.get("conditions") or [], _RD):
                continue
            err, fatal = await self._create_component(aw, idx)
            if err is not None:
                return err, fatal
        return None, False

    def _build_component(self, aw: Object, idx: int) -> Object:
        """The object to create: pod-set injection, config injections, owner reference."""
        obj = inject_pod_set_infos(aw, idx)
        GVK.of(obj)  # ValueError when the template has no apiVersion or kind
        if not isinstance(obj.get("metadata"), dict):
            raise ComponentError("component template metadata is not an object")
        paths = [str(ps.get("path") or "") for ps in
                 _component_statuses(aw)[idx].get("podSets") or [] if isinstance(ps, Mapping)]
        return finish_component(obj, aw, paths, self.config)

    async def _create_component(self, aw: Object, idx: int) -> tuple[BaseException | None, bool]:
        try:
            obj = self._build_component(aw, idx)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError,
                ComponentError) as err:
            # Nothing to retry: the template itself cannot become an object to create.
            return err, True
        gvk = GVK.of(obj)
        namespace = namespace_of(aw)

        orig = copy.deepcopy(_status(aw))
        cs = _component_statuses(aw)[idx]
        if find_condition(cs.get("conditions") or [], _RD) is None:
            cs["name"] = name_of(obj)
            cs["kind"] = gvk.kind
            cs["apiVersion"] = gvk.api_version
            self._set(cs, _RD, CONDITION_UNKNOWN, "ComponentCreationInitiated")
            try:
                await self._patch_status(aw, orig)
            except _CALL_ERRORS as err:
                return err, False

        try:
            created = await self.client.create(obj)
        except AlreadyExists:
            try:
                created = await self.api_reader.get(gvk, name_of(obj), namespace=namespace)
            except _CALL_ERRORS as err:
                return err, False
            ref = controller_of(created)
            # Upstream compares the controller's name only, not its UID.
            if ref is None or ref.get("name") != name_of(aw):
                # Deviation: record the failed attempt, so that deleting the AppWrapper's
                # resources never deletes this object, which is not ours (upstream leaves
                # the component Unknown with the name set, and later deletes it).
                return await self._creation_errored(
                    aw, idx, ComponentError(f"resource {name_of(obj)} exists, but is not "
                                            f"controlled by appwrapper"), True)
        except _CALL_ERRORS as err:
            # Fatal: the object can never be created as it is (NoMatch or Invalid).
            return await self._creation_errored(aw, idx, err,
                                                isinstance(err, Invalid | NoKindMatchError))

        orig = copy.deepcopy(_status(aw))
        cs = _component_statuses(aw)[idx]
        cs["name"] = name_of(created)  # the generated name when the template used generateName
        self._set(cs, _RD, CONDITION_TRUE, "ComponentCreatedSuccessfully")
        try:
            await self._patch_status(aw, orig)
        except _CALL_ERRORS as err:
            return err, False
        return None, False

    async def _creation_errored(self, aw: Object, idx: int, err: BaseException,
                                fatal: bool) -> tuple[BaseException | None, bool]:
        """Record that the object was not created; a failed patch is returned instead
        (non-fatal: the next pass retries and reaches a consistent state)."""
        orig = copy.deepcopy(_status(aw))
        self._set(_component_statuses(aw)[idx], _RD, CONDITION_FALSE, "ComponentCreationErrored")
        try:
            await self._patch_status(aw, orig)
        except _CALL_ERRORS as patch_err:
            return patch_err, False
        return err, fatal

    # -- deleting components ---------------------------------------------------------------------

    async def _delete_if_present(self, aw: Object, idx: int, *,
                                 propagation: PropagationPolicy | None = None,
                                 grace_period_seconds: int | None = None) -> bool:
        """Issue a delete for a component that may exist; True while it may still exist."""
        cs = _component_statuses(aw)[idx]
        rd = find_condition(cs.get("conditions") or [], _RD)
        name = str(cs.get("name") or "")
        if rd is None or rd.get("status") == CONDITION_FALSE or (
                rd.get("status") == CONDITION_UNKNOWN and not name):
            return False
        gvk = GVK.from_api_version(str(cs.get("apiVersion") or ""), str(cs.get("kind") or ""))
        try:
            await self.client.delete(gvk, name, namespace=namespace_of(aw),
                                     propagation_policy=propagation,
                                     grace_period_seconds=grace_period_seconds)
        except (NotFound, NoKindMatchError):
            # Gone. A kind no longer served counts as gone too (deviation: upstream logs
            # the error and keeps the component, so its deletion never completes and the
            # finalizer stays). Removing a CRD deletes every object of it; pods of a
            # component whose group is only missing from discovery are still listed by
            # their label, and keep the deletion going until they are gone.
            self._set(cs, _RD, CONDITION_FALSE, "CompononetDeleted")
            return False
        except _CALL_ERRORS as err:
            log.error("Deletion error of %s %s/%s: %s", gvk.kind, namespace_of(aw), name, err)
            return True
        return True

    async def _delete_components(self, aw: Object) -> bool:
        """One step of the two-stage deletion; True once every component and pod is gone."""
        status = _status(aw)
        self._set(status, _DR, CONDITION_TRUE, "DeletionInitiated")
        remaining = False
        for idx in range(min(len(_components(aw)), len(_component_statuses(aw)))):
            present = await self._delete_if_present(aw, idx,
                                                    propagation=PropagationPolicy.BACKGROUND)
            remaining = present or remaining
        grace = forceful_deletion_grace_duration(aw, self.config)
        expired = self._now() > _transition_time(aw, _DR) + grace
        if remaining and not expired:
            return False
        try:
            pods = await self._list_pods(aw)
        except _CALL_ERRORS as err:
            log.error("Pod list error for %s/%s: %s", namespace_of(aw), name_of(aw), err)
            pods = []
        if not remaining and not pods:
            self._clear(status, _DR, "DeletionComplete", "")
            return True
        if not expired:
            await self._delete_untracked_pod_components(aw, pods)
        if expired:
            if pods:
                for pod in pods:
                    try:
                        await self.client.delete(POD_GVK, name_of(pod),
                                                 namespace=namespace_of(pod),
                                                 grace_period_seconds=0)
                    except _CALL_ERRORS as err:
                        log.error("Forceful pod deletion error: %s", err)
            else:
                for idx in range(min(len(_components(aw)), len(_component_statuses(aw)))):
                    await self._delete_if_present(aw, idx, grace_period_seconds=0)
        return False

    async def _delete_untracked_pod_components(self, aw: Object, pods: list[Object]) -> None:
        """Delete (gracefully, at once) the pods that are components of this AppWrapper
        but that its status does not know were created.

        A create whose connection broke after the API server took it is recorded
        ``ComponentCreationErrored`` (upstream: "resource not actually created"), yet the
        Pod exists. Upstream finds it only among the labelled pods and waits the whole
        forceful-deletion grace period (10 minutes) before deleting it; the fault suite saw
        an AppWrapper stay ``Suspending`` that long. A pod the AppWrapper itself controls
        and nobody is deleting yet is such a component: delete it now. Pods of a wrapped
        Job or other controller are left to that controller and the garbage collector.
        """
        uid = (aw.get("metadata") or {}).get("uid")
        for pod in pods:
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp") or not uid:
                continue
            owner = next((r for r in meta.get("ownerReferences") or []
                          if isinstance(r, Mapping) and r.get("controller")), None)
            if owner is None or owner.get("uid") != uid:
                continue
            try:
                await self.client.delete(POD_GVK, name_of(pod), namespace=namespace_of(pod))
                log.info("AppWrapper %s/%s: deleted pod %s, a component its status had "
                         "recorded as not created", namespace_of(aw), name_of(aw),
                         name_of(pod))
            except NotFound:
                pass
            except _CALL_ERRORS as err:
                log.error("Deletion error of pod %s/%s: %s", namespace_of(pod),
                          name_of(pod), err)

    # -- reading status --------------------------------------------------------------------------

    async def _list_pods(self, aw: Object) -> list[Object]:
        selector = LabelSelector.from_labels({APPWRAPPER_LABEL: name_of(aw)})
        pods = await self.client.list(POD_GVK, namespace=namespace_of(aw),
                                      label_selector=selector)
        return list(pods.items)

    def expected_pod_count(self, aw: Object) -> int:
        """The pods the effective PodSets make (a PodSet without replicas makes one)."""
        return sum(replicas(ps) for cs in _component_statuses(aw)
                   for ps in cs.get("podSets") or [] if isinstance(ps, Mapping))

    async def pod_status(self, aw: Object) -> PodStatusSummary:
        """Upstream's ``getPodStatus`` on the pods labelled with the AppWrapper's name."""
        pods = await self._list_pods(aw)
        autopilot = self.config.autopilot
        no_execute = (self.node_health.no_execute
                      if autopilot is not None and autopilot.monitor_nodes else None)
        return pod_status_summary(
            pods, self.expected_pod_count(aw),
            terminal_exit_codes=terminal_exit_codes(aw),
            retryable_exit_codes=retryable_exit_codes(aw),
            no_execute_nodes=no_execute)

    async def component_status(self, aw: Object) -> ComponentStatusSummary:
        """Upstream's ``getComponentStatus``: which components exist and which failed.

        Raises the API error of a component that cannot be read (NotFound excepted)."""
        statuses = _component_statuses(aw)
        summary = ComponentStatusSummary(expected=len(statuses))
        for idx, cs in enumerate(statuses):
            gvk = GVK.from_api_version(str(cs.get("apiVersion") or ""), str(cs.get("kind") or ""))
            try:
                obj = await self.api_reader.get(gvk, str(cs.get("name") or ""),
                                                namespace=namespace_of(aw))
            except NotFound:
                continue
            # As upstream, any other error, a kind the client cannot map (NoKindMatch:
            # its CRD is gone, or discovery missed it) included, fails the pass, which is
            # retried with backoff: the AppWrapper stays Running, its quota held, until
            # the kind is served again (a component gone with its CRD is then missing)
            # or Kueue suspends it.
            if is_being_deleted(obj):
                continue
            summary.deployed += 1
            summary.failed += count_failed(cs, obj)
            summary.objects.append((idx, obj))
        return summary

    # -- holding the components to the admission ---------------------------------------------

    async def hold_components(self, aw: Object, comp: ComponentStatusSummary) -> str | None:
        """Set back the deployed components (``comp.objects``) that make more pods than
        ``status.componentStatus`` admitted (:func:`~.children.size_drifts`), each with a
        Warning ``AdmittedSizeRestored`` event; returns what cannot be set back (None when
        everything is within the admission).

        A write the API server refuses (Invalid, Forbidden: the controller may not update
        that kind) cannot set it back either; other errors (a Conflict with a stale cache,
        a transient failure) end the pass, which is retried with backoff rather than left
        to the next poll: the extra pods run until a pass sets the component back.
        """
        problems: list[str] = []
        statuses = _component_statuses(aw)
        for idx, obj in comp.objects:
            pod_sets = [ps for ps in statuses[idx].get("podSets") or []
                        if isinstance(ps, Mapping)]
            drifts = size_drifts(pod_sets, obj)
            if not drifts:
                continue
            what = (f"{obj.get('kind')} {name_of(obj)} "
                    f"({'; '.join(d.describe() for d in drifts)})")
            restored = restore_sizes(obj, drifts)
            if restored is None:
                problems.append(what)
                continue
            try:
                await self.client.update(restored)
            except (Invalid, Forbidden) as err:
                problems.append(f"{what}, not set back: {err}")
                continue
            self.recorder.event(aw, WARNING, ADMITTED_SIZE_RESTORED_REASON,
                                truncate_event_message(f"{what}: set back to the admitted "
                                                       f"count"))
        return "; ".join(problems) or None

    async def owned_jobs(self, aw: Object) -> list[Object]:
        """The batch/v1 Jobs whose controller owner reference is ``aw`` (through the
        cache's owner-UID index when :func:`setup_controllers` registered it)."""
        uid = uid_of(aw)
        if self.job_owner_index:
            jobs = await self.client.list(JOB_GVK, namespace=namespace_of(aw),
                                          matching_fields={OWNER_UID_INDEX: uid})
        else:
            jobs = await self.client.list(JOB_GVK, namespace=namespace_of(aw))
        return [j for j in jobs.items if (controller_of(j) or {}).get("uid") == uid]

    async def suspend_foreign_jobs(self, aw: Object) -> Exception | None:
        """Suspend the running Jobs that name ``aw`` as their controller but are none of
        its components (:func:`~.children.foreign_jobs`), with a Warning
        ``ForeignJobSuspended`` event on the AppWrapper and on the Job.

        A component is recorded in ``status.componentStatus`` before it is created, but
        the cache may show the new Job before that status: a Job that looks foreign is
        checked again against the AppWrapper read from the API server. An API error is
        returned (None when all went through): the pass goes on with the AppWrapper's
        phase, then fails with it, so that it is retried with backoff.
        """
        try:
            foreign = foreign_jobs(_component_statuses(aw), await self.owned_jobs(aw))
            if foreign:
                fresh = await self.api_reader.get(APPWRAPPER_GVK, name_of(aw),
                                                  namespace=namespace_of(aw))
                foreign = foreign_jobs(_component_statuses(fresh), foreign)
            for job in foreign:
                await suspend_foreign_job(self.client, self.recorder, aw, job)
        except _CALL_ERRORS as err:
            return err
        return None

    # -- wiring ------------------------------------------------------------------------------

    @staticmethod
    def pod_requests(pod: Object) -> list[Request]:
        """A labelled pod that Succeeded or Failed enqueues its AppWrapper.

        Upstream's ``podMapFunc`` maps Succeeded pods only, so a failure waits for the next
        poll (up to a minute once PodsReady); mapping Failed pods too starts the failure
        grace period when the failure happens, with the same decisions afterwards.
        """
        name = labels_of(pod).get(APPWRAPPER_LABEL)
        if name and (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return [Request.of(namespace_of(pod), name)]
        return []

    @staticmethod
    def job_requests(job: Object) -> list[Request]:
        """A Job whose controller is an AppWrapper enqueues that AppWrapper (a Job claiming
        it is suspended at once; a resized component is set back at once)."""
        ref = controller_of(job)
        if (ref is None or ref.get("kind") != APPWRAPPER_GVK.kind
                or str(ref.get("apiVersion") or "").split("/")[0] != APPWRAPPER_GVK.group):
            return []
        return [Request.of(namespace_of(job), str(ref.get("name") or ""))]

    def setup_with_manager(self, mgr: Manager) -> None:
        """``For`` AppWrappers; Pods map to their AppWrapper once Succeeded or Failed; Jobs
        controlled by an AppWrapper map to it when created, or when their suspension or
        size changes (not on each status update)."""
        ControllerBuilder(mgr).named(APPWRAPPER_CONTROLLER_RUNTIME_NAME) \
            .for_(APPWRAPPER_GVK) \
            .watches(POD_GVK, EnqueueRequestsFromMapFunc(self.pod_requests, read_only=True)) \
            .watches(JOB_GVK, EnqueueRequestsFromMapFunc(self.job_requests, read_only=True),
                     predicates=[JobSpecChanged()]) \
            .complete(self)


async def setup_controllers(mgr: Manager,
                            config: AppWrapperConfig | None = None) -> AppWrapperReconciler:
    """Register the AppWrapper controller (and, when Autopilot node monitoring is on, the
    ``NodeMonitor`` controller) with ``mgr``; returns the AppWrapper reconciler.

    Raises :class:`~.config.ConfigError` for an invalid ``config``.
    """
    config = config or AppWrapperConfig()
    config.validate()
    await mgr.get_cache().index_field(JOB_GVK, OWNER_UID_INDEX, owner_uid_values)
    health = NodeHealth()
    if config.autopilot is not None and config.autopilot.monitor_nodes:
        NodeHealthMonitor(mgr.get_client(), config, health).setup_with_manager(mgr)
    counter = Counter(PHASE_COUNTER_NAME,
                      "The total number of times an appwrapper transitioned to a given phase "
                      "per namespace.", ["namespace", "phase"],
                      registry=mgr.get_metrics().registry)
    reconciler = AppWrapperReconciler(
        mgr.get_client(), mgr.get_event_recorder_for(EVENT_RECORDER_NAME), config,
        api_reader=mgr.get_api_reader(), clock=mgr.clock, node_health=health,
        phase_counter=counter)
    reconciler.job_owner_index = True
    reconciler.setup_with_manager(mgr)
    return reconciler
