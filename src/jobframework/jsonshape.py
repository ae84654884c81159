"""JSON type checks for the parts of an object that the API server keeps as sent.

A CRD that embeds a pod template with ``x-kubernetes-preserve-unknown-fields`` lets any
JSON through there, and a mutating webhook sees a custom resource before its schema is
checked at all. A Go webhook would refuse such an object when decoding it into its typed
struct; a webhook on plain dicts checks the types first with :func:`shape_errors`, which
names each field of the wrong type, instead of failing when it reads them.

A *shape* is one of: a Python type (``str``, ``dict``, ``list``, ``bool``, ``int``); a
tuple of types (any of them); :data:`QUANTITY`; a ``dict`` literal ``{member: shape}``
(an object whose listed members, when present, fit); a one-item ``list`` literal
``[shape]`` (an array of items that fit); :class:`MapOf` (an object whose every value
fits). Absent and null members are accepted, null array items are not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from .field import ErrorList, Path, invalid, type_invalid
from .validation import quantity_value

__all__ = [
    "POD_TEMPLATE_SHAPE",
    "QUANTITY",
    "MapOf",
    "json_type",
    "shape_errors",
]


@attrs.frozen
class MapOf:
    """An object whose every value fits ``values`` (a Go ``map[string]T``)."""

    values: Any


class _Quantity:
    """A ``resource.Quantity``: a number, or a string such as ``100m`` or ``1Gi``."""

    def __repr__(self) -> str:
        return "QUANTITY"


#: The shape of a ``resource.Quantity``.
QUANTITY: Final = _Quantity()

_RESOURCES: Final = {"requests": MapOf(QUANTITY), "limits": MapOf(QUANTITY)}
_CONTAINER: Final = {"name": str, "image": str, "env": [{"name": str}], "envFrom": [dict],
                     "resources": _RESOURCES, "ports": [dict], "volumeMounts": [dict]}
_REQUIREMENTS: Final = [{"key": str, "operator": str, "values": [str]}]
#: The members of a ``PodTemplateSpec`` that the jobframework and the integrations read
#: (pod sets, admission data injection, node eligibility, child objects), with their types.
POD_TEMPLATE_SHAPE: Final[dict[str, Any]] = {
    "metadata": {"labels": MapOf(str), "annotations": MapOf(str)},
    "spec": {
        "containers": [_CONTAINER],
        "initContainers": [_CONTAINER],
        "volumes": [dict],
        "nodeSelector": MapOf(str),
        "nodeName": str,
        "tolerations": [dict],
        "schedulingGates": [{"name": str}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": _REQUIREMENTS,
                                   "matchFields": _REQUIREMENTS}]}}},
        "overhead": MapOf(QUANTITY),
        "resources": _RESOURCES,
        "priorityClassName": str,
        "restartPolicy": str,
    },
}


def json_type(value: Any) -> str:
    """The JSON type of a decoded value, as the API server names it in schema errors."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


_TYPE_NAMES: Final = {str: "a string", int: "an integer", bool: "a boolean", dict: "an object",
                      list: "an array"}


def _fits(value: Any, types: tuple[type, ...]) -> bool:
    # JSON booleans are no integers, even though Python's bool is an int.
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def shape_errors(value: Any, shape: Any, path: Path, *, nullable: bool = True) -> ErrorList:
    """Where ``value`` (found at ``path``) does not fit ``shape`` (see the module
    docstring), each a ``FieldValueTypeInvalid`` error naming the field."""
    if value is None and nullable:
        return ErrorList()
    if shape is QUANTITY:
        if quantity_value(value) is None:
            return ErrorList([invalid(path, value if isinstance(value, str) else json_type(value),
                                      "must be a quantity (e.g. 100m, 1Gi, 2)")])
        return ErrorList()
    if isinstance(shape, Mapping | MapOf):
        expected: tuple[type, ...] = (dict,)
    elif isinstance(shape, list):
        expected = (list,)
    else:
        expected = shape if isinstance(shape, tuple) else (shape,)
    if not _fits(value, expected):
        what = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in expected)
        return ErrorList([type_invalid(path, json_type(value), f"must be {what}")])
    errs = ErrorList()
    if isinstance(shape, MapOf):
        for key, member in value.items():
            errs.extend(shape_errors(member, shape.values, path.key(str(key)), nullable=False))
    elif isinstance(shape, Mapping):
        for key, member in shape.items():
            errs.extend(shape_errors(value.get(key), member, path.child(key)))
    elif isinstance(shape, list):
        for i, item in enumerate(value):
            errs.extend(shape_errors(item, shape[0], path.index_(i), nullable=False))
    return errs
