"""``PodSetInfo``: what Kueue injects into a job's pod templates at start, and restores at stop.

A port of Kueue's ``pkg/podset``. Pod templates are plain dicts
(``{"metadata": {...}, "spec": {...}}``) edited in place. Merging refuses to change a
label, annotation or node selector the template already sets to another value, raising
:class:`InvalidPodSetUpdateError` with Kueue's exact message; such errors are *permanent*
(the reconciler finishes the Workload with reason ``FailedToStart`` instead of retrying).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from . import constants as c
from .api.workload import (
    PodSet,
    PodSetAssignment,
    PodsetSliceRequiredTopologyConstraint,
    PodSetTopologyRequest,
    PodSetUpdate,
    Workload,
)
from .constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from .field import go_quote
from .k8svalidation import is_dns1123_label
from .runtime.client import Reader, get_read_only
from .runtime.objects import GVK, marshal_copy
from .utils import workload_slice_enabled

RESOURCE_FLAVOR_GVK = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "ResourceFlavor")


class PermanentPodSetError(ValueError):
    """A pod-set error that retrying cannot fix (``podset.IsPermanent``)."""


class InvalidPodsetInfoError(PermanentPodSetError):
    """``podset.ErrInvalidPodsetInfo``: ``invalid podset infos: ...``."""

    base = "invalid podset infos"


class InvalidPodSetUpdateError(PermanentPodSetError):
    """``podset.ErrInvalidPodSetUpdate``: ``invalid admission check PodSetUpdate: ...``."""

    base = "invalid admission check PodSetUpdate"


def bad_pod_sets_info_len_error(want: int, got: int) -> InvalidPodsetInfoError:
    """``invalid podset infos: expecting <want> podset, got <got>``."""
    return InvalidPodsetInfoError(
        f"{InvalidPodsetInfoError.base}: expecting {want} podset, got {got}")


def bad_pod_sets_update_error(update: str, detail: str) -> InvalidPodSetUpdateError:
    """``invalid admission check PodSetUpdate: conflict for <update>: <detail>``."""
    return InvalidPodSetUpdateError(
        f"{InvalidPodSetUpdateError.base}: conflict for {update}: {detail}")


def is_permanent(err: BaseException) -> bool:
    """True for errors that must not be retried (``podset.IsPermanent``)."""
    return isinstance(err, PermanentPodSetError)


def _conflict(a: Mapping[str, str] | None, b: Mapping[str, str] | None) -> str | None:
    # Go iterates the receiver's map; we use its insertion order, which makes the
    # reported key deterministic when several conflict.
    for k, av in (a or {}).items():
        if b and k in b and b[k] != av:
            return f"conflict for key={k}, value1={av}, value2={b[k]}"
    return None


def tolerations_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Kueue's ``tolerations.Equal``: key, operator (empty ≡ ``Equal``), value and effect."""
    def op(t: Mapping[str, Any]) -> Any:
        return t.get("operator") or "Equal"

    return bool(
        a.get("key", "") == b.get("key", "") and op(a) == op(b)
        and a.get("value", "") == b.get("value", "")
        and a.get("effect", "") == b.get("effect", "")
    )


@attrs.define
class PodSetInfo:
    """Admission data for one pod set (``podset.PodSetInfo``).

    ``affinity`` is carried along (restore source) but never merged or restored, as in Kueue.
    Maps and lists are ``None`` when absent, mirroring Go's nil.
    """

    name: str = ""
    count: int = 0
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    node_selector: dict[str, str] | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    scheduling_gates: list[dict[str, Any]] | None = None

    @classmethod
    def from_pod_set(cls, pod_set: PodSet | Mapping[str, Any]) -> PodSetInfo:
        """The original template data of a Workload pod set (``podset.FromPodSet``)."""
        ps = pod_set if isinstance(pod_set, PodSet) else PodSet.model_validate(dict(pod_set))
        meta = ps.template.get("metadata") or {}
        spec = ps.template.get("spec") or {}
        return cls(
            name=ps.name or "",
            count=ps.count,
            annotations=_clone(meta.get("annotations")),
            labels=_clone(meta.get("labels")),
            node_selector=_clone(spec.get("nodeSelector")),
            affinity=spec.get("affinity"),
            tolerations=_clone(spec.get("tolerations")),
            scheduling_gates=_clone(spec.get("schedulingGates")),
        )

    @classmethod
    def from_update(cls, update: PodSetUpdate | Mapping[str, Any]) -> PodSetInfo:
        """What an admission check's ``PodSetUpdate`` injects (``podset.FromUpdate``)."""
        u = update if isinstance(update, PodSetUpdate) else PodSetUpdate.model_validate(
            dict(update))
        return cls(annotations=u.annotations, labels=u.labels, node_selector=u.node_selector,
                   tolerations=u.tolerations)

    def merge(self, other: PodSetInfo) -> None:
        """Merge ``other`` in (``PodSetInfo.Merge``); name and count are untouched.

        Raises :class:`InvalidPodSetUpdateError` when a key of annotations, labels or
        nodeSelector (checked in that order) has different values; nothing changes then.
        """
        for field_name, mine, theirs in (
            ("annotations", self.annotations, other.annotations),
            ("labels", self.labels, other.labels),
            ("nodeSelector", self.node_selector, other.node_selector),
        ):
            detail = _conflict(mine, theirs)
            if detail is not None:
                raise bad_pod_sets_update_error(field_name, detail)
        self.annotations = _copy_into(self.annotations, other.annotations)
        self.labels = _copy_into(self.labels, other.labels)
        self.node_selector = _copy_into(self.node_selector, other.node_selector)
        for t in other.tolerations or []:
            if not any(tolerations_equal(e, t) for e in self.tolerations or []):
                self.tolerations = [*(self.tolerations or []), t]
        for g in other.scheduling_gates or []:
            if g not in (self.scheduling_gates or []):
                self.scheduling_gates = [*(self.scheduling_gates or []), g]

    def add_or_update_label(self, key: str, value: str) -> None:
        """Set a label, creating the map if needed."""
        if self.labels is None:
            self.labels = {}
        self.labels[key] = value


async def from_assignment(
    reader: Reader,
    assignment: PodSetAssignment,
    pod_set: PodSet,
    *,
    features: FeatureGates = DEFAULT_FEATURES,
) -> PodSetInfo:
    """Build the info for an admitted pod set (``podset.FromAssignment``).

    Node selector and tolerations come from each distinct assigned ResourceFlavor (read
    through ``reader``; a read error propagates); with TAS and a topology assignment, the
    ``kueue.x-k8s.io/topology`` scheduling gate, plus the unconstrained-topology annotation
    when the pod set has no topology request of its own.
    """
    info = PodSetInfo(
        name=assignment.name,
        count=pod_set.count if assignment.count is None else assignment.count,
        annotations={}, labels={}, node_selector={},
    )
    if (features.enabled(FeatureGate.TOPOLOGY_AWARE_SCHEDULING)
            and assignment.topology_assignment is not None):
        req = pod_set.topology_request
        if req is None or (req.preferred is None and req.required is None
                           and req.unconstrained is None):
            assert info.annotations is not None
            info.annotations[c.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION] = "true"
        info.scheduling_gates = [{"name": c.TOPOLOGY_SCHEDULING_GATE}]
    seen: set[str] = set()
    for flavor in (assignment.flavors or {}).values():
        if flavor in seen:
            continue
        rf = await get_read_only(reader, RESOURCE_FLAVOR_GVK, flavor)  # only read here
        spec = rf.get("spec") or {}
        info.node_selector = _copy_into(info.node_selector, spec.get("nodeLabels"))
        tolerations = spec.get("tolerations") or []
        if tolerations:
            info.tolerations = [*(info.tolerations or []), *copy.deepcopy(tolerations)]
        seen.add(flavor)
    return info


def _overrideable_annotations(info: PodSetInfo, features: FeatureGates) -> list[str]:
    # Elastic jobs may legitimately get a new slice name (and workload name) per admission.
    if not features.enabled(FeatureGate.ELASTIC_JOBS_VIA_WORKLOAD_SLICES):
        return []
    keys = [c.WORKLOAD_SLICE_NAME_ANNOTATION]
    if info.annotations and c.WORKLOAD_SLICE_NAME_ANNOTATION in info.annotations:
        keys.append(c.WORKLOAD_ANNOTATION)
    return keys


def merge_into_template(
    template: dict[str, Any], info: PodSetInfo, *, features: FeatureGates = DEFAULT_FEATURES
) -> None:
    """Inject ``info`` into a pod template dict in place (``podset.Merge``).

    Raises :class:`InvalidPodSetUpdateError` on a conflicting label, annotation or node
    selector; the template's own values are then left as they were. A ``metadata`` or
    ``spec`` the template lacks is added only when something is injected into it.
    """
    meta = template.get("metadata")
    if meta is None:
        meta = {}
    spec = template.get("spec")
    if spec is None:
        spec = {}
    for key in _overrideable_annotations(info, features):
        new = (info.annotations or {}).get(key)
        if new is None:
            continue
        current = meta.get("annotations") or {}
        if key in current and current[key] != new:
            del current[key]
    tmp = PodSetInfo(
        annotations=_clone(meta.get("annotations")), labels=_clone(meta.get("labels")),
        node_selector=_clone(spec.get("nodeSelector")),
        tolerations=_clone(spec.get("tolerations")),
        scheduling_gates=_clone(spec.get("schedulingGates")),
    )
    tmp.merge(info)
    _put(meta, "annotations", tmp.annotations)
    _put(meta, "labels", tmp.labels)
    _put(spec, "nodeSelector", tmp.node_selector)
    _put(spec, "tolerations", tmp.tolerations)
    _put(spec, "schedulingGates", tmp.scheduling_gates)
    # An absent metadata or spec stays absent when nothing went into it, so that
    # restore_pod_spec can give back the template exactly as it was.
    for part, value in (("metadata", meta), ("spec", spec)):
        if value and template.get(part) is None:
            template[part] = value


def restore_pod_spec(template: dict[str, Any], info: PodSetInfo) -> bool:
    """Put back the original annotations, labels, nodeSelector, tolerations and scheduling
    gates of a pod template dict (``podset.RestorePodSpec``); returns whether it changed.

    Absent and empty compare equal; affinity is not touched. A ``metadata`` (or
    ``spec``) that the restore empties is removed, since :func:`merge_into_template` adds
    one only to inject into it: a template without metadata comes back without one.
    """
    changed = False
    for part, fields in (
        ("metadata", (("annotations", info.annotations), ("labels", info.labels))),
        ("spec", (("nodeSelector", info.node_selector), ("tolerations", info.tolerations),
                  ("schedulingGates", info.scheduling_gates))),
    ):
        target = template.get(part)
        removed = False
        for key, value in fields:
            current = target.get(key) if target is not None else None
            if (current or None) == (value or None):
                continue
            if value:
                if target is None:
                    target = template[part] = {}
                target[key] = copy.deepcopy(value)
            elif target is not None:
                target.pop(key, None)
                removed = True
            changed = True
        if removed and not target:
            del template[part]
    return changed


def _clone(value: Any) -> Any:
    if value is None:
        return None
    try:
        return marshal_copy(value)  # several times faster than copy.deepcopy for JSON
    except ValueError:
        return copy.deepcopy(value)


def _copy_into(
    dst: dict[str, str] | None, src: Mapping[str, str] | None
) -> dict[str, str] | None:
    # utilmaps.Copy: a nil destination becomes a map only when the source is non-nil.
    if src is None:
        return dst
    out = dict(dst) if dst is not None else {}
    out.update(src)
    return out


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    # Go's omitempty: an empty map or list is not serialized, so it is not added here.
    if value:
        target[key] = value


async def pod_sets_info_from_status(
    reader: Reader, wl: Workload, *, features: FeatureGates = DEFAULT_FEATURES
) -> list[PodSetInfo] | None:
    """What to inject at start, from an admitted Workload (Kueue's ``getPodSetsInfoFromStatus``).

    Per pod set assignment (paired by index with ``spec.podSets``): :func:`from_assignment`,
    the TAS ``kueue.x-k8s.io/workload`` annotation, the elastic slice-name annotation, the
    ``kueue.x-k8s.io/podset`` label, the MultiKueue worker label, the local/cluster queue
    labels, then the first matching ``podSetUpdates`` entry of each admission check.
    A conflicting update raises :class:`InvalidPodSetUpdateError` prefixed with
    ``in admission check "<name>": ``. None when there is no assignment.
    """
    admission = wl.status.admission if wl.status else None
    if admission is None or not admission.pod_set_assignments:
        return None
    wl_labels = wl.metadata.labels or {}
    wl_dict = {"metadata": {"annotations": wl.metadata.annotations or {}}}
    infos: list[PodSetInfo] = []
    for i, assignment in enumerate(admission.pod_set_assignments):
        info = await from_assignment(reader, assignment, wl.spec.pod_sets[i], features=features)
        assert info.annotations is not None and info.labels is not None
        if features.enabled(FeatureGate.TOPOLOGY_AWARE_SCHEDULING):
            info.annotations[c.WORKLOAD_ANNOTATION] = wl.name
        if workload_slice_enabled(wl_dict, features=features):
            info.annotations[c.WORKLOAD_SLICE_NAME_ANNOTATION] = (
                (wl.metadata.annotations or {}).get(c.WORKLOAD_SLICE_NAME_ANNOTATION, wl.name))
        info.labels[c.PODSET_LABEL] = assignment.name
        if c.MULTIKUEUE_ORIGIN_LABEL in wl_labels:
            info.labels[c.MULTIKUEUE_WORKER_WORKLOAD_POD_LABEL] = "true"
        if features.enabled(FeatureGate.ASSIGN_QUEUE_LABELS_FOR_PODS):
            info.labels[c.LOCAL_QUEUE_LABEL] = wl.spec.queue_name or ""
            if not is_dns1123_label(admission.cluster_queue):
                info.labels[c.CLUSTER_QUEUE_LABEL] = admission.cluster_queue
        for check in (wl.status.admission_checks if wl.status else None) or []:
            for update in check.pod_set_updates or []:
                if update.name == info.name:
                    try:
                        info.merge(PodSetInfo.from_update(update))
                    except InvalidPodSetUpdateError as err:
                        raise InvalidPodSetUpdateError(
                            f"in admission check {go_quote(check.name or '')}: {err}") from err
                    break
        infos.append(info)
    return infos


def pod_sets_info_from_workload_spec(pod_sets: Sequence[PodSet]) -> list[PodSetInfo]:
    """Restore infos for every pod set of a Workload spec (``GetPodSetsInfoFromWorkload``)."""
    return [PodSetInfo.from_pod_set(ps) for ps in pod_sets]


def _sanitize_container(container: dict[str, Any]) -> None:
    env = container.get("env")
    if not env or not isinstance(env, list):
        return
    # Keep the last value for each name, at the position where the name first appeared.
    # Items of another JSON type (a template the API server kept as sent) stay where they
    # are: the Workload's schema then refuses them, naming the field.
    order: dict[Any, Any] = {}
    for i, var in enumerate(env):
        name = var.get("name", "") if isinstance(var, dict) else None
        order[name if isinstance(name, str) else (i,)] = var
    container["env"] = list(order.values())


def sanitize_pod_set(pod_set: PodSet) -> None:
    """De-duplicate env vars by name in every (init) container (``SanitizePodSet``).

    Parts of the wrong JSON type are left as they are, never read as what they should be.
    """
    spec = pod_set.template.get("spec")
    if not isinstance(spec, dict):
        return
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else []:
            if isinstance(container, dict):
                _sanitize_container(container)


def sanitize_pod_sets(pod_sets: Sequence[PodSet]) -> None:
    """:func:`sanitize_pod_set` on each pod set, in place (``SanitizePodSets``)."""
    for ps in pod_sets:
        sanitize_pod_set(ps)


# --- TAS: topology request from pod template annotations (tas.go) ----------------------------

_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


class TopologyRequestError(ValueError):
    """A topology annotation that cannot be parsed (the pod sets cannot be built)."""


def go_parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``; ``TopologyRequestError`` with Go's message otherwise."""
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise TopologyRequestError(f"strconv.ParseBool: parsing {go_quote(text)}: invalid syntax")


def go_parse_int32(text: str) -> int:
    """Go's ``strconv.ParseInt(text, 10, 32)`` with Go's error messages."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise TopologyRequestError(f"strconv.ParseInt: parsing {go_quote(text)}: invalid syntax")
    value = int(text)
    if not -(2**31) <= value < 2**31:
        raise TopologyRequestError(
            f"strconv.ParseInt: parsing {go_quote(text)}: value out of range")
    return value


def _parse_constraints(text: str) -> list[PodsetSliceRequiredTopologyConstraint]:
    prefix = "failed to parse multi-layer topology constraints annotation"
    try:
        raw = json.loads(text)
    except ValueError as err:
        raise TopologyRequestError(f"{prefix}: {err}") from err
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise TopologyRequestError(f"{prefix}: expected a JSON array")
    out: list[PodsetSliceRequiredTopologyConstraint] = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise TopologyRequestError(f"{prefix}: expected a JSON object")
        topology, size = entry.get("topology"), entry.get("size")
        if topology is not None and not isinstance(topology, str):
            raise TopologyRequestError(f"{prefix}: topology must be a string")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)
                                 or not -(2**31) <= size < 2**31):
            raise TopologyRequestError(f"{prefix}: size must be a 32-bit integer")
        # Go decodes into the typed struct: unknown keys are dropped.
        fields: dict[str, Any] = {}
        if topology is not None:
            fields["topology"] = topology
        if size is not None:
            fields["size"] = size
        out.append(PodsetSliceRequiredTopologyConstraint(**fields))
    if not 1 <= len(out) <= 3:
        raise TopologyRequestError(
            f"topology constraints must contain between 1 and 3 entries: got {len(out)}")
    return out


def pod_set_topology_request(
    meta: Mapping[str, Any],
    *,
    pod_index_label: str | None = None,
    sub_group_index_label: str | None = None,
    sub_group_count: int | None = None,
    features: FeatureGates = DEFAULT_FEATURES,
) -> PodSetTopologyRequest | None:
    """The pod set's TAS request from its template metadata (``NewPodSetTopologyRequest``).

    Required, else preferred, else unconstrained annotation; without any of them and
    without slice layers or index/sub-group information there is no request (None).
    Raises :class:`TopologyRequestError` on unparsable values.
    """
    ann: Mapping[str, str] = meta.get("annotations") or {}
    required = ann.get(c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION)
    preferred = ann.get(c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION)
    unconstrained = ann.get(c.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION)
    slice_topology = ann.get(c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION)
    slice_size = ann.get(c.PODSET_SLICE_SIZE_ANNOTATION)
    constraints = ann.get(c.PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION)
    group_name = ann.get(c.PODSET_GROUP_NAME_ANNOTATION)

    fields: dict[str, Any] = {}
    if required is not None:
        fields["required"] = required
    elif preferred is not None:
        fields["preferred"] = preferred
    elif unconstrained is not None:
        fields["unconstrained"] = go_parse_bool(unconstrained)
    else:
        has_slice_layer = (slice_topology is not None and slice_size is not None) or (
            constraints is not None)
        if not has_slice_layer and (pod_index_label is None and sub_group_index_label is None
                                    and sub_group_count is None):
            return None
    if features.enabled(FeatureGate.TAS_MULTI_LAYER_TOPOLOGY) and constraints is not None:
        fields["podset_slice_required_topology_constraints"] = _parse_constraints(constraints)
    elif slice_topology is not None and slice_size is not None:
        size = go_parse_int32(slice_size)
        fields["pod_set_slice_required_topology"] = slice_topology
        fields["pod_set_slice_size"] = size
    if pod_index_label is not None:
        fields["pod_index_label"] = pod_index_label
    if sub_group_count is not None:
        fields["sub_group_count"] = sub_group_count
    if sub_group_index_label is not None:
        fields["sub_group_index_label"] = sub_group_index_label
    if group_name is not None and (required is not None or preferred is not None):
        fields["pod_set_group_name"] = group_name
    return PodSetTopologyRequest(**fields)
