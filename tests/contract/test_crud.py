"""Contract: create, get, update, list; conflicts, generation and the status subresource."""

from __future__ import annotations

import re

import pytest

from jobframework.runtime import errors
from jobframework.runtime.objects import GVK

from .conftest import CONFIGMAP, GADGET, GADGET_CRD, WIDGET, Backend

CONFLICT_TAIL = ("the object has been modified; please apply your changes to the latest "
                 "version and try again")


async def test_create_stamps_system_fields(widgets: Backend) -> None:
    created = await widgets.client.create(widgets.widget("w1", size=1))
    meta = created["metadata"]
    assert meta["name"] == "w1"
    assert meta["namespace"] == widgets.namespace
    assert meta["uid"]
    assert int(meta["resourceVersion"]) > 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    assert meta["generation"] == 1
    assert created["spec"] == {"size": 1}
    assert created["apiVersion"] == "example.com/v1"
    assert created["kind"] == "Widget"


async def test_get_returns_what_was_created(widgets: Backend) -> None:
    created = await widgets.client.create(widgets.widget("w1", color="red"))
    got = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert got["spec"] == {"color": "red"}


async def test_returned_objects_are_copies(widgets: Backend) -> None:
    created = await widgets.client.create(widgets.widget("w1", color="red"))
    created["spec"]["color"] = "blue"
    got = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    assert got["spec"]["color"] == "red"
    got["spec"]["color"] = "green"
    again = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    assert again["spec"]["color"] == "red"


async def test_create_existing_name_is_already_exists(widgets: Backend) -> None:
    await widgets.client.create(widgets.widget("w1"))
    with pytest.raises(errors.AlreadyExists) as exc:
        await widgets.client.create(widgets.widget("w1"))
    assert exc.value.code == 409
    assert exc.value.message == 'widgets.example.com "w1" already exists'


async def test_get_missing_is_not_found(widgets: Backend) -> None:
    with pytest.raises(errors.NotFound) as exc:
        await widgets.client.get(WIDGET, "nope", namespace=widgets.namespace)
    assert exc.value.code == 404
    assert exc.value.message == 'widgets.example.com "nope" not found'


async def test_create_in_missing_namespace_is_not_found(widgets: Backend) -> None:
    obj = widgets.widget("w1")
    obj["metadata"]["namespace"] = "does-not-exist-ns"
    with pytest.raises(errors.NotFound) as exc:
        await widgets.client.create(obj)
    assert exc.value.message == 'namespaces "does-not-exist-ns" not found'


async def test_generate_name_appends_five_characters(widgets: Backend) -> None:
    obj = widgets.widget("")
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "gen-"
    first = await widgets.client.create(obj)
    second = await widgets.client.create(obj)
    for created in (first, second):
        assert re.fullmatch(r"gen-[a-z0-9]{5}", created["metadata"]["name"])
        assert created["metadata"]["generateName"] == "gen-"
    assert first["metadata"]["name"] != second["metadata"]["name"]


async def test_create_without_name_is_invalid(widgets: Backend) -> None:
    obj = widgets.widget("")
    del obj["metadata"]["name"]
    with pytest.raises(errors.Invalid) as exc:
        await widgets.client.create(obj)
    assert exc.value.code == 422
    assert any(c.get("field") == "metadata.name" for c in exc.value.causes)


async def test_create_with_invalid_name_is_invalid(widgets: Backend) -> None:
    with pytest.raises(errors.Invalid) as exc:
        await widgets.client.create(widgets.widget("Not_A_Name"))
    assert any(c.get("field") == "metadata.name" for c in exc.value.causes)


async def test_update_bumps_resource_version(widgets: Backend) -> None:
    created = await widgets.client.create(widgets.widget("w1", size=1))
    created["spec"]["size"] = 2
    updated = await widgets.client.update(created)
    assert int(updated["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"])
    assert updated["spec"]["size"] == 2
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]


async def test_update_with_stale_resource_version_conflicts(widgets: Backend) -> None:
    created = await widgets.client.create(widgets.widget("w1", size=1))
    first = dict(created, spec={"size": 2})
    await widgets.client.update(first)
    stale = dict(created, spec={"size": 3})
    with pytest.raises(errors.Conflict) as exc:
        await widgets.client.update(stale)
    assert exc.value.code == 409
    assert exc.value.message == (
        f'Operation cannot be fulfilled on widgets.example.com "w1": {CONFLICT_TAIL}')
    got = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    assert got["spec"]["size"] == 2


async def test_update_without_resource_version_is_unconditional_for_builtins(
    backend: Backend,
) -> None:
    created = await backend.client.create(backend.configmap("cm", v="1"))
    await backend.client.update(dict(created, data={"v": "2"}))
    updated = await backend.client.update(backend.configmap("cm", v="3"))
    assert updated["data"] == {"v": "3"}
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]


async def test_custom_resource_update_requires_resource_version(widgets: Backend) -> None:
    await widgets.client.create(widgets.widget("w1", size=1))
    with pytest.raises(errors.Invalid) as exc:
        await widgets.client.update(widgets.widget("w1", size=3))
    assert [c["field"] for c in exc.value.causes] == ["metadata.resourceVersion"]
    assert exc.value.message.endswith(
        '"w1" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for '
        "an update")
    blind_status = widgets.widget("w1")
    blind_status["status"] = {"phase": "x"}
    with pytest.raises(errors.Invalid):
        await widgets.client.update_status(blind_status)
    # A patch needs no resourceVersion: it applies to the latest state.
    patched = await widgets.client.patch(WIDGET, "w1", {"spec": {"size": 3}},
                                         namespace=widgets.namespace)
    assert patched["spec"]["size"] == 3


async def test_update_missing_is_not_found(widgets: Backend) -> None:
    with pytest.raises(errors.NotFound):
        await widgets.client.update(widgets.configmap("ghost"))


async def test_noop_update_keeps_resource_version(widgets: Backend) -> None:
    created = await widgets.client.create(widgets.widget("w1", size=1))
    same = await widgets.client.update(created)
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_generation_bumps_on_spec_change_only(widgets: Backend) -> None:
    obj = await widgets.client.create(widgets.widget("w1", size=1))
    assert obj["metadata"]["generation"] == 1
    obj["metadata"]["labels"] = {"team": "a"}
    obj["metadata"]["annotations"] = {"note": "x"}
    obj = await widgets.client.update(obj)
    assert obj["metadata"]["generation"] == 1
    obj["spec"]["size"] = 5
    obj = await widgets.client.update(obj)
    assert obj["metadata"]["generation"] == 2
    obj["status"] = {"phase": "Running"}
    obj = await widgets.client.update_status(obj)
    assert obj["metadata"]["generation"] == 2


async def test_generation_cannot_be_set_by_clients(widgets: Backend) -> None:
    obj = await widgets.client.create(widgets.widget("w1", size=1))
    obj["metadata"]["generation"] = 42
    obj = await widgets.client.update(obj)
    assert obj["metadata"]["generation"] == 1


async def test_create_drops_status_when_subresource_enabled(widgets: Backend) -> None:
    obj = widgets.widget("w1", size=1)
    obj["status"] = {"phase": "Done"}
    created = await widgets.client.create(obj)
    assert "status" not in created


async def test_main_update_ignores_status(widgets: Backend) -> None:
    obj = await widgets.client.create(widgets.widget("w1", size=1))
    obj["status"] = {"phase": "Running"}
    obj = await widgets.client.update_status(obj)
    obj["status"] = {"phase": "Hacked"}
    obj["spec"]["size"] = 2
    updated = await widgets.client.update(obj)
    assert updated["status"] == {"phase": "Running"}
    assert updated["spec"]["size"] == 2


async def test_status_update_ignores_everything_but_status(widgets: Backend) -> None:
    obj = await widgets.client.create(widgets.widget("w1", size=1))
    obj["spec"]["size"] = 99
    obj["metadata"]["labels"] = {"sneaky": "yes"}
    obj["status"] = {"phase": "Running", "observedGeneration": 1}
    updated = await widgets.client.update_status(obj)
    assert updated["status"] == {"phase": "Running", "observedGeneration": 1}
    assert updated["spec"]["size"] == 1
    assert "sneaky" not in (updated["metadata"].get("labels") or {})
    got = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    assert got["spec"]["size"] == 1
    assert got["status"]["phase"] == "Running"


async def test_status_update_with_stale_resource_version_conflicts(widgets: Backend) -> None:
    obj = await widgets.client.create(widgets.widget("w1", size=1))
    await widgets.client.update(dict(obj, spec={"size": 2}))
    obj["status"] = {"phase": "Running"}
    with pytest.raises(errors.Conflict):
        await widgets.client.update_status(obj)


async def test_update_with_subresource_argument_targets_status(widgets: Backend) -> None:
    obj = await widgets.client.create(widgets.widget("w1", size=1))
    obj["status"] = {"phase": "Done"}
    updated = await widgets.client.update(obj, subresource="status")
    assert updated["status"] == {"phase": "Done"}


async def test_without_status_subresource_status_is_an_ordinary_field(backend: Backend) -> None:
    await backend.install_crd(GADGET_CRD)
    obj = {"apiVersion": "example.com/v1", "kind": "Gadget",
           "metadata": {"name": f"g-{backend.namespace}"},
           "spec": {"a": 1}, "status": {"ok": True}}
    created = await backend.client.create(obj)
    try:
        assert created["status"] == {"ok": True}
        assert "namespace" not in created["metadata"]
        created["status"] = {"ok": False}
        updated = await backend.client.update(created)
        assert updated["status"] == {"ok": False}
        # Without a status subresource every non-metadata change is a new generation.
        assert updated["metadata"]["generation"] == 2
    finally:
        await backend.client.delete(GADGET, obj["metadata"]["name"])


async def test_list_namespace_and_label_selectors(widgets: Backend) -> None:
    for name, team in (("a", "x"), ("b", "y"), ("c", "x")):
        obj = widgets.widget(name)
        obj["metadata"]["labels"] = {"team": team}
        await widgets.client.create(obj)
    listed = await widgets.client.list(WIDGET, namespace=widgets.namespace)
    assert [o["metadata"]["name"] for o in listed.items] == ["a", "b", "c"]
    assert all(o["apiVersion"] == "example.com/v1" and o["kind"] == "Widget"
               for o in listed.items)
    selected = await widgets.client.list(WIDGET, namespace=widgets.namespace,
                                         label_selector="team=x")
    assert [o["metadata"]["name"] for o in selected.items] == ["a", "c"]
    selected = await widgets.client.list(WIDGET, namespace=widgets.namespace,
                                         label_selector="team in (y),team!=x")
    assert [o["metadata"]["name"] for o in selected.items] == ["b"]
    selected = await widgets.client.list(WIDGET, namespace=widgets.namespace,
                                         label_selector="!team")
    assert selected.items == []


async def test_list_field_selector_on_name_and_namespace(widgets: Backend) -> None:
    for name in ("a", "b"):
        await widgets.client.create(widgets.widget(name))
    selected = await widgets.client.list(WIDGET, namespace=widgets.namespace,
                                         field_selector="metadata.name=b")
    assert [o["metadata"]["name"] for o in selected.items] == ["b"]
    selected = await widgets.client.list(
        WIDGET, field_selector=f"metadata.namespace={widgets.namespace},metadata.name!=b")
    assert [o["metadata"]["name"] for o in selected.items] == ["a"]


async def test_list_resource_version_is_at_least_the_latest_write(widgets: Backend) -> None:
    created = await widgets.client.create(widgets.widget("a"))
    listed = await widgets.client.list(WIDGET, namespace=widgets.namespace)
    assert int(listed.resource_version) >= int(created["metadata"]["resourceVersion"])


async def test_list_all_namespaces_includes_other_namespaces(widgets: Backend) -> None:
    cm = widgets.configmap("cm-all-ns", k="v")
    await widgets.client.create(cm)
    listed = await widgets.client.list(CONFIGMAP)
    keys = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in listed.items}
    assert (widgets.namespace, "cm-all-ns") in keys


async def test_unknown_kind_is_rejected(backend: Backend) -> None:
    with pytest.raises(LookupError):
        await backend.client.get(GVK("example.com", "v1", "NoSuchKind"), "x",
                                 namespace=backend.namespace)


async def test_uid_is_a_precondition_of_update(widgets: Backend) -> None:
    obj = await widgets.client.create(widgets.widget("w1"))
    obj["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(errors.Conflict) as exc:
        await widgets.client.update(obj)
    assert "Precondition failed: UID in precondition" in exc.value.message


async def test_uid_cannot_be_patched(widgets: Backend) -> None:
    await widgets.client.create(widgets.widget("w1"))
    with pytest.raises(errors.Invalid) as exc:
        await widgets.client.patch(
            WIDGET, "w1", {"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}},
            namespace=widgets.namespace)
    assert any(c.get("field") == "metadata.uid" for c in exc.value.causes)


async def test_invalid_label_value_is_invalid(widgets: Backend) -> None:
    obj = widgets.widget("w1")
    obj["metadata"]["labels"] = {"team": "not valid!"}
    with pytest.raises(errors.Invalid) as exc:
        await widgets.client.create(obj)
    assert [c["field"] for c in exc.value.causes] == ["metadata.labels"]
    created = await widgets.client.create(widgets.widget("w2"))
    created["metadata"]["labels"] = {"x" * 64: "v"}
    with pytest.raises(errors.Invalid):
        await widgets.client.update(created)


async def test_two_controller_references_are_invalid(widgets: Backend) -> None:
    a = await widgets.client.create(widgets.widget("a"))
    b = await widgets.client.create(widgets.widget("b"))
    cm = widgets.configmap("cm")
    cm["metadata"]["ownerReferences"] = [
        {"apiVersion": "example.com/v1", "kind": "Widget", "name": o["metadata"]["name"],
         "uid": o["metadata"]["uid"], "controller": True} for o in (a, b)]
    with pytest.raises(errors.Invalid) as exc:
        await widgets.client.create(cm)
    assert [c["field"] for c in exc.value.causes] == ["metadata.ownerReferences"]


async def test_job_is_defaulted(backend: Backend) -> None:
    job = await backend.client.create({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "job", "namespace": backend.namespace},
        "spec": {"suspend": True, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}},
    })
    spec = job["spec"]
    assert (spec["parallelism"], spec["completions"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed"
    assert spec["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"] == job[
        "metadata"]["uid"]
    assert spec["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "job"
