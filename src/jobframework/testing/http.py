"""An HTTP front for the in-memory API server: the Kubernetes REST API on loopback.

It lets the real :class:`~jobframework.runtime.client.rest.RestClient` (URL building,
content types, Status parsing, watch streaming, discovery) be tested without a cluster,
and lets the client contract suite run a third backend: RestClient → HTTP → APIServer::

    server = APIServer()
    async with await serve_http(server) as front:
        async with front.client() as client:      # a RestClient
            await client.create({...})

What it serves, following kube-apiserver:

- discovery: ``/api``, ``/apis`` (classic documents, or aggregated
  ``apidiscovery.k8s.io/v2`` when the ``Accept`` header asks for it), ``/apis/<group>``,
  ``/api/v1`` and ``/apis/<group>/<version>`` resource lists, ``/version``;
- objects: GET (get, list, ``?watch=true``), POST, PUT, PATCH (by ``Content-Type``),
  DELETE with a ``DeleteOptions`` body or query; the ``status`` subresource;
- errors as ``Status`` bodies with their HTTP code;
- watch as chunked newline-delimited JSON. An error once the watch is established,
  including an expired resourceVersion, is sent as an ``ERROR`` event carrying the
  ``Status`` on a ``200`` stream, as the apiserver's watch cache does; errors found before
  (unknown resource, bad selector or resourceVersion, injected faults that fail at once)
  are plain HTTP errors.

Plain HTTP on ``127.0.0.1`` only; bearer tokens are optional (``tokens`` maps each accepted
token to the user the request acts as, which admission webhooks see).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import attrs
import yaml
from aiohttp import web

from ..runtime import errors
from ..runtime.client.interface import (
    PatchType,
    Preconditions,
    PropagationPolicy,
    RESTMapping,
    WatchEvent,
)
from ..runtime.objects import Object
from ..runtime.selectors import FieldSelector, LabelSelector
from ._registry import NoKindMatchError

if TYPE_CHECKING:
    from ..runtime.client.rest import RestClient
    from .server import APIServer

log = logging.getLogger(__name__)

_AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_SUB_VERBS = ["get", "patch", "update"]
_PATCH_TYPES = {t.value: t for t in PatchType}
_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _status_body(err: errors.ApiError) -> dict[str, Any]:
    body = dict(err.status)
    body.setdefault("kind", "Status")
    body.setdefault("apiVersion", "v1")
    body.setdefault("metadata", {})
    body["code"] = err.code
    return body


def _error_response(err: errors.ApiError) -> web.Response:
    headers = {}
    retry = err.details.get("retryAfterSeconds")
    if isinstance(retry, int) and retry > 0:
        headers["Retry-After"] = str(retry)  # as the apiserver's responsewriters do
    return web.json_response(_status_body(err), status=err.code, headers=headers)


def _not_found() -> errors.ApiError:
    return errors.NotFound("the server could not find the requested resource")


def _method_not_allowed() -> errors.ApiError:
    return errors.MethodNotAllowed(
        "the server does not allow this method on the requested resource")


@attrs.frozen
class _Target:
    """What a resource URL addresses."""

    mapping: RESTMapping
    namespace: str | None
    name: str | None
    subresource: str | None


class HTTPFront:
    """The REST API of an :class:`~jobframework.testing.APIServer` over loopback HTTP.

    Start it with :func:`serve_http` (or :meth:`start`); ``url`` is then the base URL.
    :meth:`close` (or leaving ``async with``) ends open watches and stops listening.
    ``aggregated_discovery=False`` makes it answer like a server that predates aggregated
    discovery.
    """

    def __init__(
        self,
        server: APIServer,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tokens: Mapping[str, str] | None = None,
        aggregated_discovery: bool = True,
    ) -> None:
        if host not in _LOOPBACK:
            raise ValueError("the HTTP front listens on loopback only")
        self.server = server
        self.host = host
        self.port = port
        self.tokens = dict(tokens) if tokens is not None else None
        self.aggregated_discovery = aggregated_discovery
        self._runner: web.AppRunner | None = None
        self._watches: set[asyncio.Task[Any]] = set()
        self.app = web.Application()
        self.app.router.add_route("*", "/{tail:.*}", self._handle)

    @property
    def url(self) -> str:
        """``http://host:port`` once started."""
        if self._runner is None:
            raise RuntimeError("the HTTP front is not started")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> HTTPFront:
        """Listen (on an ephemeral port when ``port`` is 0)."""
        runner = web.AppRunner(self.app, handler_cancellation=True, shutdown_timeout=0.5,
                               access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        self._runner = runner
        return self

    async def close(self) -> None:
        """End open watch streams and stop serving. Idempotent."""
        for task in list(self._watches):
            task.cancel()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> HTTPFront:
        if self._runner is None:
            await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def client(self, **options: Any) -> RestClient:
        """A :class:`RestClient` for this front (with the first token, if any)."""
        from ..runtime.client.rest import RestClient

        token = next(iter(self.tokens), None) if self.tokens else None
        return RestClient.from_url(self.url, token=token, **options)

    # ------------------------------------------------------------------ dispatch

    def _user(self, request: web.Request) -> str:
        if self.tokens is None:
            return "admin"
        auth = request.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or token.strip() not in self.tokens:
            raise errors.Unauthorized("Unauthorized")
        return self.tokens[token.strip()]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            user = self._user(request)
            segments = [unquote(s) for s in request.rel_url.raw_path.strip("/").split("/") if s]
            if request.method == "GET":
                doc = self._discovery(segments, request.headers.get("Accept", ""))
                if doc is not None:
                    body, content_type = doc
                    return web.Response(body=json.dumps(body).encode(),
                                        headers={"Content-Type": content_type})
            target = self._target(segments)
            return await self._dispatch(request, target, user)
        except errors.ApiError as err:
            return _error_response(err)
        except NoKindMatchError:  # the kind stopped being served mid-request
            return _error_response(_not_found())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in the server: report it like kube-apiserver would
            log.exception("HTTP front: %s %s failed", request.method, request.path)
            return _error_response(errors.InternalError(f"Internal error occurred: {exc}"))

    def _mappings(self) -> list[RESTMapping]:
        return self.server.resources()

    def _target(self, segs: list[str]) -> _Target:
        if len(segs) >= 3 and segs[0] == "api":
            group, version, rest = "", segs[1], segs[2:]
        elif len(segs) >= 4 and segs[0] == "apis":
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise _not_found()
        by_resource = {m.resource.resource: m for m in self._mappings()
                       if (m.resource.group, m.resource.version) == (group, version)}
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and \
                rest[2] in by_resource and by_resource[rest[2]].namespaced:
            namespace, rest = rest[1], rest[2:]
        mapping = by_resource.get(rest[0])
        if mapping is None or len(rest) > 3:
            raise _not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if mapping.namespaced and namespace is None and name is not None:
            raise _not_found()  # no such route: named namespaced objects live in a namespace
        if sub is not None and sub not in mapping.subresources:
            raise _not_found()
        return _Target(mapping, namespace, name, sub)

    async def _dispatch(self, request: web.Request, t: _Target, user: str) -> web.StreamResponse:
        client = self.server.client(user=user)
        q = request.query
        gvk = t.mapping.gvk
        method = request.method
        dry_run = _dry_run(q.getall("dryRun", []))
        field_manager = q.get("fieldManager") or None
        if t.name is None:
            if method == "GET" and q.get("watch") in ("true", "1"):
                return await self._watch(request, t, user)
            if method == "GET":
                out = await client.list(gvk, namespace=t.namespace,
                                        label_selector=_labels(q.get("labelSelector")),
                                        field_selector=_fields(q.get("fieldSelector")))
                meta: dict[str, Any] = {"resourceVersion": out.resource_version}
                if out.continue_token:
                    meta["continue"] = out.continue_token
                return web.json_response({"kind": f"{gvk.kind}List",
                                          "apiVersion": gvk.api_version, "metadata": meta,
                                          "items": out.items})
            if method == "POST" and (t.namespace is not None or not t.mapping.namespaced):
                obj = self._body_object(await _read_body(request), t)
                created = await client.create(obj, field_manager=field_manager, dry_run=dry_run)
                return web.json_response(created, status=201)
            raise _method_not_allowed()
        if method == "GET":
            return web.json_response(await client.get(gvk, t.name, namespace=t.namespace))
        if method == "PUT":
            obj = self._body_object(await _read_body(request), t, name=t.name)
            return web.json_response(await client.update(
                obj, subresource=t.subresource, field_manager=field_manager, dry_run=dry_run))
        if method == "PATCH":
            return web.json_response(await self._patch(request, t, client, field_manager,
                                                       dry_run))
        if method == "DELETE" and t.subresource is None:
            return web.json_response(await self._delete(request, t, client, dry_run))
        raise _method_not_allowed()

    def _body_object(self, raw: bytes, t: _Target, *, name: str | None = None) -> Object:
        obj = _decode(raw)
        if not isinstance(obj, dict):
            raise errors.BadRequest("the body of the request must be a JSON object")
        if name is not None:
            # handlers.checkName, for updates: the URL names the object.
            raw_meta = obj.get("metadata")
            meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
            if meta.get("name") != name:
                raise errors.BadRequest(
                    f"the name of the object ({meta.get('name') or ''}) does not match the "
                    f"name on the URL ({name})")
            if t.namespace and meta.get("namespace") and meta["namespace"] != t.namespace:
                raise errors.BadRequest(
                    f"the namespace of the object ({meta['namespace']}) does not match the "
                    f"namespace on the request ({t.namespace})")
        gvk = t.mapping.gvk
        # The apiserver decodes with the URL's kind as the default, and refuses another one.
        obj.setdefault("apiVersion", gvk.api_version)
        obj.setdefault("kind", gvk.kind)
        if (obj["apiVersion"], obj["kind"]) != (gvk.api_version, gvk.kind):
            raise errors.BadRequest(
                f"the API version in the data ({obj['apiVersion']}) does not match the "
                f"expected API version ({gvk.api_version})" if obj["apiVersion"] !=
                gvk.api_version else f"the kind in the data ({obj['kind']}) does not match "
                f"the expected kind ({gvk.kind})")
        body_meta = obj.setdefault("metadata", {})
        if not isinstance(body_meta, dict):
            raise errors.BadRequest("metadata must be an object")
        _ensure_namespace(body_meta, t.namespace or "")
        return obj

    async def _patch(
        self, request: web.Request, t: _Target, client: Any, field_manager: str | None,
        dry_run: bool,
    ) -> Object:
        assert t.name is not None
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        patch_type = _PATCH_TYPES.get(content_type)
        if patch_type is None:
            raise errors.ApiError(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml", code=415, reason="UnsupportedMediaType")
        raw = await _read_body(request)
        patch = _decode_yaml(raw) if patch_type is PatchType.APPLY else _decode(raw)
        force_arg = request.query.get("force")
        force = None if force_arg is None else force_arg == "true"
        out: Object = await client.patch(
            t.mapping.gvk, t.name, patch, namespace=t.namespace, patch_type=patch_type,
            subresource=t.subresource, field_manager=field_manager, force=force,
            dry_run=dry_run)
        return out

    async def _delete(
        self, request: web.Request, t: _Target, client: Any, dry_run: bool
    ) -> Object:
        assert t.name is not None
        raw = await _read_body(request)
        opts = _decode(raw) if raw.strip() else {}
        if not isinstance(opts, dict):
            raise errors.BadRequest("DeleteOptions must be an object")
        q = request.query
        policy = opts.get("propagationPolicy") or q.get("propagationPolicy")
        grace = opts.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
        pre = opts.get("preconditions") or {}
        dry_run = dry_run or _dry_run(opts.get("dryRun") or [])
        try:
            propagation = PropagationPolicy(policy) if policy else None
        except ValueError:
            raise errors.BadRequest(
                f'propagationPolicy: Unsupported value: "{policy}": supported values: '
                '"Foreground", "Background", "Orphan"') from None
        preconditions = Preconditions(uid=pre.get("uid"),
                                      resource_version=pre.get("resourceVersion")) \
            if pre else None
        remaining = await client.delete(
            t.mapping.gvk, t.name, namespace=t.namespace, propagation_policy=propagation,
            preconditions=preconditions,
            grace_period_seconds=None if grace is None else int(grace), dry_run=dry_run)
        if remaining is not None:
            out: Object = remaining
            return out
        g = t.mapping.gvk.group
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": t.name, "group": g, "kind": t.mapping.resource.resource}}

    # ------------------------------------------------------------------ watch

    async def _watch(self, request: web.Request, t: _Target, user: str) -> web.StreamResponse:
        q = request.query
        labels = _labels(q.get("labelSelector"))
        fields = _fields(q.get("fieldSelector"))
        rv = q.get("resourceVersion")
        if rv not in (None, "") and not rv.isdigit():
            raise errors.BadRequest(f'invalid resource version "{rv}"')
        timeout = q.get("timeoutSeconds")
        stream = self.server.client(user=user).watch(
            t.mapping.gvk, namespace=t.namespace, label_selector=labels, field_selector=fields,
            resource_version=rv, allow_bookmarks=q.get("allowWatchBookmarks") == "true",
            timeout_seconds=int(timeout) if timeout else None)
        task = asyncio.current_task()
        assert task is not None
        self._watches.add(task)
        pending: asyncio.Future[WatchEvent] = asyncio.ensure_future(anext(stream))
        try:
            # Failures the server finds at once (injected 429/500) are HTTP errors; once
            # the stream is up, failures (an expired resourceVersion too) are ERROR events.
            for _ in range(5):
                if pending.done():
                    break
                await asyncio.sleep(0)
            if pending.done() and not pending.cancelled():
                err = pending.exception()
                if isinstance(err, errors.ApiError) and not isinstance(err, errors.Gone):
                    return _error_response(err)
            resp = web.StreamResponse(headers={"Content-Type": "application/json",
                                               "Cache-Control": "no-cache, private"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            while True:
                try:
                    event = await pending
                except StopAsyncIteration:
                    break
                except errors.ApiError as err:
                    await resp.write(_line({"type": "ERROR", "object": _status_body(err)}))
                    break
                await resp.write(_line({"type": event.type, "object": event.object}))
                pending = asyncio.ensure_future(anext(stream))
            with contextlib.suppress(ConnectionError):
                await resp.write_eof()
            return resp
        finally:
            self._watches.discard(task)
            if not pending.done():
                pending.cancel()
                await asyncio.wait({pending})
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ discovery

    def _discovery(self, segs: list[str], accept: str) -> tuple[Any, str] | None:
        mappings = self._mappings()
        aggregated = self.aggregated_discovery and "as=APIGroupDiscoveryList" in accept
        if segs == ["version"]:
            return ({"major": "1", "minor": "31", "gitVersion": "v1.31.0-jobframework-inmemory",
                     "platform": "linux/amd64"}, "application/json")
        if segs == ["api"]:
            if aggregated:
                core = [m for m in mappings if not m.gvk.group]
                return _aggregated(core), _AGGREGATED_V2
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": self.host}]}, \
                "application/json"
        if segs == ["apis"]:
            named = [m for m in mappings if m.gvk.group]
            if aggregated:
                return _aggregated(named), _AGGREGATED_V2
            return {"kind": "APIGroupList", "apiVersion": "v1",
                    "groups": [_group_doc(g, vs) for g, vs in _group_versions(named).items()]}, \
                "application/json"
        if len(segs) == 2 and segs[0] == "apis":
            versions = _group_versions(mappings).get(segs[1])
            if not versions or not segs[1]:
                raise _not_found()
            return _group_doc(segs[1], versions), "application/json"
        if len(segs) == 2 and segs[0] == "api":
            return _resource_list("", segs[1], mappings), "application/json"
        if len(segs) == 3 and segs[0] == "apis":
            return _resource_list(segs[1], segs[2], mappings), "application/json"
        return None


async def serve_http(
    server: APIServer,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    tokens: Mapping[str, str] | None = None,
    aggregated_discovery: bool = True,
) -> HTTPFront:
    """Start an :class:`HTTPFront` for ``server`` and return it (``await front.close()``)."""
    return await HTTPFront(server, host=host, port=port, tokens=tokens,
                           aggregated_discovery=aggregated_discovery).start()


# ---------------------------------------------------------------------- helpers


def _line(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


async def _read_body(request: web.Request) -> bytes:
    return await request.read()


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise errors.BadRequest(f"the body of the request could not be decoded: {exc}") from exc


def _decode_yaml(raw: bytes) -> Any:
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise errors.BadRequest(f"error decoding YAML: {exc}") from exc


def _dry_run(values: Any) -> bool:
    values = list(values)
    for v in values:
        if v != "All":
            raise errors.BadRequest(
                f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return bool(values)


def _labels(text: str | None) -> LabelSelector | None:
    if not text:
        return None
    try:
        return LabelSelector.parse(text)
    except ValueError as exc:
        raise errors.BadRequest(f"unable to parse requirement: {exc}") from exc


def _fields(text: str | None) -> FieldSelector | None:
    if not text:
        return None
    try:
        return FieldSelector.parse(text)
    except ValueError as exc:
        raise errors.BadRequest(str(exc)) from exc


def _ensure_namespace(meta: dict[str, Any], request_namespace: str) -> None:
    # rest.EnsureObjectNamespaceMatchesRequestNamespace.
    obj_ns = meta.get("namespace") or ""
    if obj_ns == request_namespace:
        return
    if not obj_ns or not request_namespace:
        meta["namespace"] = request_namespace
        if not request_namespace:
            meta.pop("namespace", None)
        return
    raise errors.BadRequest(
        "the namespace of the provided object does not match the namespace sent on the request")


def _group_versions(mappings: list[RESTMapping]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in mappings:
        versions = out.setdefault(m.gvk.group, [])
        if m.gvk.version not in versions:
            versions.append(m.gvk.version)
    return out


def _group_doc(group: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": gvs,
            "preferredVersion": gvs[0]}


def _resource_list(group: str, version: str, mappings: list[RESTMapping]) -> dict[str, Any]:
    selected = [m for m in mappings if (m.gvk.group, m.gvk.version) == (group, version)]
    if not selected:
        raise _not_found()
    resources: list[dict[str, Any]] = []
    for m in selected:
        resources.append({"name": m.resource.resource, "singularName": m.gvk.kind.lower(),
                          "namespaced": m.namespaced, "kind": m.gvk.kind, "verbs": _VERBS})
        for sub in sorted(m.subresources):
            resources.append({"name": f"{m.resource.resource}/{sub}", "singularName": "",
                              "namespaced": m.namespaced, "kind": m.gvk.kind,
                              "verbs": _SUB_VERBS})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}


def _aggregated(mappings: list[RESTMapping]) -> dict[str, Any]:
    groups: dict[str, dict[str, list[RESTMapping]]] = {}
    for m in mappings:
        groups.setdefault(m.gvk.group, {}).setdefault(m.gvk.version, []).append(m)
    items = []
    for group, versions in groups.items():
        items.append({"metadata": {"name": group}, "versions": [
            {"version": version, "freshness": "Current", "resources": [
                {"resource": m.resource.resource,
                 "responseKind": {"group": group, "version": version, "kind": m.gvk.kind},
                 "scope": "Namespaced" if m.namespaced else "Cluster",
                 "singularResource": m.gvk.kind.lower(), "verbs": _VERBS,
                 "subresources": [
                     {"subresource": sub, "verbs": _SUB_VERBS,
                      "responseKind": {"group": group, "version": version, "kind": m.gvk.kind}}
                     for sub in sorted(m.subresources)]}
                for m in ms]}
            for version, ms in versions.items()]})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items}


__all__ = ["HTTPFront", "serve_http"]
