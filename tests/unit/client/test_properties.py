"""Properties: watch stream framing under any chunking; the token bucket's rate bound."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jobframework.runtime.client.rest import RateLimit, RestClient, Timeouts, TokenBucket

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=10,
)
events = st.lists(
    st.builds(lambda t, name, extra: {"type": t, "object": {
        "metadata": {"name": name, "resourceVersion": "1"}, "extra": extra}},
        st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]),
        st.text(min_size=1, max_size=10), json_values),
    max_size=8,
)


class _Content:
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = list(chunks)

    async def readany(self) -> bytes:
        return self._chunks.pop(0) if self._chunks else b""


class _Response:
    url = "http://test/watch"

    def __init__(self, chunks: list[bytes]) -> None:
        self.content = _Content(chunks)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks, last = [], 0
    for p in points:
        chunks.append(data[last:p])
        last = p
    chunks.append(data[last:])
    return [c for c in chunks if c]  # an empty read means end of stream


@settings(max_examples=100, deadline=None)
@given(events, st.lists(st.integers(min_value=0), max_size=20), st.booleans())
def test_watch_framing_is_independent_of_chunking(
    evs: list[dict[str, Any]], cuts: list[int], trailing_newline: bool
) -> None:
    lines = [json.dumps(e).encode() for e in evs]
    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    client = RestClient.__new__(RestClient)
    client._timeouts = Timeouts(watch_inactivity=None)

    async def collect() -> list[dict[str, Any]]:
        out = []
        async for line in client._lines(_Response(_split(data, cuts))):  # type: ignore[arg-type]
            event = client._decode_event(line)
            assert event is not None
            out.append({"type": event.type, "object": event.object})
        return out

    assert asyncio.run(collect()) == evs


class _RecordingClock:
    """Time stands still while callers 'sleep'; we only record when they would wake."""

    def __init__(self) -> None:
        self.t = 0.0
        self.woke_at: list[float] = []

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.woke_at.append(self.t + seconds)


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0.5, max_value=50), st.integers(min_value=1, max_value=20),
       st.lists(st.floats(min_value=0, max_value=5), min_size=1, max_size=60))
def test_token_bucket_never_exceeds_burst_plus_rate(
    qps: float, burst: int, gaps: list[float]
) -> None:
    clock = _RecordingClock()
    bucket = TokenBucket(RateLimit(qps=qps, burst=burst), clock)  # type: ignore[arg-type]
    grants: list[float] = []

    async def run() -> None:
        for gap in gaps:
            clock.t += gap
            before = len(clock.woke_at)
            await bucket.acquire()
            grants.append(clock.woke_at[-1] if len(clock.woke_at) > before else clock.t)

    asyncio.run(run())
    arrivals = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    assert all(g >= a - 1e-9 for g, a in zip(grants, arrivals, strict=True))
    assert grants == sorted(grants)  # first come, first served
    for i in range(len(grants)):
        for j in range(i, len(grants)):
            assert j - i + 1 <= burst + qps * (grants[j] - grants[i]) + 1e-6
    # The first `burst` requests never wait.
    assert grants[:burst] == arrivals[:burst]
