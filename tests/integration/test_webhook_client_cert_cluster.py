"""The webhook server verifying the real API server's client certificate (issue #27,
finding 8).

The local cluster's kube-apiserver runs with an ``--admission-control-config-file``
whose webhook kubeconfig presents a client certificate of a CA of its own
(:attr:`ClusterInfo.webhook_client_ca`) to every admission webhook. Our manager, given
that CA (``ManagerOptions.webhook_client_ca``, the ``--webhook-client-ca`` flag), then
serves the API server's reviews, and refuses at the TLS handshake anyone else who can
reach it: no certificate at all, or a certificate of the cluster's own CA (the admin's).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from integrations.jobflow import JOBFLOW_GVK
from integrations.manager import VALIDATING_GVK, ExternalFrameworkManager, ManagerOptions
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.errors import ApiError
from jobframework.testing.cluster import ClusterInfo

from .helpers import NS, Cleanup, eventually
from .test_jobflow_cluster import jobflow, state_of, step

pytestmark = pytest.mark.cluster


def _post(url: str, body: bytes, ca: str, cert: tuple[str, str] | None) -> int:
    """POST ``body`` to ``url`` over TLS, presenting ``cert`` (or none); the HTTP status."""
    context = ssl.create_default_context(cafile=ca)
    if cert is not None:
        context.load_cert_chain(*cert)
    parts = urlsplit(url)
    conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, context=context,
                                       timeout=30)
    try:
        conn.request("POST", parts.path, body=body,
                     headers={"Content-Type": "application/json"})
        return conn.getresponse().status
    finally:
        conn.close()


def _review(name: str) -> bytes:
    obj = jobflow(name, "user-queue", [step("a")])
    obj["metadata"]["uid"] = str(uuid.uuid4())
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": NS,
                    "name": name, "object": obj,
                    "kind": {"group": JOBFLOW_GVK.group, "version": JOBFLOW_GVK.version,
                             "kind": JOBFLOW_GVK.kind},
                    "resource": {"group": JOBFLOW_GVK.group, "version": JOBFLOW_GVK.version,
                                 "resource": "jobflows"},
                    "userInfo": {"username": "system:masters-impostor"}}}).encode()


async def test_webhooks_requiring_the_api_servers_client_certificate(
        client: RestClient, cluster_info: ClusterInfo, cleanup: Cleanup,
        tmp_path: Path) -> None:
    client_ca = Path(cluster_info.webhook_client_ca)
    assert cluster_info.webhook_client_ca, "the local cluster names its webhook client CA"
    options = ManagerOptions(webhook_client_ca=client_ca, cert_dir=tmp_path,
                             integrations=("jobflow",))
    # Starting means its dry-run probe passed through both webhooks, called by the API
    # server with its client certificate.
    async with ExternalFrameworkManager(client, options) as mgr:
        assert mgr.webhook_server is not None
        assert mgr.webhook_server.client_ca_file == client_ca
        name = f"ccert-{uuid.uuid4().hex[:5]}"
        created = await client.create(jobflow(name, "user-queue", [step("a", run="1s")]))
        cleanup.insert(0, (JOBFLOW_GVK, name, NS))
        assert created["spec"]["suspend"] is True  # our mutating webhook's answer
        with pytest.raises(ApiError) as refused:  # our validating webhook's answer
            await client.create(jobflow(f"{name}-cyc", "user-queue", [
                step("a", deps=("b",)), step("b", deps=("a",))]))
        assert "denied the request" in refused.value.message, refused.value.message
        assert "spec.flows" in refused.value.message, refused.value.message

        async def succeeded() -> bool:
            jf = await client.get(JOBFLOW_GVK, name, namespace=NS)
            return state_of(jf) == "Succeed"

        await eventually("the JobFlow admitted by Kueue and Succeed", succeeded)

        configuration = await client.get(VALIDATING_GVK, options.webhook_configuration_name)
        url = configuration["webhooks"][0]["clientConfig"]["url"]
        serving_ca = str(tmp_path / "ca.crt")
        review = _review(f"{name}-direct")
        # Whoever else reaches the port is refused before a byte of the review is read.
        for cert in (None, (cluster_info.admin_cert, cluster_info.admin_key)):
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await asyncio.to_thread(_post, url, review, serving_ca, cert)
        # The API server's certificate is what the server asks for.
        apiserver = (str(client_ca.with_name("webhook-client.crt")),
                     str(client_ca.with_name("webhook-client.key")))
        assert await asyncio.to_thread(_post, url, review, serving_ca, apiserver) == 200
