"""The model HTTP pool's bookkeeping under many concurrent streams (issue 22), measured alone.

    .venv/bin/python -m bench.model_pool --streams 200,500

A local server (asyncio, loopback) answers every request with a response that stays open until the
client closes it. The client holds `N` streams open on one `httpx.AsyncClient`, then opens and closes
`--requests` more, one at a time, as a run's model requests do while the other runs stream. Reported: the
CPU seconds spent in httpcore's `_assign_requests_to_connections` (the pool's bookkeeping, called at each
request and each response close) per extra request, for one pool and for `--shards` pools
(`toolwire._transport.ShardedTransport`).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpcore
import httpx

from toolwire._transport import ShardedTransport

_RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
             b"6\r\ndata: \r\n")


async def _serve() -> tuple[asyncio.AbstractServer, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if length:
                    await reader.readexactly(length)
                writer.write(_RESPONSE)
                await writer.drain()
                await reader.read()  # open until the client closes
                return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            return  # the client went away, or the bench is over
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=2048)
    return server, server.sockets[0].getsockname()[1]


def _timed_bookkeeping() -> tuple[list[float], Callable[[], None]]:
    spent = [0.0]
    original: Any = httpcore.AsyncConnectionPool._assign_requests_to_connections

    def timed(self: Any) -> Any:
        start = time.process_time()
        try:
            return original(self)
        finally:
            spent[0] += time.process_time() - start

    httpcore.AsyncConnectionPool._assign_requests_to_connections = timed  # type: ignore[method-assign]

    def undo() -> None:
        httpcore.AsyncConnectionPool._assign_requests_to_connections = original  # type: ignore[method-assign]

    return spent, undo


async def measure(streams: int, requests: int, shards: int) -> float:
    """CPU milliseconds of pool bookkeeping per request made while `streams` others stream."""
    server, port = await _serve()
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
    transport: httpx.AsyncBaseTransport = (ShardedTransport(shards, limits=limits) if shards > 1
                                           else httpx.AsyncHTTPTransport(limits=limits))
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    spent, undo = _timed_bookkeeping()
    try:
        async with httpx.AsyncClient(transport=transport, timeout=30) as client:
            held = []
            for _ in range(streams):
                response = await client.send(client.build_request("POST", url, content=b"{}"), stream=True)
                held.append(response)
            spent[0] = 0.0
            for _ in range(requests):
                response = await client.send(client.build_request("POST", url, content=b"{}"), stream=True)
                await response.aclose()
            per_request = spent[0] * 1000 / requests
            for response in held:
                await response.aclose()
    finally:
        undo()
        server.close()
    return per_request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="200,500")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--shards", type=int, default=16)
    args = parser.parse_args()
    for streams in (int(n) for n in args.streams.split(",")):
        one = asyncio.run(measure(streams, args.requests, 1))
        sharded = asyncio.run(measure(streams, args.requests, args.shards))
        print(f"{streams} streams open: pool bookkeeping {one:.3f} ms per request with one pool, "
              f"{sharded:.3f} ms with {args.shards} pools")


if __name__ == "__main__":
    main()
