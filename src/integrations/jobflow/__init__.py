"""JobFlow and JobTemplate (``api.practice.com/v1alpha1``): a DAG of Jobs queued by Kueue.

A re-implementation of the JobFlow operator on this project's runtime and jobframework:
the DAG controller and the JobTemplate controller (:mod:`.controller`), the validating
webhooks (:mod:`.webhook`), the Kueue adapter (:class:`JobFlowJob`), the CRDs
(:func:`load_crds`) and wiring for a manager (:func:`setup`). See ``docs/jobflow.md``.
"""

from .api import (
    API_VERSION,
    CREATED_BY_TEMPLATE_ANNOTATION,
    FLOW_NAME_LABEL,
    GROUP,
    JOB_GVK,
    JOBFLOW_GVK,
    JOBFLOW_MANAGED_BY_CONTROLLER,
    JOBFLOW_NAME_LABEL,
    JOBTEMPLATE_GVK,
    MAX_FLOWS,
    VERSION,
    ConditionType,
    Flow,
    FlowPhase,
    GlobalParams,
    JobFlowSpec,
    State,
    child_job_name,
    load_crds,
    load_samples,
)
from .controller import JobFlowReconciler, JobTemplateReconciler, setup_controllers
from .job import JobFlowJob
from .rbac import RBAC
from .setup import (
    CALLBACKS,
    FRAMEWORK_NAME,
    JobFlowKueueWebhook,
    JobFlowSetup,
    probe_object,
    register,
    setup,
    setup_kueue_webhook,
    setup_webhooks,
)
from .webhook import (
    JobFlowWebhook,
    JobTemplateWebhook,
    validate_jobflow,
    validate_jobflow_update,
    validate_jobtemplate,
)

__all__ = [
    "API_VERSION",
    "CALLBACKS",
    "CREATED_BY_TEMPLATE_ANNOTATION",
    "FLOW_NAME_LABEL",
    "FRAMEWORK_NAME",
    "GROUP",
    "JOBFLOW_GVK",
    "JOBFLOW_MANAGED_BY_CONTROLLER",
    "JOBFLOW_NAME_LABEL",
    "JOBTEMPLATE_GVK",
    "JOB_GVK",
    "MAX_FLOWS",
    "RBAC",
    "VERSION",
    "ConditionType",
    "Flow",
    "FlowPhase",
    "GlobalParams",
    "JobFlowJob",
    "JobFlowKueueWebhook",
    "JobFlowReconciler",
    "JobFlowSetup",
    "JobFlowSpec",
    "JobFlowWebhook",
    "JobTemplateReconciler",
    "JobTemplateWebhook",
    "State",
    "child_job_name",
    "load_crds",
    "load_samples",
    "probe_object",
    "register",
    "setup",
    "setup_controllers",
    "setup_kueue_webhook",
    "setup_webhooks",
    "validate_jobflow",
    "validate_jobflow_update",
    "validate_jobtemplate",
]
