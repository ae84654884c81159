"""``metav1.Condition`` and apimachinery's condition helpers (``meta.SetStatusCondition``...).

The helpers accept lists of :class:`Condition` models or of plain condition dicts, so
reconcilers that work on raw objects use the same semantics: ``lastTransitionTime`` moves
only when ``status`` changes; reason, message and observedGeneration update in place.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import MutableSequence, Sequence
from typing import Any, TypeVar

from ..runtime.clock import rfc3339
from .base import KueueModel

CONDITION_TRUE = "True"
CONDITION_FALSE = "False"
CONDITION_UNKNOWN = "Unknown"


class Condition(KueueModel):
    """``metav1.Condition``."""

    type: str
    status: str
    observed_generation: int | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


C = TypeVar("C", Condition, dict[str, Any])

_FIELDS = {
    "type": "type", "status": "status", "reason": "reason", "message": "message",
    "observedGeneration": "observed_generation", "lastTransitionTime": "last_transition_time",
}
_DEFAULTS: dict[str, Any] = {"reason": "", "message": "", "observedGeneration": 0,
                             "lastTransitionTime": ""}


def _get(c: Condition | dict[str, Any], key: str) -> Any:
    value = c.get(key) if isinstance(c, dict) else getattr(c, _FIELDS[key])
    return _DEFAULTS.get(key) if value is None else value


def _set(c: Condition | dict[str, Any], key: str, value: Any) -> None:
    # observedGeneration is omitempty in Go: a zero value is not serialized at all.
    omit = key == "observedGeneration" and not value
    if isinstance(c, dict):
        if omit:
            c.pop(key, None)
        else:
            c[key] = value
    elif omit:
        setattr(c, _FIELDS[key], None)
        c.__pydantic_fields_set__.discard(_FIELDS[key])
    else:
        setattr(c, _FIELDS[key], value)


def find_condition(conditions: Sequence[C] | None, type_: str) -> C | None:
    """The condition of ``type_``, or None (``meta.FindStatusCondition``)."""
    for c in conditions or ():
        if _get(c, "type") == type_:
            return c
    return None


def is_condition_true(conditions: Sequence[Any] | None, type_: str) -> bool:
    """``meta.IsStatusConditionTrue``."""
    c = find_condition(conditions, type_)
    return c is not None and _get(c, "status") == CONDITION_TRUE


def is_condition_present_and_equal(
    conditions: Sequence[Any] | None, type_: str, status: str
) -> bool:
    """``meta.IsStatusConditionPresentAndEqual``."""
    c = find_condition(conditions, type_)
    return c is not None and _get(c, "status") == status


def has_condition_with_type_and_reason(
    conditions: Sequence[Any] | None, cond: Condition | dict[str, Any]
) -> bool:
    """Kueue's ``HasConditionWithTypeAndReason``: same type, status and reason."""
    c = find_condition(conditions, _get(cond, "type"))
    return c is not None and all(_get(c, k) == _get(cond, k) for k in ("status", "reason"))


def set_condition(
    conditions: MutableSequence[C], new: C, *, now: dt.datetime | None = None
) -> bool:
    """``meta.SetStatusCondition``: add or update in place; returns whether anything changed.

    ``lastTransitionTime`` is taken from ``new`` when set, else ``now`` (default: the
    current time) — for an existing condition only when its status changes.
    """
    stamp = _get(new, "lastTransitionTime") or rfc3339(now or dt.datetime.now(dt.UTC))
    existing = find_condition(conditions, _get(new, "type"))
    if existing is None:
        _set(new, "lastTransitionTime", stamp)
        # reason and message are required in metav1.Condition's JSON, even when empty.
        _set(new, "reason", _get(new, "reason"))
        _set(new, "message", _get(new, "message"))
        conditions.append(new)
        return True
    changed = False
    if _get(existing, "status") != _get(new, "status"):
        _set(existing, "status", _get(new, "status"))
        _set(existing, "lastTransitionTime", stamp)
        changed = True
    for key in ("reason", "message", "observedGeneration"):
        if _get(existing, key) != _get(new, key):
            _set(existing, key, _get(new, key))
            changed = True
    return changed


def remove_condition(conditions: MutableSequence[C], type_: str) -> bool:
    """``meta.RemoveStatusCondition``: returns whether a condition was removed."""
    for i, c in enumerate(conditions):
        if _get(c, "type") == type_:
            del conditions[i]
            return True
    return False
