"""`AsyncioNetwork` (`toolwire/_net.py`): the chat server's model connections on asyncio's own transports, tested
against real servers on loopback (plain asyncio ones, so each test controls exactly what the server does)."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from toolwire._net import AsyncioNetwork
from toolwire._transport import ShardedTransport

pytestmark = pytest.mark.anyio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await asyncio.sleep(0)


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head + (await reader.readexactly(length) if length else b"")


def respond(body: bytes, *, close: bool = False) -> bytes:
    connection = b"close" if close else b"keep-alive"
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\nconnection: " + connection + b"\r\n\r\n" + body)


def client(network: AsyncioNetwork, **options: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=ShardedTransport(1, network=network, **options), trust_env=False,  # type: ignore[arg-type]
                             timeout=httpx.Timeout(5.0))


async def test_responses_large_and_small_come_whole_on_a_kept_connection() -> None:
    """A body of 3 MB (well past the buffer's high-water mark, so reading pauses and resumes) and a small one,
    on one kept-alive connection that this backend opened."""
    big = bytes(range(256)) * (3 * 1024 * 4)
    accepted = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        for body in (big, b"small"):
            await read_request(reader)
            writer.write(respond(body))
            await writer.drain()
        writer.close()

    network = AsyncioNetwork()
    async with serving(handler) as port, client(network) as http:
        async with http.stream("GET", f"http://127.0.0.1:{port}/big") as response:
            received = b"".join([chunk async for chunk in response.aiter_raw()])
            await asyncio.sleep(0.2)  # the whole body is in the buffer: reading was paused on the way
        assert received == big
        assert (await http.get(f"http://127.0.0.1:{port}/small")).content == b"small"
    assert network.connections == 1 and accepted == [1]


async def test_a_server_that_closed_an_idle_connection_costs_a_new_one_not_an_error() -> None:
    """The pool asks an idle connection whether it is readable before reusing it; here the answer comes from what
    the event loop delivered (the server's end), with no system call."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(respond(b"once"))
        await writer.drain()
        writer.close()  # says keep-alive, closes anyway

    network = AsyncioNetwork()
    async with serving(handler) as port, client(network) as http:
        assert (await http.get(f"http://127.0.0.1:{port}/")).content == b"once"
        await asyncio.sleep(0.1)
        assert (await http.get(f"http://127.0.0.1:{port}/")).content == b"once"
    assert network.connections == 2


async def test_a_silent_server_times_out_and_a_closed_port_is_a_connect_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf")
        await writer.drain()
        try:
            await asyncio.sleep(5)
        finally:
            writer.close()

    network = AsyncioNetwork()
    async with serving(handler) as port, client(network) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(f"http://127.0.0.1:{port}/", timeout=httpx.Timeout(0.3))
    async with serving(handler) as closed:
        pass
    async with client(network) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{closed}/")


async def test_a_connection_the_server_cuts_mid_body_is_an_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part of it")
        await writer.drain()
        writer.transport.abort()
        writer.close()

    async with serving(handler) as port, client(AsyncioNetwork()) as http:
        with pytest.raises(httpx.RemoteProtocolError):  # h11: the connection ended before the body did
            await http.get(f"http://127.0.0.1:{port}/")


async def test_https_through_asyncios_tls(tmp_path: Path) -> None:
    """`start_tls` on the connection: a certificate made here for 127.0.0.1, trusted by the client alone."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(  # noqa: ASYNC221 - set-up, before the loop has anything else to do
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    trusted = ssl.create_default_context(cafile=str(cert))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await read_request(reader)
            writer.write(respond(b"over tls"))
            await writer.drain()
            await reader.read()  # open until the client closes it
        except (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError):
            pass  # the client that refuses the certificate
        finally:
            writer.close()

    network = AsyncioNetwork()
    async with (serving(handler, tls=served) as port, client(network, verify=trusted) as http,
                http.stream("GET", f"https://127.0.0.1:{port}/") as response):
        assert response.extensions["network_stream"].get_extra_info("ssl_object") is not None
        assert await response.aread() == b"over tls"
    async with serving(handler, tls=served) as port, client(AsyncioNetwork()) as http:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):  # not trusted by default
            await http.get(f"https://127.0.0.1:{port}/")
    assert network.connections == 1


async def test_a_unix_socket(tmp_path: Path) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(respond(b"over a unix socket", close=True))
        await writer.drain()
        writer.close()

    path = tmp_path / "model.sock"
    server = await asyncio.start_unix_server(handler, path)
    network = AsyncioNetwork()
    try:
        async with client(network, uds=str(path)) as http:
            assert (await http.get("http://model/")).content == b"over a unix socket"
    finally:
        server.close()
        await asyncio.sleep(0)
    assert network.connections == 1


def test_the_server_model_client_uses_it() -> None:
    """Every pool of a transport given a network connects through it (a new httpx that builds its pools
    another way leaves `network` unset, and this fails)."""
    network = AsyncioNetwork()
    transport = ShardedTransport(4, network=network)
    assert transport.network is network
    assert all(pool._pool._network_backend is network for pool in transport._pools)
    assert ShardedTransport(2).network is None
