"""The AppWrapper controller's RBAC, as ``deploy render`` generates it, grants what upstream
v1.2.2's controller is granted on wrapped resources (its kubebuilder markers,
``config/rbac/role.yaml``), for the verbs our controller uses on them."""

from __future__ import annotations

from typing import Any, Final

import pytest

from integrations.appwrapper.rbac import COMPONENT_VERBS
from integrations.deploy.render import render

#: (group, resource) of every wrapped kind upstream v1.2.2's controller may create
#: (``appwrapper_controller.go``: "permission for wrapped resources").
UPSTREAM_COMPONENT_RESOURCES: Final = (
    ("", "pods"), ("", "services"),
    ("apps", "deployments"), ("apps", "statefulsets"),
    ("batch", "jobs"),
    ("scheduling.sigs.k8s.io", "podgroups"), ("scheduling.x-k8s.io", "podgroups"),
    ("kubeflow.org", "pytorchjobs"),
    ("ray.io", "rayclusters"), ("ray.io", "rayjobs"),
    ("jobset.x-k8s.io", "jobsets"),
)


def cluster_role_rules() -> list[dict[str, Any]]:
    """The rules of the ClusterRole ``deploy render`` writes for the AppWrapper manager."""
    (role,) = [o for o in render(["appwrapper"])["rbac.yaml"] if o["kind"] == "ClusterRole"]
    return list(role["rules"])


def granted(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in r.get("apiGroups", []) and resource in r.get("resources", [])
               and verb in r.get("verbs", []) for r in rules)


@pytest.mark.parametrize(("group", "resource"), UPSTREAM_COMPONENT_RESOURCES,
                         ids=[f"{g or 'core'}/{r}" for g, r in UPSTREAM_COMPONENT_RESOURCES])
def test_every_upstream_component_kind_is_granted(group: str, resource: str) -> None:
    """Create, read back and delete, for each of upstream's component kinds: a PodGroup
    component in either scheduler-plugins group is no longer Forbidden (issue #28,
    item 8)."""
    rules = cluster_role_rules()
    assert [v for v in COMPONENT_VERBS if not granted(rules, group, resource, v)] == []


def test_podgroups_are_granted_in_both_groups_only_for_components() -> None:
    """The PodGroup grants are exactly the component verbs, in both groups."""
    for group in ("scheduling.sigs.k8s.io", "scheduling.x-k8s.io"):
        verbs = {v for r in cluster_role_rules() if group in r.get("apiGroups", [])
                 and "podgroups" in r.get("resources", []) for v in r["verbs"]}
        assert verbs == set(COMPONENT_VERBS), group
