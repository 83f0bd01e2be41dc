"""A fake Cohere v2 chat server (`POST /v2/chat`, `stream: true`).

Named SSE events whose payload repeats the name in `type`, as recorded: `message-start` (a UUID id),
then `tool-plan-delta`s when the response calls tools (Cohere streams the text before its calls as the
*tool plan*, not as content), `content-start` / `content-delta` / `content-end` per text or thinking
block, `tool-call-start` (ids like `get_weather_k3j9x0qp2m1a`, empty `arguments`) / `tool-call-delta` /
`tool-call-end` per call (a call without arguments has no delta), and `message-end` with
`finish_reason` (`COMPLETE`, `TOOL_CALL`, `MAX_TOKENS`) and usage, then a bare `data: [DONE]`.
An error inside the stream is a `message-end` with `finish_reason: ERROR`, `error` and `error_type`.
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Iterator
from typing import Any

import orjson

from ...messages import Message, Part, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from ._base import (
    FakeProtocol,
    FakeRequest,
    FinishKind,
    RequestError,
    ResponseEncoder,
    content_text,
    parse_arguments,
    parse_result,
    random_alnum,
    require_dict,
    require_list,
    sse,
)
from ._turns import FakeStreamError, FakeText, FakeThinking, FakeToolCall, FakeTurn, FakeUsage
from .openai_chat import chat_user_parts, decode_chat_tools

__all__ = ["CohereEncoder", "Protocol"]

_FINISH = {"stop": "COMPLETE", "tool_calls": "TOOL_CALL", "length": "MAX_TOKENS"}


def _result(content: Any) -> Any:
    """A tool message's content: text, or Cohere's `[{"type": "document", "document": {"data": ...}}]`."""
    if isinstance(content, list):
        documents = [block.get("document", {}).get("data") for block in content
                     if isinstance(block, dict) and block.get("type") == "document"]
        if documents:
            values = [parse_result(d) if isinstance(d, str) else d for d in documents]
            return values[0] if len(values) == 1 else values
    return parse_result(content_text(content))


def _decode_messages(raw_messages: list[Any]) -> list[Message]:
    out: list[Message] = []
    names: dict[str, str] = {}
    results: list[Part] = []
    for raw in raw_messages:
        entry = require_dict(raw, "Each message")
        role = entry.get("role")
        if role != "tool" and results:
            out.append(Message(role="user", parts=results))
            results = []
        if role == "system":
            out.append(Message.system(content_text(entry.get("content"))))
        elif role == "user":
            # Cohere's user content takes text and `image_url` blocks, as OpenAI chat's does.
            out.append(Message(role="user", parts=chat_user_parts(entry.get("content"))))
        elif role == "assistant":
            parts: list[Part] = []
            content = entry.get("content")
            if isinstance(content, list):
                parts.extend(ThinkingPart(text=str(block.get("thinking", ""))) for block in content
                             if isinstance(block, dict) and block.get("type") == "thinking")
            if isinstance(entry.get("tool_plan"), str) and entry["tool_plan"]:
                parts.append(TextPart(text=entry["tool_plan"]))
            text = content_text([b for b in content if isinstance(b, dict) and b.get("type") == "text"]
                                if isinstance(content, list) else content)
            if text:
                parts.append(TextPart(text=text))
            for call in require_list(entry.get("tool_calls"), "tool_calls"):
                function = require_dict(require_dict(call, "A tool call").get("function"), "A tool call's function")
                call_id, name = str(call.get("id", "")), str(function.get("name", ""))
                names[call_id] = name
                arguments = function.get("arguments")
                parts.append(ToolCallPart(id=call_id, name=name, arguments=parse_arguments(arguments),
                                          arguments_raw=arguments if isinstance(arguments, str) else "{}"))
            out.append(Message(role="assistant", parts=parts))
        elif role == "tool":
            call_id = str(entry.get("tool_call_id", ""))
            results.append(ToolResultPart(call_id=call_id, name=names.get(call_id, ""),
                                          result=_result(entry.get("content"))))
        else:
            raise RequestError(400, f"invalid request: message role must be one of 'system', 'user', "
                                    f"'assistant' or 'tool', got {role!r}.")
    if results:
        out.append(Message(role="user", parts=results))
    return out


class CohereEncoder(ResponseEncoder):
    def __init__(self, request: FakeRequest, rng: random.Random) -> None:
        super().__init__(request, rng)
        self.id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        self.block = 0
        self.call = 0

    def event(self, payload: dict[str, Any]) -> bytes:
        return sse(payload, payload["type"])

    def content(self, turn: FakeTurn) -> Iterator[bytes]:
        yield self.event({"id": self.id, "type": "message-start", "delta": {"message": {
            "role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}})
        calls_follow = [isinstance(p, FakeToolCall) for p in turn.parts]
        for position, part in enumerate(turn.parts):
            if isinstance(part, FakeText) and any(calls_follow[position:]):
                for piece in part.pieces():
                    yield self.event({"type": "tool-plan-delta",
                                      "delta": {"message": {"tool_plan": self.count(piece)}}})
            elif isinstance(part, (FakeText, FakeThinking)):
                key = "thinking" if isinstance(part, FakeThinking) else "text"
                yield self.event({"type": "content-start", "index": self.block,
                                  "delta": {"message": {"content": {"type": key, key: ""}}}})
                for piece in part.pieces():
                    yield self.event({"type": "content-delta", "index": self.block, "delta": {
                        "message": {"content": {key: self.count(piece, reasoning=key == "thinking")}}}})
                yield self.event({"type": "content-end", "index": self.block})
                self.block += 1
            elif isinstance(part, FakeToolCall):
                call_id = part.id or f"{part.name}_{random_alnum(self.rng, 12, string.ascii_lowercase + string.digits)}"
                yield self.event({"type": "tool-call-start", "index": self.call, "delta": {"message": {"tool_calls": {
                    "id": call_id, "type": "function", "function": {"name": part.name, "arguments": ""}}}}})
                pieces = part.pieces() if part.arguments_text().strip() not in ("", "{}") or part.chunks else []
                for piece in pieces:
                    yield self.event({"type": "tool-call-delta", "index": self.call, "delta": {"message": {
                        "tool_calls": {"function": {"arguments": self.count(piece)}}}}})
                yield self.event({"type": "tool-call-end", "index": self.call})
                self.call += 1

    def end(self, turn: FakeTurn, finish: FinishKind, usage: FakeUsage) -> Iterator[bytes]:
        tokens = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
        yield self.event({"type": "message-end", "delta": {"finish_reason": _FINISH[finish],
                                                           "usage": {"billed_units": tokens, "tokens": tokens}}})
        yield b"data: [DONE]\n\n"

    def error(self, error: FakeStreamError) -> Iterator[bytes]:
        yield self.event({"type": "message-end", "delta": {"finish_reason": "ERROR", "usage": {},
                                                           "error": error.message,
                                                           "error_type": error.code or "INTERNAL_ERROR"}})
        yield b"data: [DONE]\n\n"


class Protocol(FakeProtocol):
    name = "cohere"
    provider = "cohere"
    route = "POST /v2/chat"

    def accepts(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/v2/chat"

    def decode(self, request: FakeRequest) -> None:
        body = require_dict(request.body, "The request body")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise RequestError(400, "invalid request: model must be specified.")
        request.model = model
        request.messages = _decode_messages(require_list(body.get("messages"), "messages"))
        request.tools = decode_chat_tools(body.get("tools"))
        choice = body.get("tool_choice")
        request.tool_choice = str(choice).lower() if isinstance(choice, str) else None
        request.stream = body.get("stream") is True

    def encoder(self, request: FakeRequest, rng: random.Random) -> ResponseEncoder:
        return CohereEncoder(request, rng)

    def error_body(self, status: int, message: str, code: str | None, rng: random.Random) -> bytes:
        return orjson.dumps({"id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "message": message})
