"""The MultiKueue side of the jobframework: adapter interfaces and remote-object ownership.

Kueue's MultiKueue controller mirrors a job onto a worker cluster through the job kind's
:class:`MultiKueueAdapter`; an adapter can also implement the optional
:class:`MultiKueueWatcher`, :class:`MultiKueueLocalJobWatcher` and
:class:`MultiKueueMultiWorkloadAdapter` (``runtime_checkable`` protocols, as Go's
optional interfaces). :func:`validate_remote_object_ownership` and
:func:`delete_remote_object_if_owned` keep a manager from deleting a worker's object that
another MultiKueue origin created.

The methods take the clients Kueue v0.19.2's take: ``delete_remote_object`` and
:func:`delete_remote_object_if_owned` get the local (manager) client besides the remote
one.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from . import constants as c
from .api.workload import Workload
from .field import go_quote
from .runtime import errors
from .runtime.client import Client, Reader
from .runtime.objects import GVK, Object, ObjectKey, labels_of
from .utils import set_multikueue_meta

__all__ = [
    "MultiKueueAdapter",
    "MultiKueueLocalJobWatcher",
    "MultiKueueMultiWorkloadAdapter",
    "MultiKueueOriginEmptyError",
    "MultiKueueWatcher",
    "RemoteObjectNotOwnedByMultiKueueError",
    "delete_remote_object_if_owned",
    "set_multikueue_meta",
    "should_skip_local_execution",
    "validate_remote_object_ownership",
]

log = logging.getLogger(__name__)

ADMISSION_CHECK_GVK = GVK(c.KUEUE_GROUP, c.KUEUE_VERSION, "AdmissionCheck")


@runtime_checkable
class MultiKueueAdapter(Protocol):
    """The MultiKueue side of an integration: mirrors a job onto a worker cluster
    (``jobframework.MultiKueueAdapter``)."""

    async def sync_job(
        self,
        local: Client,
        remote: Client,
        key: ObjectKey,
        workload_name: str,
        origin: str,
    ) -> bool:
        """Create the remote copy if missing, else copy its status back; return True when
        the status copy was deliberately deferred (try again later)."""

    async def delete_remote_object(self, local: Client, remote: Client, key: ObjectKey) -> None:
        """Delete the remote copy (``local`` is the manager's client)."""

    async def is_job_managed_by_kueue(self, local: Client, key: ObjectKey) -> tuple[bool, str]:
        """Whether the local job is managed by MultiKueue, and if not why."""

    def gvk(self) -> GVK:
        """The job kind the adapter serves."""


@runtime_checkable
class MultiKueueWatcher(Protocol):
    """Optional: the adapter wants watch events of the job objects on the worker
    (otherwise MultiKueue only watches the workers' Workloads)."""

    def get_empty_list(self) -> Object:
        """An empty list object of the job kind (``{"apiVersion", "kind": "<Kind>List",
        "items": []}``): what to watch on the worker."""

    def workload_keys_for(self, obj: Object) -> list[ObjectKey]:
        """The Workloads a watched object concerns (its prebuilt Workload(s)); raise when
        they cannot be told."""


@runtime_checkable
class MultiKueueLocalJobWatcher(Protocol):
    """Optional: the adapter forwards spec changes of the local (manager) job after
    admission, so a local change should promptly reconcile the Workload."""

    def new_empty_local_job(self) -> Object | None:
        """An empty job object of the kind to watch locally, or None for no watch now."""


@runtime_checkable
class MultiKueueMultiWorkloadAdapter(Protocol):
    """Optional: the adapter's jobs create several Workloads (e.g. one per replica)."""

    async def get_expected_workload_count(self, client: Client, key: ObjectKey) -> int:
        """How many Workloads the job creates."""

    def get_workload_index(self, wl: Workload) -> int:
        """The index of ``wl`` among the job's Workloads, for ordering; -1 if unknown."""


class RemoteObjectNotOwnedByMultiKueueError(Exception):
    """``remote object is not owned by MultiKueue`` (``ErrRemoteObjectNotOwnedByMultiKueue``)."""

    MESSAGE = "remote object is not owned by MultiKueue"

    def __init__(self, detail: str = "") -> None:
        super().__init__(f"{self.MESSAGE}: {detail}" if detail else self.MESSAGE)


class MultiKueueOriginEmptyError(ValueError):
    """``multikueue origin is empty`` (``ErrMultiKueueOriginEmpty``)."""

    def __init__(self) -> None:
        super().__init__("multikueue origin is empty")


async def validate_remote_object_ownership(
    remote: Reader, key: ObjectKey, gvk: GVK, origin: str
) -> bool:
    """Whether the worker's object exists and carries this manager's origin label
    (``ValidateRemoteObjectOwnership``).

    False when it does not exist; :class:`MultiKueueOriginEmptyError` for an empty
    ``origin``; :class:`RemoteObjectNotOwnedByMultiKueueError` when the origin label is
    missing or another manager's; other read errors propagate.
    """
    if not origin:
        raise MultiKueueOriginEmptyError()
    try:
        remote_obj = await remote.get(gvk, key.name, namespace=key.namespace or None)
    except errors.NotFound:
        return False
    found = labels_of(remote_obj).get(c.MULTIKUEUE_ORIGIN_LABEL)
    if found != origin:
        raise RemoteObjectNotOwnedByMultiKueueError(
            f"expected {go_quote(c.MULTIKUEUE_ORIGIN_LABEL)}={go_quote(origin)} on "
            f"*v1.PartialObjectMetadata {go_quote(str(key))}")
    return True


async def delete_remote_object_if_owned(
    local: Client, remote: Client, adapter: MultiKueueAdapter, key: ObjectKey, origin: str
) -> None:
    """Delete the worker's copy through ``adapter`` only if this origin owns it
    (``DeleteRemoteObjectIfOwned``): a missing object or another origin's is left alone;
    an empty ``origin`` raises :class:`MultiKueueOriginEmptyError`."""
    if not origin:
        raise MultiKueueOriginEmptyError()
    try:
        found = await validate_remote_object_ownership(remote, key, adapter.gvk(), origin)
    except RemoteObjectNotOwnedByMultiKueueError:
        log.debug("not deleting %s: not owned by MultiKueue origin %s", key, origin)
        return
    if not found:
        log.debug("not deleting %s: not found", key)
        return
    await adapter.delete_remote_object(local, remote, key)


async def should_skip_local_execution(reader: Reader, wl: Workload | None) -> bool:
    """Whether ``wl`` has an admission check of the MultiKueue controller, so its job runs
    on a worker and not locally (``admissioncheck.ShouldSkipLocalExecution``).

    Every check's AdmissionCheck is read (missing ones are skipped); other read errors
    propagate.
    """
    if wl is None:
        return False
    found = False
    for state in (wl.status.admission_checks if wl.status else None) or []:
        try:
            ac = await reader.get(ADMISSION_CHECK_GVK, state.name or "")
        except errors.NotFound:
            continue
        if (ac.get("spec") or {}).get("controllerName") == c.MULTIKUEUE_CONTROLLER_NAME:
            found = True
    return found
