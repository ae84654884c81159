"""The fault-injecting apiserver proxy: forwarding, injected errors, cuts, watch faults."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import ssl
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from jobframework.runtime import errors
from jobframework.runtime.cache import Backoff, SharedInformer
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.clock import RealClock
from jobframework.runtime.objects import resource_version_of
from jobframework.testing import APIServer
from jobframework.testing.faultproxy import (
    FaultPlan,
    FaultProxy,
    exempt_leases_and_discovery,
)
from jobframework.testing.http import HTTPFront, serve_http
from jobframework.webhook.certs import CertificateAuthority

from .conftest import CONFIGMAP, configmap

NS = "default"


def write_kubeconfig(path: Path, server: str, **user: str) -> Path:
    cluster: dict[str, Any] = {"server": server}
    if "ca" in user:
        cluster["certificate-authority-data"] = user.pop("ca")
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "up", "cluster": cluster}],
        "users": [{"name": "me", "user": user}],
        "contexts": [{"name": "up", "context": {"cluster": "up", "user": "me",
                                                "namespace": NS}}],
        "current-context": "up"}))
    return path


@pytest.fixture
async def front(server: APIServer) -> AsyncIterator[HTTPFront]:
    async with await serve_http(server) as f:
        yield f


@pytest.fixture
async def proxy(front: HTTPFront, tmp_path: Path) -> AsyncIterator[FaultProxy]:
    upstream = write_kubeconfig(tmp_path / "upstream.kubeconfig", front.url)
    async with FaultProxy(upstream, directory=tmp_path / "proxy") as p:
        yield p


@pytest.fixture
async def rest(proxy: FaultProxy) -> AsyncIterator[RestClient]:
    async with await RestClient.from_kubeconfig(str(proxy.kubeconfig), max_retries=0) as c:
        await c.rest_mapper.rest_mapping(CONFIGMAP)  # discovery before any fault
        yield c


def raw_session(proxy: FaultProxy) -> aiohttp.ClientSession:
    ctx = ssl.create_default_context(cafile=str(proxy.directory / "ca.crt"))
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx))


def watch_url(proxy: FaultProxy, rv: str) -> str:
    return f"{proxy.url}/api/v1/namespaces/{NS}/configmaps?watch=true&resourceVersion={rv}"


async def test_forwards_requests_bodies_and_statuses(
        server: APIServer, proxy: FaultProxy, rest: RestClient) -> None:
    created = await rest.create(configmap("a", x="1"))
    assert created["data"] == {"x": "1"} and resource_version_of(created)
    assert (await rest.get(CONFIGMAP, "a", namespace=NS))["data"] == {"x": "1"}
    patched = await rest.patch(CONFIGMAP, "a", {"data": {"y": "2"}}, namespace=NS)
    assert patched["data"] == {"x": "1", "y": "2"}
    listed = await rest.list(CONFIGMAP, namespace=NS)
    assert [o["metadata"]["name"] for o in listed.items] == ["a"]
    with pytest.raises(errors.AlreadyExists):
        await rest.create(configmap("a"))
    assert await rest.delete(CONFIGMAP, "a", namespace=NS) is None
    with pytest.raises(errors.NotFound, match='configmaps "a" not found'):
        await rest.get(CONFIGMAP, "a", namespace=NS)
    assert (await server.client().list(CONFIGMAP, namespace=NS)).items == []
    assert proxy.stats.requests >= 7 and proxy.stats.errors == {}
    assert {d.action for d in proxy.decisions} == {"forward"}


async def test_https_upstream_with_client_certificate_and_headers(tmp_path: Path) -> None:
    ca = CertificateAuthority.generate()
    serving_cert, serving_key = ca.issue(("127.0.0.1",))
    client_cert, client_key = ca.issue(("admin",), common_name="admin", client_auth=True)
    for name, data in (("ca.crt", ca.cert_pem), ("srv.crt", serving_cert),
                       ("srv.key", serving_key)):
        (tmp_path / name).write_bytes(data)
    seen: list[tuple[dict[str, str], str, bytes, str]] = []

    async def record(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(x[0] for x in peer["subject"]) if peer else {}
        seen.append((dict(request.headers), request.path_qs, await request.read(),
                     subject.get("commonName", "")))
        return web.json_response({"ok": True}, status=201, headers={"X-Upstream": "1"})

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tmp_path / "ca.crt"))
    ctx.load_cert_chain(tmp_path / "srv.crt", tmp_path / "srv.key")
    ctx.verify_mode = ssl.CERT_REQUIRED
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    upstream = write_kubeconfig(
        tmp_path / "up.kubeconfig", f"https://127.0.0.1:{port}", ca=b64(ca.cert_pem),
        token="up-token", **{"client-certificate-data": b64(client_cert),
                             "client-key-data": b64(client_key)})
    try:
        async with FaultProxy(upstream, directory=tmp_path / "p") as proxy, \
                raw_session(proxy) as session:
            written = yaml.safe_load(proxy.kubeconfig.read_text())
            assert written["clusters"][0]["cluster"]["server"] == proxy.url
            assert written["users"][0]["user"]["token"] == "up-token"
            assert written["contexts"][0]["context"]["namespace"] == NS
            async with session.post(
                    f"{proxy.url}/apis/x.io/v1/things?fieldManager=m&dryRun=All",
                    data=b'{"a": 1}', headers={
                        "Authorization": "Bearer caller", "User-Agent": "kueue-manager/1",
                        "Content-Type": "application/json", "Connection": "keep-alive"}) as r:
                assert r.status == 201 and r.headers["X-Upstream"] == "1"
                assert await r.json() == {"ok": True}
    finally:
        await runner.cleanup()
    headers, path_qs, body, cn = seen[0]
    assert path_qs == "/apis/x.io/v1/things?fieldManager=m&dryRun=All"
    assert body == b'{"a": 1}' and cn == "admin"
    assert headers["Authorization"] == "Bearer up-token"  # the proxy's own credentials
    assert headers["User-Agent"] == "kueue-manager/1"  # the caller, for the audit log
    assert headers["Host"] == f"127.0.0.1:{port}"
    assert headers["Content-Type"] == "application/json"


async def test_injected_errors(server: APIServer, proxy: FaultProxy, rest: RestClient) -> None:
    await server.client().create(configmap("a"))
    proxy.plan = FaultPlan(error_rate=1.0, error_codes=(409,))
    with pytest.raises(errors.Conflict) as conflict:
        await rest.create(configmap("b"))
    assert conflict.value.message == (
        'Operation cannot be fulfilled on configmaps "b": the object has been modified; '
        "please apply your changes to the latest version and try again")
    assert conflict.value.status["kind"] == "Status"
    assert conflict.value.status["status"] == "Failure"
    with pytest.raises(errors.Conflict, match='configmaps "a"'):
        await rest.patch(CONFIGMAP, "a", {"data": {"k": "v"}}, namespace=NS)
    # A read never gets a 409: with 409 the only choice, it is forwarded.
    assert (await rest.get(CONFIGMAP, "a", namespace=NS))["metadata"]["name"] == "a"
    assert proxy.decisions[-1].action == "forward"
    proxy.plan = FaultPlan(error_rate=1.0, error_codes=(500,))
    with pytest.raises(errors.InternalError, match="Internal error occurred"):
        await rest.get(CONFIGMAP, "a", namespace=NS)
    proxy.plan = FaultPlan(error_rate=1.0, error_codes=(429,))
    with pytest.raises(errors.TooManyRequests) as throttled:
        await rest.list(CONFIGMAP, namespace=NS)
    assert throttled.value.details["retryAfterSeconds"] == 1
    assert proxy.stats.errors == {409: 2, 500: 1, 429: 1}
    # Nothing reached the server: "b" was never created, "a" never patched.
    assert [o["metadata"]["name"] for o in
            (await server.client().list(CONFIGMAP, namespace=NS)).items] == ["a"]
    assert (await server.client().get(CONFIGMAP, "a", namespace=NS))["data"] == {}


class InstantClock(RealClock):
    """Real time, but sleeps are only recorded (RestClient's Retry-After waits)."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


async def test_429_is_retried_by_the_client_after_retry_after(proxy: FaultProxy) -> None:
    clock = InstantClock()
    async with await RestClient.from_kubeconfig(str(proxy.kubeconfig), max_retries=2,
                                                clock=clock) as c:
        await c.rest_mapper.rest_mapping(CONFIGMAP)
        proxy.plan = FaultPlan(error_rate=1.0, error_codes=(429,))
        with pytest.raises(errors.TooManyRequests):
            await c.get(CONFIGMAP, "a", namespace=NS)
        assert clock.slept == [1.0, 1.0]  # Retry-After: 1, twice, then it gives up
        assert proxy.stats.errors == {429: 3}
        # A 500 carries no Retry-After: not retried.
        proxy.plan = FaultPlan(error_rate=1.0, error_codes=(500,))
        with pytest.raises(errors.InternalError):
            await c.get(CONFIGMAP, "a", namespace=NS)
        assert proxy.stats.errors == {429: 3, 500: 1} and len(clock.slept) == 2


async def test_exempt_requests_are_never_faulted(proxy: FaultProxy, rest: RestClient) -> None:
    proxy.plan = FaultPlan(error_rate=0.5, cut_rate=0.5, delay_rate=1.0, max_delay=0.5,
                           exempt=lambda method, path: path.endswith("/configmaps"))
    for i in range(10):
        await rest.create(configmap(f"c{i}"))
    assert len((await rest.list(CONFIGMAP, namespace=NS)).items) == 10
    assert [d.action for d in proxy.decisions][-11:] == ["pass"] * 11
    assert proxy.stats.delayed == 0 and proxy.stats.connections_cut == 0


def test_exempt_leases_and_discovery() -> None:
    exempt = [
        "/api", "/apis", "/api/v1", "/apis/batch", "/apis/batch/v1", "/version",
        "/openapi/v2", "/openapi/v3/apis/batch/v1",
        "/apis/coordination.k8s.io/v1/namespaces/kueue-system/leases/kueue",
    ]
    faulted = [
        "/api/v1/pods", "/api/v1/namespaces/ns/configmaps/x",
        "/apis/batch/v1/jobs", "/apis/kueue.x-k8s.io/v1beta1/namespaces/ns/workloads",
    ]
    assert all(exempt_leases_and_discovery("PUT", p) for p in exempt)
    assert not any(exempt_leases_and_discovery("GET", p) for p in faulted)


async def test_cut_before_and_after_forwarding(
        server: APIServer, proxy: FaultProxy, rest: RestClient) -> None:
    proxy.plan = FaultPlan(seed=1, cut_rate=1.0)
    start = len(proxy.decisions)
    for i in range(8):
        # A dropped connection, not an HTTP answer (POST is not retried by aiohttp).
        with pytest.raises(aiohttp.ClientConnectionError):
            await rest.create(configmap(f"w{i}"))
    actions = [d.action for d in proxy.decisions][start:]
    assert len(actions) == 8 and {"cut-before", "cut-after"} == set(actions)
    stored = {o["metadata"]["name"] for o in
              (await server.client().list(CONFIGMAP, namespace=NS)).items}
    # Cut after forwarding: the write happened although the client saw an error.
    assert stored == {f"w{i}" for i, a in enumerate(actions) if a == "cut-after"}
    assert proxy.stats.connections_cut == 8
    assert proxy.stats.cut_after_forward == actions.count("cut-after")


async def test_watch_is_streamed_as_events_happen(
        server: APIServer, proxy: FaultProxy, rest: RestClient) -> None:
    rv = (await rest.list(CONFIGMAP, namespace=NS)).resource_version
    stream = rest.watch(CONFIGMAP, namespace=NS, resource_version=rv, allow_bookmarks=False)
    first = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.2)
    assert not first.done()
    await server.client().create(configmap("late"))
    event = await asyncio.wait_for(first, 2.0)
    assert event.type == "ADDED" and event.object["metadata"]["name"] == "late"
    await server.client().patch(CONFIGMAP, "late", {"data": {"a": "b"}}, namespace=NS)
    event = await asyncio.wait_for(anext(stream), 2.0)  # the same open stream
    assert event.type == "MODIFIED"
    await stream.aclose()  # type: ignore[attr-defined]
    assert proxy.stats.watches == 1


async def test_watch_cut_after_configured_time(proxy: FaultProxy, rest: RestClient) -> None:
    rv = (await rest.list(CONFIGMAP, namespace=NS)).resource_version
    proxy.plan = FaultPlan(watch_cut_after=(0.3, 0.3))
    async with raw_session(proxy) as session, session.get(watch_url(proxy, rv)) as resp:
        assert resp.status == 200
        started = time.monotonic()
        # A dropped connection: the chunked body never ends properly.
        with pytest.raises((aiohttp.ClientPayloadError, aiohttp.ClientConnectionError)):
            while await resp.content.readany():
                pass
        assert 0.25 <= time.monotonic() - started < 2.0
    assert proxy.stats.watches_cut == 1 and proxy.stats.watches_expired == 0
    assert proxy.decisions[-1].watch_cut_after == pytest.approx(0.3)


async def test_watch_expiry_is_an_error_event(
        server: APIServer, proxy: FaultProxy, rest: RestClient) -> None:
    rv = (await rest.list(CONFIGMAP, namespace=NS)).resource_version
    proxy.plan = FaultPlan(watch_cut_after=(0.2, 0.2), watch_expire_rate=1.0)
    async with raw_session(proxy) as session, session.get(watch_url(proxy, rv)) as resp:
        await asyncio.sleep(0.05)
        await server.client().create(configmap("x"))
        body = await resp.read()  # ends cleanly: no exception
    lines = [json.loads(line) for line in body.splitlines()]
    assert [line["type"] for line in lines] == ["ADDED", "ERROR"]
    status = lines[-1]["object"]
    assert (status["kind"], status["status"], status["code"], status["reason"]) == \
        ("Status", "Failure", 410, "Expired")
    assert status["message"] == (f"too old resource version: {rv} "
                                 f"({resource_version_of(lines[0]['object'])})")
    # Through RestClient it is the typed error the reflector relists on.
    with pytest.raises(errors.Gone) as gone:
        async for _ in rest.watch(CONFIGMAP, namespace=NS, resource_version=rv):
            pass
    assert gone.value.code == 410
    assert proxy.stats.watches_expired == 2 and proxy.stats.watches_cut == 0


async def test_informer_converges_through_cuts_expiries_and_errors(
        server: APIServer, proxy: FaultProxy, rest: RestClient) -> None:
    proxy.plan = FaultPlan(seed=3, watch_cut_after=(0.05, 0.3), watch_expire_rate=0.5,
                           error_rate=0.2, error_codes=(500,), cut_rate=0.1,
                           exempt=exempt_leases_and_discovery)
    writer = server.client()
    informer = SharedInformer(rest, CONFIGMAP, namespace=NS,
                              backoff=Backoff(0.01, 0.05, jitter=0.0))
    informer.start()
    try:
        live: list[str] = []
        for i in range(40):
            await writer.create(configmap(f"o{i}", v="0"))
            live.append(f"o{i}")
            if i % 3 == 0:
                await writer.patch(CONFIGMAP, live[len(live) // 2], {"data": {"v": str(i)}},
                                   namespace=NS)
            if i % 5 == 4:
                await writer.delete(CONFIGMAP, live.pop(len(live) // 3), namespace=NS)
            await asyncio.sleep(0.04)
        expected = {o["metadata"]["name"]: resource_version_of(o)
                    for o in (await writer.list(CONFIGMAP, namespace=NS)).items}
        deadline = time.monotonic() + 8.0
        while time.monotonic() < deadline:
            stored = {o["metadata"]["name"]: resource_version_of(o)
                      for o in informer.indexer.list()}
            if stored == expected:
                break
            await asyncio.sleep(0.05)
        assert stored == expected
    finally:
        await informer.stop()
    s = proxy.stats
    assert s.watches_cut > 0 and s.watches_expired > 0
    assert informer.reflector.lists > 1  # relisted after an expiry or a failed watch


async def test_cut_all_cuts_an_open_watch(proxy: FaultProxy, rest: RestClient) -> None:
    rv = (await rest.list(CONFIGMAP, namespace=NS)).resource_version
    await rest.close()  # its keep-alive connection would be cut too
    async with raw_session(proxy) as session, session.get(watch_url(proxy, rv)) as resp:
        assert resp.status == 200
        assert proxy.cut_all() == 1
        with pytest.raises((aiohttp.ClientPayloadError, aiohttp.ClientConnectionError)):
            while await resp.content.readany():
                pass
    assert proxy.stats.manual_cuts == 1


async def test_disabled_proxy_injects_nothing(proxy: FaultProxy, rest: RestClient) -> None:
    proxy.plan = FaultPlan(error_rate=0.5, cut_rate=0.5, delay_rate=1.0, max_delay=1.0,
                           watch_cut_after=(0.0, 0.0))
    proxy.enabled = False
    before = proxy.stats.requests
    for i in range(10):
        await rest.create(configmap(f"d{i}"))
    assert len((await rest.list(CONFIGMAP, namespace=NS)).items) == 10
    assert proxy.stats.requests == before + 11
    assert proxy.stats.errors == {} and proxy.stats.connections_cut == 0
    assert proxy.stats.delayed == 0
    assert {d.action for d in list(proxy.decisions)[-11:]} == {"pass"}


async def test_same_seed_same_decisions(proxy: FaultProxy, rest: RestClient) -> None:
    async def run(seed: int) -> list[tuple[str, int | None, float]]:
        proxy.plan = FaultPlan(seed=seed, error_rate=0.4, error_codes=(409, 500),
                               delay_rate=0.3, max_delay=0.01)
        start = len(proxy.decisions)
        for i in range(8):
            for call in (rest.get(CONFIGMAP, f"n{i}", namespace=NS),
                         rest.delete(CONFIGMAP, f"n{i}", namespace=NS)):
                with pytest.raises((errors.NotFound, errors.Conflict, errors.InternalError)):
                    await call
        return [(d.action, d.code, d.delay) for d in list(proxy.decisions)[start:]]

    first, again, other = await run(11), await run(11), await run(12)
    assert first == again and first != other
    assert {a for a, _, _ in first} == {"forward", "error"}
    codes = {(d.method, d.code) for d in proxy.decisions if d.code is not None}
    assert ("GET", 409) not in codes and ("DELETE", 409) in codes
    assert proxy.stats.delayed == sum(1 for d in proxy.decisions if d.delay > 0)


async def test_cli_runs_reports_ready_writes_stats_and_exits_on_sigterm(
        front: HTTPFront, tmp_path: Path) -> None:
    upstream = write_kubeconfig(tmp_path / "up.kubeconfig", front.url)
    stats_file = tmp_path / "stats.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jobframework.testing.faultproxy", "--kubeconfig", str(upstream),
        "--directory", str(tmp_path / "p"), "--seed", "4", "--error-rate", "1",
        "--exempt-leases", "--watch-cut-after", "1", "2", "--stats-file", str(stats_file),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 15.0)).decode().split()
        assert line[0] == "ready" and line[1].startswith("https://127.0.0.1:")
        assert line[2] == str(tmp_path / "p" / "kubeconfig")
        async with await RestClient.from_kubeconfig(line[2], max_retries=0) as c:
            with pytest.raises((errors.TooManyRequests, errors.InternalError)):
                await c.get(CONFIGMAP, "a", namespace=NS)  # discovery is exempt, this is not
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            if stats_file.exists() and sum(json.loads(stats_file.read_text())["errors"]
                                           .values()) == 1:
                break
            await asyncio.sleep(0.1)
        assert sum(json.loads(stats_file.read_text())["errors"].values()) == 1
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10.0) == 0
        final = json.loads(stats_file.read_text())
        assert final["requests"] >= 3 and final["watches"] == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
