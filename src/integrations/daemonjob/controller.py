"""The DaemonJob controller: one Job per node of the run, level-based.

Each pass over one DaemonJob:

1. reads it, its children (the Jobs whose *controller* owner reference has its UID, from
   the cache's owner-UID index, never a cluster-wide list) and the Nodes (cached);
2. fixes the run's nodes the first time it runs unsuspended without them (standalone, or
   unsuspended by hand; under Kueue the adapter fixes them in the same write that
   unsuspends, so the Workload's count and the run always agree);
3. :func:`~.plan.plan`\\ s the phases; then, unless the DaemonJob is being deleted, creates
   the Jobs of *every* ready node in one pass, resumes suspended Jobs with the current
   admission, suspends running ones (taking the admission data out) when the DaemonJob is
   suspended or a node left the admitted flavor, stops unfinished ones after a failure
   under ``FailFast``, and deletes the Jobs of deleted nodes;
4. writes ``status`` when it changed, and records an event when the DaemonJob finishes.

Node Jobs are held to the admission (:mod:`jobframework.childguard`): while admitted, an
unfinished node Job set to run more pods at once than one node's share of the admitted
PodSet gets its ``parallelism`` set back (Warning ``AdmittedSizeRestored``), and a Job that
names the DaemonJob as its controller without being one of its node Jobs
(:mod:`.children`) is suspended (Warning ``ForeignJobSuspended``), never counted.

Before all that, each new generation of the DaemonJob (not yet in
``status.observedGeneration``) is checked against its validating webhook's rules
(:func:`~.webhook.validate_daemonjob`; not the create-time count of eligible nodes, which
the ``NoEligibleNodes`` condition reports while the DaemonJob waits for one): one written
while the webhook was not called (its configuration removed, say) and breaking them
lists no node and creates no Job. It fails for good
(:meth:`~jobframework.childjobs.ParentReconciler.fail_invalid`): state ``Failed``, the
``Failed`` condition with reason ``InvalidSpec`` and the webhook's field errors, one
Warning ``Failed`` event, running Jobs suspended; Kueue then finishes its Workload. Still
invalid in a later generation: the message follows; corrected: it stays failed. A
generation already acted on is not checked again, so one that an older, laxer webhook
accepted keeps running after an upgrade.

Under Kueue (:attr:`DaemonJobReconciler.admission_guard`, set by :func:`~.setup.setup`),
before a Job is created or resumed the admission the DaemonJob carries must be the one its
admitted Workload gives, and the run (its nodes times the pods per node, and the pod
template's containers) must be what the Workload counts
(:mod:`jobframework.admittedworkload`). Otherwise no Job is created: the DaemonJob is
suspended with its admission dropped and a Warning ``AdmissionMismatch`` event, and
Kueue's reconciler starts it again with the Workload's admission (or replaces the
Workload when the run changed). Who may change that admission and the nodes:
:mod:`.admission`.

Node events (create, delete, and updates of labels, taints, ``unschedulable`` or the
``Ready`` status) reconcile every DaemonJob that has not finished.

A DaemonJob whose ``spec.managedBy`` names another controller (MultiKueue on a manager
cluster, see :func:`~.api.managed_elsewhere`) is left alone entirely: no node is listed
for it, no nodes are fixed, no Job is created, suspended, resumed or deleted, and nothing
is written to it (its ``status`` is the worker's, copied by MultiKueue), even once Kueue
unsuspends it on admission; an invalid one (MultiKueue's without its declared nodes, say)
gets a Warning ``InvalidSpec`` event only. A ``managedBy`` that is itself invalid names no
controller: such a DaemonJob is failed here. The generic reconciler still keeps its
Workload. On the worker cluster the copy has no ``managedBy`` and runs here.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from jobframework import childjobs
from jobframework.admittedworkload import (
    REASON_ADMISSION_MISMATCH,
    AdmissionGuard,
    info_mismatch,
    pod_set_mismatch,
    stop_message,
)
from jobframework.api.workload import PodSet
from jobframework.childguard import restore_admitted_size, suspend_foreign_job
from jobframework.childjobs import (
    JobPhase,
    failed_for_invalid_spec,
    generation_observed,
    inject_info,
    job_outcome,
    resume_job,
    suspend_job,
)
from jobframework.field import ErrorList
from jobframework.managedby import validate_managed_by
from jobframework.podset import InvalidPodSetUpdateError, PodSetInfo
from jobframework.runtime.builder import ControllerBuilder
from jobframework.runtime.cache import Cache
from jobframework.runtime.client import PropagationPolicy
from jobframework.runtime.errors import AlreadyExists, BadRequest, Conflict, Invalid, NotFound
from jobframework.runtime.events import NORMAL, WARNING
from jobframework.runtime.handler import EnqueueRequestsFromMapFunc
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import (
    Object,
    annotations_of,
    controller_of,
    is_being_deleted,
    labels_of,
    name_of,
    namespace_of,
    uid_of,
)
from jobframework.runtime.predicate import Funcs
from jobframework.runtime.reconcile import Request, Result

from .api import (
    DAEMONJOB_GVK,
    GROUP,
    INJECTED_INFO_ANNOTATION,
    JOB_GVK,
    NODE_GVK,
    NODES_ANNOTATION,
    POD_SET_NAME,
    POD_SETS_INFO_ANNOTATION,
    ConditionType,
    DaemonJobSpec,
    NodePhase,
    State,
    job_status_key,
    managed_by,
    managed_elsewhere,
    nodes_annotation_value,
)
from .children import foreign_jobs, is_own_job
from .nodes import eligible_nodes, is_ready
from .plan import (
    Plan,
    admission_for,
    build_node_job,
    node_of_job,
    plan,
    pods_per_node,
    render_job_spec,
    run_nodes,
)
from .webhook import validate_daemonjob

log = logging.getLogger(__name__)

#: Job index: the UID of the DaemonJob named by the Job's controller owner reference.
OWNER_UID_INDEX: Final = "daemonjob.api.practice.com/owner-uid"
DAEMONJOB_CONTROLLER_NAME: Final = "daemonjob-controller"


#: The reads, writes and events of the controller (shared with the other parents of
#: child Jobs).
IndexedReader = childjobs.IndexedReader
Recorder = childjobs.Recorder
Writer = childjobs.ParentWriter


def owner_uid_values(job: Object) -> list[str]:
    """:data:`OWNER_UID_INDEX` values: the controlling DaemonJob's UID, if any."""
    ref = controller_of(job)
    if ref is None or ref.get("kind") != DAEMONJOB_GVK.kind:
        return []
    if str(ref.get("apiVersion", "")).split("/")[0] != GROUP:
        return []
    return [str(ref.get("uid") or "")]


async def setup_indexes(cache: Cache) -> None:
    """Register the owner-UID index the controller reads children through."""
    await cache.index_field(JOB_GVK, OWNER_UID_INDEX, owner_uid_values)


def pod_sets_infos(daemonjob: Mapping[str, Any]) -> dict[str, PodSetInfo]:
    """The admission data the Kueue adapter stored on the DaemonJob, by PodSet name."""
    return childjobs.stored_infos(daemonjob, POD_SETS_INFO_ANNOTATION)


def _node_view(node: Mapping[str, Any]) -> tuple[Any, ...]:
    spec = node.get("spec") or {}
    return (labels_of(node), spec.get("taints"), bool(spec.get("unschedulable")),
            is_ready(node))


def node_changed(event: Any) -> bool:
    """Whether a Node update changes eligibility or flavor matching (not heartbeats)."""
    return _node_view(event.object_old) != _node_view(event.object_new)


class DaemonJobReconciler(childjobs.ParentReconciler):
    """Reconciles DaemonJobs (see the module docstring)."""

    #: Set when Kueue queues the DaemonJobs (:func:`~.setup.setup` with Kueue options):
    #: before a Job is created or resumed, the admission the DaemonJob carries and the
    #: run's size are checked against the Workload's admission.
    admission_guard: AdmissionGuard | None = None

    async def owned_jobs(self, daemonjob: Object) -> list[Object]:
        """The Jobs whose controller owner reference is ``daemonjob`` (owner-UID index)."""
        owned = await self.reader.list(
            JOB_GVK, namespace=namespace_of(daemonjob),
            matching_fields={OWNER_UID_INDEX: uid_of(daemonjob)})
        return list(owned.items)

    async def children(self, daemonjob: Object,
                       owned: Sequence[Object] | None = None) -> dict[str, Object]:
        """node name → its Job (one this controller created for the DaemonJob, see
        :func:`~.children.is_own_job`), among ``owned`` (default: listed)."""
        if owned is None:
            owned = await self.owned_jobs(daemonjob)
        return {node_of_job(j): j for j in owned if is_own_job(daemonjob, j)}

    async def suspend_foreign_jobs(self, daemonjob: Object, owned: Sequence[Object]) -> None:
        """Suspend the running Jobs of ``owned`` that name ``daemonjob`` as their controller
        but that its controller did not create (:func:`~.children.foreign_jobs`), with a
        Warning ``ForeignJobSuspended`` event on the DaemonJob and on the Job."""
        for job in foreign_jobs(daemonjob, owned):
            await suspend_foreign_job(self.writer, self.recorder, daemonjob, job)

    async def reconcile(self, request: Request) -> Result:
        """One pass over the DaemonJob ``request`` names.

        A write that meets a newer version (the Job controller and Kueue's reconciler write
        the same objects) ends the pass and requeues it: the next one starts from the cache.
        """
        try:
            return await self._reconcile(request)
        except Conflict as err:
            log.info("requeue %s/%s after a conflict: %s", request.namespace, request.name,
                     err)
            return Result(requeue=True)

    async def _reconcile(self, request: Request) -> Result:
        try:
            dj = await self.reader.get(DAEMONJOB_GVK, request.name,
                                       namespace=request.namespace)
        except NotFound:
            self.invalid_spec_events.forget(request.namespace, request.name)
            return Result()
        # First, whatever else this pass does: a Job claiming the DaemonJob it was not
        # created by must not run on the DaemonJob's admission (see .children).
        owned = await self.owned_jobs(dj)
        await self.suspend_foreign_jobs(dj, owned)
        if managed_elsewhere(dj) and not validate_managed_by(dj):
            errs = validate_daemonjob(dj)
            if errs:
                # Its status is the other controller's (MultiKueue copies the worker's).
                self.invalid_spec_events.report(dj, errs)
            log.debug("DaemonJob %s/%s is managed by %s; leaving it alone", request.namespace,
                      request.name, managed_by(dj))
            return Result()
        if not is_being_deleted(dj):
            # The webhook's own rules, again, on each new generation before it is acted
            # on: an object written while the webhook was not called must not be run as
            # if it had passed them.
            errs = ErrorList() if generation_observed(dj) else validate_daemonjob(dj)
            if errs:
                await self.fail_invalid(dj, errs,
                                        list((await self.children(dj, owned)).values()))
                return Result()
            if failed_for_invalid_spec(dj):
                return Result()  # terminal, even once the spec is corrected
        spec = DaemonJobSpec.of(dj)
        nodes = (await self.reader.list(NODE_GVK)).items
        live = {name_of(n): n for n in nodes}
        children = await self.children(dj, owned)
        run = run_nodes(dj, nodes)
        if (not is_being_deleted(dj) and not spec.suspend and run
                and NODES_ANNOTATION not in annotations_of(dj)):
            dj = await self._fix_nodes(dj, run)
        infos = {} if spec.suspend else pod_sets_infos(dj)
        admission = admission_for(infos)
        p = plan(dj, run, live, children, admission)
        notes: dict[str, tuple[NodePhase, str, str]] = {}
        if not is_being_deleted(dj) and (p.create or p.resume):
            problem = await self._admission_problem(dj, spec, infos, run)
            if problem is not None:
                return await self._stop_for_admission(dj, problem)
        if not is_being_deleted(dj):
            await self._act(dj, p, children, admission, notes)
            p = plan(dj, run, live, children, admission)
        if any(reason == "AlreadyExists" for _, reason, _ in notes.values()):
            # A Job we would create exists but the cache has not shown it yet: writing
            # status now would report that node as not started. Its event requeues us.
            return Result(requeue=True)
        await self._write_status(dj, spec, p, children, notes, nodes)
        return Result()

    async def _fix_nodes(self, dj: Object, run: list[str]) -> Object:
        updated = copy.deepcopy(dj)
        updated.setdefault("metadata", {}).setdefault("annotations", {})[NODES_ANNOTATION] = \
            nodes_annotation_value(run)
        return await self.writer.update(updated)

    # -- the admission --

    async def _admission_problem(self, dj: Object, spec: DaemonJobSpec,
                                 infos: Mapping[str, PodSetInfo], run: list[str]) -> str | None:
        """Why the admission ``dj`` carries, or the run (``run``: its nodes), is not what
        its Workload admitted; None when it is, or when nothing is checked (no Kueue, or a
        DaemonJob Kueue does not queue: no Workload, no admission stored)."""
        if self.admission_guard is None:
            return None
        admission = await self.admission_guard.admission(dj)
        if not admission.workload and not infos:
            return None
        problem = info_mismatch(POD_SET_NAME, infos.get(POD_SET_NAME), admission)
        if problem is not None:
            return problem
        template = render_job_spec(spec, name_of(dj))["template"]
        return pod_set_mismatch(
            PodSet(name=POD_SET_NAME, count=len(run) * pods_per_node(spec), template=template),
            admission.pod_sets[POD_SET_NAME], admission.workload)

    async def _stop_for_admission(self, dj: Object, problem: str) -> Result:
        """Suspend the DaemonJob and drop the admission it carries (its nodes stay fixed),
        as Kueue stops a job that no longer matches its Workload; the next pass suspends
        its Jobs."""
        updated = copy.deepcopy(dj)
        updated.setdefault("spec", {})["suspend"] = True
        (updated.get("metadata") or {}).get("annotations", {}).pop(POD_SETS_INFO_ANNOTATION,
                                                                    None)
        await self.writer.update(updated)
        self.recorder.event(dj, WARNING, REASON_ADMISSION_MISMATCH,
                            stop_message("DaemonJob", problem))
        return Result()

    # -- child Jobs --

    async def _act(self, dj: Object, p: Plan, children: dict[str, Object],
                   admission: PodSetInfo | None,
                   notes: dict[str, tuple[NodePhase, str, str]]) -> None:
        ns = namespace_of(dj)
        if admission is not None:
            # Every node Job runs the pods of one node's share of the admitted PodSet.
            per_node = pods_per_node(DaemonJobSpec.of(dj))
            for node, job in children.items():
                if job_outcome(job).phase in (JobPhase.RUNNING, JobPhase.SUSPENDED):
                    children[node] = await restore_admitted_size(
                        self.writer, self.recorder, dj, job, per_node, f"node {node}")
        for node in p.stop:
            children[node] = await suspend_job(self.writer, children[node])
        for node in p.suspend:
            children[node] = await suspend_job(self.writer, children[node],
                                               restore_annotation=INJECTED_INFO_ANNOTATION)
        for node in p.resume:
            try:
                children[node] = await resume_job(self.writer, children[node], admission,
                                                  INJECTED_INFO_ANNOTATION)
            except InvalidPodSetUpdateError as err:
                self.recorder.event(children[node], WARNING, "FailedInjection", str(err))
        for node in p.delete:
            job = children.pop(node)
            with contextlib.suppress(NotFound):
                await self.writer.delete(JOB_GVK, name_of(job), namespace=ns,
                                         propagation_policy=PropagationPolicy.BACKGROUND)
            self.recorder.event(dj, NORMAL, "DeletedJob",
                                f"Deleted Job {name_of(job)}: node {node} was deleted")
        created: list[str] = []
        for node in p.create:
            new = await self._create(dj, node, admission, notes)
            if new is not None:
                children[node] = new
                created.append(name_of(new))
        if created:
            shown = ", ".join(created[:5]) + (f" and {len(created) - 5} more"
                                              if len(created) > 5 else "")
            self.recorder.event(dj, NORMAL, "Created",
                                f"Created {len(created)} Job{'s' if len(created) > 1 else ''}:"
                                f" {shown}")

    async def _create(self, dj: Object, node: str, admission: PodSetInfo | None,
                      notes: dict[str, tuple[NodePhase, str, str]]) -> Object | None:
        job = build_node_job(dj, node)
        if admission is not None:
            try:
                inject_info(job, admission, INJECTED_INFO_ANNOTATION)
            except InvalidPodSetUpdateError as err:
                notes[node] = (NodePhase.PENDING, "FailedInjection", str(err))
                self.recorder.event(dj, WARNING, "FailedInjection", f"node {node}: {err}")
                return None
        try:
            return await self.writer.create(job)
        except AlreadyExists:
            notes[node] = (NodePhase.PENDING, "AlreadyExists", "")
            return None
        except (Invalid, BadRequest) as err:
            notes[node] = (NodePhase.PENDING, "FailedCreate", str(err))
            self.recorder.event(dj, WARNING, "FailedCreate", f"node {node}: {err}")
            return None

    # -- status --

    def desired_status(
        self,
        dj: Object,
        spec: DaemonJobSpec,
        p: Plan,
        children: Mapping[str, Object],
        notes: Mapping[str, tuple[NodePhase, str, str]],
        nodes: list[Object],
    ) -> dict[str, Any]:
        """The ``status`` to write for this pass."""
        old = dj.get("status") or {}
        ns = namespace_of(dj)
        entries = []
        for n in p.nodes:
            entry = n.to_dict()
            if n.name in notes and n.phase == NodePhase.PENDING:
                _, reason, message = notes[n.name]
                entry.update(reason=reason, message=message)
            entries.append(entry)
        status: dict[str, Any] = {
            "state": p.state.value,
            "jobStatusList": {job_status_key(name_of(j), ns): copy.deepcopy(j.get("status")
                                                                            or {})
                              for j in children.values()},
            "nodes": entries,
            "desired": len(p.nodes),
            "running": p.count(NodePhase.RUNNING),
            "succeeded": p.count(NodePhase.SUCCEEDED),
            "failed": p.count(NodePhase.FAILED),
        }
        if p.failed_node:
            status["failedNode"] = p.failed_node
        generation = int((dj.get("metadata") or {}).get("generation") or 0)
        if generation:
            status["observedGeneration"] = generation
        conditions: list[dict[str, Any]] = copy.deepcopy(list(old.get("conditions") or []))
        now = self.clock.now()
        # Conditions appear once true and stay (as False) afterwards.
        def set_cond(type_: ConditionType, true: bool, reason: str, message: str,
                     false_reason: str) -> None:
            childjobs.set_status_condition(conditions, type_, true, reason, message,
                                           generation, now, false_reason)

        set_cond(ConditionType.SUCCEEDED, p.state == State.SUCCEED, "AllNodesSucceeded",
                 f"the Jobs of all {p.count(NodePhase.SUCCEEDED)} nodes completed",
                 "NotCompleted")
        set_cond(ConditionType.FAILED, p.state == State.FAILED, "NodeFailed",
                 p.failure_message, "NoNodeFailed")
        suspended = spec.suspend and p.state in (State.PENDING, State.RUNNING)
        set_cond(ConditionType.SUSPENDED, suspended, "DaemonJobSuspended",
                 "the DaemonJob is suspended: no Job is created and running Jobs are "
                 "suspended", "DaemonJobResumed")
        empty = not p.nodes and p.state == State.PENDING
        message = ""
        if empty:
            pod_spec = (spec.job_spec.get("template") or {}).get("spec") or {}
            message = "no node is eligible, " + eligible_nodes(
                nodes, pod_spec, spec.exclude_nodes).summary()
        set_cond(ConditionType.NO_ELIGIBLE_NODES, empty, "NoEligibleNodes", message,
                 "EligibleNodesFound")
        if conditions:
            status["conditions"] = conditions
        return status

    async def _write_status(
        self,
        dj: Object,
        spec: DaemonJobSpec,
        p: Plan,
        children: Mapping[str, Object],
        notes: Mapping[str, tuple[NodePhase, str, str]],
        nodes: list[Object],
    ) -> None:
        old = dj.get("status") or {}
        status = self.desired_status(dj, spec, p, children, notes, nodes)
        if status == old:
            return
        updated = copy.deepcopy(dj)
        updated["status"] = status
        await self.writer.update_status(updated)
        if old.get("state") != status["state"]:
            if p.state == State.SUCCEED:
                self.recorder.event(dj, NORMAL, "Succeeded",
                                    f"the Jobs of all {status['succeeded']} nodes of "
                                    f"DaemonJob {name_of(dj)} completed")
            elif p.state == State.FAILED:
                self.recorder.event(dj, WARNING, "Failed", p.failure_message)

    # -- wiring --

    async def unfinished_daemonjobs(self, node: Object) -> list[Request]:
        """Every DaemonJob that has not finished (a node change may concern any of them)."""
        del node
        djs = await self.reader.list(DAEMONJOB_GVK)
        done = (State.SUCCEED.value, State.FAILED.value)
        return [Request.of(namespace_of(d), name_of(d)) for d in djs.items
                if (d.get("status") or {}).get("state") not in done]

    def setup_with_manager(self, mgr: Manager) -> None:
        """``For`` DaemonJobs, ``Owns`` Jobs, watches Nodes (relevant changes only)."""
        ControllerBuilder(mgr).named(DAEMONJOB_CONTROLLER_NAME).for_(DAEMONJOB_GVK) \
            .owns(JOB_GVK) \
            .watches(NODE_GVK, EnqueueRequestsFromMapFunc(self.unfinished_daemonjobs),
                     predicates=[Funcs(update=node_changed)]) \
            .complete(self)


async def setup_controllers(mgr: Manager) -> DaemonJobReconciler:
    """Register the index and the controller with ``mgr``; returns the reconciler."""
    await setup_indexes(mgr.get_cache())
    client = mgr.get_client()
    reconciler = DaemonJobReconciler(client, client, mgr.get_event_recorder_for(
        DAEMONJOB_CONTROLLER_NAME), clock=mgr.clock)
    reconciler.setup_with_manager(mgr)
    return reconciler
