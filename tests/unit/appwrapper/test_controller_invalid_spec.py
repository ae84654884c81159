"""An AppWrapper written while the validating webhook was not called (its configuration
removed): the first phase checks the components against the webhook's rules and fails
the AppWrapper at once, with upstream's ``CreateFailed`` condition and event naming the
fields; nothing is created, nothing retried."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from integrations.appwrapper.api import APPWRAPPER_GVK, MAX_POD_SETS, AppWrapperCondition

from .controller_helpers import (
    NS,
    POD_GVK,
    Harness,
    appwrapper,
    harness_fixture,  # noqa: F401  (fixture "h")
    pod,
    pod_template,
    server_fixture,  # noqa: F401  (fixture "server")
)

UH = AppWrapperCondition.UNHEALTHY
QR = AppWrapperCondition.QUOTA_RESERVED
PREFIX = "error creating components: invalid spec: "


def nested() -> dict[str, Any]:
    component = pod("p1")
    component["template"].update(apiVersion=APPWRAPPER_GVK.api_version, kind="AppWrapper")
    return component


def elsewhere() -> dict[str, Any]:
    component = pod("p1")
    component["template"]["metadata"]["namespace"] = "other"
    return component


def bad_path() -> dict[str, Any]:
    component = pod("p1")
    component["podSets"] = [{"path": "template.spec.nope", "replicas": 1}]
    return component


def old_kuberay_cluster() -> dict[str, Any]:
    """A ``ray.io/v1alpha1`` RayCluster of 100 workers with 8 GPUs each, declared as
    one pod: a known kind in a version inference does not know."""
    head = pod_template("head")
    worker = pod_template("worker", gpus=8)
    spec = {"headGroupSpec": {"template": {"spec": head["spec"]}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 100,
                                  "template": {"spec": worker["spec"]}}]}
    return {"template": {"apiVersion": "ray.io/v1alpha1", "kind": "RayCluster",
                         "metadata": {"name": "rc"}, "spec": spec},
            "podSets": [{"replicas": 1, "path": "template.spec.headGroupSpec.template"}]}


@pytest.mark.parametrize(("components", "detail"), [
    ([nested()], "spec.components[0].template: Forbidden: Nested AppWrappers are forbidden"),
    ([elsewhere()], "spec.components[0].template.metadata.namespace: Forbidden: AppWrappers "
                    "cannot create objects in other namespaces"),
    ([bad_path()], "spec.components[0].podSets[0].path: Invalid value: "
                   '"template.spec.nope": path does not refer to a v1.PodSpecTemplate: '),
    ([old_kuberay_cluster()], "spec.components[0].template.apiVersion: Unsupported value: "
                              '"ray.io/v1alpha1": supported values: "ray.io/v1"'),
    ([], "spec.components: Invalid value: components contains no podspecs"),
    ([pod(f"p{i}") for i in range(MAX_POD_SETS + 1)],
     "spec.components: Invalid value: components contains 9 podspecs; at most 8 are allowed"),
], ids=["nested", "namespace", "path", "version", "none", "too-many"])
async def test_first_phase_fails_an_invalid_appwrapper(
        h: Harness, components: list[dict[str, Any]], detail: str) -> None:
    await h.create(appwrapper("aw", *components, suspend=False))
    assert (await h.reconcile()).is_zero()
    aw = await h.get()
    assert aw["status"]["phase"] == "Failed"
    assert "componentStatus" not in aw["status"]
    cond = await h.cond(UH)
    assert (cond["status"], cond["reason"]) == ("True", "CreateFailed")
    assert cond["message"].startswith(PREFIX + detail) or \
        cond["message"].startswith(f"{PREFIX}[{detail}"), cond["message"]
    # Upstream's event for a CreateFailed (every upstream event is Normal).
    assert h.recorder.events == [("Normal", "CreateFailed", "Unhealthy", cond["message"])]
    # Failed is terminal: no finalizer was added, nothing is created, the quota is not held.
    await h.reconcile()
    aw = await h.get()
    assert aw["status"]["phase"] == "Failed"
    assert (await h.cond(QR))["status"] == "False"
    assert "finalizers" not in aw["metadata"]
    assert h.server.objects(POD_GVK, NS) == []
    assert len(h.recorder.events) == 1


async def test_a_kind_not_served_yet_is_left_to_creation(h: Harness) -> None:
    """Not checked in the first phase: its CRD may be installed before admission (if not,
    creating it fails the AppWrapper, as upstream)."""
    component = pod("p1")
    component["template"].update(apiVersion="example.com/v1", kind="Widget")
    component["podSets"] = [{"path": "template", "replicas": 1}]
    await h.create(appwrapper("aw", copy.deepcopy(component)))
    await h.reconcile()
    assert await h.phase() == "Suspended"
