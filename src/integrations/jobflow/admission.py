"""The admission a JobFlow carries while Kueue runs it, and who may change it.

When Kueue admits a JobFlow, its adapter (:class:`~.job.JobFlowJob`) writes, in the same
update that unsuspends it:

- :data:`~.api.POD_SETS_INFO_ANNOTATION`: each step's admission (nodeSelector,
  tolerations, labels...), which the DAG controller injects into the step's Job;
- :data:`ADMITTED_TEMPLATES_ANNOTATION`: the JobSpec of each JobTemplate a step names,
  read at that moment. The steps of this admission are created from it, never from a
  later read of the JobTemplate: the Workload's PodSets were computed from those
  templates, and an edited template (parallelism 50 against 1 admitted) must not reach
  a step that has not started yet.

Both are dropped when Kueue stops the JobFlow, so the next admission reads the templates
again. Only :class:`~jobframework.admittedstate.PrivilegedUsers` may change them
(:func:`admitted_state_errors`, the update rule of the Kueue webhook); the DAG controller
checks them against the Workload before it creates or resumes a Job
(:mod:`jobframework.admittedworkload`).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from jobframework.admittedstate import PrivilegedUsers, annotation_change_errors
from jobframework.field import ErrorList
from jobframework.runtime.objects import Object, annotations_of
from jobframework.webhook import AdmissionRequest

from .api import POD_SETS_INFO_ANNOTATION

log = logging.getLogger(__name__)

#: JobFlow annotation: flow name → the JobSpec of its JobTemplate as read when Kueue
#: admitted the JobFlow (JSON), set by the Kueue adapter with the pod-set infos.
ADMITTED_TEMPLATES_ANNOTATION: Final = "jobflow.api.practice.com/admitted-job-templates"

#: The annotations holding the admission: only privileged users may change them.
ADMISSION_ANNOTATIONS: Final = (POD_SETS_INFO_ANNOTATION, ADMITTED_TEMPLATES_ANNOTATION)


def admitted_templates(jobflow: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """flow name → the JobSpec snapshotted at admission (copies); empty when there is no
    snapshot (malformed: logged, empty)."""
    raw = annotations_of(jobflow).get(ADMITTED_TEMPLATES_ANNOTATION)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        log.warning("ignoring malformed %s annotation", ADMITTED_TEMPLATES_ANNOTATION)
        return {}
    return {str(k): copy.deepcopy(v) for k, v in value.items() if isinstance(v, dict)}


def admitted_templates_value(specs: Mapping[str, Mapping[str, Any]]) -> str:
    """The annotation's text for ``specs`` (stable key order)."""
    return json.dumps({k: dict(v) for k, v in specs.items()}, sort_keys=True,
                      separators=(",", ":"))


def drop_admission(jobflow: Object) -> bool:
    """Remove both admission annotations from ``jobflow`` (in place); whether any was
    there."""
    meta = jobflow.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    found = False
    for key in ADMISSION_ANNOTATIONS:
        if key in annotations:
            del annotations[key]
            found = True
    if found and not annotations:
        meta.pop("annotations", None)
    return found


def admitted_state_errors(old: Mapping[str, Any], new: Mapping[str, Any],
                          request: AdmissionRequest | None,
                          privileged: PrivilegedUsers) -> ErrorList:
    """A ``Forbidden`` error for each admission annotation a user who is not privileged
    sets, changes or removes."""
    return annotation_change_errors(ADMISSION_ANNOTATIONS, old, new, request, privileged)
