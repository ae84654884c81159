"""Structural schemas of custom resources: validation, pruning and defaulting, as kube-apiserver.

A :class:`StructuralSchema` wraps one CRD version's ``schema.openAPIV3Schema``
(apiextensions.k8s.io/v1) and answers what the apiextensions-apiserver answers for
objects of that version:

* :meth:`StructuralSchema.validate` returns apimachinery ``StatusCause`` dicts
  (``{"reason", "message", "field"}``) with the messages kube-openapi's validator and
  apimachinery's ``field.Error`` produce, in the order the CR strategy collects them
  (OpenAPI schema, then embedded resources, then ``x-kubernetes-list-type`` invariants).
  Feed them to :func:`jobframework.runtime.errors.new_invalid` for the 422 response.
* :meth:`StructuralSchema.prune` drops undeclared fields (``apiVersion``, ``kind`` and
  ``metadata`` survive at the root and in embedded resources), honouring
  ``x-kubernetes-preserve-unknown-fields``; :meth:`StructuralSchema.unknown_fields`
  lists what pruning would drop (for ``fieldValidation=Strict|Warn``).
* :meth:`StructuralSchema.apply_defaults` applies structural ``default`` values, and
  :meth:`StructuralSchema.prune_nulls` drops ``null`` where the schema neither allows nor
  defaults it; the apiserver runs prune → prune_nulls → defaults on every decode.
* :meth:`StructuralSchema.list_type`, :meth:`StructuralSchema.list_map_keys` and
  :meth:`StructuralSchema.map_type` tell server-side apply how to merge a field.

Not implemented: ``x-kubernetes-validations`` (CEL rules are not evaluated; as the
apiserver, a blocking schema error on a schema with rules adds the "some validation rules
were not checked" cause), validation ratcheting on update, ``uniqueItems``, ``$ref``, and full
``ObjectMeta`` validation of embedded resources (only their ``apiVersion``/``kind``).
All methods are pure: inputs are never mutated.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime
import ipaddress
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

from ..jsonshape import json_type
from ..runtime.gofmt import go_float, go_quote
from ..runtime.gofmt import render_value as format_bad_value

__all__ = [
    "Cause",
    "SchemaNode",
    "StructuralSchema",
    "field_error",
    "format_bad_value",
    "strict_decoding_message",
]

#: An apimachinery ``metav1.StatusCause``: ``{"reason": ..., "message": ..., "field": ...}``.
Cause = dict[str, str]

_META_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})
# ObjectMeta's JSON fields: the apiserver decodes metadata into ObjectMeta, dropping others.
_OBJECT_META_FIELDS: Final = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
})
_MISSING: Final[Any] = object()

# apimachinery field.ErrorType → the word ErrorBody() starts with.
_TYPE_WORDS: Final = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "FieldValueTooFew": "Too few",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
    "FieldValueTooShort": "Too short",
}
# Types whose ErrorBody() never shows the bad value.
_VALUELESS: Final = frozenset({
    "FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "FieldValueTooShort",
    "InternalError",
})
#: ``field.Error.BadValue`` that prints no value (apimachinery's ``omitValue``).
OMIT: Final[Any] = object()
# What a nil *field.Path prints: kube-openapi errors without a name land there.
_NIL_PATH: Final = "<nil>"





def field_error(kind: str, field: str, value: Any = OMIT, detail: str = "") -> Cause:
    """A ``StatusCause`` for one apimachinery ``field.Error``.

    ``kind`` is the ``field.ErrorType`` (``FieldValueInvalid``, ``FieldValueRequired``...),
    which is also the cause's ``reason``; ``message`` is ``ErrorBody()``, e.g.
    ``Invalid value: "x": must be an integer``.
    """
    body = _TYPE_WORDS.get(kind, kind)
    if kind not in _VALUELESS and value is not OMIT:
        body = f"{body}: {format_bad_value(value)}"
    if detail:
        body = f"{body}: {detail}"
    return {"reason": kind, "message": body, "field": field}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class SchemaNode:
    """One node of a structural schema, with the extensions that change API behaviour."""

    __slots__ = (
        "additional", "additional_allowed", "all_of", "any_of", "default", "embedded", "enum",
        "exclusive_maximum", "exclusive_minimum", "format", "int_or_string", "items",
        "list_map_keys", "list_type", "map_type", "max_items", "max_length",
        "max_properties", "maximum", "min_items", "min_length", "min_properties", "minimum",
        "multiple_of", "not_", "nullable", "one_of", "pattern", "preserve_unknown",
        "properties", "raw", "required", "types",
    )

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw: Mapping[str, Any] = raw
        self.int_or_string: bool = bool(raw.get("x-kubernetes-int-or-string"))
        declared = raw.get("type")
        types: tuple[str, ...] = (str(declared),) if declared else ()
        if self.int_or_string:
            types = ("integer", "string")
        self.types: tuple[str, ...] = types
        self.nullable: bool = bool(raw.get("nullable"))
        #: The format validation uses: apiextensions strips the ones it does not support.
        self.format: str = _supported_format(str(raw.get("format") or ""), types)
        self.properties: dict[str, SchemaNode] = {
            k: SchemaNode(v) for k, v in (raw.get("properties") or {}).items()
        }
        extra = raw.get("additionalProperties")
        self.additional: SchemaNode | None = (
            SchemaNode(extra) if isinstance(extra, Mapping) else None)
        #: ``additionalProperties`` as a bool: None when unset.
        self.additional_allowed: bool | None = (
            True if isinstance(extra, Mapping) else extra if isinstance(extra, bool) else None)
        items = raw.get("items")
        self.items: SchemaNode | None = SchemaNode(items) if isinstance(items, Mapping) else None
        self.preserve_unknown: bool = bool(raw.get("x-kubernetes-preserve-unknown-fields"))
        self.embedded: bool = bool(raw.get("x-kubernetes-embedded-resource"))
        self.list_type: str | None = raw.get("x-kubernetes-list-type")
        keys = raw.get("x-kubernetes-list-map-keys")
        self.list_map_keys: tuple[str, ...] | None = tuple(keys) if keys else None
        self.map_type: str | None = raw.get("x-kubernetes-map-type")
        self.default: Any = raw.get("default", _MISSING)
        self.enum: list[Any] | None = list(raw["enum"]) if raw.get("enum") is not None else None
        self.required: tuple[str, ...] = tuple(raw.get("required") or ())
        self.minimum: float | None = raw.get("minimum")
        self.maximum: float | None = raw.get("maximum")
        self.exclusive_minimum: bool = bool(raw.get("exclusiveMinimum"))
        self.exclusive_maximum: bool = bool(raw.get("exclusiveMaximum"))
        self.multiple_of: float | None = raw.get("multipleOf")
        self.min_length: int | None = raw.get("minLength")
        self.max_length: int | None = raw.get("maxLength")
        self.pattern: str | None = raw.get("pattern")
        self.min_items: int | None = raw.get("minItems")
        self.max_items: int | None = raw.get("maxItems")
        self.min_properties: int | None = raw.get("minProperties")
        self.max_properties: int | None = raw.get("maxProperties")
        self.all_of: tuple[SchemaNode, ...] = tuple(SchemaNode(s) for s in raw.get("allOf") or ())
        self.any_of: tuple[SchemaNode, ...] = tuple(SchemaNode(s) for s in raw.get("anyOf") or ())
        self.one_of: tuple[SchemaNode, ...] = tuple(SchemaNode(s) for s in raw.get("oneOf") or ())
        self.not_: SchemaNode | None = (
            SchemaNode(raw["not"]) if isinstance(raw.get("not"), Mapping) else None)

    @property
    def has_default(self) -> bool:
        """Whether the node declares a ``default``."""
        return self.default is not _MISSING

    def field(self, name: str) -> SchemaNode | None:
        """The schema of member ``name`` of an object node (property or additionalProperties)."""
        node = self.properties.get(name)
        return node if node is not None else self.additional

    def __repr__(self) -> str:
        return f"SchemaNode({dict(self.raw)!r})"


def _split_path(path: str | Sequence[str]) -> list[str]:
    if isinstance(path, str):
        return [p for p in re.split(r"\.|\[\d*\]", path.lstrip(".")) if p]
    return [p for p in path if p]


class StructuralSchema:
    """A CRD version's structural schema; see the module docstring for what it answers."""

    def __init__(self, open_api_v3_schema: Mapping[str, Any]) -> None:
        self.raw: dict[str, Any] = copy.deepcopy(dict(open_api_v3_schema))
        self.root: SchemaNode = SchemaNode(self.raw)
        self._regex_cache: dict[str, re.Pattern[str]] = {}
        #: Whether any node declares ``x-kubernetes-validations`` (CEL rules, not evaluated).
        self.has_validation_rules: bool = _has_rules(self.raw)

    @classmethod
    def from_crd(cls, crd: Mapping[str, Any], version: str | None = None) -> StructuralSchema:
        """The schema of ``version`` (default: the storage version) of a v1 CRD manifest."""
        versions = crd.get("spec", {}).get("versions") or []
        chosen = None
        for v in versions:
            if (version is None and v.get("storage")) or v.get("name") == version:
                chosen = v
                break
        if chosen is None:
            raise ValueError(f"CRD has no version {version or '(storage)'}")
        schema = (chosen.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            # Every v1 CRD version has a schema; treat a missing one as "keep everything".
            schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return cls(schema)

    def __repr__(self) -> str:
        return f"StructuralSchema({self.raw!r})"

    # ---------------------------------------------------------------- lookups

    def node(self, path: str | Sequence[str]) -> SchemaNode | None:
        """The schema of a field path (``"spec.podSets"`` or ``("spec", "podSets")``).

        List items are entered implicitly: ``spec.podSets.name`` is the ``name`` of each
        pod set. Index segments (``[0]``) are ignored.
        """
        node: SchemaNode | None = self.root
        for seg in _split_path(path):
            while node is not None and node.items is not None and "array" in node.types:
                node = node.items
            if node is None:
                return None
            node = node.field(seg)
        return node

    def list_type(self, path: str | Sequence[str]) -> str | None:
        """``x-kubernetes-list-type`` of a list field (``atomic``, ``set``, ``map``) or None."""
        node = self.node(path)
        return node.list_type if node is not None else None

    def list_map_keys(self, path: str | Sequence[str]) -> tuple[str, ...] | None:
        """``x-kubernetes-list-map-keys`` of a ``map`` list field, or None."""
        node = self.node(path)
        if node is None or node.list_type != "map":
            return None
        return node.list_map_keys

    def map_type(self, path: str | Sequence[str]) -> str | None:
        """``x-kubernetes-map-type`` of an object field (``granular``/``atomic``) or None."""
        node = self.node(path)
        return node.map_type if node is not None else None

    # ---------------------------------------------------------------- pruning

    def prune(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``obj`` without the fields the schema does not declare.

        Mirrors ``pruning.Prune(obj, schema, isResourceRoot=true)``: the root keeps
        ``apiVersion``/``kind``/``metadata``; so does any ``x-kubernetes-embedded-resource``;
        ``x-kubernetes-preserve-unknown-fields`` keeps unknown members but still prunes
        inside declared ones.
        """
        result = copy.deepcopy(dict(obj))
        _prune(result, self._root_as_resource(), [], None)
        return result

    def unknown_fields(self, obj: Mapping[str, Any]) -> list[str]:
        """Sorted paths (``spec.foo[0].bar``) that :meth:`prune` would drop."""
        found: list[tuple[int, str]] = []
        _prune(copy.deepcopy(dict(obj)), self._root_as_resource(), [], found)
        # The apiserver's order: the root's ObjectMeta decoding, then pruning (sorted),
        # then the coercion of embedded resources' metadata.
        root_meta = [p for group, p in found if group == 0]
        pruned = sorted(p for group, p in found if group == 1)
        embedded_meta = [p for group, p in found if group == 2]
        return root_meta + pruned + embedded_meta

    def _root_as_resource(self) -> SchemaNode:
        if self.root.embedded:
            return self.root
        raw = dict(self.root.raw)
        raw["x-kubernetes-embedded-resource"] = True
        return SchemaNode(raw)

    # ---------------------------------------------------------------- defaulting

    def prune_nulls(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A copy without ``null`` members whose schema is neither nullable nor defaulted."""
        result = copy.deepcopy(dict(obj))
        _prune_nulls(result, self.root)
        return result

    def apply_defaults(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A copy with structural ``default`` values filled in, as ``defaulting.Default``.

        A default fills a missing member or a ``null`` one that is not nullable; defaults
        nested inside a default value apply too.
        """
        result = copy.deepcopy(dict(obj))
        _default(result, self.root)
        return result

    def normalize(self, obj: Mapping[str, Any], *, prune_nulls: bool = True) -> dict[str, Any]:
        """Prune, drop non-nullable nulls, then default: what the apiserver stores.

        That is what decoding a request body does (create, update, merge and JSON patch).
        The result of a server-side apply is not decoded again: pass
        ``prune_nulls=False`` there, so that an applied ``null`` reaches validation (and
        fails it unless nullable or defaulted), as with kube-apiserver.
        """
        result = copy.deepcopy(dict(obj))
        _prune(result, self._root_as_resource(), [], None)
        if prune_nulls:
            _prune_nulls(result, self.root)
        _default(result, self.root)
        return result

    # ---------------------------------------------------------------- validation

    def validate(self, obj: Mapping[str, Any], *, subresource: str | None = None) -> list[Cause]:
        """Validation causes for ``obj``; empty when valid.

        Messages are kube-apiserver's, e.g. for ``spec.replicas: "x"`` on an integer field:
        ``{"reason": "FieldValueTypeInvalid", "field": "spec.replicas", "message":
        'Invalid value: "string": spec.replicas in body must be of type integer: "string"'}``.

        ``subresource="status"`` validates a status write as the status strategy does:
        only ``status``, against its own schema, so messages name fields relative to it
        (``conditions[0].type in body ...``) while causes carry the full field path.
        Validation ratcheting (ignoring errors in fields an update left unchanged) is not
        implemented.
        """
        causes: list[Cause] = []
        if subresource == "status":
            node = self.root.properties.get("status")
            if node is not None and "status" in obj:
                found: list[Cause] = []
                self._validate(obj["status"], node, "", found)
                for cause in found:
                    name = cause["field"]
                    cause["field"] = "status" if name == _NIL_PATH else f"status.{name}"
                causes.extend(found)
            _validate_lists(obj, self.root, "", causes)
            return self._with_rules_notice(causes)
        self._validate(obj, self.root, "", causes)
        _validate_embedded(obj, self.root, "", causes, root=True)
        _validate_lists(obj, self.root, "", causes)
        return self._with_rules_notice(causes)

    def _with_rules_notice(self, causes: list[Cause]) -> list[Cause]:
        # With CEL rules present, a blocking schema error makes the apiserver skip them and
        # say so (hasBlockingErr); the rules themselves are not evaluated here.
        if self.has_validation_rules and any(c["reason"] in _BLOCKING for c in causes):
            causes.append(field_error(
                "FieldValueInvalid", _NIL_PATH, None,
                "some validation rules were not checked because the object was invalid; "
                "correct the existing errors to complete validation"))
        return causes

    def _regex(self, pattern: str) -> re.Pattern[str] | None:
        compiled = self._regex_cache.get(pattern)
        if compiled is None:
            try:
                compiled = re.compile(pattern)
            except re.error:
                return None
            self._regex_cache[pattern] = compiled
        return compiled

    def _validate(self, data: Any, node: SchemaNode, path: str, out: list[Cause]) -> None:
        # kube-openapi runs these validators in this order, all that apply, no early exit.
        if data is None:
            self._check_type(data, node, path, out)
            self._check_enum(data, node, path, out)
            return
        self._check_type(data, node, path, out)
        self._check_composition(data, node, path, out)
        if isinstance(data, str):
            self._check_string(data, node, path, out)
            self._check_format(data, node, path, out)
        if _is_number(data):
            self._check_number(data, node, path, out)
        if isinstance(data, list):
            self._check_list(data, node, path, out)
        self._check_enum(data, node, path, out)
        if isinstance(data, dict):
            self._check_object(data, node, path, out)

    def _check_type(self, data: Any, node: SchemaNode, path: str, out: list[Cause]) -> None:
        if not node.types:
            return
        wanted = ",".join(node.types)
        if data is None:
            if not node.nullable:
                out.append(_type_error(path, wanted, "null"))
            return
        actual = json_type(data)  # kube-openapi's schemaInfoForType on decoded JSON
        is_float_int = actual == "number" and "integer" in node.types and float(data).is_integer()
        is_int_float = actual == "integer" and "number" in node.types
        if node.format and not isinstance(data, str | list):
            # A format is checked like a type for non-strings (kube-openapi's typeValidator);
            # decoded JSON numbers are int64 or float64 there.
            go_format = {"integer": "int64", "number": "float64"}.get(actual, "")
            if not (actual in node.types or node.format == go_format or is_float_int
                    or is_int_float):
                out.append(_type_error(path, node.format, go_format))
                return
        if (node.format and "integer" not in node.types and "number" not in node.types
                and isinstance(data, str | list)):
            return
        if actual in node.types or is_float_int or is_int_float:
            return
        out.append(_type_error(path, wanted, actual))

    def _check_composition(
        self, data: Any, node: SchemaNode, path: str, out: list[Cause]
    ) -> None:
        name = path or ""
        if node.any_of:
            results = [self._sub(data, s, path) for s in node.any_of]
            if not any(not r for r in results):
                out.append(_nil_path_invalid(f"{name} must validate at least one schema (anyOf)"))
                out.extend(_fewest(results))
        if node.one_of:
            results = [self._sub(data, s, path) for s in node.one_of]
            valid = sum(1 for r in results if not r)
            if valid != 1:
                extra = ("Found none valid" if valid == 0
                         else f"Found {valid} valid alternatives")
                out.append(_nil_path_invalid(
                    f"{name} must validate one and only one schema (oneOf). {extra}"))
                if valid == 0:
                    out.extend(_fewest(results))
        for sub in node.all_of:
            out.extend(self._sub(data, sub, path))
        if node.not_ is not None and not self._sub(data, node.not_, path):
            out.append(_nil_path_invalid(f"{name} must not validate the schema (not)"))

    def _sub(self, data: Any, node: SchemaNode, path: str) -> list[Cause]:
        found: list[Cause] = []
        self._validate(data, node, path, found)
        return found

    def _check_string(self, data: str, node: SchemaNode, path: str, out: list[Cause]) -> None:
        # kube-openapi reports only the first failing string constraint.
        if node.max_length is not None and len(data) > node.max_length:
            out.append(field_error("FieldValueTooLong", _fp(path), OMIT,
                                   _bytes_detail(node.max_length)))
            return
        if node.min_length is not None and len(data) < node.min_length:
            out.append(field_error("FieldValueInvalid", _fp(path), data,
                                   f"{path} in body should be at least {node.min_length} "
                                   "chars long"))
            return
        if node.pattern:
            regex = self._regex(node.pattern)
            if regex is not None and regex.search(data) is None:
                out.append(field_error("FieldValueInvalid", _fp(path), data,
                                       f"{path} in body should match '{node.pattern}'"))

    def _check_format(self, data: str, node: SchemaNode, path: str, out: list[Cause]) -> None:
        check = _FORMATS.get(node.format.replace("-", ""))
        if check is not None and not check(data):
            out.append(field_error("FieldValueTypeInvalid", _fp(path), data,
                                   f"{path} in body must be of type {node.format}: "
                                   f"{go_quote(data)}"))

    def _check_number(
        self, data: float, node: SchemaNode, path: str, out: list[Cause]
    ) -> None:
        if len(node.types) == 1 and not _in_format_range(data, node.types[0], node.format):
            typ = node.types[0]
            fmt = node.format if node.format in _NUMERIC_FORMATS.get(typ, ()) else ""
            detail = (f"Checked value must be of type {typ} with format {fmt} in {path}" if fmt
                      else f"Checked value must be of type {typ} (default format) in {path}")
            out.append(field_error("FieldValueInvalid", _NIL_PATH, "", detail))
        if node.multiple_of is not None and node.multiple_of > 0:
            quotient = Decimal(str(data)) / Decimal(str(node.multiple_of))
            if quotient != quotient.to_integral_value():
                out.append(field_error(
                    "FieldValueInvalid", _fp(path), data,
                    f"{path} in body should be a multiple of {_num(node.multiple_of, data)}"))
        if node.maximum is not None:
            over = data >= node.maximum if node.exclusive_maximum else data > node.maximum
            if over:
                word = "less than" if node.exclusive_maximum else "less than or equal to"
                out.append(field_error(
                    "FieldValueInvalid", _fp(path), data,
                    f"{path} in body should be {word} {_num(node.maximum, data)}"))
        if node.minimum is not None:
            under = data <= node.minimum if node.exclusive_minimum else data < node.minimum
            if under:
                word = "greater than" if node.exclusive_minimum else "greater than or equal to"
                out.append(field_error(
                    "FieldValueInvalid", _fp(path), data,
                    f"{path} in body should be {word} {_num(node.minimum, data)}"))

    def _check_list(self, data: list[Any], node: SchemaNode, path: str,
                    out: list[Cause]) -> None:
        if node.items is not None:
            for i, item in enumerate(data):
                self._validate(item, node.items, f"{path}[{i}]", out)
        if node.min_items is not None and len(data) < node.min_items:
            out.append(field_error("FieldValueInvalid", _fp(path), len(data),
                                   f"{path} in body should have at least {node.min_items} items"))
        if node.max_items is not None and len(data) > node.max_items:
            out.append(field_error("FieldValueTooMany", _fp(path), len(data),
                                   _too_many_detail(node.max_items)))

    def _check_enum(self, data: Any, node: SchemaNode, path: str, out: list[Cause]) -> None:
        if not node.enum:
            return
        if any(_enum_equal(data, allowed) for allowed in node.enum):
            return
        supported = ", ".join(
            go_quote(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))
            for v in node.enum)
        out.append(field_error("FieldValueNotSupported", _fp(path), data,
                               f"supported values: {supported}"))

    def _check_object(self, data: dict[str, Any], node: SchemaNode, path: str,
                      out: list[Cause]) -> None:
        size = len(data)
        if node.min_properties is not None and size < node.min_properties:
            out.append(field_error(
                "FieldValueInvalid", _fp(path), size,
                f"{path} in body should have at least {node.min_properties} properties"))
        if node.max_properties is not None and size > node.max_properties:
            out.append(field_error("FieldValueTooMany", _fp(path), size,
                                   _too_many_detail(node.max_properties)))
        if node.additional_allowed is False:
            for key in data:
                if key not in node.properties:
                    out.append(field_error("FieldValueInvalid", _fp(path), key,
                                           f"{path}.{key} in body is a forbidden property"))
        elif node.additional is not None:
            for key, value in data.items():
                if key not in node.properties:
                    self._validate(value, node.additional, f"{path}.{key}", out)
        for name, sub in node.properties.items():
            if name in data:
                self._validate(data[name], sub, f"{path}.{name}" if path else name, out)
        for name in node.required:
            if name not in data:
                out.append(field_error("FieldValueRequired", f"{path}.{name}".lstrip(".")))


# ------------------------------------------------------------------ helpers


_BLOCKING: Final = frozenset({
    "FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany",
    "FieldValueTypeInvalid",
})


def _has_rules(raw: Any) -> bool:
    if isinstance(raw, Mapping):
        if raw.get("x-kubernetes-validations"):
            return True
        return any(_has_rules(v) for k, v in raw.items() if k not in ("default", "enum", "example"))
    if isinstance(raw, list):
        return any(_has_rules(v) for v in raw)
    return False


def _fewest(results: list[list[Cause]]) -> list[Cause]:
    # kube-openapi reports the alternative that matched best; fewest errors stands in.
    best = results[0]
    for found in results[1:]:
        if len(found) < len(best):
            best = found
    return best


def _fp(path: str) -> str:
    # An error at the root has no name: the apiserver prints the nil field path.
    return path or _NIL_PATH


def _type_error(path: str, wanted: str, actual: str) -> Cause:
    return field_error("FieldValueTypeInvalid", _fp(path), actual,
                       f"{path} in body must be of type {wanted}: {go_quote(actual)}")


def _nil_path_invalid(detail: str) -> Cause:
    return field_error("FieldValueInvalid", _NIL_PATH, "", detail)


def _bytes_detail(limit: int) -> str:
    return f"may not be more than {limit} {'byte' if limit == 1 else 'bytes'}"


def _too_many_detail(limit: int) -> str:
    return f"must have at most {limit} {'item' if limit == 1 else 'items'}"


def _num(bound: float, data: float) -> str:
    # Integer data is checked against int64(bound) and printed so; floats print as %v.
    if isinstance(data, int):
        return str(int(bound))
    return go_float(float(bound))


# The formats kube-openapi's numberValidator range-checks values against.
_NUMERIC_FORMATS: Final = {"integer": ("int32", "int64"), "number": ("float", "double")}
_INT_RANGES: Final = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "": (-(2**63), 2**63 - 1),
}


def _in_format_range(data: float, typ: str, fmt: str) -> bool:
    fmt = fmt if fmt in _NUMERIC_FORMATS.get(typ, ()) else ""
    if typ == "integer":
        low, high = _INT_RANGES.get(fmt, _INT_RANGES[""])
        if isinstance(data, float):
            if not data.is_integer():
                return False
            data = int(data)
        return low <= data <= high
    if typ == "number" and fmt == "float":
        return abs(data) <= 3.4028234663852886e38
    return True


def _enum_equal(data: Any, allowed: Any) -> bool:
    if isinstance(data, bool) or isinstance(allowed, bool):
        return isinstance(data, bool) and isinstance(allowed, bool) and data is allowed
    if _is_number(data) and _is_number(allowed):
        return bool(data == allowed)
    return type(data) is type(allowed) and bool(data == allowed)


def _supported_format(fmt: str, types: tuple[str, ...]) -> str:
    # StripUnsupportedFormatsPostProcessor: string formats by normalized name ("date-time"
    # is "datetime"), int32/int64 for integers, float/double for numbers, nothing else.
    if not fmt:
        return ""
    kind = types[0] if len(types) == 1 else ""
    if kind in ("", "string"):
        return fmt if fmt.replace("-", "") in _FORMATS else ""
    if kind == "integer":
        return fmt if fmt in ("int32", "int64") else ""
    if kind == "number":
        return fmt if fmt in ("float", "double") else ""
    return ""


# The string formats apiextensions validates (names normalized without "-").
def _is_date(s: str) -> bool:
    try:
        datetime.date.fromisoformat(s)
    except ValueError:
        return False
    return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", s))


_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _is_datetime(s: str) -> bool:
    if not _DATETIME.match(s):
        return False
    try:
        datetime.datetime.fromisoformat(s.replace("z", "Z"))
    except ValueError:
        return False
    return True


def _is_uuid(s: str) -> bool:
    return bool(re.fullmatch(
        r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", s))


def _uuid_version(version: int) -> Callable[[str], bool]:
    def check(s: str) -> bool:
        if not _is_uuid(s):
            return False
        return uuid.UUID(s).version == version
    return check


def _is_ip(version: int) -> Callable[[str], bool]:
    def check(s: str) -> bool:
        try:
            return ipaddress.ip_address(s).version == version
        except ValueError:
            return False
    return check


def _is_cidr(s: str) -> bool:
    try:
        ipaddress.ip_network(s, strict=False)
    except ValueError:
        return False
    return "/" in s


def _is_byte(s: str) -> bool:
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


_HOSTNAME = re.compile(
    r"(?i)^(?=.{1,253}\.?$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
    r"(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?$")
_DURATION = re.compile(
    r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$|^0$|"
    r"^\d+\s*(ns|us|ms|s|m|h|d|w|nano|micro|milli|second|minute|hour|day|week)s?$")
_MAC = re.compile(r"(?i)^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$|^([0-9a-f]{4}\.){2}[0-9a-f]{4}$")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

_FORMATS: Final[dict[str, Callable[[str], bool]]] = {
    "date": _is_date,
    "datetime": _is_datetime,
    "uuid": _is_uuid,
    "uuid3": _uuid_version(3),
    "uuid4": _uuid_version(4),
    "uuid5": _uuid_version(5),
    "ipv4": _is_ip(4),
    "ipv6": _is_ip(6),
    "cidr": _is_cidr,
    "byte": _is_byte,
    "hostname": lambda s: bool(_HOSTNAME.match(s)),
    "mac": lambda s: bool(_MAC.match(s)),
    "duration": lambda s: bool(_DURATION.match(s)),
    "email": lambda s: bool(re.fullmatch(r"[^@\s]+@[^@\s]+", s)),
    "uri": lambda s: bool(re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*:|/)", s)),
    "hexcolor": lambda s: bool(re.fullmatch(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})", s)),
    "k8sshortname": lambda s: len(s) <= 63 and bool(_DNS1123_LABEL.match(s)),
    "k8slongname": lambda s: len(s) <= 253 and bool(_DNS1123_SUBDOMAIN.match(s)),
    "password": lambda s: True,
    "bsonobjectid": lambda s: bool(re.fullmatch(r"[0-9a-fA-F]{24}", s)),
    "ssn": lambda s: bool(re.fullmatch(r"\d{3}[- ]?\d{2}[- ]?\d{4}", s)),
    "rgbcolor": lambda s: bool(re.fullmatch(
        r"rgb\(\s*\d{1,3}\s*,\s*\d{1,3}\s*,\s*\d{1,3}\s*\)", s)),
}


# Unknown field paths tagged 0 (root metadata), 1 (pruned) or 2 (embedded metadata).
_Found = list[tuple[int, str]] | None


def _join(path: list[str]) -> str:
    return "".join(path)


def _child(path: list[str], key: str) -> list[str]:
    return [*path, "." + key] if path else [key]


def _prune(x: Any, node: SchemaNode | None, path: list[str], found: _Found) -> None:
    if node is not None and node.preserve_unknown:
        _skip_prune(x, node, path, found)
        return
    if isinstance(x, dict):
        if node is None:
            for key in list(x):
                if found is not None:
                    found.append((1, _join(_child(path, key))))
                del x[key]
            return
        for key in list(x):
            if node.embedded and key in _META_FIELDS:
                if key == "metadata":
                    _prune_object_meta(x[key], _child(path, key), found)
                continue
            prop = node.properties.get(key)
            if prop is not None:
                _prune(x[key], prop, _child(path, key), found)
            elif node.additional_allowed is not None and node.additional_allowed:
                _prune(x[key], node.additional, _child(path, key), found)
            else:
                if found is not None:
                    found.append((1, _join(_child(path, key))))
                del x[key]
    elif isinstance(x, list):
        items = node.items if node is not None else None
        for i, item in enumerate(x):
            _prune(item, items, [*path, f"[{i}]"], found)


# ObjectMeta fields that are pointers or structs: encoding keeps them even when empty.
_KEEP_EMPTY_META: Final = frozenset({"deletionGracePeriodSeconds", "creationTimestamp"})


def _prune_object_meta(meta: Any, path: list[str], found: _Found) -> None:
    # GetObjectMeta/SetObjectMeta round trip: only ObjectMeta's own fields survive.
    if not isinstance(meta, dict):
        return
    for key in list(meta):
        if key not in _OBJECT_META_FIELDS:
            if found is not None:
                found.append((2 if len(path) > 1 else 0, _join(_child(path, key))))
            del meta[key]
        elif meta[key] in ("", {}, [], None) and key not in _KEEP_EMPTY_META:
            del meta[key]  # omitempty: an empty ObjectMeta field does not survive encoding


def strict_decoding_message(unknown: Sequence[str]) -> str:
    """``strict decoding error: unknown field "spec.a", unknown field "spec.b"``.

    What ``fieldValidation=Strict`` answers (wrapped in a 400 by the handler) for the paths
    :meth:`StructuralSchema.unknown_fields` returns; ``Warn`` sends each
    ``unknown field "<path>"`` as a warning instead.
    """
    return "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in unknown)


def _skip_prune(x: Any, node: SchemaNode, path: list[str], found: _Found) -> None:
    if isinstance(x, dict):
        for key, value in x.items():
            if node.embedded and key in _META_FIELDS:
                if key == "metadata":
                    _prune_object_meta(value, _child(path, key), found)
                continue
            prop = node.properties.get(key)
            if prop is not None:
                _prune(value, prop, _child(path, key), found)
            elif node.additional is not None:
                _prune(value, node.additional, _child(path, key), found)
    elif isinstance(x, list) and node.items is not None:
        for i, item in enumerate(x):
            _skip_prune(item, node.items, [*path, f"[{i}]"], found)


def _prune_nulls(x: Any, node: SchemaNode | None) -> None:
    if isinstance(x, dict):
        for key in list(x):
            sub = node.field(key) if node is not None else None
            if x[key] is None and sub is not None and not sub.nullable and not sub.has_default:
                del x[key]
            else:
                _prune_nulls(x[key], sub)
    elif isinstance(x, list):
        items = node.items if node is not None else None
        for item in x:
            _prune_nulls(item, items)


def _non_nullable_null(x: Any, node: SchemaNode | None) -> bool:
    return x is None and node is not None and not node.nullable


def _default(x: Any, node: SchemaNode | None) -> None:
    if node is None:
        return
    if isinstance(x, dict):
        for key, prop in node.properties.items():
            if not prop.has_default:
                continue
            if key not in x or _non_nullable_null(x[key], prop):
                x[key] = copy.deepcopy(prop.default)
        for key in list(x):
            member = node.properties.get(key)
            if member is not None:
                _default(x[key], member)
            elif node.additional is not None:
                if _non_nullable_null(x[key], node.additional) and node.additional.has_default:
                    x[key] = copy.deepcopy(node.additional.default)
                _default(x[key], node.additional)
    elif isinstance(x, list) and node.items is not None:
        for i, item in enumerate(x):
            if _non_nullable_null(item, node.items) and node.items.has_default:
                x[i] = copy.deepcopy(node.items.default)
            _default(x[i], node.items)


def _walk_children(x: Any, node: SchemaNode, path: str) -> Iterator[tuple[Any, SchemaNode, str]]:
    # field.Path: declared properties are children (a.b), additionalProperties entries are
    # keys (a[b]).
    if isinstance(x, dict):
        for key, value in x.items():
            prop = node.properties.get(key)
            if prop is not None:
                yield value, prop, f"{path}.{key}" if path else key
            elif node.additional is not None:
                yield value, node.additional, f"{path}[{key}]"
    elif isinstance(x, list) and node.items is not None:
        for i, item in enumerate(x):
            yield item, node.items, f"{path}[{i}]"


_GROUP_VERSION = re.compile(r"^[^/]+(/[^/]+)?$")


def _validate_embedded(x: Any, node: SchemaNode, path: str, out: list[Cause],
                       *, root: bool = False) -> None:
    # schemaobjectmeta.Validate: embedded resources need a well-formed apiVersion and kind.
    if isinstance(x, dict) and node.embedded and not root:
        prefix = f"{path}." if path else ""
        if "apiVersion" not in x:
            out.append(field_error("FieldValueRequired", f"{prefix}apiVersion"))
        if "kind" not in x:
            out.append(field_error("FieldValueRequired", f"{prefix}kind"))
        api_version = x.get("apiVersion", _MISSING)
        if api_version is not _MISSING:
            if not isinstance(api_version, str):
                out.append(field_error("FieldValueInvalid", f"{prefix}apiVersion", api_version,
                                       "must be a string"))
            elif not api_version:
                out.append(field_error("FieldValueInvalid", f"{prefix}apiVersion", api_version,
                                       "must not be empty"))
            elif not _GROUP_VERSION.match(api_version):
                out.append(field_error("FieldValueInvalid", f"{prefix}apiVersion", api_version,
                                       f"unexpected GroupVersion string: {api_version}"))
        kind = x.get("kind", _MISSING)
        if kind is not _MISSING:
            if not isinstance(kind, str):
                out.append(field_error("FieldValueInvalid", f"{prefix}kind", kind,
                                       "must be a string"))
            elif not kind:
                out.append(field_error("FieldValueInvalid", f"{prefix}kind", kind,
                                       "must not be empty"))
            else:
                problems = _dns1035_errors(kind.lower())
                if problems:
                    out.append(field_error(
                        "FieldValueInvalid", f"{prefix}kind", kind,
                        "may have mixed case, but should otherwise match: " + ",".join(problems)))
    for value, sub, sub_path in _walk_children(x, node, path):
        _validate_embedded(value, sub, sub_path, out)


def _dns1035_errors(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1035_LABEL.match(value):
        errs.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
            "start with an alphabetic character, and end with an alphanumeric character "
            "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
            "'[a-z]([-a-z0-9]*[a-z0-9])?')")
    return errs


def _set_key(value: Any) -> str:
    # Go keys scalars by their dynamic value and compounds by their JSON encoding.
    return json.dumps(value, sort_keys=True, separators=(",", ":")) + (
        f"#{type(value).__name__}" if isinstance(value, bool | int | float) else "")


def _duplicates(values: list[Any]) -> list[int]:
    seen: dict[str, int] = {}
    repeats: list[int] = []
    for i, value in enumerate(values):
        key = _set_key(value)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 2:
            repeats.append(i)
    return repeats


def _validate_lists(x: Any, node: SchemaNode, path: str, out: list[Cause]) -> None:
    # structurallisttype.ValidateListSetsAndMaps.
    if isinstance(x, list):
        if node.list_type == "set":
            for i in _duplicates(x):
                out.append(field_error("FieldValueDuplicate", f"{path}[{i}]", x[i]))
        elif node.list_type == "map":
            _validate_list_map(x, node, path, out)
    for value, sub, sub_path in _walk_children(x, node, path):
        _validate_lists(value, sub, sub_path, out)


def _validate_list_map(x: list[Any], node: SchemaNode, path: str, out: list[Cause]) -> None:
    for i, item in enumerate(x):
        if item is not None and not isinstance(item, dict):
            out.append(field_error("FieldValueInvalid", f"{path}[{i}]", item,
                                   "must be an object for an array of list-type map"))
            return
    if len(x) <= 1:
        return
    keys: list[dict[str, Any]] = []
    for item in x:
        key: dict[str, Any] = {}
        for name in node.list_map_keys or ():
            if isinstance(item, dict) and name in item:
                key[name] = item[name]
        keys.append(key)
    for i in _duplicates(keys):
        out.append(field_error("FieldValueDuplicate", f"{path}[{i}]", keys[i]))
