"""AdmissionReview v1 types, response builders and the :class:`Handler` protocol.

This is controller-runtime's ``webhook/admission`` package for plain-dict objects. The
API server sends an ``AdmissionReview`` whose ``request`` names an operation on an
object; a :class:`Handler` answers with an :class:`AdmissionResponse` that allows or
denies it and, for mutating webhooks, carries a JSON patch from the object the server
sent to the object the webhook wants. :func:`review` turns one into the other, for the
HTTPS server and for in-process callers alike.
"""

from __future__ import annotations

import base64
import copy
import enum
import json
import logging
import marshal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs
import jsonpatch

from jobframework.runtime.objects import (
    GroupVersionKind,
    GroupVersionResource,
    Object,
    deep_copy,
    name_of,
    namespace_of,
)

log = logging.getLogger("jobframework.webhook")

#: One RFC 6902 operation, e.g. ``{"op": "add", "path": "/spec/suspend", "value": True}``.
JsonPatchOperation = dict[str, Any]

#: The callable shape of an admission webhook seen from an API server: an
#: ``AdmissionReview`` request dict in, an ``AdmissionReview`` response dict out.
AdmissionHook = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

#: AdmissionReview versions accepted; the answer echoes the one the request used.
SUPPORTED_REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
PATCH_TYPE_JSON_PATCH = "JSONPatch"


class Operation(enum.StrEnum):
    """``admissionv1.Operation``."""

    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


class MalformedReview(ValueError):
    """The body is not a usable AdmissionReview; answered with HTTP 400."""


@attrs.frozen
class UserInfo:
    """``authenticationv1.UserInfo`` of the requesting user."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UserInfo:
        """Parse the JSON form."""
        extra = data.get("extra") or {}
        if not isinstance(extra, Mapping):
            raise MalformedReview("request.userInfo.extra must be an object")
        return cls(
            username=_str(data, "username", "request.userInfo"),
            uid=_str(data, "uid", "request.userInfo"),
            groups=tuple(_str_list(data.get("groups"), "request.userInfo.groups")),
            extra={str(k): tuple(_str_list(v, f"request.userInfo.extra[{k}]"))
                   for k, v in extra.items()},
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (empty fields omitted, as Go does)."""
        out: dict[str, Any] = {}
        if self.username:
            out["username"] = self.username
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


@attrs.frozen
class AdmissionRequest:
    """``admissionv1.AdmissionRequest``: one operation the API server asks about.

    ``object`` is the new object (CREATE, UPDATE, CONNECT options aside) and
    ``old_object`` the existing one (UPDATE, DELETE); both are the JSON the server sent.
    Handlers must not mutate them: the adapters hand out deep copies.
    """

    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    operation: Operation
    name: str = ""
    namespace: str = ""
    sub_resource: str = ""
    request_kind: GroupVersionKind | None = None
    request_resource: GroupVersionResource | None = None
    request_sub_resource: str = ""
    user_info: UserInfo = attrs.field(factory=UserInfo)
    object: Object | None = None
    old_object: Object | None = None
    dry_run: bool | None = None
    options: Object | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AdmissionRequest:
        """Parse ``AdmissionReview.request``; :class:`MalformedReview` says what is wrong."""
        if not isinstance(data, Mapping):
            raise MalformedReview("request must be an object")
        uid = _str(data, "uid", "request")
        if not uid:
            raise MalformedReview("request.uid is required")
        op = data.get("operation")
        try:
            operation = Operation(op if isinstance(op, str) else "")
        except ValueError:
            raise MalformedReview(
                f"request.operation {_shown(op)} is not one of CREATE, UPDATE, DELETE, CONNECT"
            ) from None
        kind = _gvk(data.get("kind"), "request.kind")
        if kind is None:
            raise MalformedReview("request.kind is required")
        resource = _gvr(data.get("resource"), "request.resource")
        if resource is None:
            raise MalformedReview("request.resource is required")
        dry_run = data.get("dryRun")
        if dry_run is not None and not isinstance(dry_run, bool):
            raise MalformedReview("request.dryRun must be a boolean")
        user = data.get("userInfo") or {}
        if not isinstance(user, Mapping):
            raise MalformedReview("request.userInfo must be an object")
        return cls(
            uid=uid,
            kind=kind,
            resource=resource,
            operation=operation,
            name=_str(data, "name", "request"),
            namespace=_str(data, "namespace", "request"),
            sub_resource=_str(data, "subResource", "request"),
            request_kind=_gvk(data.get("requestKind"), "request.requestKind"),
            request_resource=_gvr(data.get("requestResource"), "request.requestResource"),
            request_sub_resource=_str(data, "requestSubResource", "request"),
            user_info=UserInfo.from_dict(user),
            object=_raw(data.get("object"), "request.object"),
            old_object=_raw(data.get("oldObject"), "request.oldObject"),
            dry_run=dry_run,
            options=_raw(data.get("options"), "request.options"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``AdmissionReview.request``."""
        out: dict[str, Any] = {
            "uid": self.uid,
            "kind": _gvk_dict(self.kind),
            "resource": _gvr_dict(self.resource),
            "operation": self.operation.value,
            "userInfo": self.user_info.to_dict(),
        }
        if self.sub_resource:
            out["subResource"] = self.sub_resource
        if self.request_kind is not None:
            out["requestKind"] = _gvk_dict(self.request_kind)
        if self.request_resource is not None:
            out["requestResource"] = _gvr_dict(self.request_resource)
        if self.request_sub_resource:
            out["requestSubResource"] = self.request_sub_resource
        if self.name:
            out["name"] = self.name
        if self.namespace:
            out["namespace"] = self.namespace
        for key, value in (("object", self.object), ("oldObject", self.old_object),
                           ("options", self.options)):
            if value is not None:
                out[key] = copy.deepcopy(value)
        if self.dry_run is not None:
            out["dryRun"] = self.dry_run
        return out

    def to_review(self, api_version: str = "admission.k8s.io/v1") -> dict[str, Any]:
        """A whole ``AdmissionReview`` carrying this request, as an API server sends it."""
        return {"apiVersion": api_version, "kind": "AdmissionReview", "request": self.to_dict()}

    @classmethod
    def for_object(
        cls,
        operation: Operation | str,
        obj: Object | None = None,
        old_obj: Object | None = None,
        *,
        resource: GroupVersionResource,
        uid: str,
        sub_resource: str = "",
        user_info: UserInfo | None = None,
        dry_run: bool = False,
        options: Object | None = None,
    ) -> AdmissionRequest:
        """The request an API server would build for ``operation`` on ``obj``/``old_obj``.

        Kind, name and namespace come from the object (``old_obj`` for DELETE). Used by
        in-memory API servers and tests to drive handlers.
        """
        subject = obj if obj is not None else old_obj
        if subject is None:
            raise ValueError("an admission request needs an object or an old object")
        kind = GroupVersionKind.of(subject)
        return cls(
            uid=uid,
            kind=kind,
            resource=resource,
            operation=Operation(operation),
            name=name_of(subject),
            namespace=namespace_of(subject),
            sub_resource=sub_resource,
            request_kind=kind,
            request_resource=resource,
            request_sub_resource=sub_resource,
            user_info=user_info or UserInfo(),
            object=deep_copy(obj) if obj is not None else None,
            old_object=deep_copy(old_obj) if old_obj is not None else None,
            dry_run=dry_run,
            options=options,
        )


@attrs.frozen
class AdmissionResponse:
    """``admissionv1.AdmissionResponse`` plus the JSON patch operations behind ``patch``.

    ``result`` is a ``metav1.Status`` dict (``code``, ``reason``, ``message``,
    ``details``). Build responses with :func:`allowed`, :func:`denied`,
    :func:`errored`, :func:`patched` or :func:`patch_response_from_raw`; the server
    fills ``uid`` and the default ``result`` in :meth:`complete`.
    """

    allowed: bool
    result: dict[str, Any] | None = None
    patches: tuple[JsonPatchOperation, ...] = ()
    patch_type: str | None = None
    warnings: tuple[str, ...] = ()
    audit_annotations: Mapping[str, str] | None = None
    uid: str = ""

    @property
    def code(self) -> int:
        """``result.code`` (200 when unset)."""
        return int((self.result or {}).get("code") or 200)

    @property
    def reason(self) -> str:
        """``result.reason`` (``""`` when unset)."""
        return str((self.result or {}).get("reason") or "")

    @property
    def message(self) -> str:
        """``result.message`` (``""`` when unset)."""
        return str((self.result or {}).get("message") or "")

    @property
    def causes(self) -> list[dict[str, Any]]:
        """``result.details.causes`` (empty when unset)."""
        details = (self.result or {}).get("details") or {}
        causes = details.get("causes") if isinstance(details, Mapping) else None
        return list(causes) if isinstance(causes, list) else []

    @property
    def patch(self) -> bytes | None:
        """The JSON patch document as bytes, or None without patches."""
        if not self.patches:
            return None
        return json.dumps(list(self.patches), separators=(",", ":")).encode()

    def with_warnings(self, *warnings: str) -> AdmissionResponse:
        """A copy with ``warnings`` appended (as ``Response.WithWarnings``)."""
        if not warnings:
            return self
        return attrs.evolve(self, warnings=(*self.warnings, *warnings))

    def complete(self, request: AdmissionRequest | None) -> AdmissionResponse:
        """Echo the request's uid, default ``result.code`` to 200, type the patch.

        Mirrors controller-runtime's ``Response.Complete``.
        """
        result = dict(self.result or {})
        if not result.get("code"):
            result["code"] = 200
        return attrs.evolve(
            self,
            uid=request.uid if request is not None else self.uid,
            result=result,
            patch_type=PATCH_TYPE_JSON_PATCH if self.patches else self.patch_type,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``AdmissionReview.response`` (``patch`` base64-encoded)."""
        out: dict[str, Any] = {"uid": self.uid, "allowed": self.allowed}
        if self.result is not None:
            out["status"] = deep_copy(self.result)
        patch = self.patch
        if patch is not None:
            out["patch"] = base64.b64encode(patch).decode()
        if patch is not None:
            out["patchType"] = self.patch_type or PATCH_TYPE_JSON_PATCH
        if self.audit_annotations:
            out["auditAnnotations"] = dict(self.audit_annotations)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AdmissionResponse:
        """Parse ``AdmissionReview.response``, decoding the base64 patch into :attr:`patches`."""
        if not isinstance(data, Mapping):
            raise MalformedReview("response must be an object")
        allowed = data.get("allowed")
        if not isinstance(allowed, bool):
            raise MalformedReview("response.allowed must be a boolean")
        patches: tuple[JsonPatchOperation, ...] = ()
        raw_patch = data.get("patch")
        if raw_patch:
            try:
                decoded = json.loads(base64.b64decode(raw_patch, validate=True))
            except (ValueError, TypeError) as exc:
                raise MalformedReview(f"response.patch is not base64 JSON: {exc}") from None
            if not isinstance(decoded, list) or not all(isinstance(o, dict) for o in decoded):
                raise MalformedReview("response.patch must be a JSON array of operations")
            patches = tuple(decoded)
        status = data.get("status")
        return cls(
            allowed=allowed,
            result=dict(status) if isinstance(status, Mapping) else None,
            patches=patches,
            patch_type=data.get("patchType"),
            warnings=tuple(_str_list(data.get("warnings"), "response.warnings")),
            audit_annotations=data.get("auditAnnotations"),
            uid=str(data.get("uid") or ""),
        )

    def apply_patch(self, obj: Object) -> Object:
        """``obj`` with this response's patch applied (a new dict; ``obj`` is untouched)."""
        if not self.patches:
            return copy.deepcopy(obj)
        result: Object = jsonpatch.apply_patch(obj, list(self.patches), in_place=False)
        return result


@runtime_checkable
class Handler(Protocol):
    """Answers one admission request (controller-runtime's ``admission.Handler``).

    A handler that raises is answered with a 500 error response: the API server then
    applies the webhook's ``failurePolicy``.
    """

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        """Allow, deny or patch ``request``."""


@attrs.frozen
class HandlerFunc:
    """Adapts an ``async (request) -> AdmissionResponse`` function to :class:`Handler`."""

    fn: Callable[[AdmissionRequest], Awaitable[AdmissionResponse]]

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        """Call the function."""
        return await self.fn(request)


def validation_response(is_allowed: bool, message: str = "") -> AdmissionResponse:
    """Allowed with code 200, or denied with code 403 and reason ``Forbidden``."""
    result: dict[str, Any] = (
        {"code": 200} if is_allowed else {"code": 403, "reason": "Forbidden"}
    )
    if message:
        result["message"] = message
    return AdmissionResponse(allowed=is_allowed, result=result)


def allowed(message: str = "", *, warnings: Sequence[str] = ()) -> AdmissionResponse:
    """Allow the request (``admission.Allowed``)."""
    return validation_response(True, message).with_warnings(*warnings)


def denied(
    message: str, *, code: int = 403, reason: str = "Forbidden", warnings: Sequence[str] = ()
) -> AdmissionResponse:
    """Deny the request; the API server shows ``message`` to the user (``admission.Denied``)."""
    result: dict[str, Any] = {"code": code, "reason": reason}
    if message:
        result["message"] = message
    return AdmissionResponse(allowed=False, result=result, warnings=tuple(warnings))


def errored(code: int, exc: BaseException | str) -> AdmissionResponse:
    """Deny because the webhook itself failed (``admission.Errored``): a code, no reason."""
    return AdmissionResponse(allowed=False, result={"code": code, "message": str(exc)})


def validation_response_from_status(
    is_allowed: bool, status: Mapping[str, Any]
) -> AdmissionResponse:
    """A response whose ``result`` is a whole ``metav1.Status`` (e.g. an ``Invalid`` error's)."""
    return AdmissionResponse(allowed=is_allowed, result=copy.deepcopy(dict(status)))


def patched(message: str = "", *patches: JsonPatchOperation) -> AdmissionResponse:
    """Allow with the given JSON patch operations (``admission.Patched``)."""
    resp = allowed(message)
    return attrs.evolve(resp, patches=tuple(patches),
                        patch_type=PATCH_TYPE_JSON_PATCH if patches else None)


def create_patch(original: Any, current: Any) -> list[JsonPatchOperation]:
    """The RFC 6902 operations turning ``original`` into ``current``.

    Only ``add``, ``remove`` and ``replace`` are emitted, as Go's jsonpatch does, so a
    filter that looks at removals sees every one of them (a ``move`` would hide one).

    Objects that differ only in object members (no array changed, the common case of a
    defaulting webhook) are diffed here, with ``jsonpatch``'s operations in its order;
    anything else goes to ``jsonpatch``.
    """
    fast = _diff_objects(original, current)
    if fast is not None:
        return fast
    ops: list[JsonPatchOperation] = jsonpatch.JsonPatch.from_diff(
        original, current, optimization=False
    ).patch
    if any(op.get("op") in ("move", "copy") for op in ops):
        ops = _expand_moves(original, ops)
    return ops


class _NotSimple(Exception):
    """A difference :func:`_diff_objects` leaves to ``jsonpatch``."""


def _diff_objects(src: Any, dst: Any) -> list[JsonPatchOperation] | None:
    """``jsonpatch.JsonPatch.from_diff(src, dst, optimization=False)`` for two JSON objects
    whose arrays are all unchanged, else None.

    Without ``move`` optimisation and without arrays to align, jsonpatch's diff of two
    objects is a walk of their members: removed members, then added ones, then the common
    ones compared (objects recursively, anything else by its JSON text), each difference
    one operation. Here equal members are skipped at C speed (their :mod:`marshal` bytes
    are equal only when their JSON is) instead of being serialised member by member.
    """
    if type(src) is not dict or type(dst) is not dict:
        return None
    ops: list[JsonPatchOperation] = []
    try:
        _diff_members("", src, dst, ops)
    except (_NotSimple, ValueError, TypeError):
        return None
    return ops


def _pointer(path: str, key: Any) -> str:
    if type(key) is not str:
        raise _NotSimple  # no JSON pointer names it: jsonpatch says so
    return f"{path}/{key.replace('~', '~0').replace('/', '~1')}"


def _diff_members(path: str, src: dict[str, Any], dst: dict[str, Any],
                  ops: list[JsonPatchOperation]) -> None:
    for key in src:
        if key not in dst:
            ops.append({"op": "remove", "path": _pointer(path, key)})
    for key in dst:
        if key not in src:
            ops.append({"op": "add", "path": _pointer(path, key),
                        "value": _json_copy(dst[key])})
    for key in src:
        if key in dst:
            old, new = src[key], dst[key]
            if old is new:
                continue
            told, tnew = type(old), type(new)
            if told is tnew and (told is str or told is int or told is bool) and old == new:
                continue
            if (told is dict or told is list) and tnew is told \
                    and marshal.dumps(old, _MARSHAL_BY_VALUE) == marshal.dumps(
                        new, _MARSHAL_BY_VALUE):
                continue  # equal, types and member order included
            if told is dict and tnew is dict:
                _diff_members(_pointer(path, key), old, new, ops)
            elif told is list and tnew is list:
                raise _NotSimple  # jsonpatch aligns the items of changed arrays
            elif json.dumps(old) != json.dumps(new):  # jsonpatch's test: 1, 1.0, True differ
                ops.append({"op": "replace", "path": _pointer(path, key),
                            "value": _json_copy(new)})


_SCALARS = (str, int, float, bool, type(None))

#: marshal's format 2: from format 3 on, a string seen twice is written as a reference
#: and an interned one is flagged, so equal values shared differently (the request's
#: decoded JSON against a defaulted copy) gave different bytes and every review of a real
#: API server fell back to jsonpatch.
_MARSHAL_BY_VALUE = 2


def _json_copy(value: Any) -> Any:
    if type(value) in _SCALARS:
        return value
    return deep_copy(value)


def patch_response_from_raw(
    original_raw: bytes | str | Mapping[str, Any], mutated: Mapping[str, Any]
) -> AdmissionResponse:
    """Allow with the JSON patch from the object the server sent to ``mutated``.

    ``original_raw`` is that object, as JSON bytes/text or already decoded. Without
    differences the response carries no patch and no ``patchType``.
    """
    try:
        original = (json.loads(original_raw) if isinstance(original_raw, bytes | str)
                    else original_raw)
        ops = create_patch(original, mutated)
    except (ValueError, TypeError, jsonpatch.JsonPatchException) as exc:
        return errored(500, exc)
    return AdmissionResponse(
        allowed=True,
        patches=tuple(ops),
        patch_type=PATCH_TYPE_JSON_PATCH if ops else None,
    )


async def call_handler(handler: Handler, request: AdmissionRequest) -> AdmissionResponse:
    """Run ``handler`` and complete its response; an exception becomes a 500 error response.

    Mirrors ``Webhook.Handle`` with panic recovery on.
    """
    try:
        response = await handler.handle(request)
    except Exception as exc:
        log.exception("admission handler failed", extra={"uid": request.uid})
        response = errored(500, f"handler raised {type(exc).__name__}: {exc}")
    return response.complete(request)


async def review(handler: Handler, body: Any) -> tuple[int, dict[str, Any]]:
    """Answer one decoded AdmissionReview body: ``(http_status, response_review)``.

    A body that is not an AdmissionReview gets HTTP 400 and a review whose response is
    an error naming the problem; anything the handler says is HTTP 200. Decoding never
    raises: whatever JSON the body holds (wrong types, nesting too deep for Python's
    stack), the answer is a 400 with a short message.
    """
    api_version = "admission.k8s.io/v1"
    try:
        if not isinstance(body, Mapping):
            raise MalformedReview("the body must be a JSON object (an AdmissionReview)")
        version = body.get("apiVersion") or api_version
        kind = body.get("kind") or "AdmissionReview"
        # Checked before formatting: the message must not print arbitrary JSON.
        if not isinstance(version, str) or not isinstance(kind, str):
            raise MalformedReview("apiVersion and kind must be strings")
        if kind != "AdmissionReview" or version not in SUPPORTED_REVIEW_VERSIONS:
            raise MalformedReview("expected an admission.k8s.io/v1 AdmissionReview, got "
                                  f"{_shown(version, quote=False)} {_shown(kind, quote=False)}")
        api_version = version
        if body.get("request") is None:
            raise MalformedReview("the AdmissionReview has no request")
        request = AdmissionRequest.from_dict(body["request"])
    except (MalformedReview, RecursionError) as exc:
        # The checks above print no JSON and walk no nesting; RecursionError is the guard
        # should one do: still the client's body, a 400, not a 500.
        problem: str | BaseException = (
            exc if isinstance(exc, MalformedReview)
            else "the AdmissionReview nests JSON too deeply")
        log.warning("bad admission request: %s", problem)
        return 400, _review(api_version, attrs.evolve(errored(400, problem),
                                                      uid=_uid_of(body)))
    response = await call_handler(handler, request)
    return 200, _review(api_version, response)


def admission_hook(handler: Handler) -> AdmissionHook:
    """``handler`` as an in-process webhook: an AdmissionReview dict in, one out.

    This is what :class:`~jobframework.webhook.WebhookServer` runs behind HTTPS, minus
    the transport, so in-memory API servers call webhooks without TLS.
    """

    async def hook(review_request: dict[str, Any]) -> dict[str, Any]:
        # Round-trip through JSON so the handler sees exactly what HTTPS would give it.
        body = json.loads(json.dumps(review_request))
        _, out = await review(handler, body)
        return out

    return hook


def _review(api_version: str, response: AdmissionResponse) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response.to_dict()}


def _uid_of(body: Any) -> str:
    if isinstance(body, Mapping):
        req = body.get("request")
        if isinstance(req, Mapping) and isinstance(req.get("uid"), str):
            return str(req["uid"])
    return ""


def _expand_moves(doc: Any, ops: list[JsonPatchOperation]) -> list[JsonPatchOperation]:
    # Older jsonpatch releases ignore optimization=False; rewrite move/copy as remove+add.
    out: list[JsonPatchOperation] = []
    current = deep_copy(doc)
    for op in ops:
        if op["op"] in ("move", "copy"):
            value = jsonpatch.JsonPointer(op["from"]).resolve(current)
            if op["op"] == "move":
                out.append({"op": "remove", "path": op["from"]})
            out.append({"op": "add", "path": op["path"], "value": copy.deepcopy(value)})
        else:
            out.append(op)
        current = jsonpatch.apply_patch(current, [op], in_place=False)
    return out


#: The longest string a 400's message quotes from the body.
_MAX_SHOWN = 64


def _shown(value: Any, *, quote: bool = True) -> str:
    """``value`` for an error message: a string (cut short) or ``None``, else its JSON type
    (never the JSON itself, which may be huge or nested beyond what ``repr`` can print)."""
    if isinstance(value, str):
        cut = value if len(value) <= _MAX_SHOWN else value[:_MAX_SHOWN] + "..."
        return repr(cut) if quote else cut
    if value is None:
        return "None"
    return f"<{type(value).__name__}>"


def _str(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedReview(f"{where}.{key} must be a string")
    return value


def _str_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MalformedReview(f"{where} must be a list of strings")
    return list(value)


def _gvk(value: Any, where: str) -> GroupVersionKind | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise MalformedReview(f"{where} must be an object")
    return GroupVersionKind(_str(value, "group", where), _str(value, "version", where),
                            _str(value, "kind", where))


def _gvr(value: Any, where: str) -> GroupVersionResource | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise MalformedReview(f"{where} must be an object")
    return GroupVersionResource(_str(value, "group", where), _str(value, "version", where),
                                _str(value, "resource", where))


def _raw(value: Any, where: str) -> Object | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedReview(f"{where} must be a JSON object")
    return value


def _gvk_dict(gvk: GroupVersionKind) -> dict[str, str]:
    return {"group": gvk.group, "version": gvk.version, "kind": gvk.kind}


def _gvr_dict(gvr: GroupVersionResource) -> dict[str, str]:
    return {"group": gvr.group, "version": gvr.version, "resource": gvr.resource}
