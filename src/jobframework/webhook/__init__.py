"""Admission webhooks: controller-runtime's ``webhook`` and ``webhook/admission`` in asyncio.

A :class:`Handler` answers an :class:`AdmissionRequest` with an
:class:`AdmissionResponse`. Most handlers are built from a :class:`CustomDefaulter`
(mutating: change the object in place, the response carries the JSON patch) or a
:class:`CustomValidator` (validating: raise to reject) with
:func:`with_custom_defaulter` / :func:`with_custom_validator`. A
:class:`WebhookServer` serves handlers by path over HTTPS, following rotated
certificate files; :func:`admission_hook` (or ``WebhookServer.as_admission_hook``)
gives the same handler as an in-process ``AdmissionReview -> AdmissionReview``
callable for in-memory API servers and tests. :mod:`.certs` mints self-signed serving
certificates, :mod:`.manifests` renders WebhookConfigurations, and
:class:`WebhookBuilder` registers a kind's handlers at controller-runtime's paths.

This layer knows nothing of jobs or Kueue; ``jobframework`` builds ``BaseWebhook``
on top of it.
"""

from .admission import (
    AdmissionHook,
    AdmissionRequest,
    AdmissionResponse,
    Handler,
    HandlerFunc,
    JsonPatchOperation,
    MalformedReview,
    Operation,
    UserInfo,
    admission_hook,
    allowed,
    call_handler,
    create_patch,
    denied,
    errored,
    patch_response_from_raw,
    patched,
    review,
    validation_response,
    validation_response_from_status,
)
from .builder import WebhookBuilder, mutate_path, validate_path
from .certrotator import CertificateSet, CertRotator, RefreshResult
from .certs import CertificateAuthority, ServingCerts, write_serving_certs
from .certwatcher import CertWatcher
from .defaulter import (
    CustomDefaulter,
    Defaulter,
    DefaulterHandler,
    ObjectCodec,
    PatchContext,
    PatchFilter,
    with_custom_defaulter,
)
from .manifests import (
    ServiceRef,
    WebhookResource,
    WebhookSpec,
    crd_webhook_resources,
    mutating_webhook_configuration,
    rule,
    validating_webhook_configuration,
)
from .metrics import WebhookMetrics
from .server import WebhookServer
from .validator import (
    CustomValidator,
    SupportsStatusCause,
    ValidationError,
    Validator,
    ValidatorHandler,
    Warnings,
    aggregate_message,
    with_custom_validator,
)

__all__ = [
    "AdmissionHook",
    "AdmissionRequest",
    "AdmissionResponse",
    "CertRotator",
    "CertWatcher",
    "CertificateAuthority",
    "CertificateSet",
    "CustomDefaulter",
    "CustomValidator",
    "Defaulter",
    "DefaulterHandler",
    "Handler",
    "HandlerFunc",
    "JsonPatchOperation",
    "MalformedReview",
    "ObjectCodec",
    "Operation",
    "PatchContext",
    "PatchFilter",
    "RefreshResult",
    "ServiceRef",
    "ServingCerts",
    "SupportsStatusCause",
    "UserInfo",
    "ValidationError",
    "Validator",
    "ValidatorHandler",
    "Warnings",
    "WebhookBuilder",
    "WebhookMetrics",
    "WebhookResource",
    "WebhookServer",
    "WebhookSpec",
    "admission_hook",
    "aggregate_message",
    "allowed",
    "call_handler",
    "crd_webhook_resources",
    "create_patch",
    "denied",
    "errored",
    "mutate_path",
    "mutating_webhook_configuration",
    "patch_response_from_raw",
    "patched",
    "review",
    "rule",
    "validate_path",
    "validating_webhook_configuration",
    "validation_response",
    "validation_response_from_status",
    "with_custom_defaulter",
    "with_custom_validator",
    "write_serving_certs",
]
