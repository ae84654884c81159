"""AppWrapper as a Kueue job: :class:`AppWrapperJob`, the ``GenericJob`` the generic
reconciler drives (Kueue's ``pkg/controller/jobs/appwrapper``).

Kueue admits an AppWrapper as *one* Workload with one PodSet per pod template of its
components, named ``<aw-name>-<i>`` (``i`` counts across components, in order). The
adapter only speaks to the framework controller through the AppWrapper object:

- ``suspend()`` sets ``spec.suspend``: the controller deletes the wrapped resources;
- ``run_with_pod_sets_info`` stores the admission, one ``AppWrapperPodSetInfo`` per
  PodSet, in ``spec.components[c].podSetInfos`` and clears ``spec.suspend``; the
  controller merges each info into its pod template when it creates the component;
- ``restore_pod_sets_info`` drops every ``podSetInfos``;
- ``is_active``, ``pods_ready`` and ``finished`` read the conditions and phase the
  controller writes: ``QuotaReserved`` stays True until the resources are gone, so
  Kueue keeps the quota while they are deleted, and a Failed AppWrapper finishes its
  Workload only once ``ResourcesDeployed`` is False.

The PodSets are the *effective* ones: frozen in ``status.componentStatus`` once the
controller initialised it, else declared, else inferred (:mod:`.podsets`). Their
templates are :func:`~.podsets.get_pod_template_spec`'s canonical view, which does not
change when admission data is injected, so the Workload stays equivalent while admitted.

Under MultiKueue, Kueue mirrors AppWrappers onto the worker clusters with its generic
adapter for external frameworks (``multiKueue.externalFrameworks``), not with an adapter
of this package: see ``docs/appwrapper.md``.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from jobframework.api.conditions import is_condition_true
from jobframework.api.workload import PodSet
from jobframework.constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from jobframework.interface import FinishedResult, GenericJob
from jobframework.managedby import SpecManagedBy
from jobframework.podset import InvalidPodsetInfoError, PodSetInfo, pod_set_topology_request
from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK, Object, name_of

from .api import (
    APPWRAPPER_CONTROLLER_NAME,
    APPWRAPPER_GVK,
    TAS_POD_INDEX_LABEL_ANNOTATION,
    TAS_SUB_GROUP_COUNT_ANNOTATION,
    TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION,
    AppWrapperCondition,
    AppWrapperPhase,
)
from .podsets import (
    PathError,
    PodSetCountError,
    TemplateError,
    clear_pod_set_infos,
    effective_pod_sets,
    get_pod_template_spec,
    replicas,
    set_pod_set_infos,
)

log = logging.getLogger(__name__)

__all__ = [
    "MSG_FAILED",
    "MSG_STILL_DELETING",
    "MSG_SUCCEEDED",
    "AppWrapperJob",
    "pod_set_info_to_dict",
]

MSG_SUCCEEDED: Final = "AppWrapper finished successfully"
MSG_STILL_DELETING: Final = "Still deleting resources for failed AppWrapper"
MSG_FAILED: Final = "AppWrapper failed"


def pod_set_info_to_dict(info: PodSetInfo) -> Object:
    """Kueue's PodSetInfo as an ``AppWrapperPodSetInfo`` (empty fields omitted, as Go's
    ``omitempty``); name, count and affinity are not carried."""
    out: Object = {}
    for key, value in (("annotations", info.annotations), ("labels", info.labels),
                       ("nodeSelector", info.node_selector)):
        if value:
            out[key] = dict(value)
    if info.tolerations:
        out["tolerations"] = [copy.deepcopy(dict(t)) for t in info.tolerations]
    if info.scheduling_gates:
        out["schedulingGates"] = [{"name": g.get("name", "")} for g in info.scheduling_gates]
    return out


def _atoi(text: str) -> int | None:
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not all("0" <= ch <= "9" for ch in body):
        return None
    value = int(body)
    return -value if text[:1] == "-" else value


class AppWrapperJob(SpecManagedBy, GenericJob):
    """An AppWrapper dict under Kueue (see the module docstring).

    Implements ``JobWithManagedBy`` too (MultiKueue may take the AppWrapper over).
    """

    own_controller_name = APPWRAPPER_CONTROLLER_NAME

    def __init__(self, obj: Object | None = None, *,
                 features: FeatureGates = DEFAULT_FEATURES) -> None:
        self.obj: Object = obj if obj is not None else {
            "apiVersion": APPWRAPPER_GVK.api_version, "kind": APPWRAPPER_GVK.kind,
            "metadata": {}, "spec": {}}
        self.features = features

    # -- accessors -----------------------------------------------------------------------------

    @property
    def spec(self) -> dict[str, Any]:
        """``spec`` (created when missing)."""
        spec = self.obj.get("spec")
        if not isinstance(spec, dict):
            spec = self.obj["spec"] = {}
        return spec

    def _conditions(self) -> list[Any]:
        status = self.obj.get("status")
        conditions = status.get("conditions") if isinstance(status, Mapping) else None
        return conditions if isinstance(conditions, list) else []

    def _phase(self) -> str:
        status = self.obj.get("status")
        return str(status.get("phase") or "") if isinstance(status, Mapping) else ""

    # -- GenericJob ------------------------------------------------------------------------

    def object(self) -> Object:
        """The AppWrapper dict."""
        return self.obj

    def gvk(self) -> GVK:
        """``workload.codeflare.dev/v1beta2, Kind=AppWrapper``."""
        return APPWRAPPER_GVK

    def is_suspended(self) -> bool:
        """``spec.suspend``."""
        return bool(self.spec.get("suspend"))

    def suspend(self) -> None:
        """Set ``spec.suspend``."""
        self.spec["suspend"] = True

    def is_active(self) -> bool:
        """``QuotaReserved`` is True: until the controller has deleted everything."""
        return is_condition_true(self._conditions(), AppWrapperCondition.QUOTA_RESERVED)

    async def pods_ready(self, client: Client) -> bool:
        """``PodsReady`` is True."""
        del client
        return is_condition_true(self._conditions(), AppWrapperCondition.PODS_READY)

    def finished(self) -> FinishedResult:
        """Succeeded finishes; Failed finishes once ``ResourcesDeployed`` is not True."""
        phase = self._phase()
        if phase == AppWrapperPhase.SUCCEEDED:
            return FinishedResult(MSG_SUCCEEDED, True, True)
        if phase == AppWrapperPhase.FAILED:
            if is_condition_true(self._conditions(), AppWrapperCondition.RESOURCES_DEPLOYED):
                return FinishedResult(MSG_STILL_DELETING, False, False)
            return FinishedResult(MSG_FAILED, False, True)
        return FinishedResult("", False, False)

    async def pod_sets(self, client: Client) -> list[PodSet]:
        """One PodSet per effective pod template, named ``<aw-name>-<i>``.

        A template that does not parse is skipped, as upstream (the webhook rejects
        such AppWrappers). Raises the inference error when a component's PodSets cannot
        be determined, and ``TopologyRequestError`` for bad TAS annotations.
        """
        del client
        components = self.spec.get("components")
        components = components if isinstance(components, list) else []
        out: list[PodSet] = []
        for c_idx, pod_sets in enumerate(effective_pod_sets(self.obj)):
            if not pod_sets:
                continue
            template = (components[c_idx] or {}).get("template") if c_idx < len(
                components) and isinstance(components[c_idx], Mapping) else None
            if not isinstance(template, Mapping):
                continue
            for ps in pod_sets:
                try:
                    pod_template = get_pod_template_spec(template, str(ps.get("path") or ""))
                except (PathError, TemplateError):
                    continue
                out.append(self._pod_set(len(out), ps, pod_template))
        return out

    def _pod_set(self, index: int, ps: Mapping[str, Any], template: Object) -> PodSet:
        fields: dict[str, Any] = {"name": f"{name_of(self.obj)}-{index}".lower(),
                                  "template": template, "count": replicas(ps)}
        if self.features.enabled(FeatureGate.TOPOLOGY_AWARE_SCHEDULING):
            annotations = ps.get("annotations")
            annotations = annotations if isinstance(annotations, Mapping) else {}
            count: int | None = None
            raw_count = annotations.get(TAS_SUB_GROUP_COUNT_ANNOTATION)
            if raw_count is not None:
                count = _atoi(str(raw_count))
                if count is None:
                    log.error("Malformed annotation ignored: %s=%r",
                              TAS_SUB_GROUP_COUNT_ANNOTATION, raw_count)
            request = pod_set_topology_request(
                template.get("metadata") or {},
                pod_index_label=_str_or_none(annotations.get(TAS_POD_INDEX_LABEL_ANNOTATION)),
                sub_group_index_label=_str_or_none(
                    annotations.get(TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION)),
                sub_group_count=count, features=self.features)
            if request is not None:
                fields["topology_request"] = request
        return PodSet(**fields)

    async def run_with_pod_sets_info(
        self, client: Client, pod_sets_info: Sequence[PodSetInfo]
    ) -> None:
        """Store one ``podSetInfos`` entry per PodSet, in order, and unsuspend.

        Raises :class:`~jobframework.podset.InvalidPodsetInfoError` when the number of
        infos differs from the number of PodSets.
        """
        del client
        try:
            set_pod_set_infos(self.obj, [pod_set_info_to_dict(i) for i in pod_sets_info])
        except PodSetCountError as err:
            raise InvalidPodsetInfoError(f"{InvalidPodsetInfoError.base}: {err}") from err
        self.spec["suspend"] = False

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        """Drop every component's ``podSetInfos`` (the templates were never changed).

        Always True, as upstream: the reconciler then always writes the object.
        """
        del pod_sets_info
        return clear_pod_set_infos(self.obj)

    # JobWithManagedBy comes from SpecManagedBy (spec.managedBy, own controller above).


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
