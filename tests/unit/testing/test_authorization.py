"""``jobframework.testing.authorization``: SubjectAccessReviews answered from test rules."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer
from jobframework.testing.authorization import (
    SUBJECT_ACCESS_REVIEW_GVK,
    AccessRule,
    Authorizer,
    AuthorizingClient,
)


def review(user: str, verb: str, resource: str, *, group: str = "", namespace: str = "ns",
           groups: tuple[str, ...] = (), subresource: str = "") -> dict[str, Any]:
    attrs: dict[str, Any] = {"namespace": namespace, "verb": verb, "group": group,
                             "version": "v1", "resource": resource}
    if subresource:
        attrs["subresource"] = subresource
    return {"apiVersion": SUBJECT_ACCESS_REVIEW_GVK.api_version,
            "kind": SUBJECT_ACCESS_REVIEW_GVK.kind, "metadata": {},
            "spec": {"user": user, "groups": list(groups), "resourceAttributes": attrs}}


def allowed(authorizer: Authorizer, sar: dict[str, Any]) -> bool:
    return bool(authorizer.review(sar)["status"]["allowed"])


def test_no_rules_allows_everything_unless_told_otherwise() -> None:
    assert allowed(Authorizer(), review("anyone", "delete", "secrets"))
    assert not allowed(Authorizer(allow_all=False), review("anyone", "get", "pods"))


def test_rules_match_user_or_group_verb_group_resource_namespace() -> None:
    authorizer = Authorizer([
        AccessRule(users="alice", verbs=("create", "get"), api_groups="", resources="pods"),
        AccessRule(groups="admins"),
        AccessRule(users="bob", api_groups="apps", resources="deployments", namespaces="team"),
    ])
    assert allowed(authorizer, review("alice", "create", "pods"))
    assert not allowed(authorizer, review("alice", "delete", "pods"))
    assert not allowed(authorizer, review("alice", "create", "pods", group="apps"))
    assert not allowed(authorizer, review("alice", "create", "pods", subresource="exec"))
    assert allowed(authorizer, review("carol", "delete", "nodes", groups=("admins",)))
    assert allowed(authorizer, review("bob", "create", "deployments", group="apps",
                                      namespace="team"))
    assert not allowed(authorizer, review("bob", "create", "deployments", group="apps"))
    no_resource = review("alice", "create", "pods")
    del no_resource["spec"]["resourceAttributes"]
    assert not allowed(authorizer, no_resource), "non-resource requests are not modelled"
    assert [r["user"] for r in authorizer.reviews][:2] == ["alice", "alice"]


async def test_client_answers_reviews_and_passes_the_rest_through() -> None:
    server = APIServer(ManualClock())
    inner = server.client()
    authorizer = Authorizer([AccessRule(users="alice", resources="pods")])
    client = AuthorizingClient(inner, authorizer)
    out = await client.create(review("alice", "create", "pods"))
    assert out["status"]["allowed"] is True
    assert out["spec"]["user"] == "alice"
    cm = await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "c", "namespace": "default"}})
    assert cm["metadata"]["name"] == "c"
    got = await client.get(GVK("", "v1", "ConfigMap"), "c", namespace="default")
    assert got["metadata"]["uid"] == cm["metadata"]["uid"]
    authorizer.error = RuntimeError("unreachable")
    with pytest.raises(RuntimeError, match="unreachable"):
        await client.create(review("alice", "create", "pods"))
