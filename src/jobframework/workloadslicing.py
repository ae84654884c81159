"""Elastic jobs' workload slices (Kueue's ``pkg/workloadslicing``).

A job annotated ``kueue.x-k8s.io/elastic-job: "true"`` (with the
``ElasticJobsViaWorkloadSlices`` gate) is represented by a chain of Workload *slices*:
changing the job's pod counts updates its slice in place while it holds no quota, or on a
scale-down; scaling up an admitted job creates a new slice that replaces the old one
(annotation ``kueue.x-k8s.io/workload-slice-replacement-for``), and every slice of the
chain carries the name of the first (``kueue.x-k8s.io/workload-slice-name``).

The generic reconciler (:mod:`jobframework.reconciler`) calls in here: :func:`enabled`
decides whether a job is elastic, :func:`ensure_workload_slices` picks (and updates) the
job's slice, :func:`prepare_workload_slice` annotates a new one,
:func:`new_workload_slice_name` names it and :func:`scaled_up` exempts a prebuilt
replacement slice from the in-sync check. The functions take what they use (client,
clock, feature gates), not the reconciler.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from . import constants as c
from . import workload as wlpkg
from .api.conditions import CONDITION_TRUE
from .api.workload import PodSet, Workload
from .constants import DEFAULT_FEATURES, FeatureGates
from .indexer import list_owned_workloads
from .interface import ElasticWorkloadNameProvider, GenericJob
from .naming import generate_workload_name_with_extra
from .reconcile_errors import ReconcileError
from .runtime.client import Client
from .runtime.clock import Clock
from .runtime.objects import GVK, Object, name_of, namespace_of, uid_of
from .utils import workload_slice_enabled

__all__ = [
    "ENABLED_ANNOTATION_KEY",
    "ENABLED_ANNOTATION_VALUE",
    "WORKLOAD_SLICE_REPLACEMENT_FOR",
    "enabled",
    "ensure_workload_slices",
    "find_latest_active_workload",
    "find_not_finished_workloads",
    "is_elastic_workload",
    "is_replaced",
    "new_workload_slice_name",
    "prepare_workload_slice",
    "replacement_for_key",
    "scaled_down",
    "scaled_up",
    "slice_name",
]

log = logging.getLogger(__name__)

#: The annotation marking a job (and its Workloads) elastic (``EnabledAnnotationKey``).
ENABLED_ANNOTATION_KEY = c.ELASTIC_JOB_ANNOTATION
#: Its value enabling workload slicing (``EnabledAnnotationValue``).
ENABLED_ANNOTATION_VALUE = c.ELASTIC_JOB_ANNOTATION_VALUE
#: The annotation of a new slice naming the key (``namespace/name``) of the slice it
#: replaces (``WorkloadSliceReplacementFor``).
WORKLOAD_SLICE_REPLACEMENT_FOR = c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION


def enabled(
    obj: Mapping[str, Any] | None, *, features: FeatureGates = DEFAULT_FEATURES
) -> bool:
    """Whether ``obj`` uses workload slices (``Enabled``): the
    ``ElasticJobsViaWorkloadSlices`` gate is on and it is annotated ``elastic-job: "true"``
    (:func:`~jobframework.utils.workload_slice_enabled`)."""
    return workload_slice_enabled(obj, features=features)


def is_elastic_workload(
    wl: Workload | None, *, features: FeatureGates = DEFAULT_FEATURES
) -> bool:
    """Whether a Workload is an elastic job's slice (``IsElasticWorkload``)."""
    if wl is None:
        return False
    return enabled({"metadata": {"annotations": wl.metadata.annotations or {}}},
                   features=features)


def replacement_for_key(wl: Workload) -> str | None:
    """The key of the slice ``wl`` replaces, None if it replaces none
    (``ReplacementForKey``)."""
    return (wl.metadata.annotations or {}).get(WORKLOAD_SLICE_REPLACEMENT_FOR)


def slice_name(wl: Workload) -> str:
    """The name of the first Workload of ``wl``'s slice chain: its
    ``workload-slice-name`` annotation, else its own name (``SliceName``)."""
    return (wl.metadata.annotations or {}).get(c.WORKLOAD_SLICE_NAME_ANNOTATION, wl.name)


def scaled_down(old_counts: Sequence[int], new_counts: Sequence[int]) -> bool:
    """Whether the pod-set counts went down (``ScaledDown``): one count is lower and none
    is higher. The two sequences are the counts of the same pod sets, in order."""
    pairs = list(zip(old_counts, new_counts, strict=True))
    return any(n < o for o, n in pairs) and not any(o < n for o, n in pairs)


def scaled_up(wl: Workload) -> bool:
    """Whether ``wl`` is a scaled-up replacement of another slice (``ScaledUp``)."""
    return replacement_for_key(wl) is not None


def is_replaced(wl: Workload) -> bool:
    """Whether ``wl`` finished because a new slice replaced it (``IsReplaced``)."""
    finished = wl.find_condition(c.WORKLOAD_FINISHED)
    return (finished is not None and finished.status == CONDITION_TRUE
            and finished.reason == c.WORKLOAD_SLICE_REPLACED)


async def find_not_finished_workloads(client: Client, obj: Object, gvk: GVK) -> list[Workload]:
    """The Workloads ``obj`` (of kind ``gvk``) owns that are not finished, oldest first
    (same-second ties by UID) (``FindNotFinishedWorkloads``)."""
    owned = await list_owned_workloads(client, gvk, namespace_of(obj), name_of(obj))
    slices = [w for w in map(wlpkg.from_object, owned) if not w.is_finished()]
    slices.sort(key=lambda w: (w.metadata.creation_timestamp or "", w.metadata.uid or ""))
    return slices


async def find_latest_active_workload(
    client: Client, obj: Object, gvk: GVK
) -> Workload | None:
    """The newest not-finished, not-evicted slice holding a quota reservation, None if
    there is none (``FindLatestActiveWorkload``)."""
    slices = await find_not_finished_workloads(client, obj, gvk)
    reserved = [s for s in slices if s.has_quota_reservation() and not s.is_evicted()]
    return reserved[-1] if reserved else None


async def ensure_workload_slices(
    client: Client,
    clock: Clock,
    job_pod_sets: Sequence[PodSet],
    obj: Object,
    gvk: GVK,
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> tuple[Workload | None, bool]:
    """The workload slice of an elastic job (``EnsureWorkloadSlices``).

    Returns ``(wl, compatible)``. ``compatible`` is False when the job's pod sets differ
    from the slice's in more than their counts (the caller falls back to ordinary
    Workload matching). A compatible ``wl`` of None means a new slice is to be created:
    there is none yet, or an admitted slice scales up. Counts are written to the slice in
    place while it holds no quota reservation, or on a scale-down. With several slices,
    the extra ones are finished first (``WorkloadSliceReplaced`` or ``OutOfSync``).
    """
    slices = await find_not_finished_workloads(client, obj, gvk)
    selected: Workload | None = None
    if len(slices) == 1:
        selected = slices[0]
    elif len(slices) > 1:
        selected = await _normalize_active_slices(client, clock, slices, features=features)
    if selected is None:
        return None, True
    return await _sync_slice_counts(client, selected, job_pod_sets)


async def _normalize_active_slices(
    client: Client, clock: Clock, slices: list[Workload], *, features: FeatureGates
) -> Workload | None:
    # One replacement per replaced slice, evicted ones ignored: the oldest, unless a
    # later one holds a reservation and it does not (Kueue's ``normalizeActiveSlices``).
    replacement: dict[str, Workload] = {}
    for s in slices:
        target = replacement_for_key(s)
        if target is None or s.is_evicted():
            continue
        first = replacement.get(target)
        if first is None or (not first.has_quota_reservation()
                             and s.has_quota_reservation()):
            replacement[target] = s
    # The newest reserved slice whose replacement (if any) holds no reservation yet,
    # and the newest slice not evicted.
    active: Workload | None = None
    latest: Workload | None = None
    for s in slices:
        if s.is_evicted():
            continue
        latest = s
        repl = replacement.get(wlpkg.key(s))
        if s.has_quota_reservation() and (repl is None or not repl.has_quota_reservation()):
            active = s
    pending = replacement.get(wlpkg.key(active)) if active is not None else None
    if pending is not None and pending.has_quota_reservation():
        pending = None
    selected = pending if pending is not None else active if active is not None else latest
    keep = [k for k in (selected, active) if k is not None]
    for s in slices:
        if any(s is k for k in keep):
            continue
        if wlpkg.key(s) in replacement:
            reason, message = c.WORKLOAD_SLICE_REPLACED, c.MSG_SLICE_REPLACED
        else:
            reason, message = c.FINISHED_REASON_OUT_OF_SYNC, c.MSG_SLICE_OUT_OF_SYNC
        log.debug("finishing workload slice %s: %s", wlpkg.key(s), reason)
        await wlpkg.finish(client, s, reason, message, clock, features=features)
    return selected


async def _sync_slice_counts(
    client: Client, wl: Workload, pod_sets: Sequence[PodSet]
) -> tuple[Workload | None, bool]:
    if [ps.name for ps in wl.spec.pod_sets] != [ps.name for ps in pod_sets]:
        return None, False
    old = [ps.count for ps in wl.spec.pod_sets]
    new = [ps.count for ps in pod_sets]
    if old == new:
        return wl, True
    if not wl.has_quota_reservation() or scaled_down(old, new):
        for ps, count in zip(wl.spec.pod_sets, new, strict=True):
            ps.count = count
        return await wlpkg.update(client, wl), True
    # A reserved slice scaling up: a new slice replaces it.
    return None, True


async def prepare_workload_slice(client: Client, obj: Object, gvk: GVK, wl: Workload) -> None:
    """Annotate a new slice of ``obj`` (Kueue's ``prepareWorkloadSlice``): elastic, and
    either the first of its chain or the replacement of the one live slice (whose chain
    name it carries on). More than one live slice raises :class:`ReconcileError`
    (``unexpected workload-slices count``), to be retried once the extra ones finish."""
    current = await find_not_finished_workloads(client, obj, gvk)
    annotations = dict(wl.metadata.annotations or {})
    annotations[ENABLED_ANNOTATION_KEY] = ENABLED_ANNOTATION_VALUE
    if not current:
        annotations[c.WORKLOAD_SLICE_NAME_ANNOTATION] = wl.name
    elif len(current) == 1:
        old = current[0]
        annotations[WORKLOAD_SLICE_REPLACEMENT_FOR] = wlpkg.key(old)
        annotations[c.WORKLOAD_SLICE_NAME_ANNOTATION] = slice_name(old)
    else:
        raise ReconcileError(f"unexpected workload-slices count: {len(current)}")
    wl.metadata.annotations = annotations


def new_workload_slice_name(
    job: GenericJob, *, features: FeatureGates = DEFAULT_FEATURES
) -> str:
    """The name of a new slice of ``job``: its Workload name hashed with an extra part,
    the job's own (:class:`~jobframework.interface.ElasticWorkloadNameProvider`) or else
    its ``metadata.generation``."""
    obj = job.object()
    if isinstance(job, ElasticWorkloadNameProvider):
        extra = job.get_workload_name_extra_part()
    else:
        extra = str(int((obj.get("metadata") or {}).get("generation") or 0))
    return generate_workload_name_with_extra(name_of(obj), uid_of(obj), job.gvk(), extra,
                                             features=features)
