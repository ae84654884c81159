"""Health and readiness probes and the metrics endpoint, as controller-runtime serves them.

A check is a callable taking no argument that raises (any exception) to report failure;
it may be a coroutine function. :class:`Checks` aggregates named checks the way
controller-runtime's ``healthz.Handler`` does:

- ``GET /healthz`` answers ``200 ok`` when every check passes, else ``500`` with one line
  per check (``[+]name ok`` / ``[-]name failed: reason withheld``) and
  ``healthz check failed``; ``?verbose`` lists the checks on success too, ending with
  ``healthz check passed``; ``?exclude=name`` skips a check;
- ``GET /healthz/<name>`` runs one check: ``200 ok`` or ``500 internal server error: <err>``;
- with no check registered, a ``ping`` check that always passes is reported.

:class:`ProbeServer` serves ``/healthz``, ``/readyz`` and/or ``/metrics`` with aiohttp.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["Checker", "Checks", "ProbeServer", "parse_bind_address", "ping"]

log = logging.getLogger(__name__)

#: A health check: returns normally when healthy, raises when not.
Checker = Callable[[], Awaitable[None] | None]


def ping() -> None:
    """The check that always passes (``healthz.Ping``)."""


async def _run(check: Checker) -> None:
    result = check()
    if inspect.isawaitable(result):
        await result


class Checks:
    """A set of named checks behind one endpoint (``/healthz`` or ``/readyz``)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._checks: dict[str, Checker] = {}

    def add(self, name: str, check: Checker) -> None:
        """Register ``check`` under ``name``; a name may be registered once."""
        if name in self._checks:
            raise ValueError(f"{self.endpoint} check {name!r} already exists")
        self._checks[name] = check

    def names(self) -> list[str]:
        """The registered check names, sorted."""
        return sorted(self._checks)

    async def check_one(self, name: str) -> tuple[int, str]:
        """Run one check: ``(200, "ok")``, ``(500, ...)``, or ``(404, ...)`` if unknown."""
        check = self._checks.get(name)
        if check is None:
            return 404, f"404 page not found: no {self.endpoint} check named {name!r}\n"
        try:
            await _run(check)
        except Exception as err:  # a failing check is data, not a crash
            log.debug("%s check %s failed: %s", self.endpoint, name, err)
            return 500, f"internal server error: {err}\n"
        return 200, "ok"

    async def check_all(
        self, *, verbose: bool = False, exclude: frozenset[str] = frozenset()
    ) -> tuple[int, str]:
        """Run every check; return the status code and text body controller-runtime writes."""
        parts: list[tuple[str, bool, bool]] = []  # (name, healthy, excluded)
        unknown = set(exclude)
        failed = False
        for name, check in self._checks.items():
            if name in exclude:
                unknown.discard(name)
                parts.append((name, True, True))
                continue
            try:
                await _run(check)
            except Exception as err:
                log.debug("%s check %s failed: %s", self.endpoint, name, err)
                parts.append((name, False, False))
                failed = True
            else:
                parts.append((name, True, False))
        if not self._checks:
            parts.append(("ping", True, False))
        parts.sort()
        if not failed and not verbose:
            return 200, "ok"
        lines = []
        for name, healthy, excluded in parts:
            if excluded:
                lines.append(f"[+]{name} excluded: ok")
            elif healthy:
                lines.append(f"[+]{name} ok")
            else:
                # The reason stays out of the aggregate: the endpoint is unauthenticated.
                lines.append(f"[-]{name} failed: reason withheld")
        if unknown:
            quoted = ", ".join(f'"{u}"' for u in sorted(unknown))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        if failed:
            log.info("%s check failed: %s", self.endpoint,
                     [n for n, healthy, _ in parts if not healthy])
            lines.append(f"{self.endpoint} check failed")
        else:
            lines.append(f"{self.endpoint} check passed")
        return (500 if failed else 200), "\n".join(lines) + "\n"

    def routes(self) -> list[web.RouteDef]:
        """aiohttp routes for ``/<endpoint>`` and ``/<endpoint>/<name>``."""

        async def aggregate(request: web.Request) -> web.Response:
            exclude = frozenset(request.query.getall("exclude", []))
            status, text = await self.check_all(
                verbose="verbose" in request.query, exclude=exclude)
            return _text(status, text)

        async def single(request: web.Request) -> web.Response:
            status, text = await self.check_one(request.match_info["name"])
            return _text(status, text)

        return [
            web.get(f"/{self.endpoint}", aggregate),
            web.get(f"/{self.endpoint}/", aggregate),
            web.get(f"/{self.endpoint}/{{name}}", single),
        ]


def _text(status: int, body: str) -> web.Response:
    resp = web.Response(status=status, text=body, content_type="text/plain", charset="utf-8")
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def parse_bind_address(address: str) -> tuple[str, int]:
    """``host:port`` (``:8080`` binds every interface, port ``0`` picks a free one)."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"bind address {address!r} is not host:port")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class ProbeServer:
    """An aiohttp server for probes and/or metrics on one bind address.

    ``start()`` binds (so :attr:`port` is known even when asked for port 0) and returns;
    ``stop()`` closes the listener.
    """

    def __init__(
        self,
        bind_address: str,
        *,
        healthz: Checks | None = None,
        readyz: Checks | None = None,
        registry: CollectorRegistry | None = None,
        metrics_path: str = "/metrics",
    ) -> None:
        self.bind_address = bind_address
        self.app = web.Application()
        for checks in (healthz, readyz):
            if checks is not None:
                self.app.add_routes(checks.routes())
        if registry is not None:
            reg = registry

            async def metrics(_: web.Request) -> web.Response:
                resp = web.Response(body=generate_latest(reg))
                resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
                return resp

            self.app.add_routes([web.get(metrics_path, metrics)])
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        return self._port

    @property
    def url(self) -> str:
        """``http://host:port`` of the listener (after :meth:`start`)."""
        host, _ = parse_bind_address(self.bind_address)
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"http://{host}:{self._port}"

    async def start(self) -> None:
        """Bind and start serving."""
        host, port = parse_bind_address(self.bind_address)
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        server = site._server  # aiohttp exposes the bound sockets only here
        sockets = getattr(server, "sockets", None) or []
        self._port = sockets[0].getsockname()[1] if sockets else port

    async def stop(self) -> None:
        """Stop serving and release the port."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
