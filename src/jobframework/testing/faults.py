"""Fault injection for the in-memory API server (``server.faults``).

Rules match requests by verb and optionally kind, resource, namespace, name and
subresource. Verbs are the API's: ``get``, ``list``, ``watch``, ``create``, ``update``,
``patch`` (server-side apply included), ``delete``; a status write is ``update`` or
``patch`` with ``subresource="status"``. Latency is slept on the server's clock, so a
test on a :class:`~jobframework.runtime.clock.ManualClock` decides when it elapses.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import attrs

from ..runtime import errors
from ..runtime.objects import GVK

if TYPE_CHECKING:
    from ._backend import ServerBackend
    from ._registry import KindInfo

VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "*"})


@attrs.define(eq=False)
class FaultRule:
    """One injected fault; ``remaining`` counts down (None means forever)."""

    verb: str
    error: errors.ApiError | None = None
    latency: float = 0.0
    remaining: int | None = 1
    gvk: GVK | None = None
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    #: How many requests this rule has affected.
    hits: int = 0

    def matches(
        self, verb: str, gvk: GVK, resource: str, namespace: str | None, name: str | None,
        subresource: str | None,
    ) -> bool:
        """Whether this rule applies to the request."""
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.verb not in ("*", verb):
            return False
        if self.gvk is not None and self.gvk != gvk:
            return False
        if self.resource is not None and self.resource != resource:
            return False
        if self.namespace is not None and self.namespace != (namespace or ""):
            return False
        if self.name is not None and self.name != name:
            return False
        return self.subresource is None or self.subresource == subresource


class Faults:
    """The server's fault injector; reach it as ``server.faults``."""

    def __init__(self, server: ServerBackend) -> None:
        self._server = server
        self._rules: list[FaultRule] = []
        self._expire_watches = 0
        self._event_delays: dict[tuple[str, str] | None, float] = {}

    def fail(
        self,
        verb: str = "*",
        *,
        error: errors.ApiError | int = 500,
        times: int | None = 1,
        gvk: GVK | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> FaultRule:
        """Fail the next ``times`` matching requests (None: every one) with ``error``.

        ``error`` is an :class:`~jobframework.runtime.errors.ApiError` (raised as a copy)
        or an HTTP code (409 Conflict, 429 TooManyRequests, 500 InternalError, ...).
        """
        err = error if isinstance(error, errors.ApiError) else _error_for_code(error)
        rule = FaultRule(_verb(verb), error=err, remaining=times, gvk=gvk, resource=resource,
                         namespace=namespace, name=name, subresource=subresource)
        self._rules.append(rule)
        return rule

    def delay(
        self,
        seconds: float,
        verb: str = "*",
        *,
        times: int | None = None,
        gvk: GVK | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> FaultRule:
        """Add ``seconds`` of latency (on the server's clock) before matching requests."""
        rule = FaultRule(_verb(verb), latency=seconds, remaining=times, gvk=gvk,
                         resource=resource, namespace=namespace, name=name,
                         subresource=subresource)
        self._rules.append(rule)
        return rule

    def delay_events(self, seconds: float, *, gvk: GVK | None = None) -> None:
        """Deliver watch events ``seconds`` (server clock) after their write, for one kind
        or all (``gvk=None``); 0 stops delaying. Bookmarks never overtake a delayed event.

        Models a lagging watch cache: a client's informer sees writes late, as it can in
        a cluster under load.
        """
        key = (gvk.group, gvk.kind) if gvk is not None else None  # every version
        if seconds > 0:
            self._event_delays[key] = seconds
        else:
            self._event_delays.pop(key, None)

    def _event_delay(self, info: KindInfo) -> float:
        key = (info.gvk.group, info.gvk.kind)
        return self._event_delays.get(key, self._event_delays.get(None, 0.0))

    def remove(self, rule: FaultRule) -> None:
        """Withdraw one rule."""
        if rule in self._rules:
            self._rules.remove(rule)

    def clear(self) -> None:
        """Withdraw every rule and pending watch expiry."""
        self._rules.clear()
        self._expire_watches = 0
        self._event_delays.clear()

    def drop_watches(self) -> int:
        """End every open watch stream now (undelivered events are lost); returns how many."""
        return self._server._drop_watches()

    def expire_next_watch(self, times: int = 1) -> None:
        """Make the next ``times`` watch starts fail with 410 Gone, whatever their rv."""
        self._expire_watches += times

    def compact(self) -> None:
        """Forget the whole watch history: a watch from any older rv now gets 410 Gone."""
        self._server._compact()

    def _take_watch_expiry(self) -> bool:
        if self._expire_watches > 0:
            self._expire_watches -= 1
            return True
        return False

    async def before(
        self, verb: str, gvk: GVK, resource: str, namespace: str | None, name: str | None,
        subresource: str | None = None,
    ) -> None:
        """Apply matching latency, then raise the first matching error (server internal)."""
        matched = [r for r in self._rules
                   if r.matches(verb, gvk, resource, namespace, name, subresource)]
        for rule in matched:
            if rule.latency > 0:
                rule.hits += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                await self._server.clock.sleep(rule.latency)
        for rule in matched:
            if rule.error is not None and (rule.remaining is None or rule.remaining > 0):
                rule.hits += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                raise copy.copy(rule.error)


def _verb(verb: str) -> str:
    if verb not in VERBS:
        raise ValueError(f"unknown verb {verb!r}; expected one of {sorted(VERBS)}")
    return verb


def _error_for_code(code: int) -> errors.ApiError:
    messages = {
        409: "the object has been modified; please apply your changes to the latest version"
             " and try again",
        429: "Too many requests, please try again later.",
        500: "Internal error occurred: injected fault",
        503: "the server is currently unable to handle the request",
        504: "the server was unable to return a response in the time allotted",
    }
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
              "message": messages.get(code, f"injected fault (HTTP {code})")}
    return errors.from_status(status, code)
