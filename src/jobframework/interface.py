"""The contract a job kind implements to be queued by Kueue: :class:`GenericJob`.

``GenericJob`` is an abstract base class: subclass it, wrap your custom resource (a plain
JSON dict) and implement the abstract methods; Python tells you at instantiation which
ones are missing, and the class is the natural place for helpers shared by your methods.
The optional capabilities are :pep:`544` protocols checked at runtime, as Go checks
optional interfaces with a type assertion: a job *has* a capability when it defines the
methods, with no extra base class to inherit.

Methods that make API calls in Go take the client here and are ``async``; the others are
plain methods working on the in-memory object. Mutating methods (``suspend``,
``run_with_pod_sets_info``, ``restore_pod_sets_info``) change the object only; the
reconciler writes it back.

``ComposableJob`` (multi-object jobs such as pod groups) is in :mod:`jobframework.composable`
and the optional MultiKueue adapter extensions are in :mod:`jobframework.multikueue`.
"""

from __future__ import annotations

import abc
import enum
import weakref
from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from .api.conditions import Condition
from .api.workload import PodSet, ReclaimablePod, Workload
from .field import ErrorList

# The MultiKueue side of an integration lives with MultiKueue's other contracts; it is
# re-exported here, where Kueue's interface.go declares it.
from .multikueue import MultiKueueAdapter as MultiKueueAdapter
from .podset import PodSetInfo
from .runtime.client import Client
from .runtime.objects import GVK, Object


class CapabilityMeta(type(Protocol)):  # type: ignore[misc]
    """The metaclass of the optional capabilities: ``isinstance`` is decided once per class.

    A capability belongs to the job's class, as a Go interface to a type; typing's own
    runtime check walks the protocol's members on every call, which was a measurable part
    of a reconcile (a dozen checks each).
    """

    def __instancecheck__(cls, instance: object) -> bool:
        verdicts = _VERDICTS.setdefault(type(instance), {})
        verdict = verdicts.get(cls)
        if verdict is None:
            verdict = verdicts[cls] = bool(super().__instancecheck__(instance))
        return verdict


#: Class of an object → capability → whether the class has it (classes are weakly held).
_VERDICTS: weakref.WeakKeyDictionary[type, dict[type, bool]] = weakref.WeakKeyDictionary()


class StopReason(enum.StrEnum):
    """Why the reconciler stops a job (passed to :meth:`JobWithCustomStop.stop`)."""

    WORKLOAD_DELETED = "WorkloadDeleted"
    WORKLOAD_EVICTED = "WorkloadEvicted"
    NO_MATCHING_WORKLOAD = "NoMatchingWorkload"
    NOT_ADMITTED = "NotAdmitted"


class FinishedResult(NamedTuple):
    """What :meth:`GenericJob.finished` reports: ``(message, success, finished)``."""

    message: str
    success: bool
    finished: bool


class GenericJob(abc.ABC):
    """A job adapter the generic reconciler drives (Kueue's ``GenericJob``)."""

    @abc.abstractmethod
    def object(self) -> Object:
        """The wrapped object (a JSON dict, mutated in place by the methods below)."""

    @abc.abstractmethod
    def is_suspended(self) -> bool:
        """Whether the job is suspended (no pods should run)."""

    @abc.abstractmethod
    def suspend(self) -> None:
        """Suspend the job (in memory)."""

    @abc.abstractmethod
    async def run_with_pod_sets_info(
        self, client: Client, pod_sets_info: Sequence[PodSetInfo]
    ) -> None:
        """Inject the admission's pod-set info into the templates and unsuspend (in memory).

        Raise :class:`~jobframework.podset.PermanentPodSetError` (for example from
        :func:`~jobframework.podset.merge_into_template`) when the info cannot be applied.
        """

    @abc.abstractmethod
    def restore_pod_sets_info(self, pod_sets_info: Sequence[PodSetInfo]) -> bool:
        """Undo the injection with the original templates' info; return whether it changed."""

    @abc.abstractmethod
    def finished(self) -> FinishedResult:
        """Whether the job completed or failed, with the message for the Workload."""

    @abc.abstractmethod
    async def pod_sets(self, client: Client) -> list[PodSet]:
        """The Workload pod sets for this job (one per role, templates as dicts).

        The caller owns the result, as with Kueue's ``PodSets``: the reconciler sanitizes
        it in place (:func:`~jobframework.reconciler.job_pod_sets`), so build the pod sets
        afresh, sharing no map or list with :meth:`object` or an earlier result (copy the
        template, for instance with ``copy.deepcopy``).
        """

    @abc.abstractmethod
    def is_active(self) -> bool:
        """Whether any of the job's pods are still running."""

    @abc.abstractmethod
    async def pods_ready(self, client: Client) -> bool:
        """Whether all the job's pods are ready or succeeded."""

    @abc.abstractmethod
    def gvk(self) -> GVK:
        """The job's GroupVersionKind."""


@runtime_checkable
class JobWithPodLabelSelector(Protocol, metaclass=CapabilityMeta):
    """Implement when other controllers need a selector for the job's pods."""

    def pod_label_selector(self) -> str:
        """The label selector of the job's pods, e.g. ``batch.kubernetes.io/job-name=x``."""


@runtime_checkable
class JobWithReclaimablePods(Protocol, metaclass=CapabilityMeta):
    """Implement when finished pods can give their quota back before the job ends."""

    async def reclaimable_pods(self, client: Client) -> list[ReclaimablePod]:
        """Per pod set, how many pods will not run again."""


@runtime_checkable
class JobWithCustomStop(Protocol, metaclass=CapabilityMeta):
    """Implement when stopping takes more than suspend + restore (replaces the default)."""

    async def stop(
        self,
        client: Client,
        pod_sets_info: Sequence[PodSetInfo],
        stop_reason: StopReason,
        event_msg: str,
    ) -> bool:
        """Stop the job, writing it yourself; idempotent, no API call if already stopped.

        Returns whether this call stopped it. A write that fails after this call stopped
        the job raises :class:`StopError` with ``stopped_now=True`` (Go's ``Stop``
        returning ``true`` with its error), so that the ``Stopped`` event is still
        recorded; any other failure raises the error itself.
        """


class StopError(Exception):
    """A stop that failed after stopping the job: Go's ``Stop`` returning what it stopped
    together with an error, which a Python method cannot return.

    Raised by :meth:`JobWithCustomStop.stop` (``stopped_now``) and by
    :meth:`~jobframework.composable.ComposableJob.stop` (``stopped``, the members this
    call stopped). The reconciler records ``Stopped`` for what was stopped, then raises
    :attr:`error` itself, so its class (``except Conflict``, ``except NotFound``) is
    what the caller sees.
    """

    def __init__(
        self, error: Exception, *, stopped_now: bool = False, stopped: Sequence[Object] = ()
    ) -> None:
        super().__init__(str(error))
        #: The failure to report once the events are recorded.
        self.error = error
        #: Whether this call stopped the job (a :class:`JobWithCustomStop`).
        self.stopped_now = stopped_now
        #: The members this call stopped (a ``ComposableJob``).
        self.stopped = list(stopped)


@runtime_checkable
class JobWithFinalize(Protocol, metaclass=CapabilityMeta):
    """Implement when the job needs cleanup (e.g. its own finalizer) once it is done."""

    async def finalize(self, client: Client) -> None:
        """Run cleanup for a finished or deleted job."""


@runtime_checkable
class JobWithSkip(Protocol, metaclass=CapabilityMeta):
    """Implement when some states of the job must not be reconciled at all."""

    def skip(self) -> bool:
        """True to end the reconcile right after loading the job."""


@runtime_checkable
class JobWithOnHold(Protocol, metaclass=CapabilityMeta):
    """Implement when the job can ask for its quota reservation to be released."""

    def is_on_hold(self) -> bool:
        """True to put the Workload on hold (reason ``OnHold``)."""


@runtime_checkable
class JobWithPriorityClass(Protocol, metaclass=CapabilityMeta):
    """Implement when the pod PriorityClass is not in the pod templates."""

    def priority_class(self) -> str:
        """The name of the job's (pod) PriorityClass."""


@runtime_checkable
class JobWithCustomValidation(Protocol, metaclass=CapabilityMeta):
    """Implement to add checks to the base webhook's create/update validation."""

    def validate_on_create(self) -> ErrorList:
        """Extra create errors; raising instead replaces all errors with the exception."""

    def validate_on_update(self, old_job: GenericJob) -> ErrorList:
        """Extra update errors; raising instead replaces all errors with the exception."""


@runtime_checkable
class JobWithCustomWorkloadConditions(Protocol, metaclass=CapabilityMeta):
    """Implement when the job reports conditions of its own on its Workload."""

    def custom_workload_conditions(self, wl: Workload) -> tuple[list[Condition], bool]:
        """The conditions to set and whether they differ from the Workload's."""


@runtime_checkable
class JobWithCustomWorkloadActivation(Protocol, metaclass=CapabilityMeta):
    """Implement when the job decides whether its Workload is active (``spec.active``)."""

    def is_workload_active(self) -> bool:
        """The value ``spec.active`` of the Workload must have."""


@runtime_checkable
class JobWithManagedBy(Protocol, metaclass=CapabilityMeta):
    """Implement when the kind has a ``spec.managedBy`` field (MultiKueue)."""

    def can_default_managed_by(self) -> bool:
        """True when managedBy is unset or the framework's own controller."""

    def managed_by(self) -> str | None:
        """The controller managing the job."""

    def set_managed_by(self, value: str | None) -> None:
        """Set the managing controller."""


@runtime_checkable
class JobWithCustomAnnotations(Protocol, metaclass=CapabilityMeta):
    """Implement when annotations derived from other objects must be kept on the job."""

    async def get_custom_annotations(
        self, client: Client, pod_sets: Sequence[PodSet]
    ) -> dict[str, str]:
        """Annotations to merge into the job, given its current ``pod_sets`` (as the
        reconciler just computed them, sanitized; read them, do not change them).

        Called for elastic jobs before their workload slice is matched; raising fails the
        reconcile (``failed to get custom annotations based on pod sets from job <name>``).
        """


@runtime_checkable
class ElasticWorkloadNameProvider(Protocol, metaclass=CapabilityMeta):
    """Implement when an elastic job's slice names must not hash the generation."""

    def get_workload_name_extra_part(self) -> str:
        """The extra part hashed into the workload name."""


@runtime_checkable
class TopLevelJob(Protocol, metaclass=CapabilityMeta):
    """Implement when the job owns its Workload whatever its owner references say."""

    def is_top_level(self) -> bool:
        """True to skip the ancestor search."""


@runtime_checkable
class JobWithCustomQueueNameChange(Protocol, metaclass=CapabilityMeta):
    """Implement to replace the default update of ``spec.queueName`` on a label change."""

    async def custom_queue_name_change(self, client: Client, wl: Workload) -> None:
        """Apply the job's new queue name to its Workload."""
