"""Pure patch engines for the in-memory API server: merge patch, JSON patch, their diffs.

Every function here takes JSON values (``dict``/``list``/``str``/``int``/``float``/
``bool``/``None``), never mutates its arguments, and returns a fresh value. Errors are
the typed API errors the real kube-apiserver answers for the same bad patch:

* a body that is not a patch of the right shape → ``400 BadRequest``;
* a JSON patch that decodes but cannot be applied (a failed ``test``, a missing path, an
  unknown ``op``, an index out of range) → ``422 Invalid`` with the generic message the
  apiserver uses (``errors.NewGenericServerResponse(422, ...)`` in ``handlers/patch.go``):
  ``the server rejected our request due to an error in our request``. The library's own
  explanation is kept as the exception's ``__cause__`` for debugging.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import jsonpatch
import jsonpointer

from ..runtime import errors

__all__ = [
    "INVALID_JSON_PATCH_MESSAGE",
    "apply_json_patch",
    "create_json_patch",
    "create_merge_patch",
    "json_equal",
    "merge_patch",
]

#: The message kube-apiserver answers (422 Invalid) for a JSON patch it cannot apply.
INVALID_JSON_PATCH_MESSAGE = "the server rejected our request due to an error in our request"

_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values, as Go compares decoded JSON.

    Python's ``==`` says ``True == 1`` and ``1 == 1.0``; JSON (and Go's
    ``reflect.DeepEqual`` on decoded JSON) distinguishes booleans from numbers. Numbers
    compare by value, as Go decodes both ``1`` and ``1.0`` into ``float64``.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return False
        return all(json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _merge(target: Any, patch: Any) -> Any:
    # RFC 7386 MergePatch(Target, Patch), returning fresh containers throughout.
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


def merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Apply a JSON merge patch (RFC 7386) and return the new object.

    ``None`` in the patch deletes the key; nested objects merge recursively; any other
    value (lists included) replaces the target's value whole. ``target`` and ``patch``
    are left untouched. Raises :class:`~jobframework.runtime.errors.BadRequest` when the
    patch is not a JSON object (the apiserver cannot decode anything else into an object).
    """
    if not isinstance(patch, Mapping):
        raise errors.BadRequest(
            f"json: cannot unmarshal {_json_kind(patch)} into Go value of type "
            "map[string]interface {}")
    result = _merge(dict(target), dict(patch))
    assert isinstance(result, dict)
    return result


def _diff(original: dict[str, Any], modified: dict[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for key in original:
        if key not in modified:
            patch[key] = None
    for key, new in modified.items():
        if key not in original:
            patch[key] = copy.deepcopy(new)
            continue
        old = original[key]
        if isinstance(old, dict) and isinstance(new, dict):
            sub = _diff(old, new)
            if sub:
                patch[key] = sub
        elif not json_equal(old, new):
            patch[key] = copy.deepcopy(new)
    return patch


def create_merge_patch(
    original: Mapping[str, Any], modified: Mapping[str, Any]
) -> dict[str, Any]:
    """The merge patch that turns ``original`` into ``modified``.

    Same output as Go's ``jsonpatch.CreateMergePatch``: removed keys map to ``None``,
    changed nested objects recurse, changed scalars and lists appear whole, unchanged
    keys are omitted (so equal inputs give ``{}``). As with any merge patch, a ``null``
    value inside ``modified`` cannot be expressed (it would read as a deletion).
    """
    return _diff(dict(original), dict(modified))


def _json_kind(value: object) -> str:
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return "object"


def _check_ops(ops: object) -> list[dict[str, Any]]:
    # What Go's jsonpatch.DecodePatch rejects (400): a body that is not an array of objects.
    if not isinstance(ops, Sequence) or isinstance(ops, str | bytes):
        raise errors.BadRequest(
            f"json: cannot unmarshal {_json_kind(ops)} into Go value of type jsonpatch.Patch")
    checked: list[dict[str, Any]] = []
    for op in ops:
        if not isinstance(op, Mapping):
            raise errors.BadRequest(
                f"json: cannot unmarshal {_json_kind(op)} into Go value of type "
                "jsonpatch.Operation")
        checked.append(dict(op))
    return checked


def apply_json_patch(
    target: Mapping[str, Any], ops: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Apply a JSON patch (RFC 6902) and return the new object; ``target`` is untouched.

    Application is all-or-nothing. Raises :class:`~jobframework.runtime.errors.BadRequest`
    when ``ops`` is not a list of objects, and :class:`~jobframework.runtime.errors.Invalid`
    (422, the apiserver's generic message) when an operation fails: a ``test`` whose value
    differs, a path that does not exist, an unknown ``op``, a missing ``path``/``from``.
    A patch whose result is not an object is also Invalid (the apiserver cannot decode it).
    """
    checked = _check_ops(ops)
    doc: Any = copy.deepcopy(dict(target))
    try:
        for op in checked:
            kind = op.get("op")
            if kind not in _OPS:
                raise jsonpatch.InvalidJsonPatch(f"Unexpected kind: {kind!r}")
            if kind == "test":
                # jsonpatch's own test uses Python ==, which would let 1 pass for true.
                if "value" not in op or not isinstance(op.get("path"), str):
                    raise jsonpatch.InvalidJsonPatch("test operation needs path and value")
                actual = jsonpointer.resolve_pointer(doc, op["path"])
                if not json_equal(actual, op["value"]):
                    raise jsonpatch.JsonPatchTestFailed(
                        f"testing value {op['path']} failed")
                continue
            doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException,
            KeyError, IndexError, TypeError, ValueError) as exc:
        raise errors.Invalid(INVALID_JSON_PATCH_MESSAGE) from exc
    if not isinstance(doc, dict):
        raise errors.Invalid(INVALID_JSON_PATCH_MESSAGE)
    return doc


def create_json_patch(
    original: Mapping[str, Any], modified: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """A JSON patch (list of RFC 6902 operations) turning ``original`` into ``modified``.

    ``apply_json_patch(original, create_json_patch(original, modified)) == modified``.
    """
    ops = jsonpatch.make_patch(dict(original), dict(modified)).patch
    return [dict(op) for op in copy.deepcopy(ops)]

