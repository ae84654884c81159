"""The loopback TCP balancer: round robin, failover past a dead backend, cut."""

from __future__ import annotations

import asyncio
import socket

from jobframework.testing.balancer import TCPBalancer


async def echo_server(tag: bytes) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(tag + data)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def port_of(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def ask(port: int, text: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(text)
    await writer.drain()
    data = await reader.read(1024)
    writer.close()
    return data


async def test_round_robin_and_failover() -> None:
    a, b = await echo_server(b"a:"), await echo_server(b"b:")
    dead = ("127.0.0.1", dead_port())
    async with TCPBalancer([("127.0.0.1", port_of(a)), dead,
                            ("127.0.0.1", port_of(b))]) as lb:
        answers = [await ask(lb.port, b"x") for _ in range(4)]
        assert answers == [b"a:x", b"b:x", b"a:x", b"b:x"]
        assert lb.stats.refused == 2  # the dead one was tried twice, then skipped
        assert lb.stats.connections == {("127.0.0.1", port_of(a)): 2,
                                        ("127.0.0.1", port_of(b)): 2}
        lb.prefer(("127.0.0.1", port_of(b)))
        assert await ask(lb.port, b"y") == b"b:y"
    a.close()
    b.close()


async def test_no_backend_drops_the_connection_and_cut_closes_open_ones() -> None:
    async with TCPBalancer([("127.0.0.1", dead_port())]) as lb:
        assert await ask(lb.port, b"x") == b""
        assert lb.stats.dropped == 1
    a = await echo_server(b"a:")
    async with TCPBalancer([("127.0.0.1", port_of(a))]) as lb:
        reader, writer = await asyncio.open_connection("127.0.0.1", lb.port)
        writer.write(b"1")
        assert await reader.read(10) == b"a:1"
        assert await lb.cut() == 1
        assert await reader.read(10) == b""  # closed by the balancer
        writer.close()
    a.close()
