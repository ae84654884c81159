"""The API access of the DaemonJob integration (its RBAC markers).

- ``daemonjobs``: the controller's ``For`` and the Kueue-managed kind
  (:func:`~jobframework.reconciler_rbac.job_rbac`); the controller updates it (the
  nodes-of-the-run annotation) and its status; ``daemonjobs/finalizers``: the child
  Jobs' controller references block owner deletion;
- ``nodes``: watched by the controller and listed by the webhook (eligible nodes);
- ``batch`` ``jobs``: one per node, owned (an informer), created, updated (suspend,
  resume, admission data) and deleted (nodes that left the run); ``jobs/status`` updated
  to clear ``startTime``;
- the controller's events.
"""

from __future__ import annotations

from typing import Final

from jobframework.rbac import READ, PolicyRule, rule
from jobframework.reconciler_rbac import EVENTS_RBAC, job_rbac

from .api import DAEMONJOB_GVK

__all__ = ["RBAC"]

#: Everything the DaemonJob controller, webhook and Kueue adapter need (the generic
#: reconciler's kind-independent rules are :data:`jobframework.reconciler_rbac.RBAC`).
RBAC: Final[tuple[PolicyRule, ...]] = (
    # Updated (the nodes annotation repair); its controller updates its status.
    *job_rbac(DAEMONJOB_GVK, "daemonjobs", status_verbs=("update",)),
    rule(groups="", resources="nodes", verbs=READ),
    rule(groups="batch", resources="jobs", verbs=(*READ, "create", "update", "delete")),
    rule(groups="batch", resources="jobs/status", verbs="update"),
    *EVENTS_RBAC,
)
