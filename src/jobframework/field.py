"""A port of apimachinery's ``util/validation/field``: paths, field errors, error lists.

Messages render exactly as Go's: ``<path>: <type>[: <value>][: <detail>]``, with strings
quoted like Go's ``%q``, ints/floats/bools bare, and other values as compact JSON.
``ErrorList.to_aggregate()`` de-duplicates and joins like ``utilerrors.Aggregate``:
one error prints as itself, several as ``[e1, e2]``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any, Final

import attrs

# Re-exported: callers build Kueue-style messages from `field`.
from .runtime.gofmt import go_quote as go_quote
from .runtime.gofmt import render_value as render_value


class _Omit:
    """Marker for ``field.OmitValueType``: the body shows only the error type."""

    _instance: _Omit | None = None

    def __new__(cls) -> _Omit:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "OMIT_VALUE"


#: Pass as the value of :func:`invalid` (and friends) to omit it from the message.
OMIT_VALUE: Final = _Omit()


@attrs.frozen
class Path:
    """A field path such as ``metadata.labels[kueue.x-k8s.io/queue-name]`` (Go ``*field.Path``)."""

    name: str = ""
    index: str = ""
    parent: Path | None = None

    @classmethod
    def new(cls, name: str, *more: str) -> Path:
        """``field.NewPath(name, more...)``."""
        p = cls(name=name)
        for n in more:
            p = p.child(n)
        return p

    def child(self, name: str, *more: str) -> Path:
        """``p.Child(name, more...)``: dotted sub-fields."""
        p = Path(name=name, parent=self)
        for n in more:
            p = p.child(n)
        return p

    def index_(self, i: int) -> Path:
        """``p.Index(i)``: ``[i]``."""
        return Path(index=str(i), parent=self)

    def key(self, k: str) -> Path:
        """``p.Key(k)``: ``[k]`` (map keys are not quoted)."""
        return Path(index=k, parent=self)

    def root(self) -> Path:
        """The first element of the path."""
        p = self
        while p.parent is not None:
            p = p.parent
        return p

    def __str__(self) -> str:
        elems: list[Path] = []
        p: Path | None = self
        while p is not None:
            elems.append(p)
            p = p.parent
        out: list[str] = []
        for e in reversed(elems):
            if e.parent is not None and e.name:
                out.append(".")
            out.append(e.name if e.name else f"[{e.index}]")
        return "".join(out)


def new_path(name: str, *more: str) -> Path:
    """``field.NewPath``."""
    return Path.new(name, *more)


class ErrorType(enum.StrEnum):
    """Machine-readable error types (the ``CauseType`` of an Invalid status)."""

    NOT_FOUND = "FieldValueNotFound"
    REQUIRED = "FieldValueRequired"
    DUPLICATE = "FieldValueDuplicate"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"
    TOO_FEW = "FieldValueTooFew"
    INTERNAL = "InternalError"
    TYPE_INVALID = "FieldValueTypeInvalid"
    TOO_SHORT = "FieldValueTooShort"

    @property
    def message(self) -> str:
        """The canonical text (``ErrorType.String()``), e.g. ``Invalid value``."""
        return _TYPE_TEXT[self]


_TYPE_TEXT: Final = {
    ErrorType.NOT_FOUND: "Not found",
    ErrorType.REQUIRED: "Required value",
    ErrorType.DUPLICATE: "Duplicate value",
    ErrorType.INVALID: "Invalid value",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.TOO_LONG: "Too long",
    ErrorType.TOO_MANY: "Too many",
    ErrorType.TOO_FEW: "Too few",
    ErrorType.INTERNAL: "Internal error",
    ErrorType.TYPE_INVALID: "Invalid value",
    ErrorType.TOO_SHORT: "Too short",
}

_VALUE_SHOWN: Final = frozenset({
    ErrorType.INVALID, ErrorType.TYPE_INVALID, ErrorType.NOT_SUPPORTED, ErrorType.NOT_FOUND,
    ErrorType.DUPLICATE, ErrorType.TOO_MANY, ErrorType.TOO_FEW,
})

class FieldError(ValueError):
    """One field-level validation error (Go ``*field.Error``)."""

    def __init__(self, type: ErrorType, field: str, bad_value: Any = "", detail: str = "") -> None:
        self.type = type
        self.field = field
        self.bad_value = bad_value
        self.detail = detail
        super().__init__(self.error())

    def body(self) -> str:
        """The message without the field path (``ErrorBody``)."""
        if self.type in _VALUE_SHOWN and self.bad_value is not OMIT_VALUE:
            s = f"{self.type.message}: {render_value(self.bad_value)}"
        else:
            s = self.type.message
        if self.detail:
            s += f": {self.detail}"
        return s

    def error(self) -> str:
        """``<field>: <body>``."""
        return f"{self.field}: {self.body()}"

    def __str__(self) -> str:
        return self.error()

    def __repr__(self) -> str:
        return f"FieldError({self.error()!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldError):
            return NotImplemented
        return (self.type, self.field, self.detail, _key(self.bad_value)) == (
            other.type, other.field, other.detail, _key(other.bad_value))

    def __hash__(self) -> int:
        return hash((self.type, self.field, self.detail))

    def to_cause(self) -> dict[str, str]:
        """The ``StatusCause`` an API server sends for this error."""
        return {"reason": self.type.value, "message": self.body(), "field": self.field}


def _key(v: Any) -> Any:
    return v if v is OMIT_VALUE else render_value(v)


def _s(path: Path | str) -> str:
    return str(path)


def invalid(path: Path | str, value: Any, detail: str) -> FieldError:
    """``field.Invalid``."""
    return FieldError(ErrorType.INVALID, _s(path), value, detail)


def type_invalid(path: Path | str, value: Any, detail: str) -> FieldError:
    """``field.TypeInvalid``."""
    return FieldError(ErrorType.TYPE_INVALID, _s(path), value, detail)


def required(path: Path | str, detail: str = "") -> FieldError:
    """``field.Required``."""
    return FieldError(ErrorType.REQUIRED, _s(path), "", detail)


def forbidden(path: Path | str, detail: str) -> FieldError:
    """``field.Forbidden``."""
    return FieldError(ErrorType.FORBIDDEN, _s(path), "", detail)


def duplicate(path: Path | str, value: Any) -> FieldError:
    """``field.Duplicate``."""
    return FieldError(ErrorType.DUPLICATE, _s(path), value)


def not_found(path: Path | str, value: Any) -> FieldError:
    """``field.NotFound``."""
    return FieldError(ErrorType.NOT_FOUND, _s(path), value)


def not_supported(path: Path | str, value: Any, valid_values: Sequence[str]) -> FieldError:
    """``field.NotSupported``: detail lists the quoted supported values."""
    detail = ""
    if valid_values:
        detail = "supported values: " + ", ".join(go_quote(str(v)) for v in valid_values)
    return FieldError(ErrorType.NOT_SUPPORTED, _s(path), value, detail)


def too_long(path: Path | str, value: Any, max_length: int) -> FieldError:
    """``field.TooLong``: the value is never shown."""
    del value
    if max_length >= 0:
        unit = "byte" if max_length == 1 else "bytes"
        msg = f"may not be more than {max_length} {unit}"
    else:
        msg = "value is too long"
    return FieldError(ErrorType.TOO_LONG, _s(path), "<value omitted>", msg)


def too_many(path: Path | str, actual: int, max_quantity: int) -> FieldError:
    """``field.TooMany``."""
    if max_quantity >= 0:
        unit = "item" if max_quantity == 1 else "items"
        msg = f"must have at most {max_quantity} {unit}"
    else:
        msg = "has too many items"
    return FieldError(ErrorType.TOO_MANY, _s(path), actual if actual >= 0 else OMIT_VALUE, msg)


def internal_error(path: Path | str, err: BaseException) -> FieldError:
    """``field.InternalError``."""
    return FieldError(ErrorType.INTERNAL, _s(path), str(err), str(err))


#: apimachinery's ``FieldImmutableErrorMsg``.
FIELD_IMMUTABLE_ERROR_MSG: Final = "field is immutable"


def validate_immutable_field(new: Any, old: Any, path: Path | str) -> ErrorList:
    """``apivalidation.ValidateImmutableField``: ``Invalid(path, new, "field is immutable")``."""
    if new != old:
        return ErrorList([invalid(path, new, FIELD_IMMUTABLE_ERROR_MSG)])
    return ErrorList()


class AggregateError(Exception):
    """``utilerrors.Aggregate``: several errors reported as one."""

    def __init__(self, errors: Iterable[BaseException]) -> None:
        self.errors: list[BaseException] = list(errors)
        super().__init__(self.error())

    def error(self) -> str:
        """One error prints as itself; several distinct ones as ``[e1, e2]``."""
        if not self.errors:
            return ""
        if len(self.errors) == 1:
            return str(self.errors[0])
        seen: list[str] = []
        for e in self.errors:
            msg = str(e)
            if msg not in seen:
                seen.append(msg)
        return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"

    def __str__(self) -> str:
        return self.error()


class ErrorList(list[FieldError]):
    """``field.ErrorList``: a list of :class:`FieldError`."""

    def to_aggregate(self) -> AggregateError | None:
        """``ToAggregate``: None when empty; duplicate messages dropped."""
        if not self:
            return None
        seen: set[str] = set()
        errs: list[FieldError] = []
        for e in self:
            msg = str(e)
            if msg in seen:
                continue
            seen.add(msg)
            errs.append(e)
        return AggregateError(errs)

    def to_causes(self) -> list[dict[str, str]]:
        """``StatusCause`` entries, one per error."""
        return [e.to_cause() for e in self]
