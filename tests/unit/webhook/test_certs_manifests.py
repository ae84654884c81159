"""Self-signed serving certificates and WebhookConfiguration manifests."""

from __future__ import annotations

import base64
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from jobframework.webhook import (
    CertificateAuthority,
    CertWatcher,
    ServiceRef,
    WebhookSpec,
    mutating_webhook_configuration,
    rule,
    validating_webhook_configuration,
    write_serving_certs,
)


def test_serving_certs_are_written_with_sans_and_modes(tmp_path: Path) -> None:
    out = write_serving_certs(tmp_path / "c", ["127.0.0.1", "localhost",
                                               "webhook-service.kueue-system.svc"])
    assert {p.name for p in (tmp_path / "c").iterdir()} == {"tls.crt", "tls.key", "ca.crt"}
    assert stat.S_IMODE(out.key_file.stat().st_mode) == 0o600
    cert = x509.load_pem_x509_certificate(out.cert_file.read_bytes())
    ca_cert = x509.load_pem_x509_certificate(out.ca_file.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert sans.get_values_for_type(x509.DNSName) == [
        "localhost", "webhook-service.kueue-system.svc"]
    assert cert.issuer == ca_cert.subject
    cert.verify_directly_issued_by(ca_cert)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert ca_cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert out.ca_bundle == out.ca_file.read_bytes()
    assert base64.b64decode(out.ca_bundle_b64) == out.ca_bundle
    # The files form a pair the server can load.
    CertWatcher(out.cert_file, out.key_file)


def test_rotation_with_the_same_ca_keeps_the_bundle(tmp_path: Path) -> None:
    ca = CertificateAuthority.generate()
    first = write_serving_certs(tmp_path, ca=ca)
    cert1 = first.cert_file.read_bytes()
    second = write_serving_certs(tmp_path, ca=ca)
    assert second.ca_bundle == first.ca_bundle
    assert second.cert_file.read_bytes() != cert1
    assert not list(tmp_path.glob(".*.tmp"))


def test_issue_needs_a_host() -> None:
    with pytest.raises(ValueError, match="at least one host"):
        CertificateAuthority.generate().issue([])


def test_cert_watcher_reports_changes_only(tmp_path: Path) -> None:
    ca = CertificateAuthority.generate()
    certs = write_serving_certs(tmp_path, ca=ca)
    watcher = CertWatcher(certs.cert_file, certs.key_file)
    seen: list[int] = []
    watcher.register_callback(lambda: seen.append(watcher.reloads))
    first = watcher.current_context
    assert watcher.poll() is False and watcher.current_context is first
    write_serving_certs(tmp_path, ca=ca)
    assert watcher.poll() is True
    assert watcher.current_context is not first and seen == [1]
    certs.key_file.write_bytes(b"not a key")
    assert watcher.poll() is False and watcher.reloads == 1


def test_manifests_with_url_and_service() -> None:
    ca_pem = b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"
    specs = [WebhookSpec(name="mjob.kb.io", path="/mutate-batch-v1-job",
                         rules=[rule("batch", "v1", "jobs", ["CREATE"])],
                         reinvocation_policy="Never", timeout_seconds=5)]
    by_url = mutating_webhook_configuration("kueue-py", specs, ca_bundle=ca_pem,
                                            url="https://127.0.0.1:9443/")
    assert by_url == {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "kueue-py"},
        "webhooks": [{
            "name": "mjob.kb.io",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:9443/mutate-batch-v1-job",
                             "caBundle": base64.b64encode(ca_pem).decode()},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "rules": [{"apiGroups": ["batch"], "apiVersions": ["v1"],
                       "operations": ["CREATE"], "resources": ["jobs"]}],
            "timeoutSeconds": 5,
            "reinvocationPolicy": "Never",
        }],
    }
    vspecs = [WebhookSpec(name="vjob.kb.io", path="/validate-batch-v1-job",
                          rules=[rule("batch", "v1", "jobs", scope="Namespaced")],
                          failure_policy="Ignore",
                          namespace_selector={"matchLabels": {"team": "a"}})]
    by_service = validating_webhook_configuration(
        "kueue-py", vspecs, service=ServiceRef("webhook-service", "kueue-system"))
    hook = by_service["webhooks"][0]
    assert hook["clientConfig"] == {"service": {
        "name": "webhook-service", "namespace": "kueue-system",
        "path": "/validate-batch-v1-job", "port": 443}}
    assert hook["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert hook["rules"][0]["scope"] == "Namespaced"
    assert (hook["failurePolicy"], hook["namespaceSelector"]) == (
        "Ignore", {"matchLabels": {"team": "a"}})


def test_manifest_errors() -> None:
    spec = WebhookSpec(name="v", path="/v", rules=[], reinvocation_policy="IfNeeded")
    with pytest.raises(ValueError, match="reinvocationPolicy is for mutating webhooks"):
        validating_webhook_configuration("x", [spec], url="https://h")
    with pytest.raises(ValueError, match="exactly one of url and service"):
        mutating_webhook_configuration("x", [spec])
    with pytest.raises(ValueError, match="exactly one of url and service"):
        mutating_webhook_configuration("x", [spec], url="https://h", service=ServiceRef("s", "n"))
