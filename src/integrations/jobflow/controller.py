"""The JobFlow DAG controller and the JobTemplate controller.

:class:`JobFlowReconciler` drives one JobFlow per reconcile, level-based:

1. read the JobFlow and its children: the Jobs whose *controller* owner reference has
   the JobFlow's UID, from the cache's owner-UID index (never a cluster-wide list);
2. :func:`~.dag.plan` the phases; then, unless the JobFlow is being deleted:

   - a step failed: stop (suspend) the unfinished Jobs, create nothing more;
   - ``spec.suspend``: create nothing, suspend running Jobs and take Kueue's admission
     data back out of their pod templates;
   - otherwise: resume suspended Jobs (with the current admission data) and create the
     Jobs of the ready steps, injecting the admission data for their PodSet;

3. write ``status`` (state, ``jobStatusList``, per-flow phases, counts, conditions) when
   it changed, and record an event when the flow finishes.

Children are held to the admission (:mod:`jobframework.childguard`): an unfinished Job
set to run more pods at once than the admission counts for its flow gets its
``parallelism`` set back (Warning ``AdmittedSizeRestored``), and a Job that names the
JobFlow as its controller without being one of its flows' ``<jobflow>-<flow>`` Jobs
(:mod:`.children`) is suspended (Warning ``ForeignJobSuspended``), never counted.

Before all that, each new generation of the JobFlow (not yet in
``status.observedGeneration``) is checked against its validating webhook's rules
(:func:`~.webhook.validate_jobflow`): one written while the webhook was not called (its
configuration removed, say) and breaking them creates no Job. It fails for good
(:meth:`~jobframework.childjobs.ParentReconciler.fail_invalid`): state ``Failed``, the
``Failed`` condition with reason ``InvalidSpec`` and the webhook's field errors, one
Warning ``Failed`` event, running Jobs suspended; Kueue then finishes its Workload. Still
invalid in a later generation: the message follows; corrected: it stays failed. A
generation already acted on is not checked again, so one that an older, laxer webhook
accepted keeps running after an upgrade.

A JobFlow whose ``spec.managedBy`` names another controller (MultiKueue on a manager
cluster, see :func:`~.api.managed_elsewhere`) is left alone entirely: no Job is created,
suspended or resumed, nothing is written to it (its ``status`` is the worker's, copied by
MultiKueue), even once Kueue unsuspends it on admission; an invalid one gets a Warning
``InvalidSpec`` event only. A ``managedBy`` that is itself invalid names no controller:
such a JobFlow is failed here. The generic reconciler still keeps its Workload. On the
worker cluster the copy has no ``managedBy`` and runs here.

A step whose ``jobTemplateRef`` names a missing JobTemplate waits: its phase is
``WaitingForTemplate``, the ``JobTemplateMissing`` condition and a Warning event say so,
and the JobTemplate watch reconciles the JobFlow when the template appears.

Under Kueue (:attr:`JobFlowReconciler.admission_guard`, set by :func:`~.setup.setup`),
the admission the JobFlow carries is Kueue's only as long as nobody else wrote it: before
a Job is created or resumed, each step's stored admission must be the one the JobFlow's
admitted Workload gives, and a new Job must run the count and containers the Workload
admitted for its step (:mod:`jobframework.admittedworkload`). Otherwise nothing is
created: the JobFlow is suspended with its admission dropped and a Warning
``AdmissionMismatch`` event, and Kueue's reconciler starts it again with the Workload's
admission. A step naming a JobTemplate runs the JobSpec read when Kueue admitted the
JobFlow (:mod:`.admission`), not the template's current one.

:class:`JobTemplateReconciler` keeps ``status.dependencyList`` equal to the names of the
Jobs created from the template (by their ``createByJobTemplate`` annotation, through an
index), clearing it when none is left; a template breaking the webhook's rule gets a
Warning ``InvalidSpec`` event.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

from jobframework import childjobs
from jobframework.admittedworkload import (
    REASON_ADMISSION_MISMATCH,
    AdmissionGuard,
    WorkloadAdmission,
    info_mismatch,
    pod_set_mismatch,
    stop_message,
)
from jobframework.api.workload import PodSet
from jobframework.childguard import restore_admitted_size, suspend_foreign_job
from jobframework.childjobs import (
    failed_for_invalid_spec,
    generation_observed,
    resume_job,
    suspend_job,
)
from jobframework.field import ErrorList
from jobframework.managedby import validate_managed_by
from jobframework.podset import InvalidPodSetUpdateError, PodSetInfo
from jobframework.runtime.builder import ControllerBuilder
from jobframework.runtime.cache import Cache
from jobframework.runtime.errors import AlreadyExists, BadRequest, Invalid, NotFound
from jobframework.runtime.events import NORMAL, WARNING
from jobframework.runtime.handler import EnqueueRequestsFromMapFunc
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import (
    Object,
    annotations_of,
    controller_of,
    is_being_deleted,
    name_of,
    namespace_of,
    uid_of,
)
from jobframework.runtime.reconcile import Request, Result

from .admission import admitted_templates, drop_admission
from .api import (
    CREATED_BY_TEMPLATE_ANNOTATION,
    GROUP,
    INJECTED_INFO_ANNOTATION,
    JOB_GVK,
    JOBFLOW_GVK,
    JOBTEMPLATE_GVK,
    POD_SETS_INFO_ANNOTATION,
    ConditionType,
    Flow,
    FlowPhase,
    JobFlowSpec,
    State,
    child_job_name,
    job_status_key,
    managed_by,
    managed_elsewhere,
    parse_template_annotation,
    template_annotation_value,
    template_job_spec,
)
from .children import foreign_jobs
from .dag import (
    Plan,
    build_child_job,
    inject_info,
    job_outcome,
    plan,
    pod_count,
)
from .webhook import validate_jobflow, validate_jobtemplate

log = logging.getLogger(__name__)

#: Job index: the UID of the JobFlow named by the Job's controller owner reference.
OWNER_UID_INDEX: Final = "jobflow.api.practice.com/owner-uid"
#: JobFlow index: the JobTemplates its flows reference.
TEMPLATE_REF_INDEX: Final = "jobflow.api.practice.com/template-ref"
#: Job index: the ``createByJobTemplate`` annotation (``<namespace>.<template>``).
CREATED_BY_TEMPLATE_INDEX: Final = "jobflow.api.practice.com/created-by-template"

JOBFLOW_CONTROLLER_NAME: Final = "jobflow-controller"
JOBTEMPLATE_CONTROLLER_NAME: Final = "jobtemplate-controller"


#: The reads, writes and events of the controller (shared with the other parents of
#: child Jobs).
IndexedReader = childjobs.IndexedReader
Recorder = childjobs.Recorder
Writer = childjobs.ParentWriter


# --- indexes ------------------------------------------------------------------------------


def owner_uid_values(job: Object) -> list[str]:
    """:data:`OWNER_UID_INDEX` values: the controlling JobFlow's UID, if any."""
    ref = controller_of(job)
    if ref is None or ref.get("kind") != JOBFLOW_GVK.kind:
        return []
    if str(ref.get("apiVersion", "")).split("/")[0] != GROUP:
        return []
    return [str(ref.get("uid") or "")]


def template_ref_values(jobflow: Object) -> list[str]:
    """:data:`TEMPLATE_REF_INDEX` values: the JobTemplates the flows reference."""
    return sorted({f.job_template_ref for f in JobFlowSpec.of(jobflow).flows
                   if f.job_template_ref})


def created_by_template_values(job: Object) -> list[str]:
    """:data:`CREATED_BY_TEMPLATE_INDEX` values: the ``createByJobTemplate`` annotation."""
    value = annotations_of(job).get(CREATED_BY_TEMPLATE_ANNOTATION)
    return [value] if value else []


async def setup_indexes(cache: Cache) -> None:
    """Register the three field indexes the controllers read through."""
    await cache.index_field(JOB_GVK, OWNER_UID_INDEX, owner_uid_values)
    await cache.index_field(JOBFLOW_GVK, TEMPLATE_REF_INDEX, template_ref_values)
    await cache.index_field(JOB_GVK, CREATED_BY_TEMPLATE_INDEX, created_by_template_values)


def pod_sets_infos(jobflow: Mapping[str, Any]) -> dict[str, PodSetInfo]:
    """The admission data the Kueue adapter stored on the JobFlow, by flow name."""
    return childjobs.stored_infos(jobflow, POD_SETS_INFO_ANNOTATION)


# --- the JobFlow controller --------------------------------------------------------------------


class _AdmissionMismatchError(Exception):
    """What a step would run is not what the JobFlow's Workload admitted."""


class JobFlowReconciler(childjobs.ParentReconciler):
    """Reconciles JobFlows (see the module docstring)."""

    #: Set when Kueue queues the JobFlows (:func:`~.setup.setup` with Kueue options):
    #: before a Job is created or resumed, the admission the JobFlow carries and what the
    #: step would run are checked against the Workload's admission.
    admission_guard: AdmissionGuard | None = None

    async def children(self, jobflow: Object) -> dict[str, Object | None]:
        """flow name → its Job (``<jobflow>-<flow>`` controlled by this JobFlow), or None."""
        owned = await self.reader.list(
            JOB_GVK, namespace=namespace_of(jobflow),
            matching_fields={OWNER_UID_INDEX: uid_of(jobflow)})
        by_name = {name_of(j): j for j in owned.items}
        name = name_of(jobflow)
        return {f.name: by_name.get(child_job_name(name, f.name))
                for f in JobFlowSpec.of(jobflow).flows}

    async def reconcile(self, request: Request) -> Result:
        """One pass over the JobFlow ``request`` names."""
        try:
            jobflow = await self.reader.get(JOBFLOW_GVK, request.name,
                                            namespace=request.namespace)
        except NotFound:
            self.invalid_spec_events.forget(request.namespace, request.name)
            return Result()
        # First, whatever else this pass does: a Job claiming the JobFlow it was not
        # created by must not run on the JobFlow's admission (see .children).
        await self.suspend_foreign_jobs(jobflow)
        if managed_elsewhere(jobflow) and not validate_managed_by(jobflow):
            errs = validate_jobflow(jobflow)
            if errs:
                # Its status is the other controller's (MultiKueue copies the worker's).
                self.invalid_spec_events.report(jobflow, errs)
            log.debug("JobFlow %s/%s is managed by %s; leaving it alone", request.namespace,
                      request.name, managed_by(jobflow))
            return Result()
        if not is_being_deleted(jobflow):
            # The webhook's own rules, again, on each new generation before it is acted
            # on: an object written while the webhook was not called must not be run as
            # if it had passed them.
            errs = ErrorList() if generation_observed(jobflow) else validate_jobflow(jobflow)
            if errs:
                owned = await self.reader.list(
                    JOB_GVK, namespace=namespace_of(jobflow),
                    matching_fields={OWNER_UID_INDEX: uid_of(jobflow)})
                await self.fail_invalid(jobflow, errs, owned.items)
                return Result()
            if failed_for_invalid_spec(jobflow):
                return Result()  # terminal, even once the spec is corrected
        spec = JobFlowSpec.of(jobflow)
        children = await self.children(jobflow)
        p = plan(jobflow, children)
        notes: dict[str, tuple[FlowPhase, str, str]] = {}
        stale: list[str] = []
        if not is_being_deleted(jobflow):
            if p.failed_flow:
                for f in p.stop:
                    job = children[f]
                    assert job is not None
                    children[f] = await self._suspend(job, restore=False)
            elif spec.suspend:
                for f, job in children.items():
                    # Suspended Jobs too: a pass that suspended one may have been cut short
                    # before the restore (suspending again writes nothing when clean).
                    if job is not None and job_outcome(job).phase in (FlowPhase.RUNNING,
                                                                      FlowPhase.SUSPENDED):
                        children[f] = await self._suspend(job, restore=True)
            else:
                infos = pod_sets_infos(jobflow)
                for f, job in children.items():
                    if job is not None:
                        children[f] = await self._hold_to_admission(jobflow, f, job,
                                                                    infos.get(f))
                resume = [f for f, job in children.items()
                          if job is not None and job_outcome(job).phase == FlowPhase.SUSPENDED]
                try:
                    admission = await self._admission(jobflow, infos, [*resume, *p.ready])
                    for f in resume:
                        job = children[f]
                        assert job is not None
                        children[f] = await self._resume(job, infos.get(f))
                    for f in p.ready:
                        flow = spec.flow(f)
                        assert flow is not None
                        children[f] = await self._create(jobflow, flow, infos.get(f), notes,
                                                         stale, admission)
                except _AdmissionMismatchError as err:
                    return await self._stop_for_admission(jobflow, str(err))
            p = plan(jobflow, children)
        if stale:
            # A Job we would create exists but the cache has not shown it yet: writing
            # status now would report that step as not started. Its event requeues us.
            return Result(requeue=True)
        await self._write_status(jobflow, spec, p, children, notes)
        return Result()

    # -- the admission --

    async def _admission(self, jobflow: Object, infos: Mapping[str, PodSetInfo],
                         steps: list[str]) -> WorkloadAdmission | None:
        """The Workload's admission, once checked against what ``infos`` (the JobFlow's)
        say of ``steps``; None when nothing is checked (no step to start, no Kueue, or a
        JobFlow Kueue does not queue: no Workload, no admission stored). Raises
        :class:`_AdmissionMismatchError`."""
        if self.admission_guard is None or not steps:
            return None
        admission = await self.admission_guard.admission(jobflow)
        if not admission.workload and not infos:
            return None
        for f in steps:
            problem = info_mismatch(f, infos.get(f), admission)
            if problem is not None:
                raise _AdmissionMismatchError(problem)
        return admission

    async def _stop_for_admission(self, jobflow: Object, problem: str) -> Result:
        """Suspend the JobFlow and drop the admission it carries, as Kueue stops a job
        that no longer matches its Workload; the next pass suspends its Jobs."""
        updated = copy.deepcopy(jobflow)
        updated.setdefault("spec", {})["suspend"] = True
        drop_admission(updated)
        await self.writer.update(updated)
        self.recorder.event(jobflow, WARNING, REASON_ADMISSION_MISMATCH,
                            stop_message("JobFlow", problem))
        return Result()

    # -- child Jobs --

    async def suspend_foreign_jobs(self, jobflow: Object) -> None:
        """Suspend the running Jobs that name ``jobflow`` as their controller but that
        its controller did not create (:func:`~.children.foreign_jobs`), with a Warning
        ``ForeignJobSuspended`` event on the JobFlow and on the Job."""
        owned = await self.reader.list(
            JOB_GVK, namespace=namespace_of(jobflow),
            matching_fields={OWNER_UID_INDEX: uid_of(jobflow)})
        for job in foreign_jobs(jobflow, owned.items):
            await suspend_foreign_job(self.writer, self.recorder, jobflow, job)

    async def _hold_to_admission(self, jobflow: Object, flow: str, job: Object,
                                 info: PodSetInfo | None) -> Object:
        """``job`` (``flow``'s, unfinished) set back to the pods at once admitted for the
        flow (``info.count``) when it was scaled up; unchanged without an admission."""
        if info is None or job_outcome(job).phase not in (FlowPhase.RUNNING,
                                                          FlowPhase.SUSPENDED):
            return job
        return await restore_admitted_size(self.writer, self.recorder, jobflow, job,
                                           info.count, f"flow {flow}")

    async def _suspend(self, job: Object, *, restore: bool) -> Object:
        return await suspend_job(
            self.writer, job, restore_annotation=INJECTED_INFO_ANNOTATION if restore else None)

    async def _resume(self, job: Object, info: PodSetInfo | None) -> Object:
        try:
            return await resume_job(self.writer, job, info, INJECTED_INFO_ANNOTATION)
        except InvalidPodSetUpdateError as err:
            self.recorder.event(job, WARNING, "FailedInjection", str(err))
            return job

    async def _create(
        self,
        jobflow: Object,
        flow: Flow,
        info: PodSetInfo | None,
        notes: dict[str, tuple[FlowPhase, str, str]],
        stale: list[str],
        admission: WorkloadAdmission | None = None,
    ) -> Object | None:
        ns = namespace_of(jobflow)
        base: dict[str, Any] | None = flow.job_template
        snapshot = admitted_templates(jobflow) if flow.job_template_ref else {}
        if flow.name in snapshot:
            # Read once, when Kueue admitted the JobFlow: a later edit of the JobTemplate
            # is for the next admission.
            base = snapshot[flow.name]
        elif flow.job_template_ref:
            try:
                template = await self.reader.get(JOBTEMPLATE_GVK, flow.job_template_ref,
                                                 namespace=ns)
                base = template_job_spec(template)
            except NotFound:
                base = None
            if base is None:
                message = (f"flow {flow.name} waits for JobTemplate "
                           f"{flow.job_template_ref!r} in namespace {ns!r}, which does not "
                           f"exist")
                notes[flow.name] = (FlowPhase.WAITING_FOR_TEMPLATE, "JobTemplateNotFound",
                                    message)
                self.recorder.event(jobflow, WARNING, "JobTemplateNotFound", message)
                return None
        job = build_child_job(jobflow, flow, base or {}, template_ref=flow.job_template_ref)
        if admission is not None:
            admitted = admission.pod_sets.get(flow.name)
            assert admitted is not None  # checked with the infos
            problem = pod_set_mismatch(
                PodSet(name=flow.name, count=pod_count(job["spec"]),
                       template=job["spec"]["template"]), admitted, admission.workload)
            if problem is not None:
                raise _AdmissionMismatchError(problem)
        if info is not None:
            try:
                inject_info(job, info)
            except InvalidPodSetUpdateError as err:
                notes[flow.name] = (FlowPhase.PENDING, "FailedInjection", str(err))
                self.recorder.event(jobflow, WARNING, "FailedInjection", str(err))
                return None
        try:
            created = await self.writer.create(job)
        except AlreadyExists:
            stale.append(flow.name)
            return None
        except (Invalid, BadRequest) as err:
            notes[flow.name] = (FlowPhase.PENDING, "FailedCreate", str(err))
            self.recorder.event(jobflow, WARNING, "FailedCreate",
                                f"flow {flow.name}: {err}")
            return None
        self.recorder.event(jobflow, NORMAL, "Created",
                            f"Created Job {name_of(created)} for flow {flow.name}")
        return created

    # -- status --

    def desired_status(
        self,
        jobflow: Object,
        spec: JobFlowSpec,
        p: Plan,
        children: Mapping[str, Object | None],
        notes: Mapping[str, tuple[FlowPhase, str, str]],
    ) -> dict[str, Any]:
        """The ``status`` to write for this pass."""
        old = jobflow.get("status") or {}
        ns = namespace_of(jobflow)
        flows = []
        for fs in p.flows:
            entry = fs.to_dict()
            if fs.name in notes and fs.phase == FlowPhase.PENDING:
                phase, reason, message = notes[fs.name]
                entry.update(phase=phase.value, reason=reason, message=message)
            flows.append(entry)
        status: dict[str, Any] = {
            "state": p.state.value,
            "jobStatusList": {job_status_key(name_of(j), ns): copy.deepcopy(j.get("status") or {})
                              for j in children.values() if j is not None},
            "flows": flows,
            "totalFlows": len(p.flows),
            "completedFlows": p.count(FlowPhase.SUCCEEDED),
            "runningFlows": p.count(FlowPhase.RUNNING),
        }
        if p.failed_flow:
            status["failedFlow"] = p.failed_flow
        generation = int((jobflow.get("metadata") or {}).get("generation") or 0)
        if generation:
            status["observedGeneration"] = generation
        conditions: list[dict[str, Any]] = copy.deepcopy(list(old.get("conditions") or []))
        now = self.clock.now()
        waiting = [e["message"] for e in flows
                   if e["phase"] == FlowPhase.WAITING_FOR_TEMPLATE.value]
        # Conditions appear once true and stay (as False) afterwards.
        def set_cond(type_: ConditionType, true: bool, reason: str, message: str,
                     false_reason: str) -> None:
            childjobs.set_status_condition(conditions, type_, true, reason, message,
                                           generation, now, false_reason)

        set_cond(ConditionType.SUCCEEDED, p.state == State.SUCCEED, "AllFlowsCompleted",
                 f"all {len(p.flows)} flows completed", "NotCompleted")
        set_cond(ConditionType.FAILED, p.state == State.FAILED, "FlowFailed",
                 p.failure_message, "NoFlowFailed")
        set_cond(ConditionType.TEMPLATE_MISSING, bool(waiting), "JobTemplateNotFound",
                 "; ".join(waiting), "JobTemplatesFound")
        suspended = spec.suspend and p.state in (State.PENDING, State.RUNNING)
        set_cond(ConditionType.SUSPENDED, suspended, "JobFlowSuspended",
                 "the JobFlow is suspended: no Job is created and running Jobs are "
                 "suspended", "JobFlowResumed")
        if conditions:
            status["conditions"] = conditions
        return status

    async def _write_status(
        self,
        jobflow: Object,
        spec: JobFlowSpec,
        p: Plan,
        children: Mapping[str, Object | None],
        notes: Mapping[str, tuple[FlowPhase, str, str]],
    ) -> None:
        old = jobflow.get("status") or {}
        status = self.desired_status(jobflow, spec, p, children, notes)
        if status == old:
            return
        updated = copy.deepcopy(jobflow)
        updated["status"] = status
        await self.writer.update_status(updated)
        if old.get("state") != status["state"]:
            if p.state == State.SUCCEED:
                self.recorder.event(jobflow, NORMAL, "Succeeded",
                                    f"all {len(p.flows)} flows of JobFlow "
                                    f"{name_of(jobflow)} completed")
            elif p.state == State.FAILED:
                self.recorder.event(jobflow, WARNING, "Failed", p.failure_message)

    # -- wiring --

    async def jobflows_for_template(self, template: Object) -> list[Request]:
        """The JobFlows in the template's namespace that reference it (by index)."""
        flows = await self.reader.list(
            JOBFLOW_GVK, namespace=namespace_of(template),
            matching_fields={TEMPLATE_REF_INDEX: name_of(template)})
        return [Request.of(namespace_of(f), name_of(f)) for f in flows.items]

    def setup_with_manager(self, mgr: Manager) -> None:
        """``For`` JobFlows, ``Owns`` Jobs, watches JobTemplates (indexes: see setup)."""
        ControllerBuilder(mgr).named(JOBFLOW_CONTROLLER_NAME).for_(JOBFLOW_GVK) \
            .owns(JOB_GVK) \
            .watches(JOBTEMPLATE_GVK, EnqueueRequestsFromMapFunc(self.jobflows_for_template,
                                                                read_only=True)) \
            .complete(self)


# --- the JobTemplate controller ----------------------------------------------------------------


def template_requests(job: Object) -> Iterable[Request]:
    """The JobTemplate a Job was created from (its ``createByJobTemplate`` annotation)."""
    value = annotations_of(job).get(CREATED_BY_TEMPLATE_ANNOTATION)
    parsed = parse_template_annotation(value) if value else None
    return [Request.of(*parsed)] if parsed else []


class JobTemplateReconciler:
    """Keeps ``status.dependencyList`` of a JobTemplate current, and reports a template
    that breaks the webhook's rule (written while the webhook was not called) with one
    Warning ``InvalidSpec`` event per generation: its status has no conditions, and
    nothing else reads it until a flow names it.

    Args:
        recorder: where that event goes (None: not reported).
    """

    def __init__(self, reader: IndexedReader, writer: Writer,
                 recorder: Recorder | None = None) -> None:
        self.reader = reader
        self.writer = writer
        self.invalid_spec_events = (childjobs.InvalidSpecEvents(recorder)
                                    if recorder is not None else None)

    async def reconcile(self, request: Request) -> Result:
        """Write the sorted names of the Jobs created from the template."""
        try:
            template = await self.reader.get(JOBTEMPLATE_GVK, request.name,
                                             namespace=request.namespace)
        except NotFound:
            if self.invalid_spec_events is not None:
                self.invalid_spec_events.forget(request.namespace, request.name)
            return Result()
        if self.invalid_spec_events is not None:
            errs = validate_jobtemplate(template)
            if errs:
                self.invalid_spec_events.report(template, errs)
            else:
                self.invalid_spec_events.forget(request.namespace, request.name)
        jobs = await self.reader.list(
            JOB_GVK, namespace=request.namespace,
            matching_fields={CREATED_BY_TEMPLATE_INDEX: template_annotation_value(
                request.namespace, request.name)})
        names = sorted(name_of(j) for j in jobs.items)
        status = template.get("status") or {}
        if list(status.get("dependencyList") or []) == names:
            return Result()
        updated = copy.deepcopy(template)
        new_status = dict(status)
        if names:
            new_status["dependencyList"] = names
        else:
            new_status.pop("dependencyList", None)
        updated["status"] = new_status
        await self.writer.update_status(updated)
        return Result()

    def setup_with_manager(self, mgr: Manager) -> None:
        """``For`` JobTemplates; Jobs map to the template in their annotation."""
        ControllerBuilder(mgr).named(JOBTEMPLATE_CONTROLLER_NAME).for_(JOBTEMPLATE_GVK) \
            .watches(JOB_GVK, EnqueueRequestsFromMapFunc(template_requests, read_only=True)) \
            .complete(self)


async def setup_controllers(mgr: Manager) -> tuple[JobFlowReconciler, JobTemplateReconciler]:
    """Register the indexes and both controllers with ``mgr``; returns the reconcilers."""
    await setup_indexes(mgr.get_cache())
    client = mgr.get_client()
    flows = JobFlowReconciler(client, client, mgr.get_event_recorder_for(
        JOBFLOW_CONTROLLER_NAME), clock=mgr.clock)
    flows.setup_with_manager(mgr)
    templates = JobTemplateReconciler(client, client, mgr.get_event_recorder_for(
        JOBTEMPLATE_CONTROLLER_NAME))
    templates.setup_with_manager(mgr)
    return flows, templates
