"""The in-memory server's admission chain: mutating webhooks, then validating ones.

A webhook here is an ``async (review: dict) -> dict`` function that receives an
``admission.k8s.io/v1`` ``AdmissionReview`` request, exactly as a webhook server would
over HTTP, and returns the ``AdmissionReview`` response. The chain reproduces the
apiserver's dispatcher: rule matching by operation, group, version, resource and
subresource and scope, object and namespace selectors, ``failurePolicy``, the response
``uid`` check, base64 JSON patches from mutating webhooks, and the error a denial turns
into (``admission webhook "<name>" denied the request: <message>``).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from ..runtime import errors
from ..runtime.objects import Object, deep_copy
from ..runtime.selectors import LabelSelector
from ._patch import apply_json_patch
from ._registry import KindInfo

#: A webhook: takes an AdmissionReview with ``request``, returns one with ``response``.
Webhook = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
FailurePolicy = Literal["Fail", "Ignore"]

#: Rules used when a webhook is added without any: create and update of every resource.
DEFAULT_RULES: tuple[dict[str, Any], ...] = ({
    "operations": ["CREATE", "UPDATE"], "apiGroups": ["*"], "apiVersions": ["*"],
    "resources": ["*"],
},)


def _resource_matches(patterns: Sequence[str], resource: str, subresource: str) -> bool:
    # admissionregistration semantics: "*" is every resource but no subresource, "*/*"
    # everything, "pods/*" every subresource of pods, "*/status" every status subresource.
    for pattern in patterns:
        res, _, sub = pattern.partition("/")
        if res not in ("*", resource):
            continue
        if not subresource and not sub:
            return True
        if subresource and sub in ("*", subresource):
            return True
    return False


@attrs.frozen
class Rule:
    """One ``RuleWithOperations``."""

    operations: tuple[str, ...]
    api_groups: tuple[str, ...]
    api_versions: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str = "*"

    @classmethod
    def from_dict(cls, rule: Mapping[str, Any]) -> Rule:
        """Build from the JSON form (``operations``, ``apiGroups``, ...)."""
        return cls(
            tuple(rule.get("operations") or ("*",)),
            tuple(rule.get("apiGroups") or ("*",)),
            tuple(rule.get("apiVersions") or ("*",)),
            tuple(rule.get("resources") or ("*",)),
            str(rule.get("scope") or "*"),
        )

    def matches(self, operation: str, kind: KindInfo, subresource: str) -> bool:
        """Whether a request is selected by this rule."""
        if "*" not in self.operations and operation not in self.operations:
            return False
        if "*" not in self.api_groups and kind.gvk.group not in self.api_groups:
            return False
        if "*" not in self.api_versions and kind.gvk.version not in self.api_versions:
            return False
        if self.scope == "Namespaced" and not kind.namespaced:
            return False
        if self.scope == "Cluster" and kind.namespaced:
            return False
        return _resource_matches(self.resources, kind.plural, subresource)


@attrs.define(eq=False)
class RegisteredWebhook:
    """A webhook in the chain (returned by ``add_*_webhook``; pass it to ``remove``)."""

    name: str
    fn: Webhook
    mutating: bool
    rules: tuple[Rule, ...]
    failure_policy: FailurePolicy = "Fail"
    namespace_selector: LabelSelector = attrs.field(factory=LabelSelector)
    object_selector: LabelSelector = attrs.field(factory=LabelSelector)
    #: The AdmissionReview requests this webhook received, oldest first.
    calls: list[dict[str, Any]] = attrs.field(factory=list)


@attrs.frozen
class AdmissionAttributes:
    """What the chain needs to know about one request."""

    operation: Operation
    kind: KindInfo
    namespace: str
    name: str
    subresource: str
    user: str
    dry_run: bool
    options: dict[str, Any]
    #: The labels of the request's namespace (for namespace selectors).
    namespace_labels: dict[str, str]


def _user_info(user: str) -> dict[str, Any]:
    groups = ["system:masters", "system:authenticated"] if user == "admin" else [
        "system:authenticated"]
    return {"username": user, "groups": groups}


def _status_error(name: str, status: Mapping[str, Any] | None) -> errors.ApiError:
    # Reproduces webhookerrors.ToStatusErr: never a code below 400, and the message is
    # prefixed with who denied it.
    result = dict(status or {})
    denied_by = f'admission webhook "{name}" denied the request'
    code = int(result.get("code") or 0)
    if code < 400:
        code = 400
    if result.get("message"):
        message = f"{denied_by}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied_by}: {result['reason']}"
    else:
        message = f"{denied_by} without explanation"
    body = {**result, "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "code": code, "message": message}
    return errors.from_status(body, code)


class AdmissionChain:
    """Mutating then validating webhooks, in registration order within each phase."""

    def __init__(self) -> None:
        self.webhooks: list[RegisteredWebhook] = []
        #: Warnings returned by webhooks, oldest first (the HTTP front sends them as headers).
        self.warnings: list[str] = []

    def add(self, hook: RegisteredWebhook) -> RegisteredWebhook:
        """Append ``hook`` to its phase."""
        self.webhooks.append(hook)
        return hook

    def remove(self, hook: RegisteredWebhook) -> None:
        """Take ``hook`` out of the chain."""
        if hook in self.webhooks:
            self.webhooks.remove(hook)

    def _selected(
        self, hook: RegisteredWebhook, attrs_: AdmissionAttributes, obj: Object | None,
        old: Object | None,
    ) -> bool:
        if not any(r.matches(attrs_.operation, attrs_.kind, attrs_.subresource)
                   for r in hook.rules):
            return False
        if not hook.object_selector.empty:
            # As the apiserver: selected when either the new or the old object matches.
            labels = [((o.get("metadata") or {}).get("labels") or {})
                      for o in (obj, old) if o is not None]
            if not any(hook.object_selector.matches(lbl) for lbl in labels):
                return False
        if not hook.namespace_selector.empty:
            if attrs_.kind.namespaced:
                return hook.namespace_selector.matches(attrs_.namespace_labels)
            if attrs_.kind.gvk.kind == "Namespace":
                ns_labels = ((obj or old or {}).get("metadata") or {}).get("labels") or {}
                return hook.namespace_selector.matches(ns_labels)
        return True

    def _review(
        self, attrs_: AdmissionAttributes, obj: Object | None, old: Object | None,
    ) -> dict[str, Any]:
        gvk = attrs_.kind.gvk
        kind = {"group": gvk.group, "version": gvk.version, "kind": gvk.kind}
        resource = {"group": gvk.group, "version": gvk.version,
                    "resource": attrs_.kind.plural}
        request: dict[str, Any] = {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": resource,
            "requestKind": dict(kind),
            "requestResource": dict(resource),
            "name": attrs_.name,
            "operation": attrs_.operation,
            "userInfo": _user_info(attrs_.user),
            "object": deep_copy(obj) if obj is not None else None,
            "oldObject": deep_copy(old) if old is not None else None,
            "dryRun": attrs_.dry_run,
            "options": deep_copy(attrs_.options),
        }
        if attrs_.subresource:
            request["subResource"] = attrs_.subresource
            request["requestSubResource"] = attrs_.subresource
        if attrs_.kind.namespaced:
            request["namespace"] = attrs_.namespace
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": request}

    async def _call(
        self, hook: RegisteredWebhook, review: dict[str, Any]
    ) -> dict[str, Any] | None:
        hook.calls.append(deep_copy(review["request"]))
        try:
            answer = await hook.fn(deep_copy(review))
            response = answer.get("response") if isinstance(answer, Mapping) else None
            if not isinstance(response, Mapping):
                raise ValueError("the webhook returned no response")
            if response.get("uid") != review["request"]["uid"]:
                raise ValueError(f'expected response.uid="{review["request"]["uid"]}", '
                                 f'got "{response.get("uid")}"')
            return dict(response)
        except Exception as exc:
            if hook.failure_policy == "Ignore":
                return None
            raise errors.InternalError(
                f'Internal error occurred: failed calling webhook "{hook.name}": {exc}'
            ) from exc

    async def run(
        self, mutating: bool, attrs_: AdmissionAttributes, obj: Object | None,
        old: Object | None,
    ) -> Object | None:
        """Run one phase; returns the (possibly patched) object or raises the denial."""
        current = obj
        for hook in [h for h in self.webhooks if h.mutating == mutating]:
            if not self._selected(hook, attrs_, current, old):
                continue
            response = await self._call(hook, self._review(attrs_, current, old))
            if response is None:
                continue
            self.warnings.extend(str(w) for w in response.get("warnings") or [])
            if not response.get("allowed"):
                raise _status_error(hook.name, response.get("status"))
            patch = response.get("patch")
            if mutating and patch and current is not None:
                current = _apply_webhook_patch(hook.name, current, response)
        return current


def _apply_webhook_patch(name: str, obj: Object, response: Mapping[str, Any]) -> Object:
    if response.get("patchType", "JSONPatch") != "JSONPatch":
        raise errors.InternalError(
            f'Internal error occurred: failed calling webhook "{name}": unsupported '
            f'patch type "{response.get("patchType")}"')
    try:
        ops = json.loads(base64.b64decode(response["patch"]))
        return apply_json_patch(obj, ops)
    except (ValueError, errors.ApiError) as exc:
        raise errors.InternalError(
            f"Internal error occurred: admission webhook {name!r} returned an invalid "
            f"patch: {exc}") from exc
