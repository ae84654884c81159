"""Credential loading: kubeconfig (token, client cert, contexts), in-cluster, auto order."""

from __future__ import annotations

import pathlib
from typing import Any

import aiohttp
import pytest
import yaml

from jobframework.runtime.client import config
from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.objects import GVK

from .conftest import FakeAPI


def write_kubeconfig(path: pathlib.Path, server: str, *, token: str = "tok-a") -> None:
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "ua", "user": {"token": token}},
                  {"name": "ub", "user": {"token": "tok-b"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "ua"}},
                     {"name": "b", "context": {"cluster": "c", "user": "ub"}}],
    }
    path.write_text(yaml.safe_dump(doc))


async def _auth_header_seen(fake_api: FakeAPI, client: RestClient) -> str:
    fake_api.reply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    await client.get(GVK("", "v1", "Namespace"), "x")
    return fake_api.calls()[-1].headers["Authorization"]


async def test_kubeconfig_current_and_named_context(
    fake_api: FakeAPI, tmp_path: pathlib.Path
) -> None:
    kc = tmp_path / "config"
    write_kubeconfig(kc, fake_api.url)
    async with await RestClient.from_kubeconfig(str(kc)) as client:
        assert client.host == fake_api.url
        assert await _auth_header_seen(fake_api, client) == "Bearer tok-a"
    async with await RestClient.from_kubeconfig(str(kc), context="b") as client:
        assert await _auth_header_seen(fake_api, client) == "Bearer tok-b"


async def test_kubeconfig_is_not_rewritten_and_global_default_untouched(
    fake_api: FakeAPI, tmp_path: pathlib.Path
) -> None:
    from kubernetes_asyncio.client import Configuration

    kc = tmp_path / "config"
    write_kubeconfig(kc, fake_api.url)
    before = kc.read_text()
    default_host = Configuration.get_default_copy().host
    creds = await config.load_kubeconfig(str(kc))
    assert creds.configuration.host == fake_api.url
    assert Configuration.get_default_copy().host == default_host
    assert await creds.refresh() is True
    assert kc.read_text() == before


async def test_kubeconfig_env_var_and_missing_file(
    fake_api: FakeAPI, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kc = tmp_path / "kc"
    write_kubeconfig(kc, fake_api.url, token="from-env")
    monkeypatch.setenv("KUBECONFIG", str(kc))
    async with await RestClient.from_kubeconfig() as client:
        assert await _auth_header_seen(fake_api, client) == "Bearer from-env"
    with pytest.raises(config.ConfigError, match="cannot load kubeconfig"):
        await config.load_kubeconfig(str(tmp_path / "absent"))


def _service_account(tmp_path: pathlib.Path, token: str) -> pathlib.Path:
    sa = tmp_path / "sa"
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_text("not really a cert")
    return sa


def test_in_cluster_loading(tmp_path: pathlib.Path) -> None:
    sa = _service_account(tmp_path, "sa-token")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert config.in_cluster_available(env, str(sa))
    assert not config.in_cluster_available({}, str(sa))
    assert not config.in_cluster_available(env, str(tmp_path / "nowhere"))
    creds = config.load_in_cluster(environ=env, sa_dir=str(sa))
    assert creds.configuration.host == "https://10.0.0.1:443"
    assert creds.configuration.ssl_ca_cert == str(sa / "ca.crt")
    assert creds.configuration.api_key["BearerToken"] == "Bearer sa-token"
    with pytest.raises(config.ConfigError, match="not running in a cluster"):
        config.load_in_cluster(environ={}, sa_dir=str(sa))


async def test_in_cluster_token_rotation_is_picked_up_by_refresh(tmp_path: pathlib.Path) -> None:
    sa = _service_account(tmp_path, "first")
    env = {"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "6443"}
    creds = config.load_in_cluster(environ=env, sa_dir=str(sa))
    (sa / "token").write_text("second")
    await creds.refresh()
    assert creds.configuration.api_key["BearerToken"] == "Bearer second"


async def test_auto_order(
    fake_api: FakeAPI, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kc = tmp_path / "kc"
    write_kubeconfig(kc, fake_api.url)
    monkeypatch.setenv("KUBECONFIG", str(kc))
    creds = await config.load_auto()
    assert creds.source == f"kubeconfig:{kc}"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setattr(config, "in_cluster_available", lambda *a, **k: True)
    sentinel = config.Credentials(object(), source="in-cluster")
    monkeypatch.setattr(config, "load_in_cluster", lambda **k: sentinel)
    assert await config.load_auto() is sentinel
    # An explicit path beats the service account.
    assert (await config.load_auto(str(kc))).source == f"kubeconfig:{kc}"


async def test_client_certificate_kubeconfig(tmp_path: pathlib.Path) -> None:
    # Client-cert auth is carried by the TLS context (built by kubernetes-asyncio from
    # these files); check they are resolved relative to the kubeconfig and no token appears.
    (tmp_path / "c.crt").write_text("cert")
    (tmp_path / "c.key").write_text("key")
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"client-certificate": "c.crt",
                                         "client-key": "c.key"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
    }
    (tmp_path / "kc").write_text(yaml.safe_dump(doc))
    creds = await config.load_kubeconfig(str(tmp_path / "kc"))
    assert creds.configuration.cert_file == str(tmp_path / "c.crt")
    assert creds.configuration.key_file == str(tmp_path / "c.key")
    assert "BearerToken" not in creds.configuration.api_key


async def test_wrapping_a_user_api_client_keeps_it_open(fake_api: FakeAPI) -> None:
    from kubernetes_asyncio.client import ApiClient, Configuration

    cfg = Configuration(host=fake_api.url)
    api = ApiClient(configuration=cfg)
    client = RestClient(api)
    async with client:
        fake_api.reply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
        assert (await client.get(GVK("", "v1", "Namespace"), "x"))["kind"] == "Namespace"
    assert not api.rest_client.pool_manager.closed  # the owner closes it, not us
    await api.close()


async def test_closed_client_refuses_requests(fake_api: FakeAPI) -> None:
    client = RestClient.from_url(fake_api.url)
    await client.close()
    await client.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await client.request_json("GET", "/version")



def _exec_kubeconfig(tmp_path: pathlib.Path, server: str, expiry: str) -> pathlib.Path:
    # An exec credential plugin that hands out tok-1, tok-2, ... on successive runs.
    script = tmp_path / "cred.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'f="{tmp_path}/count"; n=$(cat "$f" 2>/dev/null || echo 0); n=$((n+1)); '
        'echo $n > "$f"\n'
        'printf \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
        f'"status":{{"token":"tok-%s","expirationTimestamp":"{expiry}"}}}}\' "$n"\n')
    script.chmod(0o755)
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": str(script),
            "interactiveMode": "Never"}}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
    }
    kc = tmp_path / "kc"
    kc.write_text(yaml.safe_dump(doc))
    return kc


async def test_exec_plugin_reruns_after_401(fake_api: FakeAPI, tmp_path: pathlib.Path) -> None:
    from aiohttp import web

    kc = _exec_kubeconfig(tmp_path, fake_api.url, "2999-01-01T00:00:00Z")

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer tok-2":
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized",
                                      "message": "Unauthorized"}, status=401)
        return web.json_response({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "x"}})

    fake_api.discovery = {}  # every request goes to the handler
    fake_api.handler = handler
    async with await RestClient.from_kubeconfig(str(kc)) as client:
        assert (await client.request_json("GET", "/api/v1/namespaces/x"))["kind"] == "Namespace"
    # tok-1 was refused although not expired; the plugin ran again and tok-2 was accepted.
    assert (tmp_path / "count").read_text().strip() == "2"


async def test_expired_exec_credential_is_renewed_before_use(
    fake_api: FakeAPI, tmp_path: pathlib.Path
) -> None:
    kc = _exec_kubeconfig(tmp_path, fake_api.url, "2000-01-01T00:00:00Z")
    fake_api.discovery = {}
    fake_api.reply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    async with await RestClient.from_kubeconfig(str(kc)) as client:
        await client.request_json("GET", "/api/v1/namespaces/x")
        await client.request_json("GET", "/api/v1/namespaces/x")
    seen = [r.headers["Authorization"] for r in fake_api.requests]
    assert seen == ["Bearer tok-2", "Bearer tok-3"]


async def test_tls_with_client_certificate_from_kubeconfig(tmp_path: pathlib.Path) -> None:
    """The TLS context kubernetes-asyncio builds from a kubeconfig: the cluster CA verifies
    the server, and the client certificate authenticates us to a server that demands one."""
    import base64
    import ssl

    from aiohttp import web

    from jobframework.webhook.certs import CertificateAuthority

    ca = CertificateAuthority.generate("test-cluster-ca")
    server_cert, server_key = ca.issue(["127.0.0.1"])
    client_cert, client_key = ca.issue(["alice"], common_name="alice", client_auth=True)
    for name, data in {"srv.crt": server_cert, "srv.key": server_key,
                       "ca.crt": ca.cert_pem}.items():
        (tmp_path / name).write_bytes(data)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tmp_path / "ca.crt"))
    ctx.load_cert_chain(tmp_path / "srv.crt", tmp_path / "srv.key")
    ctx.verify_mode = ssl.CERT_REQUIRED
    peers: list[Any] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        peers.append(request.transport.get_extra_info("peercert"))
        return web.json_response({"major": "1", "minor": "31"})

    app = web.Application()
    app.router.add_get("/version", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}",
                                               "certificate-authority-data": b64(ca.cert_pem)}}],
        "users": [{"name": "u", "user": {"client-certificate-data": b64(client_cert),
                                         "client-key-data": b64(client_key)}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
    }
    (tmp_path / "kc").write_text(yaml.safe_dump(doc))
    try:
        async with await RestClient.from_kubeconfig(str(tmp_path / "kc")) as client:
            assert await client.request_json("GET", "/version") == {"major": "1", "minor": "31"}
        subject = dict(x[0] for x in peers[0]["subject"])
        assert subject["commonName"] == "alice"
        # Without the cluster CA the server is not trusted.
        async with RestClient.from_url(f"https://127.0.0.1:{port}") as untrusting:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await untrusting.request_json("GET", "/version")
    finally:
        await runner.cleanup()
