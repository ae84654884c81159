"""The API access of the generic job reconciler and Kueue's base webhook (their RBAC
markers), kept beside :mod:`jobframework.reconciler`.

:data:`RBAC` is what the reconciler needs whatever the job kind; :func:`job_rbac` adds
the job kind's own. Where each grant comes from:

- ``workloads``: owned by every job controller (an informer: list, watch), created,
  updated (spec, metadata and the ``resource-in-use`` finalizer, :func:`workload.update`,
  :func:`workload.remove_finalizer`) and deleted (extra or orphaned Workloads);
  ``workloads/status``: server-side applies and merge patches (:mod:`jobframework.workload`);
- ``resourceflavors``: read when a job starts (the flavors' node labels and tolerations,
  :func:`~jobframework.podset.pod_sets_info_from_status`);
- ``workloadpriorityclasses``, ``priorityclasses``: a Workload's priority (the reconciler,
  and the webhook's ``default`` WorkloadPriorityClass);
- ``localqueues``: the LocalQueue metrics' filter (:mod:`jobframework.metrics`);
- ``localqueues``, ``clusterqueues``, ``admissionchecks``: also the webhooks' managedBy
  defaulting (:class:`~jobframework.queuelookup.CachedQueueLookup`: does the job's queue
  require MultiKueue's admission check?) and MultiKueue's "not run locally" check
  (:func:`~jobframework.multikueue.should_skip_local_execution`);
- ``namespaces``: ``managedJobsNamespaceSelector`` (the reconciler and the webhook);
- ``events.k8s.io`` ``events``: the recorder (create, and patch of a repeated event's
  series).

Reads go through the manager's informer cache, so each read kind needs ``list`` and
``watch``; ``get`` is granted with them (:data:`~jobframework.rbac.READ`).
"""

from __future__ import annotations

from typing import Final

from . import constants as c
from .rbac import READ, PolicyRule, rule
from .runtime.objects import GVK

__all__ = ["EVENTS_RBAC", "RBAC", "job_rbac"]

#: The event recorder: events.k8s.io/v1 Events, created, and patched to count a series.
EVENTS_RBAC: Final[tuple[PolicyRule, ...]] = (
    rule(groups="events.k8s.io", resources="events", verbs=("create", "patch")),
)

#: What the generic reconciler (and Kueue's base webhook) needs for any job kind.
RBAC: Final[tuple[PolicyRule, ...]] = (
    rule(groups=c.KUEUE_GROUP, resources="workloads",
         verbs=(*READ, "create", "update", "delete")),
    rule(groups=c.KUEUE_GROUP, resources="workloads/status", verbs="patch"),
    rule(groups=c.KUEUE_GROUP,
         resources=("resourceflavors", "workloadpriorityclasses", "localqueues",
                    "clusterqueues", "admissionchecks"),
         verbs=READ),
    rule(groups="scheduling.k8s.io", resources="priorityclasses", verbs=READ),
    rule(groups="", resources="namespaces", verbs=READ),
    *EVENTS_RBAC,
)


def job_rbac(gvk: GVK, plural: str, *, update: bool = True,
             status_verbs: tuple[str, ...] = ("update", "patch")) -> tuple[PolicyRule, ...]:
    """What the generic reconciler needs on the job kind ``gvk`` (resource ``plural``).

    The job itself: read (``For``, and the ancestor lookup of child jobs), patched
    (suspend, start, stop: merge patches) and deleted (``objectRetentionPolicies``);
    ``update`` when the kind's adapter or controller updates it; its ``status``: the
    ``status_verbs`` the kind's code writes it with; its ``finalizers``: update, which
    the API server asks for before it accepts an owner reference with
    ``blockOwnerDeletion`` to a job (the Workloads' references, and the child objects'
    of a job controller). Grant only what the kind's code calls: the deploy tests fail
    on a grant nobody uses.
    """
    verbs = (*READ, "update", "patch", "delete") if update else (*READ, "patch", "delete")
    rules = [rule(groups=gvk.group, resources=plural, verbs=verbs),
             rule(groups=gvk.group, resources=f"{plural}/finalizers", verbs="update")]
    if status_verbs:
        rules.append(rule(groups=gvk.group, resources=f"{plural}/status", verbs=status_verbs))
    return tuple(rules)
