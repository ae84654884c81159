"""The admission an AppWrapper carries while Kueue runs it, and who may change it.

When Kueue admits an AppWrapper, its adapter (:class:`~.job.AppWrapperJob`) stores the
admission of each PodSet in ``spec.components[c].podSetInfos`` (upstream's API), where
the framework controller reads it when it creates the components. It is in the spec, so
the tenant who owns the AppWrapper could rewrite it (``nodeSelector: {zone:
z2-reserved}`` and a tolerate-all toleration) and the components created afterwards would
run on another flavor's nodes while the quota is charged to the admitted one.

So only :class:`~jobframework.admittedstate.PrivilegedUsers` may change those lists
(:func:`admitted_state_errors`, the update rule of the Kueue webhook; upstream compares
them in no rule), and, under Kueue, the controller checks them against the Workload
before it creates components (:func:`admission_problem`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jobframework.admittedstate import Change, PrivilegedUsers, privileged_change_errors
from jobframework.admittedworkload import (
    AdmissionGuard,
    info_mismatch,
    pod_sets_mismatch,
)
from jobframework.field import ErrorList, Path
from jobframework.runtime.objects import Object
from jobframework.webhook import AdmissionRequest

from .job import AppWrapperJob, pod_set_info_to_dict
from .podsets import effective_pod_sets

_COMPONENTS = Path.new("spec", "components")


def _components(aw: Mapping[str, Any]) -> list[Any]:
    spec = aw.get("spec")
    components = spec.get("components") if isinstance(spec, Mapping) else None
    return components if isinstance(components, list) else []


def _infos(component: Any) -> Any:
    return component.get("podSetInfos") if isinstance(component, Mapping) else None


def admitted_state_errors(old: Mapping[str, Any], new: Mapping[str, Any],
                          request: AdmissionRequest | None,
                          privileged: PrivilegedUsers) -> ErrorList:
    """A ``Forbidden`` error for each component whose ``podSetInfos`` a user who is not
    privileged sets, changes or removes."""
    old_c, new_c = _components(old), _components(new)
    changes: list[Change] = []
    for idx in range(max(len(old_c), len(new_c))):
        before = _infos(old_c[idx]) if idx < len(old_c) else None
        after = _infos(new_c[idx]) if idx < len(new_c) else None
        changes.append((_COMPONENTS.index_(idx).child("podSetInfos"), before, after))
    return privileged_change_errors(changes, request, privileged)


def stored_pod_set_infos(aw: Mapping[str, Any]) -> list[Any]:
    """The ``podSetInfos`` entries, one per effective PodSet across the components, in
    the Workload's order (``None`` where a component has fewer than it has PodSets)."""
    out: list[Any] = []
    components = _components(aw)
    for c, pod_sets in enumerate(effective_pod_sets(aw)):
        infos = _infos(components[c]) if c < len(components) else None
        infos = infos if isinstance(infos, list) else []
        out.extend(infos[j] if j < len(infos) else None for j in range(len(pod_sets)))
    return out


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _has_infos(aw: Mapping[str, Any]) -> bool:
    return any(isinstance(_infos(c), list) for c in _components(aw))


async def admission_problem(guard: AdmissionGuard, aw: Object,
                            client: Any = None) -> str | None:
    """Why the admission ``aw`` carries, or the PodSets it would run, is not what its
    Workload admitted; None when it is, or when ``aw`` is not Kueue's (no Workload, no
    ``podSetInfos``)."""
    admission = await guard.admission(aw)
    if not admission.workload and not _has_infos(aw):
        return None
    admitted = admission.ordered()
    if not admitted:
        return info_mismatch("", None, admission)
    stored = stored_pod_set_infos(aw)
    for i, (have, ps) in enumerate(zip(stored, admitted, strict=False)):
        want = pod_set_info_to_dict(ps.info)
        if have != want:
            return (f"the podSetInfos of pod set {i} ({ps.pod_set.name}) are not Workload "
                    f"{admission.workload}'s: {_shown(have)} instead of {_shown(want)}")
    pod_sets: Sequence[Any] = await AppWrapperJob(aw, features=guard.features).pod_sets(client)
    return pod_sets_mismatch(pod_sets, admission)
