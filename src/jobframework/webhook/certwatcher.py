"""Serving certificates that follow their files (controller-runtime's ``certwatcher``).

Certificates mounted from a Secret (cert-manager, the Kubernetes CA) are rotated on
disk while the webhook runs. :class:`CertWatcher` polls the certificate and key files
and, when their content changes and the new pair loads, serves it to every new TLS
connection; connections already open keep the certificate they started with. A pair
that does not load (say, half written) is logged and retried at the next poll, and the
previous certificate stays in service. A client CA bundle (mutual TLS) is followed the
same way: a changed bundle is loaded into the contexts of new connections.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path

from jobframework.runtime.clock import Clock, RealClock

log = logging.getLogger("jobframework.webhook.certwatcher")

#: How often the files are read; controller-runtime polls every 10 s besides fsnotify.
DEFAULT_POLL_INTERVAL = 10.0

#: Adjusts each server SSL context (controller-runtime's ``TLSOpts``).
TLSOption = Callable[[ssl.SSLContext], None]


class CertWatcher:
    """Keeps a server :class:`ssl.SSLContext` loaded with the current certificate files.

    Use :attr:`ssl_context` as the listening socket's context: its SNI hook, which
    OpenSSL runs on every handshake (with or without SNI), switches each new
    connection to the context of the latest certificate.
    """

    def __init__(
        self,
        cert_path: str | Path,
        key_path: str | Path,
        *,
        interval: float = DEFAULT_POLL_INTERVAL,
        clock: Clock | None = None,
        client_ca_path: str | Path | None = None,
        tls_options: Sequence[TLSOption] = (),
    ) -> None:
        self.cert_path = Path(cert_path)
        self.key_path = Path(key_path)
        self.interval = interval
        self._clock = clock or RealClock()
        self._client_ca = Path(client_ca_path) if client_ca_path else None
        self._tls_options = tuple(tls_options)
        self._loaded: tuple[bytes, bytes, bytes] | None = None
        self._current: ssl.SSLContext | None = None
        self._listening: ssl.SSLContext | None = None
        self._callbacks: list[Callable[[], None]] = []
        self.reloads = 0
        self.read_certificate()

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """The context to listen with (fixed; it hands connections the current certificate)."""
        if self._listening is None:
            # The first context; its SNI hook moves handshakes to later ones.
            self._listening = self.current_context
        return self._listening

    @property
    def current_context(self) -> ssl.SSLContext:
        """The context of the certificate served to new connections."""
        assert self._current is not None  # set by read_certificate() in __init__
        return self._current

    @property
    def certificate_pem(self) -> bytes:
        """The PEM of the certificate served to new connections."""
        assert self._loaded is not None  # set by read_certificate() in __init__
        return self._loaded[0]

    def register_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after each certificate change."""
        self._callbacks.append(callback)

    def read_certificate(self) -> bool:
        """Load the files now; True if the certificate (or the client CA) changed.

        Raises (``OSError``, ``ssl.SSLError``) when the files cannot be read or do not
        form a key pair; the current certificate then stays in service.
        """
        cert = self.cert_path.read_bytes()
        key = self.key_path.read_bytes()
        client_ca = self._client_ca.read_bytes() if self._client_ca is not None else b""
        if self._loaded == (cert, key, client_ca):
            return False
        context = self._new_context()
        self._current = context
        first = self._loaded is None
        self._loaded = (cert, key, client_ca)
        if not first:
            self.reloads += 1
            log.info("updated the serving certificate from %s", self.cert_path)
            for callback in self._callbacks:
                callback()
        return True

    def poll(self) -> bool:
        """One poll: reload if the files changed; errors are logged, never raised."""
        try:
            return self.read_certificate()
        except (OSError, ssl.SSLError, ValueError) as exc:
            log.warning("cannot load the serving certificate %s: %s", self.cert_path, exc)
            return False

    async def run(self) -> None:
        """Poll every :attr:`interval` seconds until cancelled."""
        while True:
            await self._clock.sleep(self.interval)
            self.poll()
            # Let a ManualClock-driven test observe the poll before the next sleep.
            await asyncio.sleep(0)

    def _new_context(self) -> ssl.SSLContext:
        # Every context gets the same settings: after the SNI switch OpenSSL verifies
        # client certificates with the new context's store.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_path, self.key_path)
        if self._client_ca is not None:
            context.load_verify_locations(cafile=self._client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
        for option in self._tls_options:
            option(context)
        context.sni_callback = self._select
        return context

    def _select(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
        context: ssl.SSLContext,
    ) -> None:
        if self._current is not None and context is not self._current:
            connection.context = self._current
