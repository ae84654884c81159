"""Registering a kind's defaulter and validator (controller-runtime's ``WebhookBuilder``).

::

    WebhookBuilder(server) \\
        .for_(GVK("batch", "v1", "Job")) \\
        .with_defaulter(JobWebhook()) \\
        .with_validator(JobWebhook()) \\
        .complete()          # registers /mutate-batch-v1-job and /validate-batch-v1-job

Paths follow controller-runtime (``/mutate-<group with dots as dashes>-<version>-<kind
lower-cased>``, ``/validate-...``), which are the paths kubebuilder markers and Kueue's
manifests use. A path the server already serves is left alone, as controller-runtime
does, so two integrations may complete the same kind.
"""

from __future__ import annotations

import re
from typing import Any

from jobframework.runtime.objects import GroupVersionKind

from .admission import Handler
from .defaulter import Defaulter, ObjectCodec, PatchFilter, with_custom_defaulter
from .server import WebhookServer
from .validator import Validator, with_custom_validator

_PATH = re.compile(r"^((/[a-zA-Z0-9\-_]+)+|/)$")


def mutate_path(gvk: GroupVersionKind) -> str:
    """``/mutate-<group>-<version>-<kind>`` with the group's dots as dashes."""
    return f"/mutate-{gvk.group.replace('.', '-')}-{gvk.version}-{gvk.kind.lower()}"


def validate_path(gvk: GroupVersionKind) -> str:
    """``/validate-<group>-<version>-<kind>`` with the group's dots as dashes."""
    return f"/validate-{gvk.group.replace('.', '-')}-{gvk.version}-{gvk.kind.lower()}"


class WebhookBuilder:
    """Builds and registers the mutating and validating handlers of one kind."""

    def __init__(self, server: WebhookServer) -> None:
        self._server = server
        self._gvk: GroupVersionKind | None = None
        self._defaulter: Defaulter[Any] | None = None
        self._validator: Validator[Any] | None = None
        self._codec: ObjectCodec[Any] | None = None
        self._remove_unknown = False
        self._patch_filter: PatchFilter | None = None
        self._defaulter_path: str | None = None
        self._validator_path: str | None = None

    def for_(self, gvk: GroupVersionKind) -> WebhookBuilder:
        """The kind the webhooks are for (it names the default paths)."""
        self._gvk = gvk
        return self

    def with_defaulter(
        self,
        defaulter: Defaulter[Any],
        *,
        remove_unknown_or_omitted_fields: bool = False,
        patch_filter: PatchFilter | None = None,
    ) -> WebhookBuilder:
        """Serve ``defaulter`` as the mutating webhook (see :func:`with_custom_defaulter`)."""
        self._defaulter = defaulter
        self._remove_unknown = remove_unknown_or_omitted_fields
        self._patch_filter = patch_filter
        return self

    def with_validator(self, validator: Validator[Any]) -> WebhookBuilder:
        """Serve ``validator`` as the validating webhook."""
        self._validator = validator
        return self

    def with_codec(self, codec: ObjectCodec[Any]) -> WebhookBuilder:
        """Hand both handlers ``codec.decode(object)`` instead of the JSON dict."""
        self._codec = codec
        return self

    def with_defaulter_custom_path(self, path: str) -> WebhookBuilder:
        """Serve the defaulter at ``path`` instead of :func:`mutate_path`."""
        self._defaulter_path = _checked(path)
        return self

    def with_validator_custom_path(self, path: str) -> WebhookBuilder:
        """Serve the validator at ``path`` instead of :func:`validate_path`."""
        self._validator_path = _checked(path)
        return self

    def complete(self) -> list[str]:
        """Register the handlers; returns the paths registered now (skipping served ones)."""
        if self._gvk is None:
            raise ValueError("for_() must name the kind the webhooks are for")
        if self._defaulter is None and self._validator is None:
            raise ValueError("give a defaulter, a validator, or both")
        registered: list[str] = []
        if self._defaulter is not None:
            handler: Handler = with_custom_defaulter(
                self._defaulter,
                codec=self._codec,
                remove_unknown_or_omitted_fields=self._remove_unknown,
                patch_filter=self._patch_filter,
            )
            path = self._defaulter_path or mutate_path(self._gvk)
            if self._register(path, handler):
                registered.append(path)
        if self._validator is not None:
            handler = with_custom_validator(self._validator, codec=self._codec)
            path = self._validator_path or validate_path(self._gvk)
            if self._register(path, handler):
                registered.append(path)
        return registered

    def _register(self, path: str, handler: Handler) -> bool:
        if path in self._server.handlers:
            return False
        self._server.register(path, handler)
        return True


def _checked(path: str) -> str:
    if not _PATH.match(path):
        raise ValueError(f'customPath "{path}" does not match this regex: {_PATH.pattern}')
    return path
