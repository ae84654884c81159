"""ObjectMeta validation every kind gets from the generic registry.

apimachinery's ``ValidateObjectMeta``: names (RFC 1123 subdomain, or label for
namespaces), label keys and values, annotation keys, owner references. Returns
``metav1.StatusCause`` dicts for :func:`jobframework.runtime.errors.new_invalid`.
Also the update rules of batch/v1 Jobs (``ValidateJobSpecUpdate``), which the server
applies together with its built-in defaults.
"""

from __future__ import annotations

import json
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



def _shown(value: Any) -> str:
    # field.Invalid renders strings quoted, numbers bare and structures as JSON (the real
    # server dumps its internal Go types, with every defaulted field; we show ours).
    if value is None:
        return "null"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _immutable(field: str, value: Any) -> dict[str, Any]:
    return {"reason": "FieldValueInvalid", "field": field,
            "message": f"Invalid value: {_shown(value)}: field is immutable"}


def _semantic(value: Any) -> Any:
    """What apimachinery's ``Semantic.DeepEqual`` compares: unset, null and empty
    lists and maps are the same thing."""
    if isinstance(value, Mapping):
        out = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    return bool(_semantic(a) == _semantic(b))


# Pod template fields a suspended, never-started Job may change (JobMutableSchedulingDirectives):
# node affinity is handled apart, since the rest of ``affinity`` stays immutable.
_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")


def _without_scheduling_directives(spec: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k not in _SCHEDULING_DIRECTIVES}
    affinity = out.get("affinity")
    if isinstance(affinity, Mapping):
        rest = {k: v for k, v in affinity.items() if k != "nodeAffinity"}
        # Clearing affinity is fine when node affinity was all it held.
        if rest:
            out["affinity"] = rest
        else:
            out.pop("affinity")
    return out


def job_update_causes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The immutability rules of a batch/v1 Job update (``ValidateJobSpecUpdate``).

    ``spec.selector`` and ``spec.completionMode`` never change; ``spec.completions`` only
    changes for an Indexed Job, together with ``parallelism`` (elastic indexed jobs).
    ``spec.template`` is immutable, except while the stored Job is suspended and has no
    ``status.startTime``: then the template's metadata and its scheduling directives
    (node affinity, nodeSelector, tolerations, schedulingGates) may change, which is
    also what lets the update that resumes the Job inject them.
    """
    spec: Mapping[str, Any] = new.get("spec") or {}
    old_spec: Mapping[str, Any] = old.get("spec") or {}
    causes: list[dict[str, Any]] = []
    completions = spec.get("completions")
    if not _same(completions, old_spec.get("completions")):
        if spec.get("completionMode") != "Indexed":
            causes.append(_immutable("spec.completions", completions))
        elif completions is not None and completions != spec.get("parallelism"):
            causes.append({"reason": "FieldValueInvalid", "field": "spec.completions",
                           "message": f"Invalid value: {_shown(completions)}: can only be "
                                      "modified in tandem with spec.parallelism"})
    if not _same(spec.get("selector"), old_spec.get("selector")):
        causes.append(_immutable("spec.selector", spec.get("selector")))
    template: Mapping[str, Any] = spec.get("template") or {}
    old_template: Mapping[str, Any] = old_spec.get("template") or {}
    suspended = old_spec.get("suspend") is True
    started = bool((old.get("status") or {}).get("startTime"))
    if suspended and not started:
        pod_spec: Mapping[str, Any] = template.get("spec") or {}
        if not _same(_without_scheduling_directives(pod_spec),
                     _without_scheduling_directives(old_template.get("spec") or {})):
            causes.append(_immutable("spec.template.spec", pod_spec))
    elif not _same(template, old_template):
        causes.append(_immutable("spec.template", template))
    if not _same(spec.get("completionMode"), old_spec.get("completionMode")):
        causes.append(_immutable("spec.completionMode", spec.get("completionMode")))
    return causes
