"""The DaemonJob webhook: defaulting and validation.

Defaulting: ``spec.template.spec.restartPolicy`` becomes ``Never`` when unset (a Job
needs ``Never`` or ``OnFailure``; the original operator forced ``Never`` even over an
explicit ``OnFailure``, which is kept here).

A DaemonJob is rejected, with apimachinery's field-error messages, when:

- its name is longer than 63 characters (it is the value of the
  ``daemonjob.api.practice.com/name`` label on its Jobs and pods);
- ``spec.template.spec.containers`` is empty, or the pod template (kept as sent by the
  CRD) has a part of the wrong JSON type (``spec.template.spec.tolerations[0]: Invalid
  value: "string": must be an object``), as Go's decoding would refuse it;
- ``spec.template.spec.restartPolicy`` is not ``Never`` or ``OnFailure``;
- ``spec.excludeNodeList`` has an empty entry (``a,,b``) or an entry that is not a node
  name (a DNS-1123 subdomain: ``node 1`` is refused, where the original silently read
  ``node1``);
- ``spec.failurePolicy`` is not ``FailFast`` or ``Continue``;
- ``spec.globalParams.nodeName`` is set (each Job is pinned to its own node), or the
  global labels set the labels this integration puts on its Jobs;
- ``spec.selector`` or ``spec.manualSelector`` is set (each node's Job gets its own);
- ``spec.managedBy`` (the DaemonJob's own, never copied to the node Jobs) is not a
  domain-prefixed path (``acme.io/foo``) of at most 63 characters, as batch/v1 Job's;
- ``spec.managedBy`` is MultiKueue's (``kueue.x-k8s.io/multikueue``) and the
  ``daemonjob.api.practice.com/nodes`` annotation does not declare the run's nodes (a
  JSON list of distinct node names, at least one): Kueue sizes the Workload on the manager
  cluster, which cannot list the worker's nodes;
- the template's required node affinity selects nothing (no term, or a term without
  requirements);
- on create, when the webhook can list Nodes, none is eligible (the message counts the
  nodes ruled out by each rule); not checked for a DaemonJob run elsewhere (its nodes are
  another cluster's);
- on update, ``spec.managedBy`` changes, is added or is removed (``spec.managedBy:
  Invalid value: ...: field is immutable``, as batch/v1 Job's; the CRD's CEL rules say
  the same when the webhook is not installed), or, under MultiKueue, the declared nodes
  change;
- on update, anything else in ``spec`` but ``suspend`` changes once the DaemonJob has
  started (it is not suspended, it has fixed its nodes, or it has Jobs).

The checks are functions (:func:`validate_daemonjob`, :func:`validate_daemonjob_update`)
so the Kueue adapter reuses them through ``JobWithCustomValidation``.
"""

from __future__ import annotations

import json
from typing import Any

from jobframework import field
from jobframework.constants import MULTIKUEUE_CONTROLLER_NAME
from jobframework.field import OMIT_VALUE, ErrorList, Path, validate_immutable_field
from jobframework.jsonshape import POD_TEMPLATE_SHAPE, shape_errors
from jobframework.managedby import validate_managed_by
from jobframework.runtime.client import Reader
from jobframework.runtime.objects import Object, annotations_of, name_of
from jobframework.validation import is_dns1123_subdomain
from jobframework.webhook import AdmissionRequest, ValidationError, Warnings

from .api import (
    DAEMONJOB_NAME_LABEL,
    FORBIDDEN_JOB_FIELDS,
    NODE_GVK,
    NODE_LABEL,
    NODES_ANNOTATION,
    DaemonJobSpec,
    FailurePolicy,
    managed_by,
    managed_elsewhere,
    parse_exclude_list,
)
from .nodes import eligible_nodes, required_terms

_SPEC = Path.new("spec")
_POD_SPEC = _SPEC.child("template", "spec")
_MANAGED_BY = _SPEC.child("managedBy")
_NODES = Path.new("metadata", "annotations").key(NODES_ANNOTATION)
_RESTART_POLICIES = ("Never", "OnFailure")
#: Longest DaemonJob name: it is a label value on its Jobs.
MAX_NAME_LENGTH = 63


def default_daemonjob(obj: Object) -> None:
    """Default ``spec.template.spec.restartPolicy`` to ``Never`` (in place)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    tpl = spec.setdefault("template", {})
    if not isinstance(tpl, dict):
        return
    pod = tpl.setdefault("spec", {})
    if isinstance(pod, dict) and not pod.get("restartPolicy"):
        pod["restartPolicy"] = "Never"


def _pod_template_shape_errors(template: Any) -> ErrorList:
    """Where ``spec.template`` has parts of the wrong JSON type (the CRD keeps it as sent;
    see :data:`~jobframework.jsonshape.POD_TEMPLATE_SHAPE`)."""
    return shape_errors(template, POD_TEMPLATE_SHAPE, _SPEC.child("template"))


def _validate_exclude_list(value: Any) -> ErrorList:
    errs = ErrorList()
    path = _SPEC.child("excludeNodeList")
    if value is None:
        return errs
    if not isinstance(value, str):
        errs.append(field.invalid(path, value, "must be a comma-separated string of node "
                                  "names"))
        return errs
    for i, entry in enumerate(parse_exclude_list(value)):
        if not entry:
            errs.append(field.invalid(path, value, f"entry {i + 1} is empty"))
            continue
        msgs = is_dns1123_subdomain(entry)
        if msgs:
            errs.append(field.invalid(path, value, f"entry {i + 1} ({field.go_quote(entry)}) "
                                      "is not a node name: " + "; ".join(msgs)))
    return errs


def run_by_multikueue(dj: Object) -> bool:
    """Whether ``spec.managedBy`` is MultiKueue's (the DaemonJob runs on a worker cluster)."""
    return managed_by(dj) == MULTIKUEUE_CONTROLLER_NAME


def validate_declared_nodes(dj: Object) -> ErrorList:
    """For a DaemonJob run by MultiKueue: the ``daemonjob.api.practice.com/nodes``
    annotation declares the run's nodes, a JSON list of at least one distinct node name.

    Kueue sizes the Workload (nodes times pods per node) on the manager cluster, before it
    picks a worker, and the worker's prebuilt Workload must have the same size; neither
    the manager nor Kueue can count the worker's eligible nodes, so they are declared.
    """
    if not run_by_multikueue(dj):
        return ErrorList()
    raw = annotations_of(dj).get(NODES_ANNOTATION)
    if raw is None:
        return ErrorList([field.required(
            _NODES, f"a DaemonJob run by MultiKueue (spec.managedBy: "
            f"{MULTIKUEUE_CONTROLLER_NAME}) must declare the worker nodes of its run as a "
            'JSON list (["node-a","node-b"]): Kueue counts them on this manager cluster, '
            "which cannot see the worker's nodes")])
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return ErrorList([field.invalid(_NODES, raw, 'must be a JSON list of node names '
                                        '(["node-a","node-b"])')])
    if not value:
        return ErrorList([field.invalid(_NODES, raw, "must name at least one node")])
    errs = ErrorList()
    seen: set[str] = set()
    for i, name in enumerate(value):
        if name in seen:
            errs.append(field.invalid(_NODES, raw, f"entry {i + 1} ({field.go_quote(name)}) "
                                      "is repeated"))
            continue
        seen.add(name)
        msgs = is_dns1123_subdomain(name)
        if msgs:
            errs.append(field.invalid(_NODES, raw, f"entry {i + 1} ({field.go_quote(name)}) "
                                      "is not a node name: " + "; ".join(msgs)))
    return errs


def validate_daemonjob(dj: Object) -> ErrorList:
    """Every create-time rule (see the module docstring) for ``dj``."""
    errs = ErrorList()
    raw = dj.get("spec") or {}
    spec = DaemonJobSpec.of(dj)
    name = name_of(dj)
    if len(name) > MAX_NAME_LENGTH:
        errs.append(field.too_long(Path.new("metadata", "name"), name, MAX_NAME_LENGTH))
    shape = _pod_template_shape_errors(raw.get("template"))
    errs.extend(shape)
    # The rules below read the pod template: with parts of the wrong type, only those.
    pod = {} if shape else ((raw.get("template") or {}).get("spec") or {})
    if not shape and not pod.get("containers"):
        errs.append(field.required(_POD_SPEC.child("containers"),
                                   "a node's Job needs at least one container"))
    policy = pod.get("restartPolicy")
    if policy and policy not in _RESTART_POLICIES:
        errs.append(field.not_supported(_POD_SPEC.child("restartPolicy"), policy,
                                        list(_RESTART_POLICIES)))
    errs.extend(_validate_exclude_list(raw.get("excludeNodeList")))
    failure_policy = raw.get("failurePolicy")
    if failure_policy is not None and failure_policy not in set(FailurePolicy):
        errs.append(field.not_supported(_SPEC.child("failurePolicy"), failure_policy,
                                        [p.value for p in FailurePolicy]))
    if spec.global_params.node_name:
        errs.append(field.forbidden(_SPEC.child("globalParams", "nodeName"),
                                    "a DaemonJob pins each Job to its own node"))
    for key in (DAEMONJOB_NAME_LABEL, NODE_LABEL):
        if key in spec.global_params.labels:
            errs.append(field.forbidden(_SPEC.child("globalParams", "labels").key(key),
                                        "this label is set by the DaemonJob controller on "
                                        "its Jobs"))
    for key, why in FORBIDDEN_JOB_FIELDS.items():
        if raw.get(key) is not None:
            errs.append(field.forbidden(_SPEC.child(key), why))
    errs.extend(validate_managed_by(dj))
    errs.extend(validate_declared_nodes(dj))
    terms = required_terms(pod)
    path = _POD_SPEC.child("affinity", "nodeAffinity",
                           "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    if terms is not None:
        if not terms:
            errs.append(field.required(path, "an empty list of terms selects no node"))
        for i, term in enumerate(terms):
            if not (term.get("matchExpressions") or term.get("matchFields")):
                errs.append(field.invalid(path.index_(i), OMIT_VALUE,
                                          "a term without requirements selects no node"))
    return errs


def has_started(dj: Object) -> bool:
    """Whether the DaemonJob's spec is fixed: it is not suspended, it has fixed its nodes,
    or it has Jobs."""
    if not DaemonJobSpec.of(dj).suspend or NODES_ANNOTATION in annotations_of(dj):
        return True
    return bool((dj.get("status") or {}).get("jobStatusList"))


def validate_daemonjob_update(old: Object, new: Object) -> ErrorList:
    """:func:`validate_daemonjob` on ``new``, plus: ``spec.managedBy`` unchanged (and under
    MultiKueue the declared nodes), and only ``suspend`` may change once ``old`` started."""
    errs = validate_daemonjob(new)
    errs.extend(validate_immutable_field((new.get("spec") or {}).get("managedBy"),
                                         (old.get("spec") or {}).get("managedBy"),
                                         _MANAGED_BY))
    if run_by_multikueue(old) and run_by_multikueue(new):
        errs.extend(validate_immutable_field(annotations_of(new).get(NODES_ANNOTATION),
                                             annotations_of(old).get(NODES_ANNOTATION),
                                             _NODES))
    if has_started(old):
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        keys = sorted((set(old_spec) | set(new_spec)) - {"suspend", "managedBy"})
        for key in keys:
            if (old_spec.get(key) or None) != (new_spec.get(key) or None):
                errs.append(field.forbidden(
                    _SPEC.child(key), "may not be changed once the DaemonJob has started "
                    "(it is not suspended, or it has fixed its nodes or has Jobs)"))
    return errs


async def eligible_node_errors(reader: Reader, dj: Object) -> ErrorList:
    """An error when no node is eligible for ``dj`` now (none when nodes cannot be listed:
    the controller then reports it in the ``NoEligibleNodes`` condition; none for a
    DaemonJob run elsewhere, whose nodes are another cluster's)."""
    if managed_elsewhere(dj):
        return ErrorList()
    try:
        nodes = (await reader.list(NODE_GVK)).items
    except Exception:
        return ErrorList()
    spec = DaemonJobSpec.of(dj)
    pod_spec = (spec.job_spec.get("template") or {}).get("spec") or {}
    found = eligible_nodes(nodes, pod_spec, spec.exclude_nodes)
    if found.eligible:
        return ErrorList()
    return ErrorList([field.invalid(_SPEC, OMIT_VALUE,
                                    "no node is eligible, " + found.summary())])


def _raise(errs: ErrorList) -> None:
    if errs:
        raise ValidationError(errs)


class DaemonJobWebhook:
    """The standalone DaemonJob defaulter and validator (no Kueue).

    Args:
        reader: lists Nodes for the create-time eligibility check (None: no check).
    """

    def __init__(self, reader: Reader | None = None) -> None:
        self.reader = reader

    async def default(self, obj: dict[str, Any], request: AdmissionRequest | None = None) -> None:
        """Default the restart policy."""
        default_daemonjob(obj)

    async def validate_create(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        """Reject a DaemonJob breaking a create rule."""
        errs = validate_daemonjob(obj)
        if not errs and self.reader is not None:
            errs = await eligible_node_errors(self.reader, obj)
        _raise(errs)
        return None

    async def validate_update(
        self, old: dict[str, Any], new: dict[str, Any], request: AdmissionRequest
    ) -> Warnings:
        """Reject an invalid DaemonJob or a change to a started one."""
        _raise(validate_daemonjob_update(old, new))
        return None

    async def validate_delete(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        """Deletion is always allowed."""
        return None


__all__ = [
    "DaemonJobWebhook",
    "default_daemonjob",
    "eligible_node_errors",
    "has_started",
    "run_by_multikueue",
    "validate_daemonjob",
    "validate_daemonjob_update",
    "validate_declared_nodes",
    "validate_managed_by",
]
