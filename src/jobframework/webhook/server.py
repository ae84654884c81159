"""The HTTPS admission webhook server (controller-runtime's ``webhook.Server``).

Handlers are registered by path; the server answers ``POST <path>`` with an
AdmissionReview v1 over TLS, using the certificate files in ``cert_dir`` and following
them when they are rotated (:class:`~jobframework.webhook.certwatcher.CertWatcher`).
The same handlers are reachable without TLS through :meth:`WebhookServer.as_admission_hook`,
which in-memory API servers call directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from jobframework.runtime import wirejson
from jobframework.runtime.clock import Clock
from jobframework.runtime.healthz import Checker

from .admission import AdmissionHook, Handler, admission_hook, errored, review
from .certwatcher import DEFAULT_POLL_INTERVAL, CertWatcher, TLSOption
from .metrics import WebhookMetrics

log = logging.getLogger("jobframework.webhook")

#: controller-runtime's limit on an AdmissionReview body.
MAX_REQUEST_BYTES = 7 * 1024 * 1024
#: Where controller-runtime looks for ``tls.crt``/``tls.key`` when no directory is given.
DEFAULT_CERT_DIR = Path(tempfile.gettempdir()) / "k8s-webhook-server" / "serving-certs"


class WebhookServer:
    """Serves registered admission handlers over HTTPS.

    Add it to a manager (``manager.add(server)``; it does not need leader election:
    every replica answers) or run it alone::

        server = WebhookServer(cert_dir="/tmp/k8s-webhook-server/serving-certs", port=9443,
                               host="0.0.0.0")
        server.register("/mutate-batch-v1-job", with_custom_defaulter(JobDefaulter()))
        async with server:  # listen() ... stop()
            ...

    ``port=0`` picks a free port (see :attr:`port`); :meth:`bind` picks it before the
    server starts, e.g. to write webhook configurations by URL first. Stopping waits up
    to ``shutdown_timeout`` seconds for requests in flight.

    Client authentication is off by default: anything that reaches the port may post
    reviews. ``client_ca_file`` (a CA bundle anywhere) or ``client_ca_name`` (a file in
    ``cert_dir``, controller-runtime's ``ClientCAName``) requires every client to present
    a certificate signed by that CA, as the API server does once its
    AdmissionConfiguration gives it a client certificate for the webhook; the bundle is
    re-read with the serving certificate when that changes.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        cert_dir: str | Path | None = None,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
        client_ca_name: str | None = None,
        client_ca_file: str | Path | None = None,
        tls_options: Sequence[TLSOption] = (),
        cert_poll_interval: float = DEFAULT_POLL_INTERVAL,
        clock: Clock | None = None,
        shutdown_timeout: float = 60.0,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        metrics_registry: CollectorRegistry | None = None,
    ) -> None:
        if client_ca_name and client_ca_file:
            raise ValueError("give client_ca_name (in cert_dir) or client_ca_file, not both")
        self.host = host
        self.cert_dir = Path(cert_dir) if cert_dir is not None else DEFAULT_CERT_DIR
        self._port = port
        self._cert_name = cert_name
        self._key_name = key_name
        self._client_ca_file: Path | None = (
            Path(client_ca_file) if client_ca_file
            else self.cert_dir / client_ca_name if client_ca_name else None)
        self._tls_options = tuple(tls_options)
        self._poll_interval = cert_poll_interval
        self._clock = clock
        self._shutdown_timeout = shutdown_timeout
        self._max_request_bytes = max_request_bytes
        self._handlers: dict[str, Handler] = {}
        self._runner: web.AppRunner | None = None
        self._sock: socket.socket | None = None
        self._watcher: CertWatcher | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._started = False
        self._listening = asyncio.Event()
        #: Request counters, latencies and in-flight gauges (``metrics_registry`` or own).
        self.metrics = WebhookMetrics(metrics_registry)

    # -- registration ---------------------------------------------------------------

    def register(self, path: str, handler: Handler) -> None:
        """Serve ``handler`` at ``path`` (exact match); also allowed while running."""
        if not path.startswith("/"):
            raise ValueError(f"webhook path {path!r} must start with '/'")
        if path in self._handlers:
            raise ValueError(f"can't register duplicate path: {path}")
        if not callable(getattr(handler, "handle", None)):
            raise TypeError(f"{handler!r} is not a Handler (wrap defaulters and validators "
                            "with with_custom_defaulter / with_custom_validator)")
        self._handlers[path] = handler
        self.metrics.register_path(path)
        log.info("registering webhook at %s", path)

    @property
    def handlers(self) -> Mapping[str, Handler]:
        """Registered handlers by path (a copy)."""
        return dict(self._handlers)

    def as_admission_hook(self, path: str) -> AdmissionHook:
        """The handler at ``path`` as ``async (AdmissionReview dict) -> AdmissionReview dict``.

        It runs the same decoding and encoding as the HTTPS endpoint, without TLS and
        without the server running, for in-memory API servers and tests.
        """
        try:
            return admission_hook(self._handlers[path])
        except KeyError:
            raise KeyError(f"no webhook registered at {path}") from None

    # -- lifecycle ------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """True between a successful :meth:`listen` and :meth:`stop`."""
        return self._started

    @property
    def port(self) -> int:
        """The port listened on (the chosen one when constructed with ``port=0``), known
        once the server listens or :meth:`bind` reserved it."""
        if self._runner is not None and self._runner.addresses:
            return int(self._runner.addresses[0][1])
        if self._sock is not None:
            return int(self._sock.getsockname()[1])
        raise RuntimeError("the webhook server is not listening (nor bound: see bind())")

    def url(self, path: str = "") -> str:
        """``https://<host>:<port><path>`` of the running (or bound) server."""
        host = self._dial_host()
        if ":" in host:
            host = f"[{host}]"
        return f"https://{host}:{self.port}{path}"

    @property
    def client_ca_file(self) -> Path | None:
        """The CA bundle client certificates must be signed by (None: no client auth)."""
        return self._client_ca_file

    @property
    def cert_watcher(self) -> CertWatcher:
        """The certificate watcher of the running server."""
        if self._watcher is None:
            raise RuntimeError("the webhook server has not been started")
        return self._watcher

    def need_leader_election(self) -> bool:
        """False: webhooks are served by every replica, leader or not."""
        return False

    def bind(self) -> int:
        """Bind the listening socket now, before the server starts, and return its port.

        With ``port=0`` the port is otherwise known only once the server listens, that is
        once the manager has started it; bound first, :meth:`url` is known and webhook
        configurations pointing at it can be written before. :meth:`listen` (and so
        :meth:`start`) then serves on this socket. It listens from now on: connections
        wait in its backlog until the server serves them, so the API server's calls made
        in between are answered late (within the webhook's ``timeoutSeconds``), not
        refused. Calling it again, or on a listening server, returns the same port; the
        socket is closed by :meth:`stop`.
        """
        if self._runner is not None:
            return self.port
        if self._sock is None:
            self._sock = _listening_socket(self.host, self._port)
            log.info("webhook server bound to %s", self.url())
        return int(self._sock.getsockname()[1])

    async def listen(self) -> None:
        """Load the certificate, listen, and start watching the certificate files.

        Returns once the server accepts connections. Raises ``OSError``/``ssl.SSLError``
        if the certificate files are missing or invalid, or the port is taken.
        """
        if self._runner is not None:
            raise RuntimeError("the webhook server is already started")
        watcher = CertWatcher(
            self.cert_dir / self._cert_name,
            self.cert_dir / self._key_name,
            interval=self._poll_interval,
            clock=self._clock,
            client_ca_path=self._client_ca_file,
            tls_options=self._tls_options,
        )
        app = web.Application(client_max_size=self._max_request_bytes)
        app.router.add_route("*", "/{tail:.*}", self._serve)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=self._shutdown_timeout)
        await runner.setup()
        try:
            site: web.BaseSite
            if self._sock is not None:
                site = web.SockSite(runner, self._sock, ssl_context=watcher.ssl_context)
            else:
                site = web.TCPSite(runner, self.host, self._port,
                                   ssl_context=watcher.ssl_context)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._watcher = watcher
        self._watch_task = asyncio.create_task(watcher.run(), name="webhook-certwatcher")
        self._started = True
        self._listening.set()
        log.info("serving webhooks on %s", self.url())

    async def start(self) -> None:
        """Serve until cancelled, then stop gracefully: the manager's ``Runnable`` contract.

        ``manager.add(server)`` runs it (before leader election: see
        :meth:`need_leader_election`); :meth:`wait_started` tells when it listens.
        """
        await self.listen()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.shield(self.stop())

    async def wait_started(self) -> None:
        """Return once the server listens (e.g. to read :attr:`port` under a manager)."""
        await self._listening.wait()

    async def stop(self) -> None:
        """Stop accepting connections, let requests in flight finish, release the port."""
        self._started = False
        self._listening.clear()
        task, self._watch_task = self._watch_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()  # closed with the runner if it served; closing again is harmless

    async def __aenter__(self) -> WebhookServer:
        await self.listen()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def started_checker(self) -> Checker:
        """A readiness check: fails until the server is started and completes a TLS handshake.

        Like controller-runtime it does not verify the certificate: it only proves the
        listener is up.
        """

        async def check() -> None:
            if not self._started or self._runner is None:
                raise RuntimeError("webhook server has not been started yet")
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(self._dial_host(), self.port, ssl=context),
                    timeout=10,
                )
            except (OSError, TimeoutError) as exc:
                raise RuntimeError(f"webhook server is not reachable: {exc}") from exc
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()

        return check

    def _dial_host(self) -> str:
        # A wildcard listener is reached on loopback.
        return self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"

    # -- HTTP -----------------------------------------------------------------------

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        handler = self._handlers.get(path)
        if handler is None:
            return web.Response(status=404, text=f"no webhook registered at {path}\n")
        series = self.metrics.for_path(path)
        series.in_flight.inc()
        start = time.perf_counter()
        status = 500
        try:
            response = await self._serve_hook(request, handler)
            status = response.status
            return response
        finally:
            series.in_flight.dec()
            series.latency.observe(time.perf_counter() - start)
            series.requests_total(status).inc()

    async def _serve_hook(self, request: web.Request, handler: Handler) -> web.Response:
        if request.method != "POST":
            return web.Response(status=405, text="admission webhooks accept POST only\n",
                                headers={"Allow": "POST"})
        if request.content_type != "application/json":
            return _error(400, f"contentType={request.content_type}, expected application/json")
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _error(413, "request entity is too large; limit is "
                               f"{self._max_request_bytes} bytes")
        if not raw:
            return _error(400, "request body is empty")
        try:
            body: Any = wirejson.loads(raw)
        except ValueError as exc:
            return _error(400, f"the request body is not JSON: {exc}")
        except RecursionError:
            # orjson stops at 1,024 levels; its fallback, json, at the recursion limit.
            return _error(400, "the request body nests JSON too deeply to decode")
        status, out = await review(handler, body)
        return _json(out, status)


def _listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host`` (its first address; all interfaces for ``""``)."""
    family, _, _, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.create_server(address, family=family, backlog=128)
    sock.setblocking(False)
    return sock


def _error(status: int, message: str) -> web.Response:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": errored(status, message).complete(None).to_dict()}
    return _json(body, status)


def _json(body: Any, status: int) -> web.Response:
    # web.json_response's headers, with orjson's encoding (wirejson.dumps).
    return web.Response(body=wirejson.dumps(body), status=status,
                        content_type="application/json", charset="utf-8")
