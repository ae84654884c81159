"""The editor and viewer ClusterRoles ``deploy render`` ships for each CRD (docs/deploy.md,
"Roles for the kinds' users")."""

from __future__ import annotations

from typing import Any

from integrations.deploy import render
from integrations.deploy.rbac import user_roles

EDIT = "rbac.authorization.k8s.io/aggregate-to-edit"
VIEW = "rbac.authorization.k8s.io/aggregate-to-view"
ADMIN = "rbac.authorization.k8s.io/aggregate-to-admin"
BATCH_USER = "rbac.kueue.x-k8s.io/batch-user"
BATCH_ADMIN = "rbac.kueue.x-k8s.io/batch-admin"


def _crd(group: str, plural: str, *, status: bool) -> dict[str, Any]:
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True}
    if status:
        version["subresources"] = {"status": {}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "names": {"plural": plural, "kind": plural.title()},
                     "scope": "Namespaced", "versions": [version]}}


def _grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
            for r in rule["resources"] for v in rule["verbs"]}


def test_every_crd_of_the_render_gets_an_editor_and_a_viewer_aggregated_by_label() -> None:
    files = render()
    roles = {r["metadata"]["name"]: r for r in files["user-roles.yaml"]}
    crds = files["crds.yaml"]
    assert len(roles) == 2 * len(crds)
    for crd in crds:
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        editor = roles[f"kueue-jobframework-{plural}-editor"]
        viewer = roles[f"kueue-jobframework-{plural}-viewer"]
        assert _grants(editor) == {(group, plural, v) for v in (
            "create", "delete", "get", "list", "patch", "update", "watch")} | {
            (group, f"{plural}/status", "get")}
        assert _grants(viewer) == {(group, plural, v) for v in ("get", "list", "watch")} | {
            (group, f"{plural}/status", "get")}
        labels = editor["metadata"]["labels"]
        assert {EDIT, ADMIN, BATCH_USER, BATCH_ADMIN} <= set(labels) and VIEW not in labels
        assert {VIEW, EDIT, ADMIN, BATCH_USER, BATCH_ADMIN} <= set(viewer["metadata"]["labels"])
    assert "user-roles.yaml" in files["kustomization.yaml"][0]["resources"]


def test_a_crd_without_status_gets_no_status_grant() -> None:
    editor, viewer = user_roles([_crd("example.com", "widgets", status=False)], prefix="p")
    assert editor["metadata"]["name"] == "p-widgets-editor"
    assert {r for _, r, _ in _grants(editor) | _grants(viewer)} == {"widgets"}


def test_integrations_without_crds_render_no_user_roles() -> None:
    files = render(("batchjob",))
    assert "user-roles.yaml" not in files
    assert "user-roles.yaml" not in files["kustomization.yaml"][0]["resources"]
