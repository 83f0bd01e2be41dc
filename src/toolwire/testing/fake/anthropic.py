"""A fake Anthropic Messages server (`POST /v1/messages`, `stream: true`).

Each SSE event carries its `event:` name and the same `type` in its payload, as recorded:
`message_start` (with `msg_01...` id and input usage), then per content block `content_block_start`,
`content_block_delta`* and `content_block_stop` (a `ping` follows the first block start), then
`message_delta` with `stop_reason` (`end_turn`, `tool_use`, `max_tokens`) and output usage, and
`message_stop`. Thinking blocks stream `thinking_delta`s and end with a `signature_delta`; tool_use
blocks (`toolu_01...` ids) open with an empty `input_json_delta`, and a call without arguments sends
only that one. Errors inside the stream are `event: error` with `{"type": "error", "error": {...}}`,
the same shape as HTTP error bodies (which also carry a `request_id`).

`POST /v1/messages/count_tokens` answers `{"input_tokens": N}` for the same model, system, messages and
tools (and refuses `max_tokens` and `stream`, as the real endpoint does); N is `estimate_tokens` of the
body received.
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Iterator
from typing import Any

import orjson

from ...messages import FilePart, Message, Part, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from ._base import (
    FakeProtocol,
    FakeRequest,
    FinishKind,
    RequestError,
    ResponseEncoder,
    content_text,
    estimate_tokens,
    parse_result,
    random_alnum,
    require_dict,
    require_list,
    sse,
    tool_definition,
)
from ._files import file_from_url
from ._turns import FakeStreamError, FakeText, FakeThinking, FakeToolCall, FakeTurn, FakeUsage

__all__ = ["AnthropicEncoder", "Protocol"]

_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                529: "overloaded_error"}
# Anthropic ids use a base58-like alphabet after their `01` version prefix.
_ID_ALPHABET = "".join(c for c in string.ascii_letters + string.digits if c not in "0OIl")


def _message(entry: dict[str, Any], names: dict[str, str]) -> Message:
    role = entry.get("role")
    if role not in ("user", "assistant"):
        raise RequestError(400, f"messages: Unexpected role {role!r}. Allowed roles are 'user' or 'assistant'.")
    content = entry.get("content")
    if isinstance(content, str):
        return Message(role=role, parts=[TextPart(text=content)])
    parts: list[Part] = []
    for block in require_list(content, "messages.content"):
        block = require_dict(block, "A content block")
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(text=str(block.get("text", ""))))
        elif kind == "thinking":
            parts.append(ThinkingPart(text=str(block.get("thinking", "")), signature=block.get("signature")))
        elif kind == "tool_use":
            call_id, name = str(block.get("id", "")), str(block.get("name", ""))
            names[call_id] = name
            given = block.get("input")
            arguments: dict[str, Any] = given if isinstance(given, dict) else {}
            parts.append(ToolCallPart(id=call_id, name=name, arguments=arguments,
                                      arguments_raw=orjson.dumps(arguments).decode()))
        elif kind == "tool_result":
            call_id = str(block.get("tool_use_id", ""))
            content = block.get("content") or ""
            files: list[FilePart] = []
            if isinstance(content, list):
                blocks = [require_dict(b, "A tool_result content block") for b in content]
                files = [f for f in map(_file, blocks) if f is not None]
                # The first text block is the result; a later one is the note on files that could not go.
                content = next((str(b.get("text", "")) for b in blocks if b.get("type") == "text"), "")
            parts.append(ToolResultPart(call_id=call_id, name=names.get(call_id, ""), result=parse_result(content),
                                        is_error=bool(block.get("is_error")), files=files))
        else:
            file = _file(block)
            if file is not None:
                parts.append(file)
    return Message(role=role, parts=parts)


def _file(block: dict[str, Any]) -> FilePart | None:
    """An `image` or `document` block (base64, url or text source) as a file part; None for other blocks."""
    kind = block.get("type")
    if kind not in ("image", "document"):
        return None
    source = require_dict(block.get("source"), f"An {kind} block's source")
    title = block.get("title") if isinstance(block.get("title"), str) else None
    media_type = str(source.get("media_type") or ("image/png" if kind == "image" else "application/pdf"))
    if source.get("type") == "base64":
        return FilePart(media_type=media_type, data=str(source.get("data", "")), name=title)
    if source.get("type") == "text":
        data = base64.b64encode(str(source.get("data", "")).encode()).decode()
        return FilePart(media_type="text/plain", data=data, name=title)
    if source.get("type") == "url":
        return file_from_url(source.get("url"), media_type=media_type, name=title)
    raise RequestError(400, f"{kind}.source.type: Input should be 'base64', 'url' or 'text'.")


class AnthropicEncoder(ResponseEncoder):
    def __init__(self, request: FakeRequest, rng: random.Random) -> None:
        super().__init__(request, rng)
        self.id = "msg_01" + random_alnum(rng, 22, _ID_ALPHABET)
        self.block = 0

    def event(self, payload: dict[str, Any]) -> bytes:
        return sse(payload, payload["type"])

    def start(self, block: dict[str, Any]) -> Iterator[bytes]:
        yield self.event({"type": "content_block_start", "index": self.block, "content_block": block})
        if self.block == 0:
            yield b'event: ping\ndata: {"type": "ping"}\n\n'

    def delta(self, delta: dict[str, Any]) -> bytes:
        return self.event({"type": "content_block_delta", "index": self.block, "delta": delta})

    def stop(self) -> bytes:
        frame = self.event({"type": "content_block_stop", "index": self.block})
        self.block += 1
        return frame

    def content(self, turn: FakeTurn) -> Iterator[bytes]:
        input_tokens = self.usage(turn).input_tokens
        yield self.event({"type": "message_start", "message": {
            "model": self.request.model, "id": self.id, "type": "message", "role": "assistant", "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                      "output_tokens": 1, "service_tier": "standard"}}})
        for part in turn.parts:
            if isinstance(part, FakeText):
                yield from self.start({"type": "text", "text": ""})
                for piece in part.pieces():
                    yield self.delta({"type": "text_delta", "text": self.count(piece)})
            elif isinstance(part, FakeThinking):
                yield from self.start({"type": "thinking", "thinking": "", "signature": ""})
                for piece in part.pieces():
                    yield self.delta({"type": "thinking_delta", "thinking": self.count(piece, reasoning=True)})
                signature = part.signature or random_alnum(self.rng, 240, string.ascii_letters + string.digits + "+/")
                yield self.delta({"type": "signature_delta", "signature": signature})
            elif isinstance(part, FakeToolCall):
                call_id = part.id or "toolu_01" + random_alnum(self.rng, 22, _ID_ALPHABET)
                yield from self.start({"type": "tool_use", "id": call_id, "name": part.name, "input": {}})
                yield self.delta({"type": "input_json_delta", "partial_json": ""})
                pieces = part.pieces() if part.arguments_text().strip() not in ("", "{}") or part.chunks else []
                for piece in pieces:
                    yield self.delta({"type": "input_json_delta", "partial_json": self.count(piece)})
            else:
                continue
            yield self.stop()

    def end(self, turn: FakeTurn, finish: FinishKind, usage: FakeUsage) -> Iterator[bytes]:
        counts: dict[str, Any] = {"input_tokens": usage.input_tokens, "cache_creation_input_tokens": 0,
                                  "cache_read_input_tokens": 0, "output_tokens": usage.output_tokens}
        if usage.reasoning_tokens:
            counts["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
        yield self.event({"type": "message_delta", "delta": {"stop_reason": _STOP[finish], "stop_sequence": None},
                          "usage": counts})
        yield self.event({"type": "message_stop"})

    def error(self, error: FakeStreamError) -> Iterator[bytes]:
        yield self.event({"type": "error", "error": {"type": error.code or "overloaded_error",
                                                     "message": error.message}})


class Protocol(FakeProtocol):
    name = "anthropic"
    provider = "anthropic"
    route = "POST /v1/messages"

    def accepts(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/v1/messages"

    def counts(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/v1/messages/count_tokens"

    def count(self, request: FakeRequest) -> bytes:
        body = require_dict(request.body, "The request body")
        for key in ("max_tokens", "stream"):
            if key in body:
                raise RequestError(400, f"{key}: Extra inputs are not permitted")
        self.decode_input(request, body)
        return orjson.dumps({"input_tokens": estimate_tokens(body)})

    def decode(self, request: FakeRequest) -> None:
        body = require_dict(request.body, "The request body")
        if isinstance(body.get("model"), str) and body["model"] and not isinstance(body.get("max_tokens"), int):
            raise RequestError(400, "max_tokens: Field required")
        self.decode_input(request, body)
        request.stream = body.get("stream") is True

    def decode_input(self, request: FakeRequest, body: dict[str, Any]) -> None:
        """Model, system, messages, tools and tool choice: what a request and a token count share."""
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise RequestError(400, "model: Field required")
        request.model = model
        system = body.get("system")
        names: dict[str, str] = {}
        messages = [Message.system(content_text(system))] if system else []
        messages.extend(_message(require_dict(m, "Each message"), names)
                        for m in require_list(body.get("messages"), "messages"))
        request.messages = messages
        request.tools = [tool_definition(t.get("name"), t.get("description"), t.get("input_schema"))
                         for t in (require_dict(t, "Each tool") for t in require_list(body.get("tools"), "tools"))
                         if "input_schema" in t]
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            kind = choice.get("type")
            named = {"any": "required", "tool": choice.get("name")}
            request.tool_choice = named.get(kind, kind) if isinstance(kind, str) else None

    def encoder(self, request: FakeRequest, rng: random.Random) -> ResponseEncoder:
        return AnthropicEncoder(request, rng)

    def error_body(self, status: int, message: str, code: str | None, rng: random.Random) -> bytes:
        kind = code or _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message},
                             "request_id": "req_011C" + random_alnum(rng, 20, _ID_ALPHABET)})
