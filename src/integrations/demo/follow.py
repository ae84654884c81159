"""Live progress of JobFlows under Kueue, as lines a person can follow.

:func:`take_snapshot` reads what matters (the JobFlows, their Workloads, the
ClusterQueues admitting them); :class:`Follower` compares each snapshot with the
previous one and says what changed, one line per change: Workload created, admitted to
a ClusterQueue with its flavors, a step started or finished, reclaimable pods, the
ClusterQueue's quota in use, eviction, the JobFlow's state. :func:`final_table` renders
the end states.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from integrations.jobflow import JOBFLOW_GVK
from jobframework.runtime.client import Client
from jobframework.runtime.errors import NotFound
from jobframework.runtime.objects import GVK, Object
from jobframework.validation import quantity_value
from jobframework.workload import WORKLOAD_GVK

CLUSTER_QUEUE_GVK: Final = GVK("kueue.x-k8s.io", "v1beta2", "ClusterQueue")
#: Resources shown in quota lines, in this order (others follow alphabetically).
SHOWN_RESOURCES: Final = ("cpu", "memory")


@attrs.frozen
class Snapshot:
    """JobFlows by name, their Workloads by JobFlow name, ClusterQueues by name."""

    jobflows: Mapping[str, Object]
    workloads: Mapping[str, Object]
    cluster_queues: Mapping[str, Object]


def _owner_jobflow(workload: Object) -> str | None:
    for ref in (workload.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == JOBFLOW_GVK.kind and ref.get("controller"):
            return str(ref.get("name"))
    return None


async def take_snapshot(client: Client, namespace: str, names: Iterable[str],
                        cluster_queues: Iterable[str] = ()) -> Snapshot:
    """Read the JobFlows called ``names`` in ``namespace``, their Workloads and the
    ClusterQueues that admitted them (plus ``cluster_queues``)."""
    wanted = set(names)
    flows = {str(o["metadata"]["name"]): o
             for o in (await client.list(JOBFLOW_GVK, namespace=namespace)).items
             if o["metadata"]["name"] in wanted}
    workloads: dict[str, Object] = {}
    for wl in (await client.list(WORKLOAD_GVK, namespace=namespace)).items:
        owner = _owner_jobflow(wl)
        if owner in flows and owner is not None:
            workloads[owner] = wl
    cq_names = set(cluster_queues)
    for wl in workloads.values():
        cq = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")
        if cq:
            cq_names.add(str(cq))
    cqs: dict[str, Object] = {}
    for name in sorted(cq_names):
        try:
            cqs[name] = await client.get(CLUSTER_QUEUE_GVK, name)
        except NotFound:
            continue
    return Snapshot(flows, workloads, cqs)


# -- formatting ---------------------------------------------------------------------------


def format_quantity(resource: str, value: decimal.Decimal) -> str:
    """``cpu`` in cores (``1.5``), memory in Gi/Mi, others as plain numbers."""
    if resource == "memory":
        gib = value / decimal.Decimal(2**30)
        if gib >= 1 or value == 0:
            return f"{gib.normalize():f}Gi" if value else "0"
        return f"{(value / decimal.Decimal(2**20)).quantize(decimal.Decimal(1))}Mi"
    text = f"{value.normalize():f}"
    return text


def _resource_order(names: Iterable[str]) -> list[str]:
    present = set(names)
    return [r for r in SHOWN_RESOURCES if r in present] + sorted(present - set(SHOWN_RESOURCES))


def _condition(obj: Object | None, ctype: str) -> Mapping[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(obj: Object | None, ctype: str) -> bool:
    """Whether condition ``ctype`` of ``obj`` is ``True``."""
    cond = _condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def workload_requests(workload: Object) -> dict[str, decimal.Decimal]:
    """Total requests of a Workload's PodSets (``count`` times the containers' requests)."""
    total: dict[str, decimal.Decimal] = {}
    for ps in (workload.get("spec") or {}).get("podSets") or []:
        count = int(ps.get("count") or 0)
        spec = (ps.get("template") or {}).get("spec") or {}
        for container in spec.get("containers") or []:
            requests = (container.get("resources") or {}).get("requests") or {}
            for name, q in requests.items():
                v = quantity_value(q)
                if v is not None:
                    total[name] = total.get(name, decimal.Decimal(0)) + v * count
    return total


def _format_resources(values: Mapping[str, decimal.Decimal]) -> str:
    if not values:
        return "no resources"
    return ", ".join(f"{r}={format_quantity(r, values[r])}" for r in _resource_order(values))


def admission_flavors(workload: Object) -> list[tuple[str, str]]:
    """(PodSet, flavors) of an admitted Workload; flavors ``-`` when none was assigned."""
    out: list[tuple[str, str]] = []
    admission = (workload.get("status") or {}).get("admission") or {}
    for psa in admission.get("podSetAssignments") or []:
        flavors = sorted(set((psa.get("flavors") or {}).values()))
        out.append((str(psa.get("name")), "+".join(flavors) or "-"))
    return out


def _flavor_summary(workload: Object) -> str:
    pairs = admission_flavors(workload)
    by_flavor: dict[str, list[str]] = {}
    for podset, flavor in pairs:
        by_flavor.setdefault(flavor, []).append(podset)
    if not by_flavor or set(by_flavor) == {"-"}:
        return "no flavor needed (no resource requests)"
    parts = [f"flavor {f} for {', '.join(ps)}" for f, ps in by_flavor.items() if f != "-"]
    return "; ".join(parts)


Amounts = dict[str, decimal.Decimal]


def cluster_queue_usage(cq: Object) -> tuple[Amounts, Amounts]:
    """(in use, nominal quota) per resource summed over flavors, from the ClusterQueue."""
    used: dict[str, decimal.Decimal] = {}
    quota: dict[str, decimal.Decimal] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                v = quantity_value(res.get("nominalQuota"))
                if v is not None:
                    quota[res["name"]] = quota.get(res["name"], decimal.Decimal(0)) + v
    for flavor in (cq.get("status") or {}).get("flavorsUsage") or []:
        for res in flavor.get("resources") or []:
            v = quantity_value(res.get("total"))
            if v is not None:
                used[res["name"]] = used.get(res["name"], decimal.Decimal(0)) + v
    return used, quota


def _usage_line(name: str, cq: Object) -> str:
    used, quota = cluster_queue_usage(cq)
    parts = []
    for r in _resource_order([*used, *quota]):
        u = used.get(r, decimal.Decimal(0))
        parts.append(f"{r} {format_quantity(r, u)}/{format_quantity(r, quota.get(r, u))}")
    status = cq.get("status") or {}
    return (f"ClusterQueue {name}: quota in use {', '.join(parts) or '-'}; "
            f"{status.get('admittedWorkloads', 0)} admitted, "
            f"{status.get('pendingWorkloads', 0)} pending")


def _reclaimable(workload: Object | None) -> dict[str, int]:
    items = ((workload or {}).get("status") or {}).get("reclaimablePods") or []
    return {str(i.get("name")): int(i.get("count") or 0) for i in items}


def _phases(jobflow: Object | None) -> dict[str, Mapping[str, Any]]:
    flows = ((jobflow or {}).get("status") or {}).get("flows") or []
    return {str(f.get("name")): f for f in flows}


_STEP_WORDS: Final = {
    "Running": "started",
    "Succeeded": "finished",
    "Failed": "FAILED",
    "Suspended": "suspended",
    "Stopped": "stopped",
    "Skipped": "skipped",
    "WaitingForTemplate": "waits for its JobTemplate",
}


class Follower:
    """Turns successive snapshots into change lines (see the module docstring)."""

    def __init__(self, *, announce_new: bool = True) -> None:
        #: Say when a JobFlow first appears (off when the caller already said it).
        self.announce_new = announce_new
        self.previous = Snapshot({}, {}, {})
        self._explained_reclaim = False
        self.usage_lines: dict[str, str] = {}
        self.admitted_by: dict[str, str] = {}
        self.flavors: dict[str, str] = {}

    def observe(self, snap: Snapshot) -> list[str]:
        """The lines describing what changed since the previous snapshot."""
        lines: list[str] = []
        prev = self.previous
        for name in sorted(snap.jobflows):
            lines += self._jobflow_lines(name, prev.jobflows.get(name), snap.jobflows[name],
                                         prev.workloads.get(name), snap.workloads.get(name))
        for name, cq in sorted(snap.cluster_queues.items()):
            line = _usage_line(name, cq)
            if self.usage_lines.get(name) != line:
                self.usage_lines[name] = line
                lines.append(line)
        self.previous = snap
        return lines

    def _jobflow_lines(self, name: str, old: Object | None, new: Object,
                       old_wl: Object | None, new_wl: Object | None) -> list[str]:
        out: list[str] = []
        if old is None and self.announce_new:
            flows = (new.get("spec") or {}).get("flows") or []
            queue = ((new.get("metadata") or {}).get("labels") or {}).get(
                "kueue.x-k8s.io/queue-name", "-")
            out.append(f"{name}: created ({len(flows)} steps, LocalQueue {queue})")
        if new_wl is not None and old_wl is None:
            wl_name = new_wl["metadata"]["name"]
            n = len((new_wl.get("spec") or {}).get("podSets") or [])
            out.append(f"{name}: Workload {wl_name} created ({n} PodSets, requests "
                       f"{_format_resources(workload_requests(new_wl))})")
        if new_wl is not None:
            out += self._workload_lines(name, old_wl, new_wl)
        old_phases, new_phases = _phases(old), _phases(new)
        for step, info in new_phases.items():
            phase = str(info.get("phase") or "")
            if phase == str((old_phases.get(step) or {}).get("phase") or "Pending"):
                continue
            word = _STEP_WORDS.get(phase)
            if word is None:
                continue
            detail = ""
            if phase == "Running" and info.get("jobName"):
                detail = f" (Job {info['jobName']})"
            elif info.get("message") and phase in ("Failed", "WaitingForTemplate"):
                detail = f": {info['message']}"
            out.append(f"{name}: step {step} {word}{detail}")
        old_state = ((old or {}).get("status") or {}).get("state")
        state = (new.get("status") or {}).get("state")
        if state and state != old_state and state not in ("Pending", "Running"):
            status = new.get("status") or {}
            out.append(f"{name}: {state} ({status.get('completedFlows', 0)}/"
                       f"{status.get('totalFlows', 0)} steps completed)")
        return out

    def _workload_lines(self, name: str, old_wl: Object | None, new_wl: Object) -> list[str]:
        out: list[str] = []
        if is_true(new_wl, "Admitted") and not is_true(old_wl, "Admitted"):
            cq = ((new_wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "?")
            self.admitted_by[name] = str(cq)
            self.flavors[name] = ", ".join(sorted({f for _, f in admission_flavors(new_wl)}))
            out.append(f"{name}: admitted by ClusterQueue {cq}: {_flavor_summary(new_wl)}")
        if is_true(new_wl, "Evicted") and not is_true(old_wl, "Evicted"):
            cond = _condition(new_wl, "Evicted") or {}
            out.append(f"{name}: evicted ({cond.get('reason', '')}: {cond.get('message', '')})")
        if is_true(old_wl, "Admitted") and not is_true(new_wl, "Admitted") \
                and not is_true(new_wl, "Finished"):
            out.append(f"{name}: lost its admission, waiting for quota again")
        old_r, new_r = _reclaimable(old_wl), _reclaimable(new_wl)
        if new_r != old_r and new_r:
            pods = ", ".join(f"{k}={v}" for k, v in new_r.items())
            why = "" if self._explained_reclaim else \
                " (Kueue releases the quota of finished steps while the rest of the DAG runs)"
            self._explained_reclaim = True
            out.append(f"{name}: reclaimable pods {pods}{why}")
        if is_true(new_wl, "Finished") and not is_true(old_wl, "Finished"):
            cond = _condition(new_wl, "Finished") or {}
            out.append(f"{name}: Workload finished ({cond.get('reason', '')})")
        return out


def final_table(snap: Snapshot, follower: Follower,
                durations: Mapping[str, float] | None = None) -> str:
    """A table of each JobFlow's end state."""
    header = ("JOBFLOW", "STATE", "STEPS", "WORKLOAD", "CLUSTERQUEUE", "FLAVORS", "TOOK")
    rows: list[Sequence[str]] = [header]
    for name, jf in sorted(snap.jobflows.items()):
        status = jf.get("status") or {}
        wl = snap.workloads.get(name)
        took = (durations or {}).get(name)
        rows.append((
            name,
            str(status.get("state") or "-"),
            f"{status.get('completedFlows', 0)}/{status.get('totalFlows', 0)}",
            str(wl["metadata"]["name"]) if wl else "-",
            follower.admitted_by.get(name, "-"),
            follower.flavors.get(name) or "-",
            f"{took:.1f}s" if took is not None else "-",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)
