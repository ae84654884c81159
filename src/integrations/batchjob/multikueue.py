"""The batch/v1 Job MultiKueue adapter (Kueue's ``job_multikueue_adapter.go``).

:class:`BatchJobMultiKueueAdapter` is what Kueue's MultiKueue controller uses on the
**manager** cluster to run a Job on a worker:

- ``sync_job`` creates the worker's copy when it is missing: name, namespace, labels and
  annotations of the manager's Job, its spec without ``selector`` and ``managedBy`` and
  with the Job controller's ``controller-uid``/``job-name`` template labels removed (the
  worker's API server generates its own and refuses foreign ones), plus the MultiKueue
  origin label and the prebuilt-workload name. Once the copy exists it mirrors the copy's
  ``status`` onto the manager's Job, except while the manager's Job is still suspended
  and the copy runs unfinished (see :func:`determine_status_update`); for elastic Jobs it
  also forwards a parallelism change and the new slice's name to the copy.
- ``delete_remote_object`` deletes the copy with background propagation (its pods go
  too); ``is_job_managed_by_kueue`` answers whether ``spec.managedBy`` is MultiKueue's.
- As a :class:`~jobframework.multikueue.MultiKueueWatcher` it names the Workload a
  watched worker Job belongs to (its prebuilt Workload).

Feature gates are the adapter's (``features=``), read where Go reads the process-wide
ones: ``WorkloadIdentifierAnnotations`` (label or annotation for the prebuilt name) and
``ElasticJobsViaWorkloadSlices``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from typing import Any, Final

from jobframework import constants as c
from jobframework import workloadslicing
from jobframework.constants import DEFAULT_FEATURES, FeatureGates
from jobframework.naming import get_workload_name_for_owner_with_gvk_and_generation
from jobframework.reconciler import go_semantic_equal, patch_object
from jobframework.runtime import errors
from jobframework.runtime.client import Client, PropagationPolicy
from jobframework.runtime.clock import Clock, RealClock, rfc3339
from jobframework.runtime.objects import GVK, Object, ObjectKey, labels_of, metadata
from jobframework.utils import (
    prebuilt_workload_name_for,
    set_multikueue_meta,
    set_prebuilt_workload_name,
)

from .job import JOB_GVK, JOB_NAME_LABEL, MANAGED_LABELS, BatchJob

__all__ = [
    "SUSPENDED_CONDITION_MESSAGE",
    "SUSPENDED_CONDITION_REASON",
    "BatchJobMultiKueueAdapter",
    "determine_status_update",
]

log = logging.getLogger(__name__)

#: The reason and message of the ``Suspended`` condition the adapter writes on a suspended
#: manager Job whose worker copy already runs.
SUSPENDED_CONDITION_REASON: Final = "MultiKueueAdapter"
SUSPENDED_CONDITION_MESSAGE: Final = "Set by MultiKueue adapter"
_SUSPENDED: Final = "Suspended"


def _condition_true(conditions: list[dict[str, Any]], ctype: str) -> bool:
    # The first condition of the type decides, as Go's loop over the slice.
    for cond in conditions:
        if cond.get("type") == ctype:
            return bool(cond.get("status") == "True")
    return False


def _set_condition(conditions: list[dict[str, Any]], cond: dict[str, Any]) -> None:
    for i, existing in enumerate(conditions):
        if existing.get("type") == cond["type"]:
            conditions[i] = cond
            return
    conditions.append(cond)


def determine_status_update(
    local: Object, remote: Object, *, clock: Clock | None = None
) -> tuple[dict[str, Any], bool]:
    """The status to write on the manager's Job, and whether the sync is deferred.

    The worker's status is copied when the manager's Job runs (unsuspended), when both are
    suspended (an evicted worker Job still reports its draining ``active`` count), or when
    the worker's Job has finished. Otherwise (manager's suspended, worker's running) the
    copy is deferred: a ``startTime`` mirrored now would freeze the manager Job's spec
    before its admission is written. Kubernetes 1.36 refuses to change a suspended Job
    whose ``Suspended`` condition is not True, so the deferred status is the manager's own
    with that condition set (reason :data:`SUSPENDED_CONDITION_REASON`, stamped by
    ``clock``) when it is missing.
    """
    if not BatchJob(local).is_suspended():
        log.debug("syncing the status: the local Job is unsuspended")
        return copy.deepcopy(remote.get("status") or {}), False
    remote_job = BatchJob(remote)
    if remote_job.is_suspended():
        log.debug("syncing the status: the local and the remote Job are both suspended")
        return copy.deepcopy(remote.get("status") or {}), False
    if remote_job.finished().finished:
        log.debug("syncing the status: the remote Job is finished")
        return copy.deepcopy(remote.get("status") or {}), False
    status = copy.deepcopy(local.get("status") or {})
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    if not _condition_true(conditions, _SUSPENDED):
        now = rfc3339((clock or RealClock()).now())
        _set_condition(conditions, {
            "type": _SUSPENDED, "status": "True", "reason": SUSPENDED_CONDITION_REASON,
            "message": SUSPENDED_CONDITION_MESSAGE, "lastTransitionTime": now,
            "lastProbeTime": now})
        status["conditions"] = conditions
        log.debug("marking the suspended local Job Suspended for the API server's rules")
    return status, True


def _deref_parallelism(job: Object) -> int:
    value = (job.get("spec") or {}).get("parallelism")
    return 0 if value is None else int(value)


class BatchJobMultiKueueAdapter:
    """Mirrors batch/v1 Jobs onto MultiKueue worker clusters (Kueue's job
    ``multiKueueAdapter``); a :class:`~jobframework.multikueue.MultiKueueAdapter` and
    :class:`~jobframework.multikueue.MultiKueueWatcher`.

    ``clock`` stamps the ``Suspended`` condition of a deferred status sync.
    """

    def __init__(self, *, features: FeatureGates = DEFAULT_FEATURES,
                 clock: Clock | None = None) -> None:
        self.features = features
        self.clock: Clock = clock or RealClock()

    def gvk(self) -> GVK:
        """``batch/v1, Kind=Job``."""
        return JOB_GVK

    async def sync_job(self, local: Client, remote: Client, key: ObjectKey,
                       workload_name: str, origin: str) -> bool:
        """Create the worker's copy, or sync its status back (and an elastic Job's
        parallelism forward); True when the status sync was deferred.

        Errors reading either Job (the manager's missing included) propagate; a worker's
        copy that is missing is created.
        """
        ns = key.namespace or None
        local_job = await local.get(JOB_GVK, key.name, namespace=ns)
        try:
            remote_job = await remote.get(JOB_GVK, key.name, namespace=ns)
        except errors.NotFound:
            await remote.create(self._remote_copy(local_job, workload_name, origin))
            return False

        status, deferred = determine_status_update(local_job, remote_job, clock=self.clock)
        if not go_semantic_equal(local_job.get("status") or {}, status):
            def set_status() -> None:
                local_job["status"] = status

            await patch_object(local, local_job, set_status, subresource="status")
        # An elastic sync leaves the manager's Job suspended: a deferred status sync stays
        # deferred.
        if self._need_elastic_job_sync(workload_name, local_job, remote_job):
            await self._sync_elastic_job(remote, workload_name, local_job, remote_job)
        return deferred

    def _remote_copy(self, local_job: Object, workload_name: str, origin: str) -> Object:
        meta = metadata(local_job)
        copy_meta: dict[str, Any] = {"name": meta.get("name", ""),
                                     "namespace": meta.get("namespace", "")}
        for field in ("labels", "annotations"):
            if meta.get(field) is not None:
                copy_meta[field] = dict(meta[field])
        spec = copy.deepcopy(local_job.get("spec") or {})
        # The worker's API server generates its own selector and controller labels.
        spec.pop("selector", None)
        template_meta = (spec.get("template") or {}).get("metadata") or {}
        labels = template_meta.get("labels")
        if labels:
            for label in MANAGED_LABELS:
                if label != JOB_NAME_LABEL:
                    labels.pop(label, None)
            if not labels:
                del template_meta["labels"]
        # Without managedBy the worker's Job controller runs the copy.
        spec.pop("managedBy", None)
        created: Object = {"apiVersion": JOB_GVK.api_version, "kind": JOB_GVK.kind,
                           "metadata": copy_meta, "spec": spec}
        set_multikueue_meta(created, workload_name, origin, features=self.features)
        return created

    def _need_elastic_job_sync(self, workload_name: str, local_job: Object,
                               remote_job: Object) -> bool:
        """Whether an elastic Job's worker copy lags behind: another parallelism, no
        labels, or another prebuilt Workload (``needElasticJobSync``)."""
        if not workloadslicing.enabled(local_job, features=self.features):
            return False
        old_parallelism = _deref_parallelism(remote_job)
        new_parallelism = _deref_parallelism(local_job)
        meta = metadata(local_job)
        new_workload_name = get_workload_name_for_owner_with_gvk_and_generation(
            meta.get("name", ""), meta.get("uid", ""), JOB_GVK, int(meta.get("generation", 0)),
            features=self.features)
        # A scale-up seen with the old slice's name: the new slice is not created (or
        # admitted) yet, and the old one's sync must not push the new size.
        if old_parallelism < new_parallelism and workload_name != new_workload_name:
            log.debug("skipping a stale elastic Job sync: parallelism %d -> %d, workload %s, "
                      "new workload %s", old_parallelism, new_parallelism, workload_name,
                      new_workload_name)
            return False
        return (old_parallelism != new_parallelism or not labels_of(remote_job)
                or prebuilt_workload_name_for(remote_job, features=self.features)
                != workload_name)

    async def _sync_elastic_job(self, remote: Client, workload_name: str, local_job: Object,
                                remote_job: Object) -> None:
        """Patch the worker copy's parallelism and prebuilt-workload name
        (``syncElasticJob``); an API error keeps its class, with Go's context."""
        changed = _deref_parallelism(remote_job) != _deref_parallelism(local_job)
        current = prebuilt_workload_name_for(remote_job, features=self.features)
        rename = current == "" or current != workload_name
        if not (changed or rename):
            return
        parallelism = (local_job.get("spec") or {}).get("parallelism")

        def update() -> None:
            spec = remote_job.setdefault("spec", {})
            if parallelism is None:
                spec.pop("parallelism", None)
            else:
                spec["parallelism"] = parallelism
            if rename:
                set_prebuilt_workload_name(remote_job, workload_name, features=self.features)

        try:
            await patch_object(remote, remote_job, update)
        except errors.ApiError as err:
            raise errors.wrap("failed to patch remote job", err) from err

    async def delete_remote_object(self, local: Client, remote: Client, key: ObjectKey) -> None:
        """Delete the worker's copy and, in the background, its pods; already gone is
        fine. ``local`` is not needed."""
        del local
        with contextlib.suppress(errors.NotFound):
            await remote.delete(JOB_GVK, key.name, namespace=key.namespace or None,
                                propagation_policy=PropagationPolicy.BACKGROUND)

    async def is_job_managed_by_kueue(self, local: Client, key: ObjectKey) -> tuple[bool, str]:
        """True only when ``spec.managedBy`` is MultiKueue's controller; reading the Job
        can raise (a missing Job: ``NotFound``)."""
        job = await local.get(JOB_GVK, key.name, namespace=key.namespace or None)
        managed_by = (job.get("spec") or {}).get("managedBy") or ""
        if managed_by != c.MULTIKUEUE_CONTROLLER_NAME:
            return False, (f'Expecting spec.managedBy to be "{c.MULTIKUEUE_CONTROLLER_NAME}" '
                           f'not "{managed_by}"')
        return True, ""

    def get_empty_list(self) -> Object:
        """An empty ``JobList``: MultiKueue watches the workers' Jobs."""
        return {"apiVersion": JOB_GVK.api_version, "kind": f"{JOB_GVK.kind}List", "items": []}

    def workload_keys_for(self, obj: Object) -> list[ObjectKey]:
        """The prebuilt Workload a worker's Job names (``WorkloadKeysFor``); ``ValueError``
        for an object that is not a Job or names none."""
        if obj.get("apiVersion") != JOB_GVK.api_version or obj.get("kind") != JOB_GVK.kind:
            raise ValueError("not a job")
        name = prebuilt_workload_name_for(obj, features=self.features)
        meta = metadata(obj)
        if not name:
            raise ValueError(f"no prebuilt workload found for job: "
                             f"{meta.get('namespace', '')}/{meta.get('name', '')}")
        return [ObjectKey(meta.get("namespace", ""), name)]
