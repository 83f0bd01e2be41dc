"""The load benchmark's model: an OpenAI-compatible chat completions stream at a steady pace, on raw asyncio.

Every request is answered with `--events` text chunks, one every `--interval` seconds, then the finish
chunk, the usage chunk and `[DONE]`. Each chunk's text is the moment it was written (`time.time()`, then a
space): the benchmark's client reads it back from the server's `text_delta` event, so the latency it
reports is from the event's creation (here) to its arrival at the client, through the whole server.
A thousand streams cost this process little (one sleeping task per stream, no HTTP framework).

    python -m bench.load.provider --port 0 --events 300 --interval 0.2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
         b"transfer-encoding: chunked\r\n\r\n")


def _chunk(payload: bytes) -> bytes:
    frame = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(frame), frame)


def _delta(content: str | None = None, finish: str | None = None, role: str | None = None) -> bytes:
    delta: dict[str, str] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    body = {"id": "chatcmpl-load", "object": "chat.completion.chunk", "created": 0, "model": "load",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return json.dumps(body, separators=(",", ":")).encode()


_USAGE = json.dumps({"id": "chatcmpl-load", "object": "chat.completion.chunk", "created": 0, "model": "load",
                     "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 10,
                                              "total_tokens": 20}}).encode()


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, events: int, interval: float) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            writer.write(_HEAD + _chunk(_delta("", role="assistant")))
            next_at = time.monotonic()
            for _ in range(events):
                next_at += interval
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                writer.write(_chunk(_delta(f"{time.time():.6f} ")))
            writer.write(_chunk(_delta(finish="stop")) + _chunk(_USAGE) + _chunk(b"[DONE]") + b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port: int, events: int, interval: float) -> None:
    server = await asyncio.start_server(lambda r, w: _handle(r, w, events, interval), "127.0.0.1", port,
                                        backlog=4096)
    print(f"Listening on port {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--interval", type=float, default=0.2)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.events, args.interval))


if __name__ == "__main__":
    main()
