"""Property: garbage collection reaches the state the ownership graph implies.

Random ownership DAGs of ConfigMaps (each object may be owned by earlier ones), random
deletions with random propagation policies. After ``settle()``:

* an object survives iff it was not deleted itself and either it is left with no owner
  (it had none, or only owners deleted with ``Orphan``) or one of its other owners
  survives;
* no survivor keeps a reference to an owner that is gone, and none is left half deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from jobframework.runtime import errors
from jobframework.runtime.client import PropagationPolicy
from jobframework.runtime.objects import owner_reference
from jobframework.testing import APIServer, ManualClock

from .conftest import CONFIGMAP, configmap

POLICIES = st.sampled_from([None, PropagationPolicy.BACKGROUND, PropagationPolicy.FOREGROUND,
                            PropagationPolicy.ORPHAN])


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[list[int]], list[bool], dict[int, Any]]:
    n = draw(st.integers(1, 8))
    owners = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else []
              for i in range(n)]
    blocking = [draw(st.booleans()) for _ in range(n)]
    deleted = draw(st.dictionaries(st.integers(0, n - 1), POLICIES, max_size=n))
    return owners, blocking, deleted


def expected_survivors(owners: list[list[int]], deleted: dict[int, Any]) -> set[int]:
    orphaning = {i for i, p in deleted.items() if p == PropagationPolicy.ORPHAN}
    alive: set[int] = set()
    for i, mine in enumerate(owners):  # owners come first: one pass is a fixpoint
        if i in deleted:
            continue
        remaining = [o for o in mine if o not in orphaning]
        if not remaining or any(o in alive for o in remaining):
            alive.add(i)
    return alive


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_collection_matches_the_ownership_graph(
    scenario: tuple[list[list[int]], list[bool], dict[int, Any]],
) -> None:
    owners, blocking, deleted = scenario

    async def run() -> set[int]:
        server = APIServer(ManualClock())
        client = server.client()
        created: list[dict[str, Any]] = []
        for i, mine in enumerate(owners):
            obj = configmap(f"cm-{i}")
            if mine:
                obj["metadata"]["ownerReferences"] = [
                    owner_reference(created[o], controller=False,
                                    block_owner_deletion=blocking[i]) for o in mine]
            created.append(await client.create(obj))
        for i, policy in deleted.items():
            # NotFound: already collected as someone's dependent.
            with contextlib.suppress(errors.NotFound):
                await client.delete(CONFIGMAP, f"cm-{i}", namespace="default",
                                    propagation_policy=policy)
        await server.settle()
        survivors = {int(o["metadata"]["name"].split("-")[1])
                     for o in server.objects(CONFIGMAP, "default")}
        uids = {o["metadata"]["uid"] for o in server.objects(CONFIGMAP, "default")}
        for obj in server.objects(CONFIGMAP, "default"):
            assert not obj["metadata"].get("deletionTimestamp"), obj
            for ref in obj["metadata"].get("ownerReferences") or []:
                assert ref["uid"] in uids, obj
        return survivors

    survivors = asyncio.run(run())
    assert survivors == expected_survivors(owners, deleted)
