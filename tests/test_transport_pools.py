"""`ShardedTransport`: the model client's streams spread over several pools, each holding its share."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from bench.model_pool import _serve

from toolwire._transport import ShardedTransport
from toolwire.exceptions import UserError

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the loopback server of bench/model_pool.py is plain asyncio


async def test_streams_are_spread_over_the_pools_and_each_keeps_its_share_of_the_limits() -> None:
    server, port = await _serve()
    transport = ShardedTransport(4, limits=httpx.Limits(max_connections=None, max_keepalive_connections=8))
    try:
        async with httpx.AsyncClient(transport=transport, trust_env=False, timeout=10) as client:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            responses = [await client.send(client.build_request("POST", url, content=b"{}"), stream=True)
                         for _ in range(10)]
            assert all(r.status_code == 200 for r in responses)
            # Ten streams on four pools, in turn: 3, 3, 2 and 2 connections.
            assert sorted(len(pool._pool.connections) for pool in transport._pools) == [2, 2, 3, 3]
            assert {pool._pool._max_keepalive_connections for pool in transport._pools} == {2}
            for response in responses:
                await response.aclose()
    finally:
        server.close()
        await asyncio.sleep(0)


def test_a_transport_needs_a_pool() -> None:
    with pytest.raises(UserError, match="at least one pool"):
        ShardedTransport(0)


def test_the_pools_share_one_tls_context() -> None:
    # Each pool loading the system's CA certificates again cost about a second of CPU at every server start.
    transport = ShardedTransport(shards=4)
    contexts = {id(pool._pool._ssl_context) for pool in transport._pools}
    assert len(contexts) == 1
    assert transport._pools[0]._pool._ssl_context.verify_mode.name == "CERT_REQUIRED"
    own = ShardedTransport(shards=2, verify=False)  # a caller's choice is passed on as it was
    assert own._pools[0]._pool._ssl_context.verify_mode.name == "CERT_NONE"


async def test_the_servers_model_client_sends_no_cookie_a_response_set() -> None:
    # One client serves every user's runs: a cookie set in one user's response must not go out with the next request.
    from toolwire.cli._models import shared_model_client

    seen: list[bytes] = []
    answered = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while len(seen) < 2:  # both requests on the one kept-alive connection
                seen.append(await reader.readuntil(b"\r\n\r\n"))
                writer.write(b"HTTP/1.1 200 OK\r\nSet-Cookie: session=alice; Path=/\r\n"
                             b"Set-Cookie: __cf_bm=x; Path=/\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
        finally:
            writer.close()
            await writer.wait_closed()
            answered.set()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with shared_model_client() as client:
            for _ in range(2):
                response = await client.get(f"http://127.0.0.1:{port}/v1/models")
                assert response.status_code == 200 and response.headers.get_list("set-cookie")
            assert not client.cookies
        await asyncio.wait_for(answered.wait(), 10)
    finally:
        server.close()
        await server.wait_closed()
    assert len(seen) == 2 and all(b"cookie:" not in head.lower() for head in seen), seen
