"""DaemonJob (``api.practice.com/v1alpha1``): a Job on every eligible node, queued by Kueue
as one Workload.

A re-implementation of the original operator's DaemonJob on this project's runtime and
jobframework, with its bugs fixed: the controller (:mod:`.controller`), node eligibility
and pinning (:mod:`.nodes`), the pure planning (:mod:`.plan`), the webhook
(:mod:`.webhook`), the Kueue adapter (:class:`DaemonJobJob`), the CRD (:func:`load_crds`)
and wiring for a manager (:func:`setup`). See ``docs/daemonjob.md``.
"""

from .api import (
    API_VERSION,
    DAEMONJOB_GVK,
    DAEMONJOB_MANAGED_BY_CONTROLLER,
    DAEMONJOB_NAME_LABEL,
    GROUP,
    INJECTED_INFO_ANNOTATION,
    JOB_GVK,
    NODE_ANNOTATION,
    NODE_GVK,
    NODE_LABEL,
    NODES_ANNOTATION,
    POD_SET_NAME,
    VERSION,
    ConditionType,
    DaemonJobSpec,
    FailurePolicy,
    GlobalParams,
    NodePhase,
    State,
    child_job_name,
    load_crds,
    load_samples,
)
from .controller import DaemonJobReconciler, setup_controllers
from .job import DaemonJobJob
from .nodes import Eligibility, Ineligible, eligible_nodes, pin_to_node
from .rbac import RBAC
from .setup import (
    CALLBACKS,
    FRAMEWORK_NAME,
    DaemonJobKueueWebhook,
    DaemonJobSetup,
    probe_object,
    register,
    setup,
    setup_kueue_webhook,
    setup_webhooks,
)
from .webhook import DaemonJobWebhook, validate_daemonjob, validate_daemonjob_update

__all__ = [
    "API_VERSION",
    "CALLBACKS",
    "DAEMONJOB_GVK",
    "DAEMONJOB_MANAGED_BY_CONTROLLER",
    "DAEMONJOB_NAME_LABEL",
    "FRAMEWORK_NAME",
    "GROUP",
    "INJECTED_INFO_ANNOTATION",
    "JOB_GVK",
    "NODES_ANNOTATION",
    "NODE_ANNOTATION",
    "NODE_GVK",
    "NODE_LABEL",
    "POD_SET_NAME",
    "RBAC",
    "VERSION",
    "ConditionType",
    "DaemonJobJob",
    "DaemonJobKueueWebhook",
    "DaemonJobReconciler",
    "DaemonJobSetup",
    "DaemonJobSpec",
    "DaemonJobWebhook",
    "Eligibility",
    "FailurePolicy",
    "GlobalParams",
    "Ineligible",
    "NodePhase",
    "State",
    "child_job_name",
    "eligible_nodes",
    "load_crds",
    "load_samples",
    "pin_to_node",
    "probe_object",
    "register",
    "setup",
    "setup_controllers",
    "setup_kueue_webhook",
    "setup_webhooks",
    "validate_daemonjob",
    "validate_daemonjob_update",
]
