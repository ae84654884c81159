"""The JobFlow's pure logic: the graph, the child Jobs' shape, and what to do next.

Nothing here does I/O, so every rule is testable on plain dicts:

- :func:`find_cycle` and :func:`topological_order` on the flows' dependency graph;
- :func:`render_job_spec` / :func:`build_child_job`: a flow's JobSpec after the global
  params, the shared volumes and the fields this integration forces;
- :func:`job_outcome` reads a Job's terminal conditions (``Complete``/``Failed``);
- :func:`plan` turns the spec and the existing children into per-flow phases, the Jobs
  to create now, the Jobs to stop, and the JobFlow's ``status.state``;
- :func:`inject_info` / :func:`restore_info` put Kueue's admission data into a child's
  pod template, recording on the Job what they changed so it can be undone exactly.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from jobframework import childjobs
from jobframework.childjobs import (
    child_status_entry,
    info_fits,
    info_from_dict,
    info_to_dict,
    merge_pod_template_params,
    pod_count,
    pod_template_parts,
    same_info,
)
from jobframework.podset import PodSetInfo
from jobframework.runtime.objects import Object, is_being_deleted, name_of, namespace_of, uid_of

from .api import (
    API_VERSION,
    CREATED_BY_TEMPLATE_ANNOTATION,
    FLOW_NAME_LABEL,
    INJECTED_INFO_ANNOTATION,
    JOBFLOW_GVK,
    JOBFLOW_NAME_LABEL,
    Flow,
    FlowPhase,
    JobFlowSpec,
    State,
    child_job_name,
    template_annotation_value,
)

# --- the graph ---------------------------------------------------------------------------


def find_cycle(flows: Sequence[Flow]) -> list[str] | None:
    """A dependency cycle as ``[a, b, ..., a]`` (``a`` depends on ``b`` ...), or None.

    Dependencies on unknown names are ignored (they are reported separately). The search
    follows the flows' list order, so the cycle reported is deterministic. It is a
    depth-first search with its own stack, not Python's: a chain of any length (a spec
    stored past the webhook and the CRD's ``maxItems``) cannot exhaust the interpreter's
    recursion limit.
    """
    deps: dict[str, tuple[str, ...]] = {}
    for f in flows:
        deps.setdefault(f.name, f.dependencies)
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(deps, white)
    for root in deps:
        if color[root] != white:
            continue
        # path[i] is the node being visited at depth i; pending[i] what is left of its
        # dependencies. A grey dependency is on the path: that part of it is the cycle.
        color[root] = grey
        path = [root]
        pending = [iter(deps[root])]
        while pending:
            for dep in pending[-1]:
                if dep not in deps:
                    continue
                if color[dep] == grey:
                    return [*path[path.index(dep):], dep]
                if color[dep] == white:
                    color[dep] = grey
                    path.append(dep)
                    pending.append(iter(deps[dep]))
                    break
            else:
                color[path.pop()] = black
                pending.pop()
    return None


def topological_order(flows: Sequence[Flow]) -> list[str]:
    """Flow names, dependencies first; among the flows ready at a time, the first listed.

    Raises ``ValueError`` naming the cycle when there is one. Linear in the graph's size
    (Kahn's algorithm), without recursion, however long the chains.
    """
    cycle = find_cycle(flows)
    if cycle is not None:
        raise ValueError("dependency cycle: " + " -> ".join(cycle))
    position: dict[str, int] = {}
    deps: dict[str, set[str]] = {}
    for i, f in enumerate(flows):
        if f.name not in position:  # a repeated name: its first flow (as find_cycle)
            position[f.name] = i
            deps[f.name] = set(f.dependencies)
    dependents: dict[str, list[str]] = {name: [] for name in position}
    waiting: dict[str, int] = {}
    for name, ds in deps.items():
        known = [d for d in ds if d in position]  # unknown names are reported elsewhere
        waiting[name] = len(known)
        for d in known:
            dependents[d].append(name)
    ready = [(position[n], n) for n, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    done: list[str] = []
    while ready:
        _, name = heapq.heappop(ready)
        done.append(name)
        for m in dependents[name]:
            waiting[m] -= 1
            if waiting[m] == 0:
                heapq.heappush(ready, (position[m], m))
    return done


# --- rendering child Jobs --------------------------------------------------------------------


def _containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in ("initContainers", "containers"):
        out.extend(c for c in pod_spec.get(key) or [] if isinstance(c, dict))
    return out


def render_job_spec(spec: JobFlowSpec, flow: Flow, base: Mapping[str, Any]) -> dict[str, Any]:
    """``flow``'s JobSpec (``base``: its jobTemplate or referenced template) as it is run.

    - global labels and annotations are merged into the pod template's (globals win);
    - global env is put first in every container and init container, replacing any
      variable of the same name (so a container's ``$(VAR)`` can refer to a global);
    - ``globalParams.nodeName`` sets ``nodeName`` (the pods bypass the scheduler);
    - the shared volumes this flow mounts are added to the pod (replacing a template
      volume of the same name) and its mounts to every container and init container
      (replacing a mount at the same path);
    - forced: ``restartPolicy: Never`` (the Job controller retries, not the kubelet),
      ``backoffLimit: 0`` when unset (a failed pod fails the step, as the original
      operator did; an explicit value is kept); ``ttlSecondsAfterFinished`` and
      ``suspend`` are removed (the flow's state is read from its Jobs, which must
      outlive their completion, and the flow decides suspension);
    - the pod template is labelled with the JobFlow and flow names.
    """
    js = copy.deepcopy(dict(base))
    js.pop("ttlSecondsAfterFinished", None)
    js.pop("suspend", None)
    if js.get("backoffLimit") is None:
        js["backoffLimit"] = 0
    _, pod = pod_template_parts(js)
    g = spec.global_params
    pod["restartPolicy"] = "Never"
    merge_pod_template_params(js, labels=g.labels, annotations=g.annotations, env=g.env)
    if g.node_name:
        pod["nodeName"] = g.node_name
    if flow.share_volume_mounts:
        mounted = {str(m.get("name")) for m in flow.share_volume_mounts}
        shared = [copy.deepcopy(v) for v in spec.share_volumes if v.get("name") in mounted]
        shared_names = {v.get("name") for v in shared}
        pod["volumes"] = [v for v in pod.get("volumes") or []
                          if v.get("name") not in shared_names] + shared
        paths = {m.get("mountPath") for m in flow.share_volume_mounts}
        for c in _containers(pod):
            own_mounts = [m for m in c.get("volumeMounts") or []
                          if m.get("mountPath") not in paths]
            c["volumeMounts"] = own_mounts + [copy.deepcopy(m)
                                              for m in flow.share_volume_mounts]
    return js


def flow_labels(jobflow_name: str, flow_name: str) -> dict[str, str]:
    """The labels naming the JobFlow and the flow, on child Jobs and their pods."""
    return {JOBFLOW_NAME_LABEL: jobflow_name, FLOW_NAME_LABEL: flow_name}


def build_child_job(
    jobflow: Mapping[str, Any], flow: Flow, base: Mapping[str, Any], *, template_ref: str = ""
) -> Object:
    """The Job for ``flow``: named ``<jobflow>-<flow>``, controlled by the JobFlow.

    Job labels are the global labels plus the JobFlow and flow names (those two win);
    Job annotations are the global annotations, plus ``createByJobTemplate`` when the
    spec came from a JobTemplate. Created unsuspended (the caller decides otherwise).
    """
    spec = JobFlowSpec.of(jobflow)
    name = name_of(jobflow)
    job_spec = render_job_spec(spec, flow, base)
    pod_meta = job_spec["template"]["metadata"]
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **flow_labels(name, flow.name)}
    job_spec["suspend"] = False
    annotations = dict(spec.global_params.annotations)
    if template_ref:
        annotations[CREATED_BY_TEMPLATE_ANNOTATION] = template_annotation_value(
            namespace_of(jobflow), template_ref)
    meta: dict[str, Any] = {
        "name": child_job_name(name, flow.name),
        "namespace": namespace_of(jobflow),
        "labels": {**spec.global_params.labels, **flow_labels(name, flow.name)},
        "ownerReferences": [{
            "apiVersion": API_VERSION, "kind": JOBFLOW_GVK.kind, "name": name,
            "uid": uid_of(jobflow), "controller": True, "blockOwnerDeletion": True,
        }],
    }
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec}


# --- reading child Jobs -----------------------------------------------------------------------


@attrs.frozen
class Outcome:
    """Where a child Job is: its phase, and for a failure the condition's reason/message."""

    phase: FlowPhase
    reason: str = ""
    message: str = ""


def job_outcome(job: Mapping[str, Any]) -> Outcome:
    """A Job's phase from its terminal conditions (see
    :func:`jobframework.childjobs.job_outcome`), as a :class:`FlowPhase`."""
    out = childjobs.job_outcome(job)
    return Outcome(FlowPhase(out.phase.value), out.reason, out.message)


# --- deciding ---------------------------------------------------------------------------------


@attrs.frozen
class FlowStatus:
    """One ``status.flows[]`` entry."""

    name: str
    phase: FlowPhase
    job_name: str
    reason: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON entry (empty reason and message omitted)."""
        return child_status_entry(self.name, self.phase.value, self.job_name, self.reason,
                                  self.message)


@attrs.frozen
class Plan:
    """What the controller should do and report, from the spec and the children."""

    flows: tuple[FlowStatus, ...]
    #: Flows whose Job should be created now (dependencies completed, no Job yet).
    ready: tuple[str, ...]
    #: Flows whose unfinished Job must be stopped because another step failed.
    stop: tuple[str, ...]
    state: State
    failed_flow: str = ""
    failure_message: str = ""

    def phase(self, flow: str) -> FlowPhase | None:
        """The phase of ``flow``."""
        return next((f.phase for f in self.flows if f.name == flow), None)

    def count(self, phase: FlowPhase) -> int:
        """How many flows are in ``phase``."""
        return sum(1 for f in self.flows if f.phase == phase)


def plan(
    jobflow: Mapping[str, Any], children: Mapping[str, Mapping[str, Any] | None]
) -> Plan:
    """Phases, next steps and state of ``jobflow`` given ``children`` (flow → its Job).

    A flow is *ready* when it has no Job and every dependency's Job completed; once a
    step failed nothing becomes ready, steps without a Job are ``Skipped`` and unfinished
    Jobs are listed in ``stop``. State: ``Terminating`` while the JobFlow is being
    deleted, else ``Failed`` when a step failed, ``Succeed`` when every step completed,
    ``Running`` when any Job exists, else ``Pending``.
    """
    spec = JobFlowSpec.of(jobflow)
    name = name_of(jobflow)
    outcomes: dict[str, Outcome] = {}
    for f in spec.flows:
        job = children.get(f.name)
        if job is not None and f.name not in outcomes:
            outcomes[f.name] = job_outcome(job)
    failed = next((f for f in spec.flows
                   if f.name in outcomes and outcomes[f.name].phase == FlowPhase.FAILED), None)
    statuses: list[FlowStatus] = []
    ready: list[str] = []
    stop: list[str] = []
    for f in spec.flows:
        job_name = child_job_name(name, f.name)
        out = outcomes.get(f.name)
        if out is not None:
            phase = out.phase
            if failed is not None and phase in (FlowPhase.RUNNING, FlowPhase.SUSPENDED):
                if phase == FlowPhase.RUNNING:
                    stop.append(f.name)
                phase = FlowPhase.STOPPED
            statuses.append(FlowStatus(f.name, phase, job_name, out.reason, out.message))
            continue
        if failed is not None:
            statuses.append(FlowStatus(f.name, FlowPhase.SKIPPED, job_name))
            continue
        deps_done = all(
            d in outcomes and outcomes[d].phase == FlowPhase.SUCCEEDED for d in f.dependencies)
        if deps_done and f.name not in ready:
            ready.append(f.name)
        statuses.append(FlowStatus(f.name, FlowPhase.PENDING, job_name))

    failure_message = ""
    if failed is not None:
        out = outcomes[failed.name]
        detail = ": ".join(p for p in (out.reason, out.message) if p)
        failure_message = (f"flow {failed.name} (Job {child_job_name(name, failed.name)}) "
                           f"failed" + (f": {detail}" if detail else ""))
    if is_being_deleted(jobflow):
        state = State.TERMINATING
    elif failed is not None:
        state = State.FAILED
    elif all(s.phase == FlowPhase.SUCCEEDED for s in statuses):
        state = State.SUCCEED
    elif outcomes:
        state = State.RUNNING
    else:
        state = State.PENDING
    return Plan(tuple(statuses), tuple(ready), tuple(stop), state,
                failed.name if failed is not None else "", failure_message)


# --- Kueue's admission data on child Jobs ---------------------------------------------------


def injected_info(job: Mapping[str, Any]) -> PodSetInfo | None:
    """What :func:`inject_info` put into ``job``'s pod template, if anything."""
    return childjobs.injected_info(job, INJECTED_INFO_ANNOTATION)


def inject_info(job: Object, info: PodSetInfo) -> None:
    """Merge ``info`` into a step's Job, recorded in its
    ``jobflow.api.practice.com/injected-pod-set-info`` annotation (see
    :func:`jobframework.childjobs.inject_info`)."""
    childjobs.inject_info(job, info, INJECTED_INFO_ANNOTATION)


def restore_info(job: Object) -> bool:
    """Undo :func:`inject_info` on ``job``; returns whether anything changed."""
    return childjobs.restore_info(job, INJECTED_INFO_ANNOTATION)


__all__ = [
    "FlowStatus",
    "Outcome",
    "Plan",
    "build_child_job",
    "find_cycle",
    "flow_labels",
    "info_fits",
    "info_from_dict",
    "info_to_dict",
    "inject_info",
    "injected_info",
    "job_outcome",
    "plan",
    "pod_count",
    "render_job_spec",
    "restore_info",
    "same_info",
    "topological_order",
]
