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
import re
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
    "strategic_merge_patch",
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
            f"error decoding patch: json: cannot unmarshal {_json_kind(patch)} into Go value "
            "of type map[string]interface {}")
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
            f"error decoding patch: json: cannot unmarshal {_json_kind(ops)} into Go value of "
            "type []handlers.jsonPatchOp")
    checked: list[dict[str, Any]] = []
    for op in ops:
        if not isinstance(op, Mapping):
            raise errors.BadRequest(
                f"error decoding patch: json: cannot unmarshal {_json_kind(op)} into Go value of "
                "type handlers.jsonPatchOp")
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
            op = _go_op(doc, op)
            if kind == "test":
                # jsonpatch's own test uses Python ==, which would let 1 pass for true.
                if "value" not in op or not isinstance(op.get("path"), str):
                    raise jsonpatch.InvalidJsonPatch("test operation needs path and value")
                parent, key = _parent(doc, op["path"])
                if isinstance(parent, dict) and key not in parent and op["value"] is None:
                    continue  # Go's json-patch (v4): a missing member tests equal to null
                actual = jsonpointer.resolve_pointer(doc, op["path"])
                if not json_equal(actual, op["value"]):
                    raise jsonpatch.JsonPatchTestFailed(
                        f"testing value {op['path']} failed")
                continue
            if kind == "replace" and isinstance(op.get("path"), str):
                parent, key = _parent(doc, op["path"])
                if isinstance(parent, dict) and key not in parent:
                    op = {**op, "op": "add"}  # Go's json-patch (v4) replaces a missing member
            if kind == "copy" and isinstance(op.get("from"), str):
                parent, key = _parent(doc, op["from"])
                if isinstance(parent, dict) and key not in parent:
                    op = {"op": "add", "path": op.get("path"), "value": None}  # copies null
            doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException,
            KeyError, IndexError, TypeError, ValueError) as exc:
        raise errors.Invalid(INVALID_JSON_PATCH_MESSAGE) from exc
    if not isinstance(doc, dict):
        raise errors.Invalid(INVALID_JSON_PATCH_MESSAGE)
    return doc


_GO_INDEX = re.compile(r"[+-]?[0-9]+")


def _go_pointer(doc: Any, path: str, *, adding: bool) -> str:
    # Go's json-patch (v4) reads array indexes with strconv.Atoi ("01", "+1") and counts
    # negative ones from the end (-1 is the last item; for "add", -1 appends).
    try:
        parts = jsonpointer.JsonPointer(path).parts
    except jsonpointer.JsonPointerException:
        return path
    node: Any = doc
    out: list[str] = []
    for i, token in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list) and _GO_INDEX.fullmatch(token):
            index = int(token)
            if index < 0:
                index += len(node) + (1 if adding and last else 0)
            token = str(index) if index >= 0 else token
        out.append(token)
        if last:
            break
        try:
            node = node[int(token)] if isinstance(node, list) else node[token]
        except (KeyError, IndexError, ValueError, TypeError):
            return jsonpointer.JsonPointer.from_parts([*out, *parts[i + 1:]]).path
    return jsonpointer.JsonPointer.from_parts(out).path


def _go_op(doc: Any, op: dict[str, Any]) -> dict[str, Any]:
    op = dict(op)
    if isinstance(op.get("path"), str):
        op["path"] = _go_pointer(doc, op["path"], adding=op.get("op") in ("add", "copy", "move"))
    if isinstance(op.get("from"), str):
        op["from"] = _go_pointer(doc, op["from"], adding=False)
    if op.get("op") in ("add", "replace") and "value" not in op:
        op["value"] = None  # Go decodes a missing value as null
    return op


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    # The container a pointer points into, and the last reference token.
    parts = jsonpointer.JsonPointer(path).parts
    if not parts:
        return None, ""
    parent = jsonpointer.JsonPointer.from_parts(parts[:-1]).resolve(doc)
    return parent, parts[-1]


def create_json_patch(
    original: Mapping[str, Any], modified: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """A JSON patch (list of RFC 6902 operations) turning ``original`` into ``modified``.

    ``apply_json_patch(original, create_json_patch(original, modified)) == modified``.
    """
    ops = jsonpatch.make_patch(dict(original), dict(modified)).patch
    return [dict(op) for op in copy.deepcopy(ops)]



# ---------------------------------------------------------------- strategic merge patch

#: Merge keys of the lists that built-in kinds merge by key in strategic merge patches
#: (``patchStrategy:"merge"`` with ``patchMergeKey``), by field name.
SMP_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "conditions": "type",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "podSets": "name",
    "podSetAssignments": "name",
    "admissionChecks": "name",
}
#: Lists of scalars merged as sets (``patchStrategy:"merge"`` without a key).
SMP_MERGE_SCALAR_LISTS: frozenset[str] = frozenset({"finalizers"})

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def strategic_merge_patch(
    target: Mapping[str, Any],
    patch: Mapping[str, Any],
    *,
    merge_keys: Mapping[str, str] | None = None,
    merge_scalar_lists: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Apply a strategic merge patch (the subset built-in kinds use) and return a new object.

    Maps merge as in a merge patch (``None`` deletes). Lists named in ``merge_keys``
    (default :data:`SMP_MERGE_KEYS`, e.g. containers by ``name``, conditions by ``type``)
    merge item by item on their key: patched items merge into the item with the same key,
    new ones are appended, ``{"$patch": "delete", key: ...}`` removes one. Scalar lists in
    ``merge_scalar_lists`` (finalizers) are unions, with ``$deleteFromPrimitiveList/<f>``
    removing values. Other lists are replaced. Directives: ``$patch: replace|delete|merge``
    on maps and lists, ``$retainKeys``, ``$setElementOrder/<field>``. Raises
    :class:`~jobframework.runtime.errors.BadRequest` for a non-object patch or an unknown
    directive. The apiserver refuses strategic merge patches for custom resources (415);
    that check belongs to the caller.
    """
    if not isinstance(patch, Mapping):
        raise errors.BadRequest(
            f"json: cannot unmarshal {_json_kind(patch)} into Go value of type "
            "map[string]interface {}")
    keys = SMP_MERGE_KEYS if merge_keys is None else merge_keys
    scalars = SMP_MERGE_SCALAR_LISTS if merge_scalar_lists is None else merge_scalar_lists
    result = _smp_map(dict(target), dict(patch), keys, scalars)
    return result if result is not None else {}


def _smp_map(original: dict[str, Any], patch: dict[str, Any], keys: Mapping[str, str],
             scalars: frozenset[str]) -> dict[str, Any] | None:
    directive = patch.get(_DIRECTIVE)
    if directive == "delete":
        return None
    if directive == "replace":
        replaced: dict[str, Any] = _strip_directives(
            {k: v for k, v in patch.items() if k != _DIRECTIVE})
        return replaced
    if directive not in (None, "merge"):
        raise errors.BadRequest(f"Unknown patch type: {directive}, for map: {patch}")
    retain = patch.get(_RETAIN_KEYS)
    if retain is not None:
        plain = [k for k in patch if not k.startswith("$")]
        if not isinstance(retain, list) or any(k not in retain for k in plain):
            raise errors.BadRequest("invalid patch format of retainKeys")
    result = copy.deepcopy(original)
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in (_DIRECTIVE, _RETAIN_KEYS):
            continue
        if key.startswith(_SET_ORDER):
            if isinstance(value, list):
                orders[key[len(_SET_ORDER):]] = value
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            name = key[len(_DELETE_PRIMITIVE):]
            current = result.get(name)
            if isinstance(current, list) and isinstance(value, list):
                result[name] = [x for x in current if not any(json_equal(x, v) for v in value)]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            if key not in result and value.get(_DIRECTIVE) == "replace":
                continue  # kube-apiserver drops a replaced map that did not exist
            merged = _smp_map(current if isinstance(current, dict) else {}, value, keys,
                              scalars)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _smp_list(key, current if isinstance(current, list) else [], value,
                                    keys, scalars, orders.get(key))
        else:
            result[key] = copy.deepcopy(value)
    for name, order in orders.items():
        if name not in patch and isinstance(result.get(name), list):
            result[name] = _normalize_order(result[name], [], order, result[name],
                                            keys.get(name))
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(name: str, original: list[Any], patch: list[Any], keys: Mapping[str, str],
              scalars: frozenset[str], order: list[Any] | None) -> list[Any]:
    for item in patch:
        if isinstance(item, dict) and item.get(_DIRECTIVE) == "replace":
            return [_strip_directives(i) for i in patch
                    if not (isinstance(i, dict) and i.get(_DIRECTIVE) == "replace")]
    if name in scalars:
        merged = copy.deepcopy(original)
        for value in patch:
            if not any(json_equal(value, x) for x in merged):
                merged.append(copy.deepcopy(value))
        return _split_and_order(merged, patch, order, original, None)
    key = keys.get(name)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return [_strip_directives(i) for i in patch]
    out = copy.deepcopy(original)
    for item in patch:
        if key not in item:
            raise errors.BadRequest(f"map: {item} does not contain declared merge key: {key}")
        index = next((i for i, x in enumerate(out)
                      if isinstance(x, dict) and json_equal(x.get(key), item[key])), None)
        if item.get(_DIRECTIVE) == "delete":
            out = [x for x in out
                   if not (isinstance(x, dict) and json_equal(x.get(key), item[key]))]
            continue
        if index is None:
            merged_item = _smp_map({}, item, keys, scalars)
            if merged_item is not None:
                out.append(merged_item)
        else:
            merged_item = _smp_map(out[index], item, keys, scalars)
            if merged_item is None:
                del out[index]
            else:
                out[index] = merged_item
    live = [x for x in patch if x.get(_DIRECTIVE) != "delete"]
    return _split_and_order(out, live, order, original, key)


def _identity(item: Any, key: str | None) -> Any:
    return item.get(key) if key is not None and isinstance(item, dict) else item


def _index_in(items: list[Any], item: Any, key: str | None) -> int:
    probe = _identity(item, key)
    for i, candidate in enumerate(items):
        if json_equal(_identity(candidate, key), probe):
            return i
    return -1


def _split_and_order(merged: list[Any], patch: list[Any], order: list[Any] | None,
                     live: list[Any], key: str | None) -> list[Any]:
    # mergePatchIntoOriginal: items named by the patch (or its $setElementOrder) come in
    # that order; items only the server has keep theirs, interleaved by live position.
    wanted = order if order is not None else patch
    named = [x for x in merged if _index_in(wanted, x, key) >= 0]
    server_only = [x for x in merged if _index_in(wanted, x, key) < 0]
    return _normalize_order(named, server_only, wanted, live, key)


def _normalize_order(named: list[Any], server_only: list[Any], wanted: list[Any],
                     live: list[Any], key: str | None) -> list[Any]:
    named = sorted(named, key=lambda x: _index_in(wanted, x, key))
    server_only = sorted(server_only, key=lambda x: _index_in(live, x, key))
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(named):
        if j >= len(named):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(named[j])
            j += 1
        else:
            left = _index_in(live, server_only[i], key)
            right = _index_in(live, named[j], key)
            if left >= 0 and right >= 0 and left < right:
                out.append(server_only[i])
                i += 1
            else:
                out.append(named[j])
                j += 1
    return out


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items()
                if not k.startswith("$") and v is not None}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return copy.deepcopy(value)
