"""The admission chain: rules, mutation, denial, failure policy, selectors."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.testing import APIServer, InMemoryClient

from .conftest import CONFIGMAP, WIDGET, configmap, widget

Review = dict[str, Any]


def allow(review: Review, **response: Any) -> Review:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True, **response}}


def deny(review: Review, message: str, code: int | None = None) -> Review:
    status: dict[str, Any] = {"message": message}
    if code is not None:
        status["code"] = code
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": False,
                         "status": status}}


def json_patch(ops: list[dict[str, Any]]) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


async def test_mutating_then_validating_sees_mutation(server: APIServer,
                                                      client: InMemoryClient) -> None:
    seen: list[Review] = []

    async def default_color(review: Review) -> Review:
        return allow(review, **json_patch(
            [{"op": "add", "path": "/spec/color", "value": "blue"}]))

    async def validate(review: Review) -> Review:
        seen.append(review)
        return allow(review)

    rules = [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"],
              "resources": ["widgets"]}]
    server.add_validating_webhook(validate, name="v.example.com", rules=rules)
    server.add_mutating_webhook(default_color, name="m.example.com", rules=rules)
    created = await client.create(widget("w", size=1))
    assert created["spec"] == {"size": 1, "color": "blue"}
    request = seen[0]["request"]
    assert request["operation"] == "CREATE"
    assert request["object"]["spec"]["color"] == "blue"
    assert request["kind"] == {"group": "example.com", "version": "v1", "kind": "Widget"}
    assert request["resource"] == {"group": "example.com", "version": "v1",
                                   "resource": "widgets"}
    assert request["namespace"] == "default"
    assert request["oldObject"] is None
    assert request["userInfo"]["username"] == "admin"
    assert request["dryRun"] is False
    # The rules select CREATE only.
    await client.patch(WIDGET, "w", {"spec": {"size": 2}}, namespace="default")
    assert len(seen) == 1


async def test_denial_message_and_code(server: APIServer, client: InMemoryClient) -> None:
    async def no(review: Review) -> Review:
        return deny(review, "size must be small")

    async def forbidden(review: Review) -> Review:
        return deny(review, "not you", code=403)

    hook = server.add_validating_webhook(no, name="size.example.com")
    with pytest.raises(errors.BadRequest) as exc:
        await client.create(widget("w", size=100))
    assert exc.value.code == 400
    assert exc.value.message == (
        'admission webhook "size.example.com" denied the request: size must be small')
    server.remove_webhook(hook)
    server.add_validating_webhook(forbidden, name="who.example.com")
    with pytest.raises(errors.Forbidden) as exc2:
        await client.create(widget("w"))
    assert exc2.value.message == 'admission webhook "who.example.com" denied the request: not you'
    with pytest.raises(errors.NotFound):
        await client.get(WIDGET, "w", namespace="default")


async def test_update_review_has_old_object_and_status_rules(
    server: APIServer, client: InMemoryClient,
) -> None:
    reviews: list[Review] = []

    async def record(review: Review) -> Review:
        reviews.append(review["request"])
        return allow(review)

    server.add_validating_webhook(record, rules=[
        {"operations": ["UPDATE"], "resources": ["widgets/status"]}])
    obj = await client.create(widget("w", size=1))
    obj["spec"]["size"] = 2
    obj = await client.update(obj)
    assert reviews == []  # main resource not selected
    obj["status"] = {"phase": "Up"}
    await client.update_status(obj)
    assert len(reviews) == 1
    assert reviews[0]["subResource"] == "status"
    assert reviews[0]["oldObject"]["spec"]["size"] == 2
    assert reviews[0]["object"]["status"] == {"phase": "Up"}


async def test_delete_review(server: APIServer, client: InMemoryClient) -> None:
    reviews: list[Review] = []

    async def record(review: Review) -> Review:
        reviews.append(review["request"])
        return deny(review, "keep it") if len(reviews) == 1 else allow(review)

    server.add_validating_webhook(record, rules=[{"operations": ["DELETE"],
                                                  "resources": ["*"]}])
    await client.create(configmap("cm"))
    with pytest.raises(errors.BadRequest):
        await client.delete(CONFIGMAP, "cm", namespace="default")
    assert await client.get(CONFIGMAP, "cm", namespace="default")
    await client.delete(CONFIGMAP, "cm", namespace="default")
    assert reviews[0]["operation"] == "DELETE"
    assert reviews[0]["object"] is None
    assert reviews[0]["oldObject"]["metadata"]["name"] == "cm"
    assert reviews[0]["options"]["kind"] == "DeleteOptions"


async def test_failure_policy(server: APIServer, client: InMemoryClient) -> None:
    async def broken(review: Review) -> Review:
        raise ConnectionError("connection refused")

    hook = server.add_validating_webhook(broken, name="broken.example.com")
    with pytest.raises(errors.InternalError) as exc:
        await client.create(configmap("a"))
    assert exc.value.message.startswith(
        'Internal error occurred: failed calling webhook "broken.example.com"')
    server.remove_webhook(hook)
    server.add_validating_webhook(broken, failure_policy="Ignore")
    assert await client.create(configmap("a"))


async def test_response_uid_must_match(server: APIServer, client: InMemoryClient) -> None:
    async def wrong_uid(review: Review) -> Review:
        answer = allow(review)
        answer["response"]["uid"] = "something-else"
        return answer

    server.add_mutating_webhook(wrong_uid)
    with pytest.raises(errors.InternalError):
        await client.create(configmap("a"))


async def test_object_and_namespace_selectors(server: APIServer,
                                              client: InMemoryClient) -> None:
    calls: list[str] = []

    async def record(review: Review) -> Review:
        calls.append(review["request"]["name"])
        return allow(review)

    server.add_validating_webhook(record, object_selector={"matchLabels": {"hook": "yes"}})
    server.add_validating_webhook(
        record, name="ns.example.com",
        namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": "other"}})
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "other"}})
    calls.clear()
    labelled = configmap("labelled")
    labelled["metadata"]["labels"] = {"hook": "yes"}
    await client.create(labelled)
    await client.create(configmap("plain"))
    await client.create(configmap("elsewhere", "other"))
    assert calls == ["labelled", "elsewhere"]


async def test_generate_name_is_empty_for_mutating_webhooks(
    server: APIServer, client: InMemoryClient,
) -> None:
    names: list[tuple[bool, str]] = []

    async def mutating(review: Review) -> Review:
        names.append((True, review["request"]["name"]))
        return allow(review)

    async def validating(review: Review) -> Review:
        names.append((False, review["request"]["name"]))
        return allow(review)

    server.add_mutating_webhook(mutating)
    server.add_validating_webhook(validating)
    obj = configmap("")
    obj["metadata"] = {"generateName": "g-", "namespace": "default"}
    created = await client.create(obj)
    assert names == [(True, ""), (False, created["metadata"]["name"])]


async def test_warnings_are_recorded(server: APIServer, client: InMemoryClient) -> None:
    async def warn(review: Review) -> Review:
        return allow(review, warnings=["deprecated field"])

    server.add_validating_webhook(warn)
    await client.create(configmap("a"))
    assert server.admission.warnings == ["deprecated field"]
