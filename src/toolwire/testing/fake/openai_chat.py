"""A fake OpenAI Chat Completions server (`POST /v1/chat/completions`, `stream: true`).

The stream is what api.openai.com sends today (checked against the recordings in the tests): a role
chunk, `chat.completion.chunk` objects with `service_tier`, `system_fingerprint` and an `obfuscation`
pad, tool calls opened by an entry with `index`, `id`, `type` and name and continued by argument
fragments, a finish chunk with an empty delta, a usage-only chunk with `choices: []` when the request
asked for `stream_options.include_usage` (and `"usage": null` on every chunk before it), then
`data: [DONE]`. Thinking is sent as `delta.reasoning`, as OpenAI-compatible hosts (Groq, OpenRouter,
Ollama) do; OpenAI itself does not stream reasoning on this endpoint. Errors inside the stream are a
`data: {"error": {...}}` event; HTTP errors use OpenAI's indented `{"error": {...}}` body.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Iterator
from typing import Any

import orjson

from ...messages import FilePart, Message, Part, TextPart, ToolCallPart, ToolResultPart
from ...wire._files import FILE_LABEL, RESULT_FILES_INTRO
from ...wire.mistral import TOOL_RESULTS_BRIDGE
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
    random_hex,
    require_dict,
    require_list,
    sse,
    tool_definition,
)
from ._files import attach_result_files, file_from_url, text_part
from ._turns import FakeStreamError, FakeText, FakeThinking, FakeToolCall, FakeTurn, FakeUsage

__all__ = ["OpenAIChatEncoder", "Protocol", "decode_chat_messages", "decode_chat_tools"]

_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def decode_chat_messages(raw_messages: list[Any]) -> list[Message]:
    """Chat Completions messages → toolwire messages (consecutive `tool` messages become one user message)."""
    out: list[Message] = []
    names: dict[str, str] = {}
    results: list[Part] = []
    for raw in raw_messages:
        entry = require_dict(raw, "Each message")
        role = entry.get("role")
        user_parts = chat_user_parts(entry.get("content")) if role == "user" else []
        if role == "user" and not results and _bridged_results(out) and _opens_with_result_files(user_parts):
            # Mistral's request has a short assistant turn between the results and their files (see
            # `toolwire.wire.mistral`): the bridge is dropped and the files go back onto those results.
            out.pop()
            results = out.pop().parts
        if role == "user" and results:
            rest = attach_result_files(results, user_parts)
            if rest is not None:
                if not rest:
                    continue  # the files of the results before it: the round goes on
                user_parts = rest
        if role != "tool" and results:
            out.append(Message(role="user", parts=results))
            results = []
        if role in ("system", "developer"):
            out.append(Message.system(content_text(entry.get("content"))))
        elif role == "user":
            out.append(Message(role="user", parts=user_parts or [TextPart(text="")]))
        elif role == "assistant":
            parts: list[Part] = []
            text = content_text(entry.get("content"))
            if text:
                parts.append(TextPart(text=text))
            for call in require_list(entry.get("tool_calls"), "tool_calls"):
                function = require_dict(require_dict(call, "A tool call").get("function"), "A tool call's function")
                call_id = str(call.get("id") or "")
                name = str(function.get("name") or "")
                names[call_id] = name
                arguments = function.get("arguments")
                raw_text = arguments if isinstance(arguments, str) else orjson.dumps(arguments or {}).decode()
                parts.append(ToolCallPart(id=call_id, name=name, arguments=parse_arguments(arguments),
                                          arguments_raw=raw_text))
            out.append(Message(role="assistant", parts=parts))
        elif role == "tool":
            call_id = str(entry.get("tool_call_id") or "")
            results.append(ToolResultPart(call_id=call_id, name=str(entry.get("name") or names.get(call_id, "")),
                                          result=parse_result(entry.get("content"))))
        else:
            raise RequestError(400, f"Invalid value for 'role': {role!r}. Supported values are: 'system', "
                                    "'developer', 'user', 'assistant' and 'tool'.")
    if results:
        out.append(Message(role="user", parts=results))
    return out


def _bridged_results(out: list[Message]) -> bool:
    """Whether `out` ends with tool results and Mistral's bridge turn after them."""
    return (len(out) >= 2 and out[-1].role == "assistant" and out[-1].text == TOOL_RESULTS_BRIDGE
            and not out[-1].tool_calls and bool(out[-2].parts)
            and all(isinstance(p, ToolResultPart) for p in out[-2].parts))


def _opens_with_result_files(parts: list[Part]) -> bool:
    return bool(parts) and isinstance(parts[0], TextPart) and RESULT_FILES_INTRO.match(parts[0].text) is not None


def chat_user_parts(content: Any) -> list[Part]:
    """A user message's content: text, `image_url`, `file` (OpenAI) and `document_url` (Mistral) blocks."""
    if not isinstance(content, list):
        return [TextPart(text=content_text(content))]
    parts: list[Part] = []
    for block in content:
        if isinstance(block, str):
            parts.append(TextPart(text=block))
            continue
        block = require_dict(block, "A content part")
        kind = block.get("type")
        file: FilePart | None = None
        if kind == "text":
            parts.append(text_part(str(block.get("text", ""))))
        elif kind == "image_url":
            image = block.get("image_url")
            file = file_from_url(image.get("url") if isinstance(image, dict) else image, media_type="image/png")
        elif kind == "file":
            given = require_dict(block.get("file"), "A file part's file")
            file = file_from_url(given.get("file_data"), media_type="application/pdf", name=given.get("filename"))
        elif kind == "document_url":
            file = file_from_url(block.get("document_url"), media_type="application/pdf")
        if file is not None:
            label = FILE_LABEL.match(parts[-1].text) if parts and isinstance(parts[-1], TextPart) else None
            if label is not None:  # `file_labels`: the line before a file names it
                parts[-1] = dataclasses.replace(file, name=label.group(1))
            else:
                parts.append(file)
    return parts


def decode_chat_tools(raw_tools: Any) -> list[Any]:
    tools = []
    for raw in require_list(raw_tools, "tools"):
        function = require_dict(require_dict(raw, "Each tool").get("function"), "A tool's function")
        tools.append(tool_definition(function.get("name"), function.get("description"), function.get("parameters")))
    return tools


def decode_chat_tool_choice(choice: Any) -> str | None:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict):
        function = choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return str(function["name"])
    return None


class OpenAIChatEncoder(ResponseEncoder):
    def __init__(self, request: FakeRequest, rng: random.Random) -> None:
        super().__init__(request, rng)
        self.id = "chatcmpl-" + random_alnum(rng, 29)
        self.created = int(time.time())
        self.fingerprint = "fp_" + random_hex(rng, 10)
        self.include_usage = bool(request.options.get("include_usage"))

    def chunk(self, choices: list[Any], usage: Any = None) -> bytes:
        payload: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.request.model,
            "service_tier": "default",
            "system_fingerprint": self.fingerprint,
            "choices": choices,
        }
        if self.include_usage:
            payload["usage"] = usage
        # OpenAI pads each chunk with random characters so payload sizes do not reveal token lengths.
        payload["obfuscation"] = random_alnum(self.rng, self.rng.randint(2, 15))
        return sse(payload)

    def delta(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self.chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    def content(self, turn: FakeTurn) -> Iterator[bytes]:
        first_is_text = bool(turn.parts) and isinstance(turn.parts[0], FakeText)
        yield self.delta({"role": "assistant", "content": "" if first_is_text else None, "refusal": None})
        index = 0
        for part in turn.parts:
            if isinstance(part, FakeText):
                for piece in part.pieces():
                    yield self.delta({"content": self.count(piece)})
            elif isinstance(part, FakeThinking):
                for piece in part.pieces():
                    yield self.delta({"reasoning": self.count(piece, reasoning=True)})
            elif isinstance(part, FakeToolCall):
                call_id = part.id or "call_" + random_alnum(self.rng, 24)
                yield self.delta({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                                  "function": {"name": part.name, "arguments": ""}}]})
                for piece in part.pieces():
                    yield self.delta({"tool_calls": [{"index": index, "function": {"arguments": self.count(piece)}}]})
                index += 1

    def end(self, turn: FakeTurn, finish: FinishKind, usage: FakeUsage) -> Iterator[bytes]:
        yield self.delta({}, finish)
        if self.include_usage:
            yield self.chunk([], usage_object(usage))
        yield b"data: [DONE]\n\n"

    def error(self, error: FakeStreamError) -> Iterator[bytes]:
        yield sse({"error": {"message": error.message, "type": error.code or "server_error", "param": None,
                             "code": None}})


def usage_object(usage: FakeUsage) -> dict[str, Any]:
    prompt, completion = usage.input_tokens or 0, usage.output_tokens or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
    }


def decode_chat_request(request: FakeRequest, *, default_usage: bool = False) -> dict[str, Any]:
    body = require_dict(request.body, "The request body")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError(400, "You must provide a model parameter.")
    request.model = model
    request.messages = decode_chat_messages(require_list(body.get("messages"), "messages"))
    if not request.messages:
        raise RequestError(400, "Invalid 'messages': empty array. Expected an array with minimum length 1.")
    request.tools = decode_chat_tools(body.get("tools"))
    request.tool_choice = decode_chat_tool_choice(body.get("tool_choice"))
    request.stream = body.get("stream") is True
    options = body.get("stream_options")
    request.options["include_usage"] = (options.get("include_usage") is True if isinstance(options, dict)
                                        else default_usage)
    return body


class Protocol(FakeProtocol):
    name = "openai-chat"
    provider = "openai"
    route = "POST /v1/chat/completions"

    def accepts(self, method: str, path: str) -> bool:
        return method == "POST" and path in ("/v1/chat/completions", "/chat/completions")

    def decode(self, request: FakeRequest) -> None:
        decode_chat_request(request)

    def encoder(self, request: FakeRequest, rng: random.Random) -> ResponseEncoder:
        return OpenAIChatEncoder(request, rng)

    def error_body(self, status: int, message: str, code: str | None, rng: random.Random) -> bytes:
        kind, default_code = _ERROR_KINDS.get(status, ("server_error" if status >= 500 else "invalid_request_error",
                                                       None))
        error = {"message": message, "type": kind, "param": None, "code": code or default_code}
        return json.dumps({"error": error}, indent=4).encode() + b"\n"
