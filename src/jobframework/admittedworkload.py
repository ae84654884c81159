"""Checking the admission stored on a parent against its Workload: the controller side.

A parent kind (JobFlow, DaemonJob, AppWrapper) is admitted as one Workload, and its
Kueue adapter stores the admission on the object, where its controller reads it when it
creates children. The webhooks keep tenants from changing that data
(:mod:`jobframework.admittedstate`), but an object can be written while they are not
called. So before a controller creates or resumes a child it reads the parent's admitted
Workload (:class:`AdmissionGuard`) and compares:

- the stored admission of each PodSet with the one the Workload's ``status.admission``
  gives (:func:`~jobframework.podset.pod_sets_info_from_status`, what the adapter stored
  at start): :func:`info_mismatch`;
- what it is about to run (each PodSet's count and containers) with the Workload's
  ``spec.podSets``, as Kueue's equivalence check does
  (:func:`~jobframework.reconciler.compare_pod_sets`): :func:`pod_set_mismatch`.

On a mismatch the controller stops the parent as Kueue's reconciler does for a job whose
PodSets no longer match its Workload: it suspends it, drops the stored admission and
records a Warning :data:`REASON_ADMISSION_MISMATCH` event. Kueue's reconciler then starts
it again with the Workload's own admission, or replaces the Workload when the job itself
changed.

A parent with neither a Workload nor a stored admission is not Kueue's (no queue name):
nothing is checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from .api.workload import PodSet
from .childjobs import info_to_dict
from .constants import DEFAULT_FEATURES, FeatureGates, truncate_event_message
from .indexer import list_owned_workloads
from .podset import PodSetInfo, pod_sets_info_from_status, sanitize_pod_sets
from .reconciler import compare_pod_sets
from .runtime.client import Reader
from .runtime.objects import GVK, Object, json_copy, name_of, namespace_of, uid_of
from .workload import from_object as workload_from_object

#: The reason of the Warning event of a parent stopped because the admission it carries
#: (or what it would run) is not what its Workload admitted.
REASON_ADMISSION_MISMATCH: Final = "AdmissionMismatch"


@attrs.frozen
class AdmittedPodSet:
    """One PodSet of an admitted Workload."""

    #: As the Workload's ``spec.podSets`` holds it (the job's template, before injection).
    pod_set: PodSet
    #: What the admission injects (``count`` is the assignment's).
    info: PodSetInfo


@attrs.frozen
class WorkloadAdmission:
    """What Kueue admitted for one parent."""

    #: The name of the parent's admitted Workload, else of any Workload it owns; ""
    #: when it owns none.
    workload: str = ""
    #: PodSet name → what was admitted; empty unless a Workload is admitted.
    pod_sets: Mapping[str, AdmittedPodSet] = attrs.field(factory=dict)

    @property
    def admitted(self) -> bool:
        """Whether an owned Workload is admitted."""
        return bool(self.pod_sets)

    def ordered(self) -> list[AdmittedPodSet]:
        """The admitted PodSets in the Workload's order."""
        return list(self.pod_sets.values())


class AdmissionGuard:
    """Reads the admitted Workload of a parent of ``owner_gvk`` (through the Workload owner
    index, :func:`~jobframework.indexer.setup_workload_owner_index`).

    Args:
        reader: the manager's cached client.
        owner_gvk: the parent kind.
        features: the Kueue feature gates (what the admission injects depends on them).
    """

    def __init__(self, reader: Reader, owner_gvk: GVK, *,
                 features: FeatureGates = DEFAULT_FEATURES) -> None:
        self.reader = reader
        self.owner_gvk = owner_gvk
        self.features = features

    async def admission(self, parent: Object) -> WorkloadAdmission:
        """The admission of ``parent``'s Workload (controlled by its UID, not finished).

        A read error (a ResourceFlavor missing, say) propagates: the pass is retried.
        """
        owned = []
        for item in await list_owned_workloads(self.reader, self.owner_gvk,
                                               namespace_of(parent), name_of(parent)):
            wl = workload_from_object(item)
            ref = wl.metadata.controller_ref()
            if ref is not None and ref.uid == uid_of(parent):
                owned.append(wl)
        if not owned:
            return WorkloadAdmission()
        for wl in owned:
            if not wl.is_admitted() or wl.is_finished():
                continue
            infos = await pod_sets_info_from_status(self.reader, wl, features=self.features)
            if not infos:
                continue
            pod_sets = {info.name: AdmittedPodSet(ps, info)
                        for ps, info in zip(wl.spec.pod_sets, infos, strict=False)}
            return WorkloadAdmission(wl.name, pod_sets)
        return WorkloadAdmission(owned[0].name)


def _norm(info: PodSetInfo) -> dict[str, Any]:
    # Empty parts equal absent ones (Go's nil and empty marshal alike).
    return {k: v for k, v in info_to_dict(info).items() if v not in (None, {}, [], "")}


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def info_mismatch(name: str, stored: PodSetInfo | None,
                  admission: WorkloadAdmission) -> str | None:
    """Why ``stored`` (the admission the parent carries for PodSet ``name``) is not the
    one ``admission`` gives; None when it is."""
    admitted = admission.pod_sets.get(name)
    if admitted is None:
        if admission.admitted:
            return f"pod set {name!r} is not one Workload {admission.workload} admitted"
        if admission.workload:
            return f"Workload {admission.workload} is not admitted"
        return "no Workload admits it"
    if stored is None:
        return f"no admission is stored for pod set {name!r}"
    want, have = _norm(admitted.info), _norm(stored)
    diffs = [f"{key} {_shown(have.get(key))} instead of {_shown(want.get(key))}"
             for key in sorted(set(want) | set(have)) if want.get(key) != have.get(key)]
    if not diffs:
        return None
    return (f"the admission stored for pod set {name!r} is not Workload "
            f"{admission.workload}'s: " + "; ".join(diffs))


def pod_set_mismatch(actual: PodSet, admitted: AdmittedPodSet, workload: str) -> str | None:
    """Why the PodSet the controller is about to run (``actual``: count and template as
    the job's adapter reports them) is not the one the Workload admitted; None when it is
    (count and containers, as Kueue's equivalence check, tolerations aside: they come
    from the admission)."""
    mine = actual.model_copy(update={"template": json_copy(actual.template)})
    sanitize_pod_sets([mine])
    if compare_pod_sets(mine, admitted.pod_set, True):
        return None
    name = admitted.pod_set.name or ""
    if mine.count != admitted.pod_set.count:
        return (f"pod set {name!r} would run {mine.count} pods, Workload {workload} "
                f"admitted {admitted.pod_set.count}")
    return (f"the pod template of pod set {name!r} is not the one Workload {workload} "
            "admitted")


def pod_sets_mismatch(actual: Sequence[PodSet], admission: WorkloadAdmission) -> str | None:
    """:func:`pod_set_mismatch` for each of ``actual``, paired with the Workload's PodSets
    in order (their number too)."""
    admitted = admission.ordered()
    if len(actual) != len(admitted):
        return (f"{len(actual)} pod sets would run, Workload {admission.workload} admitted "
                f"{len(admitted)}")
    for ps, adm in zip(actual, admitted, strict=True):
        problem = pod_set_mismatch(ps, adm, admission.workload)
        if problem is not None:
            return problem
    return None


def stop_message(kind: str, problem: str) -> str:
    """The event message of a parent stopped for ``problem``."""
    return truncate_event_message(
        f"{kind} suspended: the admission it would run is not what Kueue admitted "
        f"({problem}); Kueue starts it again with the Workload's admission")


__all__ = [
    "REASON_ADMISSION_MISMATCH",
    "AdmissionGuard",
    "AdmittedPodSet",
    "WorkloadAdmission",
    "info_mismatch",
    "pod_set_mismatch",
    "pod_sets_mismatch",
    "stop_message",
]
