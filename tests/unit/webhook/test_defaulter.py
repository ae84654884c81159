"""with_custom_defaulter: controller-runtime's defaulting handler for dict (and typed) objects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobframework.runtime import errors
from jobframework.runtime.objects import GroupVersionResource
from jobframework.webhook import (
    AdmissionRequest,
    JsonPatchOperation,
    PatchContext,
    with_custom_defaulter,
)

JOBS_GVR = GroupVersionResource("example.com", "v1", "things")


class SuspendDefaulter:
    """Suspends jobs and adds a queue label, like Kueue's job webhook."""

    def __init__(self) -> None:
        self.calls: list[AdmissionRequest] = []

    async def default(self, obj: dict[str, Any], request: AdmissionRequest) -> None:
        self.calls.append(request)
        obj["spec"]["suspend"] = True
        obj["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "user-queue"


class FnDefaulter:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    async def default(self, obj: Any, request: AdmissionRequest) -> None:
        self.fn(obj)


async def test_patch_applies_to_give_the_defaulted_object(make_request: Any, job: Any) -> None:
    obj = job()
    defaulter = SuspendDefaulter()
    resp = await with_custom_defaulter(defaulter).handle(make_request("CREATE", obj))
    assert resp.allowed and resp.patch_type == "JSONPatch"
    expected = job()
    expected["spec"]["suspend"] = True
    expected["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "user-queue"
    assert resp.apply_patch(obj) == expected
    # Only additions: the unknown spec.futureField is never touched.
    assert sorted(op["path"] for op in resp.patches) == [
        "/metadata/labels/kueue.x-k8s.io~1queue-name", "/spec/suspend"]
    assert all(op["op"] == "add" for op in resp.patches)
    assert defaulter.calls[0].user_info.username == "alice"


async def test_request_object_is_not_mutated(make_request: Any, job: Any) -> None:
    req = make_request("CREATE", job())
    await with_custom_defaulter(SuspendDefaulter()).handle(req)
    assert req.object == job()


async def test_unchanged_object_gets_no_patch(make_request: Any, job: Any) -> None:
    resp = await with_custom_defaulter(FnDefaulter(lambda o: None)).handle(
        make_request("CREATE", job()))
    assert resp.allowed and resp.patches == () and resp.patch_type is None


async def test_delete_is_allowed_without_defaulting(make_request: Any, job: Any) -> None:
    defaulter = SuspendDefaulter()
    resp = await with_custom_defaulter(defaulter).handle(make_request("DELETE", None, job()))
    assert (resp.allowed, resp.result, resp.patches) == (True, {"code": 200}, ())
    assert defaulter.calls == []


async def test_update_defaults_the_new_object(make_request: Any, job: Any) -> None:
    resp = await with_custom_defaulter(SuspendDefaulter()).handle(
        make_request("UPDATE", job(parallelism=3), job()))
    assert resp.apply_patch(job(parallelism=3))["spec"] == {
        "parallelism": 3, "futureField": {"keep": ["me"]}, "suspend": True}


async def test_missing_object_is_a_400(make_request: Any, job: Any) -> None:
    req = make_request("CREATE", job())
    req = AdmissionRequest(uid=req.uid, kind=req.kind, resource=req.resource,
                           operation=req.operation)
    resp = await with_custom_defaulter(SuspendDefaulter()).handle(req)
    assert (resp.allowed, resp.code, resp.message) == (False, 400, "there is no content to decode")


async def test_api_error_denies_with_its_status(make_request: Any, job: Any) -> None:
    def fail(obj: Any) -> None:
        raise errors.new_not_found("namespaces", "ns")

    resp = await with_custom_defaulter(FnDefaulter(fail)).handle(make_request("CREATE", job()))
    assert (resp.allowed, resp.code, resp.reason) == (False, 404, "NotFound")
    assert resp.message == 'namespaces "ns" not found'


async def test_other_exceptions_deny_with_403(make_request: Any, job: Any) -> None:
    def fail(obj: Any) -> None:
        raise ValueError("failed to get namespace: boom")

    resp = await with_custom_defaulter(FnDefaulter(fail)).handle(make_request("CREATE", job()))
    assert resp.result == {"code": 403, "reason": "Forbidden",
                           "message": "failed to get namespace: boom"}


async def test_real_deletions_by_a_dict_defaulter_are_kept(make_request: Any, job: Any) -> None:
    def strip(obj: Any) -> None:
        del obj["spec"]["futureField"]

    resp = await with_custom_defaulter(FnDefaulter(strip)).handle(make_request("CREATE", job()))
    assert list(resp.patches) == [{"op": "remove", "path": "/spec/futureField"}]


class KnownFieldsCodec:
    """A typed model that only knows some fields (decoding drops the rest)."""

    KNOWN = ("apiVersion", "kind", "metadata", "foo")

    def decode(self, raw: dict[str, Any]) -> dict[str, Any]:
        if "broken" in raw:
            raise ValueError("cannot decode: broken")
        return {k: v for k, v in raw.items() if k in self.KNOWN}

    def encode(self, obj: dict[str, Any]) -> dict[str, Any]:
        return dict(obj)


def _set_foo(obj: Any) -> None:
    obj["foo"] = "bar"


async def test_codec_round_trip_removals_are_dropped(make_request: Any) -> None:
    # Kueue's LosslessDefaulter test vector: raw {"baz": "qux"}, the defaulter sets foo.
    raw = {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}, "baz": "qux"}
    handler = with_custom_defaulter(FnDefaulter(_set_foo), codec=KnownFieldsCodec())
    resp = await handler.handle(make_request("CREATE", raw))
    assert list(resp.patches) == [{"op": "add", "path": "/foo", "value": "bar"}]
    assert resp.apply_patch(raw)["baz"] == "qux"


async def test_remove_unknown_or_omitted_fields_keeps_them(make_request: Any) -> None:
    raw = {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}, "baz": "qux"}
    handler = with_custom_defaulter(FnDefaulter(_set_foo), codec=KnownFieldsCodec(),
                                    remove_unknown_or_omitted_fields=True)
    resp = await handler.handle(make_request("CREATE", raw))
    assert sorted((op["op"], op["path"]) for op in resp.patches) == [
        ("add", "/foo"), ("remove", "/baz")]


async def test_codec_only_removals_leave_no_patch(make_request: Any) -> None:
    raw = {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}, "baz": "qux"}
    handler = with_custom_defaulter(FnDefaulter(lambda o: None), codec=KnownFieldsCodec())
    resp = await handler.handle(make_request("CREATE", raw))
    assert resp.allowed and resp.patches == () and resp.patch_type is None


async def test_decode_failure_is_a_400(make_request: Any) -> None:
    raw = {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}, "broken": True}
    handler = with_custom_defaulter(FnDefaulter(_set_foo), codec=KnownFieldsCodec())
    resp = await handler.handle(make_request("CREATE", raw))
    assert (resp.allowed, resp.code, resp.message) == (False, 400, "cannot decode: broken")


def drop_removes(ops: Sequence[JsonPatchOperation], ctx: PatchContext) -> list[JsonPatchOperation]:
    return [op for op in ops if op["op"] != "remove"]


async def test_patch_filter_has_the_last_word(make_request: Any, job: Any) -> None:
    seen: list[PatchContext] = []

    def recording(ops: Sequence[JsonPatchOperation], ctx: PatchContext) -> Any:
        seen.append(ctx)
        return drop_removes(ops, ctx)

    def replace_and_strip(obj: Any) -> None:
        del obj["spec"]["futureField"]
        obj["spec"]["suspend"] = True

    req = make_request("CREATE", job())
    resp = await with_custom_defaulter(FnDefaulter(replace_and_strip),
                                       patch_filter=recording).handle(req)
    assert list(resp.patches) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    ctx = seen[0]
    assert ctx.request is req
    assert ctx.original == job() and ctx.round_tripped == job()
    assert "futureField" not in ctx.defaulted["spec"]


async def test_filter_removing_everything_clears_the_patch_type(make_request: Any,
                                                                job: Any) -> None:
    def strip(obj: Any) -> None:
        del obj["spec"]["futureField"]

    resp = await with_custom_defaulter(FnDefaulter(strip), patch_filter=drop_removes).handle(
        make_request("CREATE", job()))
    assert resp.allowed and resp.patches == () and resp.patch_type is None
    assert "patchType" not in resp.complete(None).to_dict()


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE", "CONNECT"])
async def test_non_delete_operations_are_defaulted(operation: str, make_request: Any,
                                                   job: Any) -> None:
    old = job() if operation == "UPDATE" else None
    resp = await with_custom_defaulter(SuspendDefaulter()).handle(
        make_request(operation, job(), old))
    assert any(op["path"] == "/spec/suspend" for op in resp.patches)


keys = st.sampled_from(["a", "b", "c/d", "e~f"])
leaves = st.none() | st.booleans() | st.integers(-2, 2) | st.text("xy", max_size=2)
documents = st.recursive(leaves, lambda kids: st.dictionaries(keys, kids, max_size=3)
                         | st.lists(kids, max_size=3), max_leaves=10)
edits = st.lists(st.tuples(st.lists(keys, min_size=1, max_size=3),
                           st.one_of(st.just("delete"), documents)), max_size=4)


def _edit(obj: dict[str, Any], path: list[str], value: Any) -> None:
    node: Any = obj
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    if value == "delete":
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(keys, documents, max_size=4), edits)
async def test_any_defaulting_round_trips_through_the_patch(
    spec: dict[str, Any], changes: list[tuple[list[str], Any]]
) -> None:
    obj = {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec}
    expected = jsonpatch.apply_patch(obj, [])
    for path, value in changes:
        _edit(expected["spec"], path, value)

    def apply_edits(o: Any) -> None:
        for path, value in changes:
            _edit(o["spec"], path, value)

    req = AdmissionRequest.for_object("CREATE", obj, resource=JOBS_GVR, uid="u")
    resp = await with_custom_defaulter(FnDefaulter(apply_edits)).handle(req)
    assert resp.apply_patch(obj) == expected
    assert (resp.patch_type is None) == (resp.patches == ())
    # With removals filtered out, nothing the object had is lost.
    kept = await with_custom_defaulter(FnDefaulter(apply_edits),
                                       patch_filter=drop_removes).handle(req)
    assert all(op["op"] != "remove" for op in kept.patches)
    assert set(kept.apply_patch(obj)["spec"]) >= set(spec)
