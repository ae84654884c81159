"""The shortcuts taken on the reconcile path to save CPU (docs/performance.md, "What the
manager does to save CPU"): each gives the answer the longer way gives."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobframework import constants as c
from jobframework.api import PodSet, Workload
from jobframework.composable import ComposableJob
from jobframework.constants import VERSION_PROFILES, FeatureGate, FeatureGates, KueueVersion
from jobframework.indexer import _supports_matching_fields
from jobframework.reconciler import go_semantic_equal
from jobframework.runtime import errors
from jobframework.runtime.cache import Cache
from jobframework.runtime.client import get_read_only
from jobframework.runtime.manager import CachedClient
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer, ManualClock

CM = GVK("", "v1", "ConfigMap")

WORKLOAD = {
    "apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
    "metadata": {"name": "w", "namespace": "ns", "labels": {"a": "b"},
                 "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                      "uid": "u", "controller": True}]},
    "spec": {"queueName": "lq", "podSets": [
        {"name": "main", "count": 2, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
    "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "R",
                               "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    "unknownField": {"kept": [1, 2]},
}


def test_model_deep_copies_are_equal_and_share_nothing() -> None:
    wl = Workload.from_dict(copy.deepcopy(WORKLOAD))
    for out in (wl.model_copy(deep=True), copy.deepcopy(wl)):
        assert out.to_dict() == wl.to_dict() == WORKLOAD
        assert out.__pydantic_fields_set__ == wl.__pydantic_fields_set__
        assert out.spec.pod_sets[0] is not wl.spec.pod_sets[0]
        out.spec.pod_sets[0].template["spec"]["containers"][0]["name"] = "changed"
        out.metadata.labels["a"] = "changed"  # type: ignore[index]
        out.__pydantic_extra__["unknownField"]["kept"].append(3)  # type: ignore[index]
        out.status.conditions[0].reason = "changed"  # type: ignore[union-attr,index]
        assert wl.to_dict() == WORKLOAD


def test_a_model_copied_twice_in_one_deepcopy_stays_one_object() -> None:
    ps = PodSet(name="main", template={"spec": {}})
    a, b = copy.deepcopy([ps, ps])
    assert a is b and a is not ps


@pytest.mark.parametrize("version", list(KueueVersion))
def test_feature_gates_resolve_overrides_then_the_version_defaults(version: KueueVersion
                                                                   ) -> None:
    gates = FeatureGates({FeatureGate.PARTIAL_ADMISSION: False},
                         version=version, TopologyAwareScheduling=True)
    defaults = VERSION_PROFILES[version].feature_gates
    for gate in FeatureGate:
        expected = {FeatureGate.PARTIAL_ADMISSION: False,
                    FeatureGate.TOPOLOGY_AWARE_SCHEDULING: True}.get(gate, defaults[gate])
        assert gates.enabled(gate) is expected
        assert gates.enabled(gate.value) is expected  # type: ignore[arg-type]


def test_semantic_equality_is_unchanged_by_its_fast_path() -> None:
    assert go_semantic_equal({"a": [1, {"b": "x"}]}, {"a": [1, {"b": "x"}]})
    assert go_semantic_equal({"requests": {"cpu": "1"}}, {"requests": {"cpu": "1000m"}})
    assert go_semantic_equal({"a": None, "b": []}, {})
    assert not go_semantic_equal({"a": 1}, {"a": 2})
    assert go_semantic_equal(1, 1.0)  # both paths: Go decodes both into the same int


async def test_matching_fields_support_is_read_per_list_function() -> None:
    class WithIndex:
        async def list(self, gvk: GVK, *, matching_fields: Any = None) -> Any:
            return None

    class Without:
        async def list(self, gvk: GVK) -> Any:
            return None

    reader: Any = WithIndex()
    assert _supports_matching_fields(reader) and _supports_matching_fields(reader)
    assert not _supports_matching_fields(Without())

    async def plain(gvk: GVK) -> Any:
        return None

    reader.list = plain  # an instance's own list wins, as it did
    assert not _supports_matching_fields(reader)


def test_composable_job_checks_are_decided_once_per_class() -> None:
    from integrations.batchjob import BatchJob
    from jobframework.interface import CapabilityMeta

    assert type(ComposableJob) is CapabilityMeta
    assert not isinstance(BatchJob({}), ComposableJob)
    assert not isinstance(object(), ComposableJob)


async def test_read_only_gets_hand_out_the_cached_object() -> None:
    server = APIServer(ManualClock())
    api = server.client()
    await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "a", "namespace": "default"}, "data": {"x": "1"}})
    cache = Cache(api, clock=server.clock)
    cached = CachedClient(api, cache)
    await cache.get_informer(CM)
    cache.start()
    try:
        seen = await get_read_only(cached, CM, "a", namespace="default")
        again = await get_read_only(cached, CM, "a", namespace="default")
        copied = await cached.get(CM, "a", namespace="default")
        assert seen is again and seen == copied and seen is not copied
        with pytest.raises(errors.NotFound):
            await get_read_only(cached, CM, "missing", namespace="default")
        # A reader without a cache: its own get.
        plain = await get_read_only(api, CM, "a", namespace="default")
        assert plain == copied and plain is not seen
        # Uncached kinds come from the API server.
        direct = CachedClient(api, cache, uncached=[CM])
        assert await get_read_only(direct, CM, "a", namespace="default") == copied
    finally:
        await cache.stop()
