"""``jobframework.rbac``: typed rules, controller-gen-like merging, rendering."""

from __future__ import annotations

import itertools

import pytest

from jobframework.rbac import (
    MANAGER_NAMESPACE,
    READ,
    PolicyRule,
    cluster_role,
    cluster_role_binding,
    merge_rules,
    namespaced_rules,
    role,
    role_binding,
    rule,
)
from jobframework.reconciler_rbac import RBAC, job_rbac
from jobframework.runtime.objects import GVK


def test_rule_takes_strings_or_sequences() -> None:
    r = rule(groups="batch", resources=["jobs", "jobs/status"], verbs=("get", "update"))
    assert r == PolicyRule(("batch",), ("jobs", "jobs/status"), ("get", "update"))
    assert r.cluster_wide
    assert r.to_dict() == {"apiGroups": ["batch"], "resources": ["jobs", "jobs/status"],
                           "verbs": ["get", "update"]}


def test_unknown_verbs_are_named() -> None:
    with pytest.raises(ValueError, match="'gett'") as info:
        rule(groups="", resources="pods", verbs=["gett", "list"])
    assert "known: get, list, watch" in str(info.value)
    with pytest.raises(ValueError, match="'escalate', '\\*'"):
        rule(groups="", resources="pods", verbs=["escalate", "*"])
    with pytest.raises(ValueError, match="at least one verb"):
        rule(groups="", resources="pods", verbs=[])


def test_invalid_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one of resources"):
        rule(groups="", resources=[], verbs="get")
    with pytest.raises(ValueError, match="at least one of groups"):
        rule(groups=[], resources="pods", verbs="get")
    with pytest.raises(ValueError, match="cannot restrict create"):
        rule(groups="", resources="secrets", verbs=["get", "create"], resource_names="cert")
    with pytest.raises(ValueError, match="invalid namespace"):
        rule(groups="", resources="secrets", verbs="get", namespace="Not_A_Namespace")


def test_allows_follows_rbac() -> None:
    pods = rule(groups="", resources=["pods", "pods/status"], verbs=READ)
    assert pods.allows("list", "", "pods")
    assert pods.allows("get", "", "pods/status", namespace="ns")
    assert not pods.allows("delete", "", "pods")
    assert not pods.allows("get", "apps", "pods")
    named = rule(groups="", resources="configmaps", verbs="get", resource_names="cfg",
                 namespace="kueue-system")
    assert named.allows("get", "", "configmaps", name="cfg", namespace="kueue-system")
    assert not named.allows("get", "", "configmaps", name="other", namespace="kueue-system")
    assert not named.allows("get", "", "configmaps", name="cfg", namespace="default")
    assert not named.allows("get", "", "configmaps", name="cfg")  # all namespaces
    own = rule(groups="coordination.k8s.io", resources="leases", verbs="get",
               namespace=MANAGER_NAMESPACE)
    assert own.allows("get", "coordination.k8s.io", "leases", namespace="mine",
                      manager_namespace="mine")
    assert not own.allows("get", "coordination.k8s.io", "leases", namespace="other",
                          manager_namespace="mine")


def test_merge_deduplicates_and_combines_verbs() -> None:
    merged = merge_rules([
        rule(groups="batch", resources="jobs", verbs=["watch", "get"]),
        rule(groups="batch", resources="jobs", verbs=["list", "get"]),
        rule(groups=["batch", ""], resources="jobs", verbs="create"),
        rule(groups="", resources="pods", verbs=["get", "list", "watch", "create"]),
    ])
    assert [r.to_dict() for r in merged] == [
        # Resources of one group with the same verbs are joined; verbs in VERBS order.
        {"apiGroups": [""], "resources": ["jobs"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create"]},
        {"apiGroups": ["batch"], "resources": ["jobs"],
         "verbs": ["get", "list", "watch", "create"]},
    ]


def test_merge_joins_resources_and_drops_subsumed_names() -> None:
    merged = merge_rules([
        rule(groups="x.io", resources="as", verbs=["get", "update"]),
        rule(groups="x.io", resources="bs", verbs=["update", "get"]),
        rule(groups="x.io", resources="as", verbs=["update", "patch"], resource_names="one"),
    ])
    assert [r.to_dict() for r in merged] == [
        {"apiGroups": ["x.io"], "resources": ["as", "bs"], "verbs": ["get", "update"]},
        {"apiGroups": ["x.io"], "resources": ["as"], "resourceNames": ["one"],
         "verbs": ["patch"]},
    ]


def test_merge_is_independent_of_the_order_of_declarations() -> None:
    rules = [*RBAC, *job_rbac(GVK("a.io", "v1", "A"), "as"),
             rule(groups="", resources="secrets", verbs="get", namespace=MANAGER_NAMESPACE),
             rule(groups="", resources="configmaps", verbs="get", namespace="kueue-system")]
    first = merge_rules(rules)
    for perm in itertools.islice(itertools.permutations(rules), 0, 200, 7):
        assert merge_rules(perm) == first
    assert merge_rules(first) == first, "merging is idempotent"
    # Scopes sort cluster-wide first, then the manager's namespace, then named ones.
    assert [r.namespace for r in first][-2:] == [MANAGER_NAMESPACE, "kueue-system"]


def test_scopes_never_merge_into_each_other() -> None:
    rules = [rule(groups="", resources="secrets", verbs="get"),
             rule(groups="", resources="secrets", verbs="get", namespace=MANAGER_NAMESPACE)]
    assert len(merge_rules(rules)) == 2
    assert namespaced_rules(rules, "mine") == {
        "mine": (rule(groups="", resources="secrets", verbs="get", namespace="mine"),)}


def test_rendering() -> None:
    cluster = [rule(groups="", resources="pods", verbs="get")]
    assert cluster_role("r", cluster, labels={"a": "b"}) == {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "r", "labels": {"a": "b"}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    with pytest.raises(ValueError, match="secrets in @manager"):
        cluster_role("r", [*cluster, rule(groups="", resources="secrets", verbs="get",
                                          namespace=MANAGER_NAMESPACE)])
    assert role("r", "ns", [rule(groups="", resources="secrets", verbs="get",
                                 namespace=MANAGER_NAMESPACE)])["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    binding = role_binding("b", "kueue-system", "r", "sa", "ns")
    assert binding["metadata"] == {"name": "b", "namespace": "kueue-system"}
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "r"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]
    assert cluster_role_binding("b", "r", "sa", "ns")["roleRef"]["kind"] == "ClusterRole"


def test_job_rbac() -> None:
    rules = merge_rules(job_rbac(GVK("x.io", "v1", "Thing"), "things"))
    assert [r.to_dict() for r in rules] == [
        {"apiGroups": ["x.io"], "resources": ["things"],
         "verbs": ["get", "list", "watch", "update", "patch", "delete"]},
        {"apiGroups": ["x.io"], "resources": ["things/finalizers"], "verbs": ["update"]},
        {"apiGroups": ["x.io"], "resources": ["things/status"], "verbs": ["update", "patch"]},
    ]
    narrow = merge_rules(job_rbac(GVK("x.io", "v1", "Thing"), "things", update=False,
                                  status_verbs=()))
    assert [r.to_dict() for r in narrow] == [
        {"apiGroups": ["x.io"], "resources": ["things"],
         "verbs": ["get", "list", "watch", "patch", "delete"]},
        {"apiGroups": ["x.io"], "resources": ["things/finalizers"], "verbs": ["update"]},
    ]
