"""DaemonJob as a Kueue job: :class:`DaemonJobJob`, the ``GenericJob`` the generic
reconciler drives.

Kueue admits a DaemonJob as *one* Workload with one PodSet, ``main``: ``count`` = the
run's nodes times the pods each node's Job runs at once, template = the node Jobs' pod
template (globals merged, before pinning). So the whole DaemonJob is admitted at once or
not at all, like a gang.

The run's nodes come from the object only, so the Workload and the controller always
agree: before the first start, the eligible nodes the DaemonJob controller lists in
``status.nodes``; from the first start on, the list fixed in the
``daemonjob.api.practice.com/nodes`` annotation. The adapter never touches child Jobs:

- ``suspend()`` sets ``spec.suspend``: the controller suspends the node Jobs;
- ``run_with_pod_sets_info`` clears ``spec.suspend``, stores the admission in the
  ``daemonjob.api.practice.com/pod-sets-info`` annotation and, on the first start, fixes
  the run's nodes, all in one write; the controller injects the admission into each
  node Job, and skips nodes without the admitted flavor's labels;
- ``restore_pod_sets_info`` removes the admission annotation (the controller restores the
  suspended Jobs' templates);
- ``finished``, ``is_active`` and ``reclaimable_pods`` read ``status``, which the
  controller computes from the children; ``pods_ready`` reads the children;
- ``skip`` holds Kueue back until the controller has listed at least one eligible node.

``JobWithManagedBy`` over ``spec.managedBy`` (:class:`~jobframework.managedby.SpecManagedBy`,
own controller :data:`~.api.DAEMONJOB_MANAGED_BY_CONTROLLER`): Kueue's webhook defaults it
to MultiKueue for a DaemonJob sent to a MultiKueue ClusterQueue. Such a DaemonJob on the
manager cluster is not run there: the per-node controller leaves it alone, so it never
lists the manager's nodes, and those would not be the worker's anyway. Its run's nodes are
the ones its creator declared in the ``daemonjob.api.practice.com/nodes`` annotation (the
webhook requires them): the Workload counts them on the manager and, the annotation being
copied with the DaemonJob, the worker runs exactly them, so both clusters' Workloads have
the same count (a prebuilt Workload of another count is out of sync). Its ``status`` is the
worker's, copied whole by Kueue's generic MultiKueue adapter: ``finished``, ``is_active``
and ``reclaimable_pods`` follow the worker, ``pods_ready`` reads ``status``
(:func:`pods_ready_from_status`) instead of the (absent) local Jobs, and the copied
``status.nodes`` never resizes the Workload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobframework.api.workload import PodSet, ReclaimablePod
from jobframework.childjobs import (
    JobPhase,
    info_fits,
    infos_to_json,
    job_outcome,
    mirrored_children,
)
from jobframework.constants import DEFAULT_FEATURES, FeatureGates
from jobframework.field import ErrorList
from jobframework.indexer import list_owned_workloads
from jobframework.interface import FinishedResult, GenericJob
from jobframework.managedby import SpecManagedBy
from jobframework.podset import (
    PodSetInfo,
    bad_pod_sets_info_len_error,
    bad_pod_sets_update_error,
    merge_into_template,
)
from jobframework.runtime.client import Client
from jobframework.runtime.objects import (
    GVK,
    Object,
    controller_of,
    is_being_deleted,
    name_of,
    namespace_of,
    uid_of,
)
from jobframework.workload import from_object as workload_from_object

from .api import (
    DAEMONJOB_GVK,
    DAEMONJOB_MANAGED_BY_CONTROLLER,
    DAEMONJOB_NAME_LABEL,
    DONE_PHASES,
    JOB_GVK,
    NODES_ANNOTATION,
    POD_SET_NAME,
    POD_SETS_INFO_ANNOTATION,
    DaemonJobSpec,
    NodePhase,
    State,
    frozen_nodes,
    managed_elsewhere,
    nodes_annotation_value,
)
from .children import is_own_job
from .controller import pod_sets_infos
from .plan import admission_for, pods_per_node, render_job_spec
from .webhook import validate_daemonjob, validate_daemonjob_update


class NodesChangedError(RuntimeError):
    """The run's nodes no longer match the admitted count (retried: the next pass sees the
    Workload out of date and replaces it)."""


def _count(value: Any) -> int:
    """A pod count read from a (possibly foreign) status: 0 unless a non-negative int."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def pods_ready_from_status(daemonjob: Mapping[str, Any], per_node: int) -> bool:
    """``pods_ready`` from ``status`` alone: a node Job is in ``jobStatusList`` and every
    ``Running`` node's Job has ``per_node`` pods ready or succeeded. For a DaemonJob run
    elsewhere (MultiKueue), whose Jobs are not local.

    Only names are matched (``jobStatusList`` keys ``<job>/<namespace>`` by their Job
    name), so a status copied from another cluster, naming its nodes and Jobs, is read as
    is.
    """
    children = mirrored_children(daemonjob, "nodes")
    for entry, job_status in children:
        if (entry.get("phase") == NodePhase.RUNNING.value
                and _count(job_status.get("ready")) + _count(job_status.get("succeeded"))
                < per_node):
            return False
    return bool(children)


class DaemonJobJob(SpecManagedBy, GenericJob):
    """A DaemonJob object under Kueue (see the module docstring).

    Implements ``JobWithManagedBy`` too (MultiKueue may take the DaemonJob over).
    """

    own_controller_name = DAEMONJOB_MANAGED_BY_CONTROLLER

    def __init__(self, obj: Object | None = None, *,
                 features: FeatureGates = DEFAULT_FEATURES) -> None:
        self.obj: Object = obj if obj is not None else {
            "apiVersion": DAEMONJOB_GVK.api_version, "kind": DAEMONJOB_GVK.kind,
            "metadata": {}, "spec": {}}
        self.features = features

    @property
    def spec(self) -> dict[str, Any]:
        """``spec`` (created when missing)."""
        spec = self.obj.get("spec")
        if not isinstance(spec, dict):
            spec = self.obj["spec"] = {}
        return spec

    # -- the run's nodes --

    def run_nodes(self) -> list[str] | None:
        """The nodes the Workload counts: the fixed list once started, else the controller's
        ``status.nodes``; None before the controller's first pass.

        For a DaemonJob run elsewhere (MultiKueue), only the declared list (the nodes
        annotation): its ``status`` is the worker's, and must not resize the Workload.
        """
        fixed = frozen_nodes(self.obj)
        if fixed is not None or managed_elsewhere(self.obj):
            return fixed
        status = self.obj.get("status") or {}
        if "desired" not in status:
            return None
        return [str(n.get("name")) for n in status.get("nodes") or [] if n.get("name")]

    # -- GenericJob --

    def object(self) -> Object:
        """The DaemonJob dict."""
        return self.obj

    def gvk(self) -> GVK:
        """``api.practice.com/v1alpha1, Kind=DaemonJob``."""
        return DAEMONJOB_GVK

    def is_suspended(self) -> bool:
        """``spec.suspend``."""
        return bool((self.obj.get("spec") or {}).get("suspend"))

    def suspend(self) -> None:
        """Set ``spec.suspend``."""
        self.obj.setdefault("spec", {})["suspend"] = True

    def skip(self) -> bool:
        """Skip while Kueue could not count the nodes yet (before the controller's first
        pass, or while no node is eligible and the run has not started)."""
        # A deleted DaemonJob (or one being deleted) is never skipped: the reconciler must
        # reach its finalization and release the Workload.
        if not name_of(self.obj) or is_being_deleted(self.obj):
            return False
        return not self.run_nodes()

    async def run_with_pod_sets_info(
        self, client: Client, pod_sets_info: Sequence[PodSetInfo]
    ) -> None:
        """Store the admission, fix the run's nodes (first start) and unsuspend.

        Raises a permanent pod-set error when there is not exactly one info for ``main``
        or it conflicts with the template, and :class:`NodesChangedError` when the count
        admitted is not the run's.
        """
        if len(pod_sets_info) != 1:
            raise bad_pod_sets_info_len_error(1, len(pod_sets_info))
        info = pod_sets_info[0]
        if info.name != POD_SET_NAME:
            raise bad_pod_sets_update_error("podSet", f"no pod set named {info.name!r}")
        spec = DaemonJobSpec.of(self.obj)
        nodes = self.run_nodes() or []
        want = len(nodes) * pods_per_node(spec)
        # Once the run is fixed, Kueue (re)admits the Workload's count less its reclaimable
        # pods (the nodes already done), so only the first start must match exactly.
        fixed = frozen_nodes(self.obj) is not None
        if info.count > want or (info.count != want and not fixed):
            raise NodesChangedError(f"admitted {info.count} pods but the run has {want} "
                                    f"({len(nodes)} nodes)")
        info_fits(render_job_spec(spec, name_of(self.obj))["template"], info)
        annotations = self.obj.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[POD_SETS_INFO_ANNOTATION] = infos_to_json([info])
        if NODES_ANNOTATION not in annotations:
            annotations[NODES_ANNOTATION] = nodes_annotation_value(nodes)
        self.obj.setdefault("spec", {})["suspend"] = False

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        """Drop the stored admission (the run's nodes stay fixed)."""
        meta = self.obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if POD_SETS_INFO_ANNOTATION not in annotations:
            return False
        del annotations[POD_SETS_INFO_ANNOTATION]
        return True

    def finished(self) -> FinishedResult:
        """Finished when the state is ``Succeed`` or ``Failed`` (with the condition's why)."""
        status = self.obj.get("status") or {}
        state = status.get("state")
        if state == State.SUCCEED:
            return FinishedResult(f"the Jobs of all {status.get('succeeded', 0)} nodes "
                                  "completed", True, True)
        if state == State.FAILED:
            message = f"node {status.get('failedNode', '')} failed"
            for c in status.get("conditions") or []:
                if c.get("type") == "Failed" and c.get("message"):
                    message = str(c["message"])
            return FinishedResult(message, False, True)
        return FinishedResult("", False, False)

    async def pod_sets(self, client: Client) -> list[PodSet]:
        """The one PodSet, ``main`` (with the admission merged while running)."""
        spec = DaemonJobSpec.of(self.obj)
        template = render_job_spec(spec, name_of(self.obj))["template"]
        info = None if self.is_suspended() else admission_for(pod_sets_infos(self.obj))
        if info is not None:
            merge_into_template(template, info)
        count = len(self.run_nodes() or []) * pods_per_node(spec)
        return [PodSet(name=POD_SET_NAME, count=count, template=template)]

    def is_active(self) -> bool:
        """Whether any node Job has active pods (from ``status.jobStatusList``)."""
        statuses = (self.obj.get("status") or {}).get("jobStatusList") or {}
        return any(_count(s.get("active")) > 0 for s in statuses.values()
                   if isinstance(s, Mapping))

    async def pods_ready(self, client: Client) -> bool:
        """Whether a node Job exists and every running one has all its pods ready or
        succeeded (from the children; from ``status`` when the DaemonJob is run
        elsewhere)."""
        per_node = pods_per_node(DaemonJobSpec.of(self.obj))
        if managed_elsewhere(self.obj):
            return pods_ready_from_status(self.obj, per_node)
        jobs = await client.list(JOB_GVK, namespace=namespace_of(self.obj),
                                 label_selector=f"{DAEMONJOB_NAME_LABEL}={name_of(self.obj)}")
        uid = uid_of(self.obj)
        started = False
        for job in jobs.items:
            # A Job only claiming the DaemonJob is not one of its node Jobs.
            if (controller_of(job) or {}).get("uid") != uid or not is_own_job(self.obj, job):
                continue
            started = True
            if job_outcome(job).phase != JobPhase.RUNNING:
                continue
            st = job.get("status") or {}
            if int(st.get("ready") or 0) + int(st.get("succeeded") or 0) < per_node:
                return False
        return started

    # -- optional capabilities --

    async def reclaimable_pods(self, client: Client) -> list[ReclaimablePod]:
        """Nodes whose pods will not run again in this admission give them back: finished,
        deleted, outside the admitted flavor, stopped or skipped.

        Kueue refuses to lower a Workload's reclaimable pods while its quota is reserved
        (an eviction first suspends the DaemonJob, then releases the quota), so until the
        release the count never goes below what the Workload has.
        """
        per_node = pods_per_node(DaemonJobSpec.of(self.obj))
        nodes = (self.obj.get("status") or {}).get("nodes") or []
        done = sum(1 for n in nodes if isinstance(n, Mapping)
                   and n.get("phase") in {p.value for p in DONE_PHASES})
        count = done * per_node
        for item in await list_owned_workloads(client, DAEMONJOB_GVK,
                                               namespace_of(self.obj), name_of(self.obj)):
            wl = workload_from_object(item)
            if not wl.has_quota_reservation():
                continue
            for rp in (wl.status.reclaimable_pods if wl.status else None) or []:
                if rp.name == POD_SET_NAME:
                    count = max(count, rp.count)
        return [ReclaimablePod(name=POD_SET_NAME, count=count)] if count else []

    def validate_on_create(self) -> ErrorList:
        """The DaemonJob webhook's create rules."""
        return validate_daemonjob(self.obj)

    def validate_on_update(self, old_job: GenericJob) -> ErrorList:
        """The DaemonJob webhook's update rules."""
        return validate_daemonjob_update(old_job.object(), self.obj)

    # JobWithManagedBy comes from SpecManagedBy (spec.managedBy, own controller above).
