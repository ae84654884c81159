"""DiscoveryRESTMapper: classic and aggregated discovery, caching, refresh on a miss."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jobframework.runtime.client import RESTMapper, RESTMapping
from jobframework.runtime.client.discovery import (
    AGGREGATED_ACCEPT,
    DiscoveryRESTMapper,
    NoKindMatchError,
)
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.objects import GVK, GVR

from .conftest import FakeAPI

WIDGETS = {
    "kind": "APIResourceList", "groupVersion": "example.com/v1",
    "resources": [{"name": "widgets", "namespaced": False, "kind": "Widget", "verbs": ["get"]}],
}


def aggregated(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items}


AGG_CORE = aggregated([{"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
    {"resource": "pods", "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
     "scope": "Namespaced", "verbs": ["get"],
     "subresources": [{"subresource": "status", "responseKind": {"kind": "Pod"}},
                      {"subresource": "eviction", "responseKind": {"kind": "Eviction"}}]},
]}]}])
AGG_GROUPS = aggregated([{"metadata": {"name": "kueue.x-k8s.io"}, "versions": [
    {"version": "v1beta2", "freshness": "Current", "resources": [
        {"resource": "clusterqueues", "responseKind": {"kind": "ClusterQueue"},
         "scope": "Cluster", "subresources": [{"subresource": "status"}]}]},
    {"version": "v1beta1", "resources": [
        {"resource": "clusterqueues", "responseKind": {"kind": "ClusterQueue"},
         "scope": "Cluster"}]},
]}])


async def test_classic_discovery_maps_kinds_scopes_and_subresources(
    fake_api: FakeAPI, client: RestClient
) -> None:
    mapper = client.rest_mapper
    assert isinstance(mapper, RESTMapper)
    pod = await mapper.rest_mapping(GVK("", "v1", "Pod"))
    assert pod == RESTMapping(GVK("", "v1", "Pod"), GVR("", "v1", "pods"), True,
                              frozenset({"status", "eviction"}))
    ns = await mapper.rest_mapping(GVK("", "v1", "Namespace"))
    assert not ns.namespaced
    job = await mapper.rest_mapping(GVK("batch", "v1", "Job"))
    assert job.resource == GVR("batch", "v1", "jobs")
    assert job.subresources == frozenset({"status"})
    # The aggregated format was asked for first, and everything was read once.
    assert fake_api.requests[0].headers["Accept"] == AGGREGATED_ACCEPT
    assert sorted(r.path for r in fake_api.requests) == [
        "/api", "/api/v1", "/apis", "/apis/batch/v1"]


async def test_aggregated_discovery_needs_two_requests(fake_api: FakeAPI) -> None:
    fake_api.discovery = {"/api": AGG_CORE, "/apis": AGG_GROUPS}
    async with RestClient.from_url(fake_api.url) as client:
        mapper = client.rest_mapper
        cq = await mapper.rest_mapping(GVK("kueue.x-k8s.io", "v1beta2", "ClusterQueue"))
        assert cq == RESTMapping(cq.gvk, GVR("kueue.x-k8s.io", "v1beta2", "clusterqueues"),
                                 False, frozenset({"status"}))
        old = await mapper.rest_mapping(GVK("kueue.x-k8s.io", "v1beta1", "ClusterQueue"))
        assert old.subresources == frozenset()
        pod = await mapper.rest_mapping(GVK("", "v1", "Pod"))
        assert pod.namespaced and pod.subresources == {"status", "eviction"}
    assert [r.path for r in fake_api.requests] == ["/api", "/apis"]


async def test_unknown_kind_refreshes_once_then_raises(
    fake_api: FakeAPI, client: RestClient
) -> None:
    mapper = client.rest_mapper
    await mapper.rest_mapping(GVK("", "v1", "Pod"))
    before = len(fake_api.requests)
    with pytest.raises(NoKindMatchError, match='no matches for kind "Widget"') as info:
        await mapper.rest_mapping(GVK("example.com", "v1", "Widget"))
    assert isinstance(info.value, LookupError)
    assert info.value.gvk == GVK("example.com", "v1", "Widget")
    assert len(fake_api.requests) - before == 4  # exactly one re-read of discovery

    # The CRD gets installed: the next miss finds it.
    fake_api.discovery["/apis"]["groups"].append(
        {"name": "example.com", "versions": [{"groupVersion": "example.com/v1",
                                              "version": "v1"}]})
    fake_api.discovery["/apis/example.com/v1"] = WIDGETS
    widget = await mapper.rest_mapping(GVK("example.com", "v1", "Widget"))
    assert widget.resource.resource == "widgets" and not widget.namespaced
    assert isinstance(mapper, DiscoveryRESTMapper)
    assert await mapper.kind_for(GVR("example.com", "v1", "widgets")) == widget.gvk


async def test_cached_hits_do_not_refetch(fake_api: FakeAPI, client: RestClient) -> None:
    for _ in range(3):
        await client.rest_mapper.rest_mapping(GVK("batch", "v1", "Job"))
    assert len(fake_api.requests) == 4


async def test_concurrent_misses_share_one_refresh(fake_api: FakeAPI, client: RestClient) -> None:
    mapper = client.rest_mapper
    results = await asyncio.gather(
        *(mapper.rest_mapping(GVK("", "v1", "Nope")) for _ in range(5)),
        return_exceptions=True)
    assert all(isinstance(r, NoKindMatchError) for r in results)
    # First load plus at most one refresh for the whole herd.
    assert len(fake_api.requests) <= 8


async def test_broken_group_version_does_not_hide_the_rest(fake_api: FakeAPI) -> None:
    fake_api.discovery["/apis"]["groups"].append(
        {"name": "metrics.k8s.io", "versions": [{"groupVersion": "metrics.k8s.io/v1beta1",
                                                 "version": "v1beta1"}]})
    # /apis/metrics.k8s.io/v1beta1 is not served: the fake answers 404.
    async with RestClient.from_url(fake_api.url) as client:
        job = await client.rest_mapper.rest_mapping(GVK("batch", "v1", "Job"))
        assert job.namespaced


async def test_invalidate_and_mappings(fake_api: FakeAPI, client: RestClient) -> None:
    mapper = client.rest_mapper
    assert isinstance(mapper, DiscoveryRESTMapper)
    kinds = {m.gvk.kind for m in await mapper.mappings()}
    assert kinds == {"Pod", "Namespace", "Job"}
    mapper.invalidate()
    await mapper.rest_mapping(GVK("", "v1", "Pod"))
    assert len(fake_api.requests) == 8
    with pytest.raises(LookupError):
        await mapper.kind_for(GVR("", "v1", "nothing"))


async def test_classic_only_mode_never_asks_for_aggregated(fake_api: FakeAPI) -> None:
    async with RestClient.from_url(fake_api.url) as client:
        mapper = DiscoveryRESTMapper(client, aggregated=False)
        await mapper.rest_mapping(GVK("", "v1", "Pod"))
    assert all(r.headers["Accept"] == "application/json" for r in fake_api.requests)
