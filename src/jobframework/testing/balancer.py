"""A TCP load balancer on loopback: a Service's stand-in for replicas run out of a cluster.

In a cluster, the API server reaches the webhook replicas through a Service that sends
each new connection to a ready endpoint. Out of the cluster (tests, the local control
plane) :class:`TCPBalancer` plays that part for processes listening on loopback: each
accepted connection goes to the next backend in turn, skipping those that refuse it, and
bytes are piped both ways unchanged (TLS passes through: the certificate the client sees
is the replica's). A backend that dies takes its open connections with it, as a pod does.

    async with TCPBalancer([("127.0.0.1", 9443), ("127.0.0.1", 9444)]) as lb:
        url = f"https://localhost:{lb.port}"
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from types import TracebackType

import attrs

log = logging.getLogger("jobframework.testing.balancer")

_CHUNK = 64 * 1024


@attrs.define
class BalancerStats:
    """What the balancer did: connections per backend, and those no backend took."""

    connections: dict[tuple[str, int], int] = attrs.field(factory=dict)
    #: Connect attempts a backend refused (another was then tried).
    refused: int = 0
    #: Accepted connections that no backend took (closed at once).
    dropped: int = 0


class TCPBalancer:
    """Round-robin TCP forwarding from ``host:port`` to ``backends`` (see the module).

    ``port=0`` picks a free port (:attr:`port` after :meth:`start`).
    """

    def __init__(self, backends: Sequence[tuple[str, int]], *, host: str = "127.0.0.1",
                 port: int = 0, connect_timeout: float = 2.0) -> None:
        if not backends:
            raise ValueError("a balancer needs at least one backend")
        #: Tried in turn for each new connection (may be reordered while running).
        self.backends = [(h, int(p)) for h, p in backends]
        self.host = host
        self._port = port
        self.connect_timeout = connect_timeout
        self.stats = BalancerStats()
        self._next = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The listening port (after :meth:`start`)."""
        if self._server is None:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Listen."""
        self._server = await asyncio.start_server(self._accept, self.host, self._port)

    async def stop(self) -> None:
        """Stop listening and cut every connection."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def prefer(self, backend: tuple[str, int]) -> None:
        """Send the next new connection to ``backend`` first (then the rest in turn)."""
        self.backends = [backend] + [b for b in self.backends if b != backend]
        self._next = 0

    async def cut(self) -> int:
        """Close every open connection (clients reconnect, to the next backend in
        turn); returns how many were cut."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)

    async def __aenter__(self) -> TCPBalancer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for _ in range(len(self.backends)):
            backend = self.backends[self._next % len(self.backends)]
            self._next += 1
            try:
                async with asyncio.timeout(self.connect_timeout):
                    pair = await asyncio.open_connection(*backend)
            except (OSError, TimeoutError):
                self.stats.refused += 1
                continue
            self.stats.connections[backend] = self.stats.connections.get(backend, 0) + 1
            return pair
        return None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            upstream = await self._connect()
            if upstream is None:
                self.stats.dropped += 1
                log.warning("no backend of %s took a connection", self.backends)
                return
            up_reader, up_writer = upstream
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        finally:
            writer.close()
            self._tasks.discard(task)


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until end of stream or error, then half-close ``sink``."""
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await source.read(_CHUNK):
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
