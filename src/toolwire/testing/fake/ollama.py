"""A fake Ollama server (`POST /api/chat`, newline-delimited JSON).

Every line is a whole JSON object with `model`, an RFC 3339 `created_at` and the message so far's
delta: `content` for text, `thinking` for reasoning, `tool_calls` for calls — which Ollama sends whole
(arguments as an object, `call_` ids and a `function.index`), all together in one line. The last line
has `done: true`, `done_reason` (`stop`, also after calls, or `length`) and Ollama's timing counters
(`prompt_eval_count` and `eval_count` are the token counts). Errors are `{"error": "..."}`, as a line
inside the stream or as the HTTP body.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from datetime import UTC, datetime
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
    json_text,
    parse_arguments,
    parse_result,
    random_alnum,
    require_dict,
    require_list,
)
from ._files import image_type
from ._turns import FakeStreamError, FakeText, FakeThinking, FakeToolCall, FakeTurn, FakeUsage
from .openai_chat import decode_chat_tools

__all__ = ["OllamaEncoder", "Protocol"]


def _decode_messages(raw_messages: list[Any]) -> list[Message]:
    out: list[Message] = []
    names: dict[str, str] = {}
    results: list[Part] = []
    pending: list[str] = []
    for raw in raw_messages:
        entry = require_dict(raw, "Each message")
        role = entry.get("role")
        if role != "tool" and results:
            out.append(Message(role="user", parts=results))
            results = []
        content = content_text(entry.get("content"))
        if role == "system":
            out.append(Message.system(content))
        elif role == "user":
            user_parts: list[Part] = [TextPart(text=content)] if content or not entry.get("images") else []
            user_parts.extend(_images(entry))
            out.append(Message(role="user", parts=user_parts))
        elif role == "assistant":
            parts: list[Part] = []
            if isinstance(entry.get("thinking"), str) and entry["thinking"]:
                parts.append(ThinkingPart(text=entry["thinking"]))
            if content:
                parts.append(TextPart(text=content))
            for call in require_list(entry.get("tool_calls"), "tool_calls"):
                function = require_dict(require_dict(call, "A tool call").get("function"), "A tool call's function")
                name = str(function.get("name", ""))
                call_id = str(call.get("id") or f"{name}#{len(names)}")
                names[call_id] = name
                pending.append(call_id)
                arguments = parse_arguments(function.get("arguments"))
                parts.append(ToolCallPart(id=call_id, name=name, arguments=arguments,
                                          arguments_raw=json_text(arguments)))
            out.append(Message(role="assistant", parts=parts))
        elif role == "tool":
            # Ollama names the tool (`tool_name`) rather than the call; results answer the calls in order.
            call_id = str(entry.get("tool_call_id") or (pending.pop(0) if pending else ""))
            name = str(entry.get("tool_name") or entry.get("name") or names.get(call_id, ""))
            results.append(ToolResultPart(call_id=call_id, name=name, result=parse_result(content),
                                          files=_images(entry)))
        else:
            raise RequestError(400, f"invalid role: {role}")
    if results:
        out.append(Message(role="user", parts=results))
    return out


def _images(entry: dict[str, Any]) -> list[FilePart]:
    """A message's `images` (base64, any role) as file parts; their type is read from their first bytes."""
    images = [i for i in require_list(entry.get("images"), "images") if isinstance(i, str)]
    return [FilePart(media_type=image_type(data), data=data) for data in images]


class OllamaEncoder(ResponseEncoder):
    def line(self, message: dict[str, Any], **extra: Any) -> bytes:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return orjson.dumps({"model": self.request.model, "created_at": stamp, "message": message, **extra}) + b"\n"

    def content(self, turn: FakeTurn) -> Iterator[bytes]:
        calls: list[dict[str, Any]] = []
        for part in turn.parts:
            if isinstance(part, FakeToolCall):
                arguments = part.arguments_object()
                self.count(part.arguments_text())
                call_id = part.id or "call_" + random_alnum(self.rng, 8, string.ascii_lowercase + string.digits)
                calls.append({"id": call_id,
                              "function": {"index": len(calls), "name": part.name, "arguments": arguments}})
                continue
            if calls:
                yield self.line({"role": "assistant", "content": "", "tool_calls": calls}, done=False)
                calls = []
            if isinstance(part, FakeThinking):
                for piece in part.pieces():
                    yield self.line({"role": "assistant", "content": "", "thinking": self.count(piece, reasoning=True)},
                                    done=False)
            elif isinstance(part, FakeText):
                for piece in part.pieces():
                    yield self.line({"role": "assistant", "content": self.count(piece)}, done=False)
        if calls:
            yield self.line({"role": "assistant", "content": "", "tool_calls": calls}, done=False)

    def end(self, turn: FakeTurn, finish: FinishKind, usage: FakeUsage) -> Iterator[bytes]:
        prompt, completion = usage.input_tokens or 0, usage.output_tokens or 0
        yield self.line({"role": "assistant", "content": ""}, done_reason="length" if finish == "length" else "stop",
                        done=True, total_duration=(prompt + completion) * 5_000_000 + 40_000_000,
                        load_duration=38_000_000, prompt_eval_count=prompt, prompt_eval_duration=prompt * 1_500_000,
                        eval_count=completion, eval_duration=completion * 5_000_000)

    def error(self, error: FakeStreamError) -> Iterator[bytes]:
        yield orjson.dumps({"error": error.message}) + b"\n"


class Protocol(FakeProtocol):
    name = "ollama"
    provider = "ollama"
    route = "POST /api/chat"
    media_type = "application/x-ndjson"

    def accepts(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/api/chat"

    def decode(self, request: FakeRequest) -> None:
        body = require_dict(request.body, "The request body")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise RequestError(400, "model is required")
        request.model = model
        request.messages = _decode_messages(require_list(body.get("messages"), "messages"))
        request.tools = decode_chat_tools(body.get("tools"))
        request.stream = body.get("stream", True) is not False

    def encoder(self, request: FakeRequest, rng: random.Random) -> ResponseEncoder:
        return OllamaEncoder(request, rng)

    def error_body(self, status: int, message: str, code: str | None, rng: random.Random) -> bytes:
        return orjson.dumps({"error": message})
