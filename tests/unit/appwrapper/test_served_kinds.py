"""Components of kinds the cluster does not serve, before and after their CRD exists, as
upstream v1.2.2 handles them (issue #28, item 9): an AppWrapper may be applied before
the CRD of a kind it wraps (GitOps tools apply in any order); a component whose kind
stops being served while Running is an error retried with backoff, not a failure."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.appwrapper.api import APPWRAPPER_GVK, AppWrapperCondition
from integrations.appwrapper.webhook import AppWrapperWebhook
from jobframework.runtime.client.discovery import NoKindMatchError
from jobframework.runtime.objects import GVK, Object
from jobframework.testing.authorization import Authorizer, AuthorizingClient
from jobframework.webhook import admission_hook, with_custom_defaulter, with_custom_validator

from .controller_helpers import (
    NS,
    Harness,
    appwrapper,
    harness_fixture,  # noqa: F401  (fixture "h")
    pod,
    server_fixture,  # noqa: F401  (fixture "server")
)

CRD_GVK = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
WIDGET = GVK("example.com", "v1", "Widget")
UH = AppWrapperCondition.UNHEALTHY
RD = AppWrapperCondition.RESOURCES_DEPLOYED
QR = AppWrapperCondition.QUOTA_RESERVED


def widget_crd() -> Object:
    """The CRD of ``example.com/v1`` Widget, as a GitOps tool would apply it."""
    return {"apiVersion": CRD_GVK.api_version, "kind": CRD_GVK.kind,
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "Widget", "plural": "widgets", "singular": "widget",
                               "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


def widget() -> dict[str, Any]:
    """A Widget component: no pod template of its own (not inferable, no PodSets)."""
    return {"template": {"apiVersion": WIDGET.api_version, "kind": WIDGET.kind,
                         "metadata": {"name": "w"}, "spec": {"size": 1}},
            "podSets": []}


def with_webhook(h: Harness) -> Authorizer:
    """Upstream's webhook on the harness's server (no rules: everyone may do anything)."""
    authorizer = Authorizer()
    hook = AppWrapperWebhook(AuthorizingClient(h.server.client(), authorizer))  # type: ignore[arg-type]
    rules = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [APPWRAPPER_GVK.group],
              "apiVersions": [APPWRAPPER_GVK.version], "resources": ["appwrappers"]}]
    h.server.add_mutating_webhook(admission_hook(with_custom_defaulter(hook)), rules=rules)
    h.server.add_validating_webhook(admission_hook(with_custom_validator(hook)), rules=rules)
    return authorizer


async def test_appwrapper_applied_before_the_crd_runs_once_the_crd_is_installed(
        h: Harness) -> None:
    """The webhook accepts the Widget before its CRD exists; the CRD is applied while
    the AppWrapper waits for admission; admitted, the Widget is created and the
    AppWrapper runs."""
    authorizer = with_webhook(h)
    await h.create(appwrapper("aw", pod("p1"), widget()))
    assert authorizer.reviews[-1]["resourceAttributes"]["resource"] == "*"
    await h.reconcile()
    assert await h.phase() == "Suspended"
    await h.api.create(widget_crd())
    await h.admit([{}])
    await h.reconcile()  # Suspended → Resuming
    await h.reconcile()  # Resuming: both components created
    assert await h.phase() == "Running"
    created = await h.api.get(WIDGET, "w", namespace=NS)
    assert created["metadata"]["ownerReferences"][0]["name"] == "aw"
    await h.delete_and_finalize()


async def test_appwrapper_admitted_before_the_crd_fails_naming_the_kind(h: Harness) -> None:
    """Admitted while the kind is still not served: the create is fatal (NoKindMatch),
    as upstream: Failed with ``CreateFailed`` naming the kind."""
    with_webhook(h)
    await h.create(appwrapper("aw", pod("p1"), widget()))
    await h.reconcile()
    await h.admit([{}])
    await h.reconcile()
    await h.reconcile()
    assert await h.phase() == "Failed"
    cond = await h.cond(UH)
    assert (cond["reason"], cond["message"]) == (
        "CreateFailed",
        'error creating components: no matches for kind "Widget" in version "example.com/v1"')


async def running_with_a_widget(h: Harness) -> None:
    await h.api.create(widget_crd())
    await h.advance_to_resuming("aw", pod("p1"), widget())
    await h.reconcile()
    assert await h.phase() == "Running"
    await h.api.delete(CRD_GVK, "widgets.example.com")  # and every Widget with it
    await h.server.settle()


async def test_a_component_whose_kind_is_no_longer_served_is_retried(h: Harness) -> None:
    """While the kind is not served the pass fails (retried with backoff by the
    controller), the AppWrapper stays Running with its quota and records nothing; once
    the CRD is back, the Widget its removal deleted is missing: Failed."""
    await running_with_a_widget(h)
    for _ in range(3):
        with pytest.raises(NoKindMatchError):
            await h.reconcile()
    assert await h.phase() == "Running"
    assert await h.is_true(QR) and not await h.is_true(UH)
    assert h.events() == []

    await h.api.create(widget_crd())
    await h.reconcile()
    assert await h.phase() == "Failed"
    assert h.events() == [("Normal", "MissingComponent", "Unhealthy",
                           "Only found 1 deployed components, but was expecting 2")]


async def test_an_appwrapper_whose_component_kind_is_gone_can_still_be_suspended(
        h: Harness) -> None:
    """Kueue's suspension is read before the components: the AppWrapper is undeployed,
    the component of the unserved kind counting as gone, and the quota released."""
    await running_with_a_widget(h)
    await h.suspend()
    await h.reconcile()  # Running → Suspending
    await h.reconcile()  # deletes the pod; the Widget cannot exist any more
    await h.server.settle()
    await h.reconcile()
    assert await h.phase() == "Suspended"
    assert not await h.is_true(RD) and not await h.is_true(QR)
    cs = (await h.get())["status"]["componentStatus"][1]
    assert cs["conditions"][0]["reason"] == "CompononetDeleted"
