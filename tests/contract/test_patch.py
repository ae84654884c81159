"""Contract: merge patch and JSON patch, on the main resource and the status subresource."""

from __future__ import annotations

import pytest

from jobframework.runtime import errors
from jobframework.runtime.client import PatchType

from .conftest import WIDGET, Backend


async def test_merge_patch_merges_and_deletes_with_null(widgets: Backend) -> None:
    obj = widgets.widget("w1", size=1, color="red")
    obj["metadata"]["labels"] = {"a": "1", "b": "2"}
    created = await widgets.client.create(obj)
    patched = await widgets.client.patch(
        WIDGET, "w1", {"metadata": {"labels": {"b": None, "c": "3"}},
                       "spec": {"color": None, "size": 2}},
        namespace=widgets.namespace)
    assert patched["metadata"]["labels"] == {"a": "1", "c": "3"}
    assert patched["spec"] == {"size": 2}
    assert patched["metadata"]["generation"] == 2
    assert int(patched["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"])


async def test_merge_patch_replaces_lists_whole(widgets: Backend) -> None:
    await widgets.client.create(widgets.widget("w1", tags=["a", "b"]))
    patched = await widgets.client.patch(WIDGET, "w1", {"spec": {"tags": ["c"]}},
                                         namespace=widgets.namespace)
    assert patched["spec"]["tags"] == ["c"]


async def test_patch_with_stale_resource_version_conflicts(widgets: Backend) -> None:
    created = await widgets.client.create(widgets.widget("w1", size=1))
    await widgets.client.patch(WIDGET, "w1", {"spec": {"size": 2}},
                               namespace=widgets.namespace)
    with pytest.raises(errors.Conflict):
        await widgets.client.patch(
            WIDGET, "w1",
            {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
             "spec": {"size": 3}},
            namespace=widgets.namespace)


async def test_json_patch(widgets: Backend) -> None:
    await widgets.client.create(widgets.widget("w1", size=1, tags=["a"]))
    patched = await widgets.client.patch(
        WIDGET, "w1",
        [{"op": "test", "path": "/spec/size", "value": 1},
         {"op": "replace", "path": "/spec/size", "value": 4},
         {"op": "add", "path": "/spec/tags/-", "value": "b"}],
        namespace=widgets.namespace, patch_type=PatchType.JSON)
    assert patched["spec"] == {"size": 4, "tags": ["a", "b"]}


async def test_json_patch_failed_test_is_rejected(widgets: Backend) -> None:
    await widgets.client.create(widgets.widget("w1", size=1))
    with pytest.raises(errors.ApiError) as exc:
        await widgets.client.patch(
            WIDGET, "w1",
            [{"op": "test", "path": "/spec/size", "value": 2},
             {"op": "replace", "path": "/spec/size", "value": 4}],
            namespace=widgets.namespace, patch_type=PatchType.JSON)
    assert exc.value.code == 422
    got = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    assert got["spec"]["size"] == 1


async def test_patch_missing_is_not_found(widgets: Backend) -> None:
    with pytest.raises(errors.NotFound):
        await widgets.client.patch(WIDGET, "ghost", {"spec": {"size": 1}},
                                   namespace=widgets.namespace)


async def test_patch_main_resource_ignores_status(widgets: Backend) -> None:
    await widgets.client.create(widgets.widget("w1", size=1))
    patched = await widgets.client.patch(
        WIDGET, "w1", {"status": {"phase": "Nope"}, "spec": {"size": 2}},
        namespace=widgets.namespace)
    assert "status" not in patched
    assert patched["spec"]["size"] == 2


async def test_patch_status_subresource(widgets: Backend) -> None:
    await widgets.client.create(widgets.widget("w1", size=1))
    patched = await widgets.client.patch(
        WIDGET, "w1",
        {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "reason": "Up", "message": "ok"}]},
         "spec": {"size": 9}},
        namespace=widgets.namespace, subresource="status")
    assert patched["status"]["phase"] == "Running"
    assert patched["spec"]["size"] == 1
    assert patched["metadata"]["generation"] == 1


async def test_strategic_merge_patch_is_unsupported_for_custom_resources(
    widgets: Backend,
) -> None:
    await widgets.client.create(widgets.widget("w1", size=1))
    with pytest.raises(errors.ApiError) as exc:
        await widgets.client.patch(WIDGET, "w1", {"spec": {"size": 2}},
                                   namespace=widgets.namespace,
                                   patch_type=PatchType.STRATEGIC)
    assert exc.value.code == 415
