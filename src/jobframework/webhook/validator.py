"""Validating webhooks from validation functions (controller-runtime's ``WithCustomValidator``).

A :class:`CustomValidator` has one method per operation, each returning warnings and
raising to reject. What the API server shows the user follows controller-runtime:

- an :class:`~jobframework.runtime.errors.ApiError` (e.g. ``errors.Invalid`` built by
  ``errors.new_invalid`` or :meth:`ValidationError.to_invalid`) is answered with its
  status: code 422, reason ``Invalid``, the field causes in ``details.causes``;
- any other exception, :class:`ValidationError` included, denies with code 403, reason
  ``Forbidden`` and the exception text. That is what Kueue's webhooks do when they
  return ``field.ErrorList.ToAggregate()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, overload, runtime_checkable

import attrs

from jobframework.runtime import errors
from jobframework.runtime.objects import Object, json_copy

from .admission import (
    AdmissionRequest,
    AdmissionResponse,
    Operation,
    allowed,
    denied,
    errored,
    validation_response_from_status,
)
from .defaulter import ObjectCodec

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

#: What a validation method returns: warnings shown to the client (``admission.Warnings``).
Warnings = Sequence[str] | None


class Validator(Protocol[T_contra]):
    """Validates objects of type ``T`` on create, update and delete."""

    async def validate_create(self, obj: T_contra, request: AdmissionRequest) -> Warnings:
        """Check a new object; raise to reject it."""

    async def validate_update(
        self, old: T_contra, new: T_contra, request: AdmissionRequest
    ) -> Warnings:
        """Check a change from ``old`` to ``new``; raise to reject it."""

    async def validate_delete(self, obj: T_contra, request: AdmissionRequest) -> Warnings:
        """Check a deletion of ``obj``; raise to reject it."""


#: A validator of plain-dict objects (controller-runtime's ``CustomValidator``).
CustomValidator = Validator[dict[str, Any]]


@runtime_checkable
class SupportsStatusCause(Protocol):
    """A field error that can describe itself as a ``metav1.StatusCause``.

    ``jobframework.field.FieldError`` is one (duck-typed: this layer sits below it).

    ``str()`` is its full text (``<field>: <detail>``); :meth:`to_cause` gives
    ``{"reason": <CauseType>, "message": <detail>, "field": <path>}``.
    """

    def to_cause(self) -> dict[str, Any]:
        """The ``StatusCause`` dict."""


FieldErrorLike = SupportsStatusCause | Mapping[str, Any] | str


class ValidationError(Exception):
    """Field errors a validator rejects an object with, optionally with warnings.

    Its text is apimachinery's aggregate of the errors' texts (one error: its text;
    several: ``[e1, e2]``, duplicates once), which is what the user sees in the 403
    denial. Items may be field-error objects (:class:`SupportsStatusCause`),
    ``StatusCause`` dicts (``reason``/``message``/``field``) or plain strings. Raise
    :meth:`to_invalid` instead to answer 422 ``Invalid`` with causes.
    """

    def __init__(self, errs: Iterable[FieldErrorLike], *, warnings: Sequence[str] = ()) -> None:
        self.errors: list[FieldErrorLike] = list(errs)
        self.warnings: list[str] = list(warnings)
        super().__init__(aggregate_message(_error_text(e) for e in self.errors))

    @property
    def causes(self) -> list[dict[str, Any]]:
        """The errors as ``metav1.StatusCause`` dicts."""
        return [_cause(e) for e in self.errors]

    def to_invalid(self, kind: str, name: str, group: str = "") -> errors.Invalid:
        """``apierrors.NewInvalid(<kind>.<group>, name, errs)`` for these errors."""
        return errors.new_invalid(kind, name, self.causes, group)


def aggregate_message(messages: Iterable[str]) -> str:
    """apimachinery's ``utilerrors.Aggregate`` text: one message, or ``[m1, m2]`` deduplicated."""
    seen: list[str] = []
    for msg in messages:
        if msg and msg not in seen:
            seen.append(msg)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]" if seen else ""


def _error_text(err: FieldErrorLike) -> str:
    if isinstance(err, str):
        return err
    if isinstance(err, Mapping):
        field, message = err.get("field"), str(err.get("message") or "")
        return f"{field}: {message}" if field else message
    return str(err)


def _cause(err: FieldErrorLike) -> dict[str, Any]:
    if isinstance(err, str):
        return {"message": err}
    if isinstance(err, Mapping):
        return dict(err)
    return err.to_cause()


@attrs.frozen
class ValidatorHandler(Generic[T]):
    """The :class:`~jobframework.webhook.Handler` built by :func:`with_custom_validator`."""

    validator: Validator[T]
    codec: ObjectCodec[T] | None = None

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        """Dispatch on the operation and turn the outcome into a response."""
        warnings: Warnings = None
        try:
            if request.operation == Operation.CONNECT:
                return allowed()
            if request.operation == Operation.CREATE:
                obj = self._decode(request.object)
                call = self.validator.validate_create(obj, request)
            elif request.operation == Operation.UPDATE:
                new = self._decode(request.object)
                old = self._decode(request.old_object)
                call = self.validator.validate_update(old, new, request)
            elif request.operation == Operation.DELETE:
                # The object being deleted travels in oldObject (kubernetes#76346).
                obj = self._decode(request.old_object)
                call = self.validator.validate_delete(obj, request)
            else:  # pragma: no cover - Operation is closed
                return errored(400, f"unknown operation {request.operation.value!r}")
        except Exception as exc:
            return errored(400, exc)

        try:
            warnings = await call
        except errors.ApiError as exc:
            return validation_response_from_status(False, exc.status)
        except Exception as exc:
            found = getattr(exc, "warnings", None)
            extra = [str(w) for w in found] if isinstance(found, list | tuple) else []
            return denied(str(exc)).with_warnings(*extra)
        return allowed().with_warnings(*(warnings or ()))

    def _decode(self, raw: Object | None) -> T:
        if raw is None:
            raise ValueError("there is no content to decode")
        # The validator's own copy (controller-runtime decodes one from the review's JSON
        # for each handler); a review carries JSON values, which json_copy copies exactly.
        obj = json_copy(raw)
        if self.codec is None:
            return obj  # type: ignore[return-value]  # T is dict without a codec
        return self.codec.decode(obj)


@overload
def with_custom_validator(
    validator: Validator[dict[str, Any]], *, codec: None = None
) -> ValidatorHandler[dict[str, Any]]: ...


@overload
def with_custom_validator(
    validator: Validator[T], *, codec: ObjectCodec[T]
) -> ValidatorHandler[T]: ...


def with_custom_validator(
    validator: Validator[Any], *, codec: ObjectCodec[Any] | None = None
) -> ValidatorHandler[Any]:
    """A validating handler calling ``validator`` for CREATE, UPDATE and DELETE.

    CONNECT is allowed without validation; a missing object is a 400 error. The
    validator's warnings are passed on, also with a denial carried by a
    :class:`ValidationError`.
    """
    return ValidatorHandler(validator=validator, codec=codec)
