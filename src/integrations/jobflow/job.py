"""JobFlow as a Kueue job: :class:`JobFlowJob`, the ``GenericJob`` the generic reconciler drives.

Kueue admits a JobFlow as *one* Workload with one PodSet per step (named after the
step, ``count`` = the step's pods at once, template = the step's pod template after the
global params), so quota is reserved for the DAG as a whole and no step waits for quota
halfway through.

The adapter never touches child Jobs itself; it speaks to the DAG controller through
the JobFlow:

- ``suspend()`` sets ``spec.suspend``: the controller creates no Job and suspends the
  running ones;
- ``run_with_pod_sets_info`` clears ``spec.suspend`` and stores the admission's pod-set
  infos in the ``jobflow.api.practice.com/pod-sets-info`` annotation; the controller
  injects each step's info into that step's Jobs, including the ones created later;
  with them it stores the JobSpecs of the JobTemplates the steps name, read once for
  this admission (:mod:`.admission`): the adapter's PodSets and the steps' Jobs come
  from that snapshot until Kueue stops the JobFlow;
- ``restore_pod_sets_info`` removes both annotations (the controller restores the
  suspended Jobs' templates);
- ``finished``, ``is_active`` and ``reclaimable_pods`` read ``status``, which the
  controller computes from the children; ``pods_ready`` reads the children.

While admitted, :meth:`pod_sets` reports the templates with the admission data merged,
as a batch/v1 Job's own template would be, so Kueue's equivalence check holds.

``JobWithManagedBy`` over ``spec.managedBy`` (:class:`~jobframework.managedby.SpecManagedBy`,
own controller :data:`~.api.JOBFLOW_MANAGED_BY_CONTROLLER`): Kueue's webhook defaults it
to MultiKueue for a JobFlow sent to a MultiKueue ClusterQueue. Such a JobFlow on the
manager cluster has no local Job; its ``status`` is the worker's, copied whole by Kueue's
generic MultiKueue adapter. Everything read from ``status`` (``finished``, ``is_active``,
``reclaimable_pods``) then follows the worker, and ``pods_ready`` reads ``status`` too
(:func:`pods_ready_from_status`) instead of the (absent) local Jobs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobframework.api.workload import PodSet, ReclaimablePod
from jobframework.childjobs import infos_to_json, mirrored_children
from jobframework.constants import DEFAULT_FEATURES, FeatureGates
from jobframework.field import ErrorList
from jobframework.interface import FinishedResult, GenericJob
from jobframework.managedby import SpecManagedBy
from jobframework.podset import (
    PodSetInfo,
    bad_pod_sets_info_len_error,
    bad_pod_sets_update_error,
    merge_into_template,
)
from jobframework.runtime.client import Client, Reader
from jobframework.runtime.errors import NotFound
from jobframework.runtime.objects import (
    GVK,
    Object,
    controller_of,
    name_of,
    namespace_of,
    uid_of,
)

from .admission import (
    ADMITTED_TEMPLATES_ANNOTATION,
    admitted_templates,
    admitted_templates_value,
    drop_admission,
)
from .api import (
    JOB_GVK,
    JOBFLOW_GVK,
    JOBFLOW_MANAGED_BY_CONTROLLER,
    JOBFLOW_NAME_LABEL,
    JOBTEMPLATE_GVK,
    POD_SETS_INFO_ANNOTATION,
    FlowPhase,
    JobFlowSpec,
    State,
    child_job_name,
    managed_elsewhere,
    template_job_spec,
)
from .controller import pod_sets_infos
from .dag import (
    flow_labels,
    info_fits,
    job_outcome,
    pod_count,
    render_job_spec,
)
from .webhook import validate_jobflow, validate_jobflow_update


class TemplateNotFoundError(LookupError):
    """A step's JobTemplate is missing, so the flow's PodSets cannot be computed yet."""


async def template_bases(reader: Reader, jobflow: Object, *, fresh: bool = False
                         ) -> dict[str, dict[str, Any]]:
    """flow name → the JobSpec its JobTemplate gives, for the flows naming one: the one
    snapshotted at admission (:data:`~.admission.ADMITTED_TEMPLATES_ANNOTATION`) while
    there is one, unless ``fresh``, else read now in the JobFlow's namespace.

    Raises :class:`TemplateNotFoundError` naming the first missing template.
    """
    snapshot = {} if fresh else admitted_templates(jobflow)
    out: dict[str, dict[str, Any]] = {}
    for flow in JobFlowSpec.of(jobflow).flows:
        if not flow.job_template_ref or flow.name in out:
            continue
        if flow.name in snapshot:
            out[flow.name] = snapshot[flow.name]
            continue
        try:
            tmpl = await reader.get(JOBTEMPLATE_GVK, flow.job_template_ref,
                                    namespace=namespace_of(jobflow))
        except NotFound as err:
            raise TemplateNotFoundError(
                f"flow {flow.name}: JobTemplate {flow.job_template_ref!r} not found") from err
        out[flow.name] = template_job_spec(tmpl) or {}
    return out


async def step_specs(reader: Reader, jobflow: Object, *, fresh: bool = False
                     ) -> dict[str, dict[str, Any]]:
    """flow name → its rendered JobSpec (JobTemplates as :func:`template_bases` gives
    them: the admission's snapshot while there is one, unless ``fresh``).

    Raises :class:`TemplateNotFoundError` naming the first missing template.
    """
    spec = JobFlowSpec.of(jobflow)
    bases = await template_bases(reader, jobflow, fresh=fresh)
    out: dict[str, dict[str, Any]] = {}
    for flow in spec.flows:
        base = bases.get(flow.name) if flow.job_template_ref else flow.job_template
        js = render_job_spec(spec, flow, base or {})
        meta = js["template"]["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), **flow_labels(name_of(jobflow), flow.name)}
        out.setdefault(flow.name, js)
    return out


def _count(value: Any) -> int:
    """A pod count read from a (possibly foreign) status: 0 unless a non-negative int."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def pods_ready_from_status(jobflow: Mapping[str, Any], specs: Mapping[str, Any]) -> bool:
    """``pods_ready`` from ``status`` alone (``specs``: flow name → its JobSpec): a step has
    a Job in ``jobStatusList`` and every ``Running`` step's Job has all its pods ready or
    succeeded. For a JobFlow run elsewhere (MultiKueue), whose Jobs are not local.

    Only names are matched (``jobStatusList`` keys ``<job>/<namespace>`` by their Job
    name), so a status copied from another cluster is read as is; entries of steps the
    spec does not have are ignored.
    """
    children = mirrored_children(jobflow, "flows")
    for entry, job_status in children:
        js = specs.get(str(entry.get("name") or ""))
        if (entry.get("phase") == FlowPhase.RUNNING.value and js is not None
                and _count(job_status.get("ready")) + _count(job_status.get("succeeded"))
                < pod_count(js)):
            return False
    return bool(children)


class JobFlowJob(SpecManagedBy, GenericJob):
    """A JobFlow object under Kueue (see the module docstring).

    Implements ``JobWithManagedBy`` too (MultiKueue may take the JobFlow over).
    """

    own_controller_name = JOBFLOW_MANAGED_BY_CONTROLLER

    def __init__(self, obj: Object | None = None, *,
                 features: FeatureGates = DEFAULT_FEATURES) -> None:
        self.obj: Object = obj if obj is not None else {
            "apiVersion": JOBFLOW_GVK.api_version, "kind": JOBFLOW_GVK.kind,
            "metadata": {}, "spec": {}}
        self.features = features

    @property
    def spec(self) -> dict[str, Any]:
        """``spec`` (created when missing)."""
        spec = self.obj.get("spec")
        if not isinstance(spec, dict):
            spec = self.obj["spec"] = {}
        return spec

    # -- GenericJob --

    def object(self) -> Object:
        """The JobFlow dict."""
        return self.obj

    def gvk(self) -> GVK:
        """``api.practice.com/v1alpha1, Kind=JobFlow``."""
        return JOBFLOW_GVK

    def is_suspended(self) -> bool:
        """``spec.suspend``."""
        return bool((self.obj.get("spec") or {}).get("suspend"))

    def suspend(self) -> None:
        """Set ``spec.suspend``."""
        self.obj.setdefault("spec", {})["suspend"] = True

    async def run_with_pod_sets_info(
        self, client: Client, pod_sets_info: Sequence[PodSetInfo]
    ) -> None:
        """Store the infos (one per step, by name) and unsuspend.

        Raises a permanent pod-set error when the count differs from the steps, a name
        is not a step, or an info conflicts with a step's template.
        """
        flows = JobFlowSpec.of(self.obj).flows
        if len(pod_sets_info) != len(flows):
            raise bad_pod_sets_info_len_error(len(flows), len(pod_sets_info))
        names = {f.name for f in flows}
        # The templates are read once, here: the steps of this admission run them.
        bases = await template_bases(client, self.obj, fresh=True)
        specs = await step_specs(client, self.obj, fresh=True)
        for info in pod_sets_info:
            if info.name not in names:
                raise bad_pod_sets_update_error("podSet", f"no flow named {info.name!r}")
            info_fits(specs[info.name]["template"], info)
        annotations = self.obj.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[POD_SETS_INFO_ANNOTATION] = infos_to_json(pod_sets_info)
        if bases:
            annotations[ADMITTED_TEMPLATES_ANNOTATION] = admitted_templates_value(bases)
        else:
            annotations.pop(ADMITTED_TEMPLATES_ANNOTATION, None)
        self.obj.setdefault("spec", {})["suspend"] = False

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        """Drop the stored infos and the templates read at admission (the next admission
        reads them again; the JobFlow's own templates were never changed)."""
        return drop_admission(self.obj)

    def finished(self) -> FinishedResult:
        """Finished when the state is ``Succeed`` or ``Failed`` (naming the failed step)."""
        status = self.obj.get("status") or {}
        state = status.get("state")
        if state == State.SUCCEED:
            return FinishedResult(f"all {status.get('totalFlows', 0)} flows completed",
                                  True, True)
        if state == State.FAILED:
            message = f"flow {status.get('failedFlow', '')} failed"
            for c in status.get("conditions") or []:
                if c.get("type") == "Failed" and c.get("message"):
                    message = str(c["message"])
            return FinishedResult(message, False, True)
        return FinishedResult("", False, False)

    async def pod_sets(self, client: Client) -> list[PodSet]:
        """One PodSet per step, in flow order (with admission data while running)."""
        specs = await step_specs(client, self.obj)
        infos = {} if self.is_suspended() else pod_sets_infos(self.obj)
        out: list[PodSet] = []
        for flow in JobFlowSpec.of(self.obj).flows:
            js = specs[flow.name]
            template = js["template"]
            info = infos.get(flow.name)
            if info is not None:
                merge_into_template(template, info)
            out.append(PodSet(name=flow.name, count=pod_count(js), template=template))
        return out

    def is_active(self) -> bool:
        """Whether any child Job has active pods (from ``status.jobStatusList``)."""
        statuses = (self.obj.get("status") or {}).get("jobStatusList") or {}
        return any(_count(s.get("active")) > 0 for s in statuses.values()
                   if isinstance(s, Mapping))

    async def pods_ready(self, client: Client) -> bool:
        """Whether a step has started and every running step's pods are ready or succeeded
        (from the children; from ``status`` when the JobFlow is run elsewhere)."""
        specs = await step_specs(client, self.obj)
        if managed_elsewhere(self.obj):
            return pods_ready_from_status(self.obj, specs)
        jobs = await client.list(JOB_GVK, namespace=namespace_of(self.obj),
                                 label_selector=f"{JOBFLOW_NAME_LABEL}={name_of(self.obj)}")
        uid = uid_of(self.obj)
        by_name = {name_of(j): j for j in jobs.items
                   if (controller_of(j) or {}).get("uid") == uid}
        started = False
        for flow_name, js in specs.items():
            job = by_name.get(child_job_name(name_of(self.obj), flow_name))
            if job is None:
                continue
            started = True
            if job_outcome(job).phase != FlowPhase.RUNNING:
                continue
            st = job.get("status") or {}
            if int(st.get("ready") or 0) + int(st.get("succeeded") or 0) < pod_count(js):
                return False
        # Between steps (one completed, the next not created yet) nothing waits for pods.
        return started

    # -- optional capabilities --

    async def reclaimable_pods(self, client: Client) -> list[ReclaimablePod]:
        """Completed steps give their whole PodSet back, while the rest of the DAG runs."""
        status = self.obj.get("status") or {}
        done = [f.get("name") for f in status.get("flows") or []
                if f.get("phase") == FlowPhase.SUCCEEDED.value]
        if not done:
            return []
        specs = await step_specs(client, self.obj)
        return [ReclaimablePod(name=str(n), count=pod_count(specs[str(n)]))
                for n in done if n in specs]

    def validate_on_create(self) -> ErrorList:
        """The JobFlow webhook's create rules."""
        return validate_jobflow(self.obj)

    def validate_on_update(self, old_job: GenericJob) -> ErrorList:
        """The JobFlow webhook's update rules."""
        return validate_jobflow_update(old_job.object(), self.obj)

    # JobWithManagedBy comes from SpecManagedBy (spec.managedBy, own controller above).
