"""The RestClient's session: the environment (proxy variables, ``~/.netrc``) is read once
per client, not on every request in a worker thread, with the same effect on requests."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from yarl import URL

from jobframework.runtime.client.rest import RestClient
from jobframework.runtime.objects import GVK

from .conftest import FakeAPI

NS = GVK("", "v1", "Namespace")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy",
                 "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


async def transport(client: RestClient) -> Any:
    return await client._session()


async def test_requests_need_no_worker_thread(fake_api: FakeAPI,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fake_api.reply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    calls = 0
    real = asyncio.to_thread

    async def counted(fn: Any, *args: Any) -> Any:
        nonlocal calls
        calls += 1
        return await real(fn, *args)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    async with RestClient.from_url(fake_api.url) as client:
        await client.get(NS, "a")
        first = calls
        for _ in range(5):
            await client.get(NS, "a")
        assert calls == first <= 2  # the proxy and netrc lookups, once
        used = await transport(client)
        assert used.owned and not used.session.trust_env
        assert used.session.connector is client._api.rest_client.pool_manager.connector
    assert used.session.closed


async def test_the_proxy_of_the_environment_is_used(fake_api: FakeAPI,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://user:pw@proxy.invalid:3128")
    async with RestClient.from_url(fake_api.url) as client:
        used = await transport(client)
        assert used.extra["proxy"] == URL("http://proxy.invalid:3128")
        assert (used.extra["proxy_auth"].login, used.extra["proxy_auth"].password) == ("user", "pw")


async def test_no_proxy_is_honoured(fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    fake_api.reply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    async with RestClient.from_url(fake_api.url) as client:
        assert "proxy" not in (await transport(client)).extra
        assert (await client.get(NS, "a"))["metadata"]["name"] == "a"


async def test_netrc_credentials_are_sent_as_before(fake_api: FakeAPI, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login alice password s3cret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    fake_api.reply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    async with RestClient.from_url(fake_api.url) as client:
        await client.get(NS, "a")
    [call] = fake_api.calls("GET")
    expected = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    assert call.headers["Authorization"] == expected


async def test_an_api_client_of_the_callers_keeps_its_own_session(fake_api: FakeAPI) -> None:
    from kubernetes_asyncio.client import ApiClient, Configuration

    cfg = type.__call__(Configuration)
    cfg.host = fake_api.url
    api = ApiClient(configuration=cfg)
    fake_api.reply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    try:
        client = RestClient(api)
        await client.get(NS, "a")
        used = await transport(client)
        assert not used.owned and used.session is api.rest_client.pool_manager
        await client.close()
        assert not api.rest_client.pool_manager.closed
    finally:
        await api.close()


async def test_netrc_credentials_and_a_token_do_not_mix(fake_api: FakeAPI, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # As aiohttp's trust_env has it: a request both would authenticate is refused.
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login alice password s3cret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    async with RestClient.from_url(fake_api.url, token="t") as client:
        with pytest.raises(ValueError, match="Cannot combine AUTHORIZATION"):
            await client.get(NS, "a")
