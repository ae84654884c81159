"""Which nodes a DaemonJob runs on, and how its pods are pinned there. No I/O.

A node is *eligible* when, in this order of the reasons reported:

1. it is not named in ``spec.excludeNodeList``;
2. it is Ready (its ``Ready`` condition is True);
3. it is schedulable (not cordoned: ``spec.unschedulable`` unset);
4. the pod template tolerates every ``NoSchedule`` and ``NoExecute`` taint it has
   (``PreferNoSchedule`` taints only steer the scheduler);
5. its labels match the template's ``nodeSelector``;
6. it matches the template's required node affinity (one of the terms, each term all of
   its ``matchExpressions`` on labels and ``matchFields`` on ``metadata.name``).

:func:`pin_to_node` adds the node to the pod template's required node affinity, ANDed
into every term, so the scheduler still checks resources, ports and volumes.
"""

from __future__ import annotations

import copy
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from jobframework.api.conditions import CONDITION_TRUE
from jobframework.runtime.objects import labels_of, name_of


class Ineligible(enum.StrEnum):
    """Why a node is not eligible (the first rule it fails)."""

    EXCLUDED = "excluded by spec.excludeNodeList"
    NOT_READY = "not Ready"
    UNSCHEDULABLE = "cordoned (spec.unschedulable)"
    TAINTED = "has a taint the pod template does not tolerate"
    NODE_SELECTOR = "does not match spec.template.spec.nodeSelector"
    NODE_AFFINITY = "does not match the template's required node affinity"


#: Taint effects that keep a pod off a node.
_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def is_ready(node: Mapping[str, Any]) -> bool:
    """Whether the node's ``Ready`` condition is True."""
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == CONDITION_TRUE)
    return False


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' ``Toleration.ToleratesTaint``: effect (empty matches all), key (empty
    with ``Exists`` matches all) and, for ``Equal`` (the default), value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(
    node: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint of ``node`` no toleration tolerates, or None."""
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in _BLOCKING_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return dict(taint)
    return None


#: What Go's ``strconv.ParseInt(s, 10, 64)`` accepts (Python's ``int`` also takes blanks
#: and ``_`` separators, which a label value may contain).
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def _int(value: str) -> int | None:
    if not _DECIMAL.fullmatch(value):
        return None
    n = int(value)
    return n if -(2**63) <= n < 2**63 else None


def requirement_matches(req: Mapping[str, Any], value: str | None) -> bool:
    """One ``NodeSelectorRequirement`` against a label (or field) value (None: absent)."""
    op = req.get("operator")
    values = [str(v) for v in _array(req.get("values"))]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        have, want = _int(value), _int(values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A ``NodeSelectorTerm``: all of its requirements hold; an empty term matches nothing."""
    exprs = [r for r in _array(term.get("matchExpressions")) if isinstance(r, Mapping)]
    fields = [r for r in _array(term.get("matchFields")) if isinstance(r, Mapping)]
    if not exprs and not fields:
        return False
    labels = labels_of(node)
    for req in exprs:
        if not requirement_matches(req, labels.get(str(req.get("key")))):
            return False
    for req in fields:
        value = name_of(node) if req.get("key") == "metadata.name" else None
        if not requirement_matches(req, value):
            return False
    return True


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def required_terms(pod_spec: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The required node affinity's terms, or None when the template has none (parts of
    the wrong JSON type, which the webhook refuses, are read as absent)."""
    node_affinity = _mapping(_mapping(pod_spec.get("affinity")).get("nodeAffinity"))
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, Mapping):
        return None
    return [t for t in _array(required.get("nodeSelectorTerms")) if isinstance(t, Mapping)]


def ineligible_reason(
    node: Mapping[str, Any], pod_spec: Mapping[str, Any], exclude: Iterable[str] = ()
) -> Ineligible | None:
    """Why ``node`` is not eligible for pods of ``pod_spec`` (the first rule it fails), or
    None when it is eligible."""
    if name_of(node) in set(exclude):
        return Ineligible.EXCLUDED
    if not is_ready(node):
        return Ineligible.NOT_READY
    if (node.get("spec") or {}).get("unschedulable"):
        return Ineligible.UNSCHEDULABLE
    tolerations = [t for t in _array(pod_spec.get("tolerations")) if isinstance(t, Mapping)]
    if untolerated_taint(node, tolerations) is not None:
        return Ineligible.TAINTED
    labels = labels_of(node)
    selector = _mapping(pod_spec.get("nodeSelector"))
    if any(labels.get(str(k)) != str(v) for k, v in selector.items()):
        return Ineligible.NODE_SELECTOR
    terms = required_terms(pod_spec)
    if terms is not None and not any(term_matches(t, node) for t in terms):
        return Ineligible.NODE_AFFINITY
    return None


#: Reasons that start with their own verb, and its plural.
_VERBS = (("has ", "have "), ("does not ", "do not "))


def _counted(why: Ineligible, n: int) -> str:
    """``1 is not Ready``, ``2 are not Ready``, ``1 has a taint ...``, ``2 have a taint ...``."""
    for singular, plural in _VERBS:
        if why.value.startswith(singular):
            return f"{n} " + (why.value if n == 1 else plural + why.value[len(singular):])
    return f"{n} {'is' if n == 1 else 'are'} {why.value}"


@attrs.frozen
class Eligibility:
    """The nodes a DaemonJob may run on, and why the others may not."""

    #: Eligible node names, sorted.
    eligible: tuple[str, ...]
    #: Ineligible node name → why.
    ineligible: Mapping[str, Ineligible] = attrs.field(factory=dict)

    def summary(self) -> str:
        """``of N nodes, a are excluded by ..., b are not Ready`` (counts per reason)."""
        total = len(self.eligible) + len(self.ineligible)
        counts: dict[Ineligible, int] = {}
        for why in self.ineligible.values():
            counts[why] = counts.get(why, 0) + 1
        parts = [_counted(why, n)
                 for why, n in sorted(counts.items(), key=lambda kv: list(Ineligible)
                                      .index(kv[0]))]
        head = f"of {total} node{'' if total == 1 else 's'}"
        return head + (": " + ", ".join(parts) if parts else "")


def eligible_nodes(
    nodes: Iterable[Mapping[str, Any]], pod_spec: Mapping[str, Any], exclude: Iterable[str] = ()
) -> Eligibility:
    """Split ``nodes`` into eligible ones and the others with their reason."""
    excluded = set(exclude)
    ok: list[str] = []
    bad: dict[str, Ineligible] = {}
    for node in nodes:
        why = ineligible_reason(node, pod_spec, excluded)
        if why is None:
            ok.append(name_of(node))
        else:
            bad[name_of(node)] = why
    return Eligibility(tuple(sorted(ok)), bad)


def matches_labels(node: Mapping[str, Any], selector: Mapping[str, str] | None) -> bool:
    """Whether ``node`` has every label of ``selector`` (an admitted flavor's node labels)."""
    labels = labels_of(node)
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def pin_to_node(pod_spec: dict[str, Any], node_name: str) -> None:
    """Require ``node_name`` in ``pod_spec``'s node affinity (``matchFields`` on
    ``metadata.name``, as the DaemonSet controller does), ANDed into every required term;
    a template without required terms gets one term with just the node."""
    pin = {"key": "metadata.name", "operator": "In", "values": [node_name]}
    # A null part is unset, as Go decodes it (Helm renders an empty ``affinity:`` value as
    # null, which the webhook accepts); one of another JSON type, which the webhook refuses
    # and the controller fails, is replaced rather than read.
    affinity = _object(pod_spec, "affinity")
    node_affinity = _object(affinity, "nodeAffinity")
    required = _object(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution")
    terms = [t for t in _array(required.get("nodeSelectorTerms")) if isinstance(t, Mapping)]
    if not terms:
        required["nodeSelectorTerms"] = [{"matchFields": [pin]}]
        return
    pinned = []
    for term in terms:
        one = copy.deepcopy(dict(term))
        one["matchFields"] = [*_array(one.get("matchFields")), copy.deepcopy(pin)]
        pinned.append(one)
    required["nodeSelectorTerms"] = pinned


def _object(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """``parent[key]``, made an empty object when it is absent, null or no object."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = parent[key] = {}
    return value


def _array(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


__all__ = [
    "Eligibility",
    "Ineligible",
    "eligible_nodes",
    "ineligible_reason",
    "is_ready",
    "matches_labels",
    "pin_to_node",
    "required_terms",
    "requirement_matches",
    "term_matches",
    "tolerates",
    "untolerated_taint",
]
