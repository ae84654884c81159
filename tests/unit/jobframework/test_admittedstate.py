"""Who may change the admission stored on a job (``jobframework.admittedstate``)."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.admittedstate import (
    CLUSTER_ADMIN_GROUP,
    DEFAULT_PRIVILEGED_USERS,
    KUEUE_CONTROLLER_MANAGER_USER,
    PrivilegedUsers,
    annotation_changes,
    own_username,
    privileged_change_errors,
    service_account_username,
)
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.errors import Forbidden
from jobframework.runtime.objects import GroupVersionResource, Object
from jobframework.testing import APIServer
from jobframework.webhook import AdmissionRequest, UserInfo
from jobframework.webhook.admission import Operation

MANAGER = service_account_username("jf-system", "jf-manager")


def test_who_is_privileged() -> None:
    users = DEFAULT_PRIVILEGED_USERS.including([MANAGER], ["ops"])
    assert MANAGER == "system:serviceaccount:jf-system:jf-manager"
    assert users.allows(UserInfo(username=KUEUE_CONTROLLER_MANAGER_USER))
    assert users.allows(UserInfo(username=MANAGER))
    assert users.allows(UserInfo(username="root", groups=(CLUSTER_ADMIN_GROUP,)))
    assert users.allows(UserInfo(username="carol", groups=("system:authenticated", "ops")))
    assert not users.allows(UserInfo(username="alice", groups=("system:authenticated",)))
    assert not users.allows(None), "an unknown user is not privileged"
    assert not DEFAULT_PRIVILEGED_USERS.allows(UserInfo(username=MANAGER))
    with pytest.raises(TypeError):
        PrivilegedUsers(MANAGER)  # type: ignore[arg-type]  # one name, not a collection


def _request(user: str, groups: tuple[str, ...] = ("system:authenticated",)) -> AdmissionRequest:
    obj: Object = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "x", "namespace": "ns"}}
    return AdmissionRequest.for_object(Operation.UPDATE, obj, obj, uid="1",
                                       resource=GroupVersionResource("", "v1", "configmaps"),
                                       user_info=UserInfo(username=user, groups=groups))


def test_a_change_by_a_tenant_is_forbidden_naming_the_field() -> None:
    old = {"metadata": {"annotations": {"a": "1", "b": "x"}}}
    new = {"metadata": {"annotations": {"a": "2", "b": "x"}}}
    changes = annotation_changes(old, new, ["a", "b", "c"])
    (err,) = privileged_change_errors(changes, _request("alice"), DEFAULT_PRIVILEGED_USERS)
    assert str(err).startswith("metadata.annotations[a]: Forbidden: holds the admission")
    assert "'alice'" in str(err)
    assert not privileged_change_errors(changes, _request(KUEUE_CONTROLLER_MANAGER_USER),
                                        DEFAULT_PRIVILEGED_USERS)
    assert privileged_change_errors(changes, None, DEFAULT_PRIVILEGED_USERS), \
        "no request: the user is unknown"
    unchanged = annotation_changes(old, old, ["a", "b"])
    assert not privileged_change_errors(unchanged, _request("alice"), DEFAULT_PRIVILEGED_USERS)


class _Answering:
    """A client whose creates answer a SelfSubjectReview (or raise ``error``)."""

    def __init__(self, answer: Object | None = None, error: Exception | None = None) -> None:
        self.answer, self.error = answer, error
        self.created: list[Object] = []

    async def create(self, obj: Object, **_: Any) -> Object:
        self.created.append(obj)
        if self.error is not None:
            raise self.error
        assert self.answer is not None
        return self.answer


async def test_own_username_asks_a_self_subject_review() -> None:
    client = _Answering({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                         "status": {"userInfo": {"username": MANAGER,
                                                 "groups": ["system:serviceaccounts"]}}})
    assert await own_username(client) == MANAGER  # type: ignore[arg-type]
    (sent,) = client.created
    assert (sent["apiVersion"], sent["kind"]) == ("authentication.k8s.io/v1",
                                                  "SelfSubjectReview")
    assert await own_username(_Answering(error=Forbidden("no"))) is None  # type: ignore[arg-type]
    assert await own_username(_Answering({"status": {}})) is None  # type: ignore[arg-type]
    # The in-memory server does not serve SelfSubjectReviews.
    assert await own_username(APIServer(ManualClock()).client()) is None
