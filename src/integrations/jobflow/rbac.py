"""The API access of the JobFlow integration (its RBAC markers).

- ``jobflows``: the DAG controller's ``For`` and the Kueue-managed kind
  (:func:`~jobframework.reconciler_rbac.job_rbac`); its status is written with updates;
  ``jobflows/finalizers``: the child Jobs' controller references block owner deletion;
- ``jobtemplates``: read by the DAG controller, the Kueue adapter (a step's pod template)
  and the JobTemplate controller (``For``), which updates ``jobtemplates/status``
  (``dependencyList``);
- ``batch`` ``jobs``: the child Jobs, owned (an informer), created, and updated to
  suspend or resume them; ``jobs/status`` updated to clear ``startTime`` before the
  scheduling directives change (the API server's rule for suspended Jobs);
- events of both controllers.
"""

from __future__ import annotations

from typing import Final

from jobframework.rbac import READ, PolicyRule, rule
from jobframework.reconciler_rbac import EVENTS_RBAC, job_rbac

from .api import GROUP, JOBFLOW_GVK

__all__ = ["RBAC"]

#: Everything the JobFlow controllers and its Kueue adapter need (the generic
#: reconciler's kind-independent rules are :data:`jobframework.reconciler_rbac.RBAC`).
RBAC: Final[tuple[PolicyRule, ...]] = (
    # Its adapter patches it; its controller updates its status.
    *job_rbac(JOBFLOW_GVK, "jobflows", update=False, status_verbs=("update",)),
    rule(groups=GROUP, resources="jobtemplates", verbs=READ),
    rule(groups=GROUP, resources="jobtemplates/status", verbs="update"),
    rule(groups="batch", resources="jobs", verbs=(*READ, "create", "update")),
    rule(groups="batch", resources="jobs/status", verbs="update"),
    *EVENTS_RBAC,
)
