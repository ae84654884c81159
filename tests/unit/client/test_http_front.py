"""RestClient → HTTPFront → APIServer: the REST client against in-memory server semantics."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from jobframework.runtime import errors
from jobframework.runtime.client import Client, PatchType, Preconditions, WatchEvent
from jobframework.runtime.client.discovery import DiscoveryRESTMapper, NoKindMatchError
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer, ManualClock
from jobframework.testing.http import HTTPFront, serve_http

CM = GVK("", "v1", "ConfigMap")
JOB = GVK("batch", "v1", "Job")
NS = GVK("", "v1", "Namespace")


def cm(name: str, ns: str = "default", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, **meta}, "data": {"k": name}}


def job(name: str, ns: str = "default") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"suspend": True, "template": {"spec": {"containers": [
                {"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}}


@pytest.fixture
def server() -> APIServer:
    return APIServer(ManualClock())


@pytest.fixture
async def front(server: APIServer) -> AsyncIterator[HTTPFront]:
    f = await serve_http(server)
    yield f
    await f.close()


@pytest.fixture
async def rest(front: HTTPFront) -> AsyncIterator[RestClient]:
    async with front.client() as c:
        yield c


async def _raw(front: HTTPFront, method: str, path: str, **kw: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.request(method, front.url + path, **kw) as r:
        text = await r.text()
        return r.status, json.loads(text) if text else None


# -- discovery ------------------------------------------------------------------------------

@pytest.mark.parametrize("aggregated", [True, False])
async def test_discovery_matches_the_server_registry(server: APIServer, aggregated: bool) -> None:
    async with await serve_http(server, aggregated_discovery=aggregated) as front, \
            front.client() as client:
        mapper = client.rest_mapper
        assert isinstance(mapper, DiscoveryRESTMapper)
        assert sorted(await mapper.mappings(), key=str) == sorted(server.resources(), key=str)


async def test_new_kind_is_discovered_after_registration(
    server: APIServer, rest: RestClient
) -> None:
    widget = GVK("example.com", "v1", "Widget")
    with pytest.raises(NoKindMatchError):
        await rest.rest_mapper.rest_mapping(widget)
    server.register_kind(widget, "widgets", namespaced=True)
    mapping = await rest.rest_mapper.rest_mapping(widget)
    assert mapping.resource.resource == "widgets"
    assert mapping.subresources == {"status"}


async def test_classic_discovery_documents(front: HTTPFront) -> None:
    status, apis = await _raw(front, "GET", "/apis")
    assert status == 200 and apis["kind"] == "APIGroupList"
    assert "batch" in {g["name"] for g in apis["groups"]}
    status, group = await _raw(front, "GET", "/apis/batch")
    assert group["preferredVersion"]["groupVersion"] == "batch/v1"
    status, core = await _raw(front, "GET", "/api/v1")
    names = {r["name"] for r in core["resources"]}
    assert {"pods", "pods/status", "configmaps", "namespaces"} <= names
    assert "configmaps/status" not in names
    status, version = await _raw(front, "GET", "/version")
    assert status == 200 and version["major"] == "1"


# -- CRUD through HTTP ----------------------------------------------------------------------

async def test_crud_round_trip(server: APIServer, rest: RestClient) -> None:
    assert isinstance(rest, Client)
    created = await rest.create(cm("a", labels={"app": "x"}), field_manager="t")
    assert created["metadata"]["resourceVersion"]
    got = await rest.get(CM, "a", namespace="default")
    assert got == created
    listed = await rest.list(CM, namespace="default", label_selector="app=x")
    assert [o["metadata"]["name"] for o in listed.items] == ["a"]
    assert listed.resource_version == server.resource_version
    got["data"]["k"] = "changed"
    updated = await rest.update(got)
    assert updated["data"]["k"] == "changed"
    with pytest.raises(errors.Conflict, match="the object has been modified"):
        await rest.update(got)  # stale resourceVersion
    patched = await rest.patch(CM, "a", [{"op": "replace", "path": "/data/k", "value": "j"}],
                               namespace="default", patch_type=PatchType.JSON)
    assert patched["data"]["k"] == "j"
    merged = await rest.patch(CM, "a", {"data": {"m": "1"}}, namespace="default")
    assert merged["data"] == {"k": "j", "m": "1"}
    assert await rest.delete(CM, "a", namespace="default") is None
    with pytest.raises(errors.NotFound, match='configmaps "a" not found'):
        await rest.get(CM, "a", namespace="default")


async def test_generate_name_and_dry_run(server: APIServer, rest: RestClient) -> None:
    obj = cm("")
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "gen-"
    dry = await rest.create(obj, dry_run=True)
    assert dry["metadata"]["name"].startswith("gen-")
    assert server.objects(CM, "default") == []
    real = await rest.create(obj)
    assert real["metadata"]["name"].startswith("gen-")
    with pytest.raises(errors.AlreadyExists):
        await rest.create(cm(real["metadata"]["name"]))


async def test_status_subresource_split(rest: RestClient) -> None:
    j = await rest.create(job("j"))
    j["status"] = {"active": 1}
    j["spec"]["suspend"] = False
    after = await rest.update_status(j)
    assert after["status"] == {"active": 1}
    assert after["spec"]["suspend"] is True  # status writes ignore spec
    after["status"] = {"active": 5}
    main = await rest.update(after)
    assert main["status"] == {"active": 1}  # main writes ignore status
    patched = await rest.patch(JOB, "j", {"status": {"failed": 2}}, namespace="default",
                               subresource="status")
    assert patched["status"] == {"active": 1, "failed": 2}


async def test_delete_with_finalizer_returns_the_remaining_object(rest: RestClient) -> None:
    await rest.create(cm("f", finalizers=["example.com/hold"]))
    remaining = await rest.delete(CM, "f", namespace="default")
    assert remaining is not None
    assert remaining["metadata"]["deletionTimestamp"]
    current = await rest.get(CM, "f", namespace="default")
    with pytest.raises(errors.Conflict):
        await rest.delete(CM, "f", namespace="default",
                          preconditions=Preconditions(uid="someone-else"))
    current["metadata"]["finalizers"] = []
    await rest.update(current)
    with pytest.raises(errors.NotFound):
        await rest.get(CM, "f", namespace="default")


async def test_cluster_scoped_kind(rest: RestClient) -> None:
    ns = await rest.create({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": "team-a"}})
    assert "namespace" not in ns["metadata"]
    assert (await rest.get(NS, "team-a"))["metadata"]["name"] == "team-a"
    names = {o["metadata"]["name"] for o in (await rest.list(NS)).items}
    assert {"default", "team-a"} <= names


async def test_errors_carry_the_servers_status(server: APIServer, rest: RestClient) -> None:
    server.faults.fail("get", error=429)
    with pytest.raises(errors.TooManyRequests):
        await rest.get(CM, "x", namespace="default")
    with pytest.raises(errors.NotFound, match='namespaces "nowhere" not found'):
        await rest.create(cm("x", ns="nowhere"))
    with pytest.raises(errors.BadRequest):
        await rest.list(CM, label_selector="a in (")


async def test_in_memory_and_http_clients_agree(server: APIServer, rest: RestClient) -> None:
    """Same operations on two fresh servers, one direct and one over HTTP: same outcomes."""
    other = APIServer(ManualClock())
    direct = other.client()

    async def outcome(c: Client, op: Callable[[Client], Awaitable[Any]]) -> Any:
        try:
            out = await op(c)
        except errors.ApiError as err:
            return (type(err).__name__, err.code, err.message)
        if isinstance(out, dict):
            meta = dict(out.get("metadata") or {})
            for volatile in ("uid", "creationTimestamp", "deletionTimestamp"):
                meta.pop(volatile, None)
            return {**out, "metadata": meta}
        return out

    ops: list[Callable[[Client], Awaitable[Any]]] = [
        lambda c: c.create(cm("a")),
        lambda c: c.create(cm("a")),
        lambda c: c.get(CM, "a", namespace="default"),
        lambda c: c.get(CM, "b", namespace="default"),
        lambda c: c.patch(CM, "a", {"data": {"x": "1"}}, namespace="default"),
        lambda c: c.patch(CM, "a", {"data": 5}, namespace="default",
                          patch_type=PatchType.STRATEGIC),
        lambda c: c.patch(CM, "a", [{"op": "test", "path": "/data/x", "value": "2"}],
                          namespace="default", patch_type=PatchType.JSON),
        lambda c: c.update({**cm("a"), "metadata": {**cm("a")["metadata"],
                                                    "resourceVersion": "1"}}),
        lambda c: c.create(job("j")),
        lambda c: c.update_status({**job("j"), "status": {"active": 1}}),
        lambda c: c.delete(CM, "zzz", namespace="default"),
        lambda c: c.delete(CM, "a", namespace="default"),
        lambda c: c.get(CM, "a"),  # namespaced kind, no namespace
        lambda c: c.create({**cm("n"), "metadata": {"name": "n"}}),
        lambda c: c.list(CM, label_selector="a in ("),
    ]
    for i, op in enumerate(ops):
        assert await outcome(rest, op) == await outcome(direct, op), f"operation {i}"


async def test_request_body_must_match_the_url(front: HTTPFront) -> None:
    status, body = await _raw(front, "POST", "/api/v1/namespaces/default/configmaps",
                              json=cm("a", ns="other"))
    assert status == 400 and "does not match the namespace" in body["message"]
    status, body = await _raw(front, "PUT", "/api/v1/namespaces/default/configmaps/b",
                              json=cm("a"))
    assert status == 400 and body["message"] == (
        "the name of the object (a) does not match the name on the URL (b)")
    status, body = await _raw(front, "PUT", "/api/v1/namespaces/default/configmaps/a",
                              json=cm("a", ns="other"))
    assert status == 400 and body["message"] == (
        "the namespace of the object (other) does not match the namespace on the request "
        "(default)")
    status, body = await _raw(front, "POST", "/api/v1/namespaces/default/configmaps",
                              json={**cm("a"), "kind": "Secret"})
    assert status == 400 and body["reason"] == "BadRequest"
    # Missing type meta and namespace are defaulted from the URL.
    status, body = await _raw(front, "POST", "/api/v1/namespaces/default/configmaps",
                              json={"metadata": {"name": "c"}})
    assert status == 201 and body["metadata"]["namespace"] == "default"


async def test_unknown_paths_methods_and_media_types(front: HTTPFront) -> None:
    status, body = await _raw(front, "GET", "/apis/nope.io/v1/things")
    assert status == 404 and body["kind"] == "Status" and body["reason"] == "NotFound"
    status, _ = await _raw(front, "GET", "/api/v1/configmaps/x")  # no namespace: no route
    assert status == 404
    status, _ = await _raw(front, "GET", "/api/v1/namespaces/default/configmaps/x/status")
    assert status == 404  # configmaps have no status subresource
    status, body = await _raw(front, "POST", "/api/v1/configmaps", json=cm("a"))
    assert status == 405 and body["reason"] == "MethodNotAllowed"
    status, body = await _raw(front, "PATCH", "/api/v1/namespaces/default/configmaps/a",
                              data=b"{}", headers={"Content-Type": "text/plain"})
    assert status == 415 and body["reason"] == "UnsupportedMediaType"


async def test_bearer_tokens_and_user(server: APIServer) -> None:
    seen: list[str] = []

    async def hook(review: dict[str, Any]) -> dict[str, Any]:
        seen.append(review["request"]["userInfo"]["username"])
        return {"response": {"uid": review["request"]["uid"], "allowed": True}}

    server.add_validating_webhook(hook)
    async with await serve_http(server, tokens={"t0k": "alice"}) as front:
        async with front.client() as client:
            await client.create(cm("a"))
        assert seen == ["alice"]
        async with RestClient.from_url(front.url, token="wrong") as bad:
            with pytest.raises(errors.Unauthorized):
                await bad.get(CM, "a", namespace="default")


def test_front_refuses_non_loopback(server: APIServer) -> None:
    with pytest.raises(ValueError, match="loopback"):
        HTTPFront(server, host="0.0.0.0")
    with pytest.raises(RuntimeError):
        _ = HTTPFront(server).url


# -- watch through HTTP ---------------------------------------------------------------------

async def _next(stream: AsyncIterator[WatchEvent]) -> WatchEvent:
    return await asyncio.wait_for(anext(stream), 5)


async def test_watch_streams_changes_from_a_resource_version(rest: RestClient) -> None:
    await rest.create(cm("before"))
    rv = (await rest.list(CM, namespace="default")).resource_version
    async with contextlib.aclosing(rest.watch(CM, namespace="default", resource_version=rv,
                                              allow_bookmarks=False)) as stream:
        await rest.create(cm("a"))
        ev = await _next(stream)
        assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "a")
        await rest.patch(CM, "a", {"data": {"k": "2"}}, namespace="default")
        ev = await _next(stream)
        assert (ev.type, ev.object["data"]["k"]) == ("MODIFIED", "2")
        await rest.delete(CM, "a", namespace="default")
        ev = await _next(stream)
        assert ev.type == "DELETED"


async def test_watch_without_rv_starts_with_current_state(rest: RestClient) -> None:
    await rest.create(cm("x"))
    async with contextlib.aclosing(rest.watch(CM, namespace="default")) as stream:
        ev = await _next(stream)
        assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "x")


async def test_watch_too_old_rv_is_an_error_event_and_raises_gone(
    server: APIServer, rest: RestClient, front: HTTPFront
) -> None:
    await rest.create(cm("x"))
    rv = server.resource_version
    await rest.create(cm("y"))
    server.faults.compact()
    with pytest.raises(errors.Gone, match="too old resource version"):
        async for _ in rest.watch(CM, namespace="default", resource_version=rv):
            pass
    # On the wire: HTTP 200 and one ERROR event carrying a 410 Expired Status.
    async with aiohttp.ClientSession() as s, s.get(
            front.url + "/api/v1/namespaces/default/configmaps",
            params={"watch": "true", "resourceVersion": rv}) as r:
        assert r.status == 200
        lines = [json.loads(line) for line in (await r.read()).splitlines() if line]
    assert lines == [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": lines[0]["object"]["message"], "reason": "Expired", "code": 410}}]


async def test_watch_injected_failure_is_an_http_error(server: APIServer, rest: RestClient) -> None:
    server.faults.fail("watch", error=500)
    with pytest.raises(errors.InternalError):
        async for _ in rest.watch(CM):
            pass


async def test_watch_bookmarks_and_server_timeout(server: APIServer, rest: RestClient) -> None:
    assert isinstance(server.clock, ManualClock)
    clock = server.clock
    rv = server.resource_version
    stream = rest.watch(CM, namespace="default", resource_version=rv, timeout_seconds=3)
    try:
        pending = asyncio.ensure_future(anext(stream))
        for _ in range(50):
            await asyncio.sleep(0.002)
            if clock.sleepers:
                break
        clock.advance(server.bookmark_interval)
        ev = await asyncio.wait_for(pending, 5)
        assert ev.type == "BOOKMARK"
        assert ev.object["metadata"]["resourceVersion"] == rv
        rest_events: list[WatchEvent] = []

        async def drain() -> None:
            async for e in stream:
                rest_events.append(e)

        task = asyncio.ensure_future(drain())
        for _ in range(100):
            await asyncio.sleep(0.002)
            if clock.sleepers:
                clock.advance(1)
            if task.done():
                break
        await asyncio.wait_for(task, 5)  # the server closed the stream at its timeout
        assert all(e.type == "BOOKMARK" for e in rest_events)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_dropped_watch_ends_the_stream(server: APIServer, rest: RestClient) -> None:
    async with contextlib.aclosing(rest.watch(CM, namespace="default",
                                              resource_version=server.resource_version,
                                              allow_bookmarks=False)) as stream:
        pending = asyncio.ensure_future(anext(stream))
        for _ in range(50):
            await asyncio.sleep(0.002)
            if server.faults.drop_watches():
                break
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(pending, 5)


async def test_closing_the_front_ends_open_watches(server: APIServer) -> None:
    front = await serve_http(server)
    async with front.client() as client:
        stream = client.watch(CM, namespace="default", resource_version=server.resource_version,
                              allow_bookmarks=False)
        # Close only once the stream is open at both ends, shown by an event through it:
        # closed earlier, the request itself is refused (aiohttp retries a request whose
        # reused connection closed before answering), which is not what this tests.
        first = asyncio.ensure_future(anext(stream))
        for _ in range(2000):
            if server._watchers:
                break
            await asyncio.sleep(0.005)
        await server.client().create(cm("opened"))
        event = await asyncio.wait_for(first, 10)
        assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "opened")
        pending = asyncio.ensure_future(anext(stream))
        await asyncio.wait_for(front.close(), 5)
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(pending, 5)
        assert not server._watchers
        await stream.aclose()  # type: ignore[attr-defined]


async def test_client_disconnect_closes_the_server_side_watch(
    server: APIServer, rest: RestClient
) -> None:
    stream = rest.watch(CM, namespace="default", resource_version=server.resource_version,
                        allow_bookmarks=False)
    pending = asyncio.ensure_future(anext(stream))
    for _ in range(50):
        await asyncio.sleep(0.002)
        if server._watchers:
            break
    assert len(server._watchers) == 1
    pending.cancel()
    await asyncio.wait({pending})
    await stream.aclose()  # type: ignore[attr-defined]
    for _ in range(100):
        if not server._watchers:
            break
        await asyncio.sleep(0.005)
    assert not server._watchers


async def test_informer_over_http_converges_after_dropped_watch_and_410(
    server: APIServer, rest: RestClient
) -> None:
    """The runtime's SharedInformer on the REST client: a dropped stream is re-watched, an
    expired resourceVersion relists, and the store ends equal to the server's state."""
    from jobframework.runtime.cache import Backoff, SharedInformer

    direct = server.client()
    informer = SharedInformer(rest, CM, namespace="default",
                              backoff=Backoff(initial=0.002, cap=0.01))
    informer.start()
    try:
        assert await asyncio.wait_for(informer.wait_for_sync(), 5)

        async def converged(expected: set[str]) -> None:
            for _ in range(500):
                if {o["metadata"]["name"] for o in informer.indexer.list()} == expected:
                    return
                await asyncio.sleep(0.005)
            raise AssertionError(f"store never reached {expected}")

        await direct.create(cm("a"))
        await direct.create(cm("b"))
        await converged({"a", "b"})
        server.faults.drop_watches()
        await direct.delete(CM, "a", namespace="default")
        server.faults.compact()  # the re-watch from the last rv now gets 410 → relist
        await direct.create(cm("c"))
        await converged({"b", "c"})
    finally:
        await informer.stop()


async def test_retry_after_from_status_details_is_retried(
    server: APIServer, front: HTTPFront
) -> None:
    await server.client().create(cm("a"))
    server.faults.fail("get", error=errors.TooManyRequests(
        "Too many requests, please try again later.", details={"retryAfterSeconds": 2}))
    status, body = await _raw(front, "GET", "/api/v1/namespaces/default/configmaps/a")
    assert status == 429 and body["details"]["retryAfterSeconds"] == 2
    server.faults.fail("get", error=errors.TooManyRequests(
        "Too many requests, please try again later.", details={"retryAfterSeconds": 2}))
    clock = ManualClock()
    async with front.client(clock=clock) as client:
        await client.rest_mapper.rest_mapping(CM)
        task = asyncio.ensure_future(client.get(CM, "a", namespace="default"))
        for _ in range(200):
            await asyncio.sleep(0.002)
            if clock.sleepers:
                break
        assert clock.next_deadline() == 2.0
        clock.advance(2)
        assert (await asyncio.wait_for(task, 5))["metadata"]["name"] == "a"
