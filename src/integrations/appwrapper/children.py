"""The wrapped components held to what Kueue admitted, and Jobs that only claim an
AppWrapper.

Pure helpers of the framework controller (no API calls):

- :func:`size_drifts`: the PodSets of a deployed component (read back from the API
  server) that now make more pods than ``status.componentStatus`` froze, which is what the
  Workload counts. Only kinds whose PodSets are inferred can be read this way (a batch/v1
  Job's parallelism, a Deployment's replicas, ...); for other kinds the declared PodSets
  are all there is.
- :func:`restore_sizes`: the component with those PodSets' replica fields set back to
  the admitted counts, or None when a field cannot be (a JobSet's count is replicas times
  a Job's pods; a PodSet the admission has no count for).
- :func:`foreign_jobs`: the batch/v1 Jobs naming the AppWrapper as their controller that
  are none of its components (by kind and name in ``status.componentStatus``, where the
  controller records each component's name before creating it).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from jobframework.runtime.objects import GVK, Object, name_of

from .podsets import (
    INFERABLE_GVKS,
    TEMPLATE,
    InferenceError,
    PathError,
    get_raw_template,
    infer_pod_sets,
    replicas,
    template_gvk,
)

log = logging.getLogger(__name__)

__all__ = ["SizeDrift", "foreign_jobs", "restore_sizes", "size_drifts"]

JOB_GVK: Final = GVK("batch", "v1", "Job")
_JOBSET_GK: Final = ("jobset.x-k8s.io", "JobSet")
_TEMPLATE_SUFFIX: Final = "." + TEMPLATE


@attrs.frozen
class SizeDrift:
    """A component's PodSet making more pods than admitted."""

    #: The PodSet's path (``template.spec.template``, ...).
    path: str
    #: The pods the Workload counts for it (0: a PodSet the admission does not have).
    admitted: int
    #: The pods the component now makes there.
    actual: int

    def describe(self) -> str:
        """``<path>: <actual> pods where <admitted> were admitted``."""
        return f"{self.path}: {self.actual} pods where {self.admitted} were admitted"


def size_drifts(pod_sets: Sequence[Mapping[str, Any]], live: Mapping[str, Any]
                ) -> list[SizeDrift]:
    """The PodSets of ``live`` (a deployed component) making more pods than their
    admitted count in ``pod_sets`` (its ``componentStatus`` entry's); empty for a kind
    whose PodSets are not inferred, or one that cannot be inferred (logged)."""
    gvk = template_gvk(live)
    if gvk is None or gvk not in INFERABLE_GVKS:
        return []
    try:
        inferred = infer_pod_sets(live)
    except InferenceError as err:
        log.info("cannot read the PodSets of %s %s back: %s", gvk.kind, name_of(live), err)
        return []
    admitted = {str(ps.get("path") or ""): replicas(ps) for ps in pod_sets}
    out = []
    for ps in inferred:
        path = str(ps["path"])
        count = replicas(ps)
        want = admitted.get(path, 0)
        if count > want:
            out.append(SizeDrift(path, want, count))
    return out


def restore_sizes(live: Mapping[str, Any], drifts: Sequence[SizeDrift]) -> Object | None:
    """A copy of ``live`` whose ``drifts`` are set back to their admitted counts, or None
    when one of them has no field that holds its count alone.

    The count of a PodSet at ``<p>.template`` is ``<p>.replicas`` (Deployment,
    StatefulSet, PyTorchJob replica type, Ray worker group), a batch/v1 Job's is its
    ``parallelism`` (its pods at once: set back, completions as they are); a JobSet's is
    the product of two fields, and a PodSet the admission does not have cannot be set
    back at all.
    """
    gvk = template_gvk(live)
    if gvk is None:
        return None
    obj = copy.deepcopy(dict(live))
    for drift in drifts:
        if (drift.admitted <= 0 or (gvk.group, gvk.kind) == _JOBSET_GK
                or not drift.path.endswith(_TEMPLATE_SUFFIX)):
            return None
        holder = drift.path[:-len(_TEMPLATE_SUFFIX)]
        field = "replicas"
        if (gvk.group, gvk.kind) == (JOB_GVK.group, JOB_GVK.kind):
            field = "parallelism"
        try:
            get_raw_template(obj, holder)[field] = drift.admitted
        except PathError:
            return None
    return obj


def foreign_jobs(component_statuses: Sequence[Any], owned: Sequence[Object]) -> list[Object]:
    """The Jobs of ``owned`` (controlled by the AppWrapper) that are not among its
    components (``component_statuses``: its ``status.componentStatus``)."""
    own = {str(cs.get("name") or "") for cs in component_statuses
           if isinstance(cs, Mapping) and cs.get("kind") == JOB_GVK.kind
           and cs.get("apiVersion") == JOB_GVK.api_version and cs.get("name")}
    return [job for job in owned if name_of(job) not in own]
