"""The real client: the Kubernetes REST API over kubernetes-asyncio's aiohttp transport.

kubernetes-asyncio is used for two things only: loading credentials (see
:mod:`.config`) and the ``aiohttp.ClientSession`` its ``ApiClient`` builds (TLS context
with the cluster CA and client certificate, proxy, connection pool, a read buffer big
enough for large watch events). Requests are sent on that session directly rather than
through ``ApiClient.call_api``: ``call_api`` always deserializes into generated models or
raises ``ApiException`` with the body as text, neither of which we want on hot paths, and
its ``rest_client.request`` cannot send a request without a body-shaped ``Content-Type``
or give a streaming response a per-read inactivity timeout. Bearer tokens still come from
``Configuration.auth_settings()``, so kubernetes-asyncio's token refresh hooks keep working.

That session trusts the environment (``trust_env``): on *every* request aiohttp looks up
``~/.netrc`` and the ``*_PROXY`` variables, each in a worker thread, two thread hand-offs
per request. A client that owns its ``ApiClient`` looks both up once, on its first
request, and sends on a session of its own sharing the connection pool (and cookies)
with the proxy and netrc credentials it found passed explicitly: the same requests, as
client-go does it (it reads the proxy variables once per process too).

Objects go over the wire as raw JSON dicts; errors come back as the typed
:mod:`~jobframework.runtime.errors` parsed from the server's ``Status`` body.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any
from urllib.parse import quote

import aiohttp
import attrs
from aiohttp.helpers import basicauth_from_netrc, get_env_proxy_for_url, netrc_from_env
from yarl import URL

from .. import errors, wirejson
from ..clock import Clock, RealClock
from ..objects import GVK, Object, metadata, name_of, namespace_of
from .config import Credentials, load_auto, load_in_cluster, load_kubeconfig
from .discovery import DiscoveryRESTMapper
from .interface import (
    FieldSel,
    ObjectList,
    PatchType,
    Preconditions,
    PropagationPolicy,
    RESTMapper,
    RESTMapping,
    Selector,
    WatchEvent,
)

log = logging.getLogger(__name__)

_JSON = "application/json"
_WATCH_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


@attrs.frozen
class RateLimit:
    """Client-side token bucket: ``qps`` sustained requests per second, bursts of ``burst``.

    Off by default: API Priority and Fairness protects the server, and client-side throttling
    mostly delays controllers. client-go's historical defaults are
    :data:`CLIENT_GO_DEFAULT_RATE_LIMIT` (5 qps, burst 10).
    """

    qps: float
    burst: int

    def __attrs_post_init__(self) -> None:
        if self.qps <= 0 or self.burst < 1:
            raise ValueError("RateLimit needs qps > 0 and burst >= 1")


#: client-go's ``rest.Config`` defaults when QPS/Burst are left zero.
CLIENT_GO_DEFAULT_RATE_LIMIT = RateLimit(qps=5.0, burst=10)


@attrs.frozen
class Timeouts:
    """Client-side timeouts in seconds (None disables one).

    ``connect``: TCP+TLS connection setup. ``read``: a non-watch response that delivers no
    bytes for this long fails with ``TimeoutError`` (a per-read bound, so a large list
    that keeps streaming is never cut). ``total``: an optional bound on a whole non-watch
    request (off, as in client-go). ``watch_inactivity``: a watch stream that delivers
    nothing (no event, no bookmark) for this long is closed and ends like a server-side
    close, so the caller re-watches from its last resourceVersion instead of hanging on a
    half-open connection (kopf's zombie-watch lesson). Keep it above the server's
    bookmark interval (about a minute).
    """

    connect: float | None = 10.0
    read: float | None = 60.0
    total: float | None = None
    watch_inactivity: float | None = 300.0


class TokenBucket:
    """A reservation-style token bucket (as ``golang.org/x/time/rate``) on an injectable clock."""

    def __init__(self, limit: RateLimit, clock: Clock) -> None:
        self._qps = limit.qps
        self._burst = float(limit.burst)
        self._clock = clock
        self._tokens = float(limit.burst)
        self._last = clock.monotonic()

    async def acquire(self) -> None:
        """Take one token, sleeping until it is available."""
        now = self._clock.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        # Reserve first (no await in between, so callers are served in arrival order).
        self._tokens -= 1
        if self._tokens < 0:
            try:
                await self._clock.sleep(-self._tokens / self._qps)
            except asyncio.CancelledError:
                self._tokens += 1  # give the unused reservation back
                raise


# Messages client-go uses when an error response carries no Status body.
_GENERIC_MESSAGES = {
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    403: "the server does not allow access to the requested resource",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    409: "the server reported a conflict",
    410: "the server has asked us to try again later",
    422: "the server rejected our request due to an error in our request",
    429: "the server has received too many requests and has asked us to try again later",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, "
         "but may still be processing the request",
}


def error_from_response(code: int, body: bytes) -> errors.ApiError:
    """The typed error for an HTTP error response: its ``Status`` body, else one built from
    the code (the body text becomes an ``UnexpectedServerResponse`` cause, as in client-go)."""
    parsed: Any = None
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("kind") == "Status":
        return errors.from_status(parsed, code)
    text = body.decode("utf-8", errors="replace").strip()
    if code in _GENERIC_MESSAGES:
        message = _GENERIC_MESSAGES[code]
    elif code >= 500:
        message = f"an error on the server ({text[:200]!r}) has prevented the request " \
                  "from succeeding"
    else:
        message = f"the server responded with the status code {code} but did not return " \
                  "more information"
    status: dict[str, Any] = {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "", "code": code,
    }
    if text:
        status["details"] = {"causes": [{"reason": "UnexpectedServerResponse", "message": text}]}
    return errors.from_status(status, code)


def resource_path(
    mapping: RESTMapping,
    *,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The URL path of a collection, an object, or an object's subresource.

    ``/api/v1`` for the core group, ``/apis/<group>/<version>`` otherwise;
    ``/namespaces/<ns>`` only for namespaced kinds (a namespace given for a cluster-scoped
    kind is ignored, as controller-runtime does). A namespaced kind without a namespace
    addresses the all-namespaces collection, which only list and watch accept.
    """
    gvr = mapping.resource
    parts = ["/api/v1"] if not gvr.group else [f"/apis/{gvr.group}/{gvr.version}"]
    if mapping.namespaced and namespace:
        parts.append(f"/namespaces/{quote(namespace, safe='')}")
    parts.append(f"/{gvr.resource}")
    if name is not None:
        if not name:
            raise errors.BadRequest("resource name may not be empty")
        parts.append(f"/{quote(name, safe='')}")
        if subresource:
            parts.append(f"/{subresource}")
    elif subresource:
        raise ValueError("a subresource needs an object name")
    return "".join(parts)


def _selector(value: Selector | FieldSel) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text or None


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _write_query(field_manager: str | None, dry_run: bool) -> list[tuple[str, str]]:
    query: list[tuple[str, str]] = []
    if field_manager:
        query.append(("fieldManager", field_manager))
    if dry_run:
        query.append(("dryRun", "All"))
    return query


def _encode_body(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return wirejson.dumps(body)


#: The read buffer of kubernetes-asyncio's session: a watch event can be close to etcd's
#: 1.5 MiB limit.
_READ_BUFSIZE = 2**21


@attrs.frozen
class _Transport:
    """The session requests go on, and the keywords every request gets."""

    session: aiohttp.ClientSession
    extra: dict[str, Any]
    #: Ours to close (the connection pool stays the ApiClient's).
    owned: bool
    #: Basic credentials for the server's host in ~/.netrc, sent as aiohttp's trust_env
    #: sends them: on requests without an Authorization header of their own.
    netrc_authorization: str | None = None

    async def close(self) -> None:
        if self.owned:
            await self.session.close()


def _netrc_auth(host: str) -> str | None:
    # The Authorization header aiohttp's trust_env adds from ~/.netrc (or $NETRC).
    try:
        return str(basicauth_from_netrc(netrc_from_env(), host).encode())
    except LookupError:
        return None


def _ensure_type_meta(obj: Object, gvk: GVK) -> Object:
    # Built-in kinds' list items come back without apiVersion/kind; unstructured callers
    # (and GVK.of) need them, so fill them in as client-go's unstructured decoder does.
    obj.setdefault("apiVersion", gvk.api_version)
    obj.setdefault("kind", gvk.kind)
    return obj


class _ReadDeadline:
    """Closes a watch response once one read has waited ``seconds`` for data.

    What ``asyncio.timeout`` around each read does, with one timer per stream that is
    re-armed only when it fires: a busy stream's reads then cost no timer operations (a
    timeout context per read was 1.5 % of the manager's CPU on the real control plane).
    """

    def __init__(self, resp: aiohttp.ClientResponse, seconds: float,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        #: When the read in progress started waiting (None between reads).
        self.waiting_since: float | None = None
        #: Set when the deadline closed the response.
        self.expired = False
        self._resp = resp
        self._seconds = seconds
        self._when = loop.time() + seconds
        self._handle = loop.call_at(self._when, self._fire)

    def _fire(self) -> None:
        if self._resp.closed:
            return
        since = self.waiting_since
        # Expired if the read in progress began no later than this timer's arming allows,
        # so a timer that fires early (within the loop's clock resolution, as asyncio's
        # own timeouts may) still counts, and a read begun since does not.
        if since is not None and since + self._seconds <= self._when:
            self.expired = True
            self._resp.close()
            return
        self._when = (since if since is not None else self.loop.time()) + self._seconds
        self._handle = self.loop.call_at(self._when, self._fire)

    def cancel(self) -> None:
        self._handle.cancel()


class RestClient:
    """A :class:`~jobframework.runtime.client.Client` for a real API server.

    Build one with :meth:`from_kubeconfig`, :meth:`in_cluster` or :meth:`auto` (they own
    their ``ApiClient`` and close it), or wrap a kubernetes-asyncio ``ApiClient`` you built
    yourself with ``RestClient(api_client)`` (you keep ownership unless ``owns_api_client``).
    Use it as an async context manager or call :meth:`close`.

    GVK→resource mapping comes from discovery (:class:`DiscoveryRESTMapper`), cached.
    Requests that the server answers with ``429`` or ``5xx`` plus ``Retry-After`` are retried
    up to ``max_retries`` times after the advised delay, as client-go does; a ``401`` makes
    the client reload refreshable credentials once and retry.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        rate_limit: RateLimit | None = None,
        timeouts: Timeouts | None = None,
        clock: Clock | None = None,
        credentials: Credentials | None = None,
        max_retries: int = 10,
        user_agent: str = "kueue-jobframework",
        owns_api_client: bool = False,
        rest_mapper: RESTMapper | None = None,
    ) -> None:
        self._api = api_client
        self._cfg = api_client.configuration
        self._base = str(self._cfg.host).rstrip("/")
        self._clock: Clock = clock or RealClock()
        self._bucket = TokenBucket(rate_limit, self._clock) if rate_limit else None
        self._timeouts = timeouts or Timeouts()
        self._credentials = credentials
        self._max_retries = max_retries
        self._user_agent = user_agent
        self._owns = owns_api_client
        self._mapper: RESTMapper = rest_mapper or DiscoveryRESTMapper(self)
        self._closed = False
        t = self._timeouts
        # Watches bound each read themselves (watch_inactivity), so no socket read timeout.
        self._request_timeout = aiohttp.ClientTimeout(total=t.total, sock_connect=t.connect,
                                                      sock_read=t.read)
        self._watch_timeout = aiohttp.ClientTimeout(total=None, sock_connect=t.connect,
                                                    sock_read=None)
        self._transport: asyncio.Future[_Transport] | None = None

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def _from_credentials(cls, creds: Credentials, **options: Any) -> RestClient:
        from kubernetes_asyncio.client import ApiClient

        return cls(ApiClient(configuration=creds.configuration), credentials=creds,
                   owns_api_client=True, **options)

    @classmethod
    async def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None, **options: Any
    ) -> RestClient:
        """A client from a kubeconfig (``$KUBECONFIG`` / ``~/.kube/config`` by default)."""
        return cls._from_credentials(await load_kubeconfig(path, context), **options)

    @classmethod
    async def in_cluster(cls, **options: Any) -> RestClient:
        """A client using the pod's service account."""
        return cls._from_credentials(load_in_cluster(), **options)

    @classmethod
    async def auto(cls, **options: Any) -> RestClient:
        """``$KUBECONFIG``, else in-cluster, else ``~/.kube/config`` (controller-runtime order)."""
        return cls._from_credentials(await load_auto(), **options)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        token: str | None = None,
        ca_file: str | None = None,
        verify_ssl: bool = True,
        **options: Any,
    ) -> RestClient:
        """A client for an explicit server URL (``kubectl proxy``, a test server), with an
        optional static bearer token and CA bundle."""
        from kubernetes_asyncio.client import ApiClient, Configuration

        cfg = type.__call__(Configuration)  # not the process-global default
        cfg.host = url
        cfg.verify_ssl = verify_ssl
        if ca_file:
            cfg.ssl_ca_cert = ca_file
        if token:
            cfg.api_key["BearerToken"] = token
            cfg.api_key_prefix["BearerToken"] = "Bearer"
        return cls(ApiClient(configuration=cfg), owns_api_client=True, **options)

    async def close(self) -> None:
        """Close the transport if this client owns it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        transport, self._transport = self._transport, None
        if transport is not None:
            if not transport.done():
                transport.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await transport
            elif not transport.cancelled() and transport.exception() is None:
                await transport.result().close()
        if self._owns:
            await self._api.close()

    async def __aenter__(self) -> RestClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def rest_mapper(self) -> RESTMapper:
        """The discovery-backed kind→resource mapper."""
        return self._mapper

    @property
    def host(self) -> str:
        """The API server's base URL."""
        return self._base

    # -- transport ------------------------------------------------------------------------

    async def _headers(self, content_type: str | None, accept: str) -> dict[str, str]:
        # The ApiClient's default headers carry its generated User-Agent; ours wins, so
        # managedFields and audit logs name this library (pass ``user_agent`` to change it).
        headers: dict[str, str] = dict(getattr(self._api, "default_headers", None) or {})
        headers["Accept"] = accept
        headers["User-Agent"] = self._user_agent
        if content_type:
            headers["Content-Type"] = content_type
        if self._credentials is not None:
            await self._credentials.refresh_if_expired()
        # auth_settings() runs the configuration's refresh hook (rotating SA tokens).
        settings = await self._cfg.auth_settings()
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        return headers

    async def _session(self) -> _Transport:
        transport = self._transport
        if transport is None:
            transport = self._transport = asyncio.ensure_future(self._new_transport())
        try:
            return await asyncio.shield(transport)
        except Exception:
            if transport.done() and self._transport is transport:
                self._transport = None  # the next request tries again
            raise

    async def _new_transport(self) -> _Transport:
        rest = self._api.rest_client
        session: aiohttp.ClientSession = rest.pool_manager
        extra: dict[str, Any] = {}
        if getattr(rest, "proxy", None):
            extra["proxy"] = rest.proxy
            if getattr(rest, "proxy_headers", None):
                extra["proxy_headers"] = rest.proxy_headers
        if getattr(rest, "server_hostname", None):
            extra["server_hostname"] = rest.server_hostname
        if not (self._owns and session.trust_env and session.connector is not None):
            return _Transport(session, extra, owned=False)
        # The environment, read once (aiohttp reads it on every request, see above).
        host = URL(self._base)
        if "proxy" not in extra:
            with contextlib.suppress(LookupError):
                proxy, proxy_auth = await asyncio.to_thread(get_env_proxy_for_url, host)
                extra["proxy"] = proxy
                extra["proxy_auth"] = proxy_auth
        netrc_auth = None
        if host.host is not None:
            netrc_auth = await asyncio.to_thread(_netrc_auth, host.host)
        lean = aiohttp.ClientSession(
            connector=session.connector, connector_owner=False, cookie_jar=session.cookie_jar,
            trust_env=False, read_bufsize=_READ_BUFSIZE)
        return _Transport(lean, extra, owned=True, netrc_authorization=netrc_auth)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        accept: str = _JSON,
        watch: bool = False,
    ) -> aiohttp.ClientResponse:
        if self._closed:
            raise RuntimeError("RestClient is closed")
        transport = await self._session()
        session = transport.session
        extra = transport.extra
        timeout = self._watch_timeout if watch else self._request_timeout
        retries = 0
        refreshed = False
        while True:
            if self._bucket is not None:
                await self._bucket.acquire()
            headers = await self._headers(content_type, accept)
            if transport.netrc_authorization is not None:
                if any(k.lower() == "authorization" for k in headers):
                    # What aiohttp says when trust_env finds netrc credentials too.
                    raise ValueError("Cannot combine AUTHORIZATION header with AUTH argument "
                                     "or credentials encoded in URL")
                headers["Authorization"] = transport.netrc_authorization
            resp = await session.request(
                method, self._base + path, params=query or None, data=body,
                headers=headers, timeout=timeout, **extra,
            )
            if resp.status == 401 and not refreshed and self._credentials is not None:
                refreshed = True
                if await self._credentials.refresh():
                    resp.release()
                    continue
            delay = self._retry_after(resp)
            if delay is not None and retries < self._max_retries:
                retries += 1
                resp.release()
                log.debug("%s %s: HTTP %d, retrying in %.1fs", method, path, resp.status, delay)
                await self._clock.sleep(delay)
                continue
            return resp

    @staticmethod
    def _retry_after(resp: aiohttp.ClientResponse) -> float | None:
        # client-go's checkWait: only 429 and 500..504, and only with an integral Retry-After.
        if resp.status != 429 and not 500 <= resp.status <= 504:
            return None
        value = resp.headers.get("Retry-After")
        if value is None:
            return None
        try:
            return float(max(0, int(value.strip())))
        except ValueError:
            return None

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        accept: str = _JSON,
    ) -> Any:
        """Send one request and return its decoded JSON body (None if empty).

        The raw escape hatch for endpoints the :class:`Client` protocol does not cover
        (discovery, ``/version``, custom subresources). Error responses raise typed
        :class:`~jobframework.runtime.errors.ApiError`.
        """
        data = None if body is None else _encode_body(body)
        if data is not None and content_type is None:
            content_type = _JSON
        raw = await self._exchange(method, path, query, data, content_type, accept)
        return wirejson.loads(raw) if raw else None

    async def request_bytes(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        accept: str = "*/*",
    ) -> bytes:
        """:meth:`request_json` for endpoints that do not answer JSON (``/metrics``, a
        pod's ``log``): the body as received (``kubectl get --raw``). ``body`` is sent as
        JSON unless it is ``bytes``."""
        data = None if body is None else _encode_body(body)
        if data is not None and content_type is None and not isinstance(body, bytes):
            content_type = _JSON
        return await self._exchange(method, path, query, data, content_type, accept)

    async def _exchange(self, method: str, path: str, query: list[tuple[str, str]] | None,
                        data: bytes | None, content_type: str | None, accept: str) -> bytes:
        # One request, its whole body read; an error answer raises its typed ApiError.
        resp = await self._send(method, path, query=query, body=data,
                                content_type=content_type, accept=accept)
        async with resp:
            raw = await resp.read()
            if resp.status >= 400:
                raise error_from_response(resp.status, raw)
        return raw

    async def _mapping(self, gvk: GVK) -> RESTMapping:
        return await self._mapper.rest_mapping(gvk)

    @staticmethod
    def _named_namespace(mapping: RESTMapping, namespace: str | None, name: str,
                         *, creating: bool = False) -> str | None:
        # A namespaced object outside any namespace has no URL; answer as the in-memory
        # server does (and as the apiserver's 404 for such a path): BadRequest on create,
        # NotFound otherwise, without a round trip.
        if not mapping.namespaced:
            return None
        if namespace:
            return namespace
        gvr = mapping.resource
        if creating:
            raise errors.BadRequest("the object has no metadata.namespace; namespaced kinds "
                                    "must be created in a namespace")
        raise errors.new_not_found(gvr.resource, name, gvr.group)

    # -- Reader ---------------------------------------------------------------------------

    async def get(self, gvk: GVK, name: str, *, namespace: str | None = None) -> Object:
        """GET one object."""
        m = await self._mapping(gvk)
        path = resource_path(m, namespace=self._named_namespace(m, namespace, name), name=name)
        obj: Object = await self.request_json("GET", path)
        return _ensure_type_meta(obj, gvk)

    async def list(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
    ) -> ObjectList:
        """GET the collection (every namespace when ``namespace`` is None), unpaginated."""
        m = await self._mapping(gvk)
        query: list[tuple[str, str]] = []
        if (ls := _selector(label_selector)) is not None:
            query.append(("labelSelector", ls))
        if (fs := _selector(field_selector)) is not None:
            query.append(("fieldSelector", fs))
        body = await self.request_json("GET", resource_path(m, namespace=namespace), query=query)
        meta = body.get("metadata") or {}
        items = [_ensure_type_meta(item, gvk) for item in body.get("items") or []]
        return ObjectList(items=items, resource_version=str(meta.get("resourceVersion") or ""),
                          continue_token=meta.get("continue") or None)

    # -- watch ----------------------------------------------------------------------------

    async def watch(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: FieldSel = None,
        resource_version: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Stream watch events (newline-delimited JSON) until the server closes the stream.

        An ``ERROR`` event raises the typed error of its ``Status`` (``Gone`` for an expired
        resourceVersion); so does an HTTP error answer. A stream silent for longer than
        ``Timeouts.watch_inactivity`` is closed and the iterator ends. Close the iterator
        (``aclose()`` or ``contextlib.aclosing``) when you stop early, to free the connection.
        """
        m = await self._mapping(gvk)
        query: list[tuple[str, str]] = [("watch", "true")]
        if (ls := _selector(label_selector)) is not None:
            query.append(("labelSelector", ls))
        if (fs := _selector(field_selector)) is not None:
            query.append(("fieldSelector", fs))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if timeout_seconds is not None:
            query.append(("timeoutSeconds", str(int(timeout_seconds))))
        resp = await self._send("GET", resource_path(m, namespace=namespace), query=query,
                                watch=True)
        try:
            if resp.status >= 400:
                raise error_from_response(resp.status, await resp.read())
            async for line in self._lines(resp):
                event = self._decode_event(line)
                if event is None:
                    continue
                if event.type != "BOOKMARK":
                    _ensure_type_meta(event.object, gvk)
                yield event
        finally:
            resp.close()

    async def _lines(self, resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
        # Split on newlines ourselves: StreamReader.readline() caps line length, and one watch
        # event can hold an object close to etcd's 1.5 MiB limit.
        inactivity = self._timeouts.watch_inactivity
        deadline = (None if inactivity is None
                    else _ReadDeadline(resp, inactivity, asyncio.get_running_loop()))
        buf = bytearray()
        try:
            while True:
                if deadline is not None:
                    deadline.waiting_since = deadline.loop.time()
                try:
                    chunk = await resp.content.readany()
                except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
                    if deadline is not None and deadline.expired:
                        chunk = b""
                    else:
                        # A broken stream ends like a closed one: the caller re-watches
                        # from its last RV.
                        log.info("watch %s: stream broken: %s", resp.url, exc)
                        return
                if deadline is not None:
                    if deadline.expired:
                        log.warning("watch %s: no data for %ss, closing the stream",
                                    resp.url, inactivity)
                        return
                    deadline.waiting_since = None
                if not chunk:
                    if buf.strip():
                        yield bytes(buf)
                    return
                buf.extend(chunk)
                while (i := buf.find(b"\n")) >= 0:
                    line = bytes(buf[:i])
                    del buf[: i + 1]
                    if line.strip():
                        yield line
        finally:
            if deadline is not None:
                deadline.cancel()

    @staticmethod
    def _decode_event(line: bytes) -> WatchEvent | None:
        try:
            raw = wirejson.loads(line)
        except ValueError as exc:
            raise errors.InternalError(f"unable to decode watch event: {exc}") from exc
        etype = raw.get("type") if isinstance(raw, dict) else None
        obj = raw.get("object") if isinstance(raw, dict) else None
        if etype == "ERROR":
            status = obj if isinstance(obj, dict) else {}
            raise errors.from_status(status, int(status.get("code") or 500))
        if etype not in _WATCH_EVENT_TYPES or not isinstance(obj, dict):
            log.warning("ignoring unexpected watch event type %r", etype)
            return None
        return WatchEvent(type=etype, object=obj)

    # -- writes ---------------------------------------------------------------------------

    async def create(
        self, obj: Object, *, field_manager: str | None = None, dry_run: bool = False
    ) -> Object:
        """POST to the collection (``generateName`` is honoured by the server)."""
        gvk = GVK.of(obj)
        m = await self._mapping(gvk)
        ns = self._named_namespace(m, namespace_of(obj), name_of(obj), creating=True)
        out: Object = await self.request_json(
            "POST", resource_path(m, namespace=ns), query=_write_query(field_manager, dry_run),
            body=obj,
        )
        return _ensure_type_meta(out, gvk)

    async def update(
        self,
        obj: Object,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> Object:
        """PUT the object (or one of its subresources); stale resourceVersion → ``Conflict``."""
        gvk = GVK.of(obj)
        m = await self._mapping(gvk)
        path = resource_path(m, namespace=self._named_namespace(m, namespace_of(obj), name_of(obj)),
                             name=name_of(obj), subresource=subresource)
        out: Object = await self.request_json(
            "PUT", path, query=_write_query(field_manager, dry_run), body=obj)
        return _ensure_type_meta(out, gvk)

    async def update_status(self, obj: Object, *, field_manager: str | None = None) -> Object:
        """PUT to the ``status`` subresource."""
        return await self.update(obj, subresource="status", field_manager=field_manager)

    async def patch(
        self,
        gvk: GVK,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
    ) -> Object:
        """PATCH with ``Content-Type`` set from ``patch_type``; ``patch`` is JSON-encoded
        unless already ``bytes``/``str`` (apply bodies are JSON, which is valid YAML)."""
        m = await self._mapping(gvk)
        path = resource_path(m, namespace=self._named_namespace(m, namespace, name), name=name,
                             subresource=subresource)
        query = _write_query(field_manager, dry_run)
        if force is not None:
            query.append(("force", _bool(force)))
        out: Object = await self.request_json(
            "PATCH", path, query=query, body=_encode_body(patch), content_type=str(patch_type))
        return _ensure_type_meta(out, gvk)

    async def apply(
        self,
        obj: Object,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
    ) -> Object:
        """Server-side apply: PATCH ``application/apply-patch+yaml`` with a field manager."""
        if not field_manager:
            raise ValueError("server-side apply needs a field manager")
        return await self.patch(
            GVK.of(obj), name_of(obj), obj, namespace=namespace_of(obj) or None,
            patch_type=PatchType.APPLY, subresource=subresource, field_manager=field_manager,
            force=force,
        )

    async def delete(
        self,
        gvk: GVK,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: PropagationPolicy | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> Object | None:
        """DELETE with a ``DeleteOptions`` body.

        Returns the object when it still exists afterwards (the server answered with the
        object and it carries ``deletionTimestamp``: finalizers or graceful deletion pending),
        else None (the server answered with a ``Status`` or the object's last state).
        """
        m = await self._mapping(gvk)
        path = resource_path(m, namespace=self._named_namespace(m, namespace, name), name=name)
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy is not None:
            options["propagationPolicy"] = str(propagation_policy)
        if preconditions is not None:
            pre: dict[str, str] = {}
            if preconditions.uid is not None:
                pre["uid"] = preconditions.uid
            if preconditions.resource_version is not None:
                pre["resourceVersion"] = preconditions.resource_version
            options["preconditions"] = pre
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            options["dryRun"] = ["All"]
        out = await self.request_json("DELETE", path, body=options)
        if not isinstance(out, dict) or out.get("kind") == "Status":
            return None
        if not metadata(out).get("deletionTimestamp"):
            return None
        return _ensure_type_meta(out, gvk)


__all__ = [
    "CLIENT_GO_DEFAULT_RATE_LIMIT",
    "RateLimit",
    "RestClient",
    "Timeouts",
    "TokenBucket",
    "error_from_response",
    "resource_path",
]
