"""What every fake protocol provides: request decoding, response encoding, error bodies.

A fake protocol is the mirror image of a wire protocol in `toolwire.wire`: it reads the request body a
client sends (into toolwire's own `Message` and `ToolDefinition` values, so the automatic responder and
the request log are protocol-neutral) and writes the response body a real provider would stream, frame
by frame. Encoders are lazy generators: the server pulls one frame at a time, so a turn can be cut after
any frame (dropped connection, mid-stream error) with the provider's ids and counters still consistent.
"""

from __future__ import annotations

import random
import string
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import orjson

from ...messages import FilePart, Message, TextPart, ToolResultPart
from ...tools import ToolDefinition
from ._turns import FakeStreamError, FakeTurn, FakeUsage

__all__ = [
    "FakeProtocol",
    "FakeRequest",
    "RequestError",
    "ResponseEncoder",
    "estimate_tokens",
    "random_alnum",
    "random_hex",
    "sse",
]

FinishKind = Literal["stop", "tool_calls", "length"]


@dataclass(slots=True, kw_only=True)
class FakeRequest:
    """One request the fake server received, decoded into protocol-neutral values.

    `headers` are already redacted (API keys and cookies replaced). `messages` and `tools` are what the
    client sent, in toolwire's own model; `body` is the JSON exactly as received.
    """

    protocol: str
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    model: str = ""
    messages: list[Message] = field(default_factory=list)
    tools: list[ToolDefinition] = field(default_factory=list)
    tool_choice: str | None = None
    """`"auto"`, `"none"`, `"required"`, or the name of the one tool that must be called."""
    stream: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    """Protocol details that change the response (OpenAI `include_usage`, Gemini `alt=sse`...)."""

    def pending_results(self) -> list[ToolResultPart]:
        """The tool results at the end of the conversation (the answer to the last round of calls)."""
        for message in reversed(self.messages):
            if message.role == "system":
                continue
            if message.role == "user" and message.tool_results_parts:
                return message.tool_results_parts
            return []
        return []

    def user_files(self) -> list[FilePart]:
        """The files attached to the person's last message (not the tools'), as the provider received them:
        `name`, `media_type`, `data` (base64) or `url`; `file_size(part)` gives the size in bytes. Files the
        tools returned are on the results: `[r.files for r in pending_results()]`."""
        for message in reversed(self.messages):
            if message.role != "user":
                continue
            results = any(isinstance(p, ToolResultPart) for p in message.parts)
            if results and not any(isinstance(p, TextPart) and p.text for p in message.parts):
                continue  # a round of results (with files beside them on some protocols), not the person
            return [p for p in message.parts if isinstance(p, FilePart)]
        return []

    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.role == "user":
                text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
                if text:
                    return text
        return ""

    def tool_rounds(self) -> int:
        """How many assistant turns with tool calls follow the last user text."""
        rounds = 0
        for message in reversed(self.messages):
            if message.role == "user" and any(isinstance(p, TextPart) and p.text for p in message.parts):
                break
            if message.role == "assistant" and (message.tool_calls or message.invalid_tool_calls):
                rounds += 1
        return rounds


class RequestError(Exception):
    """The request cannot be answered; becomes an HTTP error in the provider's shape."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def random_alnum(rng: random.Random, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def random_hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def sse(payload: Any, event: str | None = None) -> bytes:
    """One SSE event with a compact JSON payload (how OpenAI, Anthropic and Cohere write them)."""
    data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + data + b"\n\n"


def json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


class ResponseEncoder(ABC):
    """Writes one response. `content` streams the turn's parts, then `end` or `error` closes it."""

    def __init__(self, request: FakeRequest, rng: random.Random) -> None:
        self.request = request
        self.rng = rng
        self.output_chars = 0
        self.reasoning_chars = 0

    @abstractmethod
    def content(self, turn: FakeTurn) -> Iterator[bytes]:
        """The opening frames and every part of the turn."""

    @abstractmethod
    def end(self, turn: FakeTurn, finish: FinishKind, usage: FakeUsage) -> Iterator[bytes]:
        """The frames of a normal ending (finish reason, usage, terminator)."""

    @abstractmethod
    def error(self, error: FakeStreamError) -> Iterator[bytes]:
        """The frames of an error reported inside the stream."""

    def count(self, piece: str, *, reasoning: bool = False) -> str:
        """Note streamed text for the usage estimate; returns it unchanged."""
        self.output_chars += len(piece)
        if reasoning:
            self.reasoning_chars += len(piece)
        return piece

    def usage(self, turn: FakeTurn) -> FakeUsage:
        """The turn's usage, with counts it leaves out estimated (about four characters per token)."""
        given = turn.usage or FakeUsage()
        input_tokens = given.input_tokens
        if input_tokens is None:
            input_tokens = estimate_tokens(self.request.body)
        output_tokens = given.output_tokens
        if output_tokens is None:
            output_tokens = max(1, self.output_chars // 4)
        reasoning_tokens = given.reasoning_tokens
        if reasoning_tokens is None:
            reasoning_tokens = min(output_tokens, self.reasoning_chars // 4)
        return FakeUsage(input_tokens=input_tokens, output_tokens=output_tokens, reasoning_tokens=reasoning_tokens)


class FakeProtocol(ABC):
    """One provider wire protocol, as a server speaks it."""

    name: ClassVar[str]
    provider: ClassVar[str]
    """The toolwire provider whose default configuration speaks this protocol (for `get_model`)."""
    route: ClassVar[str]
    """The endpoint, as shown in messages (`POST /v1/chat/completions`)."""
    media_type: ClassVar[str] = "text/event-stream"

    @abstractmethod
    def accepts(self, method: str, path: str) -> bool:
        """Whether this is the protocol's streaming endpoint."""

    @abstractmethod
    def decode(self, request: FakeRequest) -> None:
        """Fill `model`, `messages`, `tools`, `tool_choice`, `stream`, `options` from `request.body`.

        Raises `RequestError` for a body the real API would reject.
        """

    @abstractmethod
    def encoder(self, request: FakeRequest, rng: random.Random) -> ResponseEncoder:
        """A fresh encoder for one response."""

    @abstractmethod
    def error_body(self, status: int, message: str, code: str | None, rng: random.Random) -> bytes:
        """The JSON body of an HTTP error, as the provider writes it."""

    def response_media_type(self, request: FakeRequest) -> str:
        return self.media_type

    def counts(self, method: str, path: str) -> bool:
        """Whether this is the protocol's token-counting endpoint (only where the provider has one)."""
        return False

    def count(self, request: FakeRequest) -> bytes:
        """The JSON answer of the token-counting endpoint to `request.body` (see `estimate_tokens`).

        Fills `model`, `messages` and `tools` like `decode`; raises `RequestError` for a body the real
        API would reject.
        """
        raise RequestError(404, f"The {self.name} API has no token-counting endpoint.")


def estimate_tokens(counted: Any) -> int:
    """The fake servers' token count: one token per four bytes of the counted JSON, written compactly.

    Deterministic, so tests can compute it; the same rule estimates a streamed response's input usage
    (over the whole request body there)."""
    return max(1, len(orjson.dumps(counted)) // 4)


def require_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(400, f"{what} must be a JSON object.")
    return value


def require_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RequestError(400, f"{what} must be a JSON array.")
    return value


def content_text(content: Any) -> str:
    """Text out of the usual content shapes: a string, or a list of `{"type": ..., "text": ...}` blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out: list[str] = []
        for block in content:
            if isinstance(block, str):
                out.append(block)
            elif isinstance(block, dict):
                text = block.get("text")
                if isinstance(text, str):
                    out.append(text)
        return "".join(out)
    return json_text(content)


def parse_result(content: Any) -> Any:
    """A tool result as sent: JSON text becomes data again, other text stays text."""
    text = content if isinstance(content, str) else content_text(content)
    stripped = text.strip()
    if stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null") or _is_number(stripped):
        try:
            return orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return text
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str) and raw.strip():
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def tool_definition(name: Any, description: Any, parameters: Any) -> ToolDefinition:
    if not isinstance(name, str) or not name:
        raise RequestError(400, "Every tool needs a non-empty name.")
    params = parameters if isinstance(parameters, dict) else {"type": "object", "properties": {}}
    return ToolDefinition(name=name, description=description if isinstance(description, str) else "",
                          parameters=params)
