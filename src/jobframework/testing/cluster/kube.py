"""A deliberately tiny Kubernetes REST client (stdlib ``urllib`` + ``ssl``).

The launcher must not depend on the project's runtime client (which is tested
*against* this cluster), so it speaks plain JSON over HTTPS with the admin
client certificate.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from jobframework.testing.cluster.pki import Pki

JSON = dict[str, Any]

FIELD_MANAGER = "kueue-jf-cluster"


class KubeError(RuntimeError):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:2000]}")
        self.status = status
        self.body = body


class FatalWait(RuntimeError):
    """Raised by a :func:`wait_for` probe to stop waiting at once."""


class Kube:
    """JSON requests to one API server, authenticated by a client certificate."""

    def __init__(self, server: str, ca: Path, cert: Path, key: Path, timeout: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self.timeout = timeout
        self._ctx = ssl.create_default_context(cafile=str(ca))
        self._ctx.load_cert_chain(str(cert), str(key))

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> JSON:
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(
                req, context=self._ctx, timeout=timeout or self.timeout
            ) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            raise KubeError(err.code, method, path, err.read().decode(errors="replace")) from None
        if not raw:
            return {}
        parsed = json.loads(raw)
        return parsed if isinstance(parsed, dict) else {"value": parsed}

    def get_text(self, path: str, timeout: float = 5.0) -> str:
        req = urllib.request.Request(self.server + path, method="GET")
        try:
            with urllib.request.urlopen(req, context=self._ctx, timeout=timeout) as resp:
                return str(resp.read().decode())
        except urllib.error.HTTPError as err:
            raise KubeError(err.code, "GET", path, err.read().decode(errors="replace")) from None

    def get(self, path: str) -> JSON | None:
        try:
            return self.request("GET", path)
        except KubeError as err:
            if err.status == 404:
                return None
            raise

    def apply(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> JSON:
        """Server-side apply ``obj`` (forced) and return the result."""
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        return self.request(
            "PATCH",
            object_path(obj),
            obj,
            content_type="application/apply-patch+yaml",
            query=query,
        )

    def create(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> JSON:
        query = {"dryRun": "All"} if dry_run else None
        return self.request("POST", collection_path(obj), obj, query=query)

    def merge_patch_status(self, obj: Mapping[str, Any], status: Mapping[str, Any]) -> JSON:
        return self.request(
            "PATCH",
            object_path(obj) + "/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )


# Resource names for the kinds the launcher itself creates or inspects.
_PLURALS = {
    "Namespace": "namespaces",
    "Node": "nodes",
    "Pod": "pods",
    "Job": "jobs",
    "CustomResourceDefinition": "customresourcedefinitions",
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
    "ResourceFlavor": "resourceflavors",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "Workload": "workloads",
    "Cohort": "cohorts",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
}
_CLUSTER_SCOPED = {
    "Namespace",
    "Node",
    "CustomResourceDefinition",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ResourceFlavor",
    "ClusterQueue",
    "Cohort",
    "ClusterRole",
    "ClusterRoleBinding",
}


def collection_path(obj: Mapping[str, Any]) -> str:
    api_version = str(obj["apiVersion"])
    kind = str(obj["kind"])
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    plural = _PLURALS[kind]
    if kind in _CLUSTER_SCOPED:
        return f"{base}/{plural}"
    namespace = obj.get("metadata", {}).get("namespace", "default")
    return f"{base}/namespaces/{namespace}/{plural}"


def object_path(obj: Mapping[str, Any]) -> str:
    return f"{collection_path(obj)}/{obj['metadata']['name']}"


def wait_for(
    what: str,
    probe: Callable[[], bool],
    timeout: float,
    interval: float = 0.25,
    on_timeout: Callable[[], str] | None = None,
) -> None:
    """Poll ``probe`` until it returns True; exceptions count as "not yet"."""
    deadline = time.monotonic() + timeout
    last_error = ""
    while True:
        try:
            if probe():
                return
        except FatalWait:
            raise
        except Exception as err:
            last_error = f"{type(err).__name__}: {err}"
        if time.monotonic() > deadline:
            extra = on_timeout() if on_timeout else ""
            raise TimeoutError(
                f"timed out after {timeout:.0f}s waiting for {what}. {last_error} {extra}"
            )
        time.sleep(interval)


def write_kubeconfig(path: Path, server: str, pki: Pki, context: str = "kueue-jf") -> None:
    """An admin kubeconfig with the CA and client credentials embedded."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": context,
                "cluster": {"server": server, "certificate-authority-data": b64(pki.ca.cert)},
            }
        ],
        "users": [
            {
                "name": f"{context}-admin",
                "user": {
                    "client-certificate-data": b64(pki.admin.cert),
                    "client-key-data": b64(pki.admin.key),
                },
            }
        ],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": f"{context}-admin", "namespace": "default"},
            }
        ],
        "current-context": context,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
