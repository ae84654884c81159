"""Properties over random DAGs: valid flows complete in dependency order whatever order the
Jobs finish in; cyclic ones are rejected with a real cycle named."""

from __future__ import annotations

import asyncio
import copy
import graphlib
import itertools
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integrations.jobflow import load_crds, validate_jobflow
from integrations.jobflow.api import Flow
from integrations.jobflow.dag import (
    find_cycle,
    inject_info,
    injected_info,
    restore_info,
    topological_order,
)
from jobframework.podset import InvalidPodSetUpdateError, PodSetInfo
from jobframework.runtime.clock import ManualClock
from jobframework.testing import APIServer

from .helpers import Harness, flow, jobflow

Deps = dict[str, list[str]]


@st.composite
def dags(draw: st.DrawFn, max_nodes: int = 8) -> Deps:
    """Acyclic graphs: node i depends only on nodes before it in a hidden order."""
    n = draw(st.integers(1, max_nodes))
    names = [f"s{i}" for i in range(n)]
    deps: Deps = {}
    for i, name in enumerate(names):
        deps[name] = sorted(draw(st.sets(st.sampled_from(names[:i]), max_size=3))) if i else []
    order = draw(st.permutations(names))
    return {name: deps[name] for name in order}


@st.composite
def cyclic(draw: st.DrawFn) -> Deps:
    """A DAG plus edges closing at least one cycle."""
    deps = draw(dags())
    names = list(deps)
    a = draw(st.sampled_from(names))
    # Close a cycle through a path a <- ... <- b: make b's ancestor a depend on b.
    descendants = [n for n in names if a in _ancestors(deps, n)] + [a]
    b = draw(st.sampled_from(descendants))
    deps[a] = sorted({*deps[a], b})
    return deps


def _ancestors(deps: Deps, node: str) -> set[str]:
    seen: set[str] = set()
    stack = list(deps[node])
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(deps[n])
    return seen


def to_flows(deps: Deps) -> list[Flow]:
    return [Flow(name=n, dependencies=tuple(d)) for n, d in deps.items()]


def is_cyclic(deps: Deps) -> bool:
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError:
        return True
    return False


@given(dags())
def test_topological_order_respects_every_edge(deps: Deps) -> None:
    order = topological_order(to_flows(deps))
    assert sorted(order) == sorted(deps)
    pos = {n: i for i, n in enumerate(order)}
    assert all(pos[d] < pos[n] for n, ds in deps.items() for d in ds)
    assert find_cycle(to_flows(deps)) is None
    assert validate_jobflow(jobflow("wf", [flow(n, *d) for n, d in deps.items()])) == []


@given(cyclic())
def test_cycles_are_rejected_naming_a_real_cycle(deps: Deps) -> None:
    assert is_cyclic(deps)
    cycle = find_cycle(to_flows(deps))
    assert cycle is not None and cycle[0] == cycle[-1] and len(cycle) >= 2
    for node, dep in itertools.pairwise(cycle):
        assert dep in deps[node], f"{node} -> {dep} is not an edge"
    assert len(set(cycle[:-1])) == len(cycle) - 1, "a simple cycle"
    errs = [str(e) for e in validate_jobflow(jobflow("wf", [flow(n, *d)
                                                          for n, d in deps.items()]))]
    assert errs == [f"spec.flows[{list(deps).index(cycle[0])}].dependencies: Invalid value: "
                    "dependency cycle: " + " -> ".join(cycle)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(max_nodes=7), st.randoms(use_true_random=False))
def test_valid_dag_completes_in_dependency_order(deps: Deps, rnd: random.Random) -> None:
    async def scenario() -> None:
        h = Harness(APIServer(ManualClock(), builtin_defaults=True))
        for crd in load_crds():
            h.server.register_crd(crd)
        await h.api.create(jobflow("wf", [flow(n, *d) for n, d in deps.items()]))
        completed: set[str] = set()
        created_with: dict[str, set[str]] = {}
        for _ in range(4 * len(deps) + 4):
            await h.reconcile("wf")
            jobs = await h.jobs()
            for name in jobs:
                step = name.removeprefix("wf-")
                created_with.setdefault(step, set(completed))
            running = sorted(n.removeprefix("wf-") for n in jobs
                             if n.removeprefix("wf-") not in completed)
            if not running:
                break
            # The Job controller finishes some of the running Jobs, in any order.
            for step in rnd.sample(running, rnd.randint(1, len(running))):
                await h.complete(f"wf-{step}")
                completed.add(step)
        wf = await h.get("wf")
        assert wf["status"]["state"] == "Succeed"
        assert set(created_with) == set(deps)
        for step, done_before in created_with.items():
            assert set(deps[step]) <= done_before, f"{step} started before its dependencies"
        assert wf["status"]["completedFlows"] == len(deps)

    asyncio.run(scenario())


@settings(max_examples=15, deadline=None)
@given(dags(max_nodes=6), st.data())
def test_failure_anywhere_stops_the_flow(deps: Deps, data: st.DataObject) -> None:
    victim = data.draw(st.sampled_from(sorted(deps)))

    async def scenario() -> None:
        h = Harness(APIServer(ManualClock(), builtin_defaults=True))
        for crd in load_crds():
            h.server.register_crd(crd)
        await h.api.create(jobflow("wf", [flow(n, *d) for n, d in deps.items()]))
        done: set[str] = set()
        for _ in range(2 * len(deps) + 2):
            await h.reconcile("wf")
            jobs = await h.jobs()
            if f"wf-{victim}" in jobs:
                break
            for name in jobs:
                if name.removeprefix("wf-") not in done:
                    await h.complete(name)
                    done.add(name.removeprefix("wf-"))
        await h.fail(f"wf-{victim}")
        await h.reconcile("wf")
        before = set(await h.jobs())
        wf = await h.get("wf")
        assert wf["status"]["state"] == "Failed"
        assert wf["status"]["failedFlow"] == victim
        for name in before:
            if name.removeprefix("wf-") not in done and name != f"wf-{victim}":
                job = (await h.jobs())[name]
                assert job["spec"]["suspend"] is True
        await h.reconcile("wf")
        assert set(await h.jobs()) == before, "no Job is created after a failure"
        dependents = {n for n in deps if victim in _ancestors(deps, n)}
        assert not {f"wf-{d}" for d in dependents} & before

    asyncio.run(scenario())


_keys = st.sampled_from(["a", "b", "zone", "kueue.x-k8s.io/podset", "x/y"])
_vals = st.sampled_from(["1", "2", "v"])
_maps = st.none() | st.dictionaries(_keys, _vals, max_size=3)
_tols = st.none() | st.lists(st.fixed_dictionaries(
    {"key": _keys, "operator": st.just("Equal"), "value": _vals,
     "effect": st.just("NoSchedule")}), max_size=2)
infos = st.builds(PodSetInfo, name=st.just("a"), count=st.just(1), labels=_maps,
                  annotations=_maps, node_selector=_maps, tolerations=_tols)


@given(_maps, _maps, _maps, st.lists(infos, min_size=1, max_size=4))
def test_injections_undo_exactly(labels: dict[str, str] | None, annotations: dict[str, str]
                                 | None, node_selector: dict[str, str] | None,
                                 sequence: list[PodSetInfo]) -> None:
    """Any sequence of (re-)injections, then a restore, gives the template back."""
    job = {"metadata": {"name": "j"}, "spec": {"template": {
        "metadata": {k: v for k, v in (("labels", labels), ("annotations", annotations))
                     if v is not None},
        "spec": {"containers": [{"name": "c"}],
                 **({"nodeSelector": node_selector} if node_selector is not None else {})}}}}
    original = copy.deepcopy(job)
    for info in sequence:
        before = copy.deepcopy(job)
        try:
            inject_info(job, info)
        except InvalidPodSetUpdateError:
            restored = copy.deepcopy(before)
            restore_info(restored)
            assert _omit_empty(job) == _omit_empty(restored), \
                "a refused injection leaves the previous one undone only"
            continue
        assert injected_info(job) == info
    restore_info(job)
    assert _omit_empty(job) == _omit_empty(original)


def _omit_empty(value: Any) -> Any:
    """Empty maps and lists dropped, as Go's ``omitempty`` serializes them."""
    if isinstance(value, dict):
        out = {k: _omit_empty(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [_omit_empty(v) for v in value]
    return value
