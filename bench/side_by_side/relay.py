"""The floor: the least a server can do for the benchmark's chats, with nothing of toolwire's.

A Starlette route on uvicorn (`POST /api/chat`, the Vercel AI SDK's request) that relays the model's stream as
the AI SDK's UI message stream, runs the two tools the model called, sends their results back and relays the
final answer: the same work every other server does, with no store, no event log, no run outliving its
request. One shared httpx client (no cap on connections, as `toolwire serve`'s), `orjson` for every payload,
plain dicts, no validation of the model's chunks beyond what the relay reads.

    python -m bench.side_by_side.relay --port 0 --provider http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from bench.side_by_side.asgi import arguments, serve
from bench.side_by_side.tools import TOOLS

_TOOLS = {function.__name__: function for function in TOOLS}
_TOOL_SCHEMAS = [{"type": "function", "function": {
    "name": name, "description": function.__doc__,
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
    for name, function in _TOOLS.items()]
_HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "cache-control": "no-cache"}
_MAX_STEPS = 5


def _frame(chunk: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


async def _payloads(response: httpx.Response) -> AsyncIterator[Any]:
    """The decoded `data:` payloads of an SSE body, up to `[DONE]`."""
    pending = b""
    async for chunk in response.aiter_bytes():
        pending += chunk
        *events, pending = pending.split(b"\n\n")
        for event in events:
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        return
                    yield orjson.loads(data)


async def _step(client: httpx.AsyncClient, messages: list[dict[str, Any]],
                calls: dict[int, dict[str, Any]]) -> AsyncIterator[bytes]:
    """One model request relayed; the calls it makes are left in `calls` (index → id, name, argument fragments)."""
    text_id = None
    request = {"model": "load", "messages": messages, "tools": _TOOL_SCHEMAS, "stream": True}
    async with client.stream("POST", "/chat/completions", content=orjson.dumps(request),
                             headers={"content-type": "application/json"}) as response:
        response.raise_for_status()
        async for payload in _payloads(response):
            for choice in payload.get("choices") or ():
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    if text_id is None:
                        text_id = uuid.uuid4().hex
                        yield _frame({"type": "text-start", "id": text_id})
                    yield _frame({"type": "text-delta", "id": text_id, "delta": delta["content"]})
                for fragment in delta.get("tool_calls") or ():
                    call = calls.get(fragment["index"])
                    if call is None:
                        function = fragment["function"]
                        call = calls[fragment["index"]] = {"id": fragment["id"], "name": function["name"],
                                                           "arguments": []}
                        yield _frame({"type": "tool-input-start", "toolCallId": call["id"],
                                      "toolName": call["name"]})
                    arguments = (fragment.get("function") or {}).get("arguments")
                    if arguments:
                        call["arguments"].append(arguments)
                        yield _frame({"type": "tool-input-delta", "toolCallId": call["id"],
                                      "inputTextDelta": arguments})
    if text_id is not None:
        yield _frame({"type": "text-end", "id": text_id})


async def _chat(client: httpx.AsyncClient, text: str) -> AsyncIterator[bytes]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
    yield _frame({"type": "start", "messageId": uuid.uuid4().hex})
    for _ in range(_MAX_STEPS):
        yield _frame({"type": "start-step"})
        calls: dict[int, dict[str, Any]] = {}
        async for frame in _step(client, messages, calls):
            yield frame
        results = []
        for call in calls.values():
            call["arguments"] = "".join(call["arguments"])
            arguments = orjson.loads(call["arguments"])
            yield _frame({"type": "tool-input-available", "toolCallId": call["id"], "toolName": call["name"],
                          "input": arguments})
            results.append((call, _TOOLS[call["name"]](**arguments)))
        for call, output in results:
            yield _frame({"type": "tool-output-available", "toolCallId": call["id"], "output": output})
        yield _frame({"type": "finish-step"})
        if not calls:
            break
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}
            for call in calls.values()]})
        messages += [{"role": "tool", "tool_call_id": call["id"], "content": orjson.dumps(output).decode()}
                     for call, output in results]
    yield _frame({"type": "finish"})
    yield b"data: [DONE]\n\n"


def make_app(provider_url: str) -> Starlette:
    client = httpx.AsyncClient(base_url=provider_url, timeout=60, trust_env=False,
                               limits=httpx.Limits(max_connections=None, max_keepalive_connections=256))

    async def chat(request: Request) -> StreamingResponse:
        body = orjson.loads(await request.body())
        last = body["messages"][-1]
        text = "".join(part.get("text", "") for part in last.get("parts", ()) if part.get("type") == "text")
        return StreamingResponse(_chat(client, text), media_type="text/event-stream", headers=_HEADERS)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with client:
            yield

    return Starlette(routes=[Route("/api/chat", chat, methods=["POST"])], lifespan=lifespan)


def main() -> None:
    args = arguments(__doc__)
    serve(make_app(args.provider), args.port)


if __name__ == "__main__":
    main()
