"""The wrapped resources: what the controller adds to them and how it reads them back.

Pure helpers of the framework controller (no API calls):

- :func:`initial_component_status`: the ``status.componentStatus`` written at the first
  reconcile (effective PodSets frozen: declared, else inferred);
- :func:`finish_component`: the config-driven injections upstream's ``createComponent``
  makes at each PodSet after Kueue's PodSetInfo (``schedulerName``; Autopilot
  anti-affinities for pods requesting a flagged resource), and the controller owner
  reference;
- :func:`count_failed`: whether a wrapped object's own controller gave up on it
  (batch/v1 Job and kubeflow.org/v1 PyTorchJob ``Failed=True``; RayCluster/RayJob
  detection is disabled upstream and here).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, MutableMapping
from typing import Any, Final

from jobframework.runtime.objects import Object, owner_reference
from jobframework.validation import quantity_value

from .config import AppWrapperConfig
from .podsets import PathError, get_component_pod_sets, get_raw_template

log = logging.getLogger(__name__)

__all__ = [
    "add_node_selectors_to_affinity",
    "count_failed",
    "finish_component",
    "has_resource_request",
    "initial_component_status",
    "set_controller_reference",
]

#: ``apiVersion:kind`` of the wrapped kinds whose ``Failed=True`` condition fails the
#: component (upstream's switch in ``getComponentStatus``).
_FAILED_CONDITION_KINDS: Final = frozenset({"batch/v1:Job", "kubeflow.org/v1:PyTorchJob"})


def initial_component_status(aw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One entry per component: its effective PodSets, empty name/kind/apiVersion.

    Raises the pod-set inference error (a ``ValueError``) for a component whose template
    cannot be inferred; the webhook normally rejects such AppWrappers.
    """
    out: list[dict[str, Any]] = []
    for component in (aw.get("spec") or {}).get("components") or []:
        pod_sets = [copy.deepcopy(dict(p)) for p in get_component_pod_sets(component)]
        out.append({"name": "", "kind": "", "apiVersion": "", "podSets": pod_sets})
    return out


def has_resource_request(spec: Mapping[str, Any], resource: str) -> bool:
    """Whether a container or init container requests or limits ``resource`` above zero.

    As upstream: integers count when positive, strings when they parse as a non-zero
    quantity; other JSON values (floats included) are ignored.
    """
    def uses(container: Any) -> bool:
        resources = container.get("resources") if isinstance(container, Mapping) else None
        if not isinstance(resources, Mapping):
            return False
        for key in ("limits", "requests"):
            values = resources.get(key)
            if not isinstance(values, Mapping) or resource not in values:
                continue
            q = values[resource]
            if isinstance(q, bool):
                continue
            if isinstance(q, int) and q > 0:
                return True
            if isinstance(q, str):
                value = quantity_value(q)
                if value is not None and value != 0:
                    return True
        return False

    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if isinstance(containers, list) and any(uses(c) for c in containers):
            return True
    return False


def add_node_selectors_to_affinity(
    spec: MutableMapping[str, Any], expressions: list[dict[str, Any]], *, required: bool,
    weight: int = 0,
) -> None:
    """Add ``expressions`` to the pod spec's node affinity.

    Required: appended to every existing ``nodeSelectorTerms[*].matchExpressions`` (one
    empty term is created when there is none). Preferred: one new weighted term. Raises
    ``ValueError`` naming the field when the existing affinity has the wrong shape.
    """
    affinity = spec.setdefault("affinity", {})
    if not isinstance(affinity, MutableMapping):
        raise ValueError("spec.affinity is not a map")
    node_affinity = affinity.setdefault("nodeAffinity", {})
    if not isinstance(node_affinity, MutableMapping):
        raise ValueError("spec.affinity.nodeAffinity is not a map")
    if required:
        field = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        selector = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        if not isinstance(selector, MutableMapping):
            raise ValueError(f"{field} is not a map")
        terms = selector.setdefault("nodeSelectorTerms", [{}])
        if not isinstance(terms, list):
            raise ValueError(f"{field}.nodeSelectorTerms is not an array")
        for idx, term in enumerate(terms):
            if not isinstance(term, MutableMapping):
                raise ValueError(f"{field}.nodeSelectorTerms[{idx}] is not an map")
            matches = term.setdefault("matchExpressions", [])
            if not isinstance(matches, list):
                raise ValueError(f"{field}.nodeSelectorTerms[{idx}].matchExpressions is not an map")
            matches.extend(copy.deepcopy(expressions))
    else:
        preferred = node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        if not isinstance(preferred, list):
            raise ValueError("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuring"
                             "Execution is not an array")
        preferred.append({"weight": weight,
                          "preference": {"matchExpressions": copy.deepcopy(expressions)}})


def _same_object(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    # controller-runtime's referSameObject: group, kind and name (not the UID).
    group_a = str(a.get("apiVersion") or "").rpartition("/")[0]
    group_b = str(b.get("apiVersion") or "").rpartition("/")[0]
    return group_a == group_b and a.get("kind") == b.get("kind") and a.get("name") == b.get("name")


def set_controller_reference(owner: Mapping[str, Any], obj: Object) -> None:
    """controller-runtime's ``SetControllerReference``: add (or refresh) the controller
    owner reference to ``owner``; ``ValueError`` when another controller is set."""
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, MutableMapping):
        raise ValueError("metadata is not a map")
    ref = owner_reference(owner)
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping)]
    for existing in refs:
        if existing.get("controller") and not _same_object(existing, ref):
            raise ValueError(
                f"Object {meta.get('namespace', '')}/{meta.get('name', '')} is already owned "
                f"by another {existing.get('kind', '')} controller {existing.get('name', '')}")
    for i, existing in enumerate(refs):
        if _same_object(existing, ref):
            refs[i] = ref
            break
    else:
        refs.append(ref)
    meta["ownerReferences"] = refs


def _not_in(groups: dict[str, list[str]]) -> list[dict[str, Any]]:
    return [{"key": k, "operator": "NotIn", "values": v} for k, v in groups.items()]


def _inject_autopilot(spec: MutableMapping[str, Any], config: AppWrapperConfig) -> None:
    autopilot = config.autopilot
    if autopilot is None or not autopilot.inject_anti_affinities:
        return
    required: dict[str, list[str]] = {}
    preferred: dict[str, list[str]] = {}
    # Upstream iterates a Go map (random order); here config order makes it deterministic.
    for resource, taints in autopilot.resource_taints.items():
        if not has_resource_request(spec, resource):
            continue
        for t in taints:
            if t.effect in ("NoExecute", "NoSchedule"):
                required.setdefault(t.key, []).append(t.value)
            elif t.effect == "PreferNoSchedule":
                preferred.setdefault(t.key, []).append(t.value)
    try:
        if required:
            add_node_selectors_to_affinity(spec, _not_in(required), required=True)
        if preferred:
            weight = autopilot.prefer_no_schedule_weight
            add_node_selectors_to_affinity(spec, _not_in(preferred), required=False,
                                           weight=1 if weight is None else weight)
    except ValueError as err:
        # Upstream logs and creates the object without the anti-affinities.
        log.error("failed to inject Autopilot affinities: %s", err)


def finish_component(obj: Object, aw: Mapping[str, Any], pod_set_paths: list[str],
                     config: AppWrapperConfig) -> Object:
    """Complete an object built by pod-set injection, in place, and return it.

    At each PodSet template: ``spec.schedulerName`` from the config when the template
    has none, then the Autopilot anti-affinities. Finally the controller owner reference
    to the AppWrapper (:func:`set_controller_reference`; raises ``ValueError`` when the
    template names another controller).
    """
    for path in pod_set_paths:
        try:
            spec = get_raw_template(obj, path).get("spec")
        except PathError:
            continue  # reported by pod-set injection, which runs first
        if not isinstance(spec, MutableMapping):
            continue
        if config.scheduler_name:
            existing = spec.get("schedulerName")
            if not isinstance(existing, str) or existing == "":
                spec["schedulerName"] = config.scheduler_name
        _inject_autopilot(spec, config)
    set_controller_reference(aw, obj)
    return obj


def count_failed(component_status: Mapping[str, Any], obj: Mapping[str, Any]) -> int:
    """How many ``Failed=True`` conditions the wrapped object has (0 or 1 in practice;
    upstream counts each), for the kinds whose failure upstream detects."""
    key = f"{component_status.get('apiVersion', '')}:{component_status.get('kind', '')}"
    if key not in _FAILED_CONDITION_KINDS:
        return 0
    conditions = (obj.get("status") or {}).get("conditions") or []
    return sum(1 for c in conditions if isinstance(c, Mapping)
               and c.get("type") == "Failed" and c.get("status") == "True")
