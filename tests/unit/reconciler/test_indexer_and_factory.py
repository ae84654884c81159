"""Owner indexes on the informer cache, and the reconciler factories."""

from __future__ import annotations

import asyncio

import pytest

from jobframework.indexer import (
    OWNER_REFERENCE_UID,
    list_owned_workloads,
    owner_reference_index_field_matcher,
    owner_reference_index_key,
    setup_owner_uid_index,
    setup_workload_owner_index,
)
from jobframework.reconciler import (
    GenericReconciler,
    NoopReconciler,
    new_generic_reconciler_factory,
    new_noop_reconciler_factory,
)
from jobframework.runtime.cache import Cache
from jobframework.runtime.manager import Manager
from jobframework.runtime.objects import GVK
from jobframework.runtime.reconcile import Request

from .helpers import JOB_GVK, WORKLOAD, MockJob, World, fixed_uid

MPIJOB = GVK("kubeflow.org", "v2beta1", "MPIJob")
POD = GVK("", "v1", "Pod")


def test_index_keys() -> None:
    assert owner_reference_index_key(JOB_GVK) == ".metadata.ownerReferences[batch.Job]"
    assert owner_reference_index_key(POD) == ".metadata.ownerReferences[.Pod]"
    assert owner_reference_index_field_matcher(JOB_GVK, "alpha") == {
        ".metadata.ownerReferences[batch.Job]": "alpha"}
    assert OWNER_REFERENCE_UID == "metadata.ownerReferences.uid"


def wl(name: str, owners: list[tuple[str, str, str, str]]) -> dict[str, object]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "default", "ownerReferences": [
                {"apiVersion": av, "kind": k, "name": n, "uid": u} for av, k, n, u in owners]},
            "spec": {"podSets": []}}


@pytest.mark.kueue_case(
    "TestSetupIndexes/proper indexes are set",
    "TestSetupIndexes/kubeflow.org/mpijob is disabled in the configAPI",
)
async def test_s4_s5_owner_index_on_the_cache() -> None:
    w = World()
    # Owners must exist, or the garbage collector removes the Workloads.
    for name, uid in (("alpha", "a1"), ("beta", "b1")):
        with fixed_uid(uid):
            await w.client.create({"apiVersion": "batch/v1", "kind": "Job",
                                   "metadata": {"name": name, "namespace": "default"},
                                   "spec": {"template": {"spec": {"containers": []}}}})
    await w.client.create(wl("alpha-wl", [("batch/v1", "Job", "alpha", "a1")]))
    await w.client.create(wl("beta-wl", [("batch/v1", "Job", "beta", "b1"),
                                         ("kubeflow.org/v2beta1", "MPIJob", "alpha", "m1")]))
    cache = Cache(w.client, clock=w.clock)
    await setup_workload_owner_index(cache, JOB_GVK)
    await setup_owner_uid_index(cache, WORKLOAD)
    cache.start()
    try:
        await cache.wait_for_cache_sync()
        listed = await cache.list(WORKLOAD, namespace="default",
                                  matching_fields=owner_reference_index_field_matcher(
                                      JOB_GVK, "alpha"))
        assert [o["metadata"]["name"] for o in listed.items] == ["alpha-wl"]
        by_uid = await cache.list(WORKLOAD, matching_fields={OWNER_REFERENCE_UID: "m1"})
        assert [o["metadata"]["name"] for o in by_uid.items] == ["beta-wl"]
        try:
            await cache.list(WORKLOAD, matching_fields=owner_reference_index_field_matcher(
                MPIJOB, "alpha"))
        except (KeyError, ValueError):
            pass
        else:
            raise AssertionError("an index that was not set up cannot be queried")
        # The same answer without an index (a bare client): filtered listing.
        direct = await list_owned_workloads(w.client, JOB_GVK, "default", "alpha")
        via_cache = await list_owned_workloads(cache, JOB_GVK, "default", "alpha")
        assert [o["metadata"]["name"] for o in direct] == ["alpha-wl"]
        assert [o["metadata"]["name"] for o in via_cache] == ["alpha-wl"]
    finally:
        await cache.stop()


async def test_generic_factory_builds_a_controller_named_after_the_kind() -> None:
    w = World()
    factory = new_generic_reconciler_factory(MockJob)
    mgr = Manager(w.client, clock=w.clock)
    reconciler = factory(mgr.get_client(), None, w.recorder, clock=w.clock)
    assert isinstance(reconciler, GenericReconciler)
    seen: list[str] = []

    def extra(builder: object, client: object) -> object:
        seen.append(type(client).__name__)
        return builder

    new_generic_reconciler_factory(MockJob, extra)(  # type: ignore[arg-type]
        mgr.get_client(), None, w.recorder).setup_with_manager(mgr)
    assert seen == ["CachedClient"]
    assert "job" in mgr._controller_names
    # Reconciling through the factory's reconciler uses a fresh job each time.
    await w.create_job()
    reconciler.job_reconciler.client = w.client  # the manager (and its cache) is not running
    await reconciler.job_reconciler.reconcile_generic_job(Request.of("default", "test-job"),
                                                          MockJob())
    assert len(w.workloads()) == 1


async def test_noop_factory() -> None:
    r = new_noop_reconciler_factory(MPIJOB)(None, None, None)
    assert isinstance(r, NoopReconciler)
    assert (await r.reconcile(Request.of("default", "x"))).is_zero()
    r.setup_with_manager(None)
    await asyncio.sleep(0)
