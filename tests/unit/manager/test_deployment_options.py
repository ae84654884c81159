"""``python -m integrations run``'s deployment flags: in-cluster mode, leader election,
certificate management, a shared webhook URL, webhook client certificates, and JSON
logs."""

from __future__ import annotations

import json
import logging
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import attrs
import pytest

from integrations.__main__ import manager_options, parser
from integrations._logging import JsonFormatter
from integrations.manager import (
    DEFAULT_CERT_SECRET,
    DEFAULT_LEADER_ELECTION_ID,
    DEFAULT_MANAGER_NAMESPACE,
    ExternalFrameworkManager,
    ManagerOptions,
)
from jobframework.testing import APIServer
from jobframework.webhook import CertificateAuthority
from jobframework.webhook.server import DEFAULT_CERT_DIR


def options(*argv: str) -> ManagerOptions:
    return manager_options(parser().parse_args(["run", *argv]))


def test_out_of_cluster_defaults_are_unchanged() -> None:
    opts = options()
    assert (opts.webhook_host, opts.webhook_port) == ("127.0.0.1", 0)
    assert opts.install_crds and opts.register_webhooks
    assert opts.probe_namespace == "default"
    assert opts.cert_management == "self-signed"
    assert opts.leader_election is None and opts.webhook_url is None


def test_in_cluster_serves_behind_the_service_and_leaves_objects_to_the_manifests(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    opts = options("--in-cluster", "--leader-elect")
    assert (opts.webhook_host, opts.webhook_port) == ("0.0.0.0", 9443)
    assert not opts.install_crds and not opts.register_webhooks
    assert opts.probe_namespace is None
    assert opts.cert_management == "internal"
    assert opts.cert_secret_name == DEFAULT_CERT_SECRET
    assert opts.namespace == DEFAULT_MANAGER_NAMESPACE
    le = opts.leader_election
    assert le is not None
    assert (le.name, le.namespace) == (DEFAULT_LEADER_ELECTION_ID, DEFAULT_MANAGER_NAMESPACE)
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)


def test_the_pod_namespace_comes_from_the_downward_api(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "team-a")
    opts = options("--in-cluster", "--leader-elect")
    assert opts.namespace == "team-a"
    assert opts.leader_election is not None and opts.leader_election.namespace == "team-a"
    assert options("--namespace", "explicit").namespace == "explicit"


def test_cert_manager_reads_the_mounted_files() -> None:
    opts = options("--in-cluster", "--cert-management", "cert-manager")
    assert opts.cert_management == "files"
    assert opts.cert_dir == DEFAULT_CERT_DIR
    assert options("--cert-management", "files", "--cert-dir", "/x").cert_dir == Path("/x")


def test_replicas_out_of_the_cluster_share_a_url_and_timings() -> None:
    opts = options("--leader-elect", "--lease-duration", "6", "--renew-deadline", "4",
                   "--retry-period", "1", "--webhook-url", "https://localhost:9",
                   "--cert-management", "internal", "--cert-dns-name", "localhost",
                   "--webhook-port", "1234")
    assert opts.webhook_url == "https://localhost:9" and opts.webhook_port == 1234
    assert opts.cert_extra_dns_names == ("localhost",)
    assert opts.install_crds and opts.register_webhooks
    le = opts.leader_election
    assert le is not None and (le.lease_duration, le.renew_deadline) == (6.0, 4.0)


async def post_status(url: str, context: ssl.SSLContext) -> int:
    async with (aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
                session.post(url, data=b"{}") as resp):
        return resp.status


async def test_webhook_client_ca_makes_the_server_require_client_certificates(
        tmp_path: Path) -> None:
    """``--webhook-client-ca`` reaches the manager's webhook server: a client without a
    certificate is refused, the API server's (signed by that CA) is answered."""
    assert options().webhook_client_ca is None, "off by default"
    client_ca = CertificateAuthority.generate("apiserver-client-ca")
    (tmp_path / "client-ca.crt").write_bytes(client_ca.cert_pem)
    opts = options("--webhook-client-ca", str(tmp_path / "client-ca.crt"),
                   "--cert-dir", str(tmp_path / "certs"), "--integrations", "jobflow")
    assert opts.webhook_client_ca == tmp_path / "client-ca.crt"
    mgr = ExternalFrameworkManager(APIServer().client(), attrs.evolve(
        opts, install_crds=False, register_webhooks=False, ready_timeout=10.0))

    async def no_setup(*_: Any, **__: Any) -> None:
        return None

    mgr.integrations = [attrs.evolve(i, setup=no_setup) for i in mgr.integrations]
    cert, key = client_ca.issue(["kube-apiserver"], client_auth=True)
    (tmp_path / "apiserver.crt").write_bytes(cert)
    (tmp_path / "apiserver.key").write_bytes(key)
    async with mgr:
        server = mgr.webhook_server
        assert server is not None and server.client_ca_file == tmp_path / "client-ca.crt"
        anonymous = ssl.create_default_context(cafile=str(tmp_path / "certs" / "ca.crt"))
        apiserver = ssl.create_default_context(cafile=str(tmp_path / "certs" / "ca.crt"))
        apiserver.load_cert_chain(tmp_path / "apiserver.crt", tmp_path / "apiserver.key")
        url = server.url("/no-such-webhook")
        with pytest.raises(aiohttp.ClientError):
            await post_status(url, anonymous)
        assert await post_status(url, apiserver) == 404, "answered: the handshake passed"


def test_inconsistent_lease_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="lease_duration must be greater than renew_deadline"):
        options("--leader-elect", "--lease-duration", "5", "--renew-deadline", "5")


def test_json_log_lines() -> None:
    record = logging.LogRecord("integrations", logging.WARNING, __file__, 1,
                               "webhook %s", ("down",), None)
    record.controller = "jobflow"
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "warning" and line["logger"] == "integrations"
    assert line["msg"] == "webhook down" and line["controller"] == "jobflow"
    assert line["ts"].endswith("Z")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys
        record.exc_info = sys.exc_info()
    assert "RuntimeError: boom" in json.loads(JsonFormatter().format(record))["error"]
