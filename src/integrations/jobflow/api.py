"""The ``api.practice.com/v1alpha1`` API: JobFlow and JobTemplate, as typed read-only views.

Objects stay plain JSON dicts (what the client and the cache hand around); the classes
here are frozen views parsed from them, so the controller, the webhook and the Kueue
adapter read the spec one way. Embedded Kubernetes types (``JobSpec``, ``EnvVar``,
``Volume``, ``VolumeMount``) stay dicts.

Also here: the names this integration writes on other objects (labels and annotations
on child Jobs), the ``status.state`` values kept from the original operator, the
``spec.managedBy`` value of the JobFlow controller (:data:`JOBFLOW_MANAGED_BY_CONTROLLER`,
see :func:`managed_elsewhere`), and the CRD manifests shipped in ``crds/``.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from typing import Any, Final

import attrs

from jobframework import managedby
from jobframework.runtime.objects import GVK, Object

from .._manifests import load_yaml_folder

GROUP: Final = "api.practice.com"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

JOBFLOW_GVK: Final = GVK(GROUP, VERSION, "JobFlow")
JOBTEMPLATE_GVK: Final = GVK(GROUP, VERSION, "JobTemplate")
JOB_GVK: Final = GVK("batch", "v1", "Job")

#: Child Job label: the owning JobFlow's name.
JOBFLOW_NAME_LABEL: Final = "jobflow.api.practice.com/name"
#: Child Job label: the flow (step) the Job runs.
FLOW_NAME_LABEL: Final = "jobflow.api.practice.com/flow"
#: Child Job annotation kept from the original operator: ``<namespace>.<template>``.
CREATED_BY_TEMPLATE_ANNOTATION: Final = "createByJobTemplate"
#: JobFlow annotation: the admission's pod-set infos (JSON), set by the Kueue adapter.
POD_SETS_INFO_ANNOTATION: Final = "jobflow.api.practice.com/pod-sets-info"
#: Child Job annotation: what was injected into its pod template and what it replaced.
INJECTED_INFO_ANNOTATION: Final = "jobflow.api.practice.com/injected-pod-set-info"

#: The most steps a JobFlow may have: a Workload holds at most 18 PodSets.
MAX_FLOWS: Final = 18

#: ``spec.managedBy`` value naming the JobFlow controller (absent means the same), as
#: ``kubernetes.io/job-controller`` names the Job controller and
#: ``workload.codeflare.dev/appwrapper-controller`` the AppWrapper one. Any other value
#: (MultiKueue's ``kueue.x-k8s.io/multikueue`` on a manager cluster) hands the JobFlow to
#: that controller: the DAG controller leaves it alone (:func:`managed_elsewhere`).
JOBFLOW_MANAGED_BY_CONTROLLER: Final = f"{GROUP}/jobflow-controller"
#: Longest ``spec.managedBy``, as batch/v1 Job's.
MAX_MANAGED_BY_LENGTH: Final = managedby.MAX_MANAGED_BY_LENGTH


class State(enum.StrEnum):
    """``status.state``, spelled as the original operator (``Succeed``, not Succeeded)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEED = "Succeed"
    FAILED = "Failed"
    TERMINATING = "Terminating"


class FlowPhase(enum.StrEnum):
    """``status.flows[].phase``: where one step is."""

    #: Waiting for its dependencies (or for the JobFlow to be admitted).
    PENDING = "Pending"
    #: Its dependencies completed but its JobTemplate does not exist.
    WAITING_FOR_TEMPLATE = "WaitingForTemplate"
    #: Its Job exists and has not finished.
    RUNNING = "Running"
    #: Its Job exists and is suspended (the JobFlow is suspended or was evicted).
    SUSPENDED = "Suspended"
    #: Its Job has the ``Complete`` condition.
    SUCCEEDED = "Succeeded"
    #: Its Job has the ``Failed`` condition.
    FAILED = "Failed"
    #: It will not run: another step failed.
    SKIPPED = "Skipped"
    #: It was running when another step failed; its Job was suspended.
    STOPPED = "Stopped"


class ConditionType(enum.StrEnum):
    """``status.conditions[].type`` of a JobFlow."""

    #: True once every step's Job completed.
    SUCCEEDED = "Succeeded"
    #: True once a step's Job failed (the message names the step and why).
    FAILED = "Failed"
    #: True while a step that should start waits for a missing JobTemplate.
    TEMPLATE_MISSING = "JobTemplateMissing"
    #: True while ``spec.suspend`` holds the flow.
    SUSPENDED = "Suspended"


def _str_list(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value or ())


def _dict_list(value: Any) -> tuple[dict[str, Any], ...]:
    return tuple(dict(v) for v in value or () if isinstance(v, Mapping))


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in (value or {}).items()} if isinstance(value, Mapping) else {}


@attrs.frozen
class GlobalParams:
    """``spec.globalParams``: merged into every child Job and pod template."""

    env: tuple[dict[str, Any], ...] = ()
    node_name: str = ""
    labels: dict[str, str] = attrs.field(factory=dict)
    annotations: dict[str, str] = attrs.field(factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> GlobalParams:
        """Parse ``spec.globalParams`` (absent fields are empty)."""
        d = data or {}
        return cls(env=_dict_list(d.get("env")), node_name=str(d.get("nodeName") or ""),
                   labels=_str_map(d.get("labels")), annotations=_str_map(d.get("annotations")))


@attrs.frozen
class Flow:
    """``spec.flows[]``: one step, run as one Job."""

    name: str
    dependencies: tuple[str, ...] = ()
    job_template: dict[str, Any] | None = None
    job_template_ref: str = ""
    share_volume_mounts: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Flow:
        """Parse one ``spec.flows[]`` entry."""
        tmpl = data.get("jobTemplate")
        return cls(
            name=str(data.get("name") or ""),
            dependencies=_str_list(data.get("dependencies")),
            job_template=copy.deepcopy(dict(tmpl)) if isinstance(tmpl, Mapping) else None,
            job_template_ref=str(data.get("jobTemplateRef") or ""),
            share_volume_mounts=_dict_list(data.get("shareVolumeMounts")),
        )


@attrs.frozen
class JobFlowSpec:
    """``spec`` of a JobFlow."""

    global_params: GlobalParams = attrs.field(factory=GlobalParams)
    flows: tuple[Flow, ...] = ()
    share_volumes: tuple[dict[str, Any], ...] = ()
    suspend: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> JobFlowSpec:
        """Parse ``spec`` (absent fields are empty; ``suspend`` defaults to false)."""
        d = data or {}
        return cls(
            global_params=GlobalParams.from_dict(d.get("globalParams")),
            flows=tuple(Flow.from_dict(f) for f in d.get("flows") or ()
                        if isinstance(f, Mapping)),
            share_volumes=_dict_list(d.get("shareVolumes")),
            suspend=bool(d.get("suspend") or False),
        )

    @classmethod
    def of(cls, jobflow: Mapping[str, Any]) -> JobFlowSpec:
        """The parsed spec of a JobFlow object."""
        return cls.from_dict(jobflow.get("spec"))

    def flow(self, name: str) -> Flow | None:
        """The flow called ``name`` (the first one, should names repeat)."""
        return next((f for f in self.flows if f.name == name), None)


def managed_by(jobflow: Mapping[str, Any]) -> str | None:
    """``spec.managedBy`` (None when absent)."""
    spec = jobflow.get("spec")
    value = spec.get("managedBy") if isinstance(spec, Mapping) else None
    return None if value is None else str(value)


def managed_elsewhere(jobflow: Mapping[str, Any]) -> bool:
    """Whether ``spec.managedBy`` names a controller other than the JobFlow controller
    (MultiKueue on a manager cluster): then the DAG controller creates no Job, writes no
    status and adds nothing to the JobFlow; the status is that controller's (MultiKueue
    copies the worker's)."""
    value = managed_by(jobflow)
    return value is not None and value != JOBFLOW_MANAGED_BY_CONTROLLER


def child_job_name(jobflow_name: str, flow_name: str) -> str:
    """The name of a flow's Job: ``<jobflow>-<flow>``, as the original operator."""
    return f"{jobflow_name}-{flow_name}"


def job_status_key(job_name: str, namespace: str) -> str:
    """The ``status.jobStatusList`` key: ``<job>/<namespace>`` (name first, as the original)."""
    return f"{job_name}/{namespace}"


def template_annotation_value(namespace: str, template: str) -> str:
    """The ``createByJobTemplate`` value: ``<namespace>.<template>``."""
    return f"{namespace}.{template}"


def parse_template_annotation(value: str) -> tuple[str, str] | None:
    """``(namespace, template)`` from a ``createByJobTemplate`` value.

    Split at the *first* dot: namespaces are DNS labels (no dots) while template names
    may contain dots (the original split on every dot and lost them).
    """
    ns, sep, name = value.partition(".")
    return (ns, name) if sep and ns and name else None


def template_job_spec(template: Mapping[str, Any]) -> dict[str, Any] | None:
    """``spec.jobTemplate`` of a JobTemplate object (a copy), or None when absent."""
    spec = (template.get("spec") or {}).get("jobTemplate")
    return copy.deepcopy(dict(spec)) if isinstance(spec, Mapping) else None


def load_crds() -> list[Object]:
    """The JobFlow and JobTemplate CRD manifests shipped in ``crds/``."""
    found = load_yaml_folder(__package__, "crds")
    return [*found["jobflows.yaml"], *found["jobtemplates.yaml"]]


def load_samples() -> dict[str, list[Object]]:
    """The original operator's sample manifests (file name → documents), as shipped."""
    return load_yaml_folder(__package__, "samples")
