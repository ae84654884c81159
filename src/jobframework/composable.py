"""``ComposableJob``: a job made of several objects sharing one Workload (Kueue's pod groups).

A :class:`~jobframework.interface.GenericJob` that also implements :class:`ComposableJob`
is driven by the generic reconciler through its own methods where Kueue's reconciler
switches on the interface:

- loading (:meth:`ComposableJob.load`) replaces the single ``get`` of the job object;
- the Workloads to finalize when the job is gone come from
  :meth:`ComposableJob.list_child_workloads`;
- a prebuilt Workload is adopted with :meth:`ComposableJob.ensure_workload_owned_by_all_members`
  and checked with :meth:`ComposableJob.equivalent_to_workload`;
- the matching Workload and the ones to delete come from
  :meth:`ComposableJob.find_matching_workloads`;
- a new Workload is built by :meth:`ComposableJob.construct_composable_workload` (then
  prepared as any other: priority, AdmissionGatedBy, active);
- starting is :meth:`ComposableJob.run` (it records its own events; with the
  ``MultiKueue`` gate, a Workload with a MultiKueue admission check is not run locally);
- stopping is :meth:`ComposableJob.stop`, with ``WorkloadEvictedDueTo<reason>`` as the stop
  reason of an eviction, and a ``Stopped`` event on every member it stopped;
- admission-check update events go to every member (:meth:`ComposableJob.for_each`).

Python checks the capability structurally, as Go's type assertion does. A
``ComposableJob`` has a ``stop`` method and so would also pass for
:class:`~jobframework.interface.JobWithCustomStop`; Go types cannot implement both (the
signatures differ), and the reconciler checks ``ComposableJob`` first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from . import constants as c
from .api.conditions import CONDITION_TRUE
from .api.workload import Workload
from .interface import CapabilityMeta, StopReason
from .podset import PodSetInfo
from .runtime.client import Client
from .runtime.objects import Object, ObjectKey

__all__ = ["ComposableJob", "EventRecorder", "evicted_stop_reason"]


class EventRecorder(Protocol):
    """What a :class:`ComposableJob` records events with (the reconciler's recorder)."""

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Record an event about ``obj``."""


@runtime_checkable
class ComposableJob(Protocol, metaclass=CapabilityMeta):
    """A job of several member objects with one Workload (Kueue's ``ComposableJob``)."""

    async def load(self, client: Client, key: ObjectKey) -> bool:
        """Load every member of the job; return True when the Workload and job finalizers
        are to be removed (the job is gone or being deleted)."""

    async def run(
        self,
        client: Client,
        wl: Workload,
        pod_sets_info: Sequence[PodSetInfo],
        recorder: EventRecorder,
        msg: str,
    ) -> None:
        """Unsuspend every member, injecting the admission's pod-set info; records the
        ``Started`` events (``msg`` is the reconciler's ``Admitted by clusterQueue ...``)."""

    async def construct_composable_workload(
        self,
        client: Client,
        recorder: EventRecorder,
        label_keys_to_copy: frozenset[str],
        annotations_to_copy: frozenset[str],
    ) -> Workload:
        """A new Workload covering every member (not yet created or prepared)."""

    async def list_child_workloads(self, client: Client, parent: ObjectKey) -> list[Workload]:
        """Every Workload related to the job."""

    async def find_matching_workloads(
        self, client: Client, recorder: EventRecorder
    ) -> tuple[Workload | None, list[Workload]]:
        """The Workload matching the job (or None) and the duplicates to delete."""

    async def stop(
        self,
        client: Client,
        pod_sets_info: Sequence[PodSetInfo],
        stop_reason: str,
        event_msg: str,
    ) -> list[Object]:
        """Stop the members (custom stop procedure); return the members stopped by this
        call, each of which gets a ``Stopped`` event. A failure after some were stopped
        raises :class:`~jobframework.interface.StopError` listing them in ``stopped``."""

    def for_each(self, f: Callable[[Object], None]) -> None:
        """Call ``f`` on every member."""

    async def ensure_workload_owned_by_all_members(
        self, client: Client, recorder: EventRecorder, wl: Workload
    ) -> None:
        """Add the owner references every member needs on ``wl`` (a prebuilt Workload).

        Keep ``wl`` current with what was written (at least its ``resourceVersion``), as
        Go's in-place ``client.Update`` does: the reconciler's next status write is strict.
        """

    async def equivalent_to_workload(self, client: Client, wl: Workload) -> bool:
        """Whether ``wl`` still describes the job."""


def evicted_stop_reason(stop_reason: StopReason, wl: Workload | None) -> str:
    """The stop reason a :class:`ComposableJob` gets: an eviction's becomes
    ``WorkloadEvictedDueTo<Evicted condition reason>`` while the condition is True."""
    if stop_reason != StopReason.WORKLOAD_EVICTED or wl is None:
        return str(stop_reason)
    cond = wl.find_condition(c.WORKLOAD_EVICTED)
    if cond is not None and cond.status == CONDITION_TRUE:
        return f"{stop_reason}DueTo{cond.reason or ''}"
    return str(stop_reason)
