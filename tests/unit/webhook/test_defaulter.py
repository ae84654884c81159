"""with_custom_defaulter: controller-runtime's defaulting handler for dict (and typed) objects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.webhook import (
    AdmissionRequest,
    JsonPatchOperation,
    PatchContext,
    with_custom_defaulter,
)


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
