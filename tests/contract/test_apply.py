"""Contract: server-side apply (field managers, conflicts, force, keyed lists, status)."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.runtime.client import PatchType

from .conftest import WIDGET, Backend


def managers(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e
            for e in obj["metadata"].get("managedFields") or []}


def applied(backend: Backend, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": backend.namespace}, "spec": dict(spec)}


async def test_apply_creates_and_records_manager(widgets: Backend) -> None:
    obj = await widgets.client.apply(applied(widgets, "w1", size=1), field_manager="alice")
    assert obj["spec"] == {"size": 1}
    assert obj["metadata"]["generation"] == 1
    entry = managers(obj)[("alice", "Apply", "")]
    assert entry["apiVersion"] == "example.com/v1"
    assert entry["fieldsType"] == "FieldsV1"
    assert entry["fieldsV1"]["f:spec"] == {"f:size": {}}


async def test_apply_conflicts_between_managers_and_force(widgets: Backend) -> None:
    await widgets.client.apply(applied(widgets, "w1", size=1), field_manager="alice")
    with pytest.raises(errors.Conflict) as exc:
        await widgets.client.apply(applied(widgets, "w1", size=2), field_manager="bob")
    assert exc.value.message.startswith("Apply failed with 1 conflict: ")
    assert '"alice"' in exc.value.message
    assert ".spec.size" in exc.value.message
    forced = await widgets.client.apply(applied(widgets, "w1", size=2), field_manager="bob",
                                        force=True)
    assert forced["spec"]["size"] == 2
    owners = managers(forced)
    assert ("bob", "Apply", "") in owners
    assert ("alice", "Apply", "") not in owners  # alice owned nothing else


async def test_same_value_is_shared_without_conflict(widgets: Backend) -> None:
    await widgets.client.apply(applied(widgets, "w1", size=1), field_manager="alice")
    shared = await widgets.client.apply(applied(widgets, "w1", size=1), field_manager="bob")
    owners = managers(shared)
    assert ("alice", "Apply", "") in owners and ("bob", "Apply", "") in owners


async def test_apply_removes_fields_no_longer_applied(widgets: Backend) -> None:
    await widgets.client.apply(applied(widgets, "w1", size=1, color="red"),
                               field_manager="alice")
    obj = await widgets.client.apply(applied(widgets, "w1", size=1), field_manager="alice")
    assert obj["spec"] == {"size": 1}


async def test_apply_keeps_fields_of_other_managers(widgets: Backend) -> None:
    await widgets.client.apply(applied(widgets, "w1", size=1), field_manager="alice")
    await widgets.client.apply(applied(widgets, "w1", color="red"), field_manager="bob")
    obj = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    assert obj["spec"] == {"size": 1, "color": "red"}


async def test_update_then_apply_conflicts_with_updater(widgets: Backend) -> None:
    created = await widgets.client.create(widgets.widget("w1", size=1),
                                          field_manager="editor")
    assert ("editor", "Update", "") in managers(created)
    with pytest.raises(errors.Conflict):
        await widgets.client.apply(applied(widgets, "w1", size=5), field_manager="alice")
    obj = await widgets.client.patch(WIDGET, "w1", applied(widgets, "w1", size=5),
                                     namespace=widgets.namespace,
                                     patch_type=PatchType.APPLY, field_manager="alice",
                                     force=True)
    assert obj["spec"]["size"] == 5


async def test_keyed_list_items_merge_by_key(widgets: Backend) -> None:
    await widgets.client.apply(applied(widgets, "w1", parts=[{"name": "a", "count": 1}]),
                               field_manager="alice")
    obj = await widgets.client.apply(applied(widgets, "w1", parts=[{"name": "b", "count": 2}]),
                                     field_manager="bob")
    assert sorted((p["name"], p["count"]) for p in obj["spec"]["parts"]) == [
        ("a", 1), ("b", 2)]


async def test_status_apply_with_conditions_by_type(widgets: Backend) -> None:
    await widgets.client.apply(applied(widgets, "w1", size=1), field_manager="alice")
    status_a = {"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w1", "namespace": widgets.namespace},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    status_b = {"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w1", "namespace": widgets.namespace},
                "status": {"conditions": [{"type": "Admitted", "status": "True"}]}}
    await widgets.client.apply(status_a, field_manager="ctrl-a", subresource="status")
    obj = await widgets.client.apply(status_b, field_manager="ctrl-b", subresource="status")
    assert sorted(c["type"] for c in obj["status"]["conditions"]) == ["Admitted", "Ready"]
    assert ("ctrl-a", "Apply", "status") in managers(obj)
    assert obj["spec"] == {"size": 1}
    assert obj["metadata"]["generation"] == 1
    # A main-resource apply cannot touch status.
    main = applied(widgets, "w1", size=1)
    main["status"] = {"phase": "Ignored"}
    obj = await widgets.client.apply(main, field_manager="alice")
    assert "phase" not in obj["status"]


async def test_apply_requires_field_manager(widgets: Backend) -> None:
    with pytest.raises(errors.ApiError) as exc:
        await widgets.client.patch(WIDGET, "w1", applied(widgets, "w1", size=1),
                                   namespace=widgets.namespace, patch_type=PatchType.APPLY)
    assert exc.value.code in (400, 422)


async def test_apply_to_missing_status_is_not_found(widgets: Backend) -> None:
    status = {"apiVersion": "example.com/v1", "kind": "Widget",
              "metadata": {"name": "ghost", "namespace": widgets.namespace},
              "status": {"phase": "x"}}
    with pytest.raises(errors.NotFound):
        await widgets.client.apply(status, field_manager="ctrl", subresource="status")


async def test_status_apply_with_stale_resource_version_conflicts(widgets: Backend) -> None:
    # The update's resourceVersion precondition is checked before the status strategy
    # copies everything but status from the stored object: a stale one is a 409.
    first = await widgets.client.apply(applied(widgets, "w1", size=1), field_manager="alice")
    stale = first["metadata"]["resourceVersion"]
    await widgets.client.apply(applied(widgets, "w1", size=2), field_manager="alice")
    status = {"apiVersion": "example.com/v1", "kind": "Widget",
              "metadata": {"name": "w1", "namespace": widgets.namespace,
                           "resourceVersion": stale},
              "status": {"phase": "Stale"}}
    with pytest.raises(errors.Conflict) as exc:
        await widgets.client.apply(status, field_manager="ctrl", subresource="status")
    assert "the object has been modified" in exc.value.message
    obj = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    assert "phase" not in (obj.get("status") or {})
    # With the current resourceVersion the same apply goes through (and the version the
    # status write sends is not stored over the new one).
    status["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
    written = await widgets.client.apply(status, field_manager="ctrl", subresource="status")
    assert written["status"]["phase"] == "Stale"
    assert int(written["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
    assert written["spec"] == {"size": 2}


async def test_status_apply_ignores_the_metadata_it_carries(widgets: Backend) -> None:
    # Kueue's status applies carry the Workload's uid, generation, labels and annotations:
    # none of them is written, checked or owned through the status subresource.
    main = applied(widgets, "w1", size=1)
    main["metadata"].update(labels={"a": "1"}, annotations={"n": "x"})
    first = await widgets.client.apply(main, field_manager="alice")
    meta = first["metadata"]
    status = {"apiVersion": "example.com/v1", "kind": "Widget",
              "metadata": {"name": "w1", "namespace": widgets.namespace,
                           "uid": "00000000-0000-0000-0000-000000000000", "generation": 7,
                           "labels": {"a": "2", "b": "2"}, "annotations": {"n": "y"},
                           "resourceVersion": meta["resourceVersion"]},
              "status": {"phase": "P"}}
    out = await widgets.client.apply(status, field_manager="ctrl", subresource="status")
    assert out["status"] == {"phase": "P"}
    assert (out["metadata"]["uid"], out["metadata"]["generation"]) == (meta["uid"], 1)
    assert out["metadata"]["labels"] == {"a": "1"}
    assert out["metadata"]["annotations"] == {"n": "x"}
    assert managers(out)[("ctrl", "Apply", "status")]["fieldsV1"] == {
        "f:status": {"f:phase": {}}}
