"""CertRotator on the in-memory API server, with a ManualClock driving certificate time.

Every scenario reads back what a replica would serve (its cert_dir) and what the API
server would trust (the caBundle of each webhook), and checks the two agree.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from jobframework.runtime import errors
from jobframework.runtime.client.interface import Client
from jobframework.runtime.clock import ManualClock
from jobframework.runtime.objects import GVK, Object
from jobframework.testing import APIServer
from jobframework.webhook import (
    AdmissionRequest,
    CertificateAuthority,
    CertRotator,
    HandlerFunc,
    ServiceRef,
    WebhookServer,
    WebhookSpec,
    allowed,
    mutating_webhook_configuration,
    rule,
    validating_webhook_configuration,
)
from jobframework.webhook.certrotator import (
    DEFAULT_CA_VALIDITY,
    DEFAULT_CERT_VALIDITY,
    DEFAULT_CHECK_INTERVAL,
    DEFAULT_LOOKAHEAD,
    NEXT_CA_CERT_KEY,
    PREVIOUS_CA_CERT_KEY,
)
from jobframework.webhook.certs import CLOCK_SKEW

NS = "kueue-system"
SECRET_NAME = "kueue-webhook-server-cert"
SERVICE = "kueue-webhook-service"
DNS = f"{SERVICE}.{NS}.svc"
MWC = "kueue-mutating-webhook-configuration"
VWC = "kueue-validating-webhook-configuration"
SECRET = GVK("", "v1", "Secret")
MUTATING = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
DAY = dt.timedelta(days=1)
#: X509_V_FLAG_NO_CHECK_TIME: the certificates live on the ManualClock's calendar, so the
#: client checks the chain and the name but not the validity dates against the real time.
NO_CHECK_TIME = 0x200000


# -- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture
async def api(clock: ManualClock) -> APIServer:
    server = APIServer(clock)
    client = server.client()
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    service = ServiceRef(SERVICE, NS)
    jobs = [rule("batch", "v1", "jobs", ["CREATE"])]
    await client.create(mutating_webhook_configuration(MWC, [
        WebhookSpec(name="mjob.kueue.x-k8s.io", path="/mutate-batch-v1-job", rules=jobs),
        WebhookSpec(name="mpod.kueue.x-k8s.io", path="/mutate--v1-pod",
                    rules=[rule("", "v1", "pods", ["CREATE"])]),
    ], service=service))
    await client.create(validating_webhook_configuration(VWC, [
        WebhookSpec(name="vjob.kueue.x-k8s.io", path="/validate-batch-v1-job", rules=jobs),
        WebhookSpec(name="vpod.kueue.x-k8s.io", path="/validate--v1-pod",
                    rules=[rule("", "v1", "pods", ["CREATE"])]),
    ], service=service))
    return server


def rotator(api: APIServer, clock: ManualClock, cert_dir: Path, *,
            client: Any = None, **options: Any) -> CertRotator:
    settings: dict[str, Any] = {
        "secret_namespace": NS, "secret_name": SECRET_NAME, "service_name": SERVICE,
        "cert_dir": cert_dir, "mutating_webhooks": [MWC], "validating_webhooks": [VWC],
        "clock": clock, "watch": False, "ca_name": "kueue-ca",
    }
    settings.update(options)
    return CertRotator(cast(Client, client or api.client()), **settings)


async def secret(api: APIServer) -> Object:
    return await api.client().get(SECRET, SECRET_NAME, namespace=NS)


async def secret_data(api: APIServer) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (await secret(api))["data"].items()}


async def ca_bundles(api: APIServer) -> list[bytes]:
    """The decoded caBundle of every webhook of both configurations (four)."""
    out = []
    for gvk, name in ((MUTATING, MWC), (VALIDATING, VWC)):
        config = await api.client().get(gvk, name)
        for hook in config["webhooks"]:
            out.append(base64.b64decode(hook["clientConfig"].get("caBundle", "")))
    return out


def certs_of(pem: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem) if pem else []


def cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def issued_by(serving_pem: bytes, ca_pem: bytes) -> bool:
    try:
        cert(serving_pem).verify_directly_issued_by(cert(ca_pem))
    except Exception:  # wrong issuer name, bad signature, unsupported key
        return False
    return True


def files(cert_dir: Path) -> dict[str, bytes]:
    return {name: (cert_dir / name).read_bytes() for name in ("ca.crt", "tls.crt", "tls.key")}


async def assert_trusted(api: APIServer, clock: ManualClock, *cert_dirs: Path) -> None:
    """What each replica serves verifies against every webhook's caBundle, now."""
    now = clock.now()
    bundles = await ca_bundles(api)
    assert len(bundles) == 4
    for cert_dir in cert_dirs:
        served = (cert_dir / "tls.crt").read_bytes()
        leaf = cert(served)
        assert leaf.not_valid_before_utc <= now < leaf.not_valid_after_utc
        for bundle in bundles:
            anchors = certs_of(bundle)
            assert any(issued_by(served, a.public_bytes(serialization.Encoding.PEM))
                       and a.not_valid_before_utc <= now < a.not_valid_after_utc
                       for a in anchors), f"{cert_dir} is not trusted by a caBundle"


class BarrierClient:
    """Lets every racer read the Secret before any of them writes it."""

    def __init__(self, inner: Client, barrier: asyncio.Barrier) -> None:
        self._inner = inner
        self._barrier = barrier
        self._waited = False
        self.writes: list[str] = []

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        try:
            return await self._inner.get(gvk, name, namespace=namespace)
        finally:
            if gvk == SECRET and not self._waited:
                self._waited = True
                await self._barrier.wait()

    async def create(self, obj: Object, **kw: Any) -> Object:
        self.writes.append("create")
        return await self._inner.create(obj, **kw)

    async def update(self, obj: Object, **kw: Any) -> Object:
        if obj["kind"] == "Secret":
            self.writes.append("update")
        return await self._inner.update(obj, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def eventually(condition: Callable[[], Any], within: float = 5.0) -> None:
    """Wait (real time, the ManualClock does not move) until ``await condition()``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        result = condition()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


# -- the Secret ------------------------------------------------------------------------------


def test_defaults_follow_cert_controller(tmp_path: Path) -> None:
    # cert-controller v0.16 pkg/rotator: CA 10y, serving 1y, lookahead 90d, check 12h.
    r = CertRotator(cast(Client, object()), secret_namespace=NS, secret_name=SECRET_NAME,
                    service_name=SERVICE, cert_dir=tmp_path)
    assert (r.ca_validity, r.cert_validity, r.lookahead, r.check_interval) == (
        dt.timedelta(days=3650), dt.timedelta(days=365), dt.timedelta(days=90),
        dt.timedelta(hours=12))
    assert (r.ca_validity, r.cert_validity, r.lookahead, r.check_interval) == (
        DEFAULT_CA_VALIDITY, DEFAULT_CERT_VALIDITY, DEFAULT_LOOKAHEAD, DEFAULT_CHECK_INTERVAL)
    assert r.dns_names == (DNS,)
    assert r.need_leader_election() is False
    assert r.previous_ca_retention == r.check_interval + r.bundle_propagation_delay


def test_a_lookahead_as_long_as_a_validity_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lookahead"):
        CertRotator(cast(Client, object()), secret_namespace=NS, secret_name=SECRET_NAME,
                    service_name=SERVICE, cert_dir=tmp_path, cert_validity=DAY,
                    lookahead=DAY)


async def test_creates_the_secret_when_missing(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    r = rotator(api, clock, tmp_path, extra_dns_names=["webhook.example.com"])
    result = await r.refresh_once()

    assert result.secret_written
    assert result.actions == ("created a new CA and serving certificate",)
    data = await secret_data(api)
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    ca, leaf = cert(data["ca.crt"]), cert(data["tls.crt"])
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kueue-ca"
    assert issued_by(data["tls.crt"], data["ca.crt"])
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [DNS, "webhook.example.com"]
    assert ExtendedKeyUsageOID.SERVER_AUTH in leaf.extensions.get_extension_for_class(
        x509.ExtendedKeyUsage).value
    # Valid for the whole validity from now (the start is backdated for clock skew).
    assert ca.not_valid_after_utc - ca.not_valid_before_utc == DEFAULT_CA_VALIDITY + CLOCK_SKEW
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc == (
        DEFAULT_CERT_VALIDITY + CLOCK_SKEW)
    assert ca.not_valid_before_utc <= clock.now() < leaf.not_valid_after_utc
    # Nothing due before the check interval.
    assert result.next_check == DEFAULT_CHECK_INTERVAL


async def test_files_written_to_cert_dir_match_the_secret(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    cert_dir = tmp_path / "serving-certs"  # created by the rotator
    result = await rotator(api, clock, cert_dir).refresh_once()
    data = await secret_data(api)
    assert result.files_written
    assert files(cert_dir) == {"ca.crt": data["ca.crt"], "tls.crt": data["tls.crt"],
                               "tls.key": data["tls.key"]}
    assert (cert_dir / "tls.key").stat().st_mode & 0o777 == 0o600
    assert not (cert_dir / "ca.key").exists()
    # A second check rewrites nothing.
    again = await rotator(api, clock, cert_dir).refresh_once()
    assert not again.files_written and not again.secret_written


async def test_adopts_an_existing_valid_secret_without_rewriting_it(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    ca = CertificateAuthority.generate("someone-else", validity=DEFAULT_CA_VALIDITY,
                                       now=clock.now())
    crt, key = ca.issue([DNS], validity=DEFAULT_CERT_VALIDITY, now=clock.now())
    stored = {"ca.crt": ca.cert_pem, "ca.key": ca.key_pem, "tls.crt": crt, "tls.key": key}
    created = await api.client().create({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET_NAME, "namespace": NS},
        "data": {k: base64.b64encode(v).decode() for k, v in stored.items()}})

    result = await rotator(api, clock, tmp_path).refresh_once()

    assert not result.secret_written and result.actions == ()
    assert (await secret(api))["metadata"]["resourceVersion"] == \
        created["metadata"]["resourceVersion"]
    assert files(tmp_path) == {"ca.crt": ca.cert_pem, "tls.crt": crt, "tls.key": key}
    assert await ca_bundles(api) == [ca.cert_pem] * 4


async def test_two_rotators_racing_to_create_converge_on_one_ca(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    barrier = asyncio.Barrier(2)
    clients = [BarrierClient(api.client(), barrier) for _ in range(2)]
    replicas = [rotator(api, clock, tmp_path / f"r{i}", client=c) for i, c in enumerate(clients)]

    results = await asyncio.gather(*(r.refresh_once() for r in replicas))

    # Both read "missing" and both tried to create; one got AlreadyExists and adopted.
    assert [c.writes for c in clients] == [["create"], ["create"]]
    assert sorted(r.secret_written for r in results) == [False, True]
    data = await secret_data(api)
    assert results[0].certificates == results[1].certificates
    for i in range(2):
        assert files(tmp_path / f"r{i}")["ca.crt"] == data["ca.crt"]
        assert files(tmp_path / f"r{i}")["tls.crt"] == data["tls.crt"]
    assert await ca_bundles(api) == [data["ca.crt"]] * 4


async def test_two_rotators_racing_to_renew_write_once(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    options = {"cert_validity": 30 * DAY, "lookahead": 10 * DAY}
    await rotator(api, clock, tmp_path / "r0", **options).refresh_once()
    before = await secret_data(api)
    clock.advance((21 * DAY).total_seconds())  # the serving certificate is in its window

    barrier = asyncio.Barrier(2)
    clients = [BarrierClient(api.client(), barrier) for _ in range(2)]
    replicas = [rotator(api, clock, tmp_path / f"r{i}", client=c, **options)
                for i, c in enumerate(clients)]
    results = await asyncio.gather(*(r.refresh_once() for r in replicas))

    # Both saw it due and tried; the loser got a Conflict, re-read, and took the winner's.
    assert sorted(len(c.writes) for c in clients) == [1, 1]
    assert sorted(r.secret_written for r in results) == [False, True]
    after = await secret_data(api)
    assert after["ca.crt"] == before["ca.crt"]
    assert after["tls.crt"] != before["tls.crt"]
    for i in range(2):
        assert files(tmp_path / f"r{i}")["tls.crt"] == after["tls.crt"]


# -- caBundle ----------------------------------------------------------------------------------


async def test_ca_bundle_is_patched_into_every_webhook_and_repatched_after_a_reset(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    r = rotator(api, clock, tmp_path)
    first = await r.refresh_once()
    ca_pem = (await secret_data(api))["ca.crt"]
    assert await ca_bundles(api) == [ca_pem] * 4
    assert first.configurations_patched == (f"MutatingWebhookConfiguration/{MWC}",
                                            f"ValidatingWebhookConfiguration/{VWC}")
    assert (await r.refresh_once()).configurations_patched == ()

    # Someone re-applies the validating configuration from the manifests: caBundle empty.
    client = api.client()
    config = await client.get(VALIDATING, VWC)
    del config["webhooks"][1]["clientConfig"]["caBundle"]
    await client.update(config)
    assert (await ca_bundles(api))[3] == b""

    again = await r.refresh_once()
    assert again.configurations_patched == (f"ValidatingWebhookConfiguration/{VWC}",)
    assert await ca_bundles(api) == [ca_pem] * 4


async def test_a_missing_configuration_is_skipped(
    api: APIServer, clock: ManualClock, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    await api.client().delete(MUTATING, MWC)
    with caplog.at_level(logging.WARNING, logger="jobframework.webhook.certrotator"):
        r = rotator(api, clock, tmp_path)
        result = await r.refresh_once()
    assert result.configurations_patched == (f"ValidatingWebhookConfiguration/{VWC}",)
    assert r.is_ready
    assert f"MutatingWebhookConfiguration/{MWC} not found" in caplog.text


async def test_watch_repatches_a_reset_ca_bundle_without_waiting_for_the_check(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    r = rotator(api, clock, tmp_path, watch=True)
    task = asyncio.create_task(r.start())
    try:
        await asyncio.wait_for(r.wait_ready(), 5)
        ca_pem = (await secret_data(api))["ca.crt"]
        client = api.client()
        config = await client.get(MUTATING, MWC)
        for hook in config["webhooks"]:
            hook["clientConfig"]["caBundle"] = base64.b64encode(b"stale").decode()
        await client.update(config)

        async def restored() -> bool:
            return await ca_bundles(api) == [ca_pem] * 4

        await eventually(restored)  # the clock never moved: the watch woke the rotator
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# -- rotation ----------------------------------------------------------------------------------


async def test_serving_certificate_is_renewed_in_its_lookahead_window_under_the_same_ca(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    r = rotator(api, clock, tmp_path, cert_validity=30 * DAY, lookahead=10 * DAY,
                check_interval=100 * DAY)
    first = await r.refresh_once()
    original = await secret_data(api)
    window = cert(original["tls.crt"]).not_valid_after_utc - 10 * DAY
    # The next check is scheduled for the window, not for the (long) check interval.
    assert first.next_check == window - clock.now()

    clock.advance((window - clock.now() - dt.timedelta(minutes=1)).total_seconds())
    early = await r.refresh_once()
    assert early.actions == () and (await secret_data(api)) == original
    assert early.next_check == dt.timedelta(minutes=1)

    clock.advance(120)
    renewed = await r.refresh_once()
    data = await secret_data(api)
    assert renewed.secret_written and renewed.actions[0].startswith(
        "renewed the serving certificate")
    assert data["ca.crt"] == original["ca.crt"] and data["ca.key"] == original["ca.key"]
    assert data["tls.crt"] != original["tls.crt"] and data["tls.key"] != original["tls.key"]
    assert issued_by(data["tls.crt"], data["ca.crt"])
    assert cert(data["tls.crt"]).not_valid_after_utc > clock.now() + 29 * DAY
    assert files(tmp_path)["tls.crt"] == data["tls.crt"]
    # Same CA: caBundle untouched.
    assert renewed.configurations_patched == ()
    assert await ca_bundles(api) == [original["ca.crt"]] * 4


async def webhook_servers(*cert_dirs: Path) -> list[WebhookServer]:
    servers = []
    for cert_dir in cert_dirs:
        server = WebhookServer(cert_dir=cert_dir, clock=ManualClock(), shutdown_timeout=1.0)

        async def allow(request: AdmissionRequest) -> Any:
            return allowed("ok")

        server.register("/mutate-batch-v1-job", HandlerFunc(allow))
        await server.listen()
        servers.append(server)
    return servers


async def admit(server: WebhookServer, ca_bundle: bytes) -> bool:
    """One admission call as the API server makes it: TLS trusting caBundle, for DNS."""
    server.cert_watcher.poll()  # pick up rotated files now
    context = ssl.create_default_context(cadata=ca_bundle.decode())
    context.verify_flags |= NO_CHECK_TIME
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u1", "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "operation": "CREATE", "userInfo": {"username": "alice"},
        "object": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}}}
    try:
        async with aiohttp.ClientSession() as session, session.post(
                server.url("/mutate-batch-v1-job"), data=json.dumps(review),
                headers={"Content-Type": "application/json"}, ssl=context,
                server_hostname=DNS) as resp:
            body = await resp.json()
    except aiohttp.ClientSSLError:
        return False  # the API server would fail the call (failurePolicy: Fail)
    return resp.status == 200 and body["response"]["allowed"] is True


async def assert_admission(api: APIServer, servers: list[WebhookServer]) -> None:
    for bundle in await ca_bundles(api):
        for server in servers:
            assert await admit(server, bundle), f"admission failed on {server.cert_dir}"


async def test_ca_rotation_keeps_old_and_new_ca_trusted_with_no_failed_admission(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    options = {"ca_validity": 100 * DAY, "lookahead": 10 * DAY, "check_interval": DAY,
               "bundle_propagation_delay": dt.timedelta(minutes=1)}
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a, b = rotator(api, clock, a_dir, **options), rotator(api, clock, b_dir, **options)
    await a.refresh_once()
    await b.refresh_once()
    ca0 = (await secret_data(api))["ca.crt"]
    servers = await webhook_servers(a_dir, b_dir)
    try:
        await assert_admission(api, servers)

        # The CA enters its lookahead window: a new CA is staged next to the old one.
        window = cert(ca0).not_valid_after_utc - 10 * DAY
        clock.advance((window - clock.now()).total_seconds() + 1)
        staged = await a.refresh_once()
        assert staged.actions[0].startswith("staged a new CA in the CA bundle")
        data = await secret_data(api)
        ca1 = data[NEXT_CA_CERT_KEY]
        assert data["ca.crt"] == ca0 and issued_by(data["tls.crt"], ca0)
        assert await ca_bundles(api) == [ca0 + ca1] * 4
        assert files(a_dir)["tls.crt"] == data["tls.crt"]  # still signed by the old CA
        await assert_trusted(api, clock, a_dir, b_dir)
        await assert_admission(api, servers)
        # Not before the bundle had time to reach the API server.
        assert (await a.refresh_once()).actions == ()
        assert staged.next_check == dt.timedelta(minutes=1)

        # Once it has, the other replica switches to the new CA; the old one stays trusted.
        clock.advance(61)
        switched = await b.refresh_once()
        assert switched.actions[0].startswith("switched to the staged CA")
        data = await secret_data(api)
        assert data["ca.crt"] == ca1 and issued_by(data["tls.crt"], ca1)
        assert data[PREVIOUS_CA_CERT_KEY] == ca0 and NEXT_CA_CERT_KEY not in data
        assert await ca_bundles(api) == [ca1 + ca0] * 4
        assert issued_by(files(a_dir)["tls.crt"], ca0)  # replica a has not looked yet
        await assert_trusted(api, clock, a_dir, b_dir)
        await assert_admission(api, servers)

        # Replica a catches up at its next check (within the retention).
        clock.advance(DAY.total_seconds())
        caught_up = await a.refresh_once()
        assert not caught_up.secret_written and issued_by(files(a_dir)["tls.crt"], ca1)
        await assert_trusted(api, clock, a_dir, b_dir)
        await assert_admission(api, servers)

        # After the retention, the old CA leaves caBundle.
        clock.advance(120)
        retired = await a.refresh_once()
        assert retired.actions == ("dropped the retired CA from the CA bundle",)
        assert PREVIOUS_CA_CERT_KEY not in await secret_data(api)
        assert await ca_bundles(api) == [ca1] * 4
        await b.refresh_once()
        await assert_trusted(api, clock, a_dir, b_dir)
        await assert_admission(api, servers)
        # The check has teeth: a client trusting only the retired CA is refused now.
        assert not await admit(servers[0], ca0)
    finally:
        for server in servers:
            await server.stop()


async def test_staged_ca_does_not_sign_until_every_webhook_trusts_it(
    api: APIServer, clock: ManualClock, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    r = rotator(api, clock, tmp_path, ca_validity=100 * DAY, lookahead=10 * DAY)
    await r.refresh_once()
    ca0 = (await secret_data(api))["ca.crt"]
    clock.advance((91 * DAY).total_seconds())
    await r.refresh_once()
    ca1 = (await secret_data(api))[NEXT_CA_CERT_KEY]
    clock.advance(61)  # the staged CA would be due now

    # A configuration is reset to trust the old CA only (say, re-applied from a backup).
    client = api.client()
    config = await client.get(MUTATING, MWC)
    config["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(ca0).decode()
    await client.update(config)
    with caplog.at_level(logging.WARNING, logger="jobframework.webhook.certrotator"):
        held = await r.refresh_once()
    assert "not yet in the caBundle of every webhook" in caplog.text
    assert held.actions == ("restarted the wait of the staged CA (not yet in every caBundle)",)
    assert issued_by(files(tmp_path)["tls.crt"], ca0)
    assert await ca_bundles(api) == [ca0 + ca1] * 4  # repaired by the same check
    # ... and the API server gets the propagation delay again to see the repair.
    assert held.next_check == dt.timedelta(minutes=1)
    assert (await r.refresh_once()).actions == ()
    assert issued_by(files(tmp_path)["tls.crt"], ca0)

    clock.advance(60)
    switched = await r.refresh_once()
    assert switched.actions[0].startswith("switched to the staged CA")
    assert issued_by(files(tmp_path)["tls.crt"], ca1)


def rsa_secret(now: dt.datetime) -> dict[str, bytes]:
    """CA and serving certificate as cert-controller makes them (RSA 2048, PKCS#1)."""
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kueue-ca")])
    begin = now - dt.timedelta(hours=1)
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
          .public_key(ca_key.public_key()).serial_number(1)
          .not_valid_before(begin).not_valid_after(now + 3650 * DAY)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, DNS)]))
            .issuer_name(name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(begin).not_valid_after(now + 365 * DAY)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(DNS)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))

    def pem_key(k: rsa.RSAPrivateKey) -> bytes:
        return k.private_bytes(serialization.Encoding.PEM,
                               serialization.PrivateFormat.TraditionalOpenSSL,
                               serialization.NoEncryption())

    return {"ca.crt": ca.public_bytes(serialization.Encoding.PEM), "ca.key": pem_key(ca_key),
            "tls.crt": leaf.public_bytes(serialization.Encoding.PEM), "tls.key": pem_key(key)}


async def test_a_secret_from_kueues_go_manager_is_adopted_then_rolled_over_safely(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    go = rsa_secret(clock.now())
    await api.client().create({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET_NAME, "namespace": NS},
        "data": {k: base64.b64encode(v).decode() for k, v in go.items()}})
    r = rotator(api, clock, tmp_path)
    adopted = await r.refresh_once()
    assert not adopted.secret_written
    assert files(tmp_path) == {k: go[k] for k in ("ca.crt", "tls.crt", "tls.key")}

    # The serving certificate is due, and this library signs with ECDSA only: a new CA is
    # staged (trusted next to the RSA one) instead of dropping the RSA CA at once.
    clock.advance((300 * DAY).total_seconds())
    staged = await r.refresh_once()
    assert "cannot sign new certificates" in staged.actions[0]
    assert files(tmp_path)["tls.crt"] == go["tls.crt"]
    clock.advance(61)
    await r.refresh_once()
    data = await secret_data(api)
    assert data[PREVIOUS_CA_CERT_KEY] == go["ca.crt"]
    assert issued_by(files(tmp_path)["tls.crt"], data["ca.crt"])
    await assert_trusted(api, clock, tmp_path)


# -- broken Secrets ----------------------------------------------------------------------------


def _other_key() -> bytes:
    return CertificateAuthority.generate().key_pem


@pytest.mark.parametrize(("data", "reason"), [
    ({"ca.crt": base64.b64encode(b"garbage").decode(),
      "ca.key": base64.b64encode(b"garbage").decode()}, "ca.crt is not a PEM certificate"),
    ({"ca.crt": "%%% not base64 %%%", "ca.key": "AAAA"}, "ca.crt is not base64"),
    ({"tls.crt": base64.b64encode(b"x").decode()}, "no ca.crt"),
    ("mismatched", "ca.key does not match ca.crt"),
    ("expired", "the CA expires at"),
])
async def test_an_unusable_secret_is_replaced_with_a_clear_log(
    api: APIServer, clock: ManualClock, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    data: Any, reason: str,
) -> None:
    if data == "mismatched":
        ca = CertificateAuthority.generate(now=clock.now())
        data = {"ca.crt": base64.b64encode(ca.cert_pem).decode(),
                "ca.key": base64.b64encode(_other_key()).decode()}
    elif data == "expired":
        ca = CertificateAuthority.generate(now=clock.now() - 400 * DAY)
        data = {"ca.crt": base64.b64encode(ca.cert_pem).decode(),
                "ca.key": base64.b64encode(ca.key_pem).decode()}
    before = await api.client().create({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": SECRET_NAME, "namespace": NS}, "data": data})

    with caplog.at_level(logging.INFO, logger="jobframework.webhook.certrotator"):
        result = await rotator(api, clock, tmp_path).refresh_once()

    warnings = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING]
    assert any(f"{NS}/{SECRET_NAME} does not hold a usable CA ({reason}" in w
               and "replacing it" in w for w in warnings), warnings
    assert result.secret_written and reason in result.actions[0]
    after = await secret(api)
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    stored = await secret_data(api)
    assert issued_by(stored["tls.crt"], stored["ca.crt"])
    assert files(tmp_path)["tls.crt"] == stored["tls.crt"]
    await assert_trusted(api, clock, tmp_path)


async def test_the_empty_secret_of_the_manifests_is_filled_quietly(
    api: APIServer, clock: ManualClock, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    # Kueue's kustomize installs an empty Secret for the rotator to fill.
    await api.client().create({"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": SECRET_NAME, "namespace": NS}})
    with caplog.at_level(logging.INFO, logger="jobframework.webhook.certrotator"):
        result = await rotator(api, clock, tmp_path).refresh_once()
    assert result.secret_written
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert {"ca.crt", "ca.key", "tls.crt", "tls.key"} <= set(await secret_data(api))


# -- readiness and the running loop ---------------------------------------------------------


async def test_checker_fails_until_the_certificates_are_written(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    r = rotator(api, clock, tmp_path)
    check = r.checker()
    with pytest.raises(RuntimeError, match="not in"):
        check()
    assert not r.is_ready
    waiter = asyncio.create_task(r.wait_ready())
    await asyncio.sleep(0)
    assert not waiter.done()

    # The caBundle cannot be written: files are there, but it is not ready yet.
    rule_ = api.faults.fail("update", error=403, gvk=VALIDATING, times=None)
    with pytest.raises(errors.Forbidden):
        await r.refresh_once()
    assert (tmp_path / "tls.crt").exists()
    with pytest.raises(RuntimeError):
        check()

    api.faults.remove(rule_)
    await r.refresh_once()
    assert check() is None and r.is_ready
    await asyncio.wait_for(waiter, 1)


async def test_start_checks_on_the_clock_and_retries_failures(
    api: APIServer, clock: ManualClock, tmp_path: Path,
) -> None:
    api.faults.fail("get", error=500, gvk=SECRET, times=1)
    r = rotator(api, clock, tmp_path, cert_validity=30 * DAY, lookahead=10 * DAY,
                check_interval=DAY, retry_initial=5.0)
    task = asyncio.create_task(r.start())
    try:
        await eventually(lambda: clock.sleepers > 0)
        assert not r.is_ready  # the first check failed; a retry is scheduled
        clock.advance(5)
        await asyncio.wait_for(r.wait_ready(), 5)
        first = files(tmp_path)["tls.crt"]

        for _ in range(21):  # daily checks; the certificate enters its window at day 20
            await eventually(lambda: clock.sleepers > 0)
            clock.advance(DAY.total_seconds())
        await eventually(lambda: files(tmp_path)["tls.crt"] != first)
        data = await secret_data(api)
        assert files(tmp_path)["tls.crt"] == data["tls.crt"]
        assert issued_by(data["tls.crt"], data["ca.crt"])
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_listeners_hear_of_new_files_only() -> None:
    server = APIServer(ManualClock())
    client = server.client()
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    with tempfile.TemporaryDirectory() as tmp:
        rotator = CertRotator(client, secret_namespace="ns", secret_name="certs",
                              service_name="svc", cert_dir=tmp, watch=False)
        heard: list[bytes] = []
        rotator.add_listener(lambda: heard.append(Path(tmp, "tls.crt").read_bytes()))
        await rotator.refresh_once()
        assert len(heard) == 1 and heard[0] == rotator.certificates.serving_cert  # type: ignore[union-attr]
        await rotator.refresh_once()
        assert len(heard) == 1, "nothing new written: nobody told"
