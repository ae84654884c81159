"""Contract: delete, finalizers, preconditions, propagation and garbage collection."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.runtime.client import Preconditions, PropagationPolicy
from jobframework.runtime.objects import owner_reference

from .conftest import CONFIGMAP, JOB, NAMESPACE, WIDGET, Backend

FINALIZER = "example.com/hold"


async def exists(backend: Backend, gvk: Any, name: str) -> bool:
    try:
        await backend.client.get(gvk, name, namespace=backend.namespace)
    except errors.NotFound:
        return False
    return True


async def owned_configmap(
    backend: Backend, name: str, *owners: dict[str, Any], block: bool = True,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    cm = backend.configmap(name, k="v")
    cm["metadata"]["ownerReferences"] = [
        owner_reference(o, controller=i == 0, block_owner_deletion=block)
        for i, o in enumerate(owners)]
    if finalizers:
        cm["metadata"]["finalizers"] = finalizers
    return await backend.client.create(cm)


async def test_delete_removes_object(widgets: Backend) -> None:
    await widgets.client.create(widgets.widget("w1"))
    await widgets.client.delete(WIDGET, "w1", namespace=widgets.namespace)
    assert not await exists(widgets, WIDGET, "w1")


async def test_delete_missing_is_not_found(widgets: Backend) -> None:
    with pytest.raises(errors.NotFound):
        await widgets.client.delete(WIDGET, "ghost", namespace=widgets.namespace)


async def test_finalizers_hold_object_until_removed(widgets: Backend) -> None:
    obj = widgets.widget("w1", size=1)
    obj["metadata"]["finalizers"] = [FINALIZER]
    created = await widgets.client.create(obj)
    remaining = await widgets.client.delete(WIDGET, "w1", namespace=widgets.namespace)
    assert remaining is not None
    held = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    meta = held["metadata"]
    assert meta["deletionTimestamp"]
    assert meta["deletionGracePeriodSeconds"] == 0
    assert meta["finalizers"] == [FINALIZER]
    # Marking for deletion is a change of the object's generation.
    assert meta["generation"] == created["metadata"]["generation"] + 1
    # Deleting again does not move the deletion timestamp.
    await widgets.client.delete(WIDGET, "w1", namespace=widgets.namespace)
    again = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    assert again["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]
    held["metadata"]["finalizers"] = []
    await widgets.client.update(held)
    assert not await exists(widgets, WIDGET, "w1")


async def test_no_new_finalizers_while_deleting(widgets: Backend) -> None:
    obj = widgets.widget("w1")
    obj["metadata"]["finalizers"] = [FINALIZER]
    await widgets.client.create(obj)
    await widgets.client.delete(WIDGET, "w1", namespace=widgets.namespace)
    held = await widgets.client.get(WIDGET, "w1", namespace=widgets.namespace)
    held["metadata"]["finalizers"] = [FINALIZER, "example.com/another"]
    with pytest.raises(errors.Invalid):
        await widgets.client.update(held)
    held["metadata"]["finalizers"] = []
    await widgets.client.update(held)


async def test_delete_preconditions(widgets: Backend) -> None:
    created = await widgets.client.create(widgets.widget("w1"))
    meta = created["metadata"]
    with pytest.raises(errors.Conflict):
        await widgets.client.delete(WIDGET, "w1", namespace=widgets.namespace,
                                    preconditions=Preconditions(uid="not-the-uid"))
    updated = await widgets.client.update(dict(created, spec={"size": 3}))
    with pytest.raises(errors.Conflict):
        await widgets.client.delete(
            WIDGET, "w1", namespace=widgets.namespace,
            preconditions=Preconditions(resource_version=meta["resourceVersion"]))
    assert await exists(widgets, WIDGET, "w1")
    await widgets.client.delete(
        WIDGET, "w1", namespace=widgets.namespace,
        preconditions=Preconditions(uid=meta["uid"],
                                    resource_version=updated["metadata"]["resourceVersion"]))
    assert not await exists(widgets, WIDGET, "w1")


async def test_background_deletion_collects_dependents(widgets: Backend) -> None:
    owner = await widgets.client.create(widgets.widget("owner"))
    await owned_configmap(widgets, "dep", owner)
    await widgets.client.delete(WIDGET, "owner", namespace=widgets.namespace,
                                propagation_policy=PropagationPolicy.BACKGROUND)
    assert not await exists(widgets, WIDGET, "owner")

    async def dependent_gone() -> None:
        assert not await exists(widgets, CONFIGMAP, "dep")

    await widgets.eventually(dependent_gone)


async def test_default_propagation_collects_dependents_of_custom_resources(
    widgets: Backend,
) -> None:
    owner = await widgets.client.create(widgets.widget("owner"))
    await owned_configmap(widgets, "dep", owner)
    await widgets.client.delete(WIDGET, "owner", namespace=widgets.namespace)

    async def dependent_gone() -> None:
        assert not await exists(widgets, CONFIGMAP, "dep")

    await widgets.eventually(dependent_gone)


async def test_dependent_with_another_live_owner_survives(widgets: Backend) -> None:
    first = await widgets.client.create(widgets.widget("first"))
    second = await widgets.client.create(widgets.widget("second"))
    await owned_configmap(widgets, "dep", first, second)
    await widgets.client.delete(WIDGET, "first", namespace=widgets.namespace)

    async def reference_dropped() -> None:
        dep = await widgets.client.get(CONFIGMAP, "dep", namespace=widgets.namespace)
        refs = dep["metadata"].get("ownerReferences") or []
        assert [r["name"] for r in refs] == ["second"]

    await widgets.eventually(reference_dropped)


async def test_dangling_owner_reference_is_collected(widgets: Backend) -> None:
    ghost = widgets.widget("ghost")
    ghost["metadata"]["uid"] = "11111111-2222-3333-4444-555555555555"
    await owned_configmap(widgets, "orphaned", ghost, block=False)

    async def collected() -> None:
        assert not await exists(widgets, CONFIGMAP, "orphaned")

    await widgets.eventually(collected)


async def test_foreground_deletion_waits_for_blocking_dependents(widgets: Backend) -> None:
    owner = await widgets.client.create(widgets.widget("owner"))
    await owned_configmap(widgets, "dep", owner, finalizers=[FINALIZER])
    await widgets.client.delete(WIDGET, "owner", namespace=widgets.namespace,
                                propagation_policy=PropagationPolicy.FOREGROUND)

    async def dependent_deleting() -> None:
        dep = await widgets.client.get(CONFIGMAP, "dep", namespace=widgets.namespace)
        assert dep["metadata"].get("deletionTimestamp")

    await widgets.eventually(dependent_deleting)
    held = await widgets.client.get(WIDGET, "owner", namespace=widgets.namespace)
    assert held["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in held["metadata"]["finalizers"]

    dep = await widgets.client.get(CONFIGMAP, "dep", namespace=widgets.namespace)
    dep["metadata"]["finalizers"] = []
    await widgets.client.update(dep)

    async def owner_gone() -> None:
        assert not await exists(widgets, WIDGET, "owner")

    await widgets.eventually(owner_gone)
    assert not await exists(widgets, CONFIGMAP, "dep")


async def test_orphan_deletion_keeps_dependents(widgets: Backend) -> None:
    owner = await widgets.client.create(widgets.widget("owner"))
    await owned_configmap(widgets, "dep", owner)
    await widgets.client.delete(WIDGET, "owner", namespace=widgets.namespace,
                                propagation_policy=PropagationPolicy.ORPHAN)

    async def orphaned() -> None:
        assert not await exists(widgets, WIDGET, "owner")
        dep = await widgets.client.get(CONFIGMAP, "dep", namespace=widgets.namespace)
        assert not dep["metadata"].get("ownerReferences")

    await widgets.eventually(orphaned)


async def test_batch_v1_job_orphans_dependents_by_default(backend: Backend) -> None:
    job = await backend.client.create({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "job", "namespace": backend.namespace},
        "spec": {"suspend": True, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}},
    })
    await owned_configmap(backend, "dep", job, block=False)
    await backend.client.delete(JOB, "job", namespace=backend.namespace)

    async def orphaned() -> None:
        assert not await exists(backend, JOB, "job")
        dep = await backend.client.get(CONFIGMAP, "dep", namespace=backend.namespace)
        assert not dep["metadata"].get("ownerReferences")

    await backend.eventually(orphaned)


async def test_deleting_namespace_removes_its_content(widgets: Backend) -> None:
    ns = f"{widgets.namespace}-gone"
    await widgets.client.create({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": ns}})
    held = widgets.configmap("held")
    held["metadata"]["namespace"] = ns
    held["metadata"]["finalizers"] = [FINALIZER]
    await widgets.client.create(held)
    plain = widgets.configmap("plain")
    plain["metadata"]["namespace"] = ns
    await widgets.client.create(plain)
    await widgets.client.delete(NAMESPACE, ns)

    async def content_deleting() -> None:
        with pytest.raises(errors.NotFound):
            await widgets.client.get(CONFIGMAP, "plain", namespace=ns)
        obj = await widgets.client.get(CONFIGMAP, "held", namespace=ns)
        assert obj["metadata"].get("deletionTimestamp")

    await widgets.eventually(content_deleting, attempts=300)
    terminating = await widgets.client.get(NAMESPACE, ns)
    assert terminating["metadata"].get("deletionTimestamp")
    assert terminating["status"]["phase"] == "Terminating"
    with pytest.raises(errors.Forbidden):
        await widgets.client.create(dict(widgets.configmap("late"),
                                         metadata={"name": "late", "namespace": ns}))
    obj = await widgets.client.get(CONFIGMAP, "held", namespace=ns)
    obj["metadata"]["finalizers"] = []
    await widgets.client.update(obj)

    async def namespace_gone() -> None:
        with pytest.raises(errors.NotFound):
            await widgets.client.get(NAMESPACE, ns)

    await widgets.eventually(namespace_gone, attempts=300)
