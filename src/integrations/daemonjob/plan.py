"""The DaemonJob's pure logic: the node Jobs' shape, and what to do next. No I/O.

- :func:`render_job_spec` / :func:`build_node_job`: the JobSpec a node runs (globals
  merged, restart policy defaulted, pinned to the node) and the Job around it;
- :func:`run_nodes`: the nodes of this run (fixed once started, else the eligible ones);
- :func:`plan` turns the spec, the nodes, the children and Kueue's admission into
  per-node phases, the Jobs to create, stop, resume or delete, and ``status.state``.

The rules, in the words of ``docs/daemonjob.md``: the run's nodes are the eligible nodes
while the DaemonJob waits to start, and are fixed when it first starts (Kueue's admission
counts them); a node that joins later is not part of the run, a node of the run that is
deleted before its Job finished loses its Job and is not waited for. Under an admission
whose flavor has node labels, nodes without those labels get no Job.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from jobframework.childjobs import (
    JobPhase,
    child_status_entry,
    job_outcome,
    merge_pod_template_params,
    pod_count,
    pod_template_parts,
)
from jobframework.podset import PodSetInfo
from jobframework.runtime.objects import Object, is_being_deleted, name_of, namespace_of, uid_of

from .api import (
    API_VERSION,
    DAEMONJOB_GVK,
    DAEMONJOB_NAME_LABEL,
    NODE_ANNOTATION,
    NODE_LABEL,
    POD_SET_NAME,
    DaemonJobSpec,
    NodePhase,
    State,
    child_job_name,
    frozen_nodes,
    node_label_value,
)
from .nodes import eligible_nodes, matches_labels, pin_to_node

# --- the node Jobs ---------------------------------------------------------------------------


def render_job_spec(spec: DaemonJobSpec, daemonjob_name: str) -> dict[str, Any]:
    """The JobSpec every node runs, before it is pinned to its node.

    - the inlined JobSpec fields, without ``suspend`` (the DaemonJob decides) and
      ``ttlSecondsAfterFinished`` (finished node Jobs must stay: they are the record of
      which nodes are done, so a readmission does not run them again);
    - ``backoffLimit: 0`` when unset (a failed pod fails the node, as the original
      operator did; an explicit value is kept);
    - ``restartPolicy: Never`` when unset (``OnFailure`` is kept: the pod stays on its node
      either way);
    - global labels, annotations and env merged into the pod template (globals win), and
      the DaemonJob's name label added.
    """
    js = copy.deepcopy(spec.job_spec)
    js.pop("suspend", None)
    js.pop("ttlSecondsAfterFinished", None)
    if js.get("backoffLimit") is None:
        js["backoffLimit"] = 0
    _, pod = pod_template_parts(js)
    if not pod.get("restartPolicy"):
        pod["restartPolicy"] = "Never"
    g = spec.global_params
    merge_pod_template_params(js, labels={**g.labels, DAEMONJOB_NAME_LABEL: daemonjob_name},
                              annotations=g.annotations, env=g.env)
    return js


def pods_per_node(spec: DaemonJobSpec) -> int:
    """Pods each node's Job runs at once (parallelism capped by completions, as Kueue)."""
    return pod_count(spec.job_spec)


def build_node_job(daemonjob: Mapping[str, Any], node_name: str) -> Object:
    """The Job for ``node_name``: named ``<daemonjob>-<node>`` (shortened when too long),
    controlled by the DaemonJob, labelled with its name and the node's, pinned to the node,
    created unsuspended."""
    spec = DaemonJobSpec.of(daemonjob)
    name = name_of(daemonjob)
    js = render_job_spec(spec, name)
    meta, pod = pod_template_parts(js)
    node_labels = {DAEMONJOB_NAME_LABEL: name, NODE_LABEL: node_label_value(node_name)}
    meta["labels"] = {**(meta.get("labels") or {}), **node_labels}
    pin_to_node(pod, node_name)
    js["suspend"] = False
    job_meta: dict[str, Any] = {
        "name": child_job_name(name, node_name),
        "namespace": namespace_of(daemonjob),
        "labels": {**spec.global_params.labels, **node_labels},
        "annotations": {**spec.global_params.annotations, NODE_ANNOTATION: node_name},
        "ownerReferences": [{
            "apiVersion": API_VERSION, "kind": DAEMONJOB_GVK.kind, "name": name,
            "uid": uid_of(daemonjob), "controller": True, "blockOwnerDeletion": True,
        }],
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": js}


def node_of_job(job: Mapping[str, Any]) -> str:
    """The node a child Job runs on (its annotation)."""
    return str(((job.get("metadata") or {}).get("annotations") or {}).get(NODE_ANNOTATION)
               or "")


# --- the run's nodes -------------------------------------------------------------------------


def run_nodes(daemonjob: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The nodes of this run: the fixed list once started, else the eligible nodes now."""
    fixed = frozen_nodes(daemonjob)
    if fixed is not None:
        return fixed
    spec = DaemonJobSpec.of(daemonjob)
    pod_spec = (spec.job_spec.get("template") or {}).get("spec") or {}
    return list(eligible_nodes(nodes, pod_spec, spec.exclude_nodes).eligible)


# --- deciding --------------------------------------------------------------------------------


@attrs.frozen
class NodeStatus:
    """One ``status.nodes[]`` entry."""

    name: str
    phase: NodePhase
    job_name: str
    reason: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON entry (empty reason and message omitted)."""
        return child_status_entry(self.name, self.phase.value, self.job_name, self.reason,
                                  self.message)


@attrs.frozen
class Plan:
    """What the controller should do and report."""

    nodes: tuple[NodeStatus, ...]
    #: Nodes whose Job should be created now.
    create: tuple[str, ...]
    #: Nodes whose suspended Job should be resumed with the current admission.
    resume: tuple[str, ...]
    #: Nodes whose Job must be suspended with its admission data taken out (the DaemonJob
    #: is suspended, or the node is outside the admitted flavor); idempotent.
    suspend: tuple[str, ...]
    #: Nodes whose running Job must be stopped because another node failed (FailFast).
    stop: tuple[str, ...]
    #: Nodes deleted before their Job finished: delete the Job.
    delete: tuple[str, ...]
    state: State
    failed_node: str = ""
    failure_message: str = ""

    def count(self, *phases: NodePhase) -> int:
        """How many nodes are in one of ``phases``."""
        return sum(1 for n in self.nodes if n.phase in phases)

    def phase(self, node: str) -> NodePhase | None:
        """The phase of ``node``."""
        return next((n.phase for n in self.nodes if n.name == node), None)


_PHASE_OF = {JobPhase.RUNNING: NodePhase.RUNNING, JobPhase.SUSPENDED: NodePhase.SUSPENDED,
             JobPhase.SUCCEEDED: NodePhase.SUCCEEDED, JobPhase.FAILED: NodePhase.FAILED}


def _outside(selector: Mapping[str, str] | None) -> str:
    labels = ", ".join(f"{k}={v}" for k, v in sorted((selector or {}).items()))
    return f"the node does not have the admitted flavor's labels ({labels})"


def plan(
    daemonjob: Mapping[str, Any],
    run: Sequence[str],
    live_nodes: Mapping[str, Mapping[str, Any]],
    children: Mapping[str, Mapping[str, Any]],
    admission: PodSetInfo | None,
) -> Plan:
    """Phases, actions and state of ``daemonjob``.

    ``run`` is :func:`run_nodes`; ``live_nodes`` the nodes that exist (by name);
    ``children`` node name → its Job; ``admission`` Kueue's info for the PodSet while the
    DaemonJob is admitted and not suspended (None otherwise, or without Kueue).
    """
    spec = DaemonJobSpec.of(daemonjob)
    name = name_of(daemonjob)
    started = frozen_nodes(daemonjob) is not None
    running = started and not spec.suspend
    selector = admission.node_selector if admission is not None else None

    # Outcomes first, to know whether a node failed.
    outcomes = {n: job_outcome(children[n]) for n in run if n in children}
    failed = next((n for n in run if n in outcomes
                   and outcomes[n].phase == JobPhase.FAILED), None)
    stop_all = failed is not None and spec.fail_fast

    statuses: list[NodeStatus] = []
    create: list[str] = []
    resume: list[str] = []
    suspend: list[str] = []
    stop: list[str] = []
    delete: list[str] = []
    for node in run:
        job_name = child_job_name(name, node)
        node_obj = live_nodes.get(node)
        out = outcomes.get(node)
        in_flavor = node_obj is not None and matches_labels(node_obj, selector)
        if out is not None and out.phase in (JobPhase.SUCCEEDED, JobPhase.FAILED):
            statuses.append(NodeStatus(node, _PHASE_OF[out.phase], job_name, out.reason,
                                       out.message))
            continue
        if node_obj is None and started:
            if out is not None:
                delete.append(node)
            statuses.append(NodeStatus(node, NodePhase.NODE_DELETED, job_name, "NodeDeleted",
                                       "the node was deleted before its Job finished"))
            continue
        if out is not None:
            phase = _PHASE_OF[out.phase]
            if stop_all:
                if phase == NodePhase.RUNNING:
                    stop.append(node)
                statuses.append(NodeStatus(node, NodePhase.STOPPED, job_name, "NodeFailed",
                                           f"stopped: node {failed} failed"))
            elif not running:
                # A Job already suspended may still carry the admission (a pass that
                # suspended it was cut short); suspending again restores it, and writes
                # nothing when there is nothing left to undo.
                suspend.append(node)
                statuses.append(NodeStatus(node, NodePhase.SUSPENDED, job_name))
            elif not in_flavor:
                suspend.append(node)
                statuses.append(NodeStatus(node, NodePhase.OUTSIDE_FLAVOR, job_name,
                                           "NotInAdmittedFlavor", _outside(selector)))
            else:
                if phase == NodePhase.SUSPENDED:
                    resume.append(node)
                statuses.append(NodeStatus(node, phase, job_name))
            continue
        if stop_all:
            statuses.append(NodeStatus(node, NodePhase.SKIPPED, job_name, "NodeFailed",
                                       f"not run: node {failed} failed"))
        elif running and not in_flavor:
            statuses.append(NodeStatus(node, NodePhase.OUTSIDE_FLAVOR, job_name,
                                       "NotInAdmittedFlavor", _outside(selector)))
        else:
            if running:
                create.append(node)
            statuses.append(NodeStatus(node, NodePhase.PENDING, job_name))

    failure_message = ""
    if failed is not None:
        out = outcomes[failed]
        detail = ": ".join(p for p in (out.reason, out.message) if p)
        failure_message = (f"node {failed} (Job {child_job_name(name, failed)}) failed"
                           + (f": {detail}" if detail else ""))
    unfinished = [s for s in statuses if s.phase in (NodePhase.PENDING, NodePhase.RUNNING,
                                                     NodePhase.SUSPENDED)]
    succeeded = sum(1 for s in statuses if s.phase == NodePhase.SUCCEEDED)
    if is_being_deleted(daemonjob):
        state = State.TERMINATING
    elif failed is not None and (spec.fail_fast or not unfinished):
        state = State.FAILED
    elif started and not unfinished and succeeded:
        state = State.SUCCEED
    elif started and not unfinished:
        # Every node of the run was deleted or is outside the admitted flavor.
        state = State.FAILED
        failure_message = ("no node Job could run: every node of the run was deleted or "
                           "lacks the admitted flavor's labels")
    elif children:
        state = State.RUNNING
    else:
        state = State.PENDING
    return Plan(tuple(statuses), tuple(create), tuple(resume), tuple(suspend), tuple(stop),
                tuple(delete), state, failed or "", failure_message)


def admission_for(infos: Mapping[str, PodSetInfo] | None) -> PodSetInfo | None:
    """The admission info of the DaemonJob's one PodSet, if any."""
    return (infos or {}).get(POD_SET_NAME)


__all__ = [
    "NodeStatus",
    "Plan",
    "admission_for",
    "build_node_job",
    "node_of_job",
    "plan",
    "pods_per_node",
    "render_job_spec",
    "run_nodes",
]
