"""Server-side apply and managed fields, after kubernetes-sigs/structured-merge-diff.

Two entry points, both pure (inputs are never mutated, the clock is a parameter):

* :func:`apply` merges an applied configuration into the live object for a field
  manager, detects conflicts with the fields other managers own (``409 Conflict`` with
  the apiserver's ``Apply failed with N conflict(s)`` message unless ``force``), removes
  the fields this manager applied before and no longer applies (unless someone else owns
  them), and records ownership in ``metadata.managedFields``;
* :func:`update_managed_fields` records a non-apply write (create, update, patch): the
  writer takes the fields it changed, every other manager loses them.

Ownership is a set of field paths, serialized as ``FieldsV1`` (``f:<field>``,
``k:<key json>`` for items of keyed lists, ``v:<value json>`` for items of set lists,
``.`` for a node that is itself owned). How a list or map merges comes from the CRD's
structural schema (``x-kubernetes-list-type``/``-list-map-keys``/``-map-type``) when
one is given; ``metadata`` and schema-less (built-in) kinds use a table of well-known
fields (conditions by ``type``, containers/podSets/podSetAssignments by ``name``,
ownerReferences by ``uid``, finalizers as a set, ...). Other lists are atomic, as in
Kubernetes.

How the API server uses it, as kube-apiserver does (verified against a local
kube-apiserver with random apply/update sequences):

* apply: ``schema.prune(applied)``, then :func:`apply` (``subresource="status"`` for the
  status endpoint; ``reset_fields=["status"]`` for main-resource writes to kinds with a
  status subresource), then ``schema.normalize(result, prune_nulls=False)`` and
  ``schema.validate(result, subresource=...)``: an apply can leave ``null`` behind
  (a map emptied by removal), which the apiserver then rejects;
* create/update/patch: normalize the new object, then :func:`update_managed_fields` with
  the stored object (``None`` on create) and the same ``subresource``/``reset_fields``;
* set server-owned fields (resourceVersion, generation, timestamps) after either.

The caller also checks the applied ``apiVersion``/``kind`` against the resource. Known
gaps: no version conversion (managers are compared in the object's version); the table
for schema-less kinds covers the core and Kueue fields listed above, other lists are
atomic there.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, Literal

from ..runtime import errors
from ._patch import json_equal
from ._schema import SchemaNode, StructuralSchema

__all__ = [
    "FieldPath",
    "FieldSet",
    "ManagedEntry",
    "apply",
    "decode_fields_v1",
    "decode_managed_fields",
    "encode_fields_v1",
    "field_set",
    "format_path",
    "update_managed_fields",
]

#: One step of a field path: ``("f", name)``, ``("k", ((field, json), ...))``,
#: ``("v", json)`` or ``("i", index)``.
PathElement = tuple[str, Any]
#: A path from the object root, e.g. ``(("f", "spec"), ("f", "replicas"))``.
FieldPath = tuple[PathElement, ...]
#: A set of owned paths.
FieldSet = frozenset[FieldPath]

_MISSING: Final[Any] = object()
BEFORE_FIRST_APPLY: Final = "before-first-apply"
ANCIENT_CHANGES: Final = "ancient-changes"
MAX_UPDATE_MANAGERS: Final = 10

# Paths no manager ever owns (structured-merge-diff's stripMeta set).
_STRIP: Final[frozenset[FieldPath]] = frozenset({
    (("f", "apiVersion"),),
    (("f", "kind"),),
    (("f", "metadata"),),
    *((("f", "metadata"), ("f", name)) for name in (
        "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName",
        "generation", "managedFields", "resourceVersion")),
})

# ------------------------------------------------------------------ type table

# Keyed lists of built-in kinds and of metadata, by field name (and parent where it matters).
_TABLE_LIST_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "conditions": ("type",),
    "podSets": ("name",),
    "podSetAssignments": ("name",),
    "admissionChecks": ("name",),
    "reclaimablePods": ("name",),
    "podSetUpdates": ("name",),
    "flavors": ("name",),
    "resources": ("name",),
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "ownerReferences": ("uid",),
    "resourceClaims": ("name",),
    "schedulingGates": ("name",),
    "hostAliases": ("ip",),
    "containerStatuses": ("name",),
    "initContainerStatuses": ("name",),
    "ephemeralContainerStatuses": ("name",),
    "replicatedJobs": ("name",),
    "replicatedJobsStatus": ("name",),
}
_TABLE_SETS: Final = frozenset({"finalizers"})
# Maps whose entries are owned one by one even when their values are objects.
_TABLE_GRANULAR: Final = frozenset({
    "labels", "annotations", "limits", "requests", "data", "binaryData", "stringData",
    "capacity", "allocatable", "overhead",
})
# +mapType=atomic / +structType=atomic fields of the core API.
_TABLE_ATOMIC_MAPS: Final = frozenset({
    "nodeSelector", "selector", "namespaceSelector", "labelSelector", "nodeAffinity",
    "podAffinityTerm", "matchLabelKeys",
})
# Lists whose merge type depends on the kind: (group, kind, field path) -> list type.
_KIND_LISTS: Final[dict[tuple[str, str, tuple[str, ...]], str]] = {
    ("batch", "Job", ("status", "conditions")): "atomic",
    ("batch", "CronJob", ("status", "active")): "atomic",
}


class _Type:
    """How a value at some path merges: from a schema node, deduced, or the table."""

    __slots__ = ("kind", "mode", "names", "node")

    def __init__(self, node: SchemaNode | None, names: tuple[str, ...],
                 mode: Literal["schema", "deduced", "table"],
                 kind: tuple[str, str] = ("", "")) -> None:
        self.node = node
        self.names = names
        self.mode = mode
        self.kind = kind

    @classmethod
    def root(cls, schema: StructuralSchema | None, obj: Mapping[str, Any] | None = None) -> _Type:
        group = str((obj or {}).get("apiVersion") or "").rpartition("/")[0]
        kind = (group, str((obj or {}).get("kind") or ""))
        if schema is None:
            return cls(None, (), "table", kind)
        return cls(schema.root, (), "schema", kind)

    def field(self, name: str) -> _Type:
        names = (*self.names, name)
        if name == "metadata" and (not self.names or self._embedded()):
            return _Type(None, names, "table", self.kind)
        if self.mode == "schema" and self.node is not None:
            prop = self.node.properties.get(name)
            if prop is not None:
                return _Type(prop, names, "schema", self.kind)
            if self.node.additional is not None:
                return _Type(self.node.additional, names, "schema", self.kind)
            return _Type(None, names, "deduced", self.kind)
        return _Type(None, names, self.mode, self.kind)

    def items(self) -> _Type:
        if self.mode == "schema":
            if self.node is not None and self.node.items is not None:
                return _Type(self.node.items, self.names, "schema", self.kind)
            return _Type(None, self.names, "deduced", self.kind)
        return _Type(None, self.names, self.mode, self.kind)

    def _embedded(self) -> bool:
        return self.mode == "schema" and self.node is not None and self.node.embedded

    def is_struct_field(self, name: str) -> bool:
        """Whether ``name`` is a named field (as opposed to an entry of a granular map)."""
        if self.mode == "schema":
            return self.node is not None and name in self.node.properties
        if self.mode == "deduced":
            return False
        return not (self.names and self.names[-1] in _TABLE_GRANULAR)

    def map_atomic(self) -> bool:
        if self.mode == "schema":
            return self.node is not None and self.node.map_type == "atomic"
        if self.mode == "table":
            return bool(self.names) and self.names[-1] in _TABLE_ATOMIC_MAPS
        return False

    def list_kind(self) -> tuple[str, tuple[str, ...]]:
        """``("atomic"|"set"|"map", keys)``."""
        if self.mode == "schema":
            node = self.node
            if node is None:
                return "atomic", ()
            if node.list_type == "map" and node.list_map_keys:
                return "map", node.list_map_keys
            if node.list_type == "set":
                return "set", ()
            return "atomic", ()
        if self.mode == "deduced" or not self.names:
            return "atomic", ()
        if _KIND_LISTS.get((*self.kind, self.names)) == "atomic":
            return "atomic", ()
        name = self.names[-1]
        if name in _TABLE_SETS:
            return "set", ()
        if name == "ports":
            parent = self.names[-2] if len(self.names) > 1 else ""
            if parent in ("containers", "initContainers", "ephemeralContainers"):
                return "map", ("containerPort", "protocol")
            return "map", ("port", "protocol")
        keys = _TABLE_LIST_KEYS.get(name)
        if keys is not None:
            return "map", keys
        return "atomic", ()

    def key_default(self, key: str) -> Any:
        if self.mode == "schema" and self.node is not None and self.node.items is not None:
            prop = self.node.items.properties.get(key)
            if prop is not None and prop.has_default:
                return prop.default
        if self.mode == "table" and key == "protocol":
            return "TCP"
        return _MISSING


# ------------------------------------------------------------------ paths


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class _ApplyError(Exception):
    """A malformed value for its type (duplicate or key-less list items)."""


def _item_element(item: Any, typ: _Type, kind: str, keys: tuple[str, ...], index: int,
                  strict: bool) -> PathElement:
    if kind == "set":
        if strict and isinstance(item, dict | list):
            raise _ApplyError(
                f"element {index}: associative list without keys has an element that's a "
                "map type" if isinstance(item, dict)
                else f"element {index}: not supported: associative list with lists as elements")
        return ("v", _canon(item))
    if not isinstance(item, dict):
        if strict:
            what = "a null element" if item is None else "non-map elements"
            raise _ApplyError(f"element {index}: associative list with keys may not have {what}")
        return ("i", index)
    parts: list[tuple[str, str]] = []
    for key in sorted(keys):
        if key in item:
            parts.append((key, _canon(item[key])))
            continue
        default = typ.key_default(key)
        if default is not _MISSING:
            parts.append((key, _canon(default)))
        # A missing key field without default is left out: that is another entry.
    if not parts and strict:
        names = " ".join(json.dumps(k) for k in keys)
        raise _ApplyError(
            f"element {index}: associative list with keys has an element that omits all key "
            f"fields [{names}] (and doesn't have default values for any key fields)")
    return ("k", tuple(parts))


def _list_elements(items: list[Any], typ: _Type, strict: bool) -> list[PathElement]:
    kind, keys = typ.list_kind()
    elements = [_item_element(item, typ, kind, keys, i, strict) for i, item in enumerate(items)]
    if strict:
        seen: set[PathElement] = set()
        for element in elements:
            if element in seen:
                raise _ApplyError(f"duplicate entries for key {_format_element(element)}")
            seen.add(element)
    return elements


def _go_value(text: str) -> str:
    # structured-merge-diff's value.ToString: strings quoted, other scalars bare.
    value = json.loads(text)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _format_element(element: PathElement) -> str:
    kind, value = element
    if kind == "f":
        return f".{value}"
    if kind == "k":
        return "[" + ",".join(f"{k}={_go_value(v)}" for k, v in value) + "]"
    if kind == "v":
        return f"[={_go_value(value)}]"
    return f"[{value}]"


def format_path(path: FieldPath) -> str:
    """A path as the apiserver prints it in conflicts: ``.spec.podSets[name="main"].count``."""
    return "".join(_format_element(e) for e in path)


def _serialize_element(element: PathElement) -> str:
    kind, value = element
    if kind == "f":
        return f"f:{value}"
    if kind == "k":
        return "k:{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in value) + "}"
    if kind == "v":
        return f"v:{value}"
    return f"i:{value}"


def _parse_element(text: str) -> PathElement:
    kind, sep, rest = text.partition(":")
    if not sep:
        raise ValueError(f"invalid path element {text!r}")
    if kind == "f":
        return ("f", rest)
    if kind == "k":
        parsed = json.loads(rest)
        if not isinstance(parsed, dict):
            raise ValueError(f"invalid key {rest!r}")
        return ("k", tuple(sorted((k, _canon(v)) for k, v in parsed.items())))
    if kind == "v":
        return ("v", _canon(json.loads(rest)))
    if kind == "i":
        return ("i", int(rest))
    raise ValueError(f"invalid path element {text!r}")


def encode_fields_v1(fields: Iterable[FieldPath]) -> dict[str, Any]:
    """The ``fieldsV1`` object for a set of paths (``"."`` marks an owned inner node)."""
    root: dict[str, Any] = {}
    for path in sorted(set(fields), key=lambda p: [_serialize_element(e) for e in p]):
        node = root
        for element in path:
            node = node.setdefault(_serialize_element(element), {})
        node["."] = {}
    return _tidy(root)


def _tidy(node: dict[str, Any]) -> dict[str, Any]:
    # A leaf member is "{}"; an inner member keeps "." next to its children.
    out: dict[str, Any] = {}
    if "." in node and len(node) > 1:
        out["."] = {}
    for key in sorted(k for k in node if k != "."):
        out[key] = _tidy(node[key])
    return out


def decode_fields_v1(fields: Mapping[str, Any]) -> set[FieldPath]:
    """The set of paths in a ``fieldsV1`` object; raises ``ValueError`` when malformed."""
    out: set[FieldPath] = set()

    def walk(node: Mapping[str, Any], prefix: FieldPath) -> None:
        for key, child in node.items():
            if key == ".":
                if prefix:
                    out.add(prefix)
                continue
            if not isinstance(child, Mapping):
                raise ValueError(f"invalid fieldsV1 node at {key!r}")
            path = (*prefix, _parse_element(key))
            if not child:
                out.add(path)
            else:
                walk(child, path)

    walk(fields, ())
    return out


# ------------------------------------------------------------------ walkers


def _to_set(value: Any, typ: _Type, path: FieldPath, out: set[FieldPath], strict: bool) -> None:
    # structured-merge-diff's ToFieldSet.
    if isinstance(value, dict):
        if typ.map_atomic():
            out.add(path)
            return
        for key, child in value.items():
            child_path = (*path, ("f", key))
            _to_set(child, typ.field(key), child_path, out, strict)
            if child is None or child == {} or not typ.is_struct_field(key):
                out.add(child_path)
        return
    if isinstance(value, list):
        kind, _ = typ.list_kind()
        if kind == "atomic":
            out.add(path)
            return
        item_type = typ.items()
        for element, item in zip(_list_elements(value, typ, strict), value, strict=True):
            child_path = (*path, element)
            _to_set(item, item_type, child_path, out, strict)
            out.add(child_path)
        return
    if path:
        out.add(path)


def field_set(obj: Mapping[str, Any], schema: StructuralSchema | None = None) -> set[FieldPath]:
    """Every path ``obj`` sets, as the applier of ``obj`` would own it."""
    out: set[FieldPath] = set()
    _to_set(dict(obj), _Type.root(schema, obj), (), out, False)
    return out


class _Comparison:
    __slots__ = ("added", "modified", "removed")

    def __init__(self) -> None:
        self.added: set[FieldPath] = set()
        self.modified: set[FieldPath] = set()
        self.removed: set[FieldPath] = set()


def _leaf(lhs: Any, rhs: Any, path: FieldPath, cmp: _Comparison) -> None:
    if lhs is _MISSING:
        cmp.added.add(path)
    elif rhs is _MISSING:
        cmp.removed.add(path)
    elif not json_equal(lhs, rhs):
        cmp.modified.add(path)


def _shape(lhs: Any, rhs: Any) -> type | None:
    # The walkers follow the field's type: a null (or absent) side of a map or list field
    # reads as an empty map or list; mismatched shapes compare as leaves.
    kinds = {type(v) for v in (lhs, rhs) if v is not _MISSING and v is not None}
    if kinds == {dict}:
        return dict
    if kinds == {list}:
        return list
    return None


def _compare(lhs: Any, rhs: Any, typ: _Type, path: FieldPath, cmp: _Comparison) -> None:
    # structured-merge-diff's compareWalker: leaves are added/modified/removed, and inner
    # nodes present on one side only are added/removed too.
    shape = _shape(lhs, rhs)
    in_leaf = True
    if shape is dict:
        left = lhs if isinstance(lhs, dict) else {}
        right = rhs if isinstance(rhs, dict) else {}
        if typ.map_atomic() or (not left and not right):
            _leaf(lhs, rhs, path, cmp)
        else:
            in_leaf = False
            for key in [*left, *(k for k in right if k not in left)]:
                _compare(left.get(key, _MISSING), right.get(key, _MISSING), typ.field(key),
                         (*path, ("f", key)), cmp)
    elif shape is list:
        left_l = lhs if isinstance(lhs, list) else []
        right_l = rhs if isinstance(rhs, list) else []
        kind, _ = typ.list_kind()
        if kind == "atomic" or (not left_l and not right_l):
            _leaf(lhs, rhs, path, cmp)
        else:
            in_leaf = False
            item_type = typ.items()
            left_items = dict(zip(_list_elements(left_l, typ, False), left_l, strict=True))
            right_items = dict(zip(_list_elements(right_l, typ, False), right_l, strict=True))
            for element in [*left_items, *(e for e in right_items if e not in left_items)]:
                _compare(left_items.get(element, _MISSING), right_items.get(element, _MISSING),
                         item_type, (*path, element), cmp)
    else:
        _leaf(lhs, rhs, path, cmp)
    if not in_leaf and path:
        if lhs is _MISSING:
            cmp.added.add(path)
        elif rhs is _MISSING:
            cmp.removed.add(path)


def _merge(lhs: Any, rhs: Any, typ: _Type) -> Any:
    # structured-merge-diff's mergingWalker: rhs (the applied config) wins at leaves.
    if rhs is _MISSING:
        return copy.deepcopy(lhs)
    if lhs is _MISSING:
        return copy.deepcopy(rhs)
    if rhs is None and lhs and not isinstance(lhs, str):
        # Applying null to a map or keyed list changes nothing (the applier still owns it).
        if isinstance(lhs, dict) and not typ.map_atomic():
            return copy.deepcopy(lhs)
        if isinstance(lhs, list) and typ.list_kind()[0] != "atomic":
            return copy.deepcopy(lhs)
    if isinstance(lhs, dict) and isinstance(rhs, dict) and not typ.map_atomic():
        if not lhs and not rhs:
            return {}
        out: dict[str, Any] = {}
        for key in [*lhs, *(k for k in rhs if k not in lhs)]:
            merged = _merge(lhs.get(key, _MISSING), rhs.get(key, _MISSING), typ.field(key))
            if merged is not _MISSING:
                out[key] = merged
        return out
    if isinstance(lhs, list) and isinstance(rhs, list):
        kind, _ = typ.list_kind()
        if kind != "atomic" and (lhs or rhs):
            return _merge_lists(lhs, rhs, typ)
    return copy.deepcopy(rhs)


def _merge_lists(lhs: list[Any], rhs: list[Any], typ: _Type) -> list[Any]:
    # The order structured-merge-diff produces: live items keep their place, applied
    # items shared with the live list are placed in the applied order.
    item_type = typ.items()
    lhs_pes = _list_elements(lhs, typ, False)
    rhs_pes = _list_elements(rhs, typ, False)
    observed_l = dict(zip(lhs_pes, lhs, strict=True))
    observed_r = dict(zip(rhs_pes, rhs, strict=True))
    shared = [pe for pe in rhs_pes if pe in observed_l]
    next_shared = shared.pop(0) if shared else None
    merged_r: set[PathElement] = set()
    out: list[Any] = []
    li = ri = 0
    while li < len(lhs_pes) or ri < len(rhs_pes):
        if li < len(lhs_pes) and ri < len(rhs_pes):
            pe = lhs_pes[li]
            if pe == rhs_pes[ri]:
                merged_r.add(pe)
                out.append(_merge(observed_l[pe], observed_r[pe], item_type))
                li += 1
                ri += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if pe in observed_r and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lhs_pes):
            pe = lhs_pes[li]
            if pe not in observed_r:
                out.append(copy.deepcopy(lhs[li]))
                li += 1
                continue
            if pe in merged_r:
                li += 1
        if ri < len(rhs_pes):
            pe = rhs_pes[ri]
            merged_r.add(pe)
            out.append(_merge(observed_l.get(pe, _MISSING), observed_r[pe], item_type))
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = shared.pop(0) if shared else None
    return out


# Marks "this node is itself in the set" inside a path trie.
_END: Final[PathElement] = ("", None)


def _trie(paths: Iterable[FieldPath]) -> dict[PathElement, Any]:
    root: dict[PathElement, Any] = {}
    for path in paths:
        node = root
        for element in path:
            node = node.setdefault(element, {})
        node[_END] = True
    return root


def _remove(value: Any, trie: Mapping[Any, Any], typ: _Type) -> Any:
    # Drop every path of the trie (with its subtree) from value; returns a new value. As
    # structured-merge-diff's removingWalker, a map or list emptied by the removal becomes
    # null (the apiserver then rejects it unless the schema allows null).
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, child in value.items():
            sub = trie.get(("f", key))
            if sub is None:
                out[key] = child
            elif _END in sub:
                continue
            else:
                out[key] = _remove(child, sub, typ.field(key))
        return out if out else None
    if isinstance(value, list) and value:
        kind, _ = typ.list_kind()
        if kind == "atomic":
            return value
        result: list[Any] = []
        for element, item in zip(_list_elements(value, typ, False), value, strict=True):
            sub = trie.get(element)
            if sub is None:
                result.append(item)
            elif _END not in sub:
                result.append(_remove(item, sub, typ.items()))
        return result if result else None
    return value


def _ensure_named(paths: Iterable[FieldPath], root: _Type) -> set[FieldPath]:
    # fieldpath.Set.EnsureNamedFieldsAreMembers: owning a.b.c also owns the named
    # (struct) fields a and a.b, but not entries of maps or list items.
    out: set[FieldPath] = set()
    for path in paths:
        out.add(path)
        typ = root
        for i, element in enumerate(path[:-1]):
            kind, value = element
            if kind == "f":
                if typ.is_struct_field(value):
                    out.add(path[: i + 1])
                typ = typ.field(value)
            else:
                typ = typ.items()
    return out


# ------------------------------------------------------------------ managed fields


class ManagedEntry:
    """One ``metadata.managedFields`` entry, decoded."""

    __slots__ = ("api_version", "fields", "manager", "operation", "subresource", "time")

    def __init__(self, manager: str, operation: str, api_version: str, fields: set[FieldPath],
                 time: str | None = None, subresource: str = "") -> None:
        self.manager = manager
        self.operation = operation
        self.api_version = api_version
        self.fields = fields
        self.time = time
        self.subresource = subresource

    @property
    def identifier(self) -> tuple[str, str, str, str]:
        """What makes entries distinct: appliers are not told apart by apiVersion."""
        version = "" if self.operation == "Apply" else self.api_version
        return (self.manager, self.operation, version, self.subresource)

    def describe(self) -> str:
        """The manager as conflicts name it: ``"kubectl" using v1`` for updaters."""
        text = json.dumps(self.manager, ensure_ascii=False)
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def encode(self) -> dict[str, Any]:
        """The wire form of the entry."""
        entry: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
        }
        if self.time is not None:
            entry["time"] = self.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = encode_fields_v1(self.fields)
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry

    def __repr__(self) -> str:
        return (f"ManagedEntry({self.manager!r}, {self.operation!r}, {self.api_version!r}, "
                f"{sorted(format_path(p) for p in self.fields)!r})")


_Managers = dict[tuple[str, str, str, str], ManagedEntry]


def decode_managed_fields(entries: Any) -> list[ManagedEntry]:
    """Decode ``metadata.managedFields``; raises ``ValueError`` for a malformed entry."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ValueError("metadata.managedFields must be a list")
    out: list[ManagedEntry] = []
    for raw in entries:
        if not isinstance(raw, Mapping):
            raise ValueError("managedFields entry must be an object")
        operation = raw.get("operation")
        if operation not in ("Apply", "Update"):
            raise ValueError(f"invalid managedFields operation {operation!r}")
        if raw.get("fieldsType", "FieldsV1") != "FieldsV1":
            raise ValueError(f"unsupported fieldsType {raw.get('fieldsType')!r}")
        fields_v1 = raw.get("fieldsV1") or {}
        if not isinstance(fields_v1, Mapping):
            raise ValueError("fieldsV1 must be an object")
        out.append(ManagedEntry(
            manager=str(raw.get("manager") or ""), operation=str(operation),
            api_version=str(raw.get("apiVersion") or ""),
            fields=decode_fields_v1(fields_v1), time=raw.get("time"),
            subresource=str(raw.get("subresource") or "")))
    return out


def _managers_of(obj: Mapping[str, Any] | None) -> _Managers:
    if obj is None:
        return {}
    meta = obj.get("metadata") or {}
    managers: _Managers = {}
    for entry in decode_managed_fields(meta.get("managedFields")):
        managers[entry.identifier] = entry
    return managers


def _strip(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    out = copy.deepcopy(dict(obj)) if obj is not None else {}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return out


def _filtered(paths: Iterable[FieldPath], ignored: frozenset[str]) -> set[FieldPath]:
    return {p for p in paths if p not in _STRIP and not (p and p[0][0] == "f"
                                                         and p[0][1] in ignored)}


def _unix(time: str | None) -> float:
    if not time:
        return 0.0
    try:
        return dt.datetime.fromisoformat(time.replace("Z", "+00:00")).timestamp() // 1
    except ValueError:
        return 0.0


def _cap_updaters(managers: _Managers) -> None:
    # capManagers: keep at most 10 Update entries, folding the oldest into one
    # "ancient-changes" entry per apiVersion.
    updaters = [k for k, e in managers.items() if e.operation == "Update"]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda k: (_unix(managers[k].time), json.dumps(k)))
    first_by_version: dict[str, tuple[str, str, str, str]] = {}
    length = len(updaters)
    for key in updaters:
        if length <= MAX_UPDATE_MANAGERS:
            break
        entry = managers[key]
        bucket = (ANCIENT_CHANGES, "Update", entry.api_version, "")
        first = first_by_version.get(entry.api_version)
        if first is None:
            first_by_version[entry.api_version] = key
            continue
        if bucket not in managers:
            moved = managers.pop(first)
            managers[bucket] = ManagedEntry(ANCIENT_CHANGES, "Update", moved.api_version,
                                            set(moved.fields), moved.time)
        managers[bucket].fields |= entry.fields
        managers[bucket].time = entry.time
        del managers[key]
        length -= 1


def _encode(obj: dict[str, Any], managers: _Managers) -> dict[str, Any]:
    entries = [e for e in managers.values() if e.fields]
    entries.sort(key=lambda e: (e.operation, _unix(e.time), e.manager, e.api_version,
                                e.subresource))
    meta = obj.setdefault("metadata", {})
    if entries:
        meta["managedFields"] = [e.encode() for e in entries]
    else:
        meta.pop("managedFields", None)
    return obj


def _ignored_fields(obj: Mapping[str, Any], other: Mapping[str, Any] | None,
                    subresource: str | None, reset_fields: Iterable[str] | None) -> frozenset[str]:
    if reset_fields is not None:
        return frozenset(reset_fields)
    if subresource == "status":
        names = set(obj) | set(other or {})
        return frozenset(names - {"status", "apiVersion", "kind"})
    return frozenset()


def _reset(result: dict[str, Any], live: Mapping[str, Any], ignored: frozenset[str]) -> None:
    # What the registry strategy does: fields this write may not change keep the live value.
    for name in ignored:
        if name in live:
            result[name] = copy.deepcopy(live[name])
        else:
            result.pop(name, None)


def _conflict_error(conflicts: list[tuple[ManagedEntry, FieldPath]]) -> errors.Conflict:
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {e.describe()}",
               "field": format_path(p)} for e, p in conflicts]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = (f"Apply failed with 1 conflict: conflict with {entry.describe()}: "
                   f"{format_path(path)}")
    else:
        lines: list[str] = []
        by_manager: dict[str, list[FieldPath]] = {}
        names: dict[str, ManagedEntry] = {}
        for entry, path in conflicts:
            ident = json.dumps(_identifier_json(entry))
            by_manager.setdefault(ident, []).append(path)
            names[ident] = entry
        for ident in sorted(by_manager):
            lines.append(f"conflicts with {names[ident].describe()}:")
            lines.extend(f"- {format_path(p)}" for p in by_manager[ident])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.Conflict(message, details={"causes": causes})


def _identifier_json(entry: ManagedEntry) -> dict[str, str]:
    # BuildManagerIdentifier's JSON (what the apiserver sorts conflicting managers by).
    out = {"manager": entry.manager, "operation": entry.operation}
    if entry.operation != "Apply":
        out["apiVersion"] = entry.api_version
    if entry.subresource:
        out["subresource"] = entry.subresource
    return out


def _element_order(element: PathElement) -> tuple[int, str]:
    # fieldpath.PathElement ordering: field names, then keys, values, indexes.
    rank = {"f": 0, "k": 1, "v": 2, "i": 3}.get(element[0], 4)
    value = element[1]
    return rank, (f"{value:012d}" if isinstance(value, int) else str(value))


def _sorted_paths(paths: Iterable[FieldPath]) -> list[FieldPath]:
    # fieldpath.Set.Iterate: at every node its members first, then its children, each in
    # element order (so .status.phase comes before .status.conditions[...].status).
    trie = _trie(paths)
    out: list[FieldPath] = []

    def walk(node: Mapping[Any, Any], prefix: FieldPath) -> None:
        elements = sorted((e for e in node if e != _END), key=_element_order)
        for element in elements:
            if _END in node[element]:
                out.append((*prefix, element))
        for element in elements:
            children = [e for e in node[element] if e != _END]
            if children:
                walk(node[element], (*prefix, element))

    walk(trie, ())
    return out


def _typed_error(obj: Mapping[str, Any], which: str, exc: _ApplyError,
                 path: str = "") -> errors.ApiError:
    # A plain error in the apiserver's field manager: answered as 500 with its text.
    meta = obj.get("metadata") or {}
    api_version = str(obj.get("apiVersion", ""))
    group_version = api_version if "/" in api_version else f"/{api_version}"
    where = (f"{meta.get('namespace', '')}/{meta.get('name', '')}; "
             f"{group_version}, Kind={obj.get('kind', '')}")
    return errors.InternalError(f"failed to create typed {which} object ({where}): {path}{exc}",
                                reason="")


def _check_typed(obj: Mapping[str, Any], typ: _Type, which: str) -> None:
    def walk(value: Any, t: _Type, path: FieldPath) -> Iterator[None]:
        if isinstance(value, dict) and not t.map_atomic():
            for key, child in value.items():
                yield from walk(child, t.field(key), (*path, ("f", key)))
        elif isinstance(value, list):
            kind, _ = t.list_kind()
            if kind == "atomic":
                return
            try:
                elements = _list_elements(value, t, True)
            except _ApplyError as exc:
                raise _typed_error(obj, which, exc, format_path(path) + ": ") from exc
            for element, item in zip(elements, value, strict=True):
                yield from walk(item, t.items(), (*path, element))

    for _ in walk(dict(obj), typ, ()):
        pass


# ------------------------------------------------------------------ public API


def apply(
    live: Mapping[str, Any] | None,
    applied: Mapping[str, Any],
    *,
    manager: str,
    force: bool,
    now: str,
    schema: StructuralSchema | None = None,
    subresource: str | None = None,
    reset_fields: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Server-side apply of ``applied`` onto ``live`` (``None`` to create) by ``manager``.

    Returns the new object with ``metadata.managedFields`` updated; when nothing changes
    the live object is returned with only its managed fields updated (the applier may
    now share ownership). Raises :class:`~jobframework.runtime.errors.Conflict` (409)
    naming every conflicting field and manager unless ``force``, in which case the
    fields move to ``manager``. ``now`` (RFC 3339) stamps the applier's entry when the
    object changes.

    ``subresource="status"`` records the entry with ``subresource: status`` and ignores
    every top-level field but ``status``; ``reset_fields`` overrides which top-level fields
    this write cannot change (the server passes ``["status"]`` for main-resource writes to
    kinds with a status subresource). Such fields keep their live value in the result.
    """
    if not isinstance(applied, Mapping):
        raise errors.BadRequest("error decoding YAML: apply patch must be an object")
    applied_meta = applied.get("metadata")
    if isinstance(applied_meta, Mapping) and applied_meta.get("managedFields") is not None:
        raise errors.BadRequest("metadata.managedFields must be nil")
    api_version = str(applied.get("apiVersion") or "")
    root = _Type.root(schema, applied)
    config = _strip(applied)
    _check_typed(config, root, "patch")
    live_obj = _strip(live)
    ignored = _ignored_fields(config, live_obj, subresource, reset_fields)
    try:
        managers = _managers_of(live)
    except ValueError as exc:
        raise errors.InternalError(f"failed to decode managed fields: {exc}", reason="") from exc
    sub = subresource or ""

    if live is not None and not managers:
        # The first apply to an untracked object: what exists belongs to before-first-apply.
        managers = _updated_managers({}, {}, live_obj, root, BEFORE_FIRST_APPLY, api_version,
                                     now, sub, ignored)

    key = (manager, "Apply", "", sub)
    previous = managers.get(key)
    last = set(previous.fields) if previous is not None else set()
    applied_set = _filtered(field_set(config, schema), ignored)
    managers[key] = ManagedEntry(manager, "Apply", api_version, applied_set,
                                 previous.time if previous else None, sub)

    merged = _merge(live_obj, config, root)
    _reset(merged, live_obj, ignored)
    merged = _prune_unapplied(merged, managers, last, root)

    cmp = _Comparison()
    _compare(live_obj, merged, root, (), cmp)
    changed = _filtered(cmp.modified | cmp.added, ignored)
    removed = _filtered(cmp.removed, ignored)
    conflicts: list[tuple[ManagedEntry, FieldPath]] = []
    for other_key, entry in managers.items():
        if other_key == key:
            continue
        for path in _sorted_paths(entry.fields & changed):
            conflicts.append((entry, path))
    if conflicts and not force:
        conflicts.sort(key=lambda c: json.dumps(_identifier_json(c[0])))
        raise _conflict_error(conflicts)
    for other_key, entry in list(managers.items()):
        if other_key == key:
            continue
        entry.fields = set(entry.fields) - changed - removed
        if not entry.fields:
            del managers[other_key]

    object_changed = not json_equal(live_obj, merged)
    if object_changed or live is None:
        managers[key].time = now
    if not managers[key].fields:
        del managers[key]
    result = merged if object_changed else live_obj
    return _encode(result, managers)


def _prune_unapplied(merged: dict[str, Any], managers: _Managers, last: set[FieldPath],
                     root: _Type) -> dict[str, Any]:
    # merge.Updater.prune, step by step: remove everything this manager applied last time,
    # add back what any manager (this one's new config included) owns, then make sure only
    # fields from the last applied set went away. Paths no manager may own (metadata.name,
    # uid, ...) are never removed.
    if not last:
        return merged

    def owned_set(obj: Any) -> set[FieldPath]:
        out: set[FieldPath] = set()
        if isinstance(obj, dict):
            _to_set(obj, root, (), out, False)
        return _ensure_named(out, root)

    def remove(paths: set[FieldPath]) -> dict[str, Any]:
        paths = paths - _STRIP
        if not paths:
            return copy.deepcopy(merged)
        result = _remove(merged, _trie(paths), root)
        return result if isinstance(result, dict) else {}

    last_e = _ensure_named(last, root)
    managed: set[FieldPath] = set()
    for entry in managers.values():
        managed |= entry.fields
    managed_e = _ensure_named(managed, root)
    merged_set = owned_set(merged)
    pruned = remove(last_e)
    pruned = remove(merged_set - (owned_set(pruned) | managed_e))
    return remove((merged_set - owned_set(pruned)) & last_e)


def _updated_managers(managers: _Managers, old: Mapping[str, Any], new: Mapping[str, Any],
                      root: _Type, manager: str, api_version: str, now: str, subresource: str,
                      ignored: frozenset[str]) -> _Managers:
    # merge.Updater.Update under a temporary name, then folded into the manager's entry
    # (managedFieldsUpdater): the writer takes what it changed, everyone else loses it.
    cmp = _Comparison()
    _compare(dict(old), dict(new), root, (), cmp)
    changed = _filtered(cmp.modified | cmp.added, ignored)
    removed = _filtered(cmp.removed, ignored)
    out: _Managers = {}
    for ident, entry in managers.items():
        fields = set(entry.fields) - changed - removed
        if fields:
            out[ident] = ManagedEntry(entry.manager, entry.operation, entry.api_version, fields,
                                      entry.time, entry.subresource)
    if changed:
        key = (manager, "Update", api_version, subresource)
        previous = out.get(key)
        fields = set(changed) | (previous.fields if previous else set())
        out[key] = ManagedEntry(manager, "Update", api_version, fields, now, subresource)
    _cap_updaters(out)
    return out


def update_managed_fields(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    *,
    manager: str,
    now: str,
    operation: Literal["Update"] = "Update",
    subresource: str | None = None,
    schema: StructuralSchema | None = None,
    reset_fields: Iterable[str] | None = None,
) -> dict[str, Any]:
    """A copy of ``new`` with ``metadata.managedFields`` updated for a non-apply write.

    ``old`` is the stored object (``None`` on create). The writer's ``Update`` entry
    (per manager, apiVersion and subresource) gains every field the write added or
    changed, stamped ``now``; other managers lose those and the removed ones. As the
    apiserver does: ``managedFields`` sent in ``new`` are used as the starting point when
    non-empty (main resource only), ``[]`` clears tracking, and an existing object without
    managed fields stays untracked. Status-subresource writes and ``reset_fields`` are
    handled as in :func:`apply` (those fields are ignored, not reset: the caller's
    strategy owns the object's content).
    """
    del operation  # only Update exists for non-apply writes
    result = _strip(new)
    sent = (new.get("metadata") or {}).get("managedFields")
    if sent is not None and not subresource and _is_reset(sent):
        return _encode(result, {})
    managers: _Managers | None = None
    if sent and not subresource:
        try:
            managers = {e.identifier: e for e in decode_managed_fields(sent)}
        except ValueError:
            managers = None
        if managers is not None and not managers:
            managers = None
    if managers is None:
        try:
            managers = _managers_of(old)
        except ValueError:
            managers = {}
    if old is not None and not managers:
        return _encode(result, {})
    root = _Type.root(schema, new)
    old_obj = _strip(old)
    ignored = _ignored_fields(result, old_obj, subresource, reset_fields)
    api_version = str(new.get("apiVersion") or "")
    updated = _updated_managers(managers, old_obj, result, root, manager, api_version, now,
                                subresource or "", ignored)
    return _encode(result, updated)


def _is_reset(sent: Any) -> bool:
    return bool(sent == [] or sent == [{}])
