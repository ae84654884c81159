"""The demo's follower for DaemonJobs and AppWrappers, on the in-memory server."""

from __future__ import annotations

import asyncio
from typing import Any

from integrations.demo.kinds import Tracked, run_tracked, tracked_table
from integrations.demo.others import FAIL_ANNOTATION, appwrapper_items
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import APIServer
from jobframework.workload import WORKLOAD_GVK

WIDGET = GVK("example.com", "v1", "Widget")


def _crd() -> Object:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                           "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def _widget(name: str) -> Object:
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"}, "spec": {}}


def _tracked(name: str, expected: str = "Done") -> Tracked:
    return Tracked(gvk=WIDGET, obj=_widget(name),
                   state=lambda o: str((o.get("status") or {}).get("phase") or ""),
                   expected=expected, terminal=frozenset({"Done", "Broken"}),
                   detail=lambda o: str((o.get("status") or {}).get("note") or ""))


async def test_run_tracked_reports_changes_and_end_states() -> None:
    server = APIServer(ManualClock())
    server.register_crd(_crd())
    server.register_kind(WORKLOAD_GVK, "workloads", True)
    api = server.client()
    lines: list[str] = []

    async def drive() -> None:
        # Wait until both exist, then move them along.
        for _ in range(10_000):
            if len((await api.list(WIDGET, namespace="default")).items) == 2:
                break
            await asyncio.sleep(0)
        for name, phases in (("a", ["Running", "Done"]), ("b", ["Broken"])):
            for phase in phases:
                obj = await api.get(WIDGET, name, namespace="default")
                obj["status"] = {"phase": phase, "note": f"{name} says {phase}"}
                await api.update_status(obj)
                await asyncio.sleep(0.01)

    driver = asyncio.create_task(drive())
    results = await run_tracked(api, [_tracked("a"), _tracked("b")], limit=10,
                                poll_interval=0.005, say=lines.append)
    await driver
    by_label = {r.label: r for r in results}
    assert by_label["Widget/a"].ok and by_label["Widget/a"].took is not None
    assert not by_label["Widget/b"].ok and by_label["Widget/b"].state == "Broken"
    assert "Widget/a: created" in lines
    assert "Widget/b: Broken (b says Broken)" in lines
    assert lines.index("Widget/a: Done (a says Done)") > lines.index("Widget/a: created")
    table = tracked_table(results)
    assert table.splitlines()[0].split() == ["OBJECT", "STATE", "EXPECTED", "CLUSTERQUEUE",
                                             "FLAVORS", "TOOK"]
    assert "Widget/b  Broken" in table


async def test_a_rejected_object_is_reported_not_followed() -> None:
    server = APIServer(ManualClock())  # no CRD: the create fails
    lines: list[str] = []
    results = await run_tracked(server.client(), [_tracked("x")], limit=1,
                                poll_interval=0.01, say=lines.append)
    assert results[0].rejected and not results[0].ok
    assert lines[0].startswith("Widget/x: REJECTED: ")


def _aw(name: str, *templates: dict[str, Any]) -> Object:
    return {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
            "metadata": {"name": name},
            "spec": {"components": [{"template": t} for t in templates]}}


def test_appwrapper_items_expectations() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"spec": {"containers": []}}}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
              "spec": {}}
    ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
           "spec": {}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}}
    samples = {"wrapped-job.yaml": [_aw("j", job)],
               "wrapped-failing-job.yaml": [_aw("f", job)],
               "wrapped-deployment.yaml": [_aw("d", deploy, service)],
               "wrapped-ray.yaml": [_aw("r", ray)]}
    items, skipped = appwrapper_items(samples, "ns", "q")
    expected = {i.name: i.expected for i in items}
    assert expected == {"j": "Succeeded", "f": "Failed", "d": "Running"}
    assert "RayCluster" in skipped["wrapped-ray.yaml"]
    failing = next(i for i in items if i.name == "f")
    pod_meta = failing.obj["spec"]["components"][0]["template"]["spec"]["template"]["metadata"]
    assert pod_meta["annotations"][FAIL_ANNOTATION] == "true"
    assert failing.obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    # The samples themselves are left as shipped.
    assert "metadata" not in samples["wrapped-failing-job.yaml"][0]["spec"]["components"][0][
        "template"]["spec"]["template"]
