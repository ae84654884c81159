"""Following objects of any Kueue-managed kind through the demo: DaemonJobs, AppWrappers.

A :class:`Tracked` says how to read one object's state (``status.state`` of a DaemonJob,
``status.phase`` of an AppWrapper), which state the demo expects it to reach and a
one-line detail to show beside it. :func:`run_tracked` creates the objects, polls them
and their Workloads, prints a line per change (Workload created, admitted with its
flavors, evicted, finished; the object's state with its detail) and returns how each
one ended.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from jobframework.runtime.client import Client
from jobframework.runtime.client.discovery import NoKindMatchError
from jobframework.runtime.errors import ApiError, NotFound
from jobframework.runtime.objects import GVK, Object
from jobframework.workload import WORKLOAD_GVK

from .follow import admission_flavors, is_true

Printer = Callable[[str], None]


@attrs.frozen(kw_only=True)
class Tracked:
    """One object the demo creates and follows until it reaches :attr:`expected`."""

    gvk: GVK
    obj: Object
    #: Reads the object's state (e.g. ``status.phase``); ``""`` before the first status.
    state: Callable[[Object], str]
    #: The state the demo expects it to end in.
    expected: str
    #: States it never leaves (the demo stops following it there).
    terminal: frozenset[str]
    #: Extra words shown beside a state change (e.g. ``"2/2 nodes done"``).
    detail: Callable[[Object], str] = attrs.field(default=lambda _obj: "")
    #: Why the demo runs it, printed when it is created.
    purpose: str = ""

    @property
    def name(self) -> str:
        """The object's name."""
        return str(self.obj["metadata"]["name"])

    @property
    def label(self) -> str:
        """``Kind/name``, as kubectl prints it."""
        return f"{self.gvk.kind}/{self.name}"


@attrs.frozen
class TrackedResult:
    """How one tracked object ended."""

    label: str
    state: str
    expected: str
    #: Seconds from create to the expected state (None when never reached).
    took: float | None
    clusterqueue: str
    flavors: str
    rejected: str = ""

    @property
    def ok(self) -> bool:
        """True when it reached the state the demo expects."""
        return not self.rejected and self.state == self.expected


def _controller_uid(obj: Object) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def _condition(obj: Object | None, ctype: str) -> Mapping[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return {}


class _Follow:
    """The lines for one tracked object, from its successive reads."""

    def __init__(self, item: Tracked) -> None:
        self.item = item
        self.state = ""
        self.detail = ""
        self.workload: Object | None = None
        self.clusterqueue = "-"
        self.flavors = "-"

    def observe(self, obj: Object, wl: Object | None) -> list[str]:
        label = self.item.label
        out: list[str] = []
        old = self.workload
        if wl is not None and old is None:
            out.append(f"{label}: Workload {wl['metadata']['name']} created "
                       f"({len(wl['spec'].get('podSets') or [])} PodSets, "
                       f"{sum(int(p.get('count', 1)) for p in wl['spec'].get('podSets') or [])}"
                       " pods)")
        if wl is not None:
            if is_true(wl, "Admitted") and not is_true(old, "Admitted"):
                admission = (wl.get("status") or {}).get("admission") or {}
                self.clusterqueue = str(admission.get("clusterQueue", "?"))
                self.flavors = ", ".join(sorted({f for _, f in admission_flavors(wl)})) or "-"
                out.append(f"{label}: admitted by ClusterQueue {self.clusterqueue} "
                           f"(flavors {self.flavors})")
            if is_true(wl, "Evicted") and not is_true(old, "Evicted"):
                cond = _condition(wl, "Evicted")
                out.append(f"{label}: evicted ({cond.get('reason', '')}: "
                           f"{cond.get('message', '')})")
            if is_true(wl, "Finished") and not is_true(old, "Finished"):
                out.append(f"{label}: Workload finished "
                           f"({_condition(wl, 'Finished').get('reason', '')})")
            self.workload = wl
        state = self.item.state(obj)
        detail = self.item.detail(obj)
        if state and (state, detail) != (self.state, self.detail):
            out.append(f"{label}: {state}" + (f" ({detail})" if detail else ""))
        if state:
            self.state, self.detail = state, detail
        return out


async def _workload_of(client: Client, obj: Object) -> Object | None:
    uid = obj["metadata"].get("uid")
    for wl in (await client.list(WORKLOAD_GVK, namespace=obj["metadata"].get("namespace"))
               ).items:
        if _controller_uid(wl) == uid:
            return wl
    return None


async def run_tracked(client: Client, items: Sequence[Tracked], *, limit: float,
                      poll_interval: float, say: Printer) -> list[TrackedResult]:
    """Create ``items``, follow them until each reached its expected or a terminal state
    (or ``limit`` seconds passed), and say what happened."""
    follows: dict[str, _Follow] = {}
    started: dict[str, float] = {}
    reached: dict[str, float] = {}
    rejected: dict[str, str] = {}
    for item in items:
        try:
            await client.create(item.obj)
        except (ApiError, NoKindMatchError) as err:
            message = err.message if isinstance(err, ApiError) else str(err)
            rejected[item.label] = message
            say(f"{item.label}: REJECTED: {message}")
            continue
        follows[item.label] = _Follow(item)
        started[item.label] = time.monotonic()
        say(f"{item.label}: created" + (f" ({item.purpose})" if item.purpose else ""))
    deadline = time.monotonic() + limit
    while follows and time.monotonic() < deadline:
        pending = 0
        for label, follow in follows.items():
            item = follow.item
            namespace = item.obj["metadata"].get("namespace")
            try:
                obj = await client.get(item.gvk, item.name, namespace=namespace)
            except NotFound:
                continue
            wl = await _workload_of(client, obj)
            for line in follow.observe(obj, wl):
                say(line)
            if follow.state == item.expected and label not in reached:
                reached[label] = time.monotonic() - started[label]
            done = follow.state in item.terminal or (
                follow.state == item.expected and item.expected not in item.terminal)
            if not done:
                pending += 1
        if not pending:
            break
        await asyncio.sleep(poll_interval)
    results = []
    for item in items:
        if item.label in rejected:
            results.append(TrackedResult(item.label, "-", item.expected, None, "-", "-",
                                         rejected[item.label]))
            continue
        follow = follows[item.label]
        results.append(TrackedResult(item.label, follow.state or "-", item.expected,
                                     reached.get(item.label), follow.clusterqueue,
                                     follow.flavors))
    return results


def tracked_table(results: Sequence[TrackedResult]) -> str:
    """A table of each tracked object's end state."""
    header = ("OBJECT", "STATE", "EXPECTED", "CLUSTERQUEUE", "FLAVORS", "TOOK")
    rows: list[Sequence[str]] = [header]
    for r in results:
        rows.append((r.label, r.state if not r.rejected else "rejected", r.expected,
                     r.clusterqueue, r.flavors, f"{r.took:.1f}s" if r.took is not None
                     else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)
