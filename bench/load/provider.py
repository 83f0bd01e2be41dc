"""The load benchmarks' model: an OpenAI-compatible chat completions stream at a steady pace, on raw asyncio.

Every delta the model sends carries the moment it was written (`time.time()` to the microsecond, then a
space): the benchmark's client reads it back from the server's event, so the latency it reports is from the
delta's creation (here) to its arrival at the client, through the whole server. A thousand streams cost this
process little (one sleeping task per stream, no HTTP framework). Two shapes:

- `text` (`bench/load`): every request is answered with `--events` text chunks, one every `--interval`
  seconds, then the finish chunk, the usage chunk and `[DONE]`.
- `agent` (`bench/side_by_side`): a request without tool results is answered with `--events` text chunks,
  then two tool calls streamed in parallel (`word_count` and `char_count`, each argument `{"text": "..."}`
  cut into `--argument-deltas` fragments, the two calls' fragments alternating), finish reason `tool_calls`;
  a request that carries tool results (a `"role": "tool"` message) with `--events` text chunks, the final
  answer. Every text chunk and argument fragment is one paced, stamped delta. A request whose messages
  contain `[shape EVENTS ARGUMENT_DELTAS INTERVAL]` (the user's text, which every request of the chat
  carries) gets that shape instead of the command line's: the benchmark runs short chats on the same servers
  to tell the cost of a delta from the cost of a chat.
- `orders` (`bench/load/rolling.py`): like `agent`, but the two calls are `charge` (not idempotent) and `lookup`
  (idempotent), each sent whole in one delta with the arguments `{"order": "<its call id>", "seconds":
  <--tool-seconds>}`: the tools (`bench/load/rolling_tools.py`) take that long and journal each execution under
  the call's id, which is unique in this process. A request whose last message is the user's gets the calls
  (a chat's later runs carry the earlier runs' tool results), any other the final answer.

    python -m bench.load.provider --port 0 --events 300 --interval 0.2
    python -m bench.load.provider --port 0 --shape agent --events 10 --argument-deltas 10
    python -m bench.load.provider --port 0 --shape orders --events 20 --interval 0.1 --tool-seconds 2
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import time
from collections.abc import Iterator
from typing import Any

_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
         b"transfer-encoding: chunked\r\n\r\n")
_TOOL_RESULT = re.compile(rb'"role"\s*:\s*"tool"')
_SHAPE = re.compile(rb"\[shape (\d+) (\d+) ([0-9.]+)\]")
TOOL_NAMES = ("word_count", "char_count")
ORDER_TOOLS = ("charge", "lookup")
_call_numbers = itertools.count()


def _chunk(payload: bytes) -> bytes:
    frame = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(frame), frame)


def _delta(content: str | None = None, finish: str | None = None, role: str | None = None,
           tool_calls: list[dict[str, Any]] | None = None) -> bytes:
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    body = {"id": "chatcmpl-load", "object": "chat.completion.chunk", "created": 0, "model": "load",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return json.dumps(body, separators=(",", ":")).encode()


_USAGE = json.dumps({"id": "chatcmpl-load", "object": "chat.completion.chunk", "created": 0, "model": "load",
                     "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 10,
                                              "total_tokens": 20}}).encode()


def stamp() -> str:
    return f"{time.time():.6f} "


def shape_marker(events: int, argument_deltas: int, interval: float) -> str:
    """The text that, in a chat's user message, sets the chat's shape (see the module's docstring)."""
    return f"[shape {events} {argument_deltas} {interval:g}]"


def chat_shape(request_body: bytes, events: int, argument_deltas: int, interval: float) -> tuple[int, int, float]:
    """The request's (events, argument deltas, interval): its shape marker's, or the given defaults."""
    marker = _SHAPE.search(request_body)
    if marker is None:
        return events, argument_deltas, interval
    return int(marker.group(1)), int(marker.group(2)), float(marker.group(3))


def deltas_per_chat(events: int, argument_deltas: int) -> int:
    """The stamped deltas one chat of the `agent` shape is made of (both answers' text and both calls' arguments)."""
    return 2 * events + 2 * argument_deltas


def _text_chunks(events: int) -> Iterator[bytes | None]:
    """The answer's stamped text chunks; None before each means: wait for the next beat first."""
    for _ in range(events):
        yield None
        yield _chunk(_delta(stamp()))


def _tool_call_chunks(argument_deltas: int) -> Iterator[bytes | None]:
    """Two calls' starts, then their argument fragments alternating: `{"text":"<stamp> ` ... `<stamp> "}`."""
    number = next(_call_numbers)
    calls = [{"index": index, "id": f"call_{number}_{index}", "type": "function",
              "function": {"name": name, "arguments": ""}} for index, name in enumerate(TOOL_NAMES)]
    yield _chunk(_delta(tool_calls=calls))
    for fragment in range(argument_deltas):
        for index in range(len(TOOL_NAMES)):
            yield None
            text = stamp()  # after the wait: the moment it is written
            if fragment == 0:
                text = '{"text":"' + text
            if fragment == argument_deltas - 1:
                text += '"}'
            yield _chunk(_delta(tool_calls=[{"index": index, "function": {"arguments": text}}]))


def _order_call_chunks(tool_seconds: float) -> Iterator[bytes | None]:
    """The `orders` shape's two calls, each whole in one delta, after a beat; each call's id is its order."""
    number = next(_call_numbers)
    calls = []
    for index, name in enumerate(ORDER_TOOLS):
        call_id = f"call_{number}_{index}"
        arguments = json.dumps({"order": call_id, "seconds": tool_seconds})
        calls.append({"index": index, "id": call_id, "type": "function",
                      "function": {"name": name, "arguments": arguments}})
    yield None
    yield _chunk(_delta(tool_calls=calls))


def _asks_for_calls(request_body: bytes) -> bool:
    """Whether an `orders` request ends with the user's message (a chat's earlier runs left tool results before it)."""
    messages = json.loads(request_body).get("messages") or [{}]
    return bool(messages[-1].get("role") == "user")


def answer(shape: str, request_body: bytes, events: int, argument_deltas: int,
           tool_seconds: float = 0.0) -> Iterator[bytes | None]:
    """The response body's chunks (HTTP chunked framing, SSE inside); None where the next delta waits a beat."""
    yield _chunk(_delta("", role="assistant"))
    yield from _text_chunks(events)
    if shape == "agent" and not _TOOL_RESULT.search(request_body):
        yield from _tool_call_chunks(argument_deltas)
        finish = "tool_calls"
    elif shape == "orders" and _asks_for_calls(request_body):
        yield from _order_call_chunks(tool_seconds)
        finish = "tool_calls"
    else:
        finish = "stop"
    yield _chunk(_delta(finish=finish)) + _chunk(_USAGE) + _chunk(b"[DONE]") + b"0\r\n\r\n"


async def _read_body(reader: asyncio.StreamReader, head: bytes) -> bytes:
    length = 0
    chunked = False
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        elif name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if not chunked:
        return await reader.readexactly(length)
    parts = []
    while True:  # a client that streams its request body (Node's fetch may)
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        parts.append(await reader.readexactly(size + 2))
        if size == 0:
            return b"".join(part[:-2] for part in parts)


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, shape: str, events: int,
                  argument_deltas: int, interval: float, tool_seconds: float = 0.0) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            body = await _read_body(reader, head)
            chat_events, chat_argument_deltas, chat_interval = chat_shape(body, events, argument_deltas, interval)
            writer.write(_HEAD)
            next_at = time.monotonic()
            for frame in answer(shape, body, chat_events, chat_argument_deltas, tool_seconds):
                if frame is None:
                    next_at += chat_interval
                    await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                else:
                    writer.write(frame)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port: int, events: int, interval: float, shape: str = "text", argument_deltas: int = 0,
                tool_seconds: float = 0.0) -> None:
    server = await asyncio.start_server(
        lambda r, w: _handle(r, w, shape, events, argument_deltas, interval, tool_seconds),
        "127.0.0.1", port, backlog=4096)
    print(f"Listening on port {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--events", type=int, default=300, help="text chunks per answer")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between two stamped deltas")
    parser.add_argument("--shape", choices=["text", "agent", "orders"], default="text")
    parser.add_argument("--argument-deltas", type=int, default=10,
                        help="with --shape agent: argument fragments per tool call")
    parser.add_argument("--tool-seconds", type=float, default=2.0,
                        help="with --shape orders: how long each tool call takes")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.events, args.interval, args.shape, args.argument_deltas, args.tool_seconds))


if __name__ == "__main__":
    main()
