"""Who may change the admission a parent kind's controller acts on: the webhook side.

A kind that runs its pods through children (JobFlow and DaemonJob Jobs, AppWrapper
components) is admitted by Kueue as one Workload; its Kueue adapter stores the admission
(each PodSet's nodeSelector, tolerations, labels...) on the object itself, where the
controller reads it when it creates children. The tenant who owns the object can edit it:
rewritten, that admission would send the children to nodes other than the admitted
flavor's while the quota is charged to it. So the validating webhooks refuse, on
UPDATE, any change to those fields unless the request comes from a
:class:`PrivilegedUsers` identity: Kueue's controller manager, the manager running our
controllers, and cluster admins (``system:masters``, who may edit Workloads anyway).

On CREATE nothing is refused: a new object is suspended by the defaulting webhook when
queued, and the adapter overwrites the fields when Kueue admits it (MultiKueue creates a
worker's copy with them, under its worker credentials). The controllers check the stored
admission against the Workload before they create anything
(:mod:`jobframework.admittedworkload`), which also covers a write made while the webhook
was not called.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from .field import ErrorList, Path, forbidden
from .runtime.client import Client
from .runtime.objects import Object, annotations_of
from .webhook import AdmissionRequest, UserInfo

log = logging.getLogger(__name__)

#: Kueue's controller manager as its default installation authenticates.
KUEUE_CONTROLLER_MANAGER_USER: Final = (
    "system:serviceaccount:kueue-system:kueue-controller-manager")
#: Cluster admins: they may edit Workloads and every object anyway.
CLUSTER_ADMIN_GROUP: Final = "system:masters"


def service_account_username(namespace: str, name: str) -> str:
    """The username a ServiceAccount authenticates as (``system:serviceaccount:ns:name``)."""
    return f"system:serviceaccount:{namespace}:{name}"


#: ``authentication.k8s.io/v1 SelfSubjectReview``: "who am I" (GA in Kubernetes 1.28).
SELF_SUBJECT_REVIEW_API_VERSION: Final = "authentication.k8s.io/v1"


async def own_username(client: Client) -> str | None:
    """The username ``client`` authenticates as, from a SelfSubjectReview (every
    authenticated user may create one); None when the API server cannot say (an older
    server, an in-memory one).

    A manager adds it to its :class:`PrivilegedUsers`, so its own writes of the admission
    pass its own webhooks. Its groups are not added: ``system:serviceaccounts`` would let
    every ServiceAccount through.
    """
    review: Object = {"apiVersion": SELF_SUBJECT_REVIEW_API_VERSION,
                      "kind": "SelfSubjectReview", "metadata": {}}
    try:
        answer = await client.create(review)
    except Exception as err:  # any failure: the caller falls back to its configuration
        log.info("no SelfSubjectReview (%s): the manager's identity comes from its "
                 "configuration only", err)
        return None
    status = answer.get("status")
    user = status.get("userInfo") if isinstance(status, Mapping) else None
    name = user.get("username") if isinstance(user, Mapping) else None
    return name if isinstance(name, str) and name else None


def _names(values: Iterable[str]) -> frozenset[str]:
    if isinstance(values, str):
        raise TypeError("expected a collection of names, got one string")
    return frozenset(v for v in values if v)


@attrs.frozen
class PrivilegedUsers:
    """The identities allowed to set or change the admission stored on a job.

    A request is privileged when its username is one of :attr:`usernames` or one of its
    groups is in :attr:`groups`. The default is Kueue's controller manager (as installed
    in ``kueue-system``) and ``system:masters``; the manager running our controllers adds
    its own identity (see ``docs/deploy.md``).
    """

    usernames: frozenset[str] = attrs.field(
        default=frozenset({KUEUE_CONTROLLER_MANAGER_USER}), converter=_names)
    groups: frozenset[str] = attrs.field(default=frozenset({CLUSTER_ADMIN_GROUP}),
                                         converter=_names)

    def allows(self, user: UserInfo | None) -> bool:
        """Whether ``user`` (None: unknown) may change the admitted state."""
        if user is None:
            return False
        return user.username in self.usernames or any(g in self.groups for g in user.groups)

    def including(self, usernames: Iterable[str] = (),
                  groups: Iterable[str] = ()) -> PrivilegedUsers:
        """These identities plus ``usernames`` and ``groups``."""
        return PrivilegedUsers(self.usernames | _names(usernames), self.groups | _names(groups))


#: Kueue's controller manager and cluster admins.
DEFAULT_PRIVILEGED_USERS: Final = PrivilegedUsers()

#: A change to check: the field's path, its old value and its new one (None: absent).
Change = tuple[Path, Any, Any]


def annotation_changes(old: Mapping[str, Any], new: Mapping[str, Any],
                       keys: Iterable[str]) -> list[Change]:
    """The ``metadata.annotations`` entries among ``keys``, old and new."""
    old_a, new_a = annotations_of(old), annotations_of(new)
    path = Path.new("metadata", "annotations")
    return [(path.key(k), old_a.get(k), new_a.get(k)) for k in keys]


def privileged_change_errors(changes: Iterable[Change], request: AdmissionRequest | None,
                             privileged: PrivilegedUsers) -> ErrorList:
    """A ``Forbidden`` error for each changed field, unless the request's user is
    privileged (an unknown user, ``request`` None, is not)."""
    errs = ErrorList()
    user = request.user_info if request is not None else None
    if privileged.allows(user):
        return errs
    who = f"user {user.username!r}" if user is not None and user.username else "this user"
    for path, old, new in changes:
        if old != new:
            errs.append(forbidden(path, f"holds the admission Kueue granted: only Kueue and "
                                        f"the job controllers may set or change it, not {who}"))
    return errs


def annotation_change_errors(keys: Iterable[str], old: Mapping[str, Any],
                             new: Mapping[str, Any], request: AdmissionRequest | None,
                             privileged: PrivilegedUsers) -> ErrorList:
    """A webhook's update rule for admission kept in annotations: a ``Forbidden`` error
    for each of ``keys`` a user who is not privileged sets, changes or removes."""
    return privileged_change_errors(annotation_changes(old, new, keys), request, privileged)


__all__ = [
    "CLUSTER_ADMIN_GROUP",
    "DEFAULT_PRIVILEGED_USERS",
    "KUEUE_CONTROLLER_MANAGER_USER",
    "SELF_SUBJECT_REVIEW_API_VERSION",
    "Change",
    "PrivilegedUsers",
    "annotation_change_errors",
    "annotation_changes",
    "own_username",
    "privileged_change_errors",
    "service_account_username",
]
