"""The few built-in defaults and generated fields controllers read back.

The in-memory server does not carry the built-in types' full defaulting; it applies
what jobframework code depends on, as kube-apiserver does:

* batch/v1 Job (``SetDefaults_Job``): ``parallelism``/``completions`` (both 1 when both
  are unset, else ``parallelism`` 1), ``backoffLimit`` (6, or MaxInt32 with
  ``backoffLimitPerIndex``), ``completionMode: NonIndexed``, ``suspend: false``,
  ``podReplacementPolicy``, the Job's labels copied from the template when it has none;
  on create, the generated selector (``batch.kubernetes.io/controller-uid``) and the
  template's ``controller-uid``/``job-name`` labels (``generateSelector``);
* core/v1 Pod: ``restartPolicy: Always`` and, on create, ``status.phase: Pending``.
"""

from __future__ import annotations

from typing import Any

from ..runtime.objects import GVK, Object

JOB = GVK("batch", "v1", "Job")
POD = GVK("", "v1", "Pod")
_MAX_INT32 = 2**31 - 1


def apply_defaults(gvk: GVK, obj: Object) -> None:
    """Defaulting on decode (create and update), in place."""
    if gvk == JOB:
        _default_job(obj)
    elif gvk == POD:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            spec.setdefault("restartPolicy", "Always")


def prepare_create(gvk: GVK, obj: Object) -> None:
    """Fields generated on create once the uid is known, in place."""
    if gvk == JOB:
        _generate_job_selector(obj)
    elif gvk == POD:
        obj["status"] = {"phase": "Pending"}


def _default_job(job: Object) -> None:
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = (_MAX_INT32 if spec.get("backoffLimitPerIndex") is not None
                                else 6)
    template = spec.get("template")
    template_labels = ((template or {}).get("metadata") or {}).get("labels") \
        if isinstance(template, dict) else None
    meta = job.setdefault("metadata", {})
    if template_labels and not meta.get("labels"):
        meta["labels"] = dict(template_labels)
    spec.setdefault("completionMode", "NonIndexed")
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = (
            "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed")


def _generate_job_selector(job: Object) -> None:
    spec = job.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector"):
        return
    meta = job.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    name = str(meta.get("name") or "")
    template = spec.setdefault("template", {})
    labels: dict[str, Any] = template.setdefault("metadata", {}).setdefault("labels", {})
    for key, value in (("controller-uid", uid), ("batch.kubernetes.io/controller-uid", uid),
                       ("job-name", name), ("batch.kubernetes.io/job-name", name)):
        labels.setdefault(key, value)
    if not spec.get("selector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
