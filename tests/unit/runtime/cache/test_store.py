"""Indexer: keys, named indexes, re-indexing, replace, failing index functions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobframework.runtime.cache import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    Indexer,
    index_by_namespace,
    object_key,
)


def obj(name: str, ns: str = "a", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def by_label(key: str) -> Any:
    return lambda o: [o["metadata"]["labels"][key]] if key in o["metadata"]["labels"] else []


def test_keys() -> None:
    assert object_key(obj("x", "ns")) == "ns/x"
    assert object_key(obj("node-1", "")) == "node-1"
    assert object_key(DeletedFinalStateUnknown("ns/x", obj("x", "ns"))) == "ns/x"


def test_add_update_delete_follow_indexes() -> None:
    store = Indexer({"app": by_label("app"), NAMESPACE_INDEX: index_by_namespace})
    store.add(obj("one", app="web"))
    store.add(obj("two", "b", app="web"))
    assert store.index_keys("app", "web") == ["a/one", "b/two"]
    assert store.index_keys(NAMESPACE_INDEX, "b") == ["b/two"]
    store.update(obj("one", app="db"))
    assert store.index_keys("app", "web") == ["b/two"]
    assert [o["metadata"]["name"] for o in store.by_index("app", "db")] == ["one"]
    store.delete(obj("two", "b"))
    assert store.index_keys("app", "web") == []
    assert store.list_index_func_values("app") == ["db"], "empty values are dropped"
    assert store.list_keys() == ["a/one"]
    store.delete(obj("never", "z"))  # absent: ignored
    assert len(store) == 1


def test_multi_valued_index_and_index_lookup() -> None:
    def tags(o: dict[str, Any]) -> list[str]:
        return sorted(o["metadata"]["labels"].values())

    store = Indexer({"tags": tags})
    store.add(obj("one", x="red", y="blue"))
    store.add(obj("two", x="blue"))
    store.add(obj("three", x="green"))
    assert store.index_keys("tags", "blue") == ["a/one", "a/two"]
    assert [o["metadata"]["name"] for o in store.index("tags", obj("q", x="red"))] == ["one"]
    assert [o["metadata"]["name"] for o in store.index("tags", obj("q", x="blue", y="green"))
            ] == ["one", "three", "two"]


def test_indexers_added_later_index_existing_objects() -> None:
    store = Indexer()
    store.add(obj("one", app="web"))
    store.add(obj("two", app="db"))
    store.add_indexers({"app": by_label("app")})
    assert store.index_keys("app", "web") == ["a/one"]
    with pytest.raises(ValueError, match="indexer conflict"):
        store.add_indexers({"app": by_label("app")})
    with pytest.raises(KeyError, match="does not exist"):
        store.index_keys("nope", "x")


def test_replace_rebuilds_indexes() -> None:
    store = Indexer({"app": by_label("app")})
    store.add(obj("one", app="web"))
    store.replace([obj("two", app="web"), obj("three", app="db")])
    assert store.list_keys() == ["a/two", "a/three"]
    assert store.index_keys("app", "web") == ["a/two"]


def test_failing_index_function_changes_nothing() -> None:
    def picky(o: dict[str, Any]) -> list[str]:
        if o["metadata"]["name"] == "bad":
            raise ValueError("cannot index")
        return [o["metadata"]["name"]]

    store = Indexer({"name": picky})
    store.add(obj("good"))
    with pytest.raises(ValueError):
        store.add(obj("bad"))
    with pytest.raises(ValueError):
        store.replace([obj("bad")])
    assert store.list_keys() == ["a/good"]
    assert store.index_keys("name", "good") == ["a/good"]


@given(st.lists(st.tuples(st.sampled_from(["add", "delete"]), st.sampled_from("pqrs"),
                          st.sampled_from(["a", "b"]), st.sampled_from(["x", "y", "z"])),
                max_size=40))
def test_indexes_always_match_a_full_scan(ops: list[tuple[str, str, str, str]]) -> None:
    store = Indexer({"app": by_label("app"), NAMESPACE_INDEX: index_by_namespace})
    for op, name, ns, app in ops:
        if op == "add":
            store.add(obj(name, ns, app=app))
        else:
            store.delete(obj(name, ns))
    for app in "xyz":
        expected = sorted(object_key(o) for o in store.list()
                          if o["metadata"]["labels"]["app"] == app)
        assert store.index_keys("app", app) == expected
    for ns in "ab":
        expected = sorted(k for k in store.list_keys() if k.startswith(f"{ns}/"))
        assert store.index_keys(NAMESPACE_INDEX, ns) == expected
