"""AppWrapper (``workload.codeflare.dev/v1beta2``): wrapped Kubernetes objects queued by Kueue.

A re-implementation of project-codeflare/appwrapper (v1.2.2) and of Kueue's AppWrapper
integration on this project's runtime and jobframework: the API and CRD
(:func:`load_crds`), PodSet inference and injection (:mod:`.podsets`), the Kueue adapter
(:class:`AppWrapperJob`), the webhooks (:class:`AppWrapperWebhook`,
:class:`AppWrapperKueueWebhook`), the framework controller (:mod:`.controller`) and
wiring for a manager (:func:`setup`). See ``docs/appwrapper.md`` and
``docs/appwrapper-lifecycle.md``.
"""

from __future__ import annotations

from .api import (
    API_VERSION,
    APPWRAPPER_CONTROLLER_NAME,
    APPWRAPPER_GVK,
    APPWRAPPER_LABEL,
    FINALIZER,
    GROUP,
    PLURAL,
    USER_LABEL,
    USERID_LABEL,
    VERSION,
    AppWrapperCondition,
    AppWrapperPhase,
    load_crds,
    load_samples,
)
from .job import AppWrapperJob
from .rbac import RBAC
from .setup import (
    CALLBACKS,
    FRAMEWORK_NAME,
    REPLACES_BUILTIN,
    AppWrapperSetup,
    probe_object,
    register,
    setup,
    setup_kueue_webhook,
    setup_webhook,
)
from .webhook import AppWrapperKueueWebhook, AppWrapperWebhook

__all__ = [
    "API_VERSION",
    "APPWRAPPER_CONTROLLER_NAME",
    "APPWRAPPER_GVK",
    "APPWRAPPER_LABEL",
    "CALLBACKS",
    "FINALIZER",
    "FRAMEWORK_NAME",
    "GROUP",
    "PLURAL",
    "RBAC",
    "REPLACES_BUILTIN",
    "USERID_LABEL",
    "USER_LABEL",
    "VERSION",
    "AppWrapperCondition",
    "AppWrapperJob",
    "AppWrapperKueueWebhook",
    "AppWrapperPhase",
    "AppWrapperSetup",
    "AppWrapperWebhook",
    "load_crds",
    "load_samples",
    "probe_object",
    "register",
    "setup",
    "setup_kueue_webhook",
    "setup_webhook",
]
