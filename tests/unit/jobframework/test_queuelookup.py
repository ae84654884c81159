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
