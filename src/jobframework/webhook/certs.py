"""Self-signed serving certificates for webhooks (tests, local clusters, dev setups).

:func:`write_serving_certs` mints a CA and a serving certificate signed by it, for
``127.0.0.1``/``localhost`` and any DNS names (a Service's
``<svc>.<ns>.svc``), writes ``tls.crt``/``tls.key``/``ca.crt`` into a directory, and
returns the CA bundle for a WebhookConfiguration's ``clientConfig.caBundle``. In
production let cert-manager (or similar) fill the same files instead.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_HOSTS = ("127.0.0.1", "localhost")
DEFAULT_VALIDITY = dt.timedelta(days=365)
#: How far back a certificate's validity starts, for clocks behind ours.
CLOCK_SKEW = dt.timedelta(minutes=5)


@attrs.frozen
class CertificateAuthority:
    """A CA certificate and its private key, PEM-encoded."""

    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def generate(
        cls, common_name: str = "jobframework-webhook-ca", *,
        validity: dt.timedelta = DEFAULT_VALIDITY, now: dt.datetime | None = None,
    ) -> CertificateAuthority:
        """A new self-signed CA (ECDSA P-256)."""
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = now or dt.datetime.now(dt.UTC)
        # Valid from a little earlier (clocks differ), for ``validity`` from now.
        start = now - CLOCK_SKEW
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True,
                    content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def issue(
        self, hosts: Sequence[str] = DEFAULT_HOSTS, *, common_name: str | None = None,
        validity: dt.timedelta = DEFAULT_VALIDITY, now: dt.datetime | None = None,
        client_auth: bool = False,
    ) -> tuple[bytes, bytes]:
        """A serving certificate for ``hosts`` (IP addresses or DNS names): ``(cert, key)`` PEM.

        ``client_auth`` makes it usable as a TLS client certificate too (for servers
        started with a client CA).
        """
        if not hosts:
            raise ValueError("a serving certificate needs at least one host")
        ca_cert = x509.load_pem_x509_certificate(self.cert_pem)
        ca_key = serialization.load_pem_private_key(self.key_pem, password=None)
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
            raise TypeError("the CA key must be an ECDSA key")
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        usages = [ExtendedKeyUsageOID.SERVER_AUTH]
        if client_auth:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        now = now or dt.datetime.now(dt.UTC)
        # Valid from a little earlier (clocks differ), for ``validity`` from now.
        start = now - CLOCK_SKEW
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([
                x509.NameAttribute(NameOID.COMMON_NAME, common_name or hosts[0]),
            ]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_encipherment=True, key_cert_sign=False,
                    crl_sign=False, content_commitment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


@attrs.frozen
class ServingCerts:
    """Files written by :func:`write_serving_certs`."""

    cert_dir: Path
    cert_file: Path
    key_file: Path
    ca_file: Path
    ca: CertificateAuthority

    @property
    def ca_bundle(self) -> bytes:
        """The CA certificate PEM, for ``clientConfig.caBundle`` (after base64)."""
        return self.ca.cert_pem

    @property
    def ca_bundle_b64(self) -> str:
        """:attr:`ca_bundle` base64-encoded, as a WebhookConfiguration manifest holds it."""
        return base64.b64encode(self.ca.cert_pem).decode()


def write_serving_certs(
    cert_dir: str | Path,
    hosts: Sequence[str] = DEFAULT_HOSTS,
    *,
    ca: CertificateAuthority | None = None,
    cert_name: str = "tls.crt",
    key_name: str = "tls.key",
    ca_name: str = "ca.crt",
    validity: dt.timedelta = DEFAULT_VALIDITY,
) -> ServingCerts:
    """Write a serving certificate for ``hosts`` (and its CA) into ``cert_dir``.

    A new CA is made unless ``ca`` is given (pass the same one to rotate the serving
    certificate without touching ``caBundle``). Each file is written to a temporary
    name and renamed into place, so a watcher never reads half a file; the key is
    readable by its owner only.
    """
    directory = Path(cert_dir)
    directory.mkdir(parents=True, exist_ok=True)
    authority = ca or CertificateAuthority.generate(validity=validity)
    cert_pem, key_pem = authority.issue(hosts, validity=validity)
    _atomic_write(directory / ca_name, authority.cert_pem, 0o644)
    _atomic_write(directory / key_name, key_pem, 0o600)
    _atomic_write(directory / cert_name, cert_pem, 0o644)
    return ServingCerts(directory, directory / cert_name, directory / key_name,
                        directory / ca_name, authority)


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
