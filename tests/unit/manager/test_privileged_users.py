"""Who the shipped manager lets change the admission stored on jobs: Kueue's controller
manager (in ``--kueue-namespace``), cluster admins, its own identity (a SelfSubjectReview;
in the cluster, also its ServiceAccount) and ``--privileged-user``/``--privileged-group``."""

from __future__ import annotations

from typing import Any

from integrations.__main__ import manager_options, parser
from integrations.manager import ExternalFrameworkManager, ManagerOptions
from jobframework.admittedstate import (
    CLUSTER_ADMIN_GROUP,
    DEFAULT_PRIVILEGED_USERS,
    KUEUE_CONTROLLER_MANAGER_USER,
)
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import Object
from jobframework.testing import APIServer


def options(*argv: str) -> ManagerOptions:
    return manager_options(parser().parse_args(["run", *argv]))


def test_flags_add_identities() -> None:
    opts = options("--privileged-user", "bob", "--privileged-user", "carol",
                   "--privileged-group", "ops")
    assert opts.privileged_users == ("bob", "carol", KUEUE_CONTROLLER_MANAGER_USER)
    assert opts.privileged_groups == ("ops",)


def test_kueue_in_another_namespace_and_the_in_cluster_service_account() -> None:
    opts = options("--in-cluster", "--namespace", "jf", "--kueue-namespace", "queues")
    assert opts.privileged_users == (
        "system:serviceaccount:queues:kueue-controller-manager",
        "system:serviceaccount:jf:kueue-jobframework-controller-manager")


class _Client:
    """Answers the SelfSubjectReview the manager sends."""

    async def create(self, obj: Object, **_: Any) -> Object:
        assert obj["kind"] == "SelfSubjectReview"
        return {**obj, "status": {"userInfo": {
            "username": "system:serviceaccount:jf:renamed-manager",
            "groups": ["system:serviceaccounts", "system:authenticated"]}}}


async def test_the_manager_adds_its_own_username_not_its_groups() -> None:
    mgr = ExternalFrameworkManager(_Client(), ManagerOptions(  # type: ignore[arg-type]
        integrations=("jobflow",), privileged_users=("bob",)))
    users = await mgr._privileged_users(DEFAULT_PRIVILEGED_USERS)
    assert users.usernames == {KUEUE_CONTROLLER_MANAGER_USER, "bob",
                               "system:serviceaccount:jf:renamed-manager"}
    assert users.groups == {CLUSTER_ADMIN_GROUP}

    alone = ExternalFrameworkManager(_Client(), ManagerOptions(  # type: ignore[arg-type]
        integrations=("jobflow",), privileged_self=False))
    assert (await alone._privileged_users(DEFAULT_PRIVILEGED_USERS)) == DEFAULT_PRIVILEGED_USERS


async def test_without_a_self_subject_review_the_configuration_stands() -> None:
    mgr = ExternalFrameworkManager(APIServer(ManualClock()).client(), ManagerOptions(
        integrations=("jobflow",)))
    assert (await mgr._privileged_users(DEFAULT_PRIVILEGED_USERS)) == DEFAULT_PRIVILEGED_USERS
