"""The errors of the generic job reconcile (Kueue's jobframework ``errors.go`` and the
``Err*`` values of ``reconciler.go``).

They live below :mod:`jobframework.reconciler` so that the modules it calls into
(:mod:`jobframework.workloadslicing`) can raise them without importing it back; every
name is re-exported by :mod:`jobframework.reconciler`.
"""

from __future__ import annotations

__all__ = [
    "ExtraWorkloadsError",
    "NoMatchingWorkloadsError",
    "PrebuiltWorkloadNotFoundError",
    "ReconcileError",
    "UnretryableError",
    "is_unretryable_error",
]


class UnretryableError(Exception):
    """An error the reconcile swallows (logged, not retried) (``UnretryableError``)."""


def is_unretryable_error(err: BaseException) -> bool:
    """Whether ``err`` or one of its causes is an :class:`UnretryableError`."""
    e: BaseException | None = err
    while e is not None:
        if isinstance(e, UnretryableError):
            return True
        e = e.__cause__
    return False


class ReconcileError(Exception):
    """A reconcile failure with Kueue's message (``fmt.Errorf("...: %w", cause)``)."""


class NoMatchingWorkloadsError(ReconcileError):
    """``no matching workloads: deleted N workloads`` (``ErrNoMatchingWorkloads``)."""

    def __init__(self, deleted: int) -> None:
        super().__init__(f"no matching workloads: deleted {deleted} workloads")


class ExtraWorkloadsError(ReconcileError):
    """``extra workloads: deleted N workloads`` (``ErrExtraWorkloads``)."""

    def __init__(self, deleted: int) -> None:
        super().__init__(f"extra workloads: deleted {deleted} workloads")


class PrebuiltWorkloadNotFoundError(ReconcileError):
    """``prebuilt workload not found`` (``ErrPrebuiltWorkloadNotFound``)."""

    def __init__(self) -> None:
        super().__init__("prebuilt workload not found")
