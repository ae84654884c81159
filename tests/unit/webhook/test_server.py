"""WebhookServer: real HTTPS round trips on loopback, cert rotation, readiness, shutdown."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import pytest

from jobframework.runtime import errors
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.manager import Manager
from jobframework.testing import APIServer
from jobframework.webhook import (
    AdmissionRequest,
    AdmissionResponse,
    CertificateAuthority,
    HandlerFunc,
    ServingCerts,
    Warnings,
    WebhookServer,
    allowed,
    with_custom_defaulter,
    with_custom_validator,
    write_serving_certs,
)


class Suspender:
    async def default(self, obj: dict[str, Any], request: AdmissionRequest) -> None:
        obj["spec"]["suspend"] = True


class NameValidator:
    async def validate_create(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        name = obj["metadata"]["name"]
        if name.startswith("bad"):
            raise errors.new_invalid("Job", name, [{
                "reason": "FieldValueInvalid", "field": "metadata.name",
                "message": f'Invalid value: "{name}": must not start with bad'}], group="batch")
        return ["looked at " + name]

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any],
                              request: AdmissionRequest) -> Warnings:
        return None

    async def validate_delete(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        return None


async def post(
    url: str, body: Any, ctx: ssl.SSLContext, *, content_type: str = "application/json",
    raw: bytes | None = None, method: str = "POST",
) -> tuple[int, Any]:
    # A new session per call: a new TLS connection, so rotated certificates show.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
        data = raw if raw is not None else json.dumps(body).encode()
        async with session.request(method, url, data=data,
                                   headers={"Content-Type": content_type}) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text


async def settle(turns: int = 20) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


def review_for(make_request: Any, op: str, obj: Any, old: Any = None) -> dict[str, Any]:
    review: dict[str, Any] = make_request(op, obj, old).to_review()
    return review


@pytest.fixture
async def running(server: WebhookServer) -> WebhookServer:
    server.register("/mutate-batch-v1-job", with_custom_defaulter(Suspender()))
    server.register("/validate-batch-v1-job", with_custom_validator(NameValidator()))
    await server.listen()
    return server


async def test_mutating_round_trip(running: WebhookServer, client_ssl: ssl.SSLContext,
                                   make_request: Any, job: Any) -> None:
    body = review_for(make_request, "CREATE", job())
    status, out = await post(running.url("/mutate-batch-v1-job"), body, client_ssl)
    assert status == 200
    assert (out["apiVersion"], out["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    resp = out["response"]
    assert resp["uid"] == body["request"]["uid"]
    assert resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(resp["patch"]))
    defaulted = jsonpatch.apply_patch(job(), patch)
    assert defaulted == {**job(), "spec": {**job()["spec"], "suspend": True}}


async def test_validating_denial_carries_code_reason_causes(
    running: WebhookServer, client_ssl: ssl.SSLContext, make_request: Any, job: Any
) -> None:
    url = running.url("/validate-batch-v1-job")
    status, out = await post(url, review_for(make_request, "CREATE", job("bad-one")), client_ssl)
    assert status == 200
    result = out["response"]["status"]
    assert out["response"]["allowed"] is False
    assert (result["code"], result["reason"]) == (422, "Invalid")
    assert result["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "metadata.name",
        "message": 'Invalid value: "bad-one": must not start with bad'}]
    status, out = await post(url, review_for(make_request, "CREATE", job("good")), client_ssl)
    assert out["response"]["allowed"] is True
    assert out["response"]["warnings"] == ["looked at good"]


@pytest.mark.parametrize(
    ("kwargs", "status", "message"),
    [
        ({"raw": b"{not json"}, 400, "the request body is not JSON"),
        ({"raw": b""}, 400, "request body is empty"),
        ({"content_type": "text/plain"}, 400, "contentType=text/plain, expected application/json"),
        ({"body": {"apiVersion": "v1", "kind": "Pod"}}, 400, "expected an admission.k8s.io/v1"),
        ({"body": {"kind": "AdmissionReview", "request": {"uid": "u"}}}, 400,
         "request.operation None is not one of"),
        # Not an object, wrong types, missing request or uid: named, never a 500.
        ({"body": [1, 2]}, 400, "the body must be a JSON object"),
        ({"body": "AdmissionReview"}, 400, "the body must be a JSON object"),
        ({"body": {"apiVersion": ["admission.k8s.io/v1"], "kind": "AdmissionReview"}}, 400,
         "apiVersion and kind must be strings"),
        ({"body": {"kind": {"a": 1}}}, 400, "apiVersion and kind must be strings"),
        ({"body": {"kind": "AdmissionReview"}}, 400, "the AdmissionReview has no request"),
        ({"body": {"kind": "AdmissionReview", "request": "x"}}, 400, "request must be an object"),
        ({"body": {"kind": "AdmissionReview", "request": {"operation": "CREATE"}}}, 400,
         "request.uid is required"),
        ({"body": {"kind": "AdmissionReview", "request": {"uid": 7}}}, 400,
         "request.uid must be a string"),
        ({"body": {"kind": "AdmissionReview", "request": {"uid": "u", "operation": [[1]]}}},
         400, "request.operation <list> is not one of"),
        ({"body": {"kind": "AdmissionReview", "request": {
            "uid": "u", "operation": "CREATE", "kind": {"kind": "Job"},
            "resource": {"resource": "jobs"}, "userInfo": {"groups": "all"}}}}, 400,
         "request.userInfo.groups must be a list of strings"),
        ({"raw": b"\xff\xfe{}"}, 400, "the request body is not JSON"),
    ],
)
async def test_malformed_input_is_a_400(running: WebhookServer, client_ssl: ssl.SSLContext,
                                        kwargs: dict[str, Any], status: int, message: str) -> None:
    body = kwargs.pop("body", {"kind": "AdmissionReview"})
    got, out = await post(running.url("/validate-batch-v1-job"), body, client_ssl, **kwargs)
    assert got == status
    assert out["response"]["allowed"] is False
    assert out["response"]["status"]["code"] == status
    assert message in out["response"]["status"]["message"]


def nested(depth: int) -> bytes:
    """An AdmissionReview whose ``request.object`` holds lists ``depth`` deep."""
    return (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
            b'{"uid":"u1","operation":"CREATE","kind":{"group":"batch","version":"v1",'
            b'"kind":"Job"},"resource":{"group":"batch","version":"v1","resource":"jobs"},'
            b'"object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},'
            b'"spec":{},"deep":' + b"[" * depth + b"]" * depth + b"}}}")


@pytest.mark.parametrize("depth", [1_025, 5_000, 500_000])
async def test_json_nested_past_the_decoder_is_a_400(
    running: WebhookServer, client_ssl: ssl.SSLContext, make_request: Any, job: Any,
    depth: int,
) -> None:
    """Past 1,024 levels the decoders give up (orjson) or run out of stack (json's
    RecursionError, which was an uncaught plain 500): a 400 review naming the problem."""
    url = running.url("/validate-batch-v1-job")
    status, out = await post(url, None, client_ssl, raw=nested(depth))
    assert status == 400
    assert out["response"]["allowed"] is False
    assert out["response"]["status"] == {
        "code": 400, "message": "the request body nests JSON too deeply to decode"}
    # The server goes on answering.
    good = review_for(make_request, "CREATE", job())
    assert (await post(url, good, client_ssl))[0] == 200


async def test_json_nested_up_to_the_decoder_limit_is_reviewed(
    running: WebhookServer, client_ssl: ssl.SSLContext,
) -> None:
    """1,000 levels (the review's own four included, 1,004) still decode: both handlers,
    which copy and diff the object, answer it."""
    status, out = await post(running.url("/validate-batch-v1-job"), None, client_ssl,
                             raw=nested(1_000))
    assert (status, out["response"]["uid"], out["response"]["allowed"]) == (200, "u1", True)
    status, out = await post(running.url("/mutate-batch-v1-job"), None, client_ssl,
                             raw=nested(1_000))
    assert status == 200 and out["response"]["allowed"] is True
    assert json.loads(base64.b64decode(out["response"]["patch"])) == [
        {"op": "add", "path": "/spec/suspend", "value": True}]


async def test_unknown_path_and_wrong_method(running: WebhookServer, client_ssl: ssl.SSLContext,
                                             make_request: Any, job: Any) -> None:
    status, text = await post(running.url("/nope"), {}, client_ssl)
    assert (status, text) == (404, "no webhook registered at /nope\n")
    status, _ = await post(running.url("/validate-batch-v1-job"), {}, client_ssl, method="GET")
    assert status == 405


async def test_too_large_is_a_413(certs: ServingCerts, client_ssl: ssl.SSLContext,
                                  make_request: Any, job: Any) -> None:
    async with WebhookServer(cert_dir=certs.cert_dir, max_request_bytes=2048,
                             clock=ManualClock()) as srv:
        srv.register("/v", with_custom_validator(NameValidator()))
        big = job(blob="x" * 4096)
        status, out = await post(srv.url("/v"), review_for(make_request, "CREATE", big),
                                 client_ssl)
        assert status == 413
        assert "limit is 2048 bytes" in out["response"]["status"]["message"]
        status, _ = await post(srv.url("/v"), review_for(make_request, "CREATE", job()),
                               client_ssl)
        assert status == 200


async def test_in_process_hook_matches_https(running: WebhookServer, client_ssl: ssl.SSLContext,
                                             make_request: Any, job: Any) -> None:
    cases = [
        ("/mutate-batch-v1-job", review_for(make_request, "CREATE", job())),
        ("/mutate-batch-v1-job", review_for(make_request, "DELETE", None, job())),
        ("/validate-batch-v1-job", review_for(make_request, "CREATE", job("bad"))),
        ("/validate-batch-v1-job", review_for(make_request, "UPDATE", job(), job())),
        ("/validate-batch-v1-job", {"kind": "AdmissionReview", "request": {"uid": "x"}}),
        ("/validate-batch-v1-job",
         dict(review_for(make_request, "CREATE", job()), apiVersion="admission.k8s.io/v1beta1")),
    ]
    for path, body in cases:
        _, over_https = await post(running.url(path), body, client_ssl)
        in_process = await running.as_admission_hook(path)(body)
        assert in_process == over_https, path
    with pytest.raises(KeyError, match="no webhook registered at /missing"):
        running.as_admission_hook("/missing")


async def test_registration_rules_and_late_registration(
    running: WebhookServer, client_ssl: ssl.SSLContext, make_request: Any, job: Any
) -> None:
    with pytest.raises(ValueError, match="duplicate path"):
        running.register("/mutate-batch-v1-job", with_custom_defaulter(Suspender()))
    with pytest.raises(ValueError, match="must start with '/'"):
        running.register("late", with_custom_defaulter(Suspender()))
    running.register("/late", with_custom_validator(NameValidator()))
    status, out = await post(running.url("/late"), review_for(make_request, "CREATE", job()),
                             client_ssl)
    assert status == 200 and out["response"]["allowed"] is True
    assert set(running.handlers) == {"/mutate-batch-v1-job", "/validate-batch-v1-job", "/late"}


async def test_rotated_certificate_is_served_to_new_connections(
    running: WebhookServer, certs: ServingCerts, client_ssl: ssl.SSLContext,
    clock: ManualClock, make_request: Any, job: Any,
) -> None:
    url = running.url("/validate-batch-v1-job")
    body = review_for(make_request, "CREATE", job())
    assert (await post(url, body, client_ssl))[0] == 200

    rotated = write_serving_certs(certs.cert_dir)  # a new CA and serving certificate
    new_ssl = ssl.create_default_context(cafile=str(rotated.ca_file))
    # Until the watcher polls, the old certificate is still served.
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await post(url, body, new_ssl)

    clock.advance(10.0)
    await settle()
    assert running.cert_watcher.reloads == 1
    assert (await post(url, body, new_ssl))[0] == 200
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await post(url, body, client_ssl)


async def test_a_broken_rotation_keeps_the_old_certificate(
    running: WebhookServer, certs: ServingCerts, client_ssl: ssl.SSLContext,
    clock: ManualClock, ca: CertificateAuthority, make_request: Any, job: Any,
) -> None:
    url = running.url("/validate-batch-v1-job")
    body = review_for(make_request, "CREATE", job())
    certs.cert_file.write_bytes(b"-----BEGIN CERTIFICATE-----\ngarbage\n")
    clock.advance(10.0)
    await settle()
    assert running.cert_watcher.reloads == 0
    assert (await post(url, body, client_ssl))[0] == 200
    # A good pair (same CA, so clients keep trusting it) is picked up at the next poll.
    write_serving_certs(certs.cert_dir, ca=ca)
    clock.advance(10.0)
    await settle()
    assert running.cert_watcher.reloads == 1
    assert (await post(url, body, client_ssl))[0] == 200


async def test_started_checker(server: WebhookServer) -> None:
    check = server.started_checker()
    with pytest.raises(RuntimeError, match="has not been started yet"):
        await check()
    server.register("/v", with_custom_validator(NameValidator()))
    await server.listen()
    await check()
    assert server.need_leader_election() is False
    await server.stop()
    with pytest.raises(RuntimeError, match="has not been started yet"):
        await check()


async def test_stop_waits_for_requests_in_flight(
    server: WebhookServer, client_ssl: ssl.SSLContext, make_request: Any, job: Any
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(req: AdmissionRequest) -> AdmissionResponse:
        entered.set()
        await release.wait()
        return allowed("finished")

    server.register("/slow", HandlerFunc(slow))
    await server.listen()
    url = server.url("/slow")
    in_flight = asyncio.create_task(post(url, review_for(make_request, "CREATE", job()),
                                         client_ssl))
    await entered.wait()
    stopping = asyncio.create_task(server.stop())
    await settle()
    assert not stopping.done()
    release.set()
    status, out = await in_flight
    assert status == 200 and out["response"]["status"]["message"] == "finished"
    await stopping
    with pytest.raises(aiohttp.ClientConnectorError):
        await post(url, {}, client_ssl)


async def test_start_serves_until_cancelled(server: WebhookServer, client_ssl: ssl.SSLContext,
                                            make_request: Any, job: Any) -> None:
    server.register("/v", with_custom_validator(NameValidator()))
    task = asyncio.create_task(server.start())
    await asyncio.wait_for(server.wait_started(), 5)
    status, _ = await post(server.url("/v"), review_for(make_request, "CREATE", job()),
                           client_ssl)
    assert status == 200
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not server.started
    with pytest.raises(RuntimeError, match="not listening"):
        server.url("/v")


async def test_runs_as_a_manager_runnable(certs: ServingCerts, client_ssl: ssl.SSLContext,
                                          make_request: Any, job: Any) -> None:
    api = APIServer(ManualClock())
    manager = Manager(api.client(), clock=api.clock)
    server = WebhookServer(cert_dir=certs.cert_dir, clock=ManualClock(),
                           metrics_registry=manager.get_metrics().registry)
    server.register("/v", with_custom_validator(NameValidator()))
    manager.add(server)
    manager.add_readyz_check("webhook", server.started_checker())
    assert (await manager.check_ready())[0] == 500
    running = asyncio.create_task(manager.start())
    await asyncio.wait_for(server.wait_started(), 5)
    assert await manager.check_ready() == (200, "ok")
    status, _ = await post(server.url("/v"), review_for(make_request, "CREATE", job()),
                           client_ssl)
    assert status == 200
    # The webhook series are published with the manager's metrics.
    assert manager.get_metrics().registry.get_sample_value(
        "controller_runtime_webhook_requests_total", {"webhook": "/v", "code": "200"}) == 1
    await manager.stop()
    await running
    assert not server.started


async def test_missing_certificates_fail_start(tmp_path: Path) -> None:
    srv = WebhookServer(cert_dir=tmp_path / "empty")
    with pytest.raises(FileNotFoundError):
        await srv.listen()
    assert not srv.started


async def test_client_certificates_are_required_with_a_client_ca(
    certs: ServingCerts, ca: CertificateAuthority, client_ssl: ssl.SSLContext,
    tmp_path: Path, make_request: Any, job: Any,
) -> None:
    async with WebhookServer(cert_dir=certs.cert_dir, client_ca_name="ca.crt",
                             clock=ManualClock()) as srv:
        srv.register("/v", with_custom_validator(NameValidator()))
        await srv.started_checker()()  # readiness needs no client certificate
        body = review_for(make_request, "CREATE", job())
        with pytest.raises(aiohttp.ClientError):
            await post(srv.url("/v"), body, client_ssl)
        cert, key = ca.issue(["kube-apiserver"], client_auth=True)
        (tmp_path / "client.crt").write_bytes(cert)
        (tmp_path / "client.key").write_bytes(key)
        with_cert = ssl.create_default_context(cafile=str(certs.ca_file))
        with_cert.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
        status, _ = await post(srv.url("/v"), body, with_cert)
        assert status == 200


def client_context(certs: ServingCerts, issuer: CertificateAuthority, where: Path,
                   name: str = "apiserver") -> ssl.SSLContext:
    """A client trusting the serving CA, presenting a certificate ``issuer`` signed."""
    cert, key = issuer.issue(["kube-apiserver"], common_name=name, client_auth=True)
    (where / f"{name}.crt").write_bytes(cert)
    (where / f"{name}.key").write_bytes(key)
    context = ssl.create_default_context(cafile=str(certs.ca_file))
    context.load_cert_chain(where / f"{name}.crt", where / f"{name}.key")
    return context


async def test_client_ca_file_admits_only_certificates_it_signed(
    certs: ServingCerts, ca: CertificateAuthority, client_ssl: ssl.SSLContext,
    tmp_path: Path, make_request: Any, job: Any,
) -> None:
    """A client CA of its own, outside ``cert_dir`` (the API server's, as its
    AdmissionConfiguration kubeconfig presents it): no certificate, or one another CA
    signed (here the serving CA), gets no answer; one the client CA signed does."""
    client_ca = CertificateAuthority.generate("apiserver-client-ca")
    (tmp_path / "client-ca.crt").write_bytes(client_ca.cert_pem)
    async with WebhookServer(cert_dir=certs.cert_dir, client_ca_file=tmp_path / "client-ca.crt",
                             clock=ManualClock()) as srv:
        srv.register("/v", with_custom_validator(NameValidator()))
        assert srv.client_ca_file == tmp_path / "client-ca.crt"
        body = review_for(make_request, "CREATE", job())
        with pytest.raises(aiohttp.ClientError):
            await post(srv.url("/v"), body, client_ssl)
        with pytest.raises(aiohttp.ClientError):
            await post(srv.url("/v"), body, client_context(certs, ca, tmp_path, "other"))
        status, out = await post(srv.url("/v"), body,
                                 client_context(certs, client_ca, tmp_path))
        assert status == 200 and out["response"]["allowed"] is True


async def test_without_a_client_ca_any_client_is_answered(
    running: WebhookServer, client_ssl: ssl.SSLContext, make_request: Any, job: Any,
) -> None:
    """Off by default: the Service answers whoever reaches it (see docs/deploy.md)."""
    assert running.client_ca_file is None
    body = review_for(make_request, "CREATE", job())
    assert (await post(running.url("/validate-batch-v1-job"), body, client_ssl))[0] == 200


async def test_a_rotated_client_ca_is_followed(
    certs: ServingCerts, clock: ManualClock, tmp_path: Path, make_request: Any, job: Any,
) -> None:
    old_ca, new_ca = (CertificateAuthority.generate("old-client-ca"),
                      CertificateAuthority.generate("new-client-ca"))
    bundle = tmp_path / "client-ca.crt"
    bundle.write_bytes(old_ca.cert_pem)
    async with WebhookServer(cert_dir=certs.cert_dir, client_ca_file=bundle,
                             clock=clock) as srv:
        srv.register("/v", with_custom_validator(NameValidator()))
        body = review_for(make_request, "CREATE", job())
        old_client = client_context(certs, old_ca, tmp_path, "old")
        new_client = client_context(certs, new_ca, tmp_path, "new")
        assert (await post(srv.url("/v"), body, old_client))[0] == 200
        bundle.write_bytes(new_ca.cert_pem)
        clock.advance(10.0)
        await settle()
        assert srv.cert_watcher.reloads == 1
        assert (await post(srv.url("/v"), body, new_client))[0] == 200
        with pytest.raises(aiohttp.ClientError):
            await post(srv.url("/v"), body, old_client)


def test_client_ca_name_and_file_are_exclusive(certs: ServingCerts, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        WebhookServer(cert_dir=certs.cert_dir, client_ca_name="ca.crt",
                      client_ca_file=tmp_path / "ca.crt")


async def test_requests_are_counted_per_path_and_code(
    running: WebhookServer, client_ssl: ssl.SSLContext, make_request: Any, job: Any
) -> None:
    url = running.url("/validate-batch-v1-job")
    for body in (review_for(make_request, "CREATE", job()),
                 review_for(make_request, "CREATE", job("bad"))):
        await post(url, body, client_ssl)
    await post(url, None, client_ssl, raw=b"nope")
    sample = running.metrics.registry.get_sample_value
    path = {"webhook": "/validate-batch-v1-job"}
    assert sample("controller_runtime_webhook_requests_total", {**path, "code": "200"}) == 2
    assert sample("controller_runtime_webhook_requests_total", {**path, "code": "400"}) == 1
    assert sample("controller_runtime_webhook_requests_total",
                  {"webhook": "/mutate-batch-v1-job", "code": "500"}) == 0
    assert sample("controller_runtime_webhook_latency_seconds_count", path) == 3
    assert sample("controller_runtime_webhook_requests_in_flight", path) == 0


def test_register_rejects_what_is_not_a_handler(server: WebhookServer) -> None:
    with pytest.raises(TypeError, match="wrap defaulters and validators"):
        server.register("/x", Suspender())  # type: ignore[arg-type]


async def test_bind_gives_the_port_before_the_manager_starts_the_server(
        certs: ServingCerts, client_ssl: ssl.SSLContext, make_request: Any, job: Any) -> None:
    """Webhook configurations by URL can be written before the server runs: ``bind()``
    reserves the port, the manager's ``start()`` serves on that very socket."""
    api = APIServer(ManualClock())
    manager = Manager(api.client(), clock=api.clock)
    server = WebhookServer(cert_dir=certs.cert_dir, clock=ManualClock(), shutdown_timeout=5.0)
    server.register("/v", with_custom_validator(NameValidator()))
    port = server.bind()
    assert port > 0 and server.port == port and server.bind() == port
    url = server.url("/v")
    assert url == f"https://127.0.0.1:{port}/v"
    assert not server.started
    # A call made before the server serves waits in the socket's backlog ...
    early = asyncio.create_task(post(url, review_for(make_request, "CREATE", job()),
                                     client_ssl))
    await settle()
    assert not early.done()
    manager.add(server)
    running = asyncio.create_task(manager.start())
    try:
        await asyncio.wait_for(server.wait_started(), 5)
        assert server.port == port
        # ... and is answered once it does.
        status, body = await asyncio.wait_for(early, 10)
        assert status == 200 and body["response"]["allowed"] is True
        status, body = await post(url, review_for(make_request, "CREATE", job("bad-one")),
                                  client_ssl)
        assert (status, body["response"]["allowed"]) == (200, False)
    finally:
        await manager.stop()
        await running
    assert not server.started
    with pytest.raises(RuntimeError, match="not listening"):
        _ = server.port


async def test_a_bound_server_that_never_starts_releases_its_port(
        certs: ServingCerts) -> None:
    server = WebhookServer(cert_dir=certs.cert_dir)
    port = server.bind()
    await server.stop()
    with pytest.raises(RuntimeError, match="nor bound"):
        _ = server.port
    # The port is free again: another socket can listen on it.
    again = WebhookServer(cert_dir=certs.cert_dir, port=port)
    assert again.bind() == port
    await again.stop()


async def test_bind_on_a_listening_server_returns_its_port(certs: ServingCerts) -> None:
    server = WebhookServer(cert_dir=certs.cert_dir, shutdown_timeout=5.0)
    async with server:
        assert server.bind() == server.port
