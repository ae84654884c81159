"""The demo's DaemonJob and AppWrapper part: their shipped samples, queued in the demo's
LocalQueue, followed until each reaches the state it is meant to show.

- DaemonJob: the seed's ``daemonjob-example`` (one Job per eligible node, one Workload),
  expected ``Succeed``;
- AppWrapper: the samples of :mod:`integrations.appwrapper` — a wrapped Job and a wrapped
  Pod reach ``Succeeded``, a wrapped Deployment ``Running`` (its pods never finish), and
  the failing Job is reset ``retryLimit`` times before it ends ``Failed``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from jobframework.runtime.objects import GVK, Object

from .kinds import Tracked

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
DAEMONJOB_GVK: Final = GVK("api.practice.com", "v1alpha1", "DaemonJob")
APPWRAPPER_GVK: Final = GVK("workload.codeflare.dev", "v1beta2", "AppWrapper")
#: Wrapped kinds whose pods run until deleted: the AppWrapper stays ``Running``.
LONG_RUNNING_KINDS: Final = frozenset({"Deployment", "StatefulSet", "LeaderWorkerSet",
                                       "RayCluster"})
#: API groups whose kinds the local cluster serves (no other operator is installed there).
BUILTIN_API_VERSIONS: Final = frozenset({"v1", "apps/v1", "batch/v1"})
FAIL_ANNOTATION: Final = "kueue-jf.test/fail"
RETRY_LIMIT_ANNOTATION: Final = "workload.codeflare.dev.appwrapper/retryLimit"


def _status(obj: Object) -> Mapping[str, Any]:
    return obj.get("status") or {}


def _dj_state(obj: Object) -> str:
    return str(_status(obj).get("state") or "")


def _dj_detail(obj: Object) -> str:
    status = _status(obj)
    if not status.get("desired"):
        return ""
    parts = [f"{status.get('succeeded', 0)}/{status['desired']} node Jobs complete"]
    outside = sum(1 for n in status.get("nodes") or [] if n.get("phase") == "OutsideFlavor")
    if outside:
        parts.append(f"{outside} outside the admitted flavor")
    return ", ".join(parts)


def _aw_phase(obj: Object) -> str:
    return str(_status(obj).get("phase") or "")


def _aw_detail(obj: Object) -> str:
    status = _status(obj)
    parts = []
    if status.get("resettingCount"):
        parts.append(f"resettingCount {status['resettingCount']}")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Unhealthy" and cond.get("status") == "True":
            parts.append(f"Unhealthy: {cond.get('reason')}")
    return ", ".join(parts)


def _queued(obj: Object, namespace: str, queue: str) -> Object:
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta["namespace"] = namespace
    meta.setdefault("labels", {})[QUEUE_LABEL] = queue
    return out


def _wrapped_kinds(aw: Object) -> list[str]:
    return [str((c.get("template") or {}).get("kind") or "")
            for c in (aw.get("spec") or {}).get("components") or []]


def _meant_to_fail(file: str) -> bool:
    """The failing samples (their containers exit non-zero) are named so."""
    return "fail" in file.lower()


def _make_pods_fail(aw: Object) -> None:
    """kwok runs no containers: annotate the wrapped pod templates so that the local
    cluster's kwok fails the pods, as the sample's command would on a real node."""
    for component in (aw.get("spec") or {}).get("components") or []:
        template = component.get("template") or {}
        if template.get("kind") == "Pod":
            meta = template.setdefault("metadata", {})
        elif template.get("kind") == "Job":
            pod = template.setdefault("spec", {}).setdefault("template", {})
            meta = pod.setdefault("metadata", {})
        else:
            continue
        meta.setdefault("annotations", {})[FAIL_ANNOTATION] = "true"


def daemonjob_items(samples: Mapping[str, Sequence[Object]], namespace: str,
                    queue: str) -> list[Tracked]:
    """The DaemonJob samples, queued in ``queue``."""
    items = []
    seen: set[str] = set()
    for file, docs in sorted(samples.items()):
        for doc in docs:
            if doc.get("kind") != DAEMONJOB_GVK.kind or doc["metadata"]["name"] in seen:
                continue
            seen.add(doc["metadata"]["name"])
            items.append(Tracked(
                gvk=DAEMONJOB_GVK, obj=_queued(doc, namespace, queue), state=_dj_state,
                expected="Succeed", terminal=frozenset({"Succeed", "Failed"}),
                detail=_dj_detail,
                purpose=f"{file}: a Job on every eligible node, admitted as one Workload"))
    return items


def appwrapper_items(samples: Mapping[str, Sequence[Object]], namespace: str,
                     queue: str) -> tuple[list[Tracked], dict[str, str]]:
    """The AppWrapper samples the local cluster can run, queued in ``queue``, and the
    samples skipped (file → why)."""
    items: list[Tracked] = []
    skipped: dict[str, str] = {}
    for file, docs in sorted(samples.items()):
        for doc in docs:
            if doc.get("kind") != APPWRAPPER_GVK.kind:
                continue
            kinds = _wrapped_kinds(doc)
            unrunnable = sorted(
                str(c["template"].get("kind"))
                for c in doc["spec"]["components"]
                if (c.get("template") or {}).get("apiVersion") not in BUILTIN_API_VERSIONS)
            if unrunnable:
                skipped[file] = f"wraps {', '.join(unrunnable)} (no such operator here)"
                continue
            expected, purpose = "Succeeded", f"{file}: wraps {' + '.join(kinds)}"
            obj = _queued(doc, namespace, queue)
            if _meant_to_fail(file):
                _make_pods_fail(obj)
                limit = (doc["metadata"].get("annotations") or {}).get(
                    RETRY_LIMIT_ANNOTATION, "3")
                expected = "Failed"
                purpose += f"; its pods fail: reset {limit} times, then Failed"
            elif set(kinds) & LONG_RUNNING_KINDS:
                expected = "Running"
                purpose += "; runs until deleted"
            items.append(Tracked(
                gvk=APPWRAPPER_GVK, obj=obj, state=_aw_phase,
                expected=expected, terminal=frozenset({"Succeeded", "Failed"}),
                detail=_aw_detail, purpose=purpose))
    return items, skipped


#: Loads an integration's samples (file → documents).
SampleLoader = Callable[[], Mapping[str, Sequence[Object]]]
