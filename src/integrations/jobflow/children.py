"""The Jobs a JobFlow's controller made, told apart from Jobs that only claim the JobFlow.

The controller creates exactly one Job per flow, named ``<jobflow>-<flow>``
(:func:`~.api.child_job_name`), with the JobFlow as its controller owner, and looks its
children up by that name. Any other Job whose controller owner reference is the JobFlow
was made by someone else: Kueue's child rule would let it run on the JobFlow's admission
without a Workload of its own, so the controller suspends it
(:func:`jobframework.childguard.suspend_foreign_job`). A JobFlow run by another
controller (MultiKueue, on a manager cluster) has no Job made here at all.

Labels are not looked at: whoever can write a Job can write them too, and a child whose
labels were edited is still the flow's Job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobframework.managedby import validate_managed_by
from jobframework.runtime.objects import Object, name_of

from .api import JobFlowSpec, child_job_name, managed_elsewhere

__all__ = ["child_job_names", "foreign_jobs", "is_own_job"]


def child_job_names(jobflow: Mapping[str, Any]) -> dict[str, str]:
    """Job name → flow name, for the Jobs the controller creates for ``jobflow`` (none
    when another controller runs it)."""
    if managed_elsewhere(jobflow) and not validate_managed_by(jobflow):
        return {}
    name = name_of(jobflow)
    return {child_job_name(name, f.name): f.name for f in JobFlowSpec.of(jobflow).flows}


def is_own_job(jobflow: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """Whether ``job`` (controlled by ``jobflow``) is one the controller creates."""
    return name_of(job) in child_job_names(jobflow)


def foreign_jobs(jobflow: Mapping[str, Any], owned: Sequence[Object]) -> list[Object]:
    """The Jobs of ``owned`` (controlled by ``jobflow``) the controller did not create."""
    names = child_job_names(jobflow)
    return [job for job in owned if name_of(job) not in names]
