"""The RBAC of an in-cluster deployment, gathered from the declarations in the code.

What the manager process needs for itself (its markers; in-cluster mode installs no CRDs
and creates no webhook configurations, the manifests do):

- :data:`LEADER_ELECTION_RBAC`: its Lease (``--leader-elect``), in its own namespace:
  read, created by the first replica, updated to renew and to release it;
- :func:`cert_rbac`: the Secret in which ``--cert-management internal``
  (:class:`~jobframework.webhook.CertRotator`) keeps the CA and serving certificate, in
  its own namespace: created, and by name read, watched and updated;
- :func:`webhook_configuration_rbac`: its two webhook configurations, by name: read,
  watched, and updated to set their ``caBundle`` (the same rotator);
- :func:`kueue_config_rbac`: reading Kueue's ConfigMap, by name, in Kueue's namespace
  (``--kueue-config-from-cluster``);
- :data:`SELF_SUBJECT_REVIEW_RBAC`: asking who it is, once at start;
- the event recorder's rules.

A watch of one object (``fieldSelector=metadata.name=<name>``) is authorized against
``resourceNames`` as a get is, which is what lets these grants name their objects;
``create`` cannot be restricted by name.

:func:`rules_for` adds the generic reconciler's (:data:`jobframework.reconciler_rbac.RBAC`)
and each integration's own ``RBAC``; :func:`rbac_objects` renders them for one
ServiceAccount.

For the users of the kinds, :func:`user_roles` gives each CRD an editor and a viewer
ClusterRole aggregated into Kubernetes' ``edit``/``admin`` and ``view`` roles (as
AppWrapper's own deployment does) and into Kueue's ``batch-user``/``batch-admin`` roles
(as Kueue's roles for the kinds it integrates): a namespace's editors run the kinds as
they run batch Jobs. What such a tenant may not change (the admission stored on a job,
the size of its children) is held by the webhooks and controllers, not by RBAC
(``docs/reliability.md``, "Threat model").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from integrations.manager import DEFAULT_CERT_SECRET, ManagerOptions
from jobframework import reconciler_rbac
from jobframework.config import DEFAULT_CONFIGMAP_NAME, DEFAULT_NAMESPACE
from jobframework.plugins import load_integration
from jobframework.rbac import (
    MANAGER_NAMESPACE,
    PolicyRule,
    cluster_role,
    cluster_role_binding,
    cluster_rules,
    namespaced_rules,
    role,
    role_binding,
    rule,
)
from jobframework.runtime.objects import Object

__all__ = [
    "LEADER_ELECTION_RBAC",
    "SELF_SUBJECT_REVIEW_RBAC",
    "WEBHOOK_CONFIGURATION_NAME",
    "cert_rbac",
    "integration_rbac",
    "kueue_config_rbac",
    "manager_rbac",
    "rbac_objects",
    "rules_for",
    "user_roles",
    "webhook_configuration_rbac",
]

#: Labels aggregating a ClusterRole into Kubernetes' and Kueue's user-facing roles.
AGGREGATE_TO_EDIT: Final = {"rbac.authorization.k8s.io/aggregate-to-edit": "true",
                            "rbac.authorization.k8s.io/aggregate-to-admin": "true",
                            "rbac.kueue.x-k8s.io/batch-admin": "true",
                            "rbac.kueue.x-k8s.io/batch-user": "true"}
AGGREGATE_TO_VIEW: Final = {"rbac.authorization.k8s.io/aggregate-to-view": "true",
                            **AGGREGATE_TO_EDIT}
EDITOR_VERBS: Final = ("create", "delete", "get", "list", "patch", "update", "watch")
VIEWER_VERBS: Final = ("get", "list", "watch")

#: The name of both webhook configurations (the manager's default).
WEBHOOK_CONFIGURATION_NAME: Final = ManagerOptions().webhook_configuration_name

#: The leader-election Lease, in the manager's namespace.
LEADER_ELECTION_RBAC: Final[tuple[PolicyRule, ...]] = (
    rule(groups="coordination.k8s.io", resources="leases", verbs=("get", "create", "update"),
         namespace=MANAGER_NAMESPACE),
)


def cert_rbac(secret_name: str = DEFAULT_CERT_SECRET) -> tuple[PolicyRule, ...]:
    """The Secret ``secret_name`` of the self-managed serving certificate, in the
    manager's namespace: created, read, watched and updated."""
    return (
        rule(groups="", resources="secrets", verbs="create", namespace=MANAGER_NAMESPACE),
        rule(groups="", resources="secrets", verbs=("get", "watch", "update"),
             resource_names=secret_name, namespace=MANAGER_NAMESPACE),
    )


def webhook_configuration_rbac(name: str = WEBHOOK_CONFIGURATION_NAME
                               ) -> tuple[PolicyRule, ...]:
    """The Mutating/ValidatingWebhookConfigurations named ``name``: read, watched and
    updated (their ``caBundle``)."""
    return (rule(groups="admissionregistration.k8s.io",
                 resources=("mutatingwebhookconfigurations",
                            "validatingwebhookconfigurations"),
                 verbs=("get", "watch", "update"), resource_names=name),)


def kueue_config_rbac(namespace: str = DEFAULT_NAMESPACE,
                      configmap: str = DEFAULT_CONFIGMAP_NAME) -> tuple[PolicyRule, ...]:
    """Read Kueue's ConfigMap ``configmap`` in ``namespace`` (one uncached get)."""
    return (rule(groups="", resources="configmaps", verbs="get", resource_names=configmap,
                 namespace=namespace),)


#: The manager asks the API server who it is (a SelfSubjectReview), so that its own writes
#: of the admission stored on jobs pass its own webhooks (``jobframework.admittedstate``).
#: Kubernetes grants this to every authenticated user (``system:basic-user``); declared
#: here so that the generated RBAC covers every request the manager makes.
SELF_SUBJECT_REVIEW_RBAC: Final[tuple[PolicyRule, ...]] = (
    rule(groups="authentication.k8s.io", resources="selfsubjectreviews", verbs="create"),
)


def manager_rbac(*, kueue_namespace: str = DEFAULT_NAMESPACE,
                 kueue_configmap: str = DEFAULT_CONFIGMAP_NAME,
                 webhook_configuration_name: str = WEBHOOK_CONFIGURATION_NAME
                 ) -> tuple[PolicyRule, ...]:
    """What the manager process needs for itself in-cluster (see the module docstring)."""
    return (*LEADER_ELECTION_RBAC, *cert_rbac(),
            *webhook_configuration_rbac(webhook_configuration_name),
            *kueue_config_rbac(kueue_namespace, kueue_configmap),
            *SELF_SUBJECT_REVIEW_RBAC, *reconciler_rbac.EVENTS_RBAC)


def integration_rbac(name: str) -> tuple[PolicyRule, ...]:
    """The ``RBAC`` the installed integration ``name`` declares."""
    return load_integration(name).rbac


def rules_for(integrations: Sequence[str], *, kueue_namespace: str = DEFAULT_NAMESPACE,
              kueue_configmap: str = DEFAULT_CONFIGMAP_NAME,
              webhook_configuration_name: str = WEBHOOK_CONFIGURATION_NAME
              ) -> tuple[PolicyRule, ...]:
    """Every rule a manager running ``integrations`` needs (not merged): the manager's own,
    the generic reconciler's and each integration's."""
    out: list[PolicyRule] = [*manager_rbac(kueue_namespace=kueue_namespace,
                                           kueue_configmap=kueue_configmap,
                                           webhook_configuration_name=webhook_configuration_name),
                             *reconciler_rbac.RBAC]
    for name in dict.fromkeys(integrations):
        out.extend(integration_rbac(name))
    return tuple(out)


def rbac_objects(rules: Sequence[PolicyRule], *, prefix: str, namespace: str,
                 service_account: str, labels: dict[str, str] | None = None) -> list[Object]:
    """The ClusterRole and ClusterRoleBinding of the cluster-wide rules; a Role and
    RoleBinding per namespace of the namespaced ones (``<prefix>-manager-role``); the
    Lease rules (:data:`LEADER_ELECTION_RBAC`) in a Role of their own
    (``<prefix>-leader-election-role``). All bound to ``service_account`` of
    ``namespace`` (the manager's)."""
    leader = set(LEADER_ELECTION_RBAC)
    manager_role = f"{prefix}-manager-role"
    out: list[Object] = [
        cluster_role(manager_role, cluster_rules(rules), labels=labels),
        cluster_role_binding(f"{prefix}-manager-rolebinding", manager_role, service_account,
                             namespace, labels=labels),
    ]
    for ns, scoped in namespaced_rules([r for r in rules if r not in leader],
                                       namespace).items():
        out.append(role(manager_role, ns, scoped, labels=labels))
        out.append(role_binding(f"{prefix}-manager-rolebinding", ns, manager_role,
                                service_account, namespace, labels=labels))
    election = namespaced_rules([r for r in rules if r in leader], namespace)
    for ns, scoped in election.items():
        out.append(role(f"{prefix}-leader-election-role", ns, scoped, labels=labels))
        out.append(role_binding(f"{prefix}-leader-election-rolebinding", ns,
                                f"{prefix}-leader-election-role", service_account, namespace,
                                labels=labels))
    return out


def user_roles(crds: Sequence[Object], *, prefix: str,
               labels: dict[str, str] | None = None) -> list[Object]:
    """An editor and a viewer ClusterRole for each of ``crds`` (``<prefix>-<plural>-editor``
    and ``-viewer``), aggregated as the module docstring says. Both read the status
    subresource when the CRD has one; neither writes it (that is the controllers')."""
    out: list[Object] = []
    for crd in crds:
        spec = crd["spec"]
        group, plural = str(spec["group"]), str(spec["names"]["plural"])
        has_status = any("status" in (v.get("subresources") or {})
                         for v in spec.get("versions") or [])
        status = ((rule(groups=group, resources=f"{plural}/status", verbs="get"),)
                  if has_status else ())
        for suffix, verbs, aggregate in (("editor", EDITOR_VERBS, AGGREGATE_TO_EDIT),
                                         ("viewer", VIEWER_VERBS, AGGREGATE_TO_VIEW)):
            out.append(cluster_role(
                f"{prefix}-{plural}-{suffix}",
                (rule(groups=group, resources=plural, verbs=verbs), *status),
                labels={**(labels or {}), **aggregate}))
    return out
