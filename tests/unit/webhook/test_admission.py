"""AdmissionReview v1 types, response builders, JSON patches and review()."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobframework.runtime.objects import GroupVersionKind, GroupVersionResource
from jobframework.webhook import (
    AdmissionRequest,
    AdmissionResponse,
    HandlerFunc,
    MalformedReview,
    Operation,
    admission_hook,
    allowed,
    create_patch,
    denied,
    errored,
    patch_response_from_raw,
    patched,
    review,
)

# What kube-apiserver sends for `kubectl create job` (trimmed to the interesting parts).
APISERVER_REVIEW: dict[str, Any] = {
    "kind": "AdmissionReview",
    "apiVersion": "admission.k8s.io/v1",
    "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "requestKind": {"group": "batch", "version": "v1", "kind": "Job"},
        "requestResource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "name": "pi",
        "namespace": "default",
        "operation": "CREATE",
        "userInfo": {"username": "admin", "uid": "014fbff9a07c", "groups": ["system:authenticated"],
                     "extra": {"scopes": ["a", "b"]}},
        "object": {"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": "pi", "namespace": "default"}, "spec": {}},
        "oldObject": None,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    },
}


def test_request_parses_what_the_apiserver_sends() -> None:
    req = AdmissionRequest.from_dict(APISERVER_REVIEW["request"])
    assert req.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert req.kind == GroupVersionKind("batch", "v1", "Job")
    assert req.resource == GroupVersionResource("batch", "v1", "jobs")
    assert req.request_kind == req.kind
    assert req.operation is Operation.CREATE
    assert (req.name, req.namespace) == ("pi", "default")
    assert req.user_info.username == "admin"
    assert req.user_info.groups == ("system:authenticated",)
    assert req.user_info.extra == {"scopes": ("a", "b")}
    assert req.object is not None and req.object["metadata"]["name"] == "pi"
    assert req.old_object is None
    assert req.dry_run is False
    assert req.options == {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    # to_dict is the same JSON minus the explicit null.
    expected = {k: v for k, v in APISERVER_REVIEW["request"].items() if v is not None}
    assert req.to_dict() == expected


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("uid"), "request.uid is required"),
        (lambda r: r.update(operation="PATCH"), "request.operation 'PATCH' is not one of"),
        (lambda r: r.pop("kind"), "request.kind is required"),
        (lambda r: r.pop("resource"), "request.resource is required"),
        (lambda r: r.update(object="not-an-object"), "request.object must be a JSON object"),
        (lambda r: r.update(name=3), "request.name must be a string"),
        (lambda r: r.update(dryRun="yes"), "request.dryRun must be a boolean"),
        (lambda r: r["userInfo"].update(groups="g"), "request.userInfo.groups must be a list"),
    ],
)
def test_malformed_requests_say_what_is_wrong(mutate: Any, message: str) -> None:
    data = json.loads(json.dumps(APISERVER_REVIEW["request"]))
    mutate(data)
    with pytest.raises(MalformedReview, match=message.replace("(", r"\(")):
        AdmissionRequest.from_dict(data)


def test_for_object_takes_identity_from_the_object(job: Any) -> None:
    obj = job("j1")
    req = AdmissionRequest.for_object("DELETE", None, obj,
                                      resource=GroupVersionResource("batch", "v1", "jobs"),
                                      uid="u")
    assert (req.name, req.namespace, req.operation) == ("j1", "ns", Operation.DELETE)
    assert req.kind == GroupVersionKind("batch", "v1", "Job")
    obj["metadata"]["name"] = "changed"
    assert req.old_object is not None and req.old_object["metadata"]["name"] == "j1"
    with pytest.raises(ValueError, match="needs an object"):
        AdmissionRequest.for_object("CREATE", resource=req.resource, uid="u")


def test_response_builders_match_controller_runtime() -> None:
    assert allowed().result == {"code": 200}
    assert allowed("ok", warnings=["w"]).to_dict() == {
        "uid": "", "allowed": True, "status": {"code": 200, "message": "ok"}, "warnings": ["w"]}
    d = denied("no")
    assert (d.allowed, d.code, d.reason, d.message) == (False, 403, "Forbidden", "no")
    d2 = denied("gone", code=404, reason="NotFound")
    assert (d2.code, d2.reason) == (404, "NotFound")
    e = errored(400, ValueError("bad"))
    assert e.result == {"code": 400, "message": "bad"}
    assert e.reason == ""


def test_complete_echoes_uid_defaults_code_and_types_the_patch(make_request: Any,
                                                               job: Any) -> None:
    req = make_request("CREATE", job())
    resp = patched("", {"op": "add", "path": "/spec/suspend", "value": True})
    resp = AdmissionResponse(allowed=True, patches=resp.patches).complete(req)
    assert resp.uid == req.uid
    assert resp.result == {"code": 200}
    assert resp.patch_type == "JSONPatch"
    out = resp.to_dict()
    assert json.loads(base64.b64decode(out["patch"])) == [
        {"op": "add", "path": "/spec/suspend", "value": True}]
    assert out["patchType"] == "JSONPatch"
    # A result with a code keeps it.
    assert denied("x").complete(req).code == 403
    # Round trip through the wire form.
    assert AdmissionResponse.from_dict(out) == resp


def test_response_from_dict_rejects_garbage() -> None:
    with pytest.raises(MalformedReview, match="allowed must be a boolean"):
        AdmissionResponse.from_dict({"uid": "x"})
    with pytest.raises(MalformedReview, match="not base64 JSON"):
        AdmissionResponse.from_dict({"allowed": True, "patch": "!!!"})


def test_patch_response_from_raw_applies_to_the_original(job: Any) -> None:
    original = job()
    raw = json.dumps(original).encode()
    mutated = json.loads(raw)
    mutated["spec"]["suspend"] = True
    mutated["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "user-queue"
    del mutated["spec"]["parallelism"]
    resp = patch_response_from_raw(raw, mutated)
    assert resp.allowed and resp.patch_type == "JSONPatch"
    assert {op["op"] for op in resp.patches} == {"add", "remove"}
    assert resp.apply_patch(original) == mutated
    # No differences: no patch, no patchType.
    same = patch_response_from_raw(original, json.loads(raw))
    assert same.patches == () and same.patch_type is None
    assert "patch" not in same.complete(None).to_dict()


def test_patch_response_from_raw_with_bad_json_is_a_500() -> None:
    resp = patch_response_from_raw(b"{not json", {})
    assert (resp.allowed, resp.code) == (False, 500)


def test_create_patch_never_moves() -> None:
    # python-jsonpatch would emit "move" here; Go's jsonpatch (and a remove filter) want
    # remove + add.
    src = {"a": {"deep": [1, 2, 3]}, "list": ["x", "y", "z"]}
    dst = {"b": {"deep": [1, 2, 3]}, "list": ["z", "x", "y"]}
    ops = create_patch(src, dst)
    assert {op["op"] for op in ops} <= {"add", "remove", "replace"}
    assert {"op": "remove", "path": "/a"} in ops
    assert jsonpatch.apply_patch(src, ops) == dst


def test_moves_from_older_jsonpatch_releases_are_expanded() -> None:
    from jobframework.webhook.admission import _expand_moves

    src = {"a": {"deep": [1, 2, 3]}, "keep": 1}
    dst = {"b": {"deep": [1, 2, 3]}, "keep": 1}
    optimized = jsonpatch.JsonPatch.from_diff(src, dst).patch  # what 1.33 emits
    assert any(op["op"] == "move" for op in optimized)
    ops = _expand_moves(src, optimized)
    assert ops == [{"op": "remove", "path": "/a"},
                   {"op": "add", "path": "/b", "value": {"deep": [1, 2, 3]}}]
    assert jsonpatch.apply_patch(src, ops) == dst


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["a", "b", "~/"]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["a", "b", "c", "x/y", "~0"]), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(json_values, json_values)
def test_create_patch_turns_any_document_into_any_other(src: Any, dst: Any) -> None:
    ops = create_patch(src, dst)
    assert all(op["op"] in ("add", "remove", "replace") for op in ops)
    assert jsonpatch.apply_patch(src, ops) == dst
    assert json.dumps(jsonpatch.apply_patch(src, ops), sort_keys=True) == json.dumps(
        dst, sort_keys=True)


async def echo_handler(req: AdmissionRequest) -> AdmissionResponse:
    return allowed(f"{req.operation} {req.name}")


async def test_review_echoes_uid_and_version() -> None:
    handler = HandlerFunc(echo_handler)
    status, out = await review(handler, APISERVER_REVIEW)
    assert status == 200
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"] == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True,
                               "status": {"code": 200, "message": "CREATE pi"}}
    v1beta1 = dict(APISERVER_REVIEW, apiVersion="admission.k8s.io/v1beta1")
    status, out = await review(handler, v1beta1)
    assert (status, out["apiVersion"]) == (200, "admission.k8s.io/v1beta1")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([1, 2], "must be a JSON object"),
        ({"apiVersion": "v1", "kind": "Pod"}, "expected an admission.k8s.io/v1 AdmissionReview"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "has no request"),
        ({"kind": "AdmissionReview", "request": {"uid": "u1", "operation": "CREATE"}},
         "request.kind is required"),
    ],
)
async def test_review_of_malformed_bodies_is_a_400(body: Any, message: str) -> None:
    status, out = await review(HandlerFunc(echo_handler), body)
    assert status == 400
    assert out["apiVersion"] == "admission.k8s.io/v1"
    resp = out["response"]
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 400
    assert message in resp["status"]["message"]
    if isinstance(body, dict) and "request" in body:
        assert resp["uid"] == "u1"


def deep_list(depth: int) -> list[Any]:
    """A list nested ``depth`` deep, built without recursion (``repr`` of it would not be)."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("where", ["apiVersion", "kind", "operation"])
async def test_review_never_prints_arbitrary_json(where: str) -> None:
    """A decoded body nesting 100,000 levels where a string belongs: formatting it into
    the message raised RecursionError; now the value's JSON type is named, in a 400."""
    request: dict[str, Any] = {"uid": "u1", "operation": "CREATE"}
    body: dict[str, Any] = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                            "request": request}
    (request if where == "operation" else body)[where] = deep_list(100_000)
    status, out = await review(HandlerFunc(echo_handler), body)
    assert status == 400
    message = out["response"]["status"]["message"]
    assert message == ("request.operation <list> is not one of CREATE, UPDATE, DELETE, "
                       "CONNECT" if where == "operation" else
                       "apiVersion and kind must be strings")
    assert out["response"]["uid"] == "u1"


async def test_review_quotes_a_long_string_cut_short() -> None:
    body = {"kind": "AdmissionReview", "request": {"uid": "u1", "operation": "x" * 10_000}}
    status, out = await review(HandlerFunc(echo_handler), body)
    assert status == 400
    assert out["response"]["status"]["message"] == (
        f"request.operation {'x' * 64 + '...'!r} is not one of CREATE, UPDATE, DELETE, "
        "CONNECT")


async def test_a_raising_handler_is_a_500_with_the_uid() -> None:
    async def boom(req: AdmissionRequest) -> AdmissionResponse:
        raise RuntimeError("kaput")

    status, out = await review(HandlerFunc(boom), APISERVER_REVIEW)
    assert status == 200
    assert out["response"]["uid"] == APISERVER_REVIEW["request"]["uid"]
    assert out["response"]["allowed"] is False
    assert out["response"]["status"] == {"code": 500,
                                         "message": "handler raised RuntimeError: kaput"}


async def test_admission_hook_isolates_the_callers_dict() -> None:
    seen: list[AdmissionRequest] = []

    async def grab(req: AdmissionRequest) -> AdmissionResponse:
        seen.append(req)
        assert req.object is not None
        req.object["spec"]["mutated"] = True
        return allowed()

    body = json.loads(json.dumps(APISERVER_REVIEW))
    out = await admission_hook(HandlerFunc(grab))(body)
    assert out["response"]["allowed"] is True
    assert body == APISERVER_REVIEW
