"""A fake Gemini API server (`POST /v1beta/models/{model}:streamGenerateContent`).

With `?alt=sse` the body is SSE with CRLF line endings and no event names; without it, one JSON array
of the same chunks, pretty-printed (`[{...}\\n,\\r\\n{...}\\n]`) — both byte-for-byte as recorded. Each
chunk is a `GenerateContentResponse` written the way Google's servers write JSON (`": "` after keys,
no space after commas) with `usageMetadata` on every chunk, `modelVersion` and a `responseId`.
Thought parts carry `"thought": true`; the first part after thinking carries a `thoughtSignature`.
Function calls arrive whole (Gemini has no call ids and no argument streaming), all in one chunk;
the last chunk is an empty text part with `finishReason` (`STOP` also for calls, or `MAX_TOKENS`).
Errors are `{"error": {"code", "message", "status"}}`, inside the stream or as the HTTP body.

`POST /v1beta/models/{model}:countTokens` takes `contents`, or a whole `generateContentRequest` (with
its `model`, system instruction and tools), and answers `{"totalTokens": N, "promptTokensDetails":
[...]}`; N is `estimate_tokens` of the `generateContentRequest` (or of `{"contents": ...}`).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from ...messages import FilePart, Message, Part, Role, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from ._base import (
    FakeProtocol,
    FakeRequest,
    FinishKind,
    RequestError,
    ResponseEncoder,
    estimate_tokens,
    json_text,
    random_alnum,
    require_dict,
    require_list,
    tool_definition,
)
from ._turns import FakeStreamError, FakeText, FakeThinking, FakeToolCall, FakeTurn, FakeUsage

__all__ = ["GeminiEncoder", "Protocol"]

_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
_FINISH = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS"}
_MODE = {"AUTO": "auto", "ANY": "required", "NONE": "none"}


def google_json(value: Any, *, indent: int | None = None) -> bytes:
    """JSON as Google's frontends write it: a space after colons, none after commas."""
    if indent is not None:
        return json.dumps(value, indent=indent, ensure_ascii=False).encode()
    return json.dumps(value, separators=(",", ": "), ensure_ascii=False).encode()


def _message(entry: dict[str, Any], pending: list[str]) -> Message:
    role: Role = "assistant" if entry.get("role") == "model" else "user"
    parts: list[Part] = []
    for raw in require_list(entry.get("parts"), "contents.parts"):
        part = require_dict(raw, "A part")
        if "functionCall" in part:
            call = require_dict(part["functionCall"], "functionCall")
            name = str(call.get("name", ""))
            call_id = str(call.get("id") or f"{name}#{len(pending)}")
            pending.append(call_id)
            args = call.get("args")
            arguments: dict[str, Any] = args if isinstance(args, dict) else {}
            parts.append(ToolCallPart(id=call_id, name=name, arguments=arguments, arguments_raw=json_text(arguments)))
        elif "functionResponse" in part:
            response = require_dict(part["functionResponse"], "functionResponse")
            name = str(response.get("name", ""))
            # Without ids, responses answer the calls in order.
            call_id = str(response.get("id") or (pending.pop(0) if pending else name))
            files = [f for f in (_file(require_dict(p, "A function response part"))
                                 for p in require_list(response.get("parts"), "functionResponse.parts"))
                     if f is not None]
            parts.append(ToolResultPart(call_id=call_id, name=name, result=response.get("response"), files=files))
        elif (file := _file(part)) is not None:
            parts.append(file)
        elif isinstance(part.get("text"), str):
            if part.get("thought"):
                parts.append(ThinkingPart(text=part["text"], signature=part.get("thoughtSignature")))
            else:
                parts.append(TextPart(text=part["text"]))
    return Message(role=role, parts=parts)


def _file(part: dict[str, Any]) -> FilePart | None:
    """An `inlineData` or `fileData` part as a file part (None for other parts)."""
    inline = part.get("inlineData")
    if isinstance(inline, dict):
        name = inline.get("displayName")
        return FilePart(media_type=str(inline.get("mimeType", "application/octet-stream")),
                        data=str(inline.get("data", "")), name=name if isinstance(name, str) else None)
    given = part.get("fileData")
    if isinstance(given, dict):
        return FilePart(media_type=str(given.get("mimeType", "application/octet-stream")),
                        url=str(given.get("fileUri", "")))
    return None


class GeminiEncoder(ResponseEncoder):
    def __init__(self, request: FakeRequest, rng: random.Random) -> None:
        super().__init__(request, rng)
        self.response_id = random_alnum(rng, 23, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
        self.sse = bool(request.options.get("sse"))
        self.frames = 0
        self.input_tokens = 1
        self.signature: str | None = None

    def frame(self, payload: dict[str, Any]) -> bytes:
        if self.sse:
            return b"data: " + google_json(payload) + b"\r\n\r\n"
        head = b"[" if self.frames == 0 else b"\n,\r\n"
        self.frames += 1
        return head + google_json(payload, indent=2)

    def usage_metadata(self, usage: FakeUsage | None = None) -> dict[str, Any]:
        # Gemini counts thoughts apart from the candidates' tokens (toolwire adds them up again).
        if usage is not None:
            thoughts = usage.reasoning_tokens or 0
            candidates = max(0, (usage.output_tokens or 0) - thoughts)
        else:
            thoughts = self.reasoning_chars // 4
            candidates = max(0, (self.output_chars - self.reasoning_chars) // 4)
        metadata: dict[str, Any] = {"promptTokenCount": self.input_tokens}
        if candidates:
            metadata["candidatesTokenCount"] = candidates
        metadata["totalTokenCount"] = self.input_tokens + candidates + thoughts
        metadata["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": self.input_tokens}]
        if thoughts:
            metadata["thoughtsTokenCount"] = thoughts
        return metadata

    def chunk(self, parts: list[dict[str, Any]], finish: str | None = None, usage: FakeUsage | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if finish:
            candidate["finishReason"] = finish
        candidate["index"] = 0
        return self.frame({"candidates": [candidate], "usageMetadata": self.usage_metadata(usage),
                           "modelVersion": self.request.model, "responseId": self.response_id})

    def signed(self, part: dict[str, Any]) -> dict[str, Any]:
        if self.signature is not None:
            part["thoughtSignature"], self.signature = self.signature, None
        return part

    def content(self, turn: FakeTurn) -> Iterator[bytes]:
        self.input_tokens = self.usage(turn).input_tokens or 1
        calls: list[dict[str, Any]] = []
        for part in turn.parts:
            if isinstance(part, FakeToolCall):
                arguments = part.arguments_object()
                self.count(part.arguments_text())
                calls.append(self.signed({"functionCall": {"name": part.name,
                                                           "args": arguments if isinstance(arguments, dict) else {}}}))
                continue
            if calls:
                yield self.chunk(calls)
                calls = []
            if isinstance(part, FakeThinking):
                for piece in part.pieces():
                    yield self.chunk([{"text": self.count(piece, reasoning=True), "thought": True}])
                self.signature = part.signature or base64.b64encode(self.rng.randbytes(150)).decode()
            elif isinstance(part, FakeText):
                for piece in part.pieces():
                    yield self.chunk([self.signed({"text": self.count(piece)})])
        if calls:
            yield self.chunk(calls)

    def end(self, turn: FakeTurn, finish: FinishKind, usage: FakeUsage) -> Iterator[bytes]:
        yield self.chunk([{"text": ""}], _FINISH[finish], usage)
        if not self.sse:
            yield b"\n]"

    def error(self, error: FakeStreamError) -> Iterator[bytes]:
        status = error.code or "INTERNAL"
        yield self.frame({"error": {"code": 500, "message": error.message, "status": status}})
        if not self.sse:
            yield b"\n]"


class Protocol(FakeProtocol):
    name = "gemini"
    provider = "gemini"
    route = "POST /v1beta/models/{model}:streamGenerateContent?alt=sse"

    def accepts(self, method: str, path: str) -> bool:
        return (method == "POST" and path.startswith(("/v1beta/models/", "/v1/models/"))
                and path.endswith(":streamGenerateContent"))

    def counts(self, method: str, path: str) -> bool:
        return (method == "POST" and path.startswith(("/v1beta/models/", "/v1/models/"))
                and path.endswith(":countTokens"))

    def count(self, request: FakeRequest) -> bytes:
        body = require_dict(request.body, "The request body")
        whole = body.get("generateContentRequest")
        if whole is None:
            counted: dict[str, Any] = {"contents": body.get("contents")}
        elif "contents" in body:
            raise RequestError(400, "contents and generateContentRequest are mutually exclusive; send one of "
                                    "them.")
        else:
            counted = require_dict(whole, "generateContentRequest")
            if not isinstance(counted.get("model"), str) or not counted["model"]:
                raise RequestError(400, "* GenerateContentRequest.model: model is required\n")
        self.decode_body(request, counted)
        tokens = estimate_tokens(counted)
        return google_json({"totalTokens": tokens,
                            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}]}, indent=2) + b"\n"

    def decode(self, request: FakeRequest) -> None:
        self.decode_body(request, require_dict(request.body, "The request body"))

    def decode_body(self, request: FakeRequest, body: dict[str, Any]) -> None:
        """A GenerateContentRequest: the body of a request, or of a token count's `generateContentRequest`."""
        request.model = unquote(request.path.rsplit("/", 1)[-1].rsplit(":", 1)[0])
        request.options["sse"] = request.query.get("alt") == "sse"
        pending: list[str] = []
        system = body.get("systemInstruction")
        messages: list[Message] = []
        if isinstance(system, dict):
            text = "".join(str(p.get("text", "")) for p in require_list(system.get("parts"), "parts")
                           if isinstance(p, dict))
            messages.append(Message.system(text))
        contents = require_list(body.get("contents"), "contents")
        if not contents:
            raise RequestError(400, "* GenerateContentRequest.contents: contents is not specified\n")
        messages.extend(_message(require_dict(c, "Each content"), pending) for c in contents)
        request.messages = messages
        tools = []
        for group in require_list(body.get("tools"), "tools"):
            for declaration in require_list(require_dict(group, "Each tool").get("functionDeclarations"),
                                            "functionDeclarations"):
                declaration = require_dict(declaration, "A function declaration")
                schema = declaration.get("parametersJsonSchema", declaration.get("parameters"))
                tools.append(tool_definition(declaration.get("name"), declaration.get("description"), schema))
        request.tools = tools
        config = body.get("toolConfig")
        calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
        if isinstance(calling, dict):
            allowed = calling.get("allowedFunctionNames")
            if isinstance(allowed, list) and len(allowed) == 1:
                request.tool_choice = str(allowed[0])
            else:
                request.tool_choice = _MODE.get(str(calling.get("mode", "")).upper())

    def response_media_type(self, request: FakeRequest) -> str:
        return "text/event-stream" if request.options.get("sse") else "application/json; charset=UTF-8"

    def encoder(self, request: FakeRequest, rng: random.Random) -> ResponseEncoder:
        return GeminiEncoder(request, rng)

    def error_body(self, status: int, message: str, code: str | None, rng: random.Random) -> bytes:
        error = {"code": status, "message": message, "status": code or _STATUS.get(status, "UNKNOWN")}
        return google_json({"error": error}, indent=2) + b"\n"
