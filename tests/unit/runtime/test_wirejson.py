"""``wirejson.loads``: the standard library's value or error for every document, faster."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobframework.runtime import wirejson
from jobframework.runtime.client.rest import RestClient


def typed(value: Any) -> Any:
    """``value`` with every scalar tagged by its exact type (1, 1.0 and True differ)."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    if isinstance(value, float) and value != value:
        return ("nan",)
    return (type(value).__name__, value)


scalars = (st.none() | st.booleans() | st.text()
           | st.integers() | st.integers(min_value=-(2**200), max_value=2**200)
           | st.floats(allow_nan=False, allow_infinity=False))
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                         max_leaves=20)


@given(documents, st.booleans())
def test_same_value_and_types_as_the_standard_library(doc: Any, ascii_only: bool) -> None:
    text = json.dumps(doc, ensure_ascii=ascii_only)
    assert typed(wirejson.loads(text.encode())) == typed(json.loads(text))
    assert typed(wirejson.loads(text)) == typed(json.loads(text))


@pytest.mark.parametrize("literal", [
    "9223372036854775807", "9223372036854775808", "18446744073709551616",
    "-9223372036854775809", "123456789012345678901234567890",
])
def test_integers_beyond_64_bits_stay_exact(literal: str) -> None:
    doc = f'{{"spec": {{"replicas": 2, "x-unknown": [{literal}]}}}}'.encode()
    out = wirejson.loads(doc)
    assert out["spec"]["x-unknown"] == [int(literal)]
    assert type(out["spec"]["x-unknown"][0]) is int


def test_a_watch_event_keeps_an_unknown_huge_integer() -> None:
    line = (b'{"type":"MODIFIED","object":{"apiVersion":"example.com/v1","kind":"Thing",'
            b'"metadata":{"name":"t","resourceVersion":"42"},'
            b'"spec":{"budget":340282366920938463463374607431768211456}}}')
    event = RestClient._decode_event(line)
    assert event is not None
    assert event.object["spec"]["budget"] == 2**128


@pytest.mark.parametrize("doc", [b"NaN", b"[Infinity, -Infinity]", b'{"a": 1e400}',
                                 b"\xef\xbb\xbf{}", b'"\\ud800"', '{"a": "\u00e9"}'])
def test_what_orjson_refuses_is_decoded_as_json_does(doc: bytes | str) -> None:
    assert typed(wirejson.loads(doc)) == typed(json.loads(doc))


@pytest.mark.parametrize("doc", [b"", b"{", b'{"a": 1} trailing', b"[1,]", b"\xff\xfe{}x"])
def test_errors_are_the_standard_librarys(doc: bytes) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(doc)
    with pytest.raises(ValueError) as got:
        wirejson.loads(doc)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


def test_an_ordinary_object_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The standard library is only the fallback: an API object with the usual numbers
    # (resourceVersion, generation, counts, timestamps) must not reach it.
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("fell back to json.loads")

    monkeypatch.setattr(wirejson.json, "loads", refuse)
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "resourceVersion": "184467440737", "generation": 3,
                        "uid": "0f8fad5b-d9cb-469f-a165-70867728950e",
                        "creationTimestamp": "2026-11-26T19:33:32Z"},
           "spec": {"parallelism": 4, "completions": 10, "backoffLimit": 6,
                    "activeDeadlineSeconds": 3600,
                    "template": {"spec": {"containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "1.5"}}}]}}},
           "status": {"active": 4, "ready": 4, "startTime": "2026-11-26T19:33:42Z"}}
    assert wirejson.loads(json.dumps({"type": "MODIFIED", "object": job}).encode()) == {
        "type": "MODIFIED", "object": job}


# -- dumps ---------------------------------------------------------------------------


def stdlib_dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


encodable_scalars = scalars | st.floats() | st.sampled_from([float("nan"), float("inf")])
encodable = st.recursive(
    encodable_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=8) | st.integers(-3, 3) | st.booleans(), inner,
                      max_size=4),
    max_leaves=20)


@given(encodable)
def test_dumps_writes_the_standard_librarys_value(value: Any) -> None:
    # The same value when both decode it (NaN compared by its tag), and NaN/Infinity
    # written as the standard library writes them, never as null.
    out = wirejson.dumps(value)
    assert typed(json.loads(out)) == typed(json.loads(stdlib_dumps(value)))
    if b"NaN" in stdlib_dumps(value) or b"Infinity" in stdlib_dumps(value):
        assert out == stdlib_dumps(value)


@pytest.mark.parametrize("value", [
    {"spec": {"ratio": float("nan")}}, [float("inf")], {"x": -float("inf")},
])
def test_dumps_leaves_nan_and_infinities_to_the_standard_library(value: Any) -> None:
    assert wirejson.dumps(value) == stdlib_dumps(value)
    assert b"null" not in wirejson.dumps(value)


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", [
    {"big": 2**64}, {1: "int key"}, {"s": "\ud800"}, {"deep": nested(300)},
    {"null": None, "n": 1},
])
def test_dumps_falls_back_to_the_standard_library_exactly(value: Any) -> None:
    assert wirejson.dumps(value) == stdlib_dumps(value)


def test_dumps_refuses_what_the_standard_library_refuses() -> None:
    import dataclasses
    import datetime as dt

    @dataclasses.dataclass
    class D:
        x: int = 1

    for value in ({"t": dt.datetime(2026, 1, 1)}, {"d": D()}, {"s": {1, 2}}, {"o": object()}):
        with pytest.raises(TypeError, match="not JSON serializable"):
            json.dumps(value)
        with pytest.raises(TypeError, match="not JSON serializable"):
            wirejson.dumps(value)


def test_dumps_is_orjson_for_an_ordinary_body() -> None:
    import orjson
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "j.1", "labels": {}},
            "note": "Créé", "series": {"count": 2}, "ok": True, "ratio": 0.5}
    assert wirejson.dumps(body) == orjson.dumps(body)
    assert json.loads(wirejson.dumps(body)) == body


def test_nesting_past_1024_levels_is_refused_whatever_the_recursion_limit() -> None:
    # The webhook server answers RecursionError with a 400: with a raised interpreter
    # limit (as some tools set it) json alone would decode 5,000 levels.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(50_000)
    try:
        deep = b"[" * 5_000 + b"]" * 5_000
        with pytest.raises(RecursionError, match="nested too deeply"):
            wirejson.loads(deep)
        ok = b"[" * 1_000 + b"]" * 1_000
        assert wirejson.loads(ok) == json.loads(ok)
    finally:
        sys.setrecursionlimit(limit)
