"""The admission a DaemonJob carries while Kueue runs it, and who may change it.

When Kueue admits a DaemonJob, its adapter (:class:`~.job.DaemonJobJob`) writes, in the
update that unsuspends it, :data:`~.api.POD_SETS_INFO_ANNOTATION` (the admission the
controller injects into every node's Job) and, on the first start,
:data:`~.api.NODES_ANNOTATION` (the run's nodes, which the Workload's count was computed
from: nodes times pods per node). A tenant adding nodes to that list would start Jobs the
Workload does not count. Only :class:`~jobframework.admittedstate.PrivilegedUsers` may
change either annotation (:func:`admitted_state_errors`, the update rule of the Kueue
webhook; under MultiKueue the declared nodes are immutable for everyone), and the
controller checks both against the Workload before it creates or resumes a Job
(:mod:`jobframework.admittedworkload`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from jobframework.admittedstate import PrivilegedUsers, annotation_change_errors
from jobframework.field import ErrorList
from jobframework.webhook import AdmissionRequest

from .api import NODES_ANNOTATION, POD_SETS_INFO_ANNOTATION

#: The annotations holding the admission: only privileged users may change them.
ADMISSION_ANNOTATIONS: Final = (POD_SETS_INFO_ANNOTATION, NODES_ANNOTATION)


def admitted_state_errors(old: Mapping[str, Any], new: Mapping[str, Any],
                          request: AdmissionRequest | None,
                          privileged: PrivilegedUsers) -> ErrorList:
    """A ``Forbidden`` error for each admission annotation a user who is not privileged
    sets, changes or removes."""
    return annotation_change_errors(ADMISSION_ANNOTATIONS, old, new, request, privileged)
