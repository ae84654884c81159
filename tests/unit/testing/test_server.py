"""Server specifics: registration, CRDs, namespaces, dry run, GC corner cases."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from jobframework.runtime import errors
from jobframework.runtime.client import Client, PropagationPolicy
from jobframework.runtime.objects import GVK, owner_reference
from jobframework.testing import APIServer, InMemoryClient, ManualClock, NoKindMatchError

from .conftest import CONFIGMAP, WIDGET, WIDGET_CRD, configmap, turns, widget

NAMESPACE = GVK("", "v1", "Namespace")
CRD = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")


def test_client_satisfies_protocol(client: InMemoryClient) -> None:
    assert isinstance(client, Client)


async def test_builtins_and_default_namespace() -> None:
    server = APIServer()
    client = server.client()
    ns = await client.get(NAMESPACE, "default")
    assert ns["status"]["phase"] == "Active"
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    kinds = {m.gvk.kind for m in server.resources()}
    assert {"Namespace", "Pod", "Node", "ConfigMap", "Secret", "ServiceAccount", "Event",
            "Job", "Deployment", "Lease", "PriorityClass", "CustomResourceDefinition",
            "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} <= kinds
    events = [m for m in server.resources() if m.gvk.kind == "Event"]
    assert {m.gvk.group for m in events} == {"", "events.k8s.io"}


async def test_rest_mapper(server: APIServer) -> None:
    mapping = await server.rest_mapper.rest_mapping(WIDGET)
    assert mapping.resource.resource == "widgets"
    assert mapping.namespaced
    assert mapping.subresources == frozenset({"status"})
    with pytest.raises(NoKindMatchError):
        await server.rest_mapper.rest_mapping(GVK("x.io", "v1", "Nope"))


async def test_register_kind_without_status(server: APIServer, client: InMemoryClient) -> None:
    gvk = GVK("things.io", "v1", "Thing")
    server.register_kind(gvk, "things", False, status_subresource=False)
    created = await client.create({"apiVersion": "things.io/v1", "kind": "Thing",
                                   "metadata": {"name": "t", "namespace": "ignored"},
                                   "status": {"x": 1}})
    assert "namespace" not in created["metadata"]
    assert created["status"] == {"x": 1}
    with pytest.raises(errors.NotFound):
        await client.update_status(created)


async def test_crd_through_client_is_established_and_served() -> None:
    server = APIServer(ManualClock())
    client = server.client()
    with pytest.raises(LookupError):
        await client.list(WIDGET)
    crd = await client.create(copy.deepcopy(WIDGET_CRD))
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["acceptedNames"]["kind"] == "Widget"
    assert crd["status"]["storedVersions"] == ["v1"]
    await client.create(widget("w"))
    await client.delete(CRD, "widgets.example.com")
    with pytest.raises(LookupError):
        await client.list(WIDGET)


async def test_crd_recreated_does_not_resurrect_objects() -> None:
    server = APIServer(ManualClock())
    client = server.client()
    await client.create(copy.deepcopy(WIDGET_CRD))
    await client.create(widget("w"))
    await client.delete(CRD, "widgets.example.com")
    await client.create(copy.deepcopy(WIDGET_CRD))
    assert (await client.list(WIDGET)).items == []


async def test_invalid_crd_is_rejected(client: InMemoryClient) -> None:
    bad: dict[str, Any] = copy.deepcopy(WIDGET_CRD)
    bad["metadata"]["name"] = "gizmos.example.com"
    bad["spec"]["names"] = {"plural": "gizmos", "kind": ""}
    with pytest.raises(errors.Invalid):
        await client.create(bad)


async def test_terminating_namespace_forbids_creates(server: APIServer,
                                                     client: InMemoryClient) -> None:
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}})
    held = configmap("held", "ns1")
    held["metadata"]["finalizers"] = ["x/y"]
    await client.create(held)
    await client.delete(NAMESPACE, "ns1")
    await server.settle()
    with pytest.raises(errors.Forbidden) as exc:
        await client.create(configmap("new", "ns1"))
    assert "because it is being terminated" in exc.value.message
    # The namespace waits for its content's finalizers.
    assert (await client.get(NAMESPACE, "ns1"))["status"]["phase"] == "Terminating"
    obj = await client.get(CONFIGMAP, "held", namespace="ns1")
    obj["metadata"]["finalizers"] = []
    await client.update(obj)
    await server.settle()
    with pytest.raises(errors.NotFound):
        await client.get(NAMESPACE, "ns1")


async def test_dry_run_writes_nothing(server: APIServer, client: InMemoryClient) -> None:
    rv = server.resource_version
    out = await client.create(configmap("cm"), dry_run=True)
    assert out["metadata"]["uid"]
    assert server.resource_version == rv
    with pytest.raises(errors.NotFound):
        await client.get(CONFIGMAP, "cm", namespace="default")
    created = await client.create(configmap("cm", a="1"))
    created["data"] = {"a": "2"}
    out = await client.update(created, dry_run=True)
    assert out["data"] == {"a": "2"}
    assert (await client.get(CONFIGMAP, "cm", namespace="default"))["data"] == {"a": "1"}
    await client.delete(CONFIGMAP, "cm", namespace="default", dry_run=True)
    assert await client.get(CONFIGMAP, "cm", namespace="default")


async def test_configmap_has_no_generation(client: InMemoryClient) -> None:
    created = await client.create(configmap("cm"))
    assert "generation" not in created["metadata"]


async def test_resource_version_must_not_be_set_on_create(client: InMemoryClient) -> None:
    obj = configmap("cm")
    obj["metadata"]["resourceVersion"] = "5"
    with pytest.raises(errors.BadRequest):
        await client.create(obj)


async def test_gc_runs_without_settle(client: InMemoryClient) -> None:
    owner = await client.create(widget("o"))
    dep = configmap("d")
    dep["metadata"]["ownerReferences"] = [owner_reference(owner)]
    await client.create(dep)
    await client.delete(WIDGET, "o", namespace="default")
    assert await client.get(CONFIGMAP, "d", namespace="default")  # not yet: GC is async
    await turns()
    with pytest.raises(errors.NotFound):
        await client.get(CONFIGMAP, "d", namespace="default")


async def test_foreground_cascades_through_generations(server: APIServer,
                                                       client: InMemoryClient) -> None:
    top = await client.create(widget("top"))
    mid_obj = widget("mid")
    mid_obj["metadata"]["ownerReferences"] = [owner_reference(top)]
    mid = await client.create(mid_obj)
    leaf = configmap("leaf")
    leaf["metadata"]["ownerReferences"] = [owner_reference(mid)]
    leaf["metadata"]["finalizers"] = ["x/hold"]
    await client.create(leaf)
    await client.delete(WIDGET, "top", namespace="default",
                        propagation_policy=PropagationPolicy.FOREGROUND)
    await server.settle()
    # mid is deleted in foreground too (its owner waits for it), so both wait for leaf.
    for name in ("top", "mid"):
        obj = await client.get(WIDGET, name, namespace="default")
        assert "foregroundDeletion" in obj["metadata"]["finalizers"]
    held = await client.get(CONFIGMAP, "leaf", namespace="default")
    assert held["metadata"]["deletionTimestamp"]
    held["metadata"]["finalizers"] = []
    await client.update(held)
    await server.settle()
    assert server.objects(WIDGET) == []


async def test_non_blocking_dependent_does_not_hold_foreground_owner(
    server: APIServer, client: InMemoryClient,
) -> None:
    owner = await client.create(widget("o"))
    dep = configmap("d")
    dep["metadata"]["ownerReferences"] = [owner_reference(owner, block_owner_deletion=False)]
    dep["metadata"]["finalizers"] = ["x/hold"]
    await client.create(dep)
    await client.delete(WIDGET, "o", namespace="default",
                        propagation_policy=PropagationPolicy.FOREGROUND)
    await server.settle()
    with pytest.raises(errors.NotFound):
        await client.get(WIDGET, "o", namespace="default")
    assert (await client.get(CONFIGMAP, "d", namespace="default"))["metadata"][
        "deletionTimestamp"]


async def test_owner_with_same_name_but_new_uid_is_dangling(
    server: APIServer, client: InMemoryClient,
) -> None:
    old_owner = await client.create(widget("o"))
    await client.delete(WIDGET, "o", namespace="default",
                        propagation_policy=PropagationPolicy.ORPHAN)
    await server.settle()
    await client.create(widget("o"))
    dep = configmap("d")
    dep["metadata"]["ownerReferences"] = [owner_reference(old_owner)]
    await client.create(dep)
    await server.settle()
    with pytest.raises(errors.NotFound):
        await client.get(CONFIGMAP, "d", namespace="default")


async def test_reference_to_unserved_kind_is_left_alone(
    server: APIServer, client: InMemoryClient,
) -> None:
    dep = configmap("d")
    dep["metadata"]["ownerReferences"] = [{"apiVersion": "nope.io/v1", "kind": "Nope",
                                           "name": "x", "uid": "u"}]
    await client.create(dep)
    await server.settle()
    assert await client.get(CONFIGMAP, "d", namespace="default")


async def test_explicit_background_drops_orphan_finalizer(
    server: APIServer, client: InMemoryClient,
) -> None:
    obj = widget("w")
    obj["metadata"]["finalizers"] = ["orphan"]
    await client.create(obj)
    await client.delete(WIDGET, "w", namespace="default",
                        propagation_policy=PropagationPolicy.BACKGROUND)
    with pytest.raises(errors.NotFound):
        await client.get(WIDGET, "w", namespace="default")


async def test_inputs_are_not_mutated(client: InMemoryClient) -> None:
    obj = widget("w", a=1)
    obj["metadata"]["generateName"] = "x"
    before = copy.deepcopy(obj)
    created = await client.create(obj)
    assert obj == before
    created_copy = copy.deepcopy(created)
    await client.update(created)
    assert created == created_copy


async def test_crd_update_reregisters_versions(client: InMemoryClient) -> None:
    crd = await client.create(copy.deepcopy(WIDGET_CRD))
    beta = GVK("example.com", "v1beta1", "Widget")
    await client.create(widget("w"))
    assert (await client.get(beta, "w", namespace="default"))["apiVersion"] == (
        "example.com/v1beta1")
    crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    await client.update(crd)
    with pytest.raises(LookupError):
        await client.get(beta, "w", namespace="default")
    assert await client.get(WIDGET, "w", namespace="default")
    crd = await client.get(CRD, "widgets.example.com")
    crd["spec"]["versions"] = []
    with pytest.raises(errors.Invalid):
        await client.update(crd)


async def test_job_defaults_and_generated_selector(server: APIServer,
                                                   client: InMemoryClient) -> None:
    server.builtin_defaults = True
    job = await client.create({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {"template": {"metadata": {"labels": {"app": "x"}}, "spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}},
    })
    spec = job["spec"]
    uid = job["metadata"]["uid"]
    assert (spec["parallelism"], spec["completions"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["suspend"] is False
    assert spec["completionMode"] == "NonIndexed"
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = spec["template"]["metadata"]["labels"]
    assert labels["batch.kubernetes.io/job-name"] == "j"
    assert labels["controller-uid"] == uid
    assert job["metadata"]["labels"] == {"app": "x"}
    # Parallelism alone leaves completions unset (a work queue).
    other = await client.create({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "q", "namespace": "default"},
        "spec": {"parallelism": 3, "suspend": True, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}},
    })
    assert other["spec"]["parallelism"] == 3
    assert "completions" not in other["spec"]
    assert other["spec"]["suspend"] is True


async def test_builtin_defaults_are_opt_in(client: InMemoryClient) -> None:
    job = await client.create({"apiVersion": "batch/v1", "kind": "Job",
                               "metadata": {"name": "j", "namespace": "default"},
                               "spec": {"template": {}}})
    assert job["spec"] == {"template": {}}


async def test_pod_starts_pending(server: APIServer, client: InMemoryClient) -> None:
    server.builtin_defaults = True
    pod = await client.create({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": "p", "namespace": "default"},
                               "spec": {"containers": [{"name": "c", "image": "i"}]},
                               "status": {"phase": "Running"}})
    assert pod["status"] == {"phase": "Pending"}
    assert pod["spec"]["restartPolicy"] == "Always"


async def test_foreground_ownership_cycle_does_not_deadlock(
    server: APIServer, client: InMemoryClient,
) -> None:
    a = await client.create(widget("a"))
    b_obj = widget("b")
    b_obj["metadata"]["ownerReferences"] = [owner_reference(a)]
    b = await client.create(b_obj)
    a["metadata"]["ownerReferences"] = [owner_reference(b)]
    await client.update(a)
    await client.delete(WIDGET, "a", namespace="default",
                        propagation_policy=PropagationPolicy.FOREGROUND)
    await server.settle()
    assert server.objects(WIDGET) == []


async def test_watch_errors_surface_on_iteration(server: APIServer,
                                                 client: InMemoryClient) -> None:
    stream = client.watch(GVK("x.io", "v1", "Nope"))  # nothing raised yet
    with pytest.raises(LookupError):
        await stream.__anext__()
    server.faults.expire_next_watch()
    stream = client.watch(CONFIGMAP, resource_version=server.resource_version)
    assert server.faults._expire_watches == 1  # not consumed before iteration
    with pytest.raises(errors.Gone):
        await stream.__anext__()


async def test_closing_a_watch_unsubscribes(server: APIServer, client: InMemoryClient) -> None:
    stream = client.watch(CONFIGMAP, resource_version=server.resource_version)
    await client.create(configmap("a"))
    assert (await stream.__anext__()).type == "ADDED"
    assert len(server._watchers) == 1
    await stream.aclose()  # type: ignore[attr-defined]
    assert len(server._watchers) == 0


async def test_unknown_kind_error_is_the_discovery_one(client: InMemoryClient) -> None:
    from jobframework.runtime.client.discovery import NoKindMatchError as DiscoveryError

    with pytest.raises(DiscoveryError):
        await client.get(GVK("x.io", "v1", "Nope"), "n")


def test_gc_survives_a_closed_event_loop() -> None:
    server = APIServer(ManualClock())
    client = server.client()

    async def orphan_dependent(owner_name: str) -> None:
        owner = await client.create(configmap(owner_name))
        dep = configmap(f"{owner_name}-dep")
        dep["metadata"]["ownerReferences"] = [owner_reference(owner)]
        await client.create(dep)
        await client.delete(CONFIGMAP, owner_name, namespace="default")  # GC scheduled

    # A tick left scheduled on a loop that closed before running it (a server shared by
    # tests with their own loops) must not stop collection on the next loop.
    loop = asyncio.new_event_loop()
    loop.run_until_complete(orphan_dependent("a"))
    loop.close()
    server._gc_scheduled = loop

    async def later() -> list[str]:
        await orphan_dependent("b")
        await turns()
        return [o["metadata"]["name"] for o in server.objects(CONFIGMAP, "default")]

    assert asyncio.run(later()) == []
