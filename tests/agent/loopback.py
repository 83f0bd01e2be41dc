"""A small local provider server for the agent's end-to-end tests: uvicorn on a free loopback port.

It speaks OpenAI Chat Completions SSE and Anthropic Messages SSE in the shapes of the recorded fixtures
(`openai-chat/gpt-4o_parallel-2-tools.magentic.sse`, `anthropic/claude-3-opus_parallel-2-tools.magentic.sse`):
the same chunk objects, event names, trailing usage chunk and `[DONE]`. Each request is answered with the
next scripted turn: a list of SSE frames (bytes) and pauses (floats, seconds). The server records each
request's headers and JSON body, and whether each response streamed to its end or the client left.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

Frame = bytes | float
Turn = list[Frame]


@dataclass
class Received:
    protocol: str
    headers: dict[str, str]
    body: dict[str, Any]
    completed: bool = False
    client_left: bool = False


@dataclass
class LoopbackServer:
    turns: dict[str, list[Turn]] = field(default_factory=lambda: {"openai": [], "anthropic": []})
    received: list[Received] = field(default_factory=list)
    url: str = ""
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    def script(self, protocol: str, *turns: Turn) -> None:
        self.turns[protocol] = list(turns)
        self.received.clear()

    def _app(self) -> Starlette:
        async def answer(request: Request, protocol: str) -> Response:
            record = Received(protocol, dict(request.headers), orjson.loads(await request.body()))
            self.received.append(record)
            index = sum(r.protocol == protocol for r in self.received) - 1
            if index >= len(self.turns[protocol]):
                return Response(b'{"error": {"message": "no scripted turn left"}}', status_code=500)
            turn = self.turns[protocol][index]

            async def body() -> AsyncIterator[bytes]:
                try:
                    for frame in turn:
                        if isinstance(frame, float):
                            await anyio.sleep(frame)
                        else:
                            yield frame
                    record.completed = True
                finally:
                    record.client_left = not record.completed

            return StreamingResponse(body(), media_type="text/event-stream")

        async def openai(request: Request) -> Response:
            return await answer(request, "openai")

        async def anthropic(request: Request) -> Response:
            return await answer(request, "anthropic")

        return Starlette(routes=[Route("/v1/chat/completions", openai, methods=["POST"]),
                                 Route("/v1/messages", anthropic, methods=["POST"])])

    def start(self) -> None:
        config = uvicorn.Config(self._app(), host="127.0.0.1", port=0, log_level="error", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("The loopback server did not start within 10 seconds.")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10)

    def wait_until_done(self, timeout: float = 5.0) -> None:
        """Wait until every response has either completed or seen its client leave."""
        deadline = time.monotonic() + timeout
        while not all(r.completed or r.client_left for r in self.received):
            if time.monotonic() > deadline:
                raise AssertionError("A response neither completed nor saw its client leave.")
            time.sleep(0.01)


@dataclass
class Call:
    id: str
    name: str
    fragments: Sequence[str]


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else orjson.dumps(data).decode()
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# -- OpenAI Chat Completions -------------------------------------------------------------------

_OPENAI_BASE = {"id": "chatcmpl-loopback1", "object": "chat.completion.chunk", "created": 1731749688,
                "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_45cf54deae"}


def _openai_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return sse({**_OPENAI_BASE, "usage": None,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})


def _openai_end(finish: str, prompt_tokens: int, completion_tokens: int) -> Iterator[Frame]:
    yield sse({**_OPENAI_BASE, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}],
               "usage": None})
    yield sse({**_OPENAI_BASE, "choices": [], "usage": {
        "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0,
                                      "rejected_prediction_tokens": 0}}})
    yield sse("[DONE]")


def openai_tool_calls(calls: Sequence[Call], pause: float = 0.0) -> Turn:
    frames: Turn = [_openai_chunk({"role": "assistant", "content": None})]
    for index, call in enumerate(calls):
        frames.append(_openai_chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                                     "function": {"name": call.name, "arguments": ""}}]}))
        for fragment in call.fragments:
            frames.append(_openai_chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}))
        if pause:
            frames.append(pause)
    frames.extend(_openai_end("tool_calls", 82, 50))
    return frames


def openai_text(pieces: Sequence[str], pause: float = 0.0) -> Turn:
    frames: Turn = [_openai_chunk({"role": "assistant", "content": ""})]
    for piece in pieces:
        frames.append(_openai_chunk({"content": piece}))
        if pause:
            frames.append(pause)
    frames.extend(_openai_end("stop", 140, 12))
    return frames


# -- Anthropic Messages ------------------------------------------------------------------------


def _anthropic_start(input_tokens: int) -> Turn:
    return [
        sse({"type": "message_start", "message": {
            "id": "msg_01Loopback", "type": "message", "role": "assistant", "model": "claude-3-opus-20240229",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 8}}}, "message_start"),
        sse('{"type": "ping"}', "ping"),
    ]


def _anthropic_text_block(index: int, pieces: Sequence[str], pause: float = 0.0) -> Turn:
    frames: Turn = [sse({"type": "content_block_start", "index": index,
                         "content_block": {"type": "text", "text": ""}}, "content_block_start")]
    for piece in pieces:
        frames.append(sse({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": piece}}, "content_block_delta"))
        if pause:
            frames.append(pause)
    frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    return frames


def _anthropic_end(stop_reason: str, output_tokens: int) -> Turn:
    return [
        sse({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": {"output_tokens": output_tokens}}, "message_delta"),
        sse({"type": "message_stop"}, "message_stop"),
    ]


def anthropic_tool_calls(text: Sequence[str], calls: Sequence[Call], pause_after_call: float = 0.0) -> Turn:
    frames = _anthropic_start(469)
    index = 0
    if text:
        frames += _anthropic_text_block(0, text)
        index = 1
    for call in calls:
        frames.append(sse({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": call.id, "name": call.name, "input": {}}}, "content_block_start"))
        frames.append(sse({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": ""}}, "content_block_delta"))
        for fragment in call.fragments:
            frames.append(sse({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": fragment}},
                              "content_block_delta"))
        frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        if pause_after_call:
            frames.append(pause_after_call)
        index += 1
    frames += _anthropic_end("tool_use", 104)
    return frames


def anthropic_text(pieces: Sequence[str], pause: float = 0.0) -> Turn:
    return _anthropic_start(720) + _anthropic_text_block(0, pieces, pause) + _anthropic_end("end_turn", 20)
