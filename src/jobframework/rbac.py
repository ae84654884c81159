"""RBAC declared in code, next to the code that needs it (as ``+kubebuilder:rbac`` markers).

A controller, webhook or reconciler module declares the API access it needs as a tuple of
:class:`PolicyRule` values (conventionally a module-level ``RBAC``)::

    RBAC: Final = (
        rule(groups=["batch"], resources=["jobs"], verbs=["get", "list", "watch", "create"]),
        rule(groups=["coordination.k8s.io"], resources=["leases"],
             verbs=["get", "create", "update"], namespace=MANAGER_NAMESPACE),
    )

and a generator collects the declarations of everything a deployment runs,
:func:`merge_rules` them as controller-gen aggregates markers, and renders them with
:func:`cluster_role` / :func:`role` and the bindings of one ServiceAccount.

A rule is cluster-wide (``namespace=None``: it goes into the ClusterRole), in the
manager's own namespace (:data:`MANAGER_NAMESPACE`, resolved when rendering: leases, the
webhook serving-certificate Secret) or in one named namespace (a Role there: e.g. Kueue's
ConfigMap in ``kueue-system``).

Subresources are written ``<resource>/<subresource>`` (``jobs/status``,
``appwrappers/finalizers``), as in RBAC itself. Verbs are the API verbs of resource
requests (:data:`VERBS`); anything else is a :class:`ValueError` naming it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from .runtime.objects import Object

__all__ = [
    "MANAGER_NAMESPACE",
    "RBAC_API_VERSION",
    "READ",
    "VERBS",
    "PolicyRule",
    "cluster_role",
    "cluster_role_binding",
    "cluster_rules",
    "merge_rules",
    "namespaced_rules",
    "role",
    "role_binding",
    "rule",
]

#: The verbs of resource requests a rule may grant, in the order they are rendered.
VERBS: Final = ("get", "list", "watch", "create", "update", "patch", "delete",
                "deletecollection")
#: What reading a kind takes: ``get``, and ``list`` + ``watch`` for an informer.
READ: Final = ("get", "list", "watch")
#: ``namespace`` of a rule that applies in the manager's own namespace (a Role there);
#: not a valid namespace name, so it cannot collide with one.
MANAGER_NAMESPACE: Final = "@manager"
RBAC_API_VERSION: Final = "rbac.authorization.k8s.io/v1"

_VERB_ORDER: Final = {v: i for i, v in enumerate(VERBS)}
_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _strings(value: Iterable[str] | str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _sorted_verbs(verbs: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(verbs), key=lambda v: _VERB_ORDER[v]))


def _check_verbs(instance: PolicyRule, attribute: attrs.Attribute[tuple[str, ...]],
                 value: tuple[str, ...]) -> None:
    del instance, attribute
    if not value:
        raise ValueError("a rule needs at least one verb")
    unknown = [v for v in value if v not in _VERB_ORDER]
    if unknown:
        raise ValueError(f"unknown RBAC verb(s) {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(VERBS)}")


def _check_non_empty(instance: PolicyRule, attribute: attrs.Attribute[tuple[str, ...]],
                     value: tuple[str, ...]) -> None:
    del instance
    if not value:
        raise ValueError(f"a rule needs at least one of {attribute.name}")
    if attribute.name == "resources" and any(not r or r.startswith("/") for r in value):
        raise ValueError(f"invalid resource in {list(value)!r}")


def _check_namespace(instance: PolicyRule, attribute: attrs.Attribute[str | None],
                     value: str | None) -> None:
    del instance, attribute
    if value is None or value == MANAGER_NAMESPACE:
        return
    if not _DNS_LABEL.match(value) or len(value) > 63:
        raise ValueError(f"invalid namespace {value!r} (a DNS label, None for cluster-wide, "
                         "or MANAGER_NAMESPACE)")


@attrs.frozen
class PolicyRule:
    """One grant: ``verbs`` on ``resources`` of the API ``groups`` (``""`` is the core
    group), optionally only on the objects named ``resource_names``, cluster-wide
    (``namespace`` None), in the manager's namespace (:data:`MANAGER_NAMESPACE`) or in
    the namespace named.

    Fields accept any iterable of strings (or one string) and are stored as tuples.
    ``resource_names`` cannot restrict ``create`` (the API server authorizes a create
    before the object has a name), so that combination is rejected.
    """

    groups: tuple[str, ...] = attrs.field(converter=_strings, validator=_check_non_empty)
    resources: tuple[str, ...] = attrs.field(converter=_strings, validator=_check_non_empty)
    verbs: tuple[str, ...] = attrs.field(converter=_strings, validator=_check_verbs)
    resource_names: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    namespace: str | None = attrs.field(default=None, validator=_check_namespace)

    def __attrs_post_init__(self) -> None:
        if self.resource_names and {"create", "deletecollection"} & set(self.verbs):
            raise ValueError("resource_names cannot restrict create or deletecollection "
                             f"(rule on {', '.join(self.resources)})")

    @property
    def cluster_wide(self) -> bool:
        """Whether the rule belongs in the ClusterRole."""
        return self.namespace is None

    def allows(self, verb: str, group: str, resource: str, *, name: str = "",
               namespace: str | None = None, manager_namespace: str | None = None) -> bool:
        """Whether this rule grants ``verb`` on ``resource`` (``plural`` or
        ``plural/subresource``) of ``group``, for the object ``name`` in ``namespace``
        (None: a cluster-scoped object, or all namespaces), as RBAC decides.

        A namespaced rule matches only requests in its namespace (:data:`MANAGER_NAMESPACE`
        stands for ``manager_namespace``); a name-restricted rule only requests naming one
        of its objects.
        """
        if self.namespace is not None:
            own = (manager_namespace if self.namespace == MANAGER_NAMESPACE
                   else self.namespace)
            if namespace is None or namespace != own:
                return False
        if self.resource_names and name not in self.resource_names:
            return False
        return verb in self.verbs and group in self.groups and resource in self.resources

    def to_dict(self) -> dict[str, list[str]]:
        """The rule as an RBAC ``PolicyRule`` (``apiGroups``, ``resources``,
        ``resourceNames``, ``verbs``)."""
        out = {"apiGroups": list(self.groups), "resources": list(self.resources)}
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        out["verbs"] = list(self.verbs)
        return out


def rule(
    *,
    groups: Iterable[str] | str,
    resources: Iterable[str] | str,
    verbs: Iterable[str] | str,
    resource_names: Iterable[str] | str = (),
    namespace: str | None = None,
) -> PolicyRule:
    """A :class:`PolicyRule`, as a ``+kubebuilder:rbac`` marker reads:
    ``rule(groups=["batch"], resources=["jobs", "jobs/status"], verbs=["get", "update"])``.
    """
    return PolicyRule(groups, resources, verbs, resource_names, namespace)


def _namespace_key(namespace: str | None) -> tuple[int, str]:
    if namespace is None:
        return (0, "")
    if namespace == MANAGER_NAMESPACE:
        return (1, "")
    return (2, namespace)


def merge_rules(rules: Iterable[PolicyRule]) -> tuple[PolicyRule, ...]:
    """Aggregate rules as controller-gen aggregates markers.

    Every rule is split into (scope, group, resource, names) → verbs; duplicates vanish,
    the verbs of one resource are combined, and a name-restricted grant already made for
    every name is dropped. Resources of one group with the same verbs (and names) are then
    joined into one rule. The result is sorted (scope: cluster-wide, the manager's
    namespace, then named namespaces; then group, names (unrestricted first), resources),
    so it does not depend on the order declarations were collected in.
    """
    atoms: dict[tuple[str | None, str, str, tuple[str, ...]], set[str]] = defaultdict(set)
    for r in rules:
        names = tuple(sorted(set(r.resource_names)))
        for group in r.groups:
            for resource in r.resources:
                atoms[(r.namespace, group, resource, names)].update(r.verbs)
    for (namespace, group, resource, names), verbs in atoms.items():
        if names:
            verbs -= atoms.get((namespace, group, resource, ()), set())
    joined: dict[tuple[str | None, str, tuple[str, ...], tuple[str, ...]], list[str]] = \
        defaultdict(list)
    for (namespace, group, resource, names), verbs in atoms.items():
        if verbs:
            joined[(namespace, group, names, _sorted_verbs(verbs))].append(resource)
    merged = [PolicyRule((group,), tuple(sorted(resources)), verbs, names, namespace)
              for (namespace, group, names, verbs), resources in joined.items()]
    merged.sort(key=lambda r: (_namespace_key(r.namespace), r.groups, r.resource_names,
                               r.resources, [_VERB_ORDER[v] for v in r.verbs]))
    return tuple(merged)


def cluster_rules(rules: Iterable[PolicyRule]) -> tuple[PolicyRule, ...]:
    """The cluster-wide rules, merged."""
    return merge_rules(r for r in rules if r.cluster_wide)


def namespaced_rules(rules: Iterable[PolicyRule], manager_namespace: str
                     ) -> dict[str, tuple[PolicyRule, ...]]:
    """Namespace → its merged rules (:data:`MANAGER_NAMESPACE` resolved to
    ``manager_namespace``), namespaces sorted."""
    by_namespace: dict[str, list[PolicyRule]] = defaultdict(list)
    for r in rules:
        if r.namespace is None:
            continue
        namespace = manager_namespace if r.namespace == MANAGER_NAMESPACE else r.namespace
        by_namespace[namespace].append(attrs.evolve(r, namespace=namespace))
    return {ns: merge_rules(by_namespace[ns]) for ns in sorted(by_namespace)}


def _metadata(name: str, namespace: str | None, labels: dict[str, str] | None) -> Object:
    meta: Object = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return meta


def cluster_role(name: str, rules: Sequence[PolicyRule], *,
                 labels: dict[str, str] | None = None) -> Object:
    """A ClusterRole granting ``rules`` (merged); a namespaced rule is a :class:`ValueError`
    (it belongs in a :func:`role`)."""
    scoped = [r for r in rules if not r.cluster_wide]
    if scoped:
        raise ValueError(f"namespaced rule(s) in ClusterRole {name}: "
                         + "; ".join(f"{', '.join(r.resources)} in {r.namespace}"
                                     for r in scoped))
    return {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRole",
            "metadata": _metadata(name, None, labels),
            "rules": [r.to_dict() for r in merge_rules(rules)]}


def role(name: str, namespace: str, rules: Sequence[PolicyRule], *,
         labels: dict[str, str] | None = None) -> Object:
    """A Role in ``namespace`` granting ``rules`` (merged; their own scope is not looked
    at: pick them with :func:`namespaced_rules`)."""
    plain = [attrs.evolve(r, namespace=None) for r in rules]
    return {"apiVersion": RBAC_API_VERSION, "kind": "Role",
            "metadata": _metadata(name, namespace, labels),
            "rules": [r.to_dict() for r in merge_rules(plain)]}


def _subject(service_account: str, namespace: str) -> Object:
    return {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}


def cluster_role_binding(name: str, cluster_role_name: str, service_account: str,
                         service_account_namespace: str, *,
                         labels: dict[str, str] | None = None) -> Object:
    """A ClusterRoleBinding of the ClusterRole to a ServiceAccount."""
    return {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRoleBinding",
            "metadata": _metadata(name, None, labels),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": cluster_role_name},
            "subjects": [_subject(service_account, service_account_namespace)]}


def role_binding(name: str, namespace: str, role_name: str, service_account: str,
                 service_account_namespace: str, *,
                 labels: dict[str, str] | None = None) -> Object:
    """A RoleBinding in ``namespace`` of the Role ``role_name`` to a ServiceAccount (which
    may live in another namespace)."""
    return {"apiVersion": RBAC_API_VERSION, "kind": "RoleBinding",
            "metadata": _metadata(name, namespace, labels),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": role_name},
            "subjects": [_subject(service_account, service_account_namespace)]}
