"""The rendered in-cluster manifests against the real kube-apiserver
(:func:`integrations.deploy.check.dry_run_manifests`, which the demo runs too).

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

import uuid
from typing import Literal

import pytest

from integrations.catalog import DEFAULT_INTEGRATIONS
from integrations.deploy import render
from integrations.deploy.check import NAMESPACE_GVK, dry_run_manifests
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.objects import name_of

from .helpers import get_or_none

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("cert_management", ["internal", "cert-manager"])
async def test_manifests_are_accepted_by_the_api_server(
        client: RestClient, cert_management: Literal["internal", "cert-manager"]) -> None:
    suffix = uuid.uuid4().hex[:6]
    namespace = f"kjf-deploy-{suffix}"
    files = render(DEFAULT_INTEGRATIONS, namespace=namespace,
                   cert_management=cert_management)
    # Other tests' managers keep live webhook configurations named like ours.
    result = await dry_run_manifests(client, files, suffix=f"-{suffix}")
    checked, skipped = result.accepted, result.skipped
    assert all(kind in ("Issuer", "Certificate") for kind in skipped), skipped
    for name in files["kustomization.yaml"][0]["resources"]:
        for obj in files[name]:
            if obj["kind"] not in skipped:
                renamed = name_of(obj) + (f"-{suffix}" if obj["kind"] in (
                    "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                    "ValidatingWebhookConfiguration") else "")
                assert f"{obj['kind']}/{renamed}" in checked
    assert {"ClusterRole", "Deployment", "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration", "PodDisruptionBudget",
            "CustomResourceDefinition"} <= {c.split("/")[0] for c in checked}
    if cert_management == "internal":
        assert not skipped
    # The Deployment's pod, admitted in the namespace enforcing "restricted".
    assert result.pod["spec"]["securityContext"]["runAsNonRoot"] is True
    ns = await get_or_none(client, NAMESPACE_GVK, namespace, None)
    assert ns is None or ns["metadata"].get("deletionTimestamp"), "the namespace goes"
