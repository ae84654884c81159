"""Job ↔ Workload equivalence: Go semantic equality on JSON pod sets."""

from __future__ import annotations

import pytest

from jobframework.api import PodSet
from jobframework.reconciler import compare_pod_set_slices, go_semantic_equal


@pytest.mark.parametrize(("a", "b", "equal"), [
    ({"name": "c", "image": ""}, {"name": "c"}, True),
    ({"name": "c", "ports": []}, {"name": "c"}, True),
    ({"resources": {"requests": {"cpu": "1"}}}, {"resources": {"requests": {"cpu": "1000m"}}},
     True),
    ({"resources": {"limits": {"memory": "1Gi"}}},
     {"resources": {"limits": {"memory": 1073741824}}}, True),
    ({"resources": {"requests": {"cpu": "1"}}}, {"resources": {"requests": {"cpu": "2"}}},
     False),
    ({"env": [{"name": "X", "value": "1"}]}, {"env": [{"name": "X", "value": "1.0"}]}, False),
    ({"name": "c", "image": "a"}, {"name": "c", "image": "b"}, False),
    ({"stdin": False}, {}, True),
])
def test_go_semantic_equal(a: dict[str, object], b: dict[str, object], equal: bool) -> None:
    assert go_semantic_equal(a, b) is equal
    assert go_semantic_equal(b, a) is equal


def pod_set(count: int = 1, min_count: int | None = None, **spec: object) -> PodSet:
    return PodSet(name="main", count=count, min_count=min_count, template={"spec": spec})


@pytest.mark.parametrize(("a", "b", "ignore_tolerations", "equal"), [
    (pod_set(2), pod_set(2), False, True),
    (pod_set(2), pod_set(3), False, False),
    (pod_set(2, 1), pod_set(2), False, False),
    (pod_set(tolerations=[{"key": "a"}]), pod_set(tolerations=[{"key": "b"}]), False, False),
    (pod_set(tolerations=[{"key": "a"}]), pod_set(tolerations=[{"key": "b"}]), True, True),
    (pod_set(nodeSelector={"a": "b"}), pod_set(), False, True),
    (pod_set(containers=[{"name": "c"}]), pod_set(containers=[{"name": "d"}]), False, False),
    (pod_set(initContainers=[{"name": "i"}]), pod_set(), False, False),
])
def test_compare_pod_sets(a: PodSet, b: PodSet, ignore_tolerations: bool, equal: bool) -> None:
    assert compare_pod_set_slices([a], [b], ignore_tolerations) is equal
    assert compare_pod_set_slices([a], [a, b], ignore_tolerations) is False
