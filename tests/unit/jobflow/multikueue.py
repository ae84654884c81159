"""What Kueue v0.19.2's MultiKueue does to an external framework's job, played on in-memory
servers (one per cluster) for the JobFlow and DaemonJob tests.

Ported from ``pkg/controller/admissionchecks/multikueue/externalframeworks/adapter.go``
(the generic adapter Kueue uses for ``multiKueue.externalFrameworks`` kinds) and
``workload.go``'s ``cloneForCreate``:

- :func:`remote_copy`: the worker's copy of the job: apiVersion/kind, name, namespace,
  labels and annotations (``CloneObjectMetaForCreation``: owner references, finalizers,
  UID... are dropped), the whole ``spec`` without ``managedBy``, then the MultiKueue origin
  label and the prebuilt-workload name (``SetMultiKueueMeta``);
- :func:`sync_status`: the whole remote ``status`` copied onto the local object with a
  JSON merge patch of the ``status`` subresource, only when it differs;
- :func:`remote_workload`: the worker's Workload: the local one's name, namespace, labels
  (without the job-UID label, with the origin label) and annotations, and its spec.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, Final

from jobframework import constants as c
from jobframework.defaults import StaticQueueLookup
from jobframework.reconciler import create_merge_patch
from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK, Object, name_of, namespace_of
from jobframework.utils import set_multikueue_meta

MK: Final = c.MULTIKUEUE_CONTROLLER_NAME
ORIGIN: Final = "multikueue"
#: The LocalQueue whose ClusterQueue requires MultiKueue's admission check.
MK_QUEUE: Final = "mk-queue"
#: A LocalQueue whose ClusterQueue has another admission check only.
PLAIN_QUEUE: Final = "user-queue"


def queues() -> StaticQueueLookup:
    """``mk-queue`` → ClusterQueue ``mk-cq`` (checks: MultiKueue's and a provisioning one);
    ``user-queue`` → ``cq`` (the provisioning check only)."""
    return StaticQueueLookup(
        local_queues=[
            {"metadata": {"name": MK_QUEUE, "namespace": "default"},
             "spec": {"clusterQueue": "mk-cq"}},
            {"metadata": {"name": PLAIN_QUEUE, "namespace": "default"},
             "spec": {"clusterQueue": "cq"}}],
        cluster_queues=[
            {"metadata": {"name": "mk-cq"}, "spec": {"admissionChecksStrategy": {
                "admissionChecks": [{"name": "prov"}, {"name": "multikueue"}]}}},
            {"metadata": {"name": "cq"}, "spec": {"admissionChecksStrategy": {
                "admissionChecks": [{"name": "prov"}]}}}],
        admission_checks=[
            {"metadata": {"name": "multikueue"}, "spec": {"controllerName": MK}},
            {"metadata": {"name": "prov"},
             "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}])


def remote_copy(local: Object, workload_name: str, origin: str = ORIGIN) -> Object:
    """The object the generic adapter creates on the worker (``createRemoteObject``)."""
    meta = local.get("metadata") or {}
    out: Object = {"apiVersion": local["apiVersion"], "kind": local["kind"],
                   "metadata": {"name": meta.get("name", ""),
                                "namespace": meta.get("namespace", "")}}
    for key in ("labels", "annotations"):
        if meta.get(key):
            out["metadata"][key] = copy.deepcopy(meta[key])
    if "spec" in local:
        spec = copy.deepcopy(local["spec"])
        if isinstance(spec, dict):
            spec.pop("managedBy", None)
        out["spec"] = spec
    set_multikueue_meta(out, workload_name, origin)
    return out


async def sync_status(local: Client, remote: Client, gvk: GVK, name: str,
                      namespace: str = "default") -> Object:
    """Copy the worker's whole ``status`` onto the manager's object (``syncStatus``);
    returns the manager's object."""
    local_obj = await local.get(gvk, name, namespace=namespace)
    remote_obj = await remote.get(gvk, name, namespace=namespace)
    if not isinstance(remote_obj.get("status"), dict):
        return local_obj
    updated = copy.deepcopy(local_obj)
    updated["status"] = copy.deepcopy(remote_obj["status"])
    if updated == local_obj:
        return local_obj
    patch = create_merge_patch(local_obj, updated)
    return await local.patch(gvk, name, patch, namespace=namespace, subresource="status")


def remote_workload(local_wl: Object, origin: str = ORIGIN) -> Object:
    """The Workload MultiKueue creates on the worker (``cloneForCreate``)."""
    meta = local_wl["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != c.JOB_UID_LABEL}
    labels[c.MULTIKUEUE_ORIGIN_LABEL] = origin
    out: Object = {"apiVersion": local_wl["apiVersion"], "kind": local_wl["kind"],
                   "metadata": {"name": name_of(local_wl), "namespace": namespace_of(local_wl),
                                "labels": labels},
                   "spec": copy.deepcopy(local_wl["spec"])}
    if meta.get("annotations"):
        out["metadata"]["annotations"] = copy.deepcopy(meta["annotations"])
    return out


def admission_status(wl: Object, flavor: str, checks: Iterable[str] = ()) -> dict[str, Any]:
    """An admitted Workload's status (QuotaReserved, Admitted, one assignment per PodSet in
    ``flavor``, the named admission checks Ready), as Kueue leaves it."""
    ts = "2026-01-01T00:00:00Z"
    assignments = [{"name": ps["name"], "flavors": {"cpu": flavor}, "count": ps["count"]}
                   for ps in wl["spec"]["podSets"]]
    status: dict[str, Any] = {
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": ts},
            {"type": "Admitted", "status": "True", "reason": "Admitted",
             "message": "The workload is admitted", "lastTransitionTime": ts}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": assignments}}
    names = list(checks)
    if names:
        status["admissionChecks"] = [
            {"name": n, "state": "Ready", "message": 'The workload was admitted on "worker-1"',
             "lastTransitionTime": ts} for n in names]
    return status
