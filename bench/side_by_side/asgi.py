"""Serve an ASGI app on uvicorn as `toolwire serve` does (httptools, no websockets, no access log), on a port
picked by the system, and say where: the benchmark waits for "Listening on http://...".

Imports only uvicorn: the pydantic-ai peer runs it from its own virtualenv.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from typing import Any

import uvicorn


def arguments(description: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--provider", required=True, help="the model's base URL, e.g. http://127.0.0.1:PORT/v1")
    return parser.parse_args()


def serve(app: Any, port: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    config = uvicorn.Config(app, http="httptools", ws="none", lifespan="on", log_level="warning",
                            access_log=False, backlog=4096)
    server = uvicorn.Server(config)

    async def main() -> None:
        async def announce() -> None:
            while not server.started:  # uvicorn has no event for it
                if server.should_exit:
                    return
                await asyncio.sleep(0.02)
            print(f"Listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)

        announcer = asyncio.create_task(announce())
        await server.serve(sockets=[sock])
        announcer.cancel()

    asyncio.run(main())
