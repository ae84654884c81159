"""RestClient against a scripted loopback server: URLs, query params, bodies, errors, watch."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from aiohttp import web

from jobframework.runtime import errors
from jobframework.runtime.client import (
    Client,
    PatchType,
    Preconditions,
    PropagationPolicy,
    RESTMapping,
)
from jobframework.runtime.client.rest import (
    RateLimit,
    RestClient,
    Timeouts,
    TokenBucket,
    _ReadDeadline,
    error_from_response,
    resource_path,
)
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GVK, GVR
from jobframework.runtime.selectors import LabelSelector

from .conftest import FakeAPI

POD = GVK("", "v1", "Pod")
JOB = GVK("batch", "v1", "Job")
NS = GVK("", "v1", "Namespace")


def pod(name: str = "p", ns: str = "default", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, **meta}}


# -- URL building ---------------------------------------------------------------------------

JOBS = RESTMapping(JOB, GVR("batch", "v1", "jobs"), namespaced=True, subresources=frozenset({
    "status"}))
PODS = RESTMapping(POD, GVR("", "v1", "pods"), namespaced=True)
NAMESPACES = RESTMapping(NS, GVR("", "v1", "namespaces"), namespaced=False)


@pytest.mark.parametrize(("mapping", "kwargs", "expected"), [
    (PODS, {}, "/api/v1/pods"),
    (PODS, {"namespace": "ns1"}, "/api/v1/namespaces/ns1/pods"),
    (PODS, {"namespace": "ns1", "name": "a"}, "/api/v1/namespaces/ns1/pods/a"),
    (JOBS, {"namespace": "x", "name": "j", "subresource": "status"},
     "/apis/batch/v1/namespaces/x/jobs/j/status"),
    (JOBS, {}, "/apis/batch/v1/jobs"),
    (NAMESPACES, {"name": "kube-system"}, "/api/v1/namespaces/kube-system"),
    (NAMESPACES, {"namespace": "ignored", "name": "n"}, "/api/v1/namespaces/n"),
    (PODS, {"namespace": "a", "name": "we ird/name"}, "/api/v1/namespaces/a/pods/we%20ird%2Fname"),
])
def test_resource_path(mapping: RESTMapping, kwargs: dict[str, Any], expected: str) -> None:
    assert resource_path(mapping, **kwargs) == expected


def test_resource_path_rejects_empty_name_and_bare_subresource() -> None:
    with pytest.raises(errors.BadRequest):
        resource_path(PODS, namespace="a", name="")
    with pytest.raises(ValueError, match="subresource"):
        resource_path(PODS, namespace="a", subresource="status")


# -- error parsing --------------------------------------------------------------------------

def test_error_from_status_body_keeps_server_message_and_details() -> None:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
              "message": 'pods "p" not found', "reason": "NotFound", "code": 404,
              "details": {"name": "p", "kind": "pods"}}
    err = error_from_response(404, json.dumps(status).encode())
    assert isinstance(err, errors.NotFound)
    assert err.message == 'pods "p" not found'
    assert err.details == {"name": "p", "kind": "pods"}
    assert err.status == status


@pytest.mark.parametrize(("code", "cls", "fragment"), [
    (404, errors.NotFound, "could not find the requested resource"),
    (409, errors.Conflict, "reported a conflict"),
    (410, errors.Gone, "try again later"),
    (403, errors.Forbidden, "does not allow access"),
    (500, errors.InternalError, "'boom'"),
    (418, errors.ApiError, "status code 418"),
])
def test_error_without_status_body_is_typed_by_code(
    code: int, cls: type[errors.ApiError], fragment: str
) -> None:
    err = error_from_response(code, b"boom")
    assert type(err) is cls
    assert err.code == code
    assert fragment in err.message
    assert err.details["causes"] == [{"reason": "UnexpectedServerResponse", "message": "boom"}]


def test_invalid_status_exposes_causes() -> None:
    causes = [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.x"}]
    body = {"kind": "Status", "code": 422, "reason": "Invalid", "message": "bad",
            "details": {"causes": causes}}
    err = error_from_response(422, json.dumps(body).encode())
    assert isinstance(err, errors.Invalid)
    assert err.causes == causes


# -- requests -------------------------------------------------------------------------------

async def test_is_a_client_and_sends_bearer_token(fake_api: FakeAPI, client: RestClient) -> None:
    assert isinstance(client, Client)
    fake_api.reply(pod())
    got = await client.get(POD, "p", namespace="default")
    assert got["metadata"]["name"] == "p"
    (call,) = fake_api.calls()
    assert (call.method, call.path) == ("GET", "/api/v1/namespaces/default/pods/p")
    assert call.headers["Authorization"] == "Bearer s3cret"
    assert call.headers["Accept"] == "application/json"
    # Our User-Agent, not kubernetes-asyncio's generated one, names us in managedFields.
    assert call.headers["User-Agent"] == "kueue-jobframework"


async def test_get_not_found_raises_typed_error(fake_api: FakeAPI, client: RestClient) -> None:
    fake_api.reply({"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound",
                    "message": 'jobs.batch "j" not found'}, status=404)
    with pytest.raises(errors.NotFound, match=r'jobs\.batch "j" not found'):
        await client.get(JOB, "j", namespace="ns")


async def test_named_request_on_namespaced_kind_needs_namespace(
    fake_api: FakeAPI, client: RestClient
) -> None:
    with pytest.raises(errors.NotFound, match='pods "p" not found'):
        await client.get(POD, "p")
    with pytest.raises(errors.NotFound, match=r'jobs\.batch "j" not found'):
        await client.delete(JOB, "j")
    with pytest.raises(errors.BadRequest, match=r"no metadata\.namespace"):
        await client.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    assert fake_api.calls() == []  # refused without a round trip


async def test_list_sends_selectors_and_fills_type_meta(
    fake_api: FakeAPI, client: RestClient
) -> None:
    fake_api.reply({"kind": "JobList", "apiVersion": "batch/v1",
                    "metadata": {"resourceVersion": "42"},
                    "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]})
    out = await client.list(JOB, namespace="ns", label_selector=LabelSelector.parse("app=x"),
                            field_selector="metadata.name=a")
    assert out.resource_version == "42"
    assert out.continue_token is None
    assert [i["kind"] for i in out.items] == ["Job", "Job"]
    assert out.items[0]["apiVersion"] == "batch/v1"
    (call,) = fake_api.calls()
    assert call.path == "/apis/batch/v1/namespaces/ns/jobs"
    assert call.query == {"labelSelector": "app=x", "fieldSelector": "metadata.name=a"}


async def test_list_all_namespaces(fake_api: FakeAPI, client: RestClient) -> None:
    fake_api.reply({"kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": []})
    await client.list(POD)
    assert fake_api.calls()[0].path == "/api/v1/pods"
    assert fake_api.calls()[0].query == {}


async def test_create_posts_to_collection_with_field_manager_and_dry_run(
    fake_api: FakeAPI, client: RestClient
) -> None:
    fake_api.reply(pod("gen-abc"), status=201)
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"generateName": "gen-", "namespace": "default"}}
    out = await client.create(obj, field_manager="me", dry_run=True)
    assert out["metadata"]["name"] == "gen-abc"
    (call,) = fake_api.calls()
    assert (call.method, call.path) == ("POST", "/api/v1/namespaces/default/pods")
    assert call.query == {"fieldManager": "me", "dryRun": "All"}
    assert call.headers["Content-Type"] == "application/json"
    assert call.json() == obj


async def test_create_conflict(fake_api: FakeAPI, client: RestClient) -> None:
    fake_api.reply({"kind": "Status", "code": 409, "reason": "AlreadyExists",
                    "message": 'pods "p" already exists'}, status=409)
    with pytest.raises(errors.AlreadyExists):
        await client.create(pod())


async def test_update_and_update_status(fake_api: FakeAPI, client: RestClient) -> None:
    fake_api.reply(pod(resourceVersion="2"))
    await client.update(pod(resourceVersion="1"))
    await client.update_status(pod(resourceVersion="2"), field_manager="ctl")
    first, second = fake_api.calls()
    assert (first.method, first.path) == ("PUT", "/api/v1/namespaces/default/pods/p")
    assert first.json()["metadata"]["resourceVersion"] == "1"
    assert second.path == "/api/v1/namespaces/default/pods/p/status"
    assert second.query == {"fieldManager": "ctl"}


async def test_update_stale_resource_version_is_conflict(
    fake_api: FakeAPI, client: RestClient
) -> None:
    fake_api.reply({"kind": "Status", "code": 409, "reason": "Conflict",
                    "message": "Operation cannot be fulfilled"}, status=409)
    with pytest.raises(errors.Conflict):
        await client.update(pod(resourceVersion="1"))


@pytest.mark.parametrize("patch_type", list(PatchType))
async def test_patch_content_type_per_patch_type(
    fake_api: FakeAPI, client: RestClient, patch_type: PatchType
) -> None:
    fake_api.reply(pod())
    body: Any = [{"op": "add", "path": "/x", "value": 1}] if patch_type is PatchType.JSON \
        else {"metadata": {"labels": {"a": "b"}}}
    await client.patch(POD, "p", body, namespace="default", patch_type=patch_type)
    (call,) = fake_api.calls()
    assert call.method == "PATCH"
    assert call.headers["Content-Type"] == patch_type.value
    assert call.json() == body
    assert "force" not in call.query


async def test_apply_sends_json_as_apply_yaml_with_manager_and_force(
    fake_api: FakeAPI, client: RestClient
) -> None:
    fake_api.reply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}})
    obj = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ns"}, "status": {"active": 1}}
    await client.apply(obj, field_manager="kueue", force=True, subresource="status")
    (call,) = fake_api.calls()
    assert call.path == "/apis/batch/v1/namespaces/ns/jobs/j/status"
    assert call.headers["Content-Type"] == "application/apply-patch+yaml"
    assert call.query == {"fieldManager": "kueue", "force": "true"}
    assert call.json() == obj
    with pytest.raises(ValueError, match="field manager"):
        await client.apply(obj, field_manager="")


async def test_delete_sends_delete_options(fake_api: FakeAPI, client: RestClient) -> None:
    fake_api.reply({"kind": "Status", "apiVersion": "v1", "status": "Success"})
    out = await client.delete(
        JOB, "j", namespace="ns", propagation_policy=PropagationPolicy.FOREGROUND,
        preconditions=Preconditions(uid="u1", resource_version="7"), grace_period_seconds=0,
        dry_run=True)
    assert out is None
    (call,) = fake_api.calls()
    assert (call.method, call.path) == ("DELETE", "/apis/batch/v1/namespaces/ns/jobs/j")
    assert call.json() == {
        "kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground",
        "preconditions": {"uid": "u1", "resourceVersion": "7"}, "gracePeriodSeconds": 0,
        "dryRun": ["All"],
    }


async def test_delete_returns_object_only_while_it_remains(
    fake_api: FakeAPI, client: RestClient
) -> None:
    fake_api.reply(pod(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["f"]))
    remaining = await client.delete(POD, "p", namespace="default")
    assert remaining is not None
    assert remaining["metadata"]["finalizers"] == ["f"]
    fake_api.reply(pod())  # last state of an object deleted at once
    assert await client.delete(POD, "p", namespace="default") is None


async def test_retry_after_is_honoured(fake_api: FakeAPI) -> None:
    clock = ManualClock()
    attempts = 0

    async def handler(_: web.Request) -> web.StreamResponse:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            return web.json_response(
                {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "slow"},
                status=429, headers={"Retry-After": "2"})
        return web.json_response(pod())

    fake_api.handler = handler
    async with RestClient.from_url(fake_api.url, clock=clock) as client:
        task = asyncio.create_task(client.get(POD, "p", namespace="default"))
        while not task.done():
            await asyncio.sleep(0.001)
            if clock.sleepers:
                assert clock.next_deadline() == pytest.approx(clock.monotonic() + 2)
                clock.advance(2)
        assert (await task)["metadata"]["name"] == "p"
    assert attempts == 3


async def test_retry_after_gives_up_after_max_retries(fake_api: FakeAPI) -> None:
    fake_api.handler = None

    async def handler(_: web.Request) -> web.StreamResponse:
        return web.json_response({"kind": "Status", "code": 503, "reason": "ServiceUnavailable",
                                  "message": "later"}, status=503, headers={"Retry-After": "0"})

    fake_api.handler = handler
    async with RestClient.from_url(fake_api.url, max_retries=2) as client:
        with pytest.raises(errors.ServiceUnavailable):
            await client.get(POD, "p", namespace="default")
    assert len(fake_api.calls()) == 3


async def test_401_refreshes_credentials_once(fake_api: FakeAPI) -> None:
    from jobframework.runtime.client.config import Credentials

    class Loader:
        calls = 0

        def load_and_set(self, cfg: Any) -> None:
            Loader.calls += 1
            cfg.api_key["BearerToken"] = "fresh"  # from_url set the "Bearer" prefix

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer fresh":
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized",
                                      "message": "Unauthorized"}, status=401)
        return web.json_response(pod())

    fake_api.handler = handler
    base = RestClient.from_url(fake_api.url, token="stale")
    creds = Credentials(base._cfg, source="test", loader=Loader())
    client = RestClient(base._api, credentials=creds, owns_api_client=True)
    async with client:
        assert (await client.get(POD, "p", namespace="default"))["kind"] == "Pod"
        assert Loader.calls == 1
        fake_api.handler = None

        async def deny(_: web.Request) -> web.StreamResponse:
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized",
                                      "message": "Unauthorized"}, status=401)

        fake_api.handler = deny
        with pytest.raises(errors.Unauthorized):
            await client.get(POD, "p", namespace="default")
        assert Loader.calls == 2  # one refresh per request, then the error surfaces


# -- watch ----------------------------------------------------------------------------------

def _stream_handler(lines: list[bytes], *, hold: float = 0.0, gap: float = 0.0) -> Any:
    # Each line written as a chunk of its own, ``gap`` seconds apart; then ``hold`` seconds
    # with the stream open.
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for chunk in lines:
            await resp.write(chunk)
            await asyncio.sleep(gap)
        if hold:
            await asyncio.sleep(hold)
        return resp
    return handler


def _ev(etype: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": etype, "object": obj}).encode() + b"\n"


async def test_watch_query_and_events_across_chunk_boundaries(
    fake_api: FakeAPI, client: RestClient
) -> None:
    added = _ev("ADDED", {"metadata": {"name": "a", "resourceVersion": "5"}})
    modified = _ev("MODIFIED", pod("a", resourceVersion="6"))
    bookmark = _ev("BOOKMARK", {"kind": "Pod", "apiVersion": "v1",
                                "metadata": {"resourceVersion": "9"}})
    # Split one event across writes and glue two together.
    fake_api.handler = _stream_handler([added[:7], added[7:] + modified[:3], modified[3:],
                                        bookmark])
    events = [e async for e in client.watch(POD, namespace="default", resource_version="4",
                                            label_selector="app=a", timeout_seconds=30)]
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "BOOKMARK"]
    assert events[0].object["kind"] == "Pod"  # filled in from the requested kind
    assert events[2].object["metadata"] == {"resourceVersion": "9"}
    (call,) = fake_api.calls()
    assert call.path == "/api/v1/namespaces/default/pods"
    assert call.query == {"watch": "true", "labelSelector": "app=a", "resourceVersion": "4",
                          "allowWatchBookmarks": "true", "timeoutSeconds": "30"}


async def test_watch_without_bookmarks_and_rv(fake_api: FakeAPI, client: RestClient) -> None:
    fake_api.handler = _stream_handler([])
    assert [e async for e in client.watch(POD, allow_bookmarks=False)] == []
    assert fake_api.calls()[0].query == {"watch": "true"}


async def test_watch_error_event_410_raises_gone(fake_api: FakeAPI, client: RestClient) -> None:
    expired = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
               "message": "too old resource version: 1 (50)", "reason": "Expired", "code": 410}
    fake_api.handler = _stream_handler([_ev("ADDED", pod("a")), _ev("ERROR", expired)])
    seen = []
    with pytest.raises(errors.Gone, match="too old resource version"):
        async for e in client.watch(POD, resource_version="1"):
            seen.append(e)
    assert len(seen) == 1


async def test_watch_error_event_other_status(fake_api: FakeAPI, client: RestClient) -> None:
    fake_api.handler = _stream_handler([_ev("ERROR", {"kind": "Status", "code": 500,
                                                      "reason": "InternalError",
                                                      "message": "etcd down"})])
    with pytest.raises(errors.InternalError, match="etcd down"):
        async for _ in client.watch(POD):
            pass


async def test_watch_http_410_raises_gone(fake_api: FakeAPI, client: RestClient) -> None:
    fake_api.reply({"kind": "Status", "code": 410, "reason": "Gone", "message": "gone"}, 410)
    with pytest.raises(errors.Gone):
        async for _ in client.watch(POD, resource_version="1"):
            pass


async def test_watch_inactivity_timeout_ends_a_silent_stream(fake_api: FakeAPI) -> None:
    fake_api.handler = _stream_handler([_ev("ADDED", pod("a"))], hold=5.0)
    async with RestClient.from_url(fake_api.url,
                                   timeouts=Timeouts(watch_inactivity=0.05)) as client:
        loop = asyncio.get_running_loop()
        start = loop.time()
        events = [e async for e in client.watch(POD)]
        assert [e.type for e in events] == ["ADDED"]
        assert loop.time() - start < 2.0


async def test_watch_inactivity_counts_each_read_not_the_stream(fake_api: FakeAPI) -> None:
    # Events 0.1 s apart for 0.8 s with a 0.3 s inactivity bound: no read waits 0.3 s, so
    # the stream runs to its end (a deadline from the stream's start would cut it).
    fake_api.handler = _stream_handler([_ev("ADDED", pod(f"p{i}")) for i in range(8)],
                                       gap=0.1)
    async with RestClient.from_url(fake_api.url,
                                   timeouts=Timeouts(watch_inactivity=0.3)) as client:
        events = [e async for e in client.watch(POD)]
    assert [e.object["metadata"]["name"] for e in events] == [f"p{i}" for i in range(8)]


async def test_watch_inactivity_does_not_count_the_consumers_time(fake_api: FakeAPI) -> None:
    # The consumer takes longer than the bound between reads while the data is already
    # there: only time spent waiting for data counts, as with a timeout around each read.
    fake_api.handler = _stream_handler([_ev("ADDED", pod(f"p{i}")) for i in range(3)],
                                       gap=0.02, hold=5.0)
    async with RestClient.from_url(fake_api.url,
                                   timeouts=Timeouts(watch_inactivity=0.1)) as client:
        names = []
        async with contextlib.aclosing(client.watch(POD)) as stream:
            async for e in stream:
                names.append(e.object["metadata"]["name"])
                if len(names) == 3:
                    break
                await asyncio.sleep(0.25)
    assert names == ["p0", "p1", "p2"]


async def test_watch_inactivity_after_data_closes_with_a_warning(
    fake_api: FakeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    fake_api.handler = _stream_handler([_ev("ADDED", pod(f"p{i}")) for i in range(3)],
                                       gap=0.05, hold=5.0)
    loop = asyncio.get_running_loop()
    async with RestClient.from_url(fake_api.url,
                                   timeouts=Timeouts(watch_inactivity=0.2)) as client:
        start = loop.time()
        events = [e async for e in client.watch(POD)]
        elapsed = loop.time() - start
    assert [e.object["metadata"]["name"] for e in events] == ["p0", "p1", "p2"]
    assert 0.3 <= elapsed < 2.0
    assert any("no data for 0.2s" in r.getMessage() for r in caplog.records)
    assert not any("stream broken" in r.getMessage() for r in caplog.records)


async def test_watch_inactivity_timer_is_cancelled_when_the_stream_ends(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[_ReadDeadline] = []
    init = _ReadDeadline.__init__

    def record(self: _ReadDeadline, *args: Any) -> None:
        init(self, *args)
        made.append(self)

    monkeypatch.setattr(_ReadDeadline, "__init__", record)
    fake_api.handler = _stream_handler([_ev("ADDED", pod("a"))])
    async with RestClient.from_url(fake_api.url,
                                   timeouts=Timeouts(watch_inactivity=60.0)) as client:
        assert [e.type async for e in client.watch(POD)] == ["ADDED"]
    assert len(made) == 1
    assert made[0]._handle.cancelled() and not made[0].expired


async def test_watch_closed_early_releases_connection(
    fake_api: FakeAPI, client: RestClient
) -> None:
    fake_api.handler = _stream_handler([_ev("ADDED", pod("a")), _ev("ADDED", pod("b"))],
                                       hold=5.0)
    async with contextlib.aclosing(client.watch(POD)) as stream:
        async for event in stream:
            assert event.object["metadata"]["name"] == "a"
            break
    # The connection is free again: a normal request goes through promptly.
    fake_api.reply(pod())
    assert (await asyncio.wait_for(client.get(POD, "p", namespace="default"), 2))["kind"]


# -- rate limiting --------------------------------------------------------------------------

async def test_token_bucket_bursts_then_paces() -> None:
    clock = ManualClock()
    bucket = TokenBucket(RateLimit(qps=2, burst=2), clock)
    await bucket.acquire()
    await bucket.acquire()  # burst used up, no sleep
    assert clock.sleepers == 0
    third = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    assert not third.done()
    assert clock.next_deadline() == pytest.approx(clock.monotonic() + 0.5)
    clock.advance(0.5)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert third.done()


async def test_token_bucket_refills_over_time_up_to_burst() -> None:
    clock = ManualClock()
    bucket = TokenBucket(RateLimit(qps=1, burst=3), clock)
    for _ in range(3):
        await bucket.acquire()
    clock.advance(100)  # refill is capped at burst
    for _ in range(3):
        await bucket.acquire()
    assert clock.sleepers == 0
    task = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def test_rate_limit_validates() -> None:
    with pytest.raises(ValueError):
        RateLimit(qps=0, burst=1)


async def test_rate_limited_client_waits_for_tokens(fake_api: FakeAPI) -> None:
    clock = ManualClock()
    start = clock.monotonic()
    fake_api.reply(pod())
    async with RestClient.from_url(fake_api.url, clock=clock,
                                   rate_limit=RateLimit(qps=1, burst=1)) as client:
        task = asyncio.create_task(client.get(POD, "p", namespace="default"))
        while not task.done():
            await asyncio.sleep(0.001)
            deadline = clock.next_deadline()
            if deadline is not None:
                clock.advance(deadline - clock.monotonic())
        await task
    # Five requests (/api, /apis, /api/v1, /apis/batch/v1, the GET) at 1 qps, burst 1.
    assert len(fake_api.requests) == 5
    assert clock.monotonic() - start == pytest.approx(4.0)


async def test_read_timeout_bounds_a_silent_non_watch_response(fake_api: FakeAPI) -> None:
    async def stall(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await asyncio.sleep(5)
        return resp

    fake_api.handler = stall
    async with RestClient.from_url(fake_api.url, timeouts=Timeouts(read=0.05)) as client:
        with pytest.raises(TimeoutError):
            await client.request_json("GET", "/api/v1/namespaces/default/pods/p")


async def test_request_bytes_returns_the_body_as_received(
    fake_api: FakeAPI, client: RestClient
) -> None:
    metrics = b'# TYPE x counter\nx{a="b"} 3\n'

    async def text(request: web.Request) -> web.StreamResponse:
        return web.Response(body=metrics, content_type="text/plain")

    fake_api.handler = text
    assert await client.request_bytes("GET", "/metrics") == metrics
    (call,) = fake_api.calls()
    assert call.path == "/metrics" and call.headers["Accept"] == "*/*"


async def test_request_bytes_sends_bytes_as_given_and_raises_typed_errors(
    fake_api: FakeAPI, client: RestClient
) -> None:
    fake_api.reply({"kind": "Status", "code": 404, "reason": "NotFound", "message": "gone"},
                   404)
    with pytest.raises(errors.NotFound, match="gone"):
        await client.request_bytes("POST", "/x", body=b"raw \xff", content_type="text/plain")
    (call,) = fake_api.calls()
    assert call.body == b"raw \xff" and call.headers["Content-Type"] == "text/plain"
    # request_json still sends its body as JSON.
    fake_api.reply({"ok": True})
    assert await client.request_json("POST", "/y", body={"a": 1}) == {"ok": True}
    assert fake_api.calls()[-1].body == b'{"a":1}'
    assert fake_api.calls()[-1].headers["Content-Type"] == "application/json"
