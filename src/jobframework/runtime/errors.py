"""Typed API errors, one class per Kubernetes ``metav1.StatusReason``.

Every client (real or in-memory) raises these, carrying the server's ``Status``
body, so callers write ``except NotFound`` the way Go code writes
``apierrors.IsNotFound(err)``. Where Go adds context with ``fmt.Errorf("...: %w", err)``,
:func:`wrap` does the same without losing the class.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, TypeVar

_E = TypeVar("_E", bound="ApiError")


class ApiError(Exception):
    """An error answered by the API server (a ``metav1.Status`` with ``status: Failure``)."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = ""

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code  # type: ignore[misc]
        if reason is not None:
            self.reason = reason  # type: ignore[misc]
        self.details = details or {}
        self.status = status if status is not None else self.to_status()

    def to_status(self) -> dict[str, Any]:
        """The ``metav1.Status`` body a server would send for this error."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        }
        if self.reason:
            # The real server omits an empty reason (metav1.Status ``omitempty``).
            body["reason"] = self.reason
        if self.details:
            body["details"] = self.details
        return body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.reason!r}, {self.message!r})"


class BadRequest(ApiError):
    """400 ``BadRequest``."""

    code = 400
    reason = "BadRequest"


class Unauthorized(ApiError):
    """401 ``Unauthorized``."""

    code = 401
    reason = "Unauthorized"


class Forbidden(ApiError):
    """403 ``Forbidden``."""

    code = 403
    reason = "Forbidden"


class NotFound(ApiError):
    """404 ``NotFound``."""

    code = 404
    reason = "NotFound"


class MethodNotAllowed(ApiError):
    """405 ``MethodNotAllowed``."""

    code = 405
    reason = "MethodNotAllowed"


class AlreadyExists(ApiError):
    """409 ``AlreadyExists``: create of a name that exists."""

    code = 409
    reason = "AlreadyExists"


class Conflict(ApiError):
    """409 ``Conflict``: stale resourceVersion, failed precondition, or apply conflict."""

    code = 409
    reason = "Conflict"


class Gone(ApiError):
    """410 ``Expired``/``Gone``: the requested resourceVersion is too old; relist."""

    code = 410
    reason = "Expired"


class Invalid(ApiError):
    """422 ``Invalid``: the object failed validation; ``causes`` name the fields."""

    code = 422
    reason = "Invalid"

    @property
    def causes(self) -> list[dict[str, Any]]:
        """``details.causes``: ``[{"reason", "message", "field"}]``."""
        causes = self.details.get("causes")
        return causes if isinstance(causes, list) else []


class TooManyRequests(ApiError):
    """429 ``TooManyRequests``."""

    code = 429
    reason = "TooManyRequests"


class InternalError(ApiError):
    """500 ``InternalError``."""

    code = 500
    reason = "InternalError"


class ServiceUnavailable(ApiError):
    """503 ``ServiceUnavailable``."""

    code = 503
    reason = "ServiceUnavailable"


class ServerTimeout(ApiError):
    """504 / ``Timeout``."""

    code = 504
    reason = "Timeout"


_BY_REASON: dict[str, type[ApiError]] = {
    c.reason: c
    for c in (
        BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed, AlreadyExists,
        Conflict, Gone, Invalid, TooManyRequests, InternalError, ServiceUnavailable,
        ServerTimeout,
    )
}
_BY_REASON["Gone"] = Gone
_BY_REASON["ServerTimeout"] = ServerTimeout
_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
    409: Conflict, 410: Gone, 422: Invalid, 429: TooManyRequests, 500: InternalError,
    503: ServiceUnavailable, 504: ServerTimeout,
}


def from_status(status: dict[str, Any], code: int | None = None) -> ApiError:
    """The typed error for a ``metav1.Status`` body (reason first, then HTTP code)."""
    reason = str(status.get("reason") or "")
    http_code = int(status.get("code") or code or 500)
    cls = _BY_REASON.get(reason) or _BY_CODE.get(http_code, ApiError)
    message = str(status.get("message") or reason or f"HTTP {http_code}")
    details = status.get("details") if isinstance(status.get("details"), dict) else None
    return cls(message, code=http_code, reason=reason or cls.reason, details=details,
               status=status)


def new_not_found(resource: str, name: str, group: str = "") -> NotFound:
    """``<resource>.<group> "<name>" not found``, as apierrors.NewNotFound."""
    qualified = f"{resource}.{group}" if group else resource
    return NotFound(f'{qualified} "{name}" not found',
                    details={"name": name, "group": group, "kind": resource})


def new_already_exists(resource: str, name: str, group: str = "") -> AlreadyExists:
    """``<resource>.<group> "<name>" already exists``, as apierrors.NewAlreadyExists."""
    qualified = f"{resource}.{group}" if group else resource
    return AlreadyExists(f'{qualified} "{name}" already exists',
                         details={"name": name, "group": group, "kind": resource})


def new_conflict(resource: str, name: str, reason: str, group: str = "") -> Conflict:
    """``Operation cannot be fulfilled on <resource>.<group> "<name>": <reason>``."""
    qualified = f"{resource}.{group}" if group else resource
    return Conflict(f'Operation cannot be fulfilled on {qualified} "{name}": {reason}',
                    details={"name": name, "group": group, "kind": resource})


def new_invalid(
    kind: str, name: str, causes: list[dict[str, Any]], group: str = ""
) -> Invalid:
    """``<Kind>.<group> "<name>" is invalid: <field>: <message>, ...`` with causes."""
    qualified = f"{kind}.{group}" if group else kind
    parts = [f"{c['field']}: {c['message']}" if c.get("field") else str(c["message"])
             for c in causes]
    if len(parts) == 1:
        msg = f'{qualified} "{name}" is invalid: {parts[0]}'
    else:
        msg = f'{qualified} "{name}" is invalid: [{", ".join(parts)}]'
    return Invalid(msg, details={"name": name, "group": group, "kind": kind, "causes": causes})


def is_not_found(err: BaseException) -> bool:
    """True for :class:`NotFound`."""
    return isinstance(err, NotFound)


def is_conflict(err: BaseException) -> bool:
    """True for :class:`Conflict` (not AlreadyExists)."""
    return isinstance(err, Conflict)


def is_already_exists(err: BaseException) -> bool:
    """True for :class:`AlreadyExists`."""
    return isinstance(err, AlreadyExists)


def wrap(message: str, err: _E) -> _E:
    """``err`` with ``message`` in front (``fmt.Errorf("<message>: %w", err)``), of the
    same class, so ``except NotFound`` and :func:`is_not_found` still see it as Go's
    ``apierrors.IsNotFound`` sees through ``%w``.

    The copy keeps ``code``, ``reason``, ``details`` and the server's ``status`` body;
    only ``message`` (and ``str()``) change, and its ``__cause__`` is ``err``.
    """
    wrapped = copy.copy(err)
    wrapped.message = f"{message}: {err.message}"
    wrapped.args = (wrapped.message,)
    wrapped.__cause__ = err
    return wrapped
