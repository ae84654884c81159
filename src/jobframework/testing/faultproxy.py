"""A fault-injecting HTTPS reverse proxy between a controller and a kube-apiserver.

The fault suite puts :class:`FaultProxy` on loopback between the manager and the API
server and points the manager at the kubeconfig the proxy writes. Every request is
forwarded upstream (with the upstream kubeconfig's credentials) unless the
:class:`FaultPlan` says otherwise; per request, a seeded ``random.Random`` decides to:

- **delay** it before forwarding;
- answer it with an **error** instead of forwarding: ``409 Conflict`` (writes only),
  ``429 TooManyRequests`` with ``Retry-After: 1``, or ``500 InternalError``, each with
  the ``Status`` body kube-apiserver writes;
- **cut** its connection, either before forwarding (nothing happened) or after the
  upstream answered (the write happened, the client only sees a broken connection);
- for a watch: **cut** the stream after a random time, or end it with an ``ERROR``
  event carrying ``410 Expired`` (what the apiserver sends for a too old
  resourceVersion), which makes informers relist.

A cut aborts the TCP connection (RST, no TLS close, no HTTP answer): the client sees a
dropped connection, as when an apiserver or a load balancer goes away. Watch streams are
forwarded line by line as they arrive, never buffered.

    plan = FaultPlan(seed=7, error_rate=0.1, cut_rate=0.05, watch_cut_after=(2, 5))
    async with FaultProxy(kubeconfig, plan=plan, directory=tmp) as proxy:
        client = await RestClient.from_kubeconfig(str(proxy.kubeconfig))

Run it in a process of its own (the fault suite does, its own event loop being busy)::

    python -m jobframework.testing.faultproxy --kubeconfig IN --directory DIR \\
        --error-rate 0.1 --watch-cut-after 2 5 --exempt-leases --stats-file stats.json

which prints ``ready <url> <kubeconfig>`` once listening, rewrites the stats file every
second, and exits 0 on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import logging
import os
import random
import signal
import socket
import ssl
import struct
import sys
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal
from urllib.parse import unquote

import aiohttp
import attrs
import yaml
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from ..runtime import errors
from ..runtime.client.config import load_kubeconfig
from ..webhook.certs import DEFAULT_HOSTS, write_serving_certs

__all__ = [
    "FaultAction",
    "FaultDecision",
    "FaultPlan",
    "FaultProxy",
    "FaultStats",
    "exempt_leases_and_discovery",
    "main",
]

log = logging.getLogger("jobframework.testing.faultproxy")

#: The error codes the proxy knows how to answer with.
_SUPPORTED_CODES = frozenset({409, 429, 500})
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# RFC 9110 §7.6.1 hop-by-hop headers, plus those only this hop may set.
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
    "trailer", "trailers", "transfer-encoding", "upgrade", "expect",
})
_RETRY_AFTER_SECONDS = 1
#: Request bodies the proxy accepts (aiohttp's default, 1 MiB, is below etcd's limit).
_MAX_BODY = 64 * 2**20
#: How many decisions :attr:`FaultProxy.decisions` keeps.
_DECISION_LOG = 10_000


def _rate(_: Any, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} must be within [0, 1], not {value}")


def _codes(_: Any, attribute: attrs.Attribute[tuple[int, ...]], value: tuple[int, ...]) -> None:
    unknown = set(value) - _SUPPORTED_CODES
    if unknown:
        raise ValueError(f"{attribute.name}: unsupported codes {sorted(unknown)} "
                         f"(supported: {sorted(_SUPPORTED_CODES)})")


def _window(_: Any, attribute: attrs.Attribute[Any], value: tuple[float, float] | None) -> None:
    if value is not None and not 0.0 <= value[0] <= value[1]:
        raise ValueError(f"{attribute.name} must be (a, b) with 0 <= a <= b, not {value}")


def _to_codes(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(code) for code in value)


def _to_window(value: Sequence[float] | None) -> tuple[float, float] | None:
    if value is None:
        return None
    a, b = value
    return float(a), float(b)


def _non_negative(_: Any, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, not {value}")


@attrs.define(kw_only=True)
class FaultPlan:
    """What to inject; probabilities are per request, decided by a seeded ``random.Random``.

    ``error_rate`` and ``cut_rate`` share one draw, so they are exclusive: a request is
    answered with an error with probability ``error_rate``, cut with ``cut_rate`` (their
    sum should stay <= 1). Neither applies to watches, which ``watch_cut_after`` and
    ``watch_expire_rate`` govern. Delays apply to every request, watches included.
    """

    #: Seeds the proxy's ``random.Random`` (reseeded whenever the plan is replaced).
    seed: int = 0
    #: Fraction of non-watch requests answered with an error instead of being forwarded.
    error_rate: float = attrs.field(default=0.0, validator=_rate)
    #: Codes to choose from: 409 (Conflict, writes only), 429 (with ``Retry-After: 1``),
    #: 500 (InternalError). A read drawn for an error when only 409 is listed is forwarded.
    error_codes: tuple[int, ...] = attrs.field(default=(409, 429, 500),
                                               converter=_to_codes, validator=_codes)
    #: Fraction of requests delayed before forwarding, by ``uniform(0, max_delay)`` seconds.
    delay_rate: float = attrs.field(default=0.0, validator=_rate)
    max_delay: float = attrs.field(default=0.0, validator=_non_negative)
    #: Fraction of non-watch requests whose connection is cut: half before forwarding,
    #: half after the upstream answered (the write happened; the client cannot know).
    cut_rate: float = attrs.field(default=0.0, validator=_rate)
    #: Each watch stream is cut after ``uniform(a, b)`` seconds of streaming.
    watch_cut_after: tuple[float, float] | None = attrs.field(
        default=None, converter=_to_window, validator=_window)
    #: Fraction of those watch cuts that end the stream cleanly after an ``ERROR`` event
    #: with a ``410 Expired`` Status, instead of dropping the connection.
    watch_expire_rate: float = attrs.field(default=0.0, validator=_rate)
    #: ``(method, path) -> True`` passes a request through untouched (no delay either).
    exempt: Callable[[str, str], bool] | None = None


@attrs.define
class FaultStats:
    """What the proxy saw and did.

    ``requests`` counts every request received (watches included); ``watches`` the
    watch requests among them. ``connections_cut`` counts injected request cuts of both
    kinds, ``cut_after_forward`` those made after the upstream answered. ``watches_cut``
    and ``watches_expired`` count watch streams ended by the plan; ``manual_cuts`` the
    connections :meth:`FaultProxy.cut_all` aborted; ``upstream_errors`` requests the
    upstream failed to answer (their client connection is dropped too).
    """

    requests: int = 0
    watches: int = 0
    #: Injected error answers, by HTTP code.
    errors: dict[int, int] = attrs.field(factory=dict)
    delayed: int = 0
    connections_cut: int = 0
    cut_after_forward: int = 0
    watches_cut: int = 0
    watches_expired: int = 0
    manual_cuts: int = 0
    upstream_errors: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The counters as a JSON-ready dict (error codes as string keys, as JSON has them)."""
        out = attrs.asdict(self)
        out["errors"] = {str(code): n for code, n in sorted(self.errors.items())}
        return out


FaultAction = Literal["pass", "forward", "error", "cut-before", "cut-after"]


@attrs.frozen(kw_only=True)
class FaultDecision:
    """What the plan decided for one request (:attr:`FaultProxy.decisions` keeps them).

    ``action`` is ``pass`` for requests the plan does not touch (proxy disabled, or
    exempt), else ``forward``, ``error`` (with ``code``), ``cut-before`` or ``cut-after``.
    Watches are forwarded; ``watch_cut_after`` is when their stream is to be cut and
    ``watch_expire`` whether that cut is a ``410 Expired`` event instead.
    """

    method: str
    path: str
    watch: bool
    action: FaultAction
    delay: float = 0.0
    code: int | None = None
    watch_cut_after: float | None = None
    watch_expire: bool = False


def exempt_leases_and_discovery(method: str, path: str) -> bool:
    """An :attr:`FaultPlan.exempt` for coordination.k8s.io (leases) and discovery paths:
    ``/api``, ``/apis``, group and group-version documents, ``/version``, ``/openapi``.

    Leader election then never loses its lease to an injected fault, and discovery (which
    a fault would only turn into a failed start) stays reliable.
    """
    del method  # every verb on these paths is exempt
    if path.startswith(("/apis/coordination.k8s.io/", "/openapi")):
        return True
    segments = [s for s in path.split("/") if s]
    if segments in ([], ["version"]):
        return True
    # Below these lengths a path names a discovery document, not a resource.
    head = segments[0]
    return (head == "api" and len(segments) <= 2) or (head == "apis" and len(segments) <= 3)


@attrs.frozen
class _Upstream:
    """Where and how the proxy reaches the API server."""

    base: str
    ssl_context: ssl.SSLContext | None
    server_hostname: str | None
    #: kubernetes-asyncio's Configuration: bearer tokens come from its auth_settings().
    configuration: Any
    #: The proxy authenticates itself (token or client certificate): callers' Authorization
    #: headers are dropped.
    own_credentials: bool
    #: The kubeconfig's user entry and context namespace, copied into the proxy's kubeconfig.
    user: dict[str, Any]
    namespace: str | None


async def _load_upstream(path: Path) -> _Upstream:
    creds = await load_kubeconfig(str(path))
    cfg = creds.configuration
    base = str(cfg.host).rstrip("/")
    ctx: ssl.SSLContext | None = None
    if base.startswith("https://"):
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        if not cfg.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    user, namespace = _user_entry(path)
    token = "BearerToken" in cfg.api_key
    return _Upstream(base=base, ssl_context=ctx,
                     server_hostname=getattr(cfg, "tls_server_name", None) or None,
                     configuration=cfg, own_credentials=token or bool(cfg.cert_file),
                     user=user, namespace=namespace)


def _user_entry(path: Path) -> tuple[dict[str, Any], str | None]:
    """The current context's user entry (file paths made absolute) and namespace."""
    doc = yaml.safe_load(path.read_text()) or {}

    def named(section: str, name: Any) -> dict[str, Any]:
        for entry in doc.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                value = entry.get(section[:-1])
                return dict(value) if isinstance(value, dict) else {}
        return {}

    context = named("contexts", doc.get("current-context"))
    user = named("users", context.get("user"))
    # A kubeconfig's relative paths are relative to its own directory.
    for key in ("client-certificate", "client-key", "tokenFile"):
        value = user.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value):
            user[key] = str((path.parent / value).resolve())
    namespace = context.get("namespace")
    return user, namespace if isinstance(namespace, str) and namespace else None


def _status(err: errors.ApiError) -> dict[str, Any]:
    body = err.to_status()
    body["code"] = err.code
    return body


def _json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _object_of(method: str, path: str, body: bytes) -> tuple[str, str, str]:
    """``(resource, group, name)`` a request addresses (the name of a create is in its body)."""
    segments = [unquote(s) for s in path.split("/") if s]
    group, rest = "", segments[2:]
    if segments[:1] == ["apis"]:
        group, rest = (segments[1] if len(segments) > 1 else ""), segments[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    if not name and method == "POST":
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            name = str(json.loads(body)["metadata"].get("name") or "")
    return resource, group, name


def _injected_error(code: int, method: str, path: str, body: bytes) -> web.Response:
    """The answer kube-apiserver would give for ``code``."""
    headers = {"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
    err: errors.ApiError
    if code == 409:
        resource, group, name = _object_of(method, path, body)
        err = errors.new_conflict(
            resource, name, "the object has been modified; please apply your changes to the "
            "latest version and try again", group)
    elif code == 429:
        # What the max-in-flight and priority-and-fairness filters answer.
        err = errors.TooManyRequests("Too many requests, please try again later.",
                                     details={"retryAfterSeconds": _RETRY_AFTER_SECONDS})
        headers["Retry-After"] = str(_RETRY_AFTER_SECONDS)
    else:
        cause = "fault injected by the test kit's proxy"
        err = errors.InternalError(f"Internal error occurred: {cause}",
                                   details={"causes": [{"message": cause}]})
    return web.Response(status=code, body=_json(_status(err)), headers=headers)


def _expired_event(requested: str, last_line: bytes) -> bytes:
    """The ``ERROR`` event the watch cache sends for a resourceVersion it no longer has."""
    current = requested
    with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
        rv = json.loads(last_line)["object"]["metadata"]["resourceVersion"]
        current = str(rv) or current
    err = errors.Gone(f"too old resource version: {requested or current} ({current})")
    return _json({"type": "ERROR", "object": _status(err)}) + b"\n"


def _hop_by_hop(headers: Any) -> set[str]:
    named = {h.strip().lower() for v in headers.getall("Connection", []) for h in v.split(",")}
    return set(_HOP_BY_HOP) | named


def _is_watch(request: web.Request) -> bool:
    return request.method == "GET" and request.query.get("watch") in ("true", "1")


class FaultProxy:
    """A reverse proxy on ``https://host:port`` to the API server of ``upstream_kubeconfig``
    that injects the faults of :attr:`plan` (see the module).

    :meth:`start` writes into ``directory`` a CA (``ca.crt``), the proxy's serving
    certificate (``tls.crt``/``tls.key``, for 127.0.0.1 and localhost) and
    :attr:`kubeconfig`: the proxy's URL and CA with the upstream kubeconfig's user entry
    (the proxy does not check credentials; it authenticates upstream with the upstream
    kubeconfig's own).

    :attr:`plan` may be replaced while running (that reseeds the random draws);
    ``enabled = False`` forwards everything untouched (requests are still counted).
    """

    def __init__(
        self,
        upstream_kubeconfig: str | os.PathLike[str],
        *,
        plan: FaultPlan | None = None,
        directory: str | os.PathLike[str],
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.upstream_kubeconfig = Path(upstream_kubeconfig)
        self.directory = Path(directory)
        self.host = host
        self._port = port
        #: The kubeconfig pointing at the proxy (written by :meth:`start`).
        self.kubeconfig = self.directory / "kubeconfig"
        #: False: forward everything untouched.
        self.enabled = True
        self.stats = FaultStats()
        #: The latest decisions, oldest first (up to 10,000).
        self.decisions: deque[FaultDecision] = deque(maxlen=_DECISION_LOG)
        self._plan = plan or FaultPlan()
        self._rng = random.Random(self._plan.seed)
        self._upstream: _Upstream | None = None
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._transports: set[asyncio.Transport] = set()

    # -- configuration ----------------------------------------------------------------

    @property
    def plan(self) -> FaultPlan:
        """What to inject; assigning a new plan reseeds the random draws with its seed."""
        return self._plan

    @plan.setter
    def plan(self, plan: FaultPlan) -> None:
        self._plan = plan
        self._rng = random.Random(plan.seed)

    @property
    def port(self) -> int:
        """The listening port (the chosen one after :meth:`start` when created with 0)."""
        return self._port

    @property
    def url(self) -> str:
        """``https://host:port``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self._port}"

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Load the upstream kubeconfig, write certificates and :attr:`kubeconfig`, listen."""
        if self._runner is not None:
            return
        upstream = await _load_upstream(self.upstream_kubeconfig)
        hosts = tuple(dict.fromkeys((*DEFAULT_HOSTS, self.host)))
        certs = await asyncio.to_thread(write_serving_certs, self.directory, hosts)
        server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ctx.load_cert_chain(certs.cert_file, certs.key_file)
        # No per-host limit: every watch holds an upstream connection for its lifetime.
        connector = aiohttp.TCPConnector(ssl=upstream.ssl_context or False, limit=0)
        self._session = aiohttp.ClientSession(
            connector=connector, trust_env=False, auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0))
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5,
                               access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._port, ssl_context=server_ctx)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            await self._session.close()
            raise
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self._port = int(sockets[0].getsockname()[1])
        self._upstream = upstream
        self._runner = runner
        self._write_kubeconfig(certs.ca.cert_pem)
        log.info("fault proxy %s -> %s", self.url, upstream.base)

    async def stop(self) -> None:
        """Cut every connection, stop listening and close the upstream session. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            self._abort_all()
            await runner.cleanup()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    def cut_all(self) -> int:
        """Abort every open client connection now (watches and idle keep-alive connections
        included); returns how many were cut."""
        cut = self._abort_all()
        self.stats.manual_cuts += cut
        return cut

    def _write_kubeconfig(self, ca_pem: bytes) -> None:
        context: dict[str, Any] = {"cluster": "faultproxy", "user": "faultproxy"}
        if self._upstream is not None and self._upstream.namespace:
            context["namespace"] = self._upstream.namespace
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "faultproxy", "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
            "users": [{"name": "faultproxy",
                       "user": self._upstream.user if self._upstream is not None else {}}],
            "contexts": [{"name": "faultproxy", "context": context}],
            "current-context": "faultproxy",
            "preferences": {},
        }
        tmp = self.kubeconfig.with_name(f".{self.kubeconfig.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(yaml.safe_dump(doc, sort_keys=False))
        os.replace(tmp, self.kubeconfig)

    # -- decisions --------------------------------------------------------------------

    def _decide(self, method: str, path: str, watch: bool) -> FaultDecision:
        """Draw this request's faults. Synchronous, so decisions follow arrival order."""
        plan = self._plan
        if not self.enabled or (plan.exempt is not None and plan.exempt(method, path)):
            return FaultDecision(method=method, path=path, watch=watch, action="pass")
        rng = self._rng
        delay = 0.0
        if plan.delay_rate > 0 and rng.random() < plan.delay_rate:
            delay = rng.uniform(0.0, plan.max_delay)
        if watch:
            cut_after: float | None = None
            expire = False
            if plan.watch_cut_after is not None:
                cut_after = rng.uniform(*plan.watch_cut_after)
                expire = plan.watch_expire_rate > 0 and rng.random() < plan.watch_expire_rate
            return FaultDecision(method=method, path=path, watch=True, action="forward",
                                 delay=delay, watch_cut_after=cut_after, watch_expire=expire)
        action: FaultAction = "forward"
        code: int | None = None
        if plan.error_rate > 0 or plan.cut_rate > 0:
            draw = rng.random()
            if draw < plan.error_rate:
                codes = [c for c in plan.error_codes if c != 409 or method in _WRITES]
                if codes:
                    action, code = "error", rng.choice(codes)
            elif draw < plan.error_rate + plan.cut_rate:
                action = "cut-before" if rng.random() < 0.5 else "cut-after"
        return FaultDecision(method=method, path=path, watch=False, action=action,
                             delay=delay, code=code)

    # -- connections ------------------------------------------------------------------

    def _track(self, transport: asyncio.Transport) -> None:
        self._transports = {t for t in self._transports if not t.is_closing()}
        self._transports.add(transport)

    def _abort_all(self) -> int:
        open_ = [t for t in self._transports if not t.is_closing()]
        self._transports.clear()
        for transport in open_:
            _abort(transport)
        return len(open_)

    # -- forwarding -------------------------------------------------------------------

    def _upstream_headers(self, request: web.Request, *, watch: bool) -> CIMultiDict[str]:
        assert self._upstream is not None
        drop = _hop_by_hop(request.headers) | {"host", "content-length"}
        if self._upstream.own_credentials:
            drop.add("authorization")
        if watch:
            drop.add("accept-encoding")  # a compressed stream could not be split into lines
        headers = CIMultiDict((k, v) for k, v in request.headers.items()
                              if k.lower() not in drop)
        if watch:
            headers["Accept-Encoding"] = "identity"
        return headers

    async def _send(self, request: web.Request, body: bytes, *,
                    watch: bool) -> aiohttp.ClientResponse:
        assert self._upstream is not None and self._session is not None
        headers = self._upstream_headers(request, watch=watch)
        settings = await self._upstream.configuration.auth_settings()
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        url = URL(self._upstream.base + request.rel_url.raw_path_qs, encoded=True)
        extra: dict[str, Any] = {}
        if self._upstream.server_hostname:
            extra["server_hostname"] = self._upstream.server_hostname
        # skip_auto_headers: a caller that sent no User-Agent must not get aiohttp's.
        return await self._session.request(
            request.method, url, data=body if body else None, headers=headers,
            allow_redirects=False, skip_auto_headers=("User-Agent",), **extra)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        transport = request.transport
        if isinstance(transport, asyncio.Transport):
            self._track(transport)
        watch = _is_watch(request)
        self.stats.requests += 1
        if watch:
            self.stats.watches += 1
        decision = self._decide(request.method, request.path, watch)
        self.decisions.append(decision)
        body = await request.read()
        if decision.delay > 0:
            self.stats.delayed += 1
            await asyncio.sleep(decision.delay)
        if decision.action == "error":
            assert decision.code is not None
            self.stats.errors[decision.code] = self.stats.errors.get(decision.code, 0) + 1
            log.debug("%s %s: injected %d", request.method, request.path, decision.code)
            return _injected_error(decision.code, request.method, request.path, body)
        if decision.action == "cut-before":
            self.stats.connections_cut += 1
            log.debug("%s %s: cut before forwarding", request.method, request.path)
            return _cut(request)
        if watch:
            return await self._forward_watch(request, decision, body)
        try:
            upstream = await self._send(request, body, watch=False)
            async with upstream:
                payload = await upstream.read()
        except (aiohttp.ClientError, OSError) as exc:
            self.stats.upstream_errors += 1
            log.warning("%s %s: upstream failed: %s", request.method, request.path, exc)
            return _cut(request)
        if decision.action == "cut-after":
            self.stats.connections_cut += 1
            self.stats.cut_after_forward += 1
            log.debug("%s %s: cut after forwarding (HTTP %d upstream)", request.method,
                      request.path, upstream.status)
            return _cut(request)
        return web.Response(status=upstream.status, body=payload,
                            headers=_downstream_headers(upstream))

    async def _forward_watch(self, request: web.Request, decision: FaultDecision,
                             body: bytes) -> web.StreamResponse:
        try:
            upstream = await self._send(request, body, watch=True)
        except (aiohttp.ClientError, OSError) as exc:
            self.stats.upstream_errors += 1
            log.warning("watch %s: upstream failed: %s", request.path_qs, exc)
            return _cut(request)
        finished = False
        try:
            if upstream.status != 200:  # refused before streaming: an ordinary answer
                payload = await upstream.read()
                finished = True
                return web.Response(status=upstream.status, body=payload,
                                    headers=_downstream_headers(upstream))
            resp = web.StreamResponse(status=upstream.status,
                                      headers=_downstream_headers(upstream))
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            deadline = None
            if decision.watch_cut_after is not None:
                deadline = asyncio.get_running_loop().time() + decision.watch_cut_after
            buf = bytearray()
            last = b""
            try:
                async with asyncio.timeout_at(deadline):
                    while chunk := await upstream.content.readany():
                        buf.extend(chunk)
                        end = buf.rfind(b"\n") + 1
                        if end:
                            # Whole lines only, so a cut or an injected event never splits one.
                            lines = bytes(buf[:end])
                            del buf[:end]
                            last = lines
                            await resp.write(lines)
                    finished = True
                    if buf:
                        await resp.write(bytes(buf))
            except TimeoutError:
                if decision.watch_expire:
                    self.stats.watches_expired += 1
                    requested = request.query.get("resourceVersion", "")
                    tail = last.rstrip(b"\n").rsplit(b"\n", 1)[-1]
                    log.debug("watch %s: expired after %.1fs", request.path_qs,
                              decision.watch_cut_after)
                    await resp.write(_expired_event(requested, tail))
                    await resp.write_eof()
                    return resp
                self.stats.watches_cut += 1
                log.debug("watch %s: cut after %.1fs", request.path_qs,
                          decision.watch_cut_after)
                _cut(request)
                return resp
            except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
                self.stats.upstream_errors += 1
                log.info("watch %s: upstream stream broke: %s", request.path_qs, exc)
                _cut(request)
                return resp
            await resp.write_eof()
            return resp
        except ConnectionError:  # the client went away
            return web.Response()
        finally:
            if finished:
                upstream.release()
            else:
                upstream.close()  # drop the upstream connection with the stream


def _downstream_headers(upstream: aiohttp.ClientResponse) -> CIMultiDict[str]:
    drop = _hop_by_hop(upstream.headers) | {"content-length"}
    return CIMultiDict((k, v) for k, v in upstream.headers.items() if k.lower() not in drop)


def _abort(transport: asyncio.BaseTransport) -> None:
    """Drop a connection the way a dead peer does: RST, no TLS close_notify."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if isinstance(transport, asyncio.Transport):
        transport.abort()
    else:
        transport.close()


def _cut(request: web.Request) -> web.StreamResponse:
    """Abort the request's connection; the returned response is never written."""
    if request.transport is not None:
        _abort(request.transport)
    return web.Response()


# ------------------------------------------------------------------------- process


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m jobframework.testing.faultproxy",
        description="Fault-injecting HTTPS proxy in front of a kube-apiserver.")
    p.add_argument("--kubeconfig", required=True, help="the upstream API server's kubeconfig")
    p.add_argument("--directory", required=True,
                   help="where to write the proxy's CA, certificate and kubeconfig")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--error-rate", type=float, default=0.0)
    p.add_argument("--error-codes", type=int, nargs="+", default=[409, 429, 500])
    p.add_argument("--delay-rate", type=float, default=0.0)
    p.add_argument("--max-delay", type=float, default=0.0)
    p.add_argument("--cut-rate", type=float, default=0.0)
    p.add_argument("--watch-cut-after", type=float, nargs=2, metavar=("A", "B"))
    p.add_argument("--watch-expire-rate", type=float, default=0.0)
    p.add_argument("--exempt-leases", action="store_true",
                   help="never fault coordination.k8s.io (leases) and discovery")
    p.add_argument("--stats-file", help="rewritten with the stats (JSON) every second")
    p.add_argument("--log-level", default="WARNING")
    return p


def _write_stats(path: Path, stats: FaultStats) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(stats.as_dict(), sort_keys=True) + "\n")
    os.replace(tmp, path)


async def _serve(args: argparse.Namespace, plan: FaultPlan) -> int:
    stats_file = Path(args.stats_file) if args.stats_file else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with FaultProxy(args.kubeconfig, plan=plan, directory=args.directory,
                          host=args.host, port=args.port) as proxy:
        print(f"ready {proxy.url} {proxy.kubeconfig}", flush=True)
        while not stop.is_set():
            if stats_file is not None:
                _write_stats(stats_file, proxy.stats)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
        if stats_file is not None:
            _write_stats(stats_file, proxy.stats)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the proxy until SIGTERM/SIGINT (see the module); returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        plan = FaultPlan(
            seed=args.seed, error_rate=args.error_rate, error_codes=tuple(args.error_codes),
            delay_rate=args.delay_rate, max_delay=args.max_delay, cut_rate=args.cut_rate,
            watch_cut_after=args.watch_cut_after, watch_expire_rate=args.watch_expire_rate,
            exempt=exempt_leases_and_discovery if args.exempt_leases else None)
    except ValueError as exc:
        print(f"faultproxy: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_serve(args, plan))


if __name__ == "__main__":
    sys.exit(main())
