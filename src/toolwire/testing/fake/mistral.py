"""A fake Mistral chat completions server (`POST /v1/chat/completions`, `stream: true`).

Mistral's stream looks like OpenAI's with its own habits, all reproduced here from recordings:
32-hex-digit response ids, no `logprobs`, `system_fingerprint` or `service_tier`; text as string
deltas; thinking as structured content (`[{"type": "thinking", "thinking": [{"type": "text", ...}]}]`);
tool calls delivered *whole*, all together in one delta, with 9-character ids and no `index`, on the
same chunk as `finish_reason` and `usage` (so a turn's argument chunking does not apply here); usage on
the finish chunk, then `data: [DONE]`. An error inside the stream is Mistral's `finish_reason: "error"`
(its chunks carry no error message); HTTP errors use Mistral's `{"object": "error", ...}` body.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

from ._base import (
    FakeProtocol,
    FakeRequest,
    FinishKind,
    ResponseEncoder,
    random_alnum,
    random_hex,
    sse,
)
from ._turns import FakeStreamError, FakeText, FakeThinking, FakeToolCall, FakeTurn, FakeUsage
from .openai_chat import decode_chat_request

__all__ = ["MistralEncoder", "Protocol"]

_ERROR_TYPES = {400: "invalid_request_error", 401: "unauthorized", 404: "invalid_request_error",
                422: "invalid_request_error", 429: "rate_limited"}


class MistralEncoder(ResponseEncoder):
    def __init__(self, request: FakeRequest, rng: random.Random) -> None:
        super().__init__(request, rng)
        self.id = random_hex(rng, 32)
        self.created = int(time.time())
        self.calls: list[dict[str, Any]] = []

    def chunk(self, delta: dict[str, Any], finish: str | None = None, usage: FakeUsage | None = None) -> bytes:
        payload: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.request.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            prompt, completion = usage.input_tokens or 0, usage.output_tokens or 0
            payload["usage"] = {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                                "completion_tokens": completion}
        return sse(payload)

    def content(self, turn: FakeTurn) -> Iterator[bytes]:
        yield self.chunk({"role": "assistant", "content": ""})
        for part in turn.parts:
            if isinstance(part, FakeText):
                for piece in part.pieces():
                    yield self.chunk({"content": self.count(piece)})
            elif isinstance(part, FakeThinking):
                for piece in part.pieces():
                    text = self.count(piece, reasoning=True)
                    yield self.chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]})
            elif isinstance(part, FakeToolCall):
                arguments = part.arguments_object()
                # Mistral writes arguments with Python-style separators (`{"a": 1, "b": 2}`).
                text = (json.dumps(arguments) if isinstance(part.arguments, dict) and part.chunks is None
                        else part.arguments_text())
                self.calls.append({"id": part.id or random_alnum(self.rng, 9),
                                   "function": {"name": part.name, "arguments": self.count(text)}})

    def end(self, turn: FakeTurn, finish: FinishKind, usage: FakeUsage) -> Iterator[bytes]:
        if self.calls:
            yield self.chunk({"tool_calls": self.calls}, finish, usage)
        else:
            yield self.chunk({"content": ""}, finish, usage)
        yield b"data: [DONE]\n\n"

    def error(self, error: FakeStreamError) -> Iterator[bytes]:
        # Mistral's chunks have no error field: a failed generation ends with `finish_reason: "error"`.
        yield self.chunk({"content": ""}, "error")
        yield b"data: [DONE]\n\n"


class Protocol(FakeProtocol):
    name = "mistral"
    provider = "mistral"
    route = "POST /v1/chat/completions"

    def accepts(self, method: str, path: str) -> bool:
        return method == "POST" and path in ("/v1/chat/completions", "/chat/completions")

    def decode(self, request: FakeRequest) -> None:
        decode_chat_request(request)

    def encoder(self, request: FakeRequest, rng: random.Random) -> ResponseEncoder:
        return MistralEncoder(request, rng)

    def error_body(self, status: int, message: str, code: str | None, rng: random.Random) -> bytes:
        kind = _ERROR_TYPES.get(status, "internal_server_error" if status >= 500 else "invalid_request_error")
        return json.dumps({"object": "error", "message": message, "type": kind, "param": None,
                           "code": code}).encode()
