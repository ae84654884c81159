"""Contract: custom resources are validated against, and pruned to, their CRD schema."""

from __future__ import annotations

import pytest

from jobframework.runtime import errors
from jobframework.runtime.client import PatchType

from .conftest import WIDGET, Backend


async def test_schema_violation_is_invalid(widgets: Backend) -> None:
    with pytest.raises(errors.Invalid) as exc:
        await widgets.client.create(widgets.widget("w1", size=-1))
    assert exc.value.code == 422
    assert [c["field"] for c in exc.value.causes] == ["spec.size"]
    assert exc.value.message.startswith('Widget.example.com "w1" is invalid: spec.size: ')


async def test_wrong_type_is_invalid(widgets: Backend) -> None:
    with pytest.raises(errors.Invalid) as exc:
        await widgets.client.create(widgets.widget("w1", size="big"))
    assert [c["field"] for c in exc.value.causes] == ["spec.size"]


async def test_update_is_validated(widgets: Backend) -> None:
    obj = await widgets.client.create(widgets.widget("w1", size=1))
    obj["spec"]["size"] = -5
    with pytest.raises(errors.Invalid):
        await widgets.client.update(obj)
    with pytest.raises(errors.Invalid):
        await widgets.client.patch(WIDGET, "w1", {"spec": {"size": -5}},
                                   namespace=widgets.namespace)
    with pytest.raises(errors.Invalid):
        await widgets.client.patch(WIDGET, "w1", [
            {"op": "replace", "path": "/spec/size", "value": "x"}],
            namespace=widgets.namespace, patch_type=PatchType.JSON)


async def test_status_is_validated(widgets: Backend) -> None:
    obj = await widgets.client.create(widgets.widget("w1", size=1))
    obj["status"] = {"observedGeneration": "one"}
    with pytest.raises(errors.Invalid) as exc:
        await widgets.client.update_status(obj)
    assert [c["field"] for c in exc.value.causes] == ["status.observedGeneration"]


async def test_unknown_fields_are_pruned(widgets: Backend) -> None:
    obj = widgets.widget("w1", size=1, mystery="gone")
    obj["surprise"] = {"a": 1}
    created = await widgets.client.create(obj)
    assert created["spec"] == {"size": 1}
    assert "surprise" not in created
    patched = await widgets.client.patch(WIDGET, "w1", {"spec": {"extra": True, "size": 2}},
                                         namespace=widgets.namespace)
    assert patched["spec"] == {"size": 2}


async def test_duplicate_list_map_keys_are_invalid(widgets: Backend) -> None:
    obj = widgets.widget("w1", parts=[{"name": "a", "count": 1}, {"name": "a", "count": 2}])
    with pytest.raises(errors.Invalid) as exc:
        await widgets.client.create(obj)
    assert any(c["field"].startswith("spec.parts") for c in exc.value.causes)
