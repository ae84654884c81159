"""Mutating webhooks from a defaulting function (controller-runtime's ``WithCustomDefaulter``).

A :class:`CustomDefaulter` changes an object in place; :func:`with_custom_defaulter`
turns it into a :class:`~jobframework.webhook.Handler` that answers with the JSON patch
from the object the API server sent to the defaulted one.

Objects are plain dicts by default, so nothing the defaulter does not touch can change:
fields unknown to this library survive. With a ``codec`` (say, a pydantic model that
drops unknown fields), the patch is computed as controller-runtime does: removals that
only come from the decode/encode round trip are dropped unless
``remove_unknown_or_omitted_fields`` is set. A ``patch_filter`` gets the last word on
the operations (Kueue's ``LosslessDefaulter`` drops every ``remove`` with one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar, overload

import attrs

from jobframework.runtime.errors import ApiError
from jobframework.runtime.objects import Object, json_copy

from .admission import (
    PATCH_TYPE_JSON_PATCH,
    AdmissionRequest,
    AdmissionResponse,
    JsonPatchOperation,
    Operation,
    create_patch,
    denied,
    errored,
    patch_response_from_raw,
    validation_response_from_status,
)

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Defaulter(Protocol[T_contra]):
    """Sets defaults on an object of type ``T``, in place.

    Raise :class:`~jobframework.runtime.errors.ApiError` to deny with that status, any
    other exception to deny with its message (403).
    """

    async def default(self, obj: T_contra, request: AdmissionRequest) -> None:
        """Mutate ``obj``; ``request`` tells the operation, user and dry-run flag."""


#: A defaulter of plain-dict objects (controller-runtime's ``CustomDefaulter``).
CustomDefaulter = Defaulter[dict[str, Any]]


class ObjectCodec(Protocol[T]):
    """Converts between the JSON object of a request and the type a handler works on."""

    def decode(self, raw: Object) -> T:
        """Build a ``T`` from JSON; raising answers the request with a 400 error."""

    def encode(self, obj: T) -> Object:
        """The JSON form of ``obj``."""


@attrs.frozen
class PatchContext:
    """What a :data:`PatchFilter` may consult besides the operations."""

    request: AdmissionRequest
    #: The object as the API server sent it.
    original: Object
    #: ``original`` decoded and encoded again, before defaulting (equal to it without a codec).
    round_tripped: Object
    #: The defaulted object, encoded.
    defaulted: Object


#: Rewrites the operations of a defaulting response (e.g. drops ``remove`` operations).
PatchFilter = Callable[[Sequence[JsonPatchOperation], PatchContext], Sequence[JsonPatchOperation]]


@attrs.frozen
class DefaulterHandler(Generic[T]):
    """The :class:`~jobframework.webhook.Handler` built by :func:`with_custom_defaulter`."""

    defaulter: Defaulter[T]
    codec: ObjectCodec[T] | None = None
    remove_unknown_or_omitted_fields: bool = False
    patch_filter: PatchFilter | None = None

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        """Default ``request.object`` and answer with the resulting patch."""
        # Deletes carry no object to default.
        if request.operation == Operation.DELETE:
            return AdmissionResponse(allowed=True, result={"code": 200})
        if request.object is None:
            return errored(400, "there is no content to decode")
        raw = request.object
        try:
            # Two copies of the review's JSON (json_copy copies JSON values exactly): one
            # to default, one to learn what decoding alone changes.
            obj = self._decode(json_copy(raw))
            round_tripped = self._encode(self._decode(json_copy(raw)))
        except Exception as exc:
            return errored(400, exc)

        try:
            await self.defaulter.default(obj, request)
        except ApiError as exc:
            return validation_response_from_status(False, exc.status)
        except Exception as exc:
            return denied(str(exc))

        try:
            defaulted = self._encode(obj)
        except Exception as exc:
            return errored(500, exc)
        response = patch_response_from_raw(raw, defaulted)
        if not response.allowed or not response.patches:
            return response
        ops: Sequence[JsonPatchOperation] = response.patches
        if not self.remove_unknown_or_omitted_fields:
            ops = _drop_round_trip_removals(ops, raw, round_tripped)
        if self.patch_filter is not None:
            ops = self.patch_filter(
                ops, PatchContext(request, raw, round_tripped, defaulted)
            )
        return attrs.evolve(
            response, patches=tuple(ops), patch_type=PATCH_TYPE_JSON_PATCH if ops else None
        )

    def _decode(self, raw: Object) -> T:
        if self.codec is None:
            return raw  # type: ignore[return-value]  # T is dict without a codec
        return self.codec.decode(raw)

    def _encode(self, obj: T) -> Object:
        if self.codec is None:
            return obj  # type: ignore[return-value]
        return self.codec.encode(obj)


def _drop_round_trip_removals(
    ops: Sequence[JsonPatchOperation], raw: Object, round_tripped: Object
) -> list[JsonPatchOperation]:
    # A removal that decoding alone would cause is the codec forgetting a field, not
    # the defaulter deleting it (controller-runtime's dropSchemeRemovals).
    if not any(op["op"] == "remove" for op in ops):
        return list(ops)
    by_codec = {op["path"] for op in create_patch(raw, round_tripped) if op["op"] == "remove"}
    return [op for op in ops if not (op["op"] == "remove" and op["path"] in by_codec)]


@overload
def with_custom_defaulter(
    defaulter: Defaulter[dict[str, Any]],
    *,
    codec: None = None,
    remove_unknown_or_omitted_fields: bool = False,
    patch_filter: PatchFilter | None = None,
) -> DefaulterHandler[dict[str, Any]]: ...


@overload
def with_custom_defaulter(
    defaulter: Defaulter[T],
    *,
    codec: ObjectCodec[T],
    remove_unknown_or_omitted_fields: bool = False,
    patch_filter: PatchFilter | None = None,
) -> DefaulterHandler[T]: ...


def with_custom_defaulter(
    defaulter: Defaulter[Any],
    *,
    codec: ObjectCodec[Any] | None = None,
    remove_unknown_or_omitted_fields: bool = False,
    patch_filter: PatchFilter | None = None,
) -> DefaulterHandler[Any]:
    """A mutating handler that runs ``defaulter`` and answers with a JSON patch.

    - DELETE requests are allowed untouched.
    - An :class:`~jobframework.runtime.errors.ApiError` from the defaulter denies with
      its status; any other exception denies with code 403 and its message.
    - With ``codec``, the defaulter works on ``codec.decode(object)`` and the patch is
      computed against ``codec.encode`` of the result; removals that the round trip
      alone causes are dropped unless ``remove_unknown_or_omitted_fields``.
    - ``patch_filter`` rewrites the final operations; with none left the response
      carries no patch.
    """
    return DefaulterHandler(
        defaulter=defaulter,
        codec=codec,
        remove_unknown_or_omitted_fields=remove_unknown_or_omitted_fields,
        patch_filter=patch_filter,
    )
