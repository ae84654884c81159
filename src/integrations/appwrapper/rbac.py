"""The API access of the AppWrapper integration (its RBAC markers).

- ``appwrappers``: the controller's ``For`` and the Kueue-managed kind
  (:func:`~jobframework.reconciler_rbac.job_rbac`): updated (its finalizer), status
  patched; ``appwrappers/finalizers``: the components' controller references block owner
  deletion;
- ``pods``: watched and listed (counted per phase), deleted (forceful deletion);
- ``nodes``: the Autopilot node monitor's watch (on by default);
- ``authorization.k8s.io`` ``subjectaccessreviews``: created by the webhook's user RBAC
  check (``user_rbac_admission_check``, on by default);
- the wrapped components: created, read back from the API server (not the cache) and
  deleted, for each kind of :data:`COMPONENT_RESOURCES`. An AppWrapper may wrap any kind;
  the controller can create only those its ServiceAccount is granted, so a cluster that
  wraps other kinds adds them (:func:`component_rbac`);
- the components whose pod count is one field (:data:`RESIZABLE_RESOURCES`): updated, to
  set one scaled past its admitted PodSets back;
- ``jobs``: also watched and listed, to suspend a Job that names an AppWrapper as its
  controller without being one of its components;
- the controller's events.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from jobframework.rbac import READ, PolicyRule, rule
from jobframework.reconciler_rbac import EVENTS_RBAC, job_rbac

from .api import APPWRAPPER_GVK, PLURAL

__all__ = ["COMPONENT_RESOURCES", "COMPONENT_VERBS", "RBAC", "RESIZABLE_RESOURCES",
           "component_rbac"]

#: (group, resource) of the component kinds granted by default, upstream v1.2.2's: those
#: whose PodSets are inferred (:data:`~integrations.appwrapper.podsets.INFERABLE_GVKS`),
#: Services, and the scheduler-plugins PodGroups of both groups (``scheduling.x-k8s.io``,
#: and the older ``scheduling.sigs.k8s.io``) that gang-scheduled components come with.
COMPONENT_RESOURCES: Final[tuple[tuple[str, str], ...]] = (
    ("", "pods"),
    ("", "services"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("batch", "jobs"),
    ("jobset.x-k8s.io", "jobsets"),
    ("kubeflow.org", "pytorchjobs"),
    ("ray.io", "rayclusters"),
    ("ray.io", "rayjobs"),
    ("scheduling.sigs.k8s.io", "podgroups"),
    ("scheduling.x-k8s.io", "podgroups"),
)
#: What the controller does to a component.
COMPONENT_VERBS: Final = ("get", "create", "delete")
#: (group, resource) of the granted component kinds whose PodSet counts are each one field
#: (replicas, a Job's parallelism): a component scaled past its admission is set back.
RESIZABLE_RESOURCES: Final[tuple[tuple[str, str], ...]] = (
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("batch", "jobs"),
    ("kubeflow.org", "pytorchjobs"),
    ("ray.io", "rayclusters"),
    ("ray.io", "rayjobs"),
)


def component_rbac(resources: Iterable[tuple[str, str]] = COMPONENT_RESOURCES
                   ) -> tuple[PolicyRule, ...]:
    """The grants to create, read back and delete components of ``resources``
    ((group, plural) pairs)."""
    return tuple(rule(groups=group, resources=resource, verbs=COMPONENT_VERBS)
                 for group, resource in resources)


#: Everything the AppWrapper controllers, webhook and Kueue adapter need (the generic
#: reconciler's kind-independent rules are :data:`jobframework.reconciler_rbac.RBAC`).
RBAC: Final[tuple[PolicyRule, ...]] = (
    # Its controller patches its status.
    *job_rbac(APPWRAPPER_GVK, PLURAL, status_verbs=("patch",)),
    rule(groups="", resources="pods", verbs=(*READ, "delete")),
    rule(groups="batch", resources="jobs", verbs=READ),
    rule(groups="", resources="nodes", verbs=READ),
    rule(groups="authorization.k8s.io", resources="subjectaccessreviews", verbs="create"),
    *component_rbac(),
    *(rule(groups=group, resources=resource, verbs="update")
      for group, resource in RESIZABLE_RESOURCES),
    *EVENTS_RBAC,
)
