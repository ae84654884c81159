"""The RBAC the code declares covers what the code does, and nothing is granted for nothing.

The in-memory API server has no RBAC authorizer, so :mod:`.scenario` runs the in-cluster
manager as the rendered Deployment starts it (Kueue's ConfigMap, the Lease, the
certificate Secret and the webhook configurations' ``caBundle``), then every reference
integration through a lifecycle, with the manager's client recording each request as the
authorizer would see it (:mod:`.recording`). Then:

- every request must be allowed by the generated rules (a call on a kind, verb or
  namespace nobody declared fails here, naming the request);
- every granted (group, resource, verb) must have been requested, unless
  :data:`EXPECTED_UNUSED` says why the scenario cannot reach it; an entry there that the
  scenario does reach, or that no rule grants any more, fails too, so the list stays
  exact. A ``get`` counts as used when the kind was listed: the manager's cache answers
  gets from its informer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import attrs
import pytest

from integrations.catalog import reference_names
from integrations.deploy import rules_for
from jobframework.rbac import merge_rules

from . import scenario
from .recording import allowed

#: (group, resource, verb) granted but not requested by the scenario, and why.
EXPECTED_UNUSED: dict[tuple[str, str, str], str] = {
    ("authentication.k8s.io", "selfsubjectreviews", "create"):
        "the in-memory server serves no SelfSubjectReview: the scenario wires the "
        "manager's identity by hand (the cluster test sees the request)",
    ("kueue.x-k8s.io", "workloads", "delete"):
        "a Workload that no longer matches its job while holding quota",
    **{(group, f"{plural}/finalizers", "update"):
       "asked by the API server (OwnerReferencesPermissionEnforcement) before it accepts an "
       "owner reference blocking the job's deletion; no client call"
       for group, plural in (("api.practice.com", "jobflows"),
                             ("api.practice.com", "daemonjobs"),
                             ("workload.codeflare.dev", "appwrappers"), ("batch", "jobs"))},
    ("api.practice.com", "daemonjobs", "update"):
        "the controller's repair of a DaemonJob without its nodes annotation",
    **{(group, plural, "update"):
       "the AppWrapper controller setting back a component scaled past its admission; the "
       "scenario scales none (tests/unit/appwrapper/test_children_held.py does)"
       for group, plural in (("apps", "deployments"), ("apps", "statefulsets"),
                             ("kubeflow.org", "pytorchjobs"), ("ray.io", "rayclusters"),
                             ("ray.io", "rayjobs"))},
}

RULES = merge_rules(rules_for(list(reference_names())))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[scenario.Recorded]:
    yield asyncio.run(scenario.run(tmp_path_factory.mktemp("certs")))


def _granted() -> set[tuple[str, str, str]]:
    return {(g, res, v) for r in RULES for g in r.groups for res in r.resources
            for v in r.verbs}


def test_the_scenario_reaches_every_integration(recorded: scenario.Recorded) -> None:
    # A scenario that stopped early would make the checks below pass vacuously.
    resources = {(r.group, r.resource) for r in recorded.requests if r.verb == "create"}
    for expected in (("batch", "jobs"), ("kueue.x-k8s.io", "workloads"), ("", "pods"),
                     ("ray.io", "rayjobs"), ("coordination.k8s.io", "leases"),
                     ("", "secrets"),
                     ("authorization.k8s.io", "subjectaccessreviews"),
                     ("events.k8s.io", "events")):
        assert expected in resources, expected
    deleted = {r.resource for r in recorded.requests if r.verb == "delete"}
    assert {"jobflows", "daemonjobs", "appwrappers", "jobs"} <= deleted


def test_every_request_is_allowed(recorded: scenario.Recorded) -> None:
    denied = sorted({r for r in recorded.requests
                     if not allowed(r, RULES, scenario.MANAGER_NAMESPACE)})
    assert not denied, (
        "the code made API requests the RBAC it declares does not allow; add the rule "
        "next to the code (its module's RBAC):\n" + "\n".join(f"  {r}" for r in denied))


def test_every_granted_rule_is_used(recorded: scenario.Recorded) -> None:
    used = {(r.group, r.resource, r.verb) for r in recorded.requests}
    used |= {(g, res, "get") for g, res, v in used if v == "list"}
    unused = _granted() - used
    unexplained = sorted(unused - set(EXPECTED_UNUSED))
    assert not unexplained, (
        "granted but never requested: drop the grant, or say in EXPECTED_UNUSED why the "
        "scenario cannot reach it:\n" + "\n".join(f"  {u}" for u in unexplained))
    reached = sorted(set(EXPECTED_UNUSED) & used)
    assert not reached, f"requested now, drop from EXPECTED_UNUSED: {reached}"
    stale = sorted(set(EXPECTED_UNUSED) - _granted())
    assert not stale, f"no longer granted, drop from EXPECTED_UNUSED: {stale}"


def test_namespaced_and_named_grants_stay_narrow(recorded: scenario.Recorded) -> None:
    by_resource = {(r.group, r.resource): r.namespace for r in recorded.requests}
    assert by_resource[("coordination.k8s.io", "leases")] == scenario.MANAGER_NAMESPACE
    assert by_resource[("", "secrets")] == scenario.MANAGER_NAMESPACE
    assert by_resource[("", "configmaps")] == scenario.KUEUE_NAMESPACE
    for resource in ("leases", "secrets", "configmaps"):
        request = next(r for r in recorded.requests if r.resource == resource)
        # The same request in another namespace is not allowed (a Role, not a ClusterRole).
        elsewhere = attrs.evolve(request, namespace="default")
        assert not allowed(elsewhere, RULES, scenario.MANAGER_NAMESPACE), resource
    for resource in ("secrets", "configmaps", "mutatingwebhookconfigurations"):
        request = next(r for r in recorded.requests
                       if r.resource == resource and r.verb == "get")
        # Granted by name only.
        assert not allowed(attrs.evolve(request, name="other"), RULES,
                           scenario.MANAGER_NAMESPACE), resource
