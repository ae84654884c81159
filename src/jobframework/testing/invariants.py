"""The jobframework's guarantees, checked on a live cluster while a run goes on.

:class:`InvariantWatcher` follows a cluster through any
:class:`~jobframework.runtime.client.Client` (a real API server, or the in-memory one) and
records a :class:`Violation` as soon as it sees one of these broken:

``pods-without-admission``
    A pod of a job (not terminating, not finished) exists while none of the job's
    Workloads holds a quota reservation (``QuotaReserved=True`` and ``status.admission``).
    Immediately when the pod was *created* before the job's first admission (or before its
    first Workload), compared in cluster time with ``clock_skew`` of slack; otherwise once
    it keeps running unadmitted for ``grace`` seconds (an eviction takes that long to
    stop it).
``pods-off-flavor``
    A scheduled pod of a job (not terminating, not finished) runs on a node that lacks a
    node label of the ResourceFlavors its PodSet was admitted with (the Workload's
    ``status.admission.podSetAssignments[].flavors``, each flavor's
    ``spec.nodeLabels``): quota is charged to one flavor while the pod runs on another's
    nodes. Immediately for a pod of one of the admitted PodSets (its
    ``kueue.x-k8s.io/podset`` label) created under the admission in force; after
    ``grace`` for a pod created before it (one of an earlier admission, being stopped);
    after ``overrun_grace`` for a pod of no admitted PodSet (a Job falsely claiming the
    job's controller, which the controller stops on its next pass).
``pods-over-admission``
    A job runs more pods (neither terminating nor finished, pending ones included) than
    its admission counts: for one PodSet (pods told apart by their
    ``kueue.x-k8s.io/podset`` label) or in all, for longer than ``overrun_grace`` seconds.
    The grace is the time a controller takes to set a resized child back on its next
    pass, not a lag of the kubelet: a child's size is corrected after the fact. Time the
    controllers are marked down (:meth:`InvariantWatcher.controllers_down`) does not
    count.
``two-workloads``
    Two Workloads controlled by the same job, neither being deleted, for longer than
    ``duplicate_grace`` seconds (the reconciler itself removes a duplicate at once).
``orphaned-workload``
    A Workload whose controlling job is gone (deleted, or replaced by a new object of
    the same name) still exists ``grace`` seconds later, e.g. held by its finalizer.
``leftover-finalizer``
    ``kueue.x-k8s.io/resource-in-use`` still on a Workload ``grace`` seconds after the
    Workload finished or its job finished or went; a Kueue finalizer still on a pod
    ``grace`` seconds after it finished or started terminating.
``eviction-not-reflected``
    A Workload of a running job is evicted (``Evicted=True``, ``QuotaReserved`` going
    False after True, or ``spec.active: false``) and the job is still running ``grace``
    seconds later, without having stopped or the Workload being re-admitted meanwhile.
``terminal-state-lost``
    A job seen finished is later seen unfinished (same UID): immediately.
``not-terminal``
    A job not finished when :meth:`InvariantWatcher.wait_terminal` gives up.

Every decision about a job goes through its integration's own
:class:`~jobframework.interface.GenericJob` adapter (:class:`WatchedKind`).

How it stays right under faults. The watcher runs one
:class:`~jobframework.runtime.cache.SharedInformer` per kind (Pods, Workloads, batch/v1
Jobs, Nodes, ResourceFlavors, each watched kind): a cut watch resumes from its
resourceVersion, an expired one relists, so no change is missed, only seen late; its
backoff is capped low so a watcher
cut often stays close to the cluster. Its views of different kinds may disagree for a
while (each informer lags on its own), so:

- the immediate rules use facts that cannot be stale: timestamps written in the objects
  themselves (pod creation vs. the Workload's ``QuotaReserved`` transition time) and a
  job's own history of states, which an informer delivers in order;
- every grace-based rule, when its grace has passed in the watcher's view, is confirmed
  by reading the objects from the API server before a violation is recorded (a failed
  read only postpones the verdict to the next tick).

Both placement rules judge a pod only when its node, and every ResourceFlavor it is held
to, are known (watched); a ResourceFlavor without ``nodeLabels`` fits every node.

The created-before-admission rule needs the job's whole history, so it is applied to
jobs created after :meth:`InvariantWatcher.start` only, and not when a Workload shows
admissions the watcher did not see (an eviction count, ``Evicted`` or ``Requeued``
conditions on first sight).

Pods are mapped to jobs through controller owner references (pod -> batch Job -> JobFlow,
DaemonJob or AppWrapper ...), up to the top-most object of a watched kind; pods whose
chain reaches no watched kind, or passes through a kind the watcher does not index (say a
ReplicaSet), are not followed. A job is *followed* when it is top-level (its controller
is not of a watched kind) and matches ``label_selector``; the violations name the job,
except ``orphaned-workload`` and ``leftover-finalizer``, which name the Workload or Pod
that is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import attrs

from .. import constants as c
from ..integrations import IntegrationCallbacks
from ..interface import GenericJob
from ..podset import RESOURCE_FLAVOR_GVK
from ..runtime import errors
from ..runtime.cache import (
    Backoff,
    DeletedFinalStateUnknown,
    SharedInformer,
    strip_managed_fields,
)
from ..runtime.client import Client
from ..runtime.clock import Clock, RealClock, parse_time, rfc3339
from ..runtime.objects import (
    GVK,
    Object,
    controller_of,
    deep_copy,
    is_being_deleted,
    labels_of,
    metadata,
    name_of,
    namespace_of,
    uid_of,
)
from ..runtime.selectors import LabelSelector
from ..workload import WORKLOAD_GVK

__all__ = [
    "BATCH_JOB_GVK",
    "NODE_GVK",
    "POD_GVK",
    "RULES",
    "RULE_EVICTION_NOT_REFLECTED",
    "RULE_LEFTOVER_FINALIZER",
    "RULE_NOT_TERMINAL",
    "RULE_ORPHANED_WORKLOAD",
    "RULE_PODS_OFF_FLAVOR",
    "RULE_PODS_OVER_ADMISSION",
    "RULE_PODS_WITHOUT_ADMISSION",
    "RULE_TERMINAL_STATE_LOST",
    "RULE_TWO_WORKLOADS",
    "AdmittedPodSet",
    "InvariantWatcher",
    "Violation",
    "WatchedKind",
    "admitted_pod_sets",
    "pods_off_flavor",
    "pods_over_admission",
]

log = logging.getLogger(__name__)

POD_GVK = GVK("", "v1", "Pod")
NODE_GVK = GVK("", "v1", "Node")
#: Followed always: the Jobs between the watched kinds and their pods.
BATCH_JOB_GVK = GVK("batch", "v1", "Job")

RULE_PODS_WITHOUT_ADMISSION = "pods-without-admission"
RULE_PODS_OFF_FLAVOR = "pods-off-flavor"
RULE_PODS_OVER_ADMISSION = "pods-over-admission"
RULE_TWO_WORKLOADS = "two-workloads"
RULE_ORPHANED_WORKLOAD = "orphaned-workload"
RULE_LEFTOVER_FINALIZER = "leftover-finalizer"
RULE_EVICTION_NOT_REFLECTED = "eviction-not-reflected"
RULE_TERMINAL_STATE_LOST = "terminal-state-lost"
RULE_NOT_TERMINAL = "not-terminal"
#: Every rule, in the order of the module documentation.
RULES = (RULE_PODS_WITHOUT_ADMISSION, RULE_PODS_OFF_FLAVOR, RULE_PODS_OVER_ADMISSION,
         RULE_TWO_WORKLOADS, RULE_ORPHANED_WORKLOAD, RULE_LEFTOVER_FINALIZER,
         RULE_EVICTION_NOT_REFLECTED, RULE_TERMINAL_STATE_LOST, RULE_NOT_TERMINAL)

#: Finalizers of this prefix on a pod are Kueue's (``kueue.x-k8s.io/managed``...).
_KUEUE_FINALIZER_PREFIX = f"{c.KUEUE_GROUP}/"
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
#: Conditions a Workload only gets after an admission was taken away.
_PAST_ADMISSION_CONDITIONS = (c.WORKLOAD_EVICTED, c.WORKLOAD_PREEMPTED, c.WORKLOAD_REQUEUED)
#: Rules whose grace is a controller's correction on its next pass (controllers_down()).
_CORRECTED_RULES = frozenset({RULE_PODS_OVER_ADMISSION, RULE_PODS_OFF_FLAVOR})
#: At most this many pods are read back (and named) per confirmation.
_PODS_CONFIRMED = 10

OnViolation = Callable[["Violation"], None]


# --- public records -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class WatchedKind:
    """A top-level job kind the watcher follows."""

    gvk: GVK
    #: The integration's ``IntegrationCallbacks.new_job``: an empty adapter.
    new_job: Callable[[], GenericJob]
    #: Whether an evicted job shows it stopped by ``is_suspended()`` (False: by
    #: ``not is_active()``, for kinds that stop by deleting what they run).
    suspends_in_place: bool = True

    @classmethod
    def from_callbacks(
        cls, callbacks: IntegrationCallbacks, *, suspends_in_place: bool = True
    ) -> WatchedKind:
        """The kind an integration registers (its ``new_job`` and the adapter's GVK)."""
        new_job = callbacks.new_job
        if new_job is None:
            raise ValueError("the integration has no new_job: the watcher decides through "
                             "its GenericJob adapter")
        return cls(gvk=new_job().gvk(), new_job=new_job, suspends_in_place=suspends_in_place)

    def adapter(self, obj: Mapping[str, Any]) -> GenericJob:
        """An adapter holding a copy of ``obj``, filled as the reconciler fills it."""
        job = self.new_job()
        held = job.object()
        held.clear()
        # A copy: adapters create missing fields on read (``spec``...), and informer
        # objects are shared by the handlers of one event.
        held.update(deep_copy(dict(obj)))
        return job

    def stopped(self, job: GenericJob) -> bool:
        """Whether ``job`` runs nothing Kueue would have to take back."""
        return job.is_suspended() if self.suspends_in_place else not job.is_active()


@attrs.frozen(kw_only=True)
class Violation:
    """One broken guarantee, as seen."""

    #: One of :data:`RULES`.
    rule: str
    kind: str
    namespace: str
    name: str
    #: What was seen, naming the objects involved.
    message: str
    #: ``monotonic()`` of the watcher's clock when it was recorded.
    at: float

    def __str__(self) -> str:
        return f"{self.rule}: {self.kind} {self.namespace}/{self.name}: {self.message}"


# --- private state ------------------------------------------------------------------------


@attrs.define
class _Job:
    kind: WatchedKind
    uid: str
    namespace: str
    name: str
    #: Top-level and matching the label selector.
    tracked: bool
    #: First seen after start(): every Workload and pod of it was seen from its birth.
    history_complete: bool
    finished: bool = False
    ever_finished: bool = False
    stopped: bool = True
    #: How many times it was seen going from running to stopped.
    stops: int = 0
    deleting: bool = False
    deleted: bool = False


@attrs.define
class _History:
    """Admissions over every Workload a job ever had (kept after they are deleted)."""

    first_admission: dt.datetime | None = None
    first_admission_by: str = ""
    first_workload: dt.datetime | None = None
    first_workload_by: str = ""
    #: A Workload showed admissions the watcher did not see.
    unknown: bool = False
    #: How many times one of its Workloads gained a reservation.
    epoch: int = 0


@attrs.define
class _Workload:
    uid: str
    namespace: str
    name: str
    job_uid: str
    owner_kind: WatchedKind
    owner_name: str
    obj: Object
    reserved: bool = False
    admitted: bool = False
    #: Holds an admission the job may run under: its loss is an eviction to follow.
    armed: bool = False
    evictions: int = 0


@attrs.define
class _Eviction:
    workload_uid: str
    workload_name: str
    job_uid: str
    owner_kind: WatchedKind
    owner_name: str
    namespace: str
    ordinal: int
    seen_at: float
    cause: str
    #: ``lastTransitionTime`` of ``QuotaReserved=True`` when evicted (None: not reserved).
    reserved_at: str | None
    #: The job's ``stops`` when evicted.
    stops_before: int
    released: bool = False
    readmitted: bool = False


# --- object helpers -----------------------------------------------------------------------


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in _status(obj).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def _is_true(obj: Mapping[str, Any], type_: str) -> bool:
    cond = _condition(obj, type_)
    return cond is not None and cond.get("status") == "True"


def _reserved(obj: Mapping[str, Any]) -> bool:
    return _is_true(obj, c.WORKLOAD_QUOTA_RESERVED)


def _has_admission(obj: Mapping[str, Any]) -> bool:
    """A quota reservation pods may run under: ``QuotaReserved=True`` with an admission."""
    return _reserved(obj) and bool(_status(obj).get("admission"))


def _time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def _created(obj: Mapping[str, Any]) -> dt.datetime | None:
    return _time(metadata(obj).get("creationTimestamp"))


def _finalizers(obj: Mapping[str, Any]) -> list[str]:
    return [str(f) for f in metadata(obj).get("finalizers") or []]


def _pod_running(pod: Mapping[str, Any]) -> bool:
    """Neither terminating nor finished."""
    return (not is_being_deleted(pod)
            and _status(pod).get("phase") not in _FINISHED_PHASES)


def _kueue_pod_finalizers(pod: Mapping[str, Any]) -> list[str]:
    return [f for f in _finalizers(pod) if f.startswith(_KUEUE_FINALIZER_PREFIX)]


def _shows_past_admissions(wl: Mapping[str, Any]) -> bool:
    """Whether a Workload seen for the first time was admitted before (and evicted)."""
    status = _status(wl)
    stats = status.get("schedulingStats")
    return (any(_condition(wl, t) is not None for t in _PAST_ADMISSION_CONDITIONS)
            or bool(isinstance(stats, Mapping) and stats.get("evictions"))
            or bool(status.get("requeueState"))
            or bool(status.get("accumulatedPastExecutionTimeSeconds")))


def _ref_gvk(ref: Mapping[str, Any]) -> GVK | None:
    api_version, kind = ref.get("apiVersion"), ref.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not kind:
        return None
    return GVK.from_api_version(api_version, kind)


def _describe_workload(wl: Mapping[str, Any]) -> str:
    """``name (QuotaReserved=False/Pending, Evicted=True/Preempted)``, for messages."""
    parts = []
    for type_ in (c.WORKLOAD_QUOTA_RESERVED, c.WORKLOAD_EVICTED, c.WORKLOAD_FINISHED):
        cond = _condition(wl, type_)
        if cond is not None:
            parts.append(f"{type_}={cond.get('status')}/{cond.get('reason', '')}")
    if is_being_deleted(wl):
        parts.append("being deleted")
    return f"{name_of(wl)} ({', '.join(parts) or 'no conditions'})"


def _names(objs: Iterable[Mapping[str, Any]]) -> str:
    return ", ".join(sorted(name_of(o) for o in objs))


# --- placement: flavors and counts (pure, shared with the tests) ---------------------------


@attrs.frozen(kw_only=True)
class AdmittedPodSet:
    """One PodSet of a Workload's admission, as the placement rules read it."""

    name: str
    #: The pods admitted for it.
    count: int
    #: The ResourceFlavors assigned to its resources (one per resource, deduplicated).
    flavors: tuple[str, ...]


def admitted_pod_sets(workload: Mapping[str, Any]) -> list[AdmittedPodSet]:
    """The PodSets of ``workload``'s ``status.admission``: each assignment's ``count``
    (its PodSet's in ``spec.podSets`` when the assignment has none, as Kueue reads it) and
    flavors; empty when the Workload holds no admission."""
    admission = _status(workload).get("admission")
    if not isinstance(admission, Mapping):
        return []
    spec = workload.get("spec")
    declared = {str(ps.get("name")): ps.get("count")
                for ps in (spec.get("podSets") or [] if isinstance(spec, Mapping) else [])
                if isinstance(ps, Mapping)}
    out = []
    for psa in admission.get("podSetAssignments") or []:
        if not isinstance(psa, Mapping):
            continue
        name = str(psa.get("name") or "")
        count = psa.get("count")
        if not isinstance(count, int) or isinstance(count, bool):
            count = declared.get(name)
        flavors = psa.get("flavors")
        out.append(AdmittedPodSet(
            name=name, count=count if isinstance(count, int) else 1,
            flavors=tuple(sorted({str(f) for f in (flavors.values() if isinstance(
                flavors, Mapping) else []) if f}))))
    return out


def _flavor_fit(node: Mapping[str, str], pod_set: AdmittedPodSet,
                flavors: Mapping[str, Mapping[str, str]]) -> str | None:
    """Why a node with labels ``node`` is not one of ``pod_set``'s flavors: ``""`` when
    it is, None when a flavor is not known (nothing can be said)."""
    if not pod_set.flavors:
        return None
    for flavor in pod_set.flavors:
        wanted = flavors.get(flavor)
        if wanted is None:
            return None
        for key, value in sorted(wanted.items()):
            if node.get(key) != value:
                have = f"{key}={node[key]}" if key in node else f"no {key} label"
                return (f"PodSet {pod_set.name} was admitted on flavor {flavor} "
                        f"({key}={value}), the node has {have}")
    return ""


def pods_off_flavor(
    pods: Iterable[Mapping[str, Any]], admitted: Sequence[AdmittedPodSet],
    nodes: Mapping[str, Mapping[str, str]], flavors: Mapping[str, Mapping[str, str]],
) -> list[tuple[Mapping[str, Any], str]]:
    """The scheduled ``pods`` (one job's, running) on a node that is not of the flavors
    ``admitted`` for their PodSet, each with why.

    ``nodes`` maps node names to their labels, ``flavors`` ResourceFlavor names to their
    ``spec.nodeLabels``. A pod's PodSet is its ``kueue.x-k8s.io/podset`` label; a pod
    without one, or naming a PodSet the admission lacks, must be on the flavors of some
    admitted PodSet. A pod not scheduled, on a node not in ``nodes``, or held to a flavor
    not in ``flavors`` is not judged.
    """
    by_name = {ps.name: ps for ps in admitted}
    out: list[tuple[Mapping[str, Any], str]] = []
    for pod in pods:
        spec = pod.get("spec")
        node = spec.get("nodeName") if isinstance(spec, Mapping) else None
        if not isinstance(node, str) or not node or node not in nodes:
            continue
        own = by_name.get(labels_of(pod).get(c.PODSET_LABEL, ""))
        candidates = [own] if own is not None else list(admitted)
        fits = [_flavor_fit(nodes[node], ps, flavors) for ps in candidates]
        if not fits or any(f is None or f == "" for f in fits):
            continue
        out.append((pod, f"pod {name_of(pod)} runs on node {node}: {fits[0]}"))
    return out


def pods_over_admission(pods: Iterable[Mapping[str, Any]],
                        admitted: Sequence[AdmittedPodSet]) -> list[str]:
    """How one job's ``pods`` (neither finished nor terminating) exceed ``admitted``: per
    PodSet (pods by their ``kueue.x-k8s.io/podset`` label) and in all; empty when they
    do not (or nothing is admitted)."""
    if not admitted:
        return []
    pods = list(pods)
    per_set: dict[str, int] = {}
    for pod in pods:
        label = labels_of(pod).get(c.PODSET_LABEL, "")
        per_set[label] = per_set.get(label, 0) + 1
    out = []
    for ps in admitted:
        n = per_set.get(ps.name, 0)
        if n > ps.count:
            out.append(f"{n} pods of PodSet {ps.name} where {ps.count} "
                       f"{'was' if ps.count == 1 else 'were'} admitted")
    total = sum(ps.count for ps in admitted)
    if len(pods) > total:
        out.append(f"{len(pods)} pods in all where {total} "
                   f"{'was' if total == 1 else 'were'} admitted")
    return out


# --- the watcher ------------------------------------------------------------------------------


class InvariantWatcher:
    """Watches a cluster and records :class:`Violation` s as they happen (module docs).

    Args:
        client: what to list, watch and confirm with.
        kinds: the job kinds to follow (one per integration).
        namespace: follow this namespace only (None: all).
        grace: seconds a grace-based rule waits before it is confirmed and recorded.
        label_selector: follow only the top-level jobs matching it; their Workloads,
            intermediate Jobs and pods are followed whatever their labels.
        tick: seconds between evaluations of the grace-based rules (default: 1 s, or a
            quarter of ``grace`` when shorter).
        duplicate_grace: seconds two Workloads of one job may coexist.
        overrun_grace: seconds a job may run more pods than admitted, or pods of no
            admitted PodSet off its flavor (default: ``grace``): how long its controller
            may take to set a resized child back, or stop a Job claiming it.
        clock_skew: seconds of slack between the timestamps of different writers
            (object times have second granularity).
        clock: the watcher's timers (default: the system clock).
        sync_timeout: seconds :meth:`start` waits for the first lists (real time).
    """

    def __init__(
        self,
        client: Client,
        kinds: Sequence[WatchedKind],
        *,
        namespace: str | None = None,
        grace: float = 20.0,
        label_selector: str | None = None,
        tick: float | None = None,
        duplicate_grace: float = 2.0,
        overrun_grace: float | None = None,
        clock_skew: float = 1.0,
        clock: Clock | None = None,
        sync_timeout: float = 60.0,
    ) -> None:
        if not kinds:
            raise ValueError("no kind to watch")
        self._client = client
        self._kinds: dict[GVK, WatchedKind] = {}
        for kind in kinds:
            self._kinds.setdefault(kind.gvk, kind)
        self._namespace = namespace
        self._grace = grace
        self._selector = LabelSelector.parse(label_selector) if label_selector else None
        self._tick_every = tick if tick is not None else max(0.01, min(1.0, grace / 4))
        self._duplicate_grace = duplicate_grace
        self._overrun_grace = grace if overrun_grace is None else overrun_grace
        self._skew = clock_skew
        self._clock: Clock = clock or RealClock()
        self._sync_timeout = sync_timeout

        #: Every violation recorded, in the order seen (each distinct problem once).
        self.violations: list[Violation] = []
        self._callbacks: list[OnViolation] = []
        self._flagged: set[tuple[str, ...]] = set()

        self._informers: list[SharedInformer] = []
        self._ticker: asyncio.Task[None] | None = None
        self._synced = False
        self._watch_errors = 0

        #: uid -> controller reference (None: top of its chain) of every Job-like object.
        self._owners: dict[str, dict[str, Any] | None] = {}
        self._jobs: dict[str, _Job] = {}
        self._history: dict[str, _History] = {}
        self._workloads: dict[str, _Workload] = {}
        #: Workload uid -> job uid, of every Workload ever seen.
        self._workload_owner: dict[str, str] = {}
        self._pods: dict[str, Object] = {}
        #: Pods seen running at least once.
        self._pods_ran: set[str] = set()
        self._pods_counted: set[str] = set()
        #: Open evictions by Workload uid.
        self._evictions: dict[str, _Eviction] = {}
        #: Grace timers: key -> when the condition was first seen holding.
        self._since: dict[tuple[str, ...], float] = {}
        #: Planned API server outages in progress (see :meth:`outage`).
        self._outages = 0
        #: Marked times the correcting controllers are down (see :meth:`controllers_down`).
        self._down = 0
        self._down_since = 0.0
        self._counts = {"evictions_seen": 0, "evictions_reflected": 0,
                        "evictions_superseded": 0, "pods_placement_checked": 0,
                        "overruns_seen": 0, "overruns_corrected": 0,
                        "overrun_longest_ms": 0}
        #: Pods whose node was judged against an admitted flavor at least once.
        self._pods_placed: set[str] = set()
        #: Where the placement rules look nodes' and flavors' labels up.
        self._nodes: SharedInformer | None = None
        self._flavors: SharedInformer | None = None

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start the informers, wait for their first lists, then start the timer.

        Raises ``TimeoutError`` naming the kinds not listed within ``sync_timeout``.
        """
        if self._informers:
            return
        gvks = [POD_GVK, WORKLOAD_GVK, BATCH_JOB_GVK, *self._kinds]
        for gvk in dict.fromkeys(gvks):
            informer = SharedInformer(
                self._client, gvk, namespace=self._namespace, transform=strip_managed_fields,
                clock=self._clock, on_watch_error=self._on_watch_error,
                # Capped low: a watcher whose watches are cut often must not fall behind.
                backoff=Backoff(0.2, 2.0, clock=self._clock))
            on_add, on_update, on_delete = self._handlers(gvk)
            informer.add_event_handler(on_add, on_update, on_delete)
            self._informers.append(informer)
        # Cluster-scoped, read on the timer only (no handlers).
        for gvk in (NODE_GVK, RESOURCE_FLAVOR_GVK):
            informer = SharedInformer(
                self._client, gvk, namespace=None, transform=strip_managed_fields,
                clock=self._clock, on_watch_error=self._on_watch_error,
                backoff=Backoff(0.2, 2.0, clock=self._clock))
            self._informers.append(informer)
            if gvk == NODE_GVK:
                self._nodes = informer
            else:
                self._flavors = informer
        for informer in self._informers:
            informer.start()
        try:
            await asyncio.wait_for(
                asyncio.gather(*(i.wait_for_sync() for i in self._informers)),
                self._sync_timeout)
        except TimeoutError:
            late = [i.gvk.kind for i in self._informers if not i.has_synced()]
            await self.stop()
            raise TimeoutError(f"the watcher could not list {', '.join(late)} within "
                               f"{self._sync_timeout:.0f}s") from None
        self._synced = True
        self._ticker = asyncio.create_task(self._tick_loop(), name="invariant watcher")

    async def stop(self) -> None:
        """Stop the timer and the informers (the state and violations stay readable)."""
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
        for informer in self._informers:
            await informer.stop()

    async def __aenter__(self) -> InvariantWatcher:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def on_violation(self, callback: Callable[[Violation], None]) -> None:
        """Call ``callback`` with each violation when it is recorded (e.g. to print it)."""
        self._callbacks.append(callback)

    @property
    def stats(self) -> dict[str, int]:
        """What was followed: jobs, Workloads and pods seen, evictions seen and reflected
        (the job stopped) or superseded (re-admitted, or the job went first), pods whose
        node was judged against their admitted flavor, times a job ran more pods than
        admitted and how many of those ended within ``overrun_grace`` (and the longest,
        in milliseconds), terminal jobs, violations, and the watcher's own watch errors
        and relists."""
        tracked = [j for j in self._jobs.values() if j.tracked]
        return {
            "jobs_seen": len(tracked),
            "workloads_seen": sum(1 for job_uid in self._workload_owner.values()
                                  if self._in_scope(job_uid)),
            "pods_seen": len(self._pods_counted),
            **self._counts,
            "terminal_jobs": sum(1 for j in tracked if j.ever_finished),
            "violations": len(self.violations),
            "watch_errors": self._watch_errors,
            "relists": sum(max(0, i.reflector.lists - 1) for i in self._informers),
        }

    # -- end of run ----------------------------------------------------------------------

    # The harness passes the timeout positionally: a deadline, not an asyncio.timeout scope.
    async def wait_terminal(self, timeout: float) -> list[tuple[str, str, str]]:  # noqa: ASYNC109
        """Wait until every followed job is finished (by its adapter's ``finished()``),
        deleted or being deleted; return ``(kind, namespace, name)`` of those still
        running after ``timeout`` seconds, each also recorded as ``not-terminal``.

        Jobs the API server lists now but the informers have not delivered yet are
        waited for too; the ones left at the end are read back before being reported.
        """
        deadline = self._clock.monotonic() + timeout
        expected: dict[str, tuple[WatchedKind, str, str]] = {}
        with contextlib.suppress(Exception):
            for uid, (kind, obj) in (await self._live_jobs()).items():
                if self._live_in_scope(obj):
                    expected[uid] = (kind, namespace_of(obj), name_of(obj))
        while True:
            pending = self._pending(expected)
            remaining = deadline - self._clock.monotonic()
            if not pending or remaining <= 0:
                break
            await self._clock.sleep(min(self._tick_every, remaining))
        out: list[tuple[str, str, str]] = []
        for uid, (kind, ns, name) in sorted(pending.items(), key=lambda x: x[1][1:]):
            state = await self._live_state(kind, ns, name, uid)
            if state is None:
                continue
            out.append((kind.gvk.kind, ns, name))
            self._flag((RULE_NOT_TERMINAL, uid), kind.gvk.kind, ns, name,
                       f"not finished {timeout:.0f}s into the wait ({state})")
        return out

    async def final_check(self, *, settle: float = 30.0) -> list[Violation]:
        """After the run: no Workload outlives its job and no Kueue finalizer is left on a
        finished or deleted Workload or pod. Waits up to ``settle`` seconds for garbage
        collection and finalizer removal (reading the API server), then records what is
        left; returns every violation of the run."""
        deadline = self._clock.monotonic() + settle
        found: dict[tuple[str, ...], tuple[str, str, str, str]] | None = None
        while True:
            try:
                found = await self._leftovers_live()
            except Exception as err:
                log.debug("final check: listing failed (%s), retrying", err)
            remaining = deadline - self._clock.monotonic()
            if found == {} or remaining <= 0:
                break
            await self._clock.sleep(min(self._tick_every, remaining))
        if found is None:  # the API server never answered: judge by what was watched
            found = self._leftovers(
                [w.obj for w in self._workloads.values()], list(self._pods.values()),
                {uid: (j.kind, self._cached_job(j)) for uid, j in self._jobs.items()
                 if not j.deleted})
        for key, (kind, ns, name, message) in found.items():
            self._flag(key, kind, ns, name, f"{message} ({settle:.0f}s after the run)")
        return list(self.violations)

    # -- event handlers --------------------------------------------------------------------

    def _handlers(
        self, gvk: GVK
    ) -> tuple[Callable[[Object], None], Callable[[Object, Object], None],
               Callable[[Any], None]]:
        on_add: Callable[[Object], None]
        on_delete: Callable[[Any], None]
        if gvk == POD_GVK:
            on_add, on_delete = self._on_pod, self._on_pod_gone
        elif gvk == WORKLOAD_GVK:
            on_add, on_delete = self._on_workload, self._on_workload_gone
        else:
            kind = self._kinds.get(gvk)

            def on_add(obj: Object) -> None:
                self._on_job(kind, obj)

            def on_delete(gone: Any) -> None:
                self._on_job_gone(gone)

        def on_update(old: Object, new: Object) -> None:
            del old
            on_add(new)

        return on_add, on_update, on_delete

    def _on_watch_error(self, err: BaseException) -> None:
        self._watch_errors += 1
        log.debug("invariant watcher: watch error (retried): %s: %s", type(err).__name__, err)

    def _on_job(self, kind: WatchedKind | None, obj: Object) -> None:
        uid = uid_of(obj)
        ref = controller_of(obj)
        self._owners[uid] = dict(ref) if ref is not None else None
        if kind is None:
            return  # an intermediate Job: only its owner matters
        parent = _ref_gvk(ref) if ref is not None else None
        tracked = parent not in self._kinds and (
            self._selector is None or self._selector.matches(labels_of(obj)))
        judged = self._judge(kind, obj)
        job = self._jobs.get(uid)
        if job is None:
            job = self._jobs[uid] = _Job(
                kind=kind, uid=uid, namespace=namespace_of(obj), name=name_of(obj),
                tracked=tracked, history_complete=self._synced,
                stopped=judged[1] if judged is not None else True)
        job.tracked = tracked
        job.deleting = is_being_deleted(obj)
        if judged is not None:
            finished, stopped = judged
            # A job being deleted may leave its terminal state on the way out (an
            # AppWrapper goes Succeeded -> Terminating while its components are removed).
            if job.ever_finished and not finished and job.tracked and not job.deleting:
                self._flag((RULE_TERMINAL_STATE_LOST, uid), kind.gvk.kind, job.namespace,
                           job.name, f"seen finished, now seen unfinished "
                           f"(resourceVersion {metadata(obj).get('resourceVersion')})")
            job.ever_finished = job.ever_finished or finished
            if stopped and not job.stopped:
                job.stops += 1
            job.finished, job.stopped = finished, stopped
        self._resolve_evictions(uid)

    def _on_job_gone(self, gone: Any) -> None:
        obj = gone.obj if isinstance(gone, DeletedFinalStateUnknown) else gone
        uid = uid_of(obj)
        self._owners.pop(uid, None)
        job = self._jobs.get(uid)
        if job is not None:
            job.deleted = True
            self._resolve_evictions(uid)

    def _on_workload(self, obj: Object) -> None:
        uid = uid_of(obj)
        ref = controller_of(obj)
        owner_gvk = _ref_gvk(ref) if ref is not None else None
        if ref is None or owner_gvk not in self._kinds:
            self._workloads.pop(uid, None)
            return
        job_uid = str(ref.get("uid") or "")
        hist = self._history.setdefault(job_uid, _History())
        wl = self._workloads.get(uid)
        first = wl is None
        if wl is None:
            wl = self._workloads[uid] = _Workload(
                uid=uid, namespace=namespace_of(obj), name=name_of(obj), job_uid=job_uid,
                owner_kind=self._kinds[owner_gvk], owner_name=str(ref.get("name") or ""),
                obj=obj)
            self._workload_owner[uid] = job_uid
            created = _created(obj)
            if created is not None and (hist.first_workload is None
                                        or created < hist.first_workload):
                hist.first_workload, hist.first_workload_by = created, wl.name
            if _shows_past_admissions(obj):
                hist.unknown = True
        wl.obj = obj
        admitted = _has_admission(obj) and not is_being_deleted(obj)
        if admitted:
            cond = _condition(obj, c.WORKLOAD_QUOTA_RESERVED) or {}
            since = _time(cond.get("lastTransitionTime"))
            if since is None:
                hist.unknown = True
            elif hist.first_admission is None or since < hist.first_admission:
                hist.first_admission, hist.first_admission_by = since, wl.name
            if not wl.admitted:
                hist.epoch += 1
        wl.admitted = admitted
        self._follow_eviction(wl, obj, first, self._in_scope(job_uid))
        for pod_uid, pod in list(self._pods.items()):
            if self._job_of(pod) == job_uid:
                self._check_created(pod_uid, pod, job_uid)
        self._resolve_evictions(job_uid)

    def _on_workload_gone(self, gone: Any) -> None:
        obj = gone.obj if isinstance(gone, DeletedFinalStateUnknown) else gone
        wl = self._workloads.pop(uid_of(obj), None)
        if wl is not None:
            self._resolve_evictions(wl.job_uid)

    def _on_pod(self, pod: Object) -> None:
        uid = uid_of(pod)
        self._pods[uid] = pod
        if _pod_running(pod):
            self._pods_ran.add(uid)
        job_uid = self._job_of(pod)
        if job_uid is not None:
            job = self._jobs.get(job_uid)
            if job is not None and job.tracked:
                self._pods_counted.add(uid)
            self._check_created(uid, pod, job_uid)

    def _on_pod_gone(self, gone: Any) -> None:
        obj = gone.obj if isinstance(gone, DeletedFinalStateUnknown) else gone
        uid = uid_of(obj)
        self._pods.pop(uid, None)
        self._pods_ran.discard(uid)

    # -- shared decisions -------------------------------------------------------------------

    def _judge(self, kind: WatchedKind, obj: Mapping[str, Any]) -> tuple[bool, bool] | None:
        """``(finished, stopped)`` by the kind's adapter; None when it cannot tell."""
        try:
            job = kind.adapter(obj)
            return job.finished().finished, kind.stopped(job)
        except Exception:
            log.exception("invariant watcher: the %s adapter failed on %s/%s", kind.gvk.kind,
                          namespace_of(obj), name_of(obj))
            return None

    def _in_scope(self, job_uid: str) -> bool:
        job = self._jobs.get(job_uid)
        if job is not None:
            return job.tracked
        # An owner never seen: nobody can say it is out of a selector's scope.
        return self._selector is None

    def _live_in_scope(self, obj: Mapping[str, Any]) -> bool:
        ref = controller_of(obj)
        if ref is not None and _ref_gvk(ref) in self._kinds:
            return False
        return self._selector is None or self._selector.matches(labels_of(obj))

    def _job_of(self, pod: Mapping[str, Any]) -> str | None:
        """The uid of the top-most watched-kind object over ``pod``'s controller chain."""
        found: str | None = None
        ref = controller_of(pod)
        for _ in range(c.MANAGED_OWNERS_CHAIN_LIMIT + 1):
            if ref is None:
                break
            uid = str(ref.get("uid") or "")
            if _ref_gvk(ref) in self._kinds:
                found = uid
            if uid not in self._owners:
                break  # not indexed (yet): a watched kind is taken as the top
            ref = self._owners[uid]
        return found

    def _job_admitted(self, job_uid: str) -> bool:
        return any(w.admitted for w in self._workloads.values() if w.job_uid == job_uid)

    def _job_ident(self, job_uid: str) -> tuple[str, str, str]:
        job = self._jobs.get(job_uid)
        if job is not None:
            return job.kind.gvk.kind, job.namespace, job.name
        for wl in self._workloads.values():
            if wl.job_uid == job_uid:
                return wl.owner_kind.gvk.kind, wl.namespace, wl.owner_name
        return "", "", job_uid

    def _flag(self, key: tuple[str, ...], kind: str, namespace: str, name: str,
              message: str) -> None:
        """Record a violation once per ``key`` (its first item is the rule)."""
        if key in self._flagged:
            return
        self._flagged.add(key)
        violation = Violation(rule=key[0], kind=kind, namespace=namespace, name=name,
                              message=message, at=self._clock.monotonic())
        self.violations.append(violation)
        log.warning("invariant violated: %s", violation)
        for callback in list(self._callbacks):
            try:
                callback(violation)
            except Exception:
                log.exception("invariant watcher: on_violation callback failed")

    # -- pods created before admission (immediate) --------------------------------------------

    def _check_created(self, pod_uid: str, pod: Mapping[str, Any], job_uid: str) -> None:
        if pod_uid not in self._pods_ran:
            return
        job = self._jobs.get(job_uid)
        hist = self._history.get(job_uid)
        if (job is None or not job.tracked or not job.history_complete or hist is None
                or hist.unknown):
            return
        created = _created(pod)
        if created is None:
            return
        if hist.first_admission is not None:
            lead = (hist.first_admission - created).total_seconds()
            what = (f"before its Workload {hist.first_admission_by} was first admitted "
                    f"(at {rfc3339(hist.first_admission)})")
        elif hist.first_workload is not None:
            lead = (hist.first_workload - created).total_seconds()
            what = (f"before the job had a Workload (the first, {hist.first_workload_by}, "
                    f"was created at {rfc3339(hist.first_workload)})")
        else:
            return  # no Workload seen yet: its arrival checks again
        if lead > self._skew:
            # Keyed like the grace rule's first unadmitted period: one problem, one report.
            self._flag((RULE_PODS_WITHOUT_ADMISSION, job_uid, "0"), job.kind.gvk.kind,
                       job.namespace, job.name,
                       f"pod {name_of(pod)} was created at {rfc3339(created)}, {what}")

    # -- evictions ------------------------------------------------------------------------------

    def _follow_eviction(self, wl: _Workload, obj: Object, first: bool, followed: bool) -> None:
        """Keep ``wl``'s admission state; open an eviction when a job followed loses an
        admission it could run under."""
        reserved = _reserved(obj)
        has_admission = _has_admission(obj)
        evicted = _condition(obj, c.WORKLOAD_EVICTED)
        is_evicted = evicted is not None and evicted.get("status") == "True"
        inactive = (obj.get("spec") or {}).get("active") is False
        qr = _condition(obj, c.WORKLOAD_QUOTA_RESERVED) or {}
        reserved_at = str(qr.get("lastTransitionTime") or "") if reserved else None
        rec = self._evictions.get(wl.uid)
        if rec is not None:
            if not reserved:
                rec.released = True
            elif (has_admission and not is_evicted and not inactive
                  and (rec.released or reserved_at != rec.reserved_at)):
                rec.readmitted = True
        running_allowed = has_admission and not is_evicted and not inactive
        if (running_allowed and (rec is None or rec.readmitted)) or (first and has_admission):
            # A (new) admission the job may run under; on first sight, mid-eviction too.
            wl.armed = True
        cause = ""
        if is_evicted and evicted is not None:
            cause = f"Evicted=True/{evicted.get('reason', '')}: {evicted.get('message', '')}"
        elif inactive:
            cause = "spec.active is false"
        elif wl.reserved and not reserved:
            cause = f"QuotaReserved went False/{qr.get('reason', '')}: {qr.get('message', '')}"
        wl.reserved = reserved
        if (not cause or not wl.armed or not followed or _is_true(obj, c.WORKLOAD_FINISHED)
                or is_being_deleted(obj)):
            return
        if rec is not None:
            self._close_eviction(rec, reflected=False)
        wl.armed = False
        wl.evictions += 1
        job = self._jobs.get(wl.job_uid)
        self._evictions[wl.uid] = _Eviction(
            workload_uid=wl.uid, workload_name=wl.name, job_uid=wl.job_uid,
            owner_kind=wl.owner_kind, owner_name=wl.owner_name, namespace=wl.namespace,
            ordinal=wl.evictions, seen_at=self._clock.monotonic(), cause=cause,
            reserved_at=reserved_at, stops_before=job.stops if job is not None else 0)
        self._counts["evictions_seen"] += 1

    def _close_eviction(self, rec: _Eviction, *, reflected: bool) -> None:
        if self._evictions.get(rec.workload_uid) is rec:
            del self._evictions[rec.workload_uid]
        self._counts["evictions_reflected" if reflected else "evictions_superseded"] += 1

    def _resolve_evictions(self, job_uid: str) -> None:
        """Close the job's open evictions it has reacted to (or that no longer matter)."""
        job = self._jobs.get(job_uid)
        if job is None:
            return  # not seen yet: its first event resolves
        for rec in [r for r in self._evictions.values() if r.job_uid == job_uid]:
            if job.deleted or job.deleting:
                self._close_eviction(rec, reflected=False)
            elif job.finished or job.stopped or job.stops > rec.stops_before:
                self._close_eviction(rec, reflected=True)
            elif rec.readmitted and self._clock.monotonic() - rec.seen_at >= self._grace:
                # Re-admitted: the stop may not have been seen, the job may run again.
                self._close_eviction(rec, reflected=False)

    @contextlib.asynccontextmanager
    async def outage(self) -> AsyncIterator[None]:
        """Mark a planned outage of the API server (a restart) for the block's duration.

        While it lasts the grace-based rules are not judged, and when it ends their grace
        starts again from its end: every controller, the garbage collector and Kueue
        included, gets its whole ``grace`` to recover (retries that backed off during the
        outage, informers relisting). The immediate rules go on being checked.
        """
        self._outages += 1
        try:
            yield
        finally:
            self._outages -= 1
            end = self._clock.monotonic()
            for key, since in self._since.items():
                self._since[key] = max(since, end)
            for rec in self._evictions.values():
                rec.seen_at = max(rec.seen_at, end)

    @contextlib.asynccontextmanager
    async def controllers_down(self) -> AsyncIterator[None]:
        """Mark a time the controllers that correct children after the fact are not
        running (their manager was killed, until it serves again).

        ``overrun_grace`` is the time those controllers take to act on their next pass,
        and while they are down there is none: the rules that wait it
        (``pods-over-admission``, and ``pods-off-flavor`` for pods of no admitted PodSet)
        do not judge meanwhile, and their grace resumes when the block ends, less the time
        down. Blocks may overlap (a manager killed again while it starts).
        """
        if self._down == 0:
            self._down_since = self._clock.monotonic()
        self._down += 1
        try:
            yield
        finally:
            self._down -= 1
            if self._down == 0:
                start, end = self._down_since, self._clock.monotonic()
                for key, since in self._since.items():
                    if key[0] in _CORRECTED_RULES:
                        self._since[key] = since + (end - max(since, start))

    # -- the timer -------------------------------------------------------------------------------

    async def _tick_loop(self) -> None:
        while True:
            await self._clock.sleep(self._tick_every)
            try:
                await self._tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("invariant watcher: evaluation failed")

    async def _tick(self) -> None:
        if self._outages:
            return
        now = self._clock.monotonic()
        holding: set[tuple[str, ...]] = set()

        def due(key: tuple[str, ...], wait: float) -> float | None:
            """How long ``key`` has held when that is at least ``wait``, else None."""
            holding.add(key)
            held = now - self._since.setdefault(key, now)
            if self._down and wait > 0 and key[0] in _CORRECTED_RULES:
                return None  # no controller pass while they are down
            return held if held >= wait else None

        await self._tick_pods(now, due)
        await self._tick_placement(due)
        await self._tick_duplicates(due)
        await self._tick_workloads(due)
        await self._tick_pod_finalizers(due)
        await self._tick_evictions(now)
        for key in [k for k in self._since if k not in holding]:
            since = self._since.pop(key)
            if key[0] == RULE_PODS_OVER_ADMISSION:
                held = now - since
                if held < self._overrun_grace:
                    self._counts["overruns_corrected"] += 1
                self._counts["overrun_longest_ms"] = max(
                    self._counts["overrun_longest_ms"], int(held * 1000))

    async def _tick_pods(
        self, now: float, due: Callable[[tuple[str, ...], float], float | None]
    ) -> None:
        expired: dict[str, list[Object]] = {}
        for uid, pod in list(self._pods.items()):
            job_uid = self._job_of(pod)
            job = self._jobs.get(job_uid) if job_uid is not None else None
            if job_uid is None or job is None or not job.tracked:
                continue
            self._pods_counted.add(uid)
            # The chain may only now be known: the immediate rule is re-run here.
            self._check_created(uid, pod, job_uid)
            if not _pod_running(pod) or job.deleted or job.deleting:
                continue
            if self._job_admitted(job_uid):
                continue
            if due((RULE_PODS_WITHOUT_ADMISSION, uid), self._grace) is not None:
                expired.setdefault(job_uid, []).append(pod)
        for job_uid, pods in expired.items():
            hist = self._history.get(job_uid) or _History()
            key = (RULE_PODS_WITHOUT_ADMISSION, job_uid, str(hist.epoch))
            if key in self._flagged:
                continue
            job = self._jobs[job_uid]
            held = max(now - self._since.get((RULE_PODS_WITHOUT_ADMISSION, uid_of(p)), now)
                       for p in pods)
            message = await self._confirm_unadmitted(job, pods, held)
            if message is not None:
                self._flag(key, job.kind.gvk.kind, job.namespace, job.name, message)

    # -- placement: pods off their flavor, more pods than admitted ---------------------------

    def _labels_by_name(self, informer: SharedInformer | None,
                        field: Callable[[Mapping[str, Any]], Any]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for obj in informer.indexer.list() if informer is not None else []:
            value = field(obj)
            out[name_of(obj)] = ({str(k): str(v) for k, v in value.items()}
                                 if isinstance(value, Mapping) else {})
        return out

    def _known_nodes(self) -> dict[str, dict[str, str]]:
        return self._labels_by_name(self._nodes, labels_of)

    def _known_flavors(self) -> dict[str, dict[str, str]]:
        return self._labels_by_name(
            self._flavors, lambda rf: (rf.get("spec") or {}).get("nodeLabels"))

    async def _tick_placement(
        self, due: Callable[[tuple[str, ...], float], float | None]
    ) -> None:
        running: dict[str, list[Object]] = {}
        for pod in list(self._pods.values()):
            if not _pod_running(pod):
                continue
            job_uid = self._job_of(pod)
            job = self._jobs.get(job_uid) if job_uid is not None else None
            if job is None or not job.tracked or job.deleted or job.deleting:
                continue
            running.setdefault(job.uid, []).append(pod)
        if not running:
            return
        admitting: dict[str, list[_Workload]] = {}
        for wl in list(self._workloads.values()):
            if wl.admitted and wl.job_uid in running:
                admitting.setdefault(wl.job_uid, []).append(wl)
        nodes, flavors = self._known_nodes(), self._known_flavors()
        for job_uid, pods in running.items():
            wls = admitting.get(job_uid)
            if not wls:
                continue  # pods without admission: that rule's business
            job = self._jobs[job_uid]
            epoch = str((self._history.get(job_uid) or _History()).epoch)
            admitted = [ps for wl in wls for ps in admitted_pod_sets(wl.obj)]
            for pod in pods:
                if (pod.get("spec") or {}).get("nodeName") in nodes:
                    self._pods_placed.add(uid_of(pod))
            self._counts["pods_placement_checked"] = len(self._pods_placed)
            reserved = [_time((_condition(wl.obj, c.WORKLOAD_QUOTA_RESERVED) or {})
                              .get("lastTransitionTime")) for wl in wls]
            since = max((t for t in reserved if t is not None), default=None)
            names = {ps.name for ps in admitted}
            for off, _ in pods_off_flavor(pods, admitted, nodes, flavors):
                created = _created(off)
                # Judged at once: a pod made from the admission in force (its PodSet's
                # label). A pod of an earlier admission is the eviction's to stop (its
                # grace); a pod of no admitted PodSet (a Job that claims the job's
                # controller) is the controller's to stop on its next pass.
                wait = 0.0
                if since is not None and created is not None and \
                        (since - created).total_seconds() > self._skew:
                    wait = self._grace
                elif labels_of(off).get(c.PODSET_LABEL) not in names:
                    wait = self._overrun_grace
                held = due((RULE_PODS_OFF_FLAVOR, uid_of(off)), wait)
                key = (RULE_PODS_OFF_FLAVOR, job_uid, epoch)
                if held is None or key in self._flagged:
                    continue
                message = await self._confirm_off_flavor(job, off)
                if message is not None:
                    self._flag(key, job.kind.gvk.kind, job.namespace, job.name, message)
            if pods_over_admission(pods, admitted):
                timer = (RULE_PODS_OVER_ADMISSION, job_uid)
                if timer not in self._since:
                    self._counts["overruns_seen"] += 1
                held = due(timer, self._overrun_grace)
                key = (RULE_PODS_OVER_ADMISSION, job_uid, epoch)
                if held is None or key in self._flagged:
                    continue
                message = await self._confirm_over_admission(job, held)
                if message is not None:
                    self._flag(key, job.kind.gvk.kind, job.namespace, job.name, message)

    async def _admitted_live(self, job: _Job) -> list[AdmittedPodSet] | None:
        """The admitted PodSets of ``job``'s live Workloads; None when the job is gone or
        being deleted."""
        live = await self._get(job.kind.gvk, job.namespace, job.name)
        if live is None or uid_of(live) != job.uid or is_being_deleted(live):
            return None
        return [ps for wl in await self._owned_workloads(job.namespace, job.uid)
                if _has_admission(wl) and not is_being_deleted(wl)
                for ps in admitted_pod_sets(wl)]

    async def _confirm_off_flavor(self, job: _Job, pod: Mapping[str, Any]) -> str | None:
        try:
            live = await self._get(POD_GVK, namespace_of(pod), name_of(pod))
            if live is None or uid_of(live) != uid_of(pod) or not _pod_running(live):
                return None
            node_name = str((live.get("spec") or {}).get("nodeName") or "")
            node = await self._get(NODE_GVK, "", node_name) if node_name else None
            admitted = await self._admitted_live(job)
            if node is None or not admitted:
                return None
            flavors: dict[str, dict[str, str]] = {}
            for name in {f for ps in admitted for f in ps.flavors}:
                rf = await self._get(RESOURCE_FLAVOR_GVK, "", name)
                if rf is not None:
                    labels = (rf.get("spec") or {}).get("nodeLabels")
                    flavors[name] = dict(labels) if isinstance(labels, Mapping) else {}
        except Exception as err:
            log.debug("invariant watcher: confirming pod %s: %s", name_of(pod), err)
            return None
        off = pods_off_flavor([live], admitted, {node_name: labels_of(node)}, flavors)
        return off[0][1] if off else None

    async def _confirm_over_admission(self, job: _Job, held: float) -> str | None:
        try:
            admitted = await self._admitted_live(job)
            if not admitted:
                return None
            pods = [p for p in (await self._client.list(
                        POD_GVK, namespace=job.namespace or None)).items
                    if _pod_running(p) and self._job_of(p) == job.uid]
        except Exception as err:
            log.debug("invariant watcher: confirming %s/%s: %s", job.namespace, job.name, err)
            return None
        excess = pods_over_admission(pods, admitted)
        if not excess:
            return None
        return (f"{'; '.join(excess)}, for {held:.1f}s (pods {_names(pods)})")

    async def _confirm_unadmitted(
        self, job: _Job, pods: Sequence[Object], held: float
    ) -> str | None:
        try:
            live = await self._get(job.kind.gvk, job.namespace, job.name)
            if live is None or uid_of(live) != job.uid or is_being_deleted(live):
                return None
            wls = await self._owned_workloads(job.namespace, job.uid)
            if any(_has_admission(w) and not is_being_deleted(w) for w in wls):
                return None
            running: list[Object] = []
            for pod in pods[:_PODS_CONFIRMED]:
                found = await self._get(POD_GVK, namespace_of(pod), name_of(pod))
                if found is not None and uid_of(found) == uid_of(pod) and _pod_running(found):
                    running.append(found)
        except Exception as err:
            log.debug("invariant watcher: confirming %s/%s: %s", job.namespace, job.name, err)
            return None
        if not running:
            return None
        where = (f"its Workload {', '.join(_describe_workload(w) for w in wls)} has"
                 if wls else "it has no Workload, hence")
        return (f"pods {_names(running)} run while {where} no admission, for "
                f"{held:.1f}s")

    async def _tick_duplicates(
        self, due: Callable[[tuple[str, ...], float], float | None]
    ) -> None:
        by_job: dict[str, list[_Workload]] = {}
        for wl in list(self._workloads.values()):
            if not is_being_deleted(wl.obj) and self._in_scope(wl.job_uid):
                by_job.setdefault(wl.job_uid, []).append(wl)
        for job_uid, wls in by_job.items():
            if len(wls) < 2:
                continue
            held = due((RULE_TWO_WORKLOADS, job_uid), self._duplicate_grace)
            key = (RULE_TWO_WORKLOADS, job_uid, ",".join(sorted(w.uid for w in wls)))
            if held is None or key in self._flagged:
                continue
            try:
                live = [w for w in await self._owned_workloads(wls[0].namespace, job_uid)
                        if not is_being_deleted(w)]
            except Exception as err:
                log.debug("invariant watcher: listing Workloads: %s", err)
                continue
            if len(live) >= 2:
                kind, ns, name = self._job_ident(job_uid)
                self._flag(key, kind, ns, name,
                           f"{len(live)} Workloads at once for {held:.1f}s: {_names(live)}")

    async def _tick_workloads(
        self, due: Callable[[tuple[str, ...], float], float | None]
    ) -> None:
        for wl in list(self._workloads.values()):
            if not self._in_scope(wl.job_uid):
                continue
            job = self._jobs.get(wl.job_uid)
            if job is None or job.deleted:
                key = (RULE_ORPHANED_WORKLOAD, wl.uid)
                held = due(key, self._grace)
                if held is not None and key not in self._flagged:
                    message = await self._confirm_orphaned(wl, held)
                    if message is not None:
                        self._flag(key, "Workload", wl.namespace, wl.name, message)
            if c.RESOURCE_IN_USE_FINALIZER_NAME not in _finalizers(wl.obj):
                continue
            if (_is_true(wl.obj, c.WORKLOAD_FINISHED) or job is None or job.deleted
                    or job.deleting or job.finished):
                key = (RULE_LEFTOVER_FINALIZER, wl.uid)
                held = due(key, self._grace)
                if held is not None and key not in self._flagged:
                    message = await self._confirm_workload_finalizer(wl, held)
                    if message is not None:
                        self._flag(key, "Workload", wl.namespace, wl.name, message)

    async def _confirm_orphaned(self, wl: _Workload, held: float) -> str | None:
        try:
            live = await self._get(WORKLOAD_GVK, wl.namespace, wl.name)
            ref = controller_of(live) if live is not None else None
            if live is None or uid_of(live) != wl.uid or ref is None \
                    or ref.get("uid") != wl.job_uid:
                return None
            owner = await self._get(wl.owner_kind.gvk, wl.namespace, wl.owner_name)
        except Exception as err:
            log.debug("invariant watcher: confirming Workload %s: %s", wl.name, err)
            return None
        if owner is not None and uid_of(owner) == wl.job_uid:
            return None
        gone = "was deleted" if owner is None else f"was replaced (uid now {uid_of(owner)})"
        held_by = (f", held by finalizers {_finalizers(live)}"
                   if is_being_deleted(live) and _finalizers(live) else "")
        return (f"still exists {held:.1f}s after its owner {wl.owner_kind.gvk.kind} "
                f"{wl.owner_name} (uid {wl.job_uid}) {gone}{held_by}")

    async def _confirm_workload_finalizer(self, wl: _Workload, held: float) -> str | None:
        try:
            live = await self._get(WORKLOAD_GVK, wl.namespace, wl.name)
            if (live is None or uid_of(live) != wl.uid
                    or c.RESOURCE_IN_USE_FINALIZER_NAME not in _finalizers(live)):
                return None
            why = await self._finalizer_reason(live, wl.owner_kind, wl.job_uid)
        except Exception as err:
            log.debug("invariant watcher: confirming Workload %s: %s", wl.name, err)
            return None
        if why is None:
            return None
        return (f"still carries {c.RESOURCE_IN_USE_FINALIZER_NAME} {held:.1f}s after {why}")

    async def _finalizer_reason(
        self, wl: Mapping[str, Any], kind: WatchedKind, job_uid: str
    ) -> str | None:
        """Why the Workload's finalizer should be gone (live reads), or None."""
        if _is_true(wl, c.WORKLOAD_FINISHED):
            return "the Workload finished"
        ref = controller_of(wl) or {}
        owner = await self._get(kind.gvk, namespace_of(wl), str(ref.get("name") or ""))
        if owner is None or uid_of(owner) != job_uid:
            return f"its {kind.gvk.kind} went"
        if is_being_deleted(owner):
            return f"its {kind.gvk.kind} started being deleted"
        judged = self._judge(kind, owner)
        if judged is not None and judged[0]:
            return f"its {kind.gvk.kind} finished"
        return None

    async def _tick_pod_finalizers(
        self, due: Callable[[tuple[str, ...], float], float | None]
    ) -> None:
        for uid, pod in list(self._pods.items()):
            if not _kueue_pod_finalizers(pod) or _pod_running(pod):
                continue
            job_uid = self._job_of(pod)
            if self._selector is not None and (job_uid is None or not self._in_scope(job_uid)):
                continue
            key = (RULE_LEFTOVER_FINALIZER, uid)
            held = due(key, self._grace)
            if held is None or key in self._flagged:
                continue
            try:
                live = await self._get(POD_GVK, namespace_of(pod), name_of(pod))
            except Exception as err:
                log.debug("invariant watcher: confirming pod %s: %s", name_of(pod), err)
                continue
            if (live is not None and uid_of(live) == uid and not _pod_running(live)
                    and _kueue_pod_finalizers(live)):
                self._flag(key, "Pod", namespace_of(pod), name_of(pod),
                           f"{self._pod_end(live)} {held:.1f}s ago and still carries "
                           f"{_kueue_pod_finalizers(live)}")

    @staticmethod
    def _pod_end(pod: Mapping[str, Any]) -> str:
        if is_being_deleted(pod):
            return "started terminating"
        return f"ended {_status(pod).get('phase')}"

    async def _tick_evictions(self, now: float) -> None:
        for rec in list(self._evictions.values()):
            self._resolve_evictions(rec.job_uid)
            if self._evictions.get(rec.workload_uid) is not rec:
                continue
            held = now - rec.seen_at
            if held < self._grace:
                continue
            if rec.readmitted:
                self._close_eviction(rec, reflected=False)
                continue
            # A job not delivered yet is read back all the same, by the Workload's owner.
            job = self._jobs.get(rec.job_uid) or _Job(
                kind=rec.owner_kind, uid=rec.job_uid, namespace=rec.namespace,
                name=rec.owner_name, tracked=True, history_complete=False)
            verdict = await self._confirm_eviction(rec, job)
            if verdict is None or self._evictions.get(rec.workload_uid) is not rec:
                continue
            if verdict == "reflected":
                self._close_eviction(rec, reflected=True)
            elif verdict == "superseded":
                self._close_eviction(rec, reflected=False)
            else:
                del self._evictions[rec.workload_uid]
                self._flag((RULE_EVICTION_NOT_REFLECTED, rec.workload_uid, str(rec.ordinal)),
                           job.kind.gvk.kind, job.namespace, job.name,
                           f"still running {held:.1f}s after its Workload "
                           f"{rec.workload_name} was evicted ({rec.cause}); {verdict}")

    async def _confirm_eviction(self, rec: _Eviction, job: _Job) -> str | None:
        """``reflected``, ``superseded``, a description of the violation, or None (unknown)."""
        try:
            live = await self._get(job.kind.gvk, job.namespace, job.name)
            if live is None or uid_of(live) != job.uid or is_being_deleted(live):
                return "superseded"
            judged = self._judge(job.kind, live)
            if judged is None:
                return None
            if judged[0] or judged[1]:
                return "reflected"
            wls = await self._owned_workloads(job.namespace, job.uid)
        except Exception as err:
            log.debug("invariant watcher: confirming eviction of %s: %s", job.name, err)
            return None
        for wl in wls:
            if not _has_admission(wl) or is_being_deleted(wl):
                continue
            if uid_of(wl) != rec.workload_uid:
                return "superseded"  # admitted again through another Workload
            evicted = _is_true(wl, c.WORKLOAD_EVICTED)
            qr = _condition(wl, c.WORKLOAD_QUOTA_RESERVED) or {}
            if not evicted and (wl.get("spec") or {}).get("active") is not False and (
                    str(qr.get("lastTransitionTime") or "") != rec.reserved_at):
                return "superseded"
        now_wl = next((w for w in wls if uid_of(w) == rec.workload_uid), None)
        state = _describe_workload(now_wl) if now_wl is not None else "gone"
        return f"the {job.kind.gvk.kind} is not stopped; the Workload is now {state}"

    # -- reads --------------------------------------------------------------------------------

    async def _get(self, gvk: GVK, namespace: str, name: str) -> Object | None:
        """The object from the API server, None when it does not exist."""
        try:
            return await self._client.get(gvk, name, namespace=namespace or None)
        except errors.NotFound:
            return None

    async def _owned_workloads(self, namespace: str, job_uid: str) -> list[Object]:
        items = (await self._client.list(WORKLOAD_GVK, namespace=namespace or None)).items
        return [w for w in items if (controller_of(w) or {}).get("uid") == job_uid]

    async def _live_jobs(self) -> dict[str, tuple[WatchedKind, Object]]:
        out: dict[str, tuple[WatchedKind, Object]] = {}
        for kind in self._kinds.values():
            for obj in (await self._client.list(kind.gvk, namespace=self._namespace)).items:
                out[uid_of(obj)] = (kind, obj)
        return out

    def _cached_job(self, job: _Job) -> Object:
        for informer in self._informers:
            if informer.gvk == job.kind.gvk:
                found = informer.indexer.get_by_key(
                    f"{job.namespace}/{job.name}" if job.namespace else job.name)
                if found is not None and uid_of(found) == job.uid:
                    return found
        return {"metadata": {"uid": job.uid, "name": job.name, "namespace": job.namespace}}

    def _pending(
        self, expected: Mapping[str, tuple[WatchedKind, str, str]]
    ) -> dict[str, tuple[WatchedKind, str, str]]:
        """Followed jobs neither finished, deleted nor being deleted (expected ones the
        informers have not delivered yet included)."""
        out = {uid: (j.kind, j.namespace, j.name) for uid, j in self._jobs.items()
               if j.tracked and not (j.finished or j.deleted or j.deleting)}
        out.update({uid: e for uid, e in expected.items() if uid not in self._jobs})
        return out

    async def _live_state(
        self, kind: WatchedKind, namespace: str, name: str, uid: str
    ) -> str | None:
        """How an unfinished job stands (read back), None when it is finished or gone."""
        try:
            live = await self._get(kind.gvk, namespace, name)
        except Exception as err:
            return f"as last watched; reading it back failed: {err}"
        if live is None or uid_of(live) != uid or is_being_deleted(live):
            return None
        judged = self._judge(kind, live)
        if judged is None:
            return "its adapter cannot read it"
        if judged[0]:
            return None
        return "suspended" if judged[1] else "running"

    # -- leftovers (final check) --------------------------------------------------------------

    async def _leftovers_live(self) -> dict[tuple[str, ...], tuple[str, str, str, str]]:
        workloads = (await self._client.list(WORKLOAD_GVK, namespace=self._namespace)).items
        pods = (await self._client.list(POD_GVK, namespace=self._namespace)).items
        return self._leftovers(workloads, pods, await self._live_jobs())

    def _leftovers(
        self, workloads: Iterable[Object], pods: Iterable[Object],
        jobs: Mapping[str, tuple[WatchedKind, Object]],
    ) -> dict[tuple[str, ...], tuple[str, str, str, str]]:
        """Orphaned Workloads and leftover finalizers in the given objects:
        key -> ``(kind, namespace, name, message)``."""
        out: dict[tuple[str, ...], tuple[str, str, str, str]] = {}
        for wl in workloads:
            ref = controller_of(wl)
            owner_gvk = _ref_gvk(ref) if ref is not None else None
            if ref is None or owner_gvk not in self._kinds:
                continue
            job_uid = str(ref.get("uid") or "")
            owner = jobs.get(job_uid)
            if owner is not None:
                if not self._live_in_scope(owner[1]):
                    continue
            elif not self._in_scope(job_uid):
                continue
            ns, name, kind_name = namespace_of(wl), name_of(wl), owner_gvk.kind
            uid = uid_of(wl)
            if owner is None:
                out[(RULE_ORPHANED_WORKLOAD, uid)] = (
                    "Workload", ns, name,
                    f"still exists after its owner {kind_name} {ref.get('name')} "
                    f"(uid {job_uid}) went; finalizers {_finalizers(wl)}")
            if c.RESOURCE_IN_USE_FINALIZER_NAME not in _finalizers(wl):
                continue
            why = None
            if _is_true(wl, c.WORKLOAD_FINISHED):
                why = "the Workload finished"
            elif owner is None:
                why = f"its {kind_name} went"
            elif is_being_deleted(owner[1]):
                why = f"its {kind_name} started being deleted"
            else:
                judged = self._judge(*owner)
                if judged is not None and judged[0]:
                    why = f"its {kind_name} finished"
            if why is not None:
                out[(RULE_LEFTOVER_FINALIZER, uid)] = (
                    "Workload", ns, name,
                    f"still carries {c.RESOURCE_IN_USE_FINALIZER_NAME} after {why}")
        for pod in pods:
            held = _kueue_pod_finalizers(pod)
            if not held or _pod_running(pod):
                continue
            pod_job = self._job_of(pod)
            if self._selector is not None and (pod_job is None or not self._in_scope(pod_job)):
                continue
            out[(RULE_LEFTOVER_FINALIZER, uid_of(pod))] = (
                "Pod", namespace_of(pod), name_of(pod),
                f"{self._pod_end(pod)} and still carries {held}")
        return out
