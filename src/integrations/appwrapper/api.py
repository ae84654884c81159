"""The ``workload.codeflare.dev/v1beta2`` API: AppWrapper names, phases and conditions.

Objects stay plain JSON dicts; this module holds the wire strings the webhook, the Kueue
adapter (:mod:`.job`) and the framework controller (:mod:`.controller`) share: the
group/version/kind, the ``status.phase`` values, the condition types, the labels,
annotations and finalizer upstream writes or reads, and the CRD manifests in ``crds/``.

Every string here is contract with upstream (project-codeflare/appwrapper v1.2.x and
Kueue's ``pkg/controller/jobs/appwrapper``): an AppWrapper written for either runs here.
"""

from __future__ import annotations

import enum
from typing import Final

from jobframework.runtime.objects import GVK, Object

from .._manifests import load_yaml_folder

__all__ = [
    "ADMISSION_GRACE_PERIOD_ANNOTATION",
    "ANNOTATION_PREFIX",
    "API_VERSION",
    "APPWRAPPER_CONTROLLER_NAME",
    "APPWRAPPER_GVK",
    "APPWRAPPER_LABEL",
    "DELETION_ON_FAILURE_GRACE_PERIOD_ANNOTATION",
    "FAILURE_GRACE_PERIOD_ANNOTATION",
    "FINALIZER",
    "FORCEFUL_DELETION_GRACE_PERIOD_ANNOTATION",
    "GROUP",
    "KIND",
    "MAX_POD_SETS",
    "PLURAL",
    "RETRYABLE_EXIT_CODES_ANNOTATION",
    "RETRY_LIMIT_ANNOTATION",
    "RETRY_PAUSE_PERIOD_ANNOTATION",
    "SHORT_NAME",
    "SUCCESS_TTL_ANNOTATION",
    "TAS_POD_INDEX_LABEL_ANNOTATION",
    "TAS_SUB_GROUP_COUNT_ANNOTATION",
    "TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION",
    "TERMINAL_EXIT_CODES_ANNOTATION",
    "USERID_LABEL",
    "USER_LABEL",
    "VERSION",
    "WARMUP_GRACE_PERIOD_ANNOTATION",
    "AppWrapperCondition",
    "AppWrapperPhase",
    "load_crds",
    "load_samples",
]

GROUP: Final = "workload.codeflare.dev"
VERSION: Final = "v1beta2"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "AppWrapper"
PLURAL: Final = "appwrappers"
SHORT_NAME: Final = "aw"

APPWRAPPER_GVK: Final = GVK(GROUP, VERSION, KIND)

#: Label on every wrapped top-level object and every pod template: the AppWrapper's name.
#: Pods are counted by it. (Also Kueue's framework name for the integration.)
APPWRAPPER_LABEL: Final = "workload.codeflare.dev/appwrapper"
#: ``spec.managedBy`` value naming the framework controller (nil means the same).
APPWRAPPER_CONTROLLER_NAME: Final = "workload.codeflare.dev/appwrapper-controller"
#: Finalizer the framework controller holds while wrapped resources may exist.
FINALIZER: Final = "workload.codeflare.dev/finalizer"
#: Label set by the webhook: the creator's user name, sanitised. Immutable.
USER_LABEL: Final = "workload.codeflare.dev/user"
#: Label set by the webhook: the creator's UID, sanitised. Immutable.
USERID_LABEL: Final = "workload.codeflare.dev/userid"

#: Prefix of the behaviour annotations read from the AppWrapper's own metadata.
ANNOTATION_PREFIX: Final = "workload.codeflare.dev.appwrapper/"
ADMISSION_GRACE_PERIOD_ANNOTATION: Final = ANNOTATION_PREFIX + "admissionGracePeriodDuration"
WARMUP_GRACE_PERIOD_ANNOTATION: Final = ANNOTATION_PREFIX + "warmupGracePeriodDuration"
FAILURE_GRACE_PERIOD_ANNOTATION: Final = ANNOTATION_PREFIX + "failureGracePeriodDuration"
RETRY_PAUSE_PERIOD_ANNOTATION: Final = ANNOTATION_PREFIX + "retryPausePeriodDuration"
RETRY_LIMIT_ANNOTATION: Final = ANNOTATION_PREFIX + "retryLimit"
FORCEFUL_DELETION_GRACE_PERIOD_ANNOTATION: Final = (
    ANNOTATION_PREFIX + "forcefulDeletionGracePeriodDuration")
DELETION_ON_FAILURE_GRACE_PERIOD_ANNOTATION: Final = (
    ANNOTATION_PREFIX + "deletionOnFailureGracePeriodDuration")
SUCCESS_TTL_ANNOTATION: Final = ANNOTATION_PREFIX + "successTTLDuration"
TERMINAL_EXIT_CODES_ANNOTATION: Final = ANNOTATION_PREFIX + "terminalExitCodes"
RETRYABLE_EXIT_CODES_ANNOTATION: Final = ANNOTATION_PREFIX + "retryableExitCodes"

#: PodSet annotations written by inference, read by the Kueue adapter for TAS.
TAS_POD_INDEX_LABEL_ANNOTATION: Final = ANNOTATION_PREFIX + "tas-pod-index-label"
TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION: Final = ANNOTATION_PREFIX + "tas-sub-group-index-label"
TAS_SUB_GROUP_COUNT_ANNOTATION: Final = ANNOTATION_PREFIX + "tas-sub-group-count"

#: The most PodSets an AppWrapper may have: a Workload holds at most 8 (webhook limit).
MAX_POD_SETS: Final = 8


class AppWrapperPhase(enum.StrEnum):
    """``status.phase`` (upstream's ``AppWrapperPhase``); Succeeded and Failed are final."""

    EMPTY = ""
    SUSPENDED = "Suspended"
    RESUMING = "Resuming"
    RUNNING = "Running"
    RESETTING = "Resetting"
    SUSPENDING = "Suspending"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    TERMINATING = "Terminating"


class AppWrapperCondition(enum.StrEnum):
    """``status.conditions[].type`` of an AppWrapper (upstream's ``AppWrapperCondition``)."""

    #: True while the AppWrapper holds quota (Kueue's ``IsActive``).
    QUOTA_RESERVED = "QuotaReserved"
    #: True while wrapped resources may exist (also per component).
    RESOURCES_DEPLOYED = "ResourcesDeployed"
    #: True once enough pods run or succeeded (Kueue's ``PodsReady``).
    PODS_READY = "PodsReady"
    #: True once a fault was detected; its timestamp anchors the failure grace.
    UNHEALTHY = "Unhealthy"
    #: True while the controller deletes the wrapped resources.
    DELETING_RESOURCES = "DeletingResources"


def load_crds() -> list[Object]:
    """The AppWrapper CustomResourceDefinition shipped in ``crds/`` (fresh copies)."""
    return [doc for docs in load_yaml_folder(__package__, "crds").values() for doc in docs]


def load_samples() -> dict[str, list[Object]]:
    """The sample manifests shipped in ``samples/`` (file name → documents)."""
    return load_yaml_folder(__package__, "samples")
