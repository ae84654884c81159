"""ObjectMeta validation every kind gets from the generic registry.

apimachinery's ``ValidateObjectMeta``: names (RFC 1123 subdomain, or label for
namespaces), label keys and values, annotation keys, owner references. Returns
``metav1.StatusCause`` dicts for :func:`jobframework.runtime.errors.new_invalid`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._registry import NAMESPACE_GVK, KindInfo

_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MAX_NAME = 253
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _invalid(field: str, value: Any, detail: str) -> dict[str, Any]:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return {"reason": "FieldValueInvalid", "field": field,
            "message": f"Invalid value: {shown}: {detail}"}


def _qualified_name_errors(key: str) -> list[str]:
    # apimachinery validation.IsQualifiedName.
    prefix, sep, name = key.rpartition("/")
    out: list[str] = []
    if sep:
        if not prefix:
            out.append("prefix part must be non-empty")
        elif len(prefix) > _MAX_NAME or not _DNS1123_SUBDOMAIN.match(prefix):
            out.append("prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                       "alphanumeric characters, '-' or '.', and must start and end with an "
                       "alphanumeric character")
    if not name:
        out.append("name part must be non-empty")
    elif len(name) > 63:
        out.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.match(name):
        out.append("name part must consist of alphanumeric characters, '-', '_' or '.', and "
                   "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                   "'my.name',  or '123-abc', regex used for validation is "
                   "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return out


def meta_causes(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """ObjectMeta validation the registry applies to every kind: labels, annotation keys,
    owner references."""
    causes: list[dict[str, Any]] = []
    for key, value in (meta.get("labels") or {}).items():
        causes.extend(_invalid("metadata.labels", key, e) for e in _qualified_name_errors(key))
        if not isinstance(value, str):
            continue
        if len(value) > 63:
            causes.append(_invalid("metadata.labels", value,
                                   "must be no more than 63 characters"))
        elif not _LABEL_VALUE.match(value):
            causes.append(_invalid(
                "metadata.labels", value,
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"))
    for key in meta.get("annotations") or {}:
        # Annotation keys are qualified names compared case-insensitively.
        causes.extend(_invalid("metadata.annotations", key, e)
                      for e in _qualified_name_errors(key.lower()))
    controllers = []
    for ref in meta.get("ownerReferences") or []:
        for field, what in (("apiVersion", "version"), ("kind", "kind"), ("name", "name"),
                            ("uid", "uid")):
            if not ref.get(field):
                causes.append(_invalid(f"metadata.ownerReferences.{field}", "",
                                       f"{what} must not be empty"))
        if ref.get("controller"):
            controllers.append(f"{ref.get('kind')}/{ref.get('name')}")
    if len(controllers) > 1:
        causes.append({"reason": "FieldValueInvalid", "field": "metadata.ownerReferences",
                       "message": "Only one reference can have Controller set to true. Found "
                                  f'"true" in references for {" and ".join(controllers)}'})
    return causes


def name_causes(info: KindInfo, name: str) -> list[dict[str, Any]]:
    if info.gvk == NAMESPACE_GVK:
        if len(name) > 63 or not _DNS1123_LABEL.match(name):
            return [{"reason": "FieldValueInvalid", "field": "metadata.name",
                     "message": f'Invalid value: "{name}": a lowercase RFC 1123 label must '
                                "consist of lower case alphanumeric characters or '-', and "
                                "must start and end with an alphanumeric character (e.g. "
                                "'my-name',  or '123-abc', regex used for validation is "
                                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"}]
        return []
    if len(name) > _MAX_NAME or not _DNS1123_SUBDOMAIN.match(name):
        return [{"reason": "FieldValueInvalid", "field": "metadata.name",
                 "message": f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
                            "consist of lower case alphanumeric characters, '-' or '.', and "
                            "must start and end with an alphanumeric character (e.g. "
                            "'example.com', regex used for validation is "
                            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"}]
    return []

