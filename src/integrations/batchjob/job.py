"""``batch/v1`` Job as a :class:`~jobframework.interface.GenericJob` (Kueue's canonical
integration, ``pkg/controller/jobs/job/job_controller.go``).

One pod set, ``main``, of ``min(parallelism, completions)`` pods. Partial admission via
the ``kueue.x-k8s.io/job-min-parallelism`` annotation (the admitted count becomes
``parallelism``, and ``completions`` too when ``kueue.x-k8s.io/job-completions-equal-
parallelism`` is a Go-true value such as ``"true"``). Stopping is custom: suspend with a
``kueue.x-k8s.io/stopping`` marker, clear ``status.startTime`` so the templates can change,
restore the templates, drop the marker — three writes, each idempotent, so an interrupted
stop resumes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from jobframework import constants as c
from jobframework.api import PodSet, ReclaimablePod
from jobframework.constants import DEFAULT_FEATURES, FeatureGate, FeatureGates
from jobframework.interface import FinishedResult, GenericJob, StopError, StopReason
from jobframework.managedby import SpecManagedBy
from jobframework.podset import (
    PodSetInfo,
    TopologyRequestError,
    bad_pod_sets_info_len_error,
    go_parse_bool,
    merge_into_template,
    pod_set_topology_request,
    restore_pod_spec,
)
from jobframework.reconciler import patch_object
from jobframework.runtime import errors
from jobframework.runtime.client import Client
from jobframework.runtime.objects import GVK, Object, annotations_of, json_copy

JOB_GVK = GVK("batch", "v1", "Job")
#: ``batch/job``: the framework name Kueue registers the integration under.
FRAMEWORK_NAME = "batch/job"
#: The pod index label TAS uses for Indexed Jobs.
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_CONTROLLER_MANAGED_BY = "kubernetes.io/job-controller"

#: Labels the Job controller puts on pod templates (kept across a restore).
MANAGED_LABELS = ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid",
                  JOB_NAME_LABEL)
#: Labels dropped from the pod set template (they change per Job, not per shape).
_CLEANED_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name")


def _atoi(text: str | None) -> int | None:
    if text is None or not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    return int(text)


def parse_indexes(text: str, completions: int) -> set[int]:
    """Indexes in ``[0, completions)`` of a ``completedIndexes``-style string (``1,3-5``);
    malformed parts are skipped."""
    out: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        lo_s, sep, hi_s = part.partition("-")
        lo = _atoi(lo_s)
        hi = _atoi(hi_s) if sep else lo
        if lo is None or hi is None or lo < 0:
            continue
        out.update(i for i in range(lo, min(hi, completions - 1) + 1))
    return out


def terminal_indexes_count(completed: str, failed: str, completions: int) -> int:
    """How many indexes below ``completions`` are completed or failed."""
    return len(parse_indexes(completed, completions) | parse_indexes(failed, completions))


class BatchJob(SpecManagedBy, GenericJob):
    """A ``batch/v1`` Job dict seen through :class:`GenericJob`.

    Also implements ``JobWithReclaimablePods``, ``JobWithCustomStop``, ``JobWithManagedBy``
    and ``JobWithPodLabelSelector``.
    """

    own_controller_name = JOB_CONTROLLER_MANAGED_BY

    def __init__(self, obj: Object | None = None, *,
                 features: FeatureGates = DEFAULT_FEATURES) -> None:
        self._obj: Object = obj if obj is not None else {}
        self.features = features

    # -- accessors ------------------------------------------------------------------------

    def object(self) -> Object:
        """The Job dict."""
        return self._obj

    def gvk(self) -> GVK:
        """``batch/v1, Kind=Job``."""
        return JOB_GVK

    @property
    def spec(self) -> dict[str, Any]:
        """``spec`` (created if absent)."""
        spec: dict[str, Any] = self._obj.setdefault("spec", {})
        return spec

    @property
    def status(self) -> dict[str, Any]:
        """``status`` (empty if absent; not stored)."""
        return self._obj.get("status") or {}

    def _template(self) -> dict[str, Any]:
        template: dict[str, Any] = self.spec.setdefault("template", {})
        return template

    def parallelism(self) -> int:
        """``spec.parallelism`` (default 1)."""
        p = self.spec.get("parallelism")
        return 1 if p is None else int(p)

    def pods_count(self) -> int:
        """``min(parallelism, completions)``; completions default to parallelism."""
        p = self.parallelism()
        completions = self.spec.get("completions")
        return p if completions is None else min(p, int(completions))

    def min_pods_count(self) -> int | None:
        """The ``kueue.x-k8s.io/job-min-parallelism`` annotation as an int, if any."""
        return _atoi(annotations_of(self._obj).get(c.JOB_MIN_PARALLELISM_ANNOTATION))

    def sync_completion_with_parallelism(self) -> bool:
        """``kueue.x-k8s.io/job-completions-equal-parallelism`` read with Go's
        ``strconv.ParseBool`` (``1``, ``t``, ``TRUE``, ``True``... are true); a value that
        does not parse counts as false, as in Kueue (the webhook rejects it)."""
        text = annotations_of(self._obj).get(c.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
        if text is None:
            return False
        try:
            return go_parse_bool(text)
        except TopologyRequestError:
            return False

    # -- GenericJob ------------------------------------------------------------------------

    def is_suspended(self) -> bool:
        """``spec.suspend`` and not in the middle of a stop."""
        return (self.spec.get("suspend") is True
                and annotations_of(self._obj).get(c.STOPPING_ANNOTATION) != "true")

    def suspend(self) -> None:
        """``spec.suspend = true``."""
        self.spec["suspend"] = True

    def is_active(self) -> bool:
        """Some pods are active."""
        return bool(self.status.get("active"))

    async def pod_sets(self, client: Client) -> list[PodSet]:
        """The ``main`` pod set (job-controller labels removed from the template)."""
        del client
        # The Workload stores the template as JSON: copied as JSON.
        template = json_copy(self._template())
        labels = (template.get("metadata") or {}).get("labels")
        if labels:
            for key in _CLEANED_LABELS:
                labels.pop(key, None)
        fields: dict[str, Any] = {"name": c.DEFAULT_PODSET_NAME, "template": template,
                                  "count": self.pods_count()}
        min_count = self.min_pods_count()
        if min_count is not None:
            fields["min_count"] = min_count
        if self.features.enabled(FeatureGate.TOPOLOGY_AWARE_SCHEDULING):
            request = pod_set_topology_request(
                template.get("metadata") or {}, pod_index_label=JOB_COMPLETION_INDEX_ANNOTATION,
                features=self.features)
            if request is not None:
                fields["topology_request"] = request
        return [PodSet(**fields)]

    async def run_with_pod_sets_info(
        self, client: Client, pod_sets_info: Sequence[PodSetInfo]
    ) -> None:
        """Unsuspend and inject the admission (parallelism too under partial admission)."""
        del client
        self.spec["suspend"] = False
        if len(pod_sets_info) != 1:
            raise bad_pod_sets_info_len_error(1, len(pod_sets_info))
        info = pod_sets_info[0]
        if self.min_pods_count() is not None:
            self.spec["parallelism"] = info.count
            if self.sync_completion_with_parallelism():
                self.spec["completions"] = info.count
        try:
            merge_into_template(self._template(), info, features=self.features)
        finally:
            self._drop_empty_template_metadata()

    def _drop_empty_template_metadata(self) -> None:
        # The podset helpers create ``metadata`` on demand; an empty one is no change.
        template = self._template()
        if template.get("metadata") == {}:
            del template["metadata"]

    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        """Put back the templates (and parallelism) the Workload stored."""
        if not pod_sets_info:
            return False
        changed = False
        info = copy.deepcopy(pod_sets_info[0])
        if self.min_pods_count() is not None and self.spec.get("parallelism", 0) != info.count:
            changed = True
            self.spec["parallelism"] = info.count
            if self.sync_completion_with_parallelism():
                self.spec["completions"] = info.count
        labels = (self._template().get("metadata") or {}).get("labels") or {}
        for key in MANAGED_LABELS:
            if key in labels:
                info.add_or_update_label(key, labels[key])
        changed = restore_pod_spec(self._template(), info) or changed
        self._drop_empty_template_metadata()
        return changed

    def finished(self) -> FinishedResult:
        """The first ``Complete`` or ``Failed`` condition that is True."""
        for cond in self.status.get("conditions") or []:
            if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
                return FinishedResult(cond.get("message", ""), cond.get("type") != "Failed",
                                      True)
        return FinishedResult("", True, False)

    async def pods_ready(self, client: Client) -> bool:
        """``succeeded + ready + uncounted succeeded >= pods count``."""
        del client
        st = self.status
        uncounted = len((st.get("uncountedTerminatedPods") or {}).get("succeeded") or [])
        total = int(st.get("succeeded") or 0) + int(st.get("ready") or 0) + uncounted
        return total >= self.pods_count()

    # -- optional capabilities -------------------------------------------------------------

    async def reclaimable_pods(self, client: Client) -> list[ReclaimablePod]:
        """Pods that will not run again: ``parallelism - remaining`` once fewer than
        ``parallelism`` completions remain."""
        del client
        parallelism = self.parallelism()
        completions = self.spec.get("completions")
        completions = parallelism if completions is None else int(completions)
        if self.spec.get("completionMode") == "Indexed":
            terminal = terminal_indexes_count(self.status.get("completedIndexes") or "",
                                              self.status.get("failedIndexes") or "",
                                              completions)
        else:
            terminal = int(self.status.get("succeeded") or 0)
        remaining = max(completions - terminal, 0)
        if parallelism <= 1 or terminal <= 0 or remaining >= parallelism:
            return []
        return [ReclaimablePod(name=c.DEFAULT_PODSET_NAME, count=parallelism - remaining)]

    async def stop(
        self, client: Client, pod_sets_info: Sequence[PodSetInfo], stop_reason: StopReason,
        event_msg: str,
    ) -> bool:
        """Suspend (marked ``stopping``), reset ``startTime``, restore; returns whether
        this call suspended the job.

        A failed write raises the client's error, of its own class, with Go's context in
        front (``suspend: ``, ``reset status: ``, ``restore info: ``); a failed reset
        after this call suspended the job raises it inside a :class:`StopError` with
        ``stopped_now``, so the ``Stopped`` event is still recorded (Go's ``Stop`` returns
        ``true`` with that error, and ``false`` with the restore's).
        """
        del stop_reason, event_msg
        obj = self._obj
        stopped_now = False
        if not self.is_suspended():
            def suspend() -> None:
                self.suspend()
                obj.setdefault("metadata", {}).setdefault("annotations", {})[
                    c.STOPPING_ANNOTATION] = "true"
            try:
                await patch_object(client, obj, suspend)
            except errors.ApiError as err:
                raise errors.wrap("suspend", err) from err
            stopped_now = True
        if self.status.get("startTime") is not None:
            def reset() -> None:
                obj["status"].pop("startTime", None)
            try:
                await patch_object(client, obj, reset, subresource="status")
            except errors.ApiError as err:
                wrapped = errors.wrap("reset status", err)
                if stopped_now:
                    raise StopError(wrapped, stopped_now=True) from err
                raise wrapped from err

        def restore() -> None:
            self.restore_pod_sets_info(pod_sets_info)
            annotations = (obj.get("metadata") or {}).get("annotations")
            if annotations is not None:
                annotations.pop(c.STOPPING_ANNOTATION, None)
                if not annotations:
                    del obj["metadata"]["annotations"]
        try:
            await patch_object(client, obj, restore)
        except errors.ApiError as err:
            raise errors.wrap("restore info", err) from err
        return stopped_now


    def pod_label_selector(self) -> str:
        """``batch.kubernetes.io/job-name=<name>``."""
        name = (self._obj.get("metadata") or {}).get("name", "")
        return f"{JOB_NAME_LABEL}={name}"
