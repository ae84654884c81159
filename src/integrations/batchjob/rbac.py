"""The API access of the batch/v1 Job integration (its RBAC markers): the generic
reconciler's on ``jobs`` (:func:`~jobframework.reconciler_rbac.job_rbac`: read, patched
to suspend and start, ``jobs/status`` patched to clear ``startTime``, deleted by the
retention policy; ``jobs/finalizers`` for the Workloads' owner references). Its child-Job
watch lists Jobs through the same informer."""

from __future__ import annotations

from typing import Final

from jobframework.rbac import PolicyRule
from jobframework.reconciler_rbac import job_rbac

from .job import JOB_GVK

__all__ = ["RBAC"]

#: What the Job integration needs besides :data:`jobframework.reconciler_rbac.RBAC`.
RBAC: Final[tuple[PolicyRule, ...]] = job_rbac(JOB_GVK, "jobs")
