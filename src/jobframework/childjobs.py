"""Helpers for job kinds that run their work as child batch/v1 Jobs (JobFlow, DaemonJob).

Such a kind is admitted by Kueue as one Workload, but the pods come from Jobs it creates.
The admission data (a :class:`~jobframework.podset.PodSetInfo` per PodSet) must then be
carried into each child's pod template, and taken back out exactly when Kueue suspends
the parent. This module holds the parts every such kind needs:

- :func:`job_outcome`: where a child Job is, from its terminal conditions (``Complete``
  and ``Failed``, never pod counts) and ``spec.suspend``;
- :func:`pod_count`: the pods a Job runs at once, as Kueue counts them;
- :func:`inject_info` / :func:`restore_info`: merge an admission into a child's pod
  template and record, in an annotation the caller names, what was replaced, so the
  restore is exact; :func:`injected_info` / :func:`same_info` tell whether a child
  already carries a given admission;
- :func:`suspend_job` / :func:`resume_job`: the write sequences the API server accepts
  (a Job's scheduling directives may change only while it is suspended and has no
  ``startTime``, as Kueue's own Job integration does on stop);
- :func:`merge_pod_template_params`: labels, annotations and env merged into a pod
  template (the given values win);
- :meth:`ParentReconciler.fail_invalid` and :class:`InvalidSpecEvents`: how a parent whose
  spec breaks its validating webhook's rules (written while the webhook was not called)
  is reported, failed for good or, when its status is another controller's, with a
  Warning event.

Pod templates are kept as sent by the CRDs (any JSON inside): what reads them here never
takes a part of the wrong JSON type for what it should be.
"""

from __future__ import annotations

import copy
import datetime as dt
import enum
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import attrs

from .api.conditions import CONDITION_FALSE, CONDITION_TRUE, find_condition, set_condition
from .constants import truncate_condition_message, truncate_event_message
from .field import ErrorList
from .podset import PodSetInfo, merge_into_template
from .runtime.client import ObjectList, PropagationPolicy
from .runtime.clock import Clock, RealClock
from .runtime.events import WARNING
from .runtime.objects import GVK, Object, annotations_of, name_of, namespace_of, uid_of

log = logging.getLogger(__name__)


class JobPhase(enum.StrEnum):
    """Where a child Job is."""

    RUNNING = "Running"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@attrs.frozen
class JobOutcome:
    """A child Job's phase and, for a failure, its ``Failed`` condition's reason/message."""

    phase: JobPhase
    reason: str = ""
    message: str = ""


def _true_condition(job: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_ and c.get("status") == CONDITION_TRUE:
            return dict(c)
    return None


def job_outcome(job: Mapping[str, Any]) -> JobOutcome:
    """A Job's phase from its terminal conditions (not from pod counts).

    ``Failed`` → FAILED, ``Complete`` → SUCCEEDED, else SUSPENDED when ``spec.suspend``,
    else RUNNING. Interim conditions (``FailureTarget``, ``SuccessCriteriaMet``) are not
    terminal: the Job still has pods to clean up.
    """
    failed = _true_condition(job, "Failed")
    if failed is not None:
        return JobOutcome(JobPhase.FAILED, str(failed.get("reason") or ""),
                          str(failed.get("message") or ""))
    if _true_condition(job, "Complete") is not None:
        return JobOutcome(JobPhase.SUCCEEDED)
    if (job.get("spec") or {}).get("suspend"):
        return JobOutcome(JobPhase.SUSPENDED)
    return JobOutcome(JobPhase.RUNNING)


def pod_count(job_spec: Mapping[str, Any]) -> int:
    """Pods a Job runs at once: parallelism (default 1), capped by completions (as Kueue)."""
    count = job_spec.get("parallelism")
    n = 1 if count is None else int(count)
    completions = job_spec.get("completions")
    if completions is not None and int(completions) < n:
        n = int(completions)
    return n


# --- merging parameters into pod templates ----------------------------------------------------


def _list(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else empty: a pod template the API server kept as
    sent may hold any JSON where a list belongs, which is never read as one."""
    return value if isinstance(value, list) else []


def _containers(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in ("initContainers", "containers"):
        out.extend(c for c in _list(pod_spec.get(key)) if isinstance(c, dict))
    return out


def pod_template_parts(job_spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(metadata, spec)`` of ``job_spec``'s pod template, created empty when missing."""
    tpl = job_spec.get("template")
    if not isinstance(tpl, dict):
        tpl = job_spec["template"] = {}
    meta = tpl.get("metadata")
    if not isinstance(meta, dict):
        meta = tpl["metadata"] = {}
    pod = tpl.get("spec")
    if not isinstance(pod, dict):
        pod = tpl["spec"] = {}
    return meta, pod


def merge_pod_template_params(
    job_spec: dict[str, Any],
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    env: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Merge ``labels``, ``annotations`` and ``env`` into ``job_spec``'s pod template.

    Labels and annotations are merged (the given values win). The env variables go first
    in every container and init container, replacing a variable of the same name, so a
    container's own ``$(VAR)`` can refer to them. Parts of the template of the wrong JSON
    type (it is kept as sent) are never read as what they should be: a map that is no
    object is replaced, env items that are no object are kept as they are, for the API
    server to refuse naming the field.
    """
    meta, pod = pod_template_parts(job_spec)
    if labels:
        meta["labels"] = {**_map(meta.get("labels")), **labels}
    if annotations:
        meta["annotations"] = {**_map(meta.get("annotations")), **annotations}
    if env:
        names = {str(e.get("name")) for e in env}
        for c in _containers(pod):
            own = [e for e in _list(c.get("env"))
                   if not (isinstance(e, dict) and isinstance(e.get("name"), str))
                   or e["name"] not in names]
            c["env"] = [copy.deepcopy(dict(e)) for e in env] + own


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# --- Kueue's admission data on child Jobs -----------------------------------------------------


def info_to_dict(info: PodSetInfo) -> dict[str, Any]:
    """A JSON form of a :class:`PodSetInfo` (absent parts omitted)."""
    d: dict[str, Any] = {"name": info.name, "count": info.count}
    for key, value in (("annotations", info.annotations), ("labels", info.labels),
                       ("nodeSelector", info.node_selector), ("tolerations", info.tolerations),
                       ("schedulingGates", info.scheduling_gates)):
        if value is not None:
            d[key] = copy.deepcopy(value)
    return d


def _opt(value: Any) -> Any:
    return copy.deepcopy(value) if value is not None else None


def info_from_dict(d: Mapping[str, Any]) -> PodSetInfo:
    """The inverse of :func:`info_to_dict`."""
    return PodSetInfo(
        name=str(d.get("name") or ""), count=int(d.get("count") or 0),
        annotations=_opt(d.get("annotations")), labels=_opt(d.get("labels")),
        node_selector=_opt(d.get("nodeSelector")), tolerations=_opt(d.get("tolerations")),
        scheduling_gates=_opt(d.get("schedulingGates")),
    )


def infos_to_json(infos: Sequence[PodSetInfo]) -> str:
    """Infos as the JSON text a parent keeps in an annotation (stable key order)."""
    return json.dumps([info_to_dict(i) for i in infos], sort_keys=True)


def infos_from_json(raw: str | None) -> dict[str, PodSetInfo] | None:
    """PodSet name → info from :func:`infos_to_json` text; None when absent or malformed."""
    if not raw:
        return None
    try:
        items = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(items, list):
        return None
    infos = [info_from_dict(d) for d in items if isinstance(d, dict)]
    return {i.name: i for i in infos}


def stored_infos(parent: Mapping[str, Any], annotation: str) -> dict[str, PodSetInfo]:
    """The admission a Kueue adapter stored on ``parent`` in ``annotation`` (written by
    :func:`infos_to_json`), by PodSet name; empty when absent (malformed: logged, empty)."""
    raw = annotations_of(parent).get(annotation)
    infos = infos_from_json(raw)
    if infos is None:
        if raw:
            log.warning("ignoring malformed %s annotation", annotation)
        return {}
    return infos


def injected_info(job: Mapping[str, Any], annotation: str) -> PodSetInfo | None:
    """What :func:`inject_info` put into ``job``'s pod template, if anything."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(annotation)
    if not raw:
        return None
    try:
        return info_from_dict(json.loads(raw)["injected"])
    except (ValueError, KeyError, TypeError):
        return None


def same_info(a: PodSetInfo | None, b: PodSetInfo | None) -> bool:
    """Whether two infos inject the same data (name and count aside)."""
    def norm(i: PodSetInfo | None) -> dict[str, Any]:
        if i is None:
            return {}
        d = info_to_dict(i)
        d.pop("name")
        d.pop("count")
        return {k: v for k, v in d.items() if v}
    return norm(a) == norm(b)


def inject_info(job: Object, info: PodSetInfo, annotation: str) -> None:
    """Merge ``info`` into ``job``'s pod template, recording in ``annotation`` what it
    replaces.

    Raises :class:`~jobframework.podset.InvalidPodSetUpdateError` on a conflicting key
    (the Job is then unchanged). A previous injection is undone first.
    """
    restore_info(job, annotation)
    tpl = job.setdefault("spec", {}).setdefault("template", {})
    before = copy.deepcopy(tpl)
    meta = before.get("metadata") or {}
    pod = before.get("spec") or {}
    original = {
        "labels": {k: (meta.get("labels") or {}).get(k) for k in info.labels or {}},
        "annotations": {k: (meta.get("annotations") or {}).get(k)
                        for k in info.annotations or {}},
        "nodeSelector": pod.get("nodeSelector"),
        "tolerations": pod.get("tolerations"),
        "schedulingGates": pod.get("schedulingGates"),
    }
    merge_into_template(tpl, info)
    annotations = job.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[annotation] = json.dumps(
        {"injected": info_to_dict(info), "original": original}, sort_keys=True)


def restore_info(job: Object, annotation: str) -> bool:
    """Undo :func:`inject_info` on ``job``; returns whether anything changed.

    Labels and annotations the injection added are removed (or given back their old
    value); nodeSelector, tolerations and scheduling gates get their old value. Keys
    added since by others (the Job controller's selector labels) are kept.
    """
    meta = job.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    raw = annotations.get(annotation)
    if raw is None:
        return False
    del annotations[annotation]
    if not annotations:
        meta.pop("annotations", None)
    try:
        original = json.loads(raw)["original"]
    except (ValueError, KeyError, TypeError):
        return True
    tpl = (job.get("spec") or {}).get("template") or {}
    tmeta = tpl.setdefault("metadata", {})
    pod = tpl.setdefault("spec", {})
    for key in ("labels", "annotations"):
        current = tmeta.get(key) or {}
        for k, old in (original.get(key) or {}).items():
            if old is None:
                current.pop(k, None)
            else:
                current[k] = old
        if current:
            tmeta[key] = current
        else:
            tmeta.pop(key, None)
    for key in ("nodeSelector", "tolerations", "schedulingGates"):
        if original.get(key) is None:
            pod.pop(key, None)
        else:
            pod[key] = original[key]
    return True


def info_fits(template: Mapping[str, Any], info: PodSetInfo) -> None:
    """Raise like :func:`inject_info` would if ``info`` cannot be merged into ``template``."""
    merge_into_template(copy.deepcopy(dict(template)), info)


# --- the parent's controller ------------------------------------------------------------------


class IndexedReader(Protocol):
    """The reads a parent's controller makes: cached ``get`` and ``list`` with field
    indexes (the manager's client is one)."""

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        """One object."""

    async def list(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        matching_fields: Mapping[str, str] | None = None,
    ) -> ObjectList:
        """Objects matching the field indexes."""


class Recorder(Protocol):
    """Where a parent's controller records events (the runtime's ``EventRecorder``)."""

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Record an event about ``obj``."""


class ParentWriter(Protocol):
    """The writes a parent's controller makes on its children and itself."""

    async def create(self, obj: Object) -> Object:
        """POST."""

    async def update(self, obj: Object) -> Object:
        """PUT."""

    async def update_status(self, obj: Object) -> Object:
        """PUT to ``status``."""

    async def delete(self, gvk: GVK, name: str, *, namespace: str | None = None,
                     propagation_policy: PropagationPolicy | None = None) -> Any:
        """DELETE."""


def set_status_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    true: bool,
    reason: str,
    message: str,
    generation: int,
    now: dt.datetime,
    false_reason: str,
) -> None:
    """Set condition ``type_``: added when it first becomes true, kept (as False, with
    ``false_reason`` and no message) once it no longer holds, absent until then."""
    type_ = str(type_)
    if not true and find_condition(conditions, type_) is None:
        return
    set_condition(conditions, {
        "type": type_, "status": CONDITION_TRUE if true else CONDITION_FALSE,
        "reason": reason if true else false_reason, "message": message if true else "",
        "observedGeneration": generation,
    }, now=now)


def child_status_entry(name: str, phase: str, job_name: str, reason: str = "",
                       message: str = "") -> dict[str, Any]:
    """One ``status`` entry for a child (a flow, a node): empty reason and message left out."""
    d: dict[str, Any] = {"name": name, "phase": str(phase), "jobName": job_name}
    if reason:
        d["reason"] = reason
    if message:
        d["message"] = message
    return d


def mirrored_children(parent: Mapping[str, Any], key: str
                      ) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """The children (``status[key]`` entries: flows, nodes) whose Job is in the parent's
    ``jobStatusList``, each with that Job's status.

    Read defensively and by names only (``jobStatusList`` keys are
    ``<job>/<namespace>``): the status may be a copy of another cluster's, as MultiKueue
    mirrors a worker's whole status, naming Jobs and nodes that are not local; entries
    of an unexpected shape are left out.
    """
    status = parent.get("status")
    status = status if isinstance(status, Mapping) else {}
    raw = status.get("jobStatusList")
    by_job = {str(k).partition("/")[0]: v for k, v in raw.items()
              if isinstance(v, Mapping)} if isinstance(raw, Mapping) else {}
    entries = status.get(key)
    out = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, Mapping):
            job_status = by_job.get(str(entry.get("jobName") or ""))
            if job_status is not None:
                out.append((entry, job_status))
    return out


# --- a spec that breaks the validating webhook's rules -----------------------------------------

#: The reason of the ``Failed`` condition (and of the Warning event of an object whose
#: status is not ours to write) when the spec breaks the rules of the kind's validating
#: webhook: the object was written while the webhook was not called (its configuration
#: removed, ``failurePolicy: Ignore`` during an outage, a restored backup).
INVALID_SPEC_REASON: Final = "InvalidSpec"
#: The ``status.state`` and condition type of a failed parent (JobFlow, DaemonJob).
FAILED: Final = "Failed"


def invalid_spec_message(errs: ErrorList) -> str:
    """``invalid spec: `` and the field errors worded as the webhook's denial words them
    (one error: itself; several: ``[e1, e2]``), within a condition message's limit."""
    return truncate_condition_message(f"invalid spec: {errs.to_aggregate()}")


def failed_for_invalid_spec(parent: Mapping[str, Any]) -> bool:
    """Whether ``parent`` was failed for an invalid spec (its ``Failed`` condition is True
    with :data:`INVALID_SPEC_REASON`): a terminal state, kept even if the spec is later
    made valid (Kueue has finished its Workload by then)."""
    status = parent.get("status")
    if not isinstance(status, Mapping) or status.get("state") != FAILED:
        return False
    conditions = status.get("conditions")
    cond = find_condition(conditions if isinstance(conditions, list) else [], FAILED)
    return (cond is not None and cond.get("status") == CONDITION_TRUE
            and cond.get("reason") == INVALID_SPEC_REASON)


def generation_observed(parent: Mapping[str, Any]) -> bool:
    """Whether the controller already acted on this generation of ``parent``'s spec
    (``status.observedGeneration`` is ``metadata.generation``): its rules were checked
    then, and are checked again only when the spec changes. So an object accepted by an
    older, laxer webhook keeps running after an upgrade until it is edited."""
    generation = (parent.get("metadata") or {}).get("generation")
    status = parent.get("status")
    return (bool(generation) and isinstance(status, Mapping)
            and status.get("observedGeneration") == generation)


class InvalidSpecEvents:
    """One Warning event (:data:`INVALID_SPEC_REASON`) per generation of an invalid object
    whose status this controller does not write: a JobTemplate (its status has no
    conditions), or a parent that another controller manages (MultiKueue copies the
    worker's status over it).

    What was reported is remembered in memory, so a restarted manager reports each such
    object once more; the Event API aggregates repeats into one event's count.
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._reported: dict[tuple[str, str], tuple[str, int, str]] = {}

    def report(self, obj: Mapping[str, Any], errs: ErrorList) -> None:
        """Record the event for ``obj`` unless this generation was reported already."""
        message = invalid_spec_message(errs)
        generation = int((obj.get("metadata") or {}).get("generation") or 0)
        key = (namespace_of(obj), name_of(obj))
        seen = (uid_of(obj), generation, message)
        if self._reported.get(key) == seen:
            return
        self._reported[key] = seen
        self.recorder.event(obj, WARNING, INVALID_SPEC_REASON, truncate_event_message(message))

    def forget(self, namespace: str, name: str) -> None:
        """Drop what was reported about ``namespace/name`` (deleted, or valid again)."""
        self._reported.pop((namespace, name), None)


class ParentReconciler:
    """Base of the controllers of parents of child Jobs: their reads, writes, events and
    clock."""

    def __init__(self, reader: IndexedReader, writer: ParentWriter, recorder: Recorder, *,
                 clock: Clock | None = None) -> None:
        self.reader = reader
        self.writer = writer
        self.recorder = recorder
        self.clock: Clock = clock or RealClock()
        #: The events about invalid parents whose status is another controller's.
        self.invalid_spec_events = InvalidSpecEvents(recorder)

    async def fail_invalid(self, parent: Object, errs: ErrorList,
                           children: Sequence[Object]) -> None:
        """Fail ``parent``, whose spec breaks its webhook's rules (``errs``), for good.

        Its running child Jobs are suspended (none is created), ``status.state`` becomes
        ``Failed`` with the ``Failed`` condition True (:data:`INVALID_SPEC_REASON`, the
        message listing ``errs`` as the webhook words them, the generation observed), the
        rest of ``status`` is kept, so what Kueue reads of the run stays as it was, and one
        Warning ``Failed`` event says so; a new generation that is still invalid updates
        the message (and sends the event again only if the message changed). Kueue's
        adapter then reports the parent finished, failed, and Kueue finishes its Workload.
        """
        for job in children:
            if job_outcome(job).phase == JobPhase.RUNNING:
                await suspend_job(self.writer, job)
        message = invalid_spec_message(errs)
        old = parent.get("status")
        old = old if isinstance(old, dict) else {}
        status = copy.deepcopy(old)
        status["state"] = FAILED
        conditions = status.get("conditions")
        conditions = copy.deepcopy(conditions) if isinstance(conditions, list) else []
        generation = int((parent.get("metadata") or {}).get("generation") or 0)
        before = find_condition(conditions, FAILED)
        old_message = before.get("message") if before is not None else None
        set_status_condition(conditions, FAILED, True, INVALID_SPEC_REASON, message,
                             generation, self.clock.now(), "")
        status["conditions"] = conditions
        if generation:
            status["observedGeneration"] = generation
        if status == old:
            return
        updated = copy.deepcopy(parent)
        updated["status"] = status
        await self.writer.update_status(updated)
        if old.get("state") != FAILED or old_message != message:
            self.recorder.event(parent, WARNING, FAILED, truncate_event_message(message))


# --- suspending and resuming child Jobs -------------------------------------------------------


class JobWriter(Protocol):
    """The writes :func:`suspend_job` and :func:`resume_job` make."""

    async def update(self, obj: Object) -> Object:
        """PUT."""

    async def update_status(self, obj: Object) -> Object:
        """PUT to ``status``."""


async def _clear_start_time(writer: JobWriter, job: Object) -> Object:
    if (job.get("status") or {}).get("startTime"):
        job["status"].pop("startTime")
        job = copy.deepcopy(await writer.update_status(job))
    return job


async def suspend_job(
    writer: JobWriter, job: Object, *, restore_annotation: str | None = None
) -> Object:
    """Suspend ``job``; with ``restore_annotation`` also take the admission data out.

    The API server lets a Job's scheduling directives change only once it *was*
    suspended and has no ``startTime``, so this is three writes, as Kueue's Job.Stop:
    suspend, clear ``startTime``, restore. Returns the Job as last written.
    """
    job = copy.deepcopy(job)
    if not job.setdefault("spec", {}).get("suspend"):
        job["spec"]["suspend"] = True
        job = copy.deepcopy(await writer.update(job))
    if restore_annotation is None:
        return job
    job = await _clear_start_time(writer, job)
    if restore_info(job, restore_annotation):
        job = await writer.update(job)
    return job


async def resume_job(
    writer: JobWriter, job: Object, info: PodSetInfo | None, annotation: str
) -> Object:
    """Unsuspend ``job``, first giving it ``info`` when it carries other admission data.

    Raises :class:`~jobframework.podset.InvalidPodSetUpdateError` when ``info`` conflicts
    with the template (the Job then stays suspended). Returns the Job as last written.
    """
    job = copy.deepcopy(job)
    if not same_info(injected_info(job, annotation), info):
        job = await _clear_start_time(writer, job)
        restore_info(job, annotation)
        if info is not None:
            inject_info(job, info, annotation)
    job.setdefault("spec", {})["suspend"] = False
    return await writer.update(job)


__all__ = [
    "FAILED",
    "INVALID_SPEC_REASON",
    "IndexedReader",
    "InvalidSpecEvents",
    "JobOutcome",
    "JobPhase",
    "JobWriter",
    "ParentReconciler",
    "ParentWriter",
    "Recorder",
    "child_status_entry",
    "failed_for_invalid_spec",
    "generation_observed",
    "info_fits",
    "info_from_dict",
    "info_to_dict",
    "infos_from_json",
    "infos_to_json",
    "inject_info",
    "injected_info",
    "invalid_spec_message",
    "job_outcome",
    "merge_pod_template_params",
    "mirrored_children",
    "pod_count",
    "pod_template_parts",
    "restore_info",
    "resume_job",
    "same_info",
    "set_status_condition",
    "stored_infos",
    "suspend_job",
]
