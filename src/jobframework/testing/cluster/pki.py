"""Certificates and keys for the local cluster, generated with ``cryptography``.

One CA signs everything: the kube-apiserver serving certificate, the admin client
certificate (``O=system:masters``) and the Kueue webhook serving certificate. The
service-account signing key pair is a separate RSA key.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class KeyPair:
    """PEM paths of a certificate and its private key."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """Every credential file the cluster uses."""

    ca: KeyPair
    apiserver: KeyPair
    admin: KeyPair
    webhook: KeyPair
    sa_public: Path
    sa_private: Path
    #: A CA of its own for the client certificate the API server presents to admission
    #: webhooks (its AdmissionConfiguration): a webhook server trusting it accepts the API
    #: server and no other client of the cluster CA.
    webhook_client_ca: KeyPair
    webhook_client: KeyPair


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


def _issue(
    subject: x509.Name,
    key: rsa.RSAPrivateKey,
    issuer: x509.Name,
    issuer_key: rsa.RSAPrivateKey,
    *,
    is_ca: bool = False,
    server_names: tuple[str, ...] = (),
    server_ips: tuple[str, ...] = (),
    client: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if is_ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        usages = []
        if server_names or server_ips:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        if server_names or server_ips:
            sans: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
            sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def generate(directory: Path, service_ip: str) -> Pki:
    """Write a fresh CA, leaf certificates and the service-account key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM

    ca_key = _new_key()
    ca_name = _name("kueue-jobframework-local-ca")
    ca_cert = _issue(ca_name, ca_key, ca_name, ca_key, is_ca=True)
    ca = KeyPair(directory / "ca.crt", directory / "ca.key")
    _write(ca.cert, ca_cert.public_bytes(pem))
    _write(ca.key, _key_pem(ca_key), private=True)

    def leaf(
        stem: str,
        subject: x509.Name,
        *,
        names: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        client: bool = False,
    ) -> KeyPair:
        key = _new_key()
        cert = _issue(
            subject, key, ca_name, ca_key, server_names=names, server_ips=ips, client=client
        )
        pair = KeyPair(directory / f"{stem}.crt", directory / f"{stem}.key")
        _write(pair.cert, cert.public_bytes(pem))
        _write(pair.key, _key_pem(key), private=True)
        return pair

    apiserver = leaf(
        "apiserver",
        _name("kube-apiserver"),
        names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        ips=("127.0.0.1", service_ip),
    )
    admin = leaf("admin", _name("kubernetes-admin", "system:masters"), client=True)
    webhook = leaf("webhook", _name("kueue-webhook"), names=("localhost",), ips=("127.0.0.1",))

    sa_key = _new_key()
    sa_private = directory / "sa.key"
    sa_public = directory / "sa.pub"
    _write(sa_private, _key_pem(sa_key), private=True)
    _write(
        sa_public,
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo),
    )

    client_ca_key = _new_key()
    client_ca_name = _name("kueue-jobframework-local-webhook-client-ca")
    client_ca_cert = _issue(client_ca_name, client_ca_key, client_ca_name, client_ca_key,
                            is_ca=True)
    webhook_client_ca = KeyPair(directory / "webhook-client-ca.crt",
                                directory / "webhook-client-ca.key")
    _write(webhook_client_ca.cert, client_ca_cert.public_bytes(pem))
    _write(webhook_client_ca.key, _key_pem(client_ca_key), private=True)
    client_key = _new_key()
    client_cert = _issue(_name("kube-apiserver-webhook-client"), client_key, client_ca_name,
                         client_ca_key, client=True)
    webhook_client = KeyPair(directory / "webhook-client.crt", directory / "webhook-client.key")
    _write(webhook_client.cert, client_cert.public_bytes(pem))
    _write(webhook_client.key, _key_pem(client_key), private=True)
    return Pki(ca, apiserver, admin, webhook, sa_public, sa_private, webhook_client_ca,
               webhook_client)


#: Kueue v0.19's cmd/kueue/main.go reads the metrics server's certificate from this
#: fixed path whenever ``internalCertManagement`` is disabled, and exits if it is missing.
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")


def ensure_kueue_metrics_cert(directory: Path = KUEUE_METRICS_CERT_DIR) -> Path:
    """Create a self-signed loopback ``tls.crt``/``tls.key`` there unless present.

    Existing files are left alone (another cluster may be using them). Raises
    ``PermissionError`` with instructions when the directory cannot be written.
    """
    cert, key = directory / "tls.crt", directory / "tls.key"
    if cert.is_file() and key.is_file():
        return directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
        priv = _new_key()
        name = _name("kueue-metrics-local")
        signed = _issue(
            name, priv, name, priv, server_names=("localhost",), server_ips=("127.0.0.1",)
        )
        for path, data in (
            (key, _key_pem(priv)),
            (cert, signed.public_bytes(serialization.Encoding.PEM)),
        ):
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            _write(tmp, data, private=path is key)
            os.replace(tmp, path)
    except PermissionError as err:
        raise PermissionError(
            f"Kueue (internalCertManagement disabled) requires a metrics certificate in "
            f"{directory} (path fixed in cmd/kueue/main.go) and it cannot be created: {err}. "
            f"Create it once as root: mkdir -p {directory} && openssl req -x509 -newkey rsa:2048 "
            f"-nodes -days 3650 -subj /CN=kueue-metrics-local -keyout {key} -out {cert}"
        ) from err
    return directory
