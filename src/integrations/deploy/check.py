"""The rendered manifests against a live API server, kept nowhere: a server-side dry run.

:func:`dry_run_manifests` server-side applies every object of a :func:`~.render.render`
with ``dryRun=All``, as ``kubectl apply --server-side --dry-run=server`` would: the API
server validates and admits each (schemas, RBAC objects, webhook configurations, the
CRDs) without keeping it. Only the manifests' Namespace and ServiceAccount are created for
real, so that the namespaced objects can be dry-run in it and a Pod of the Deployment's
template admitted (the Namespace enforces the ``restricted`` Pod Security Standard); the
Namespace is deleted afterwards. Kinds the cluster does not serve (cert-manager's, without
cert-manager) are skipped and listed.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping, Sequence

import attrs

from jobframework.runtime.client import Client, PatchType
from jobframework.runtime.client.discovery import NoKindMatchError
from jobframework.runtime.errors import NotFound
from jobframework.runtime.objects import GVK, Object, name_of, namespace_of

__all__ = ["DryRunResult", "dry_run_manifests"]

FIELD_MANAGER = "kueue-jobframework-deploy-check"
NAMESPACE_GVK = GVK("", "v1", "Namespace")
#: Cluster-scoped kinds (CRDs aside, whose names their group fixes) renamed by ``suffix``.
_RENAMED = ("ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration")


@attrs.frozen
class DryRunResult:
    """What the API server accepted."""

    #: ``Kind/name`` of every object accepted, in kustomization order.
    accepted: tuple[str, ...]
    #: Kinds skipped because the cluster does not serve them.
    skipped: tuple[str, ...]
    #: The Deployment's pod as the API server admitted it (dry run).
    pod: Object


def _with_suffix(files: Mapping[str, Sequence[Object]], suffix: str
                 ) -> dict[str, list[Object]]:
    """A copy whose cluster-scoped objects have names of their own: a live manager keeps
    webhook configurations named like ours, which a dry-run apply would merge into."""
    out = {name: copy.deepcopy(list(objects)) for name, objects in files.items()}
    if suffix:
        for objects in out.values():
            for obj in objects:
                if obj["kind"] in _RENAMED:
                    obj["metadata"]["name"] += suffix
                if obj["kind"] == "ClusterRoleBinding":
                    obj["roleRef"]["name"] += suffix
    return out


async def _served(client: Client, gvk: GVK) -> bool:
    try:
        await client.rest_mapper.rest_mapping(gvk)
    except (NoKindMatchError, LookupError):
        return False
    return True


async def dry_run_manifests(client: Client, files: Mapping[str, Sequence[Object]], *,
                            suffix: str = "") -> DryRunResult:
    """Dry-run every object of ``files`` (a :func:`~.render.render`) on ``client``'s
    cluster, see the module; ``suffix`` renames the cluster-scoped objects. The first
    refusal raises the API server's error."""
    files = _with_suffix(files, suffix)
    (ns,) = files["namespace.yaml"]
    (sa,) = files["serviceaccount.yaml"]
    namespace = name_of(ns)
    await client.create(ns)
    try:
        await client.create(sa)
        accepted: list[str] = []
        skipped: list[str] = []
        for name in files["kustomization.yaml"][0]["resources"]:
            for obj in files[name]:
                gvk = GVK.of(obj)
                if not await _served(client, gvk):
                    skipped.append(gvk.kind)
                    continue
                out = await client.patch(
                    gvk, name_of(obj), obj, namespace=namespace_of(obj) or None,
                    patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
                    dry_run=True)
                accepted.append(f"{out['kind']}/{name_of(out)}")
        (deployment,) = files["deployment.yaml"]
        template = copy.deepcopy(deployment["spec"]["template"])
        pod: Object = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {**template["metadata"], "name": "manager-dry-run",
                                    "namespace": namespace},
                       "spec": template["spec"]}
        admitted = await client.create(pod, dry_run=True)
    finally:
        with contextlib.suppress(NotFound):
            await client.delete(NAMESPACE_GVK, namespace)
    return DryRunResult(accepted=tuple(accepted), skipped=tuple(skipped), pod=admitted)
