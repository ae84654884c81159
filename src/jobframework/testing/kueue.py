"""A stand-in for Kueue's core (scheduler and workload controller) in users' tests.

Kueue admits, preempts and evicts Workloads; a job integration only reacts to what those
writes leave in ``Workload.status``. :class:`KueueStandIn` makes the same writes on the
in-memory :class:`~jobframework.testing.APIServer`, so a test of an integration reads like
Kueue's own integration tests::

    kueue = KueueStandIn(server)              # registers Kueue's kinds on the server
    await kueue.resource_flavor("on-demand", node_labels={"instance-type": "on-demand"})
    await kueue.cluster_queue("cq", {"on-demand": {"cpu": "4"}},
                              preemption="LowerPriority")
    await kueue.local_queue("user-queue", "cq")
    ...                                       # the integration creates a Workload
    await kueue.schedule()                    # FIFO admission with preemption, one pass
    await kueue.admit(wl, counts={"workers": 3})   # or: admit one, partially
    await kueue.evict(wl, "PodsReadyTimeout")
    await kueue.finish(wl, success=True)

Every status write is what Kueue v0.19.2 writes: the whole status owned by Kueue's
admission (``status.admission``, the admission-managed conditions, ``requeueState``,
``schedulingStats``...) server-side applied under ``kueue-admission`` (see
:func:`jobframework.workload.admission_status_body`), reclaimable pods under
``kueue-reclaimable-pods``; conditions carry Kueue's types, reasons and messages, and
events (when a recorder is given) Kueue's reasons and messages. Sending only the
condition that changes would remove, from a manager's set, every other field it owns:
an apply of ``Evicted`` alone drops ``QuotaReserved``, ``Admitted`` and ``admission``.

What is modelled: ResourceFlavors (``nodeLabels``, ``nodeTaints``, ``tolerations``),
ClusterQueues (``resourceGroups`` with nominal quota per flavor and resource,
``queueingStrategy`` ``BestEffortFIFO``/``StrictFIFO``, ``preemption.withinClusterQueue``
``Never``/``LowerPriority``/``LowerOrNewerEqualPriority``/``Any``, ``stopPolicy``),
LocalQueues, WorkloadPriorityClasses, FIFO order (priority, then creation time, or the
eviction time after a PodsReady timeout), flavor assignment in the ClusterQueue's flavor
order (node affinity and taints checked, ``pods`` counted when the queue covers it),
quota accounting with reclaimable pods subtracted, classical preemption within the
ClusterQueue, partial admission (``PodSet.minCount``: the largest counts that fit, with
gate ``PartialAdmission``), requeueing backoff after ``PodsReadyTimeout`` and
reactivation. Not modelled: cohorts and borrowing, fair sharing, admission checks,
topology-aware scheduling, elastic workload slices, MultiKueue, ``waitForPodsReady``
timers (evict explicitly instead), the ClusterQueue and LocalQueue status, and the
scheduler's repeated ``Pending`` events (one per change here).
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from .. import constants as c
from .. import workload as wlpkg
from ..api.conditions import CONDITION_FALSE, CONDITION_TRUE
from ..api.workload import (
    Admission,
    PodSetAssignment,
    PodSetRequest,
    ReclaimablePod,
    RequeueState,
    SchedulingStats,
    Workload,
    WorkloadSchedulingStatsEviction,
    WorkloadStatus,
)
from ..constants import DEFAULT_KUEUE_VERSION, FeatureGates, KueueVersion
from ..runtime import errors
from ..runtime.client import Client
from ..runtime.clock import parse_time, rfc3339
from ..runtime.objects import GVK, Object, name_of, namespace_of, uid_of
from ._quantity import format_quantity, resource_value
from .server import APIServer

__all__ = [
    "CLUSTER_QUEUE_GVK",
    "KUEUE_KINDS",
    "LOCAL_QUEUE_GVK",
    "RESOURCE_FLAVOR_GVK",
    "WORKLOAD_GVK",
    "WORKLOAD_PRIORITY_CLASS_GVK",
    "KueueStandIn",
    "NotAdmissibleError",
    "Recorder",
    "ScheduleResult",
    "register_kueue_kinds",
]

WORKLOAD_GVK = wlpkg.WORKLOAD_GVK
RESOURCE_FLAVOR_GVK = wlpkg.RESOURCE_FLAVOR_GVK
WORKLOAD_PRIORITY_CLASS_GVK = wlpkg.WORKLOAD_PRIORITY_CLASS_GVK
CLUSTER_QUEUE_GVK = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "ClusterQueue")
LOCAL_QUEUE_GVK = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "LocalQueue")
ADMISSION_CHECK_GVK = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "AdmissionCheck")

#: Kueue's kinds the stand-in serves: (GVK, plural, namespaced, status subresource).
KUEUE_KINDS: tuple[tuple[GVK, str, bool, bool], ...] = (
    (WORKLOAD_GVK, "workloads", True, True),
    (RESOURCE_FLAVOR_GVK, "resourceflavors", False, False),
    (CLUSTER_QUEUE_GVK, "clusterqueues", False, True),
    (LOCAL_QUEUE_GVK, "localqueues", True, True),
    (WORKLOAD_PRIORITY_CLASS_GVK, "workloadpriorityclasses", False, False),
    (ADMISSION_CHECK_GVK, "admissionchecks", False, True),
)

#: ``HumanReadablePreemptionReasons`` of Kueue's preemptor.
_PREEMPTION_REASONS = {
    c.IN_CLUSTER_QUEUE_REASON: "prioritization in the ClusterQueue",
    c.IN_COHORT_RECLAMATION_REASON: "reclamation within the cohort",
    c.IN_COHORT_FAIR_SHARING_REASON: "Fair Sharing within the cohort",
    c.IN_COHORT_RECLAIM_WHILE_BORROWING_REASON: "reclamation within the cohort while borrowing",
    "": "UNKNOWN",
}
_DEACTIVATED_MESSAGE = "The workload is deactivated"
_DEACTIVATION_CAUSES = {
    c.WORKLOAD_REQUEUING_LIMIT_EXCEEDED: "exceeding the maximum number of re-queuing retries",
    c.WORKLOAD_MAXIMUM_EXECUTION_TIME_EXCEEDED: "exceeding the maximum execution time",
}
_NORMAL, _WARNING = "Normal", "Warning"


def register_kueue_kinds(server: APIServer) -> None:
    """Serve Kueue's kinds (:data:`KUEUE_KINDS`) on ``server``; kinds already served are
    left as they are."""
    for gvk, plural, namespaced, status in KUEUE_KINDS:
        try:
            server.kind_info(gvk)
        except Exception:
            server.register_kind(gvk, plural, namespaced, status_subresource=status)


class Recorder(Protocol):
    """Where the stand-in records Kueue's events (``kueue-admission``'s)."""

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Record an event about ``obj``."""


class NotAdmissibleError(Exception):
    """:meth:`KueueStandIn.admit` could not fit the Workload; the message is Kueue's."""


@attrs.frozen
class ScheduleResult:
    """What one :meth:`KueueStandIn.schedule` pass did, by ``namespace/name``."""

    #: Workloads given a quota reservation (and admitted), in admission order.
    admitted: tuple[str, ...] = ()
    #: Workloads evicted to make room (``Evicted=True/Preempted``).
    preempted: tuple[str, ...] = ()
    #: Workloads left waiting, with the message of their ``QuotaReserved=False``.
    pending: Mapping[str, str] = attrs.field(factory=dict)


# --- the cluster's queues, read from the API server ------------------------------------


FlavorResource = tuple[str, str]


@attrs.define
class _Group:
    resources: list[str]
    flavors: list[str]
    quota: dict[FlavorResource, int]


@attrs.define
class _Queue:
    name: str
    obj: Object
    groups: list[_Group]
    policy: str
    strict_fifo: bool
    stopped: bool

    def group_of(self, resource: str) -> _Group | None:
        return next((g for g in self.groups if resource in g.resources), None)

    def nominal(self, fr: FlavorResource) -> int:
        for g in self.groups:
            if fr in g.quota:
                return g.quota[fr]
        return 0


def _parse_queue(obj: Object) -> _Queue:
    spec = obj.get("spec") or {}
    groups: list[_Group] = []
    for rg in spec.get("resourceGroups") or []:
        covered = [str(r) for r in rg.get("coveredResources") or []]
        flavors: list[str] = []
        quota: dict[FlavorResource, int] = {}
        for fq in rg.get("flavors") or []:
            flavors.append(str(fq["name"]))
            for rq in fq.get("resources") or []:
                quota[(str(fq["name"]), str(rq["name"]))] = resource_value(
                    str(rq["name"]), rq.get("nominalQuota", 0))
        groups.append(_Group(covered, flavors, quota))
    preemption = spec.get("preemption") or {}
    return _Queue(name_of(obj), obj, groups,
                  str(preemption.get("withinClusterQueue") or "Never"),
                  spec.get("queueingStrategy") == "StrictFIFO",
                  (spec.get("stopPolicy") or "None") != "None")


# --- requests ---------------------------------------------------------------------------


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    res = container.get("resources") or {}
    out = {name: resource_value(name, q) for name, q in (res.get("limits") or {}).items()}
    out.update({name: resource_value(name, q)
                for name, q in (res.get("requests") or {}).items()})
    return out


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """One pod's requests as Kueue counts them (``resourcehelpers.PodRequests``): the
    containers' requests (limits where a request is missing) summed with restartable init
    containers (sidecars), at least each regular init container's plus the sidecars
    started before it, plus the pod overhead; values as ``resource_value``."""
    total: dict[str, int] = {}
    for ctr in pod_spec.get("containers") or []:
        _add(total, _container_requests(ctr))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for ctr in pod_spec.get("initContainers") or []:
        reqs = _container_requests(ctr)
        if ctr.get("restartPolicy") == "Always":
            _add(sidecars, reqs)
            _add(total, reqs)
            current = dict(sidecars)
        else:
            current = dict(sidecars)
            _add(current, reqs)
        for name, value in current.items():
            init_max[name] = max(init_max.get(name, 0), value)
    for name, value in init_max.items():
        total[name] = max(total.get(name, 0), value)
    overhead = pod_spec.get("overhead") or {}
    _add(total, {name: resource_value(name, q) for name, q in overhead.items()})
    return total


# --- flavor matching (flavorassigner.checkFlavorForPodSets) ------------------------------


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return str(toleration.get("value") or "") == str(taint.get("value") or "")


def _taint_string(taint: Mapping[str, Any]) -> str:
    """A ``*corev1.Taint`` printed with ``%s`` (its generated ``String``)."""
    return (f"&Taint{{Key:{taint.get('key', '')},Value:{taint.get('value', '')},"
            f"Effect:{taint.get('effect', '')},TimeAdded:<nil>,}}")


def _requirement_matches(req: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = str(req.get("key")), req.get("operator")
    values = [str(v) for v in req.get("values") or []]
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _flavor_matches(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    keys = set(labels)
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if key in keys and labels.get(key) != value:
            return False
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms: list[list[Mapping[str, Any]]] = []
    for term in affinity.get("nodeSelectorTerms") or []:
        exprs = [e for e in term.get("matchExpressions") or [] if e.get("key") in keys]
        if not exprs:
            return True  # a term left empty matches every flavor
        terms.append(exprs)
    return not terms or any(all(_requirement_matches(e, labels) for e in t) for t in terms)


def _flavor_mismatch(flavor: Object | None, flavor_name: str,
                     pod_spec: Mapping[str, Any]) -> str | None:
    if flavor is None:
        return f"flavor {flavor_name} not found"
    spec = flavor.get("spec") or {}
    tolerations = [*(pod_spec.get("tolerations") or []), *(spec.get("tolerations") or [])]
    for taint in spec.get("nodeTaints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return f"untolerated taint {_taint_string(taint)} in flavor {flavor_name}"
    if not _flavor_matches(pod_spec, spec.get("nodeLabels") or {}):
        return f"flavor {flavor_name} doesn't match node affinity"
    return None


# --- assignment -------------------------------------------------------------------------

_NO_FIT, _NO_CANDIDATES, _PREEMPT, _FIT = 0, 1, 2, 3
_MODE_NAMES = {_NO_FIT: "NoFit", _NO_CANDIDATES: "NoFit", _PREEMPT: "Preempt", _FIT: "Fit"}


@attrs.define
class _PodSetAssignment:
    name: str
    count: int
    requests: dict[str, int]
    flavors: dict[str, str] = attrs.field(factory=dict)
    reasons: list[str] = attrs.field(factory=list)
    mode: int = _FIT
    attempts: list[str] = attrs.field(factory=list)

    def message(self) -> str:
        return ", ".join(sorted(self.reasons))


@attrs.define
class _Assignment:
    podsets: list[_PodSetAssignment]
    targets: list[Object] = attrs.field(factory=list)

    @property
    def mode(self) -> int:
        return min((ps.mode for ps in self.podsets), default=_NO_FIT)

    def usage(self) -> dict[FlavorResource, int]:
        out: dict[FlavorResource, int] = {}
        for ps in self.podsets:
            for res, value in ps.requests.items():
                if res in ps.flavors:
                    fr = (ps.flavors[res], res)
                    out[fr] = out.get(fr, 0) + value
        return out

    def message(self) -> str:
        return "; ".join(f"couldn't assign flavors to pod set {ps.name}: {ps.message()}"
                         for ps in self.podsets if ps.mode != _FIT)

    def attempts(self) -> str:
        return " | ".join(f"{ps.name}: {', '.join(ps.attempts)}"
                          for ps in self.podsets if ps.attempts)

    def to_api(self, cluster_queue: str) -> Admission:
        return Admission(cluster_queue=cluster_queue, pod_set_assignments=[
            PodSetAssignment(
                name=ps.name, flavors=dict(ps.flavors), count=ps.count,
                resource_usage={r: format_quantity(r, ps.requests[r]) for r in ps.flavors})
            for ps in self.podsets])


def _priority(wl: Workload) -> int:
    return wl.spec.priority or 0


def _key(wl: Workload) -> str:
    return f"{wl.namespace}/{wl.name}"


def _time(value: str | None) -> dt.datetime:
    return parse_time(value) if value else dt.datetime.min.replace(tzinfo=dt.UTC)


def _counts_after_reclaim(wl: Workload) -> dict[str, int]:
    counts = {ps.name or c.DEFAULT_PODSET_NAME: ps.count for ps in wl.spec.pod_sets}
    for rp in (wl.status.reclaimable_pods if wl.status else None) or []:
        if rp.name in counts:
            counts[rp.name] -= min(rp.count, counts[rp.name])
    return counts


def workload_usage(wl: Workload) -> dict[FlavorResource, int]:
    """What an admitted Workload takes from its ClusterQueue (``totalRequestsFromAdmission``):
    each pod set's ``resourceUsage``, scaled down to the pods not reclaimable."""
    admission = wl.status.admission if wl.status else None
    if admission is None:
        return {}
    after = _counts_after_reclaim(wl)
    totals = {ps.name or c.DEFAULT_PODSET_NAME: ps.count for ps in wl.spec.pod_sets}
    out: dict[FlavorResource, int] = {}
    for psa in admission.pod_set_assignments:
        count = psa.count if psa.count is not None else totals.get(psa.name, 0)
        now = after.get(psa.name, count)
        for res, flavor in (psa.flavors or {}).items():
            value = resource_value(res, (psa.resource_usage or {}).get(res, 0))
            if now < count and count:
                value = value // count * now
            fr = (flavor, res)
            out[fr] = out.get(fr, 0) + value
    return out


def _holds_quota(wl: Workload) -> bool:
    """``HasActiveQuotaReservation``."""
    return wl.has_quota_reservation() and not wl.is_finished() and wl.is_active()


def _is_on_hold(wl: Workload) -> bool:
    cond = wl.find_condition(c.WORKLOAD_QUOTA_RESERVED)
    return (cond is not None and cond.status == CONDITION_FALSE
            and cond.reason == c.WORKLOAD_ON_HOLD)


# --- the stand-in -----------------------------------------------------------------------


WorkloadRef = Mapping[str, Any] | str


class KueueStandIn:
    """Kueue's scheduler and workload controller, played on an in-memory API server.

    Args:
        server: the server; Kueue's kinds are registered on it (:func:`register_kueue_kinds`).
        client: the client the stand-in writes with (default: a new client of ``server``).
        recorder: where Kueue's events go (``event(obj, type, reason, message)``), e.g. an
            :class:`~jobframework.testing.recorder.EventCollector`; None records nothing.
        version: the Kueue version whose behaviour is played (v0.19.2 by default).
        features: feature gates (default: ``version``'s defaults).
        backoff_base_seconds, backoff_max_seconds: ``waitForPodsReady.requeuingStrategy``
            (Kueue's defaults, 60 and 3600; Kueue's tiny random jitter is left out).
    """

    def __init__(
        self,
        server: APIServer,
        *,
        client: Client | None = None,
        recorder: Recorder | None = None,
        version: KueueVersion | str = DEFAULT_KUEUE_VERSION,
        features: FeatureGates | None = None,
        backoff_base_seconds: int = 60,
        backoff_max_seconds: int = 3600,
    ) -> None:
        register_kueue_kinds(server)
        self.server = server
        self.client: Client = client if client is not None else server.client(
            user="system:serviceaccount:kueue-system:kueue-controller-manager")
        self.recorder = recorder
        self.features = features if features is not None else FeatureGates(version=version)
        self.backoff_base_seconds = backoff_base_seconds
        self.backoff_max_seconds = backoff_max_seconds
        # BestEffortFIFO's inadmissible list: Workload key -> (generation, ClusterQueue)
        # of those found not to fit. Kueue does not look at them again until quota is
        # freed in their ClusterQueue, the queue or a flavor changes, or they change.
        self._inadmissible: dict[str, tuple[int | None, str]] = {}
        # Per ClusterQueue, at the end of the last pass: its usage and resourceVersion;
        # and the flavors' names and resourceVersions.
        self._cq_state: dict[str, tuple[dict[FlavorResource, int], str]] = {}
        self._flavor_state: frozenset[tuple[str, str]] = frozenset()

    # -- setup ---------------------------------------------------------------------------

    async def resource_flavor(
        self, name: str, *, node_labels: Mapping[str, str] | None = None,
        node_taints: Sequence[Mapping[str, Any]] | None = None,
        tolerations: Sequence[Mapping[str, Any]] | None = None,
    ) -> Object:
        """Create a ResourceFlavor."""
        spec: dict[str, Any] = {}
        if node_labels:
            spec["nodeLabels"] = dict(node_labels)
        if node_taints:
            spec["nodeTaints"] = [dict(t) for t in node_taints]
        if tolerations:
            spec["tolerations"] = [dict(t) for t in tolerations]
        return await self.client.create({"apiVersion": c.KUEUE_API_VERSION,
                                         "kind": "ResourceFlavor",
                                         "metadata": {"name": name}, "spec": spec})

    async def cluster_queue(
        self, name: str, quotas: Mapping[str, Mapping[str, Any]] | None = None, *,
        preemption: str = "Never", queueing_strategy: str = "BestEffortFIFO",
        resource_groups: Sequence[Mapping[str, Any]] | None = None,
        namespace_selector: Mapping[str, Any] | None = None,
    ) -> Object:
        """Create a ClusterQueue.

        ``quotas`` maps each flavor, in the order flavors are tried, to its nominal quota
        per resource (``{"on-demand": {"cpu": "4"}, "spot": {"cpu": "8"}}``); they form
        one resource group covering every resource named (``"0"`` where a flavor names
        none). ``resource_groups`` gives ``spec.resourceGroups`` as is instead.
        ``preemption`` is ``withinClusterQueue``.
        """
        groups: list[Mapping[str, Any]]
        if resource_groups is not None:
            groups = [dict(g) for g in resource_groups]
        else:
            covered: list[str] = []
            for per_resource in (quotas or {}).values():
                covered.extend(r for r in per_resource if r not in covered)
            groups = [{"coveredResources": covered, "flavors": [
                {"name": flavor, "resources": [
                    {"name": r, "nominalQuota": str(per_resource.get(r, "0"))}
                    for r in covered]}
                for flavor, per_resource in (quotas or {}).items()]}] if covered else []
        spec: dict[str, Any] = {
            "namespaceSelector": dict(namespace_selector or {}),
            "resourceGroups": groups,
            "queueingStrategy": queueing_strategy,
            "preemption": {"withinClusterQueue": preemption, "reclaimWithinCohort": "Never"},
        }
        return await self.client.create({"apiVersion": c.KUEUE_API_VERSION,
                                         "kind": "ClusterQueue",
                                         "metadata": {"name": name}, "spec": spec})

    async def local_queue(self, name: str, cluster_queue: str,
                          namespace: str = "default") -> Object:
        """Create a LocalQueue pointing at ``cluster_queue``."""
        return await self.client.create({"apiVersion": c.KUEUE_API_VERSION,
                                         "kind": "LocalQueue",
                                         "metadata": {"name": name, "namespace": namespace},
                                         "spec": {"clusterQueue": cluster_queue}})

    async def priority_class(self, name: str, value: int, description: str = "") -> Object:
        """Create a WorkloadPriorityClass."""
        obj: dict[str, Any] = {"apiVersion": c.KUEUE_API_VERSION,
                               "kind": "WorkloadPriorityClass",
                               "metadata": {"name": name}, "value": value}
        if description:
            obj["description"] = description
        return await self.client.create(obj)

    # -- reads ---------------------------------------------------------------------------

    async def workloads(self, namespace: str | None = None) -> list[Object]:
        """Every Workload (of ``namespace`` when given), sorted by namespace and name."""
        items = (await self.client.list(WORKLOAD_GVK, namespace=namespace)).items
        return sorted(items, key=lambda o: (namespace_of(o), name_of(o)))

    async def workload(self, ref: WorkloadRef, namespace: str = "default") -> Object:
        """The stored Workload: ``ref`` is a Workload (re-read), or its name."""
        if isinstance(ref, str):
            return await self.client.get(WORKLOAD_GVK, ref, namespace=namespace)
        return await self.client.get(WORKLOAD_GVK, name_of(ref),
                                     namespace=namespace_of(ref) or namespace)

    async def workload_for(self, job: Mapping[str, Any]) -> Object:
        """The Workload a job owns (the one whose owner reference has the job's uid)."""
        uid = uid_of(job)
        for wl in await self.workloads(namespace_of(job) or None):
            if any(ref.get("uid") == uid for ref in
                   (wl.get("metadata") or {}).get("ownerReferences") or []):
                return wl
        raise LookupError(f"no Workload owned by {job.get('kind')} "
                          f"{namespace_of(job)}/{name_of(job)}")

    async def usage(self, cluster_queue: str) -> dict[str, dict[str, str]]:
        """The quota in use in ``cluster_queue`` by flavor and resource, as quantities
        (admitted Workloads, reclaimable pods subtracted)."""
        out: dict[str, dict[str, str]] = {}
        for (flavor, res), value in sorted(self._usage(
                cluster_queue, [wlpkg.from_object(o) for o in await self.workloads()]).items()):
            out.setdefault(flavor, {})[res] = format_quantity(res, value)
        return out

    # -- scheduling ----------------------------------------------------------------------

    async def schedule(self) -> ScheduleResult:
        """One pass of Kueue's core over every Workload.

        First the workload controller's reactions (reactivated and backed-off Workloads
        requeued, deactivated ones evicted, missing queues reported), then, per
        ClusterQueue in name order, the pending Workloads in FIFO order (higher priority
        first, then older): each that fits gets a flavor and a quota reservation; one that
        fits only by preempting lower-priority Workloads evicts them (and the queue waits
        for them to release their quota); one that does not fit gets
        ``QuotaReserved=False/Pending`` with the flavor assigner's message
        (``StrictFIFO``: the queue stops there).
        """
        await self._workload_controller()
        objects = await self.workloads()
        all_wls = [wlpkg.from_object(o) for o in objects]
        cq_objects = (await self.client.list(CLUSTER_QUEUE_GVK)).items
        queues = {name_of(o): _parse_queue(o) for o in cq_objects}
        local = {(namespace_of(o), name_of(o)): str((o.get("spec") or {}).get("clusterQueue"))
                 for o in (await self.client.list(LOCAL_QUEUE_GVK)).items}
        flavors = {name_of(o): o for o in (await self.client.list(RESOURCE_FLAVOR_GVK)).items}
        self._requeue_inadmissible(cq_objects, flavors, all_wls)
        pending: dict[str, list[Workload]] = {}
        result_pending: dict[str, str] = {}
        for wl in all_wls:
            if not self._admissible(wl):
                continue
            lq = (wl.namespace, wl.spec.queue_name or "")
            cq_name = local.get(lq)
            message = None
            if lq not in local:
                message = f"LocalQueue {wl.spec.queue_name} doesn't exist"
            elif cq_name not in queues:
                message = f"ClusterQueue {cq_name} doesn't exist"
            elif queues[cq_name].stopped:
                message = f"ClusterQueue {cq_name} is inactive"
            if message is not None:
                await self._set_inadmissible(wl, message)
                result_pending[_key(wl)] = message
                continue
            assert cq_name is not None
            pending.setdefault(cq_name, []).append(wl)
        admitted: list[str] = []
        preempted: list[str] = []
        for cq_name in sorted(pending):
            cq = queues[cq_name]
            for wl in sorted(pending[cq_name], key=self._queue_order):
                key = _key(wl)
                if not cq.strict_fifo and self._inadmissible.get(key) == (
                        wl.metadata.generation, cq_name):
                    continue  # in the inadmissible list: not looked at
                self._inadmissible.pop(key, None)
                assignment = self._admissible_assignment(wl, cq, flavors, all_wls,
                                                         preempt=True)
                if assignment.mode == _FIT:
                    stored = await self._reserve(wl, cq, assignment)
                    admitted.append(key)
                    self._replace(all_wls, wlpkg.from_object(stored))
                    continue
                if assignment.mode == _PREEMPT and assignment.targets:
                    for target in assignment.targets:
                        if not wlpkg.from_object(target).is_evicted():
                            await self._preempt(target, wl, cq_name)
                            preempted.append(f"{namespace_of(target)}/{name_of(target)}")
                    break
                message = assignment.message()
                await self._set_pending(wl, message)
                result_pending[key] = message
                if cq.strict_fifo:
                    break  # StrictFIFO: the head stays in the heap and blocks the rest
                self._inadmissible[key] = (wl.metadata.generation, cq_name)
        self._cq_state = {name_of(o): (self._usage(name_of(o), all_wls),
                                       str(o["metadata"].get("resourceVersion")))
                          for o in cq_objects}
        return ScheduleResult(tuple(admitted), tuple(preempted), result_pending)

    def _requeue_inadmissible(self, cq_objects: Sequence[Object],
                              flavors: Mapping[str, Object],
                              all_wls: Sequence[Workload]) -> None:
        """Kueue's ``QueueInadmissibleWorkloads``: the inadmissible Workloads of a
        ClusterQueue go back to its heap when quota was released in it (a Workload
        finished, was evicted or deleted, or reclaimed pods), or the queue changed; all
        of them when a ResourceFlavor changed."""
        flavor_state = frozenset((name, str(o["metadata"].get("resourceVersion")))
                                 for name, o in flavors.items())
        if flavor_state != self._flavor_state:
            self._flavor_state = flavor_state
            self._inadmissible.clear()
        requeue: set[str] = set()
        for o in cq_objects:
            name = name_of(o)
            before = self._cq_state.get(name)
            usage = self._usage(name, all_wls)
            if before is None or before[1] != str(o["metadata"].get("resourceVersion")) \
                    or any(usage.get(fr, 0) < value for fr, value in before[0].items()):
                requeue.add(name)
        self._inadmissible = {k: v for k, v in self._inadmissible.items()
                              if v[1] not in requeue}

    async def admit(self, ref: WorkloadRef, flavor: str | None = None, *,
                    counts: Mapping[str, int] | None = None,
                    namespace: str = "default") -> Object:
        """Reserve quota for the Workload and admit it, as the scheduler does.

        Without ``flavor`` the flavor assigner picks, and :class:`NotAdmissibleError`
        (with Kueue's message) is raised when the Workload does not fit without
        preemption. With ``flavor`` every resource is assigned that flavor, whatever the
        quota left (the flavor must be one of the ClusterQueue's for each resource).

        ``counts`` (pod set name -> pods) admits partially, as Kueue does for a pod set
        with a ``minCount``: each named pod set's ``podSetAssignments`` entry gets that
        ``count`` and a ``resourceUsage`` for that many pods, and the job starts with it
        (``PodSetInfo.count``). A count must lie between the pod set's ``minCount`` and
        its ``count``; a pod set without ``minCount`` can only be given its ``count``;
        pod sets not named are admitted whole. A bad count raises :class:`ValueError`
        naming the pod set. Without ``counts`` the Workload is admitted whole
        (:meth:`schedule` looks for a partial admission by itself).
        """
        wl = wlpkg.from_object(await self.workload(ref, namespace))
        if counts is not None:
            self._check_counts(wl, counts)
        cq_name = await self._cluster_queue_of(wl)
        cq = _parse_queue(await self.client.get(CLUSTER_QUEUE_GVK, cq_name))
        if flavor is None:
            flavors = {name_of(o): o
                       for o in (await self.client.list(RESOURCE_FLAVOR_GVK)).items}
            all_wls = [wlpkg.from_object(o) for o in await self.workloads()]
            assignment = self._assign(wl, cq, flavors, all_wls, preempt=False,
                                      counts=counts)
            if assignment.mode != _FIT:
                raise NotAdmissibleError(assignment.message())
        else:
            assignment = self._forced(wl, cq, flavor, counts)
        return await self._reserve(wl, cq, assignment)

    def _check_counts(self, wl: Workload, counts: Mapping[str, int]) -> None:
        """Refuse counts Kueue could not admit (see :meth:`admit`)."""
        pod_sets = {ps.name or c.DEFAULT_PODSET_NAME: ps for ps in wl.spec.pod_sets}
        where = f"Workload {wl.namespace}/{wl.name}"
        for name, count in counts.items():
            ps = pod_sets.get(name)
            if ps is None:
                raise ValueError(f"counts: pod set {name!r} is not one of {where}'s "
                                 f"({', '.join(map(repr, pod_sets))})")
            if count == ps.count:
                continue
            if ps.min_count is None:
                raise ValueError(f"counts: pod set {name!r} of {where} has no minCount, so "
                                 f"it is admitted whole ({ps.count} pods), not {count}")
            if not ps.min_count <= count <= ps.count:
                raise ValueError(f"counts: pod set {name!r} of {where} takes {ps.min_count} "
                                 f"to {ps.count} pods (minCount to count), not {count}")
            if not self.features.enabled(c.FeatureGate.PARTIAL_ADMISSION):
                raise ValueError(f"counts: pod set {name!r} of {where}: partial admission "
                                 "needs the PartialAdmission feature gate, which is off")

    # -- eviction and the rest of the lifecycle --------------------------------------------

    async def evict(
        self, ref: WorkloadRef, reason: str, message: str | None = None, *,
        namespace: str = "default", preemptor: Mapping[str, Any] | None = None,
        preemption_reason: str = c.IN_CLUSTER_QUEUE_REASON,
        nodes: Sequence[str] = (), underlying_cause: str = "",
    ) -> Object:
        """Evict the Workload (``Evicted=True`` with ``reason``), as Kueue's ``Evict``.

        Default messages, per reason: ``Preempted`` (also sets ``Preempted=True`` with
        ``preemption_reason``) names ``preemptor``'s UIDs, or ``UNKNOWN``;
        ``PodsReadyTimeout`` says ``Exceeded the PodsReady timeout <ns>/<name>`` and
        starts the requeueing backoff (``requeueState``); ``NodeFailures`` names
        ``nodes``; ``ClusterQueueStopped`` and ``LocalQueueStopped`` say the queue is
        stopped. Other reasons need ``message``. Use :meth:`deactivate` for
        ``Deactivated``. The admission stays: the job's reconciler releases the quota
        once the job has stopped (``QuotaReserved=False``, ``Requeued``).
        """
        wl = wlpkg.from_object(await self.workload(ref, namespace))
        if reason == c.WORKLOAD_DEACTIVATED:
            raise ValueError("use deactivate() to evict with reason Deactivated")
        cq_name = wl.status.admission.cluster_queue if (
            wl.status and wl.status.admission) else ""
        if message is None:
            if reason == c.EVICTED_BY_PREEMPTION:
                message = self._preemption_message(preemptor, preemption_reason, cq_name,
                                                   cq_name)
            elif reason == c.EVICTED_BY_PODS_READY_TIMEOUT:
                message = f"Exceeded the PodsReady timeout {_key(wl)}"
            elif reason == c.EVICTED_DUE_TO_NODE_FAILURES and nodes:
                message = ("Workload was evicted as there was no replacement for unhealthy "
                           f"node(s): {','.join(nodes)}")
            elif reason == c.EVICTED_BY_CLUSTER_QUEUE_STOPPED:
                message = "The ClusterQueue is stopped"
            elif reason == c.EVICTED_BY_LOCAL_QUEUE_STOPPED:
                message = "The LocalQueue is stopped"
            else:
                raise ValueError(f"evicting with reason {reason!r} needs a message")
        def prepare(w: Workload) -> None:
            if reason == c.EVICTED_BY_PREEMPTION:
                self._set(w, c.WORKLOAD_PREEMPTED, CONDITION_TRUE, preemption_reason, message,
                          generation=False)
            elif reason == c.EVICTED_BY_PODS_READY_TIMEOUT:
                self._update_requeue_state(w)

        stored = await self._evict(wl, reason, message, underlying_cause, prepare)
        if reason == c.EVICTED_BY_PREEMPTION and self.recorder is not None and preemptor:
            self._record_preemption(stored, preemptor, cq_name, message)
        return stored

    async def deactivate(self, ref: WorkloadRef, *, namespace: str = "default",
                         cause: str = "", cause_message: str = "") -> Object:
        """Deactivate the Workload (``spec.active: false``) and evict it as Kueue's
        workload controller then does (``Evicted=True/Deactivated``, ``The workload is
        deactivated``, requeueing state cleared).

        ``cause`` plays Kueue deactivating it itself (``RequeuingLimitExceeded``,
        ``MaximumExecutionTimeExceeded``...): the reason becomes
        ``DeactivatedDueTo<cause>`` and the message says why (``cause_message``, by
        default Kueue's for the known causes).
        """
        obj = await self.workload(ref, namespace)
        obj["spec"]["active"] = False
        stored = await self.client.update(obj)
        wl = wlpkg.from_object(stored)
        if wl.is_evicted():
            return stored
        message = _DEACTIVATED_MESSAGE
        if cause:
            message = (f"{message} due to "
                       f"{cause_message or _DEACTIVATION_CAUSES.get(cause, cause)}")
        return await self._evict(wl, c.WORKLOAD_DEACTIVATED, message, cause,
                                 self._clear_deactivation)

    async def activate(self, ref: WorkloadRef, *, namespace: str = "default") -> Object:
        """Reactivate a deactivated Workload (``spec.active: true``); once its quota was
        released, Kueue requeues it (``Requeued=True/Reactivated``)."""
        obj = await self.workload(ref, namespace)
        obj["spec"]["active"] = True
        stored = await self.client.update(obj)
        await self._workload_controller([stored])
        return await self.workload(stored)

    async def finish(self, ref: WorkloadRef, success: bool = True, message: str = "", *,
                     namespace: str = "default") -> Object:
        """Mark the Workload ``Finished=True`` (``Succeeded`` or ``Failed``) as a job
        reconciler does when its job ends; a finished Workload holds no quota."""
        wl = wlpkg.from_object(await self.workload(ref, namespace))
        reason = c.FINISHED_REASON_SUCCEEDED if success else c.FINISHED_REASON_FAILED
        await wlpkg.finish(self.client, wl, reason, message, self.server.clock,
                           features=self.features)
        return await self.workload(ref, namespace)

    async def reclaim(self, ref: WorkloadRef, pods: Mapping[str, int], *,
                      namespace: str = "default") -> Object:
        """Set ``status.reclaimablePods`` (pod set name → count) under
        ``kueue-reclaimable-pods``, as a job reconciler does when pods finish for good;
        their share of the quota is released. An empty mapping clears the list."""
        wl = wlpkg.from_object(await self.workload(ref, namespace))
        return await wlpkg.update_reclaimable_pods(
            self.client, wl, [ReclaimablePod(name=n, count=k) for n, k in pods.items()],
            features=self.features)

    async def release(self, ref: WorkloadRef, *, namespace: str = "default") -> Object:
        """Release an evicted Workload's quota as a job reconciler does once its job has
        stopped (``QuotaReserved=False/Pending``, ``Admitted=False``, ``Requeued`` with
        the eviction's reason), for Workloads no reconciler runs for."""
        wl = wlpkg.from_object(await self.workload(ref, namespace))
        evicted = wl.find_condition(c.WORKLOAD_EVICTED)
        if evicted is None or evicted.status != CONDITION_TRUE:
            raise ValueError(f"workload {_key(wl)} is not evicted")
        now = self._now()
        reason, message = evicted.reason or "", evicted.message or ""
        requeued = reason in (c.EVICTED_BY_PREEMPTION, c.EVICTED_DUE_TO_NODE_FAILURES)
        wlpkg.set_requeued_condition(wl, reason, message, requeued, now)
        pending = (c.QUOTA_RESERVED_REASON_PENDING_EVALUATION if self.features.enabled(
            c.FeatureGate.UNADMITTED_WORKLOADS_OBSERVABILITY) else c.WORKLOAD_PENDING)
        wlpkg.unset_quota_reservation_with_condition(wl, pending, message, now,
                                                     features=self.features)
        return await wlpkg.apply_admission_status(self.client, wl, features=self.features)

    # -- internals: writes ---------------------------------------------------------------

    def _now(self) -> dt.datetime:
        return self.server.clock.now()

    def _event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(obj, type_, reason, c.truncate_event_message(message))

    def _set(self, wl: Workload, type_: str, status: str, reason: str, message: str, *,
             generation: bool = True) -> bool:
        now = self._now()
        cond = wlpkg.new_condition(type_, status, reason, message, now=now,
                                   generation=wl.metadata.generation if generation else None)
        return wlpkg.set_workload_condition(wl, cond, now)

    async def _write(self, wl: Workload, *, strict: bool = False) -> Object:
        return await wlpkg.apply_admission_status(self.client, wl, features=self.features,
                                                  strict=strict)

    async def _reserve(self, wl: Workload, cq: _Queue, assignment: _Assignment) -> Object:
        """``SetQuotaReservation`` + ``SyncAdmittedCondition`` (no admission checks), the
        scheduler's apply and its ``QuotaReserved``/``Admitted`` events."""
        had_reservation = wl.has_quota_reservation()
        now = self._now()
        wl.status = wl.status or WorkloadStatus()
        wl.status.admission = assignment.to_api(cq.name)
        self._set(wl, c.WORKLOAD_QUOTA_RESERVED, CONDITION_TRUE,
                  c.QUOTA_RESERVED_REASON_QUOTA_RESERVED,
                  c.MSG_QUOTA_RESERVED.format(cq.name))
        for type_ in (c.WORKLOAD_EVICTED, c.WORKLOAD_PREEMPTED,
                      c.WORKLOAD_BLOCKED_ON_PREEMPTION_GATES):
            prev = wl.find_condition(type_)
            if prev is not None and prev.status == CONDITION_TRUE:
                self._set(wl, type_, CONDITION_FALSE, c.QUOTA_RESERVED_REASON_QUOTA_RESERVED,
                          f"Previously: {prev.message or ''}")
        wlpkg.sync_admitted_condition(wl, now, features=self.features)
        stored = await self._write(wl)
        if not had_reservation:
            queued = wl.find_condition(c.WORKLOAD_REQUEUED)
            since = _time(queued.last_transition_time if queued else
                          wl.metadata.creation_timestamp)
            text = (f"Quota reserved in ClusterQueue {cq.name}, wait time since queued was "
                    f"{(now - since).total_seconds():.0f}s")
            considered = assignment.attempts()
            if considered:
                text += f"; Flavors considered: {considered}"
            self._event(stored, _NORMAL, "QuotaReserved", text)
        if wlpkg.from_object(stored).is_admitted():
            self._event(stored, _NORMAL, "Admitted",
                        f"Admitted by ClusterQueue {cq.name}, wait time since reservation "
                        "was 0s")
        return stored

    async def _set_pending(self, wl: Workload, message: str) -> None:
        """The scheduler's ``requeueAndUpdate`` for a Workload that does not fit."""
        reason = c.WORKLOAD_PENDING
        changed = wlpkg.unset_quota_reservation_with_condition(
            wl, reason, message, self._now(), features=self.features)
        requests = [PodSetRequest(name=ps.name or c.DEFAULT_PODSET_NAME, resources={
            r: format_quantity(r, v * count) for r, v in pod_requests(
                (ps.template or {}).get("spec") or {}).items()})
            for ps, count in zip(wl.spec.pod_sets, _counts_after_reclaim(wl).values(),
                                 strict=True)]
        assert wl.status is not None
        if [r.to_dict() for r in wl.status.resource_requests or []] != [
                r.to_dict() for r in requests]:
            wl.status.resource_requests = requests
            changed = True
        if changed:
            await self._write(wl)
            self._event(wl.to_dict(), _WARNING, reason, message)

    async def _set_inadmissible(self, wl: Workload, message: str) -> None:
        """The workload controller's legacy ``QuotaReserved=False/Inadmissible``."""
        if self._set(wl, c.WORKLOAD_QUOTA_RESERVED, CONDITION_FALSE, c.WORKLOAD_INADMISSIBLE,
                     message):
            wlpkg.sync_admitted_condition(wl, self._now(), features=self.features)
            await self._write(wl, strict=True)

    async def _evict(self, wl: Workload, reason: str, message: str, cause: str,
                     prepare: Callable[[Workload], None] | None = None) -> Object:
        """Kueue's ``Evict``: prepare, ``Evicted=True``, cluster nomination, checks and
        unhealthy nodes reset, eviction counted in ``schedulingStats``; one apply; the
        ``EvictedDueTo<reason>`` event when the Workload had an admission."""
        now = self._now()
        if prepare is not None:
            prepare(wl)
        evicted_reason = reason
        if reason == c.WORKLOAD_DEACTIVATED and cause:
            evicted_reason = f"{reason}DueTo{cause}"
        self._set(wl, c.WORKLOAD_EVICTED, CONDITION_TRUE, evicted_reason, message)
        assert wl.status is not None
        wl.status.cluster_name = None
        wl.status.nominated_cluster_names = None
        for check in wl.status.admission_checks or []:
            if check.state != c.CHECK_STATE_PENDING:
                retry = (check.retry_count or 0) + 1 if check.state == c.CHECK_STATE_RETRY \
                    else None
                check.message = f"Reset to Pending after eviction. Previously: {check.state}"
                check.state = c.CHECK_STATE_PENDING
                check.last_transition_time = rfc3339(now)
                check.retry_count = retry
        wl.status.unhealthy_nodes = None
        gate = wl.find_condition(c.WORKLOAD_BLOCKED_ON_PREEMPTION_GATES)
        if gate is not None and gate.status == CONDITION_TRUE:
            self._set(wl, c.WORKLOAD_BLOCKED_ON_PREEMPTION_GATES, CONDITION_FALSE,
                      evicted_reason, message)
        for state in wl.status.preemption_gates or []:
            state.position = "Closed"
            state.last_transition_time = rfc3339(now)
        stats = wl.status.scheduling_stats or SchedulingStats()
        evictions = list(stats.evictions or [])
        entry = next((e for e in evictions
                      if e.reason == reason and e.underlying_cause == cause), None)
        if entry is None:
            evictions.append(WorkloadSchedulingStatsEviction(
                reason=reason, underlying_cause=cause, count=1))
        else:
            entry.count += 1
        stats.evictions = evictions
        wl.status.scheduling_stats = stats
        had_admission = wl.status.admission is not None
        stored = await self._write(wl)
        if had_admission:
            event_reason = f"{c.WORKLOAD_EVICTED}DueTo{reason}"
            if reason == c.WORKLOAD_DEACTIVATED and cause:
                event_reason = f"{event_reason}DueTo{cause}"
            self._event(stored, _NORMAL, event_reason, message)
        return stored

    def _clear_deactivation(self, wl: Workload) -> None:
        if wl.status is not None:
            if wl.status.conditions:
                wl.status.conditions = [x for x in wl.status.conditions
                                        if x.type != c.WORKLOAD_DEACTIVATION_TARGET]
            wl.status.requeue_state = None

    def _update_requeue_state(self, wl: Workload) -> None:
        """``UpdateRequeueState``: one more requeue, backoff ``base * 2^(n-1)`` (capped)."""
        assert wl.status is not None
        state = wl.status.requeue_state or RequeueState()
        count = (state.count or 0) + 1
        wait = min(self.backoff_base_seconds * 2 ** (count - 1), self.backoff_max_seconds)
        until = self._now() + dt.timedelta(seconds=wait)
        if state.requeue_at is None or _time(state.requeue_at) < until:
            state.requeue_at = rfc3339(until)
        state.count = count
        wl.status.requeue_state = state

    def _preemption_message(self, preemptor: Mapping[str, Any] | None, reason: str,
                            preemptor_cq: str, preemptee_cq: str) -> str:
        meta = (preemptor or {}).get("metadata") or {}
        w_uid = str(meta.get("uid") or "") or "UNKNOWN"
        j_uid = str((meta.get("labels") or {}).get(c.JOB_UID_LABEL) or "") or "UNKNOWN"
        return (f"Preempted to accommodate a workload (UID: {w_uid}, JobUID: {j_uid}) due to "
                f"{_PREEMPTION_REASONS.get(reason, 'UNKNOWN')}; preemptor path: "
                f"{'/' + preemptor_cq if preemptor_cq else 'UNKNOWN'}; preemptee path: "
                f"{'/' + preemptee_cq if preemptee_cq else 'UNKNOWN'}")

    def _record_preemption(self, target: Object, preemptor: Mapping[str, Any], cq_name: str,
                           message: str) -> None:
        pre, tgt = wlpkg.from_object(preemptor), wlpkg.from_object(target)
        prio = (f"preemptor effective priority: {_priority(pre)} (base: {_priority(pre)}, "
                f"boost: 0); preemptee effective priority: {_priority(tgt)} "
                f"(base: {_priority(tgt)}, boost: 0)")
        self._event(target, _NORMAL, "Preempted", f"{message}; {prio}")
        self._event(preemptor, _NORMAL, "PreemptedWorkload",
                    f"Preempted workload {_key(tgt)} (UID: {tgt.metadata.uid}) in "
                    f"ClusterQueue {cq_name}; {prio}")

    async def _preempt(self, target: Object, preemptor: Workload, cq_name: str) -> None:
        await self.evict(target, c.EVICTED_BY_PREEMPTION, preemptor=preemptor.to_dict())

    async def _workload_controller(self, objects: Iterable[Object] | None = None) -> None:
        """What Kueue's workload controller does that the scheduler depends on."""
        now = self._now()
        for obj in objects if objects is not None else await self.workloads():
            wl = wlpkg.from_object(obj)
            if wl.is_finished():
                continue
            if not wl.is_active():
                if not wl.is_evicted():
                    await self._evict(wl, c.WORKLOAD_DEACTIVATED, _DEACTIVATED_MESSAGE, "",
                                      self._clear_deactivation)
                continue
            requeued = wl.find_condition(c.WORKLOAD_REQUEUED)
            if requeued is None or requeued.status != CONDITION_FALSE:
                continue
            if requeued.reason == c.WORKLOAD_DEACTIVATED:
                wlpkg.set_requeued_condition(wl, c.WORKLOAD_REACTIVATED,
                                             "The workload was reactivated", True, now)
                await self._write(wl, strict=True)
            elif requeued.reason in (c.EVICTED_BY_PODS_READY_TIMEOUT,
                                     c.EVICTED_BY_ADMISSION_CHECK):
                state = wl.status.requeue_state if wl.status else None
                if state is not None and state.requeue_at and _time(state.requeue_at) > now:
                    continue
                if state is not None and wl.status is not None:
                    wl.status.requeue_state = RequeueState(count=state.count)
                wlpkg.set_requeued_condition(wl, c.WORKLOAD_BACKOFF_FINISHED,
                                             "The workload backoff was finished", True, now)
                await self._write(wl, strict=True)

    # -- internals: decisions ------------------------------------------------------------

    def _admissible(self, wl: Workload) -> bool:
        """``IsAdmissible`` plus the requeueing backoff."""
        if (wl.is_finished() or not wl.is_active() or wl.has_quota_reservation()
                or _is_on_hold(wl) or wl.metadata.deletion_timestamp):
            return False
        if (wl.metadata.annotations or {}).get(c.ADMISSION_GATED_BY_ANNOTATION):
            return False
        state = wl.status.requeue_state if wl.status else None
        return not (state is not None and state.requeue_at
                    and _time(state.requeue_at) > self._now())

    def _queue_timestamp(self, wl: Workload) -> dt.datetime:
        """``GetQueueOrderTimestamp`` (``Eviction`` requeuing timestamp)."""
        evicted = wl.find_condition(c.WORKLOAD_EVICTED)
        if (evicted is not None and evicted.status == CONDITION_TRUE
                and evicted.reason in (c.EVICTED_BY_PODS_READY_TIMEOUT,
                                       c.EVICTED_BY_ADMISSION_CHECK)):
            return _time(evicted.last_transition_time)
        return _time(wl.metadata.creation_timestamp)

    def _queue_order(self, wl: Workload) -> tuple[int, dt.datetime, str]:
        return (-_priority(wl), self._queue_timestamp(wl), _key(wl))

    async def _cluster_queue_of(self, wl: Workload) -> str:
        try:
            lq = await self.client.get(LOCAL_QUEUE_GVK, wl.spec.queue_name or "",
                                       namespace=wl.namespace)
        except errors.NotFound:
            raise NotAdmissibleError(
                f"LocalQueue {wl.spec.queue_name} doesn't exist") from None
        return str((lq.get("spec") or {}).get("clusterQueue"))

    def _usage(self, cq_name: str, wls: Iterable[Workload],
               skip: Iterable[str] = ()) -> dict[FlavorResource, int]:
        skipped = set(skip)
        out: dict[FlavorResource, int] = {}
        for wl in wls:
            if (_holds_quota(wl) and wl.status and wl.status.admission
                    and wl.status.admission.cluster_queue == cq_name
                    and _key(wl) not in skipped):
                for fr, value in workload_usage(wl).items():
                    out[fr] = out.get(fr, 0) + value
        return out

    def _podset_requests(self, wl: Workload, cq: _Queue,
                         counts: Mapping[str, int] | None = None) -> list[_PodSetAssignment]:
        """Each pod set's requests for its count after reclaim, or for ``counts`` (a
        partial admission's, which Kueue's assigner scales the pod set to)."""
        after_reclaim = _counts_after_reclaim(wl)
        out = []
        for ps in wl.spec.pod_sets:
            name = ps.name or c.DEFAULT_PODSET_NAME
            count = counts[name] if counts is not None and name in counts \
                else after_reclaim[name]
            single = pod_requests((ps.template or {}).get("spec") or {})
            requests = {r: v * count for r, v in single.items()}
            if cq.group_of("pods") is not None:
                requests["pods"] = count
            out.append(_PodSetAssignment(name, count, requests))
        return out

    def _forced(self, wl: Workload, cq: _Queue, flavor: str,
                counts: Mapping[str, int] | None = None) -> _Assignment:
        podsets = self._podset_requests(wl, cq, counts)
        for ps in podsets:
            for res, value in ps.requests.items():
                group = cq.group_of(res)
                if group is None or flavor not in group.flavors:
                    if value == 0:
                        continue
                    raise ValueError(f"flavor {flavor} has no quota for {res} in "
                                     f"ClusterQueue {cq.name}")
                ps.flavors[res] = flavor
        return _Assignment(podsets)

    def _assign(self, wl: Workload, cq: _Queue, flavors: Mapping[str, Object],
                all_wls: list[Workload], *, preempt: bool = True,
                counts: Mapping[str, int] | None = None) -> _Assignment:
        """The flavor assigner (``TryNextFlavor`` when preemption is needed): per pod set
        and resource group, the first flavor where everything fits, else the first where
        preemption would make room; then the preemption targets. ``counts`` scales pod
        sets to a partial admission's counts."""
        usage = self._usage(cq.name, all_wls)
        podsets = self._podset_requests(wl, cq, counts)
        assigned: dict[FlavorResource, int] = {}
        pod_specs = [(ps.template or {}).get("spec") or {} for ps in wl.spec.pod_sets]
        for ps, pod_spec in zip(podsets, pod_specs, strict=True):
            done: set[str] = set()
            for res in sorted(ps.requests):
                if res in done or (ps.requests[res] == 0 and cq.group_of(res) is None):
                    continue
                group = cq.group_of(res)
                if group is None:
                    ps.reasons.append(f"resource {res} unavailable in ClusterQueue")
                    ps.mode = _NO_FIT
                    break
                wanted = [r for r in group.resources if r in ps.requests]
                done.update(wanted)
                best_mode, best_flavor = -1, ""
                for fname in group.flavors:
                    mismatch = _flavor_mismatch(flavors.get(fname), fname, pod_spec)
                    if mismatch is not None:
                        ps.reasons.append(mismatch)
                        ps.attempts.append(f"{fname}(NoFit;{mismatch})")
                        continue
                    mode, reasons = _FIT, []
                    for r in wanted:
                        fr = (fname, r)
                        val = assigned.get(fr, 0) + ps.requests[r]
                        nominal = cq.nominal(fr)
                        if val > nominal:
                            reasons.append(
                                f"insufficient quota for {r} in flavor {fname}, previously "
                                "considered podsets requests "
                                f"({format_quantity(r, assigned.get(fr, 0))}) + current "
                                f"podset request ({format_quantity(r, ps.requests[r])}) > "
                                f"maximum capacity ({format_quantity(r, nominal)})")
                            mode = _NO_FIT
                            break
                        available = nominal - usage.get(fr, 0)
                        if val <= available:
                            continue
                        reasons.append(f"insufficient unused quota for {r} in flavor "
                                       f"{fname}, {format_quantity(r, val - available)} "
                                       "more needed")
                        possible = preempt and self._can_preempt(
                            wl, cq, fr, val, all_wls)
                        mode = min(mode, _PREEMPT if possible else _NO_CANDIDATES)
                    ps.reasons.extend(reasons)
                    if mode != _FIT:
                        detail = ";".join(reasons)
                        ps.attempts.append(f"{fname}({_MODE_NAMES[mode]}"
                                           f"{';' + detail if detail else ''})")
                    if mode > best_mode:
                        best_mode, best_flavor = mode, fname
                    if mode == _FIT:
                        break
                if best_mode < 0:
                    ps.mode = _NO_FIT
                    break
                ps.mode = min(ps.mode, best_mode)
                if best_mode >= _NO_CANDIDATES:
                    for r in wanted:
                        ps.flavors[r] = best_flavor
                        fr = (best_flavor, r)
                        assigned[fr] = assigned.get(fr, 0) + ps.requests[r]
            if ps.mode == _FIT:
                ps.reasons.clear()
        assignment = _Assignment(podsets)
        if assignment.mode == _PREEMPT:
            assignment.targets = self._targets(wl, cq, assignment, all_wls)
        return assignment

    def _admissible_assignment(self, wl: Workload, cq: _Queue, flavors: Mapping[str, Object],
                               all_wls: list[Workload], *, preempt: bool) -> _Assignment:
        """The scheduler's choice (``getInitialAssignments``): the whole Workload when it
        fits, or fits by preempting (with targets); else, with gate ``PartialAdmission``
        and a pod set whose ``minCount`` is below its count, the largest counts that do
        (:meth:`_reduced_assignment`); else the whole Workload's assignment, whose message
        says why it does not fit."""
        full = self._assign(wl, cq, flavors, all_wls, preempt=preempt)
        if full.mode == _FIT or (full.mode == _PREEMPT and full.targets):
            return full
        if (self.features.enabled(c.FeatureGate.PARTIAL_ADMISSION)
                and wl.can_be_partially_admitted()):
            reduced = self._reduced_assignment(wl, cq, flavors, all_wls, preempt=preempt)
            if reduced is not None:
                return reduced
        return full

    def _reduced_assignment(self, wl: Workload, cq: _Queue, flavors: Mapping[str, Object],
                            all_wls: list[Workload], *, preempt: bool) -> _Assignment | None:
        """Kueue's pod set reducer: a binary search for the smallest reduction, taken from
        the last pod set with a ``minCount`` backwards, at which the Workload fits (or fits
        by preempting). Kueue's webhook allows one such pod set, so this is the largest
        count between its ``minCount`` and its count that fits; None when not even the
        ``minCount`` does."""
        names = [ps.name or c.DEFAULT_PODSET_NAME for ps in wl.spec.pod_sets]
        full = [ps.count for ps in wl.spec.pod_sets]
        deltas = [ps.count - ps.min_count if ps.min_count is not None else 0
                  for ps in wl.spec.pod_sets]
        total = sum(deltas)

        def counts_for(budget: int) -> dict[str, int]:
            out = dict(zip(names, full, strict=True))
            for i in range(len(names) - 1, -1, -1):
                cut = min(deltas[i], budget)
                out[names[i]] = full[i] - cut
                budget -= cut
            return out

        best: _Assignment | None = None
        lo, hi = 0, total + 1
        while lo < hi:  # sort.Search: the smallest budget that fits
            mid = (lo + hi) // 2
            trial = self._assign(wl, cq, flavors, all_wls, preempt=preempt,
                                 counts=counts_for(mid))
            if trial.mode == _FIT or (trial.mode == _PREEMPT and trial.targets):
                best, hi = trial, mid
            else:
                lo = mid + 1
        return best if lo <= total else None

    def _candidates(self, wl: Workload, cq: _Queue, frs: set[FlavorResource],
                    all_wls: list[Workload]) -> list[Workload]:
        policy = cq.policy
        if policy == "Never":
            return []
        me = _priority(wl)
        out = []
        for other in all_wls:
            if (_key(other) == _key(wl) or not _holds_quota(other) or other.status is None
                    or other.status.admission is None
                    or other.status.admission.cluster_queue != cq.name):
                continue
            theirs = _priority(other)
            if policy == "LowerPriority":
                allowed = me > theirs
            elif policy == "LowerOrNewerEqualPriority":
                allowed = me > theirs or (me == theirs and self._queue_timestamp(wl)
                                          < self._queue_timestamp(other))
            else:
                allowed = policy == "Any"
            if allowed and frs & set(workload_usage(other)):
                out.append(other)

        def order(a: Workload, b: Workload) -> int:
            # CandidatesOrdering: evicted first, then lower priority, then the most
            # recently reserved, then by uid.
            for x, y in ((not a.is_evicted(), not b.is_evicted()),
                         (_priority(a), _priority(b))):
                if x != y:
                    return -1 if x < y else 1
            ta, tb = self._reserved_at(a), self._reserved_at(b)
            if ta != tb:
                return -1 if ta > tb else 1
            ua, ub = a.metadata.uid or "", b.metadata.uid or ""
            return (ua > ub) - (ua < ub)

        return sorted(out, key=functools.cmp_to_key(order))

    def _reserved_at(self, wl: Workload) -> dt.datetime:
        cond = wl.find_condition(c.WORKLOAD_QUOTA_RESERVED)
        if cond is not None and cond.status == CONDITION_TRUE:
            return _time(cond.last_transition_time)
        return self._now()

    def _can_preempt(self, wl: Workload, cq: _Queue, fr: FlavorResource, val: int,
                     all_wls: list[Workload]) -> bool:
        """Whether evicting every candidate would free enough of ``fr``."""
        candidates = self._candidates(wl, cq, {fr}, all_wls)
        if not candidates:
            return False
        usage = self._usage(cq.name, all_wls, skip=[_key(x) for x in candidates])
        return val <= cq.nominal(fr) - usage.get(fr, 0)

    def _targets(self, wl: Workload, cq: _Queue, assignment: _Assignment,
                 all_wls: list[Workload]) -> list[Object]:
        """Classical preemption: remove candidates in order until the Workload fits, then
        add back, newest removal first, those it still fits without."""
        needed = assignment.usage()
        base = self._usage(cq.name, all_wls)
        frs = {fr for fr, v in needed.items() if base.get(fr, 0) + v > cq.nominal(fr)}
        candidates = self._candidates(wl, cq, frs, all_wls)

        def fits(removed: list[Workload]) -> bool:
            usage = self._usage(cq.name, all_wls, skip=[_key(x) for x in removed])
            return all(usage.get(fr, 0) + v <= cq.nominal(fr) for fr, v in needed.items())

        removed: list[Workload] = []
        for cand in candidates:
            removed.append(cand)
            if fits(removed):
                for i in range(len(removed) - 2, -1, -1):
                    trial = removed[:i] + removed[i + 1:]
                    if fits(trial):
                        removed = trial
                return [copy.deepcopy(x.to_dict()) for x in removed]
        return []

    @staticmethod
    def _replace(wls: list[Workload], wl: Workload) -> None:
        for i, x in enumerate(wls):
            if _key(x) == _key(wl):
                wls[i] = wl
                return
        wls.append(wl)
