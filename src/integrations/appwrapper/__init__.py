"""AppWrapper (``workload.codeflare.dev/v1beta2``): wrapped Kubernetes objects queued by Kueue.

A re-implementation of project-codeflare/appwrapper on this project's runtime and
jobframework. See ``docs/appwrapper.md``.
"""

from .api import (
    API_VERSION,
    APPWRAPPER_GVK,
    GROUP,
    PLURAL,
    VERSION,
    AppWrapperCondition,
    AppWrapperPhase,
    load_crds,
)

__all__ = [
    "API_VERSION",
    "APPWRAPPER_GVK",
    "GROUP",
    "PLURAL",
    "VERSION",
    "AppWrapperCondition",
    "AppWrapperPhase",
    "load_crds",
]
