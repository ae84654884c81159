"""Mutating/ValidatingWebhookConfiguration manifests for registered webhook paths.

controller-gen writes these from ``+kubebuilder:webhook`` markers; here they are built
from :class:`WebhookSpec` values, pointing either at a URL (a webhook outside the
cluster, such as a developer's machine or a test server on loopback) or at a Service.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

OperationName = Literal["CREATE", "UPDATE", "DELETE", "CONNECT", "*"]


def rule(
    group: str,
    version: str,
    resource: str,
    operations: Sequence[OperationName] = ("CREATE", "UPDATE"),
    *,
    scope: Literal["*", "Cluster", "Namespaced"] | None = None,
) -> dict[str, Any]:
    """One ``RuleWithOperations`` (``group`` is ``""`` for the core group)."""
    out: dict[str, Any] = {
        "apiGroups": [group],
        "apiVersions": [version],
        "operations": list(operations),
        "resources": [resource],
    }
    if scope is not None:
        out["scope"] = scope
    return out


@attrs.frozen
class ServiceRef:
    """The in-cluster Service fronting the webhook server."""

    name: str
    namespace: str
    port: int = 443


@attrs.frozen
class WebhookResource:
    """A kind webhooks intercept: its group, version, kind and plural resource name, and
    which namespaces' requests reach the webhook (None: all)."""

    group: str
    version: str
    kind: str
    plural: str
    namespace_selector: Mapping[str, Any] | None = None

    @property
    def path_suffix(self) -> str:
        """``<group with dashes>-<version>-<kind lower-cased>``: the tail of its
        controller-runtime webhook paths (``/mutate-...``, ``/validate-...``)."""
        return f"{self.group.replace('.', '-')}-{self.version}-{self.kind.lower()}"


def crd_webhook_resources(crds: Sequence[Mapping[str, Any]]) -> list[WebhookResource]:
    """The served versions of the kinds ``crds`` define."""
    out: list[WebhookResource] = []
    for crd in crds:
        spec = crd["spec"]
        for version in spec.get("versions") or []:
            if version.get("served", True):
                out.append(WebhookResource(spec["group"], version["name"],
                                           spec["names"]["kind"], spec["names"]["plural"]))
    return out


@attrs.frozen(kw_only=True)
class WebhookSpec:
    """One webhook of a configuration: its name, path and which requests it receives."""

    name: str
    path: str
    rules: Sequence[Mapping[str, Any]]
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    side_effects: Literal["None", "NoneOnDryRun"] = "None"
    match_policy: Literal["Exact", "Equivalent"] | None = None
    namespace_selector: Mapping[str, Any] | None = None
    object_selector: Mapping[str, Any] | None = None
    timeout_seconds: int | None = None
    #: Mutating webhooks only.
    reinvocation_policy: Literal["Never", "IfNeeded"] | None = None


def _client_config(
    path: str, ca_bundle: bytes | None, url: str | None, service: ServiceRef | None
) -> dict[str, Any]:
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url and service")
    config: dict[str, Any]
    if url is not None:
        config = {"url": url.rstrip("/") + path}
    else:
        assert service is not None
        config = {"service": {"name": service.name, "namespace": service.namespace,
                              "path": path, "port": service.port}}
    if ca_bundle:
        config["caBundle"] = base64.b64encode(ca_bundle).decode()
    return config


def _configuration(
    kind: str, name: str, webhooks: Sequence[WebhookSpec], ca_bundle: bytes | None,
    url: str | None, service: ServiceRef | None,
) -> dict[str, Any]:
    entries = []
    for spec in webhooks:
        entry: dict[str, Any] = {
            "name": spec.name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": _client_config(spec.path, ca_bundle, url, service),
            "failurePolicy": spec.failure_policy,
            "sideEffects": spec.side_effects,
            "rules": [dict(r) for r in spec.rules],
        }
        if spec.match_policy is not None:
            entry["matchPolicy"] = spec.match_policy
        if spec.namespace_selector is not None:
            entry["namespaceSelector"] = dict(spec.namespace_selector)
        if spec.object_selector is not None:
            entry["objectSelector"] = dict(spec.object_selector)
        if spec.timeout_seconds is not None:
            entry["timeoutSeconds"] = spec.timeout_seconds
        if spec.reinvocation_policy is not None:
            if kind != "MutatingWebhookConfiguration":
                raise ValueError(f"{spec.name}: reinvocationPolicy is for mutating webhooks")
            entry["reinvocationPolicy"] = spec.reinvocation_policy
        entries.append(entry)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": entries,
    }


def mutating_webhook_configuration(
    name: str,
    webhooks: Sequence[WebhookSpec],
    *,
    ca_bundle: bytes | None = None,
    url: str | None = None,
    service: ServiceRef | None = None,
) -> dict[str, Any]:
    """A ``MutatingWebhookConfiguration`` sending each spec's requests to its path.

    Requests go to ``url`` + path, or to ``service`` with the path.

    ``ca_bundle`` is the PEM CA (e.g. ``ServingCerts.ca_bundle``); it is base64-encoded here.
    """
    return _configuration("MutatingWebhookConfiguration", name, webhooks, ca_bundle, url,
                          service)


def validating_webhook_configuration(
    name: str,
    webhooks: Sequence[WebhookSpec],
    *,
    ca_bundle: bytes | None = None,
    url: str | None = None,
    service: ServiceRef | None = None,
) -> dict[str, Any]:
    """A ``ValidatingWebhookConfiguration``; see :func:`mutating_webhook_configuration`."""
    return _configuration("ValidatingWebhookConfiguration", name, webhooks, ca_bundle, url,
                          service)
