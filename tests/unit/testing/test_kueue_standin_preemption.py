"""The stand-in's classical preemption picks Kueue v0.19.2's victims.

Kueue orders the candidates (``preemption/common.CandidatesOrdering``): Workloads already
evicted first, then lower priority, then the most recently reserved, then by UID. It
removes them in that order until the preemptor fits, then adds back, from the
second-to-last removed to the first, each one the preemptor still fits without
(``fillBackWorkloads``). Each case admits its Workloads one pass at a time, ten seconds
apart, so their reservation times differ, and then lets one higher-priority Workload in.
``tests/integration/test_standin_agreement.py`` plays the same situations on real Kueue.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest

from jobframework import constants as c
from jobframework.runtime.objects import Object
from jobframework.testing import APIServer, InMemoryClient, KueueStandIn, ManualClock


def workload(name: str, cpu: str, priority: int) -> Object:
    return {"apiVersion": c.KUEUE_API_VERSION, "kind": "Workload",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"queueName": "lq", "priority": priority, "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [
                    {"name": "c", "image": "x",
                     "resources": {"requests": {"cpu": cpu}}}]}}}]}}


def condition(obj: Object, type_: str) -> tuple[str, str] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == type_:
            return cond["status"], cond["reason"]
    return None


@attrs.frozen
class Case:
    name: str
    #: Nominal cpu of the ClusterQueue's only flavor.
    quota: str
    #: (name, cpu, priority), admitted in this order, ten seconds apart.
    admitted: Sequence[tuple[str, str, int]]
    #: The preemptor's cpu (priority 100).
    preemptor_cpu: str
    #: Who Kueue evicts.
    victims: frozenset[str]


CASES = [
    # Three equal victims, one is enough: the most recently reserved goes.
    Case("newest-first", "3", [("l1", "1", 1), ("l2", "1", 1), ("l3", "1", 1)], "1",
         frozenset({"l3"})),
    # Priority comes before reservation time: the oldest goes when it is the lowest.
    Case("lowest-priority-before-newest", "3",
         [("l1", "1", 1), ("l2", "1", 2), ("l3", "1", 2)], "1", frozenset({"l1"})),
    # The newest (small) is removed first but the preemptor fits only once the older big
    # one is removed too; the small one is then added back.
    Case("only-the-big-one", "3", [("big", "2", 1), ("small", "1", 1)], "2",
         frozenset({"big"})),
    # Removed: s2, s1, big. Added back: s1 (the preemptor still fits), not s2.
    Case("fill-back-keeps-what-it-can", "4",
         [("big", "2", 1), ("s1", "1", 1), ("s2", "1", 1)], "3", frozenset({"s2", "big"})),
]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def kq(clock: ManualClock) -> KueueStandIn:
    return KueueStandIn(APIServer(clock))


async def setup(kq: KueueStandIn, clock: ManualClock, quota: str,
                admitted: Sequence[tuple[str, str, int]]) -> InMemoryClient:
    await kq.resource_flavor("default")
    await kq.cluster_queue("cq", {"default": {"cpu": quota}}, preemption="LowerPriority")
    await kq.local_queue("lq", "cq")
    api = kq.server.client()
    for name, cpu, priority in admitted:
        await api.create(workload(name, cpu, priority))
        assert (await kq.schedule()).admitted == (f"default/{name}",)
        clock.advance(10)
    return api


@pytest.mark.parametrize("case", CASES, ids=[x.name for x in CASES])
async def test_victims_are_kueues(case: Case, kq: KueueStandIn, clock: ManualClock) -> None:
    api = await setup(kq, clock, case.quota, case.admitted)
    await api.create(workload("high", case.preemptor_cpu, 100))
    result = await kq.schedule()
    assert result.admitted == ()
    assert set(result.preempted) == {f"default/{v}" for v in case.victims}
    for name, _, _ in case.admitted:
        wl = await kq.workload(name)
        if name in case.victims:
            assert condition(wl, "Evicted") == ("True", "Preempted"), name
            assert condition(wl, "Preempted") == ("True", "InClusterQueue"), name
        else:
            assert condition(wl, "Evicted") is None, name
            assert condition(wl, "QuotaReserved") == ("True", "QuotaReserved"), name
    # Once the victims release their quota, exactly that room is enough.
    for victim in sorted(case.victims):
        await kq.release(victim)
    assert (await kq.schedule()).admitted == ("default/high",)


async def test_a_candidate_already_evicted_goes_first(kq: KueueStandIn,
                                                      clock: ManualClock) -> None:
    """Evicted but still holding its quota (its job has not stopped yet): it is the first
    candidate, whatever its age, so no one else is evicted and the preemptor waits."""
    await setup(kq, clock, "3", [("l1", "1", 1), ("l2", "1", 1), ("l3", "1", 1)])
    await kq.evict("l1", c.EVICTED_DUE_TO_NODE_FAILURES, nodes=["n1"])
    api = kq.server.client()
    await api.create(workload("high", "1", 100))
    result = await kq.schedule()
    assert result.admitted == () and result.preempted == ()
    for name in ("l2", "l3"):
        assert condition(await kq.workload(name), "Evicted") is None, name
    await kq.release("l1")
    assert (await kq.schedule()).admitted == ("default/high",)

