"""Holding a parent's child Jobs to what Kueue admitted (JobFlow, DaemonJob, AppWrapper).

Kueue admits such a parent as one Workload, and leaves the Jobs it creates alone: a Job
whose controller owner is a Kueue-managed object gets no Workload of its own and is
never suspended while that owner's Workload is admitted (Kueue's child rule, in
``FindAncestorJobManagedByKueue``). Nothing in Kueue v0.19.2 reads a child's size again
either: its Job webhook refuses a ``parallelism`` change only for a Job with the
partial-admission annotation. So the parent's controller, which knows the children it
made, is the one that holds them to the admission:

- :func:`restore_admitted_size`: a child running more pods at once than were admitted
  for it gets its ``parallelism`` set back, with a Warning event on the parent;
- :func:`suspend_foreign_job`: a Job naming the parent as its controller that the
  controller did not create is suspended, with a Warning event on the parent and on the
  Job, so it never runs on the parent's quota.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from .childjobs import JobPhase, JobWriter, Recorder, job_outcome, pod_count, suspend_job
from .constants import truncate_event_message
from .runtime.events import WARNING
from .runtime.objects import Object, name_of

__all__ = [
    "ADMITTED_SIZE_RESTORED_REASON",
    "FOREIGN_JOB_SUSPENDED_REASON",
    "admitted_parallelism",
    "restore_admitted_size",
    "suspend_foreign_job",
]

#: The reason of the Warning event recorded when a child's size is set back.
ADMITTED_SIZE_RESTORED_REASON: Final = "AdmittedSizeRestored"
#: The reason of the Warning events recorded when a Job claiming the parent is suspended.
FOREIGN_JOB_SUSPENDED_REASON: Final = "ForeignJobSuspended"


def admitted_parallelism(job_spec: Mapping[str, Any], admitted: int) -> int | None:
    """The ``parallelism`` that brings a Job back to at most ``admitted`` pods at once
    (as Kueue counts them: parallelism capped by completions), or None when it runs no
    more than that already.

    Only a larger size is set back: a smaller one uses less than the quota Kueue holds.
    ``completions`` is left alone; it may change only together with ``parallelism``
    (an elastic Indexed Job), and with ``parallelism`` back at the admitted count the Job
    runs no more pods at once, whatever its completions.
    """
    if pod_count(job_spec) <= admitted:
        return None
    return max(admitted, 0)


async def restore_admitted_size(writer: JobWriter, recorder: Recorder,
                                parent: Mapping[str, Any], job: Object, admitted: int,
                                what: str) -> Object:
    """Set ``job``'s parallelism back when it runs more pods at once than ``admitted``
    (for ``what``: ``flow a``, ``node n1``), with a Warning
    :data:`ADMITTED_SIZE_RESTORED_REASON` event on ``parent``; returns the Job as last
    written (``job`` itself when nothing changed)."""
    spec = job.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    target = admitted_parallelism(spec, admitted)
    if target is None:
        return job
    running = pod_count(spec)
    updated = copy.deepcopy(job)
    updated["spec"]["parallelism"] = target
    result = await writer.update(updated)
    recorder.event(parent, WARNING, ADMITTED_SIZE_RESTORED_REASON, truncate_event_message(
        f"Job {name_of(job)} was set to run {running} pods at once where {admitted} "
        f"{'was' if admitted == 1 else 'were'} admitted for {what}: parallelism set back "
        f"to {target}"))
    return result


async def suspend_foreign_job(writer: JobWriter, recorder: Recorder,
                              parent: Mapping[str, Any], job: Object) -> Object:
    """Suspend ``job``, which names ``parent`` as its controller but was not created by
    its controller, when it is running (finished and suspended Jobs are left as they
    are); a Warning :data:`FOREIGN_JOB_SUSPENDED_REASON` event on ``parent`` and on the
    Job says so. Returns the Job as last written.

    The Job is not deleted and its owner reference is kept: what it ran is its owner's to
    keep or remove. Once the reference is removed, the Job is a Job like any other: Kueue
    queues it on a Workload of its own when it has a queue name (or Kueue manages Jobs
    without one in its namespace), and otherwise it stays suspended until its owner
    resumes it.
    """
    if job_outcome(job).phase != JobPhase.RUNNING:
        return job
    result = await suspend_job(writer, job)
    kind = str(parent.get("kind") or "owner")
    message = truncate_event_message(
        f"Job {name_of(job)} names {kind} {name_of(parent)} as its controller but was not "
        f"created by it: suspended, so it does not run on the {kind}'s admitted quota")
    recorder.event(parent, WARNING, FOREIGN_JOB_SUSPENDED_REASON, message)
    recorder.event(job, WARNING, FOREIGN_JOB_SUSPENDED_REASON, message)
    return result
