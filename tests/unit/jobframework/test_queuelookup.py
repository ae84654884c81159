"""CachedQueueLookup follows LocalQueues, ClusterQueues and AdmissionChecks through a
cache, so managedBy defaulting sees a queue that requires MultiKueue."""

from __future__ import annotations

import asyncio

from jobframework import constants as c
from jobframework.queuelookup import CLUSTER_QUEUE_GVK, CachedQueueLookup
from jobframework.runtime.cache import Cache
from jobframework.testing import APIServer
from jobframework.testing.kueue import LOCAL_QUEUE_GVK, register_kueue_kinds

K = f"{c.KUEUE_GROUP}/{c.KUEUE_VERSION}"


async def settle(check: object, turns: int = 200) -> None:
    for _ in range(turns):
        if callable(check) and check():
            return
        await asyncio.sleep(0)
    raise AssertionError("the lookup did not catch up")


async def test_lookup_follows_the_queues_and_checks() -> None:
    server = APIServer()
    register_kueue_kinds(server)
    client = server.client()
    cache = Cache(client)
    lookup = await CachedQueueLookup.for_cache(cache)
    cache.start()
    await cache.wait_for_cache_sync()
    await client.create({"apiVersion": K, "kind": "AdmissionCheck",
                         "metadata": {"name": "mk"},
                         "spec": {"controllerName": c.MULTIKUEUE_CONTROLLER_NAME}})
    await client.create({"apiVersion": K, "kind": "ClusterQueue", "metadata": {"name": "cq"},
                         "spec": {"admissionChecksStrategy": {"admissionChecks": [
                             {"name": "mk"}, {"name": "missing"}]}}})
    await client.create({"apiVersion": K, "kind": "LocalQueue",
                         "metadata": {"name": "lq", "namespace": "default"},
                         "spec": {"clusterQueue": "cq"}})
    await settle(lambda: lookup.cluster_queue_for_local_queue("default", "lq") == "cq"
                 and lookup.admission_check_controllers("cq"))
    assert lookup.admission_check_controllers("cq") == [c.MULTIKUEUE_CONTROLLER_NAME]
    assert lookup.cluster_queue_for_local_queue("default", "other") is None
    # The check removed from the ClusterQueue, then the LocalQueue deleted.
    cq = await client.get(CLUSTER_QUEUE_GVK, "cq")
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": []}
    await client.update(cq)
    await settle(lambda: lookup.admission_check_controllers("cq") == [])
    await client.delete(LOCAL_QUEUE_GVK, "lq", namespace="default")
    await settle(lambda: lookup.cluster_queue_for_local_queue("default", "lq") is None)
    await cache.stop()


async def test_default_local_queue_follows_the_active_queues() -> None:
    # Kueue's queue manager (DefaultLocalQueueExist) holds a LocalQueue while its
    # stopPolicy is None: Hold and HoldAndDrain take it out, None puts it back.
    server = APIServer()
    register_kueue_kinds(server)
    client = server.client()
    cache = Cache(client)
    lookup = await CachedQueueLookup.for_cache(cache)
    cache.start()
    await cache.wait_for_cache_sync()
    for ns in ("team-a", "team-b"):
        await client.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": ns}})
    await client.create({"apiVersion": K, "kind": "LocalQueue",
                         "metadata": {"name": "default", "namespace": "team-a"},
                         "spec": {"clusterQueue": "cq"}})
    await client.create({"apiVersion": K, "kind": "LocalQueue",
                         "metadata": {"name": "other", "namespace": "team-b"},
                         "spec": {"clusterQueue": "cq"}})
    await settle(lambda: lookup.default_local_queue_exist("team-a")
                 and lookup.cluster_queue_for_local_queue("team-b", "other") == "cq")
    assert lookup.default_local_queue_exist("team-b") is False, "only a queue named default"
    lq = await client.get(LOCAL_QUEUE_GVK, "default", namespace="team-a")
    lq["spec"]["stopPolicy"] = "Hold"
    await client.update(lq)
    await settle(lambda: not lookup.default_local_queue_exist("team-a"))
    assert lookup.cluster_queue_for_local_queue("team-a", "default") is None
    lq = await client.get(LOCAL_QUEUE_GVK, "default", namespace="team-a")
    lq["spec"]["stopPolicy"] = "None"
    await client.update(lq)
    await settle(lambda: lookup.default_local_queue_exist("team-a"))
    await client.delete(LOCAL_QUEUE_GVK, "default", namespace="team-a")
    await settle(lambda: not lookup.default_local_queue_exist("team-a"))
    await cache.stop()


async def test_a_held_queue_listed_at_start_is_not_a_default() -> None:
    server = APIServer()
    register_kueue_kinds(server)
    client = server.client()
    await client.create({"apiVersion": K, "kind": "LocalQueue",
                         "metadata": {"name": "default", "namespace": "default"},
                         "spec": {"clusterQueue": "cq", "stopPolicy": "HoldAndDrain"}})
    cache = Cache(client)
    lookup = await CachedQueueLookup.for_cache(cache)
    cache.start()
    await cache.wait_for_cache_sync()
    assert lookup.default_local_queue_exist("default") is False
    await cache.stop()


async def test_shared_gives_one_lookup_per_cache() -> None:
    server = APIServer()
    register_kueue_kinds(server)
    client = server.client()
    cache, other = Cache(client), Cache(client)
    first = await CachedQueueLookup.shared(cache)
    assert await CachedQueueLookup.shared(cache) is first
    assert await CachedQueueLookup.shared(other) is not first
