"""The rendered in-cluster manifests against the real kube-apiserver.

Every object of ``render()`` (both certificate modes) is server-side applied with
``dryRun=All``: the API server validates and admits each as it would on ``kubectl apply
--server-side`` (schemas, RBAC objects, webhook configurations, the CRDs), without
keeping it. Only the manifests' namespace and ServiceAccount are created for real (a
namespace of the test's own, deleted afterwards), so that the namespaced objects can be
dry-run in it and a Pod of the Deployment's template can be admitted: the namespace
enforces the ``restricted`` Pod Security Standard, so the dry-run Pod proves the
security context passes it. cert-manager's kinds are skipped when the cluster does not
serve them.
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from typing import Literal

import pytest

from integrations.catalog import DEFAULT_INTEGRATIONS
from integrations.deploy import render
from jobframework.runtime.client import PatchType
from jobframework.runtime.client.discovery import NoKindMatchError
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import NotFound
from jobframework.runtime.objects import GVK, Object, name_of, namespace_of

pytestmark = pytest.mark.cluster

FIELD_MANAGER = "kueue-jobframework-deploy-test"
NAMESPACE_GVK = GVK("", "v1", "Namespace")


def _unique(files: dict[str, list[Object]], suffix: str) -> None:
    """Give the cluster-scoped objects but CRDs (whose names their group fixes) names of
    the test's own: other tests' managers keep live webhook configurations named like ours
    (registered by URL), which a dry-run apply would merge into."""
    for objects in files.values():
        for obj in objects:
            if obj["kind"] in ("ClusterRole", "ClusterRoleBinding",
                               "MutatingWebhookConfiguration",
                               "ValidatingWebhookConfiguration"):
                obj["metadata"]["name"] += suffix
            if obj["kind"] == "ClusterRoleBinding":
                obj["roleRef"]["name"] += suffix


async def _dry_run_apply(client: RestClient, obj: Object) -> Object:
    return await client.patch(GVK.of(obj), name_of(obj), obj,
                              namespace=namespace_of(obj) or None, patch_type=PatchType.APPLY,
                              field_manager=FIELD_MANAGER, force=True, dry_run=True)


async def _served(client: RestClient, gvk: GVK) -> bool:
    try:
        await client.rest_mapper.rest_mapping(gvk)
    except (NoKindMatchError, LookupError):
        return False
    return True


@pytest.mark.parametrize("cert_management", ["internal", "cert-manager"])
async def test_manifests_are_accepted_by_the_api_server(
        client: RestClient, cert_management: Literal["internal", "cert-manager"]) -> None:
    suffix = uuid.uuid4().hex[:6]
    namespace = f"kjf-deploy-{suffix}"
    files = render(DEFAULT_INTEGRATIONS, namespace=namespace,
                   cert_management=cert_management)
    _unique(files, f"-{suffix}")
    (ns,) = files["namespace.yaml"]
    (sa,) = files["serviceaccount.yaml"]
    await client.create(ns)
    try:
        await client.create(sa)
        checked: list[str] = []
        skipped: list[str] = []
        for name in files["kustomization.yaml"][0]["resources"]:
            for obj in files[name]:
                gvk = GVK.of(obj)
                if not await _served(client, gvk):
                    assert gvk.group == "cert-manager.io", f"{gvk} is not served"
                    skipped.append(gvk.kind)
                    continue
                out = await _dry_run_apply(client, obj)
                assert out["kind"] == obj["kind"]
                assert name_of(out) == name_of(obj)
                checked.append(f"{obj['kind']}/{name_of(obj)}")
        assert {"ClusterRole", "Deployment", "MutatingWebhookConfiguration",
                "ValidatingWebhookConfiguration", "PodDisruptionBudget",
                "CustomResourceDefinition"} <= {c.split("/")[0] for c in checked}
        if cert_management == "internal":
            assert not skipped

        # The Deployment's pod, admitted in the namespace enforcing "restricted".
        (deployment,) = files["deployment.yaml"]
        template = copy.deepcopy(deployment["spec"]["template"])
        pod: Object = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {**template["metadata"], "name": "manager-dry-run",
                                    "namespace": namespace},
                       "spec": template["spec"]}
        admitted = await client.create(pod, dry_run=True)
        assert admitted["spec"]["securityContext"]["runAsNonRoot"] is True
    finally:
        with contextlib.suppress(NotFound):
            await client.delete(NAMESPACE_GVK, namespace)
