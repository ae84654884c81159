"""Kueue v0.19.2 ``pkg/controller/jobframework/multikueue_test.go``, ported.

``TestValidateRemoteObjectOwnership`` checks :func:`validate_remote_object_ownership` on a
worker holding (or not) a Job with an origin label; ``TestDeleteRemoteObjectIfOwned``
checks that :func:`delete_remote_object_if_owned` calls the adapter's
``delete_remote_object(local, remote, key)`` exactly when this origin owns the object, as
Go's ``DeleteRemoteObject(ctx, localClient, remoteClient, key)`` mock expects.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

import jobframework
from jobframework import constants as c
from jobframework.multikueue import (
    MultiKueueAdapter,
    MultiKueueOriginEmptyError,
    RemoteObjectNotOwnedByMultiKueueError,
    delete_remote_object_if_owned,
    validate_remote_object_ownership,
)
from jobframework.runtime import errors
from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK, ObjectKey
from jobframework.testing import APIServer, InMemoryClient

JOB = GVK("batch", "v1", "Job")


async def worker(name: str, labels: Mapping[str, str] | None
                 ) -> tuple[APIServer, InMemoryClient]:
    """A worker cluster with, unless ``labels`` is None, the Job ``default/<name>``."""
    server = APIServer(builtin_defaults=True)
    remote = server.client()
    if labels is not None:
        await remote.create({"apiVersion": "batch/v1", "kind": "Job",
                             "metadata": {"name": name, "namespace": "default",
                                          "labels": dict(labels)},
                             "spec": {"template": {"spec": {"containers": []}}}})
    return server, remote


# --- TestValidateRemoteObjectOwnership ------------------------------------------------------

#: case: (labels of the worker's Job, None for no Job; origin; found; error raised)
OWNERSHIP: dict[str, tuple[dict[str, str] | None, str, bool, type[Exception] | None]] = {
    "origin not set fails validation": ({}, "", False, MultiKueueOriginEmptyError),
    "origin not set and object missing fails validation": (
        None, "", False, MultiKueueOriginEmptyError),
    "origin set and label missing": ({}, "origin-1", False,
                                     RemoteObjectNotOwnedByMultiKueueError),
    "origin set and label present": ({c.MULTIKUEUE_ORIGIN_LABEL: "origin-1"}, "origin-1",
                                     True, None),
    "origin set and label mismatched": ({c.MULTIKUEUE_ORIGIN_LABEL: "origin-2"}, "origin-1",
                                        False, RemoteObjectNotOwnedByMultiKueueError),
    "object missing": (None, "origin-1", False, None),
}


@pytest.mark.parametrize("case", [
    pytest.param(k, id=f"TestValidateRemoteObjectOwnership/{k}") for k in OWNERSHIP])
async def test_validate_remote_object_ownership(case: str) -> None:
    labels, origin, want_found, want_error = OWNERSHIP[case]
    _, remote = await worker("test", labels)
    key = ObjectKey("default", "test")
    if want_error is None:
        assert await validate_remote_object_ownership(remote, key, JOB, origin) is want_found
    else:
        with pytest.raises(want_error):
            await validate_remote_object_ownership(remote, key, JOB, origin)


# --- TestDeleteRemoteObjectIfOwned ----------------------------------------------------------


class RecordingAdapter:
    """Go's MockMultiKueueAdapter: records each ``delete_remote_object`` call."""

    def __init__(self) -> None:
        self.deletes: list[tuple[Client, Client, ObjectKey]] = []

    async def sync_job(self, local: Client, remote: Client, key: ObjectKey,
                       workload_name: str, origin: str) -> bool:
        raise AssertionError("not expected")

    async def delete_remote_object(self, local: Client, remote: Client, key: ObjectKey) -> None:
        self.deletes.append((local, remote, key))

    async def is_job_managed_by_kueue(self, local: Client, key: ObjectKey) -> tuple[bool, str]:
        raise AssertionError("not expected")

    def gvk(self) -> GVK:
        return JOB


KEY = ObjectKey("default", "test-job")
DEFAULT_ORIGIN = "origin-1"

#: case: (labels of the worker's Job, None for no Job; origin; the worker's reads fail;
#: error raised; whether the adapter deletes)
DELETES: dict[str, tuple[dict[str, str] | None, str, bool, type[Exception] | None, bool]] = {
    "empty origin returns error": (None, "", False, MultiKueueOriginEmptyError, False),
    "not found skips delete": (None, DEFAULT_ORIGIN, False, None, False),
    "origin mismatch skips delete": ({c.MULTIKUEUE_ORIGIN_LABEL: "other-origin"},
                                     DEFAULT_ORIGIN, False, None, False),
    "remote get error returns error": (None, DEFAULT_ORIGIN, True, errors.InternalError, False),
    "owned object triggers adapter delete": ({c.MULTIKUEUE_ORIGIN_LABEL: DEFAULT_ORIGIN},
                                             DEFAULT_ORIGIN, False, None, True),
}


@pytest.mark.parametrize("case", [
    pytest.param(k, id=f"TestDeleteRemoteObjectIfOwned/{k}") for k in DELETES])
async def test_delete_remote_object_if_owned(case: str) -> None:
    labels, origin, get_fails, want_error, want_deleted = DELETES[case]
    server, remote = await worker(KEY.name, labels)
    if get_fails:
        server.faults.fail("get", error=errors.InternalError("boom"), gvk=JOB, times=None)
    local = APIServer(builtin_defaults=True).client()
    adapter = RecordingAdapter()
    if want_error is None:
        await delete_remote_object_if_owned(local, remote, adapter, KEY, origin)
    else:
        with pytest.raises(want_error):
            await delete_remote_object_if_owned(local, remote, adapter, KEY, origin)
    # The adapter gets the local (manager) client first, then the worker's.
    assert adapter.deletes == ([(local, remote, KEY)] if want_deleted else [])


def test_adapter_protocol_takes_the_local_client_on_delete() -> None:
    # jobframework.MultiKueueAdapter is Go's interface, DeleteRemoteObject's clients included.
    assert jobframework.MultiKueueAdapter is MultiKueueAdapter
    assert isinstance(RecordingAdapter(), MultiKueueAdapter)
    params = list(MultiKueueAdapter.delete_remote_object.__code__.co_varnames[:4])
    assert params == ["self", "local", "remote", "key"]
