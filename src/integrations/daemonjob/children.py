"""The Jobs a DaemonJob's controller made, told apart from Jobs that only claim the
DaemonJob.

The controller creates one Job per node of the run, named ``<daemonjob>-<node>``
(:func:`~.api.child_job_name`, shortened when too long) and annotated with the node,
with the DaemonJob as its controller owner, and only once the run's nodes are fixed
(:data:`~.api.NODES_ANNOTATION`). Any other Job whose controller owner reference is the
DaemonJob was made by someone else: Kueue's child rule would let it run on the
DaemonJob's admission without a Workload of its own, so the controller suspends it
(:func:`jobframework.childguard.suspend_foreign_job`) and never counts it. A DaemonJob
run by another controller (MultiKueue, on a manager cluster) has no Job made here at all.

Before the run is fixed no Job of the controller's exists, but a pass reading a cache that
has not seen the fixing yet must not take the Jobs it just created for foreign: then any
Job with a node Job's name and node annotation counts as the DaemonJob's. Such a Job of
a node outside the run is never resumed, and until the DaemonJob is admitted Kueue's child
rule keeps it suspended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobframework.managedby import validate_managed_by
from jobframework.runtime.objects import Object, name_of

from .api import child_job_name, frozen_nodes, managed_elsewhere
from .plan import node_of_job

__all__ = ["foreign_jobs", "is_own_job"]


def _runs_here(daemonjob: Mapping[str, Any]) -> bool:
    return not (managed_elsewhere(daemonjob) and not validate_managed_by(daemonjob))


def is_own_job(daemonjob: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """Whether ``job`` (controlled by ``daemonjob``) is one the controller creates: named
    for the node in its annotation, a node of the run once the run is fixed."""
    if not _runs_here(daemonjob):
        return False
    node = node_of_job(job)
    if not node or name_of(job) != child_job_name(name_of(daemonjob), node):
        return False
    run = frozen_nodes(daemonjob)
    return run is None or node in run


def foreign_jobs(daemonjob: Mapping[str, Any], owned: Sequence[Object]) -> list[Object]:
    """The Jobs of ``owned`` (controlled by ``daemonjob``) the controller did not create."""
    return [job for job in owned if not is_own_job(daemonjob, job)]
