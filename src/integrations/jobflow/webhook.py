"""The validating webhooks of JobFlow and JobTemplate.

A JobFlow is rejected, with apimachinery's field-error messages (one error:
``<path>: <type>: <value>: <detail>``; several: ``[e1, e2]``), when:

- it has no flow, or more than a Workload holds as PodSets (18): then that is the only
  error reported, the steps are not looked at (the CRD's ``maxItems`` refuses such a
  spec first; this covers one stored before it);
- a flow lists more than 18 dependencies (one error for the list);
- a flow name is missing, repeated, not a DNS-1123 label, or makes an invalid child Job
  name ``<jobflow>-<flow>`` (a DNS-1123 label: at most 63 characters);
- a flow sets both or neither of ``jobTemplate`` and ``jobTemplateRef``, a
  ``jobTemplateRef`` is not a valid object name, or a ``jobTemplate`` has no container;
- a ``jobTemplate``'s pod template (kept as sent by the CRD) has a part of the wrong JSON
  type, e.g. ``containers`` not an array (``...template.spec.containers: Invalid value:
  "string": must be an array``), as Go's decoding would refuse it;
- a dependency names no flow (or is repeated), or the dependencies form a cycle (the
  message spells the cycle out: ``a -> b -> a``);
- a share volume mount names no ``spec.shareVolumes`` entry, or share volumes repeat;
- the global labels set the labels this integration puts on child Jobs;
- ``spec.managedBy`` is not a domain-prefixed path (``acme.io/foo``) of at most 63
  characters, as batch/v1 Job's;
- on update, ``spec.managedBy`` changes, is added or is removed (``spec.managedBy:
  Invalid value: ...: field is immutable``, as batch/v1 Job's; the CRD's CEL rules say
  the same when the webhook is not installed);
- on update, the steps (``flows``, ``globalParams``, ``shareVolumes``) change once the
  flow has started (it is not suspended, or it has Jobs).

The checks are functions (:func:`validate_jobflow`, :func:`validate_jobflow_update`)
so the Kueue adapter reuses them through ``JobWithCustomValidation``.
"""

from __future__ import annotations

from typing import Any

from jobframework import field
from jobframework.field import (
    OMIT_VALUE,
    ErrorList,
    ErrorType,
    FieldError,
    Path,
    validate_immutable_field,
)
from jobframework.jsonshape import POD_TEMPLATE_SHAPE, shape_errors
from jobframework.managedby import validate_managed_by
from jobframework.runtime.objects import Object, name_of
from jobframework.validation import (
    is_dns1123_label,
    is_dns1123_subdomain,
)
from jobframework.webhook import AdmissionRequest, ValidationError, Warnings

from .api import (
    FLOW_NAME_LABEL,
    JOBFLOW_NAME_LABEL,
    MAX_FLOWS,
    JobFlowSpec,
    State,
    child_job_name,
)
from .dag import find_cycle

_SPEC = Path.new("spec")
_FLOWS = _SPEC.child("flows")
_MANAGED_BY = _SPEC.child("managedBy")


def validate_managed_by_update(old: Object, new: Object) -> ErrorList:
    """``spec.managedBy`` is immutable: not changed, added or removed."""
    return validate_immutable_field((new.get("spec") or {}).get("managedBy"),
                                    (old.get("spec") or {}).get("managedBy"), _MANAGED_BY)


def _validate_flow_name(path: Path, jobflow_name: str, flow_name: str) -> ErrorList:
    errs = ErrorList()
    if not flow_name:
        errs.append(field.required(path))
        return errs
    msgs = is_dns1123_label(flow_name)
    if msgs:
        errs.append(field.invalid(path, flow_name, "; ".join(msgs)))
        return errs
    if jobflow_name:
        child = child_job_name(jobflow_name, flow_name)
        msgs = is_dns1123_label(child)
        if msgs:
            errs.append(field.invalid(
                path, flow_name, f"the child Job name {field.go_quote(child)} is invalid: "
                + "; ".join(msgs)))
    return errs


def _container_errors(path: Path, job_spec: Any, detail: str) -> ErrorList:
    """The JobSpec ``job_spec`` (at ``path``) has a pod template with a container.

    The CRDs keep the pod template as sent (any JSON inside): the parts of it that are read
    must first have their JSON types (:data:`~jobframework.jsonshape.POD_TEMPLATE_SHAPE`).
    """
    template = job_spec.get("template") if isinstance(job_spec, dict) else None
    errs = shape_errors(template, POD_TEMPLATE_SHAPE, path.child("template"))
    if errs:
        return errs
    if not ((template or {}).get("spec") or {}).get("containers"):
        errs.append(field.required(path.child("template", "spec", "containers"), detail))
    return errs


def _dependency_errors(path: Path, deps: tuple[str, ...], names: set[str]) -> ErrorList:
    """A flow's ``dependencies`` (at ``path``) name flows of the JobFlow, once each."""
    errs = ErrorList()
    if len(deps) > MAX_FLOWS:
        # More entries than there can be flows: one error, not one per repeat.
        errs.append(FieldError(ErrorType.TOO_MANY, str(path), len(deps),
                               f"must have at most {MAX_FLOWS} items"))
        return errs
    seen: set[str] = set()
    for k, dep in enumerate(deps):
        if dep in seen:
            errs.append(field.duplicate(path.index_(k), dep))
        elif dep not in names:
            errs.append(FieldError(ErrorType.NOT_FOUND, str(path.index_(k)), dep,
                                   "no flow of this JobFlow has this name"))
        seen.add(dep)
    return errs


def validate_jobflow(jobflow: Object) -> ErrorList:
    """Every create-time rule (see the module docstring) for ``jobflow``."""
    errs = ErrorList()
    raw_spec = jobflow.get("spec") or {}
    spec = JobFlowSpec.of(jobflow)
    name = name_of(jobflow)
    if not spec.flows:
        errs.append(field.required(_FLOWS, "a JobFlow needs at least one flow"))
    elif len(spec.flows) > MAX_FLOWS:
        # Alone: a spec this size (stored past the CRD's maxItems) is not walked further,
        # so thousands of steps cost one error, not one per step.
        errs.append(FieldError(
            ErrorType.TOO_MANY, str(_FLOWS), len(spec.flows),
            f"must have at most {MAX_FLOWS} items: a Kueue Workload holds at most "
            f"{MAX_FLOWS} PodSets, one per flow"))
        return errs
    share_names: set[str] = set()
    for j, vol in enumerate(spec.share_volumes):
        vname = str(vol.get("name") or "")
        if vname in share_names:
            errs.append(field.duplicate(_SPEC.child("shareVolumes").index_(j).child("name"),
                                        vname))
        share_names.add(vname)
    for key in (JOBFLOW_NAME_LABEL, FLOW_NAME_LABEL):
        if key in spec.global_params.labels:
            errs.append(field.forbidden(
                _SPEC.child("globalParams", "labels").key(key),
                "this label is set by the JobFlow controller on its Jobs"))
    errs.extend(validate_managed_by(jobflow))

    names = {f.name for f in spec.flows}
    seen: set[str] = set()
    raw_flows = raw_spec.get("flows") or []
    for i, flow in enumerate(spec.flows):
        p = _FLOWS.index_(i)
        errs.extend(_validate_flow_name(p.child("name"), name, flow.name))
        if flow.name and flow.name in seen:
            errs.append(field.duplicate(p.child("name"), flow.name))
        seen.add(flow.name)
        raw = raw_flows[i] if i < len(raw_flows) and isinstance(raw_flows[i], dict) else {}
        has_inline = raw.get("jobTemplate") is not None
        if has_inline and flow.job_template_ref:
            errs.append(field.forbidden(p.child("jobTemplateRef"),
                                        "may not be set together with jobTemplate"))
        elif not has_inline and not flow.job_template_ref:
            errs.append(field.required(p, "one of jobTemplate or jobTemplateRef is required"))
        elif flow.job_template_ref:
            msgs = is_dns1123_subdomain(flow.job_template_ref)
            if msgs:
                errs.append(field.invalid(p.child("jobTemplateRef"), flow.job_template_ref,
                                          "; ".join(msgs)))
        else:
            errs.extend(_container_errors(p.child("jobTemplate"), raw.get("jobTemplate"),
                                          "a flow's Job needs at least one container"))
        errs.extend(_dependency_errors(p.child("dependencies"), flow.dependencies, names))
        for k, mount in enumerate(flow.share_volume_mounts):
            mname = str(mount.get("name") or "")
            if mname not in share_names:
                errs.append(FieldError(
                    ErrorType.NOT_FOUND, str(p.child("shareVolumeMounts").index_(k).child("name")),
                    mname, "no spec.shareVolumes entry has this name"))

    cycle = find_cycle(spec.flows)
    if cycle is not None:
        first = next(i for i, f in enumerate(spec.flows) if f.name == cycle[0])
        errs.append(FieldError(ErrorType.INVALID, str(_FLOWS.index_(first).child("dependencies")),
                               OMIT_VALUE, "dependency cycle: " + " -> ".join(cycle)))
    return errs


def has_started(jobflow: Object) -> bool:
    """Whether the flow's steps are fixed: it is not suspended, or it has (had) Jobs."""
    if not JobFlowSpec.of(jobflow).suspend:
        return True
    status = jobflow.get("status") or {}
    return bool(status.get("jobStatusList")) or status.get("state") not in (
        None, "", State.PENDING.value)


def validate_jobflow_update(old: Object, new: Object) -> ErrorList:
    """:func:`validate_jobflow` on ``new``, plus: ``spec.managedBy`` unchanged, and no
    step changes once ``old`` started."""
    errs = validate_jobflow(new)
    errs.extend(validate_managed_by_update(old, new))
    if has_started(old):
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        for key in ("flows", "globalParams", "shareVolumes"):
            if (old_spec.get(key) or None) != (new_spec.get(key) or None):
                errs.append(field.forbidden(
                    _SPEC.child(key), "may not be changed once the JobFlow has started "
                    "(it is not suspended or it has Jobs)"))
    return errs


def validate_jobtemplate(template: Object) -> ErrorList:
    """A JobTemplate's ``spec.jobTemplate`` must have a container."""
    job_spec = (template.get("spec") or {}).get("jobTemplate")
    return _container_errors(Path.new("spec", "jobTemplate"), job_spec,
                             "a Job needs at least one container")


def _raise(errs: ErrorList) -> None:
    if errs:
        raise ValidationError(errs)


class JobFlowWebhook:
    """The JobFlow validator (:class:`~jobframework.webhook.CustomValidator`)."""

    async def validate_create(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        """Reject a JobFlow breaking a create rule."""
        _raise(validate_jobflow(obj))
        return None

    async def validate_update(
        self, old: dict[str, Any], new: dict[str, Any], request: AdmissionRequest
    ) -> Warnings:
        """Reject an invalid JobFlow or a change to a started flow's steps."""
        _raise(validate_jobflow_update(old, new))
        return None

    async def validate_delete(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        """Deletion is always allowed."""
        return None


class JobTemplateWebhook:
    """The JobTemplate validator (:class:`~jobframework.webhook.CustomValidator`)."""

    async def validate_create(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        """Reject a template without a container."""
        _raise(validate_jobtemplate(obj))
        return None

    async def validate_update(
        self, old: dict[str, Any], new: dict[str, Any], request: AdmissionRequest
    ) -> Warnings:
        """Reject a template without a container."""
        _raise(validate_jobtemplate(new))
        return None

    async def validate_delete(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        """Deletion is always allowed (flows waiting on it report the missing template)."""
        return None
