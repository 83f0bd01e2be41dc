"""What a fake provider says: scripted turns, and the script that hands them out one request at a time.

A `FakeTurn` describes one streamed response in protocol-neutral terms: text, thinking and tool calls
with the chunking of their text, how the stream ends (a finish reason, a provider error, a dropped
connection) and how fast it goes. Each protocol module in this package encodes a turn in its provider's
exact wire format, so one script exercises every protocol.

Scripts are values: the same turns can be built in Python or loaded from a JSON file (`load_script`)
for `toolwire fake-server --script FILE`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypeAlias

import orjson
from pydantic import Discriminator, TypeAdapter, ValidationError

from ...exceptions import UserError

if TYPE_CHECKING:
    from ._base import FakeRequest

__all__ = [
    "FakeHTTPError",
    "FakeMatch",
    "FakePart",
    "FakeRecording",
    "FakeReply",
    "FakeScript",
    "FakeStreamError",
    "FakeText",
    "FakeThinking",
    "FakeToolCall",
    "FakeTurn",
    "FakeUsage",
    "Responder",
    "load_script",
    "split_pieces",
]

Chunks: TypeAlias = int | list[str] | None
"""How a text is cut into stream fragments: a size in characters, the exact fragments, or None for
word-like pieces (roughly how models stream tokens)."""

_TOKEN = re.compile(r"\s*[A-Za-z0-9_]+|\s*[^A-Za-z0-9_\s]+|\s+")


def split_pieces(text: str, chunks: Chunks, what: str = "text") -> list[str]:
    """Cut `text` into the fragments a fake stream sends."""
    if chunks is None:
        return _TOKEN.findall(text)
    if isinstance(chunks, int):
        if chunks < 1:
            raise UserError(f"The chunk size for {what} must be at least 1 character; got {chunks}.")
        return [text[i:i + chunks] for i in range(0, len(text), chunks)]
    pieces = list(chunks)
    if "".join(pieces) != text:
        raise UserError(f"The chunks given for {what} do not join to its text {text[:80]!r}; "
                        "give fragments that concatenate exactly to it, or a chunk size.")
    return pieces


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeText:
    """Visible text, streamed in `chunks`."""

    text: str
    chunks: Chunks = None
    type: Literal["text"] = "text"

    def pieces(self) -> list[str]:
        return split_pieces(self.text, self.chunks)


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeThinking:
    """Reasoning text. `signature` is sent where the protocol carries one (Anthropic, Gemini)."""

    text: str
    signature: str | None = None
    chunks: Chunks = None
    type: Literal["thinking"] = "thinking"

    def pieces(self) -> list[str]:
        return split_pieces(self.text, self.chunks, "thinking")


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeToolCall:
    """A tool call. `arguments` is an object, or raw argument text (which may be deliberately broken).

    With explicit `chunks` and object arguments, the fragments must join to JSON equal to the object;
    the joined text is then sent verbatim. `id` defaults to an id in the provider's own format.
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    chunks: Chunks = None
    type: Literal["tool_call"] = "tool_call"

    def arguments_text(self) -> str:
        if isinstance(self.chunks, list):
            joined = "".join(self.chunks)
            if isinstance(self.arguments, dict):
                try:
                    same = orjson.loads(joined) == self.arguments
                except orjson.JSONDecodeError:
                    same = False
                if not same:
                    raise UserError(f"The argument chunks of the fake call {self.name!r} do not join to JSON "
                                    f"equal to its arguments {self.arguments!r}.")
            return joined
        if isinstance(self.arguments, str):
            return self.arguments
        return orjson.dumps(self.arguments).decode()

    def arguments_object(self) -> Any:
        """The arguments as JSON data (raw text that does not parse is returned as the string)."""
        if isinstance(self.arguments, dict):
            return self.arguments
        try:
            return orjson.loads(self.arguments) if self.arguments.strip() else {}
        except orjson.JSONDecodeError:
            return self.arguments

    def pieces(self) -> list[str]:
        text = self.arguments_text()
        if isinstance(self.chunks, list):
            return list(self.chunks)
        return split_pieces(text, self.chunks, f"the arguments of {self.name!r}")


FakePart: TypeAlias = Annotated[FakeText | FakeThinking | FakeToolCall, Discriminator("type")]


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeUsage:
    """Token counts to report; a count left None is estimated from the request and the streamed text.

    `output_tokens` includes `reasoning_tokens`, as every provider but Gemini counts them.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeStreamError:
    """An error reported inside the stream, in the provider's own shape.

    `after`: how many frames (SSE events or JSON lines) are sent before the error; None sends the whole
    content and puts the error where the normal ending would be. `code` is the provider's error type.
    """

    message: str = "The server had an error while processing your request. Sorry about that!"
    code: str | None = None
    after: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeMatch:
    """A declarative request matcher (usable from JSON scripts); every field given must hold."""

    text_contains: str | None = None
    """The latest user text contains this (case-insensitive)."""
    has_tool_results: bool | None = None
    """The request does (or does not) end with tool results."""
    tool: str | None = None
    """A tool of this name is offered."""
    model: str | None = None

    def __call__(self, request: FakeRequest) -> bool:
        if self.model is not None and request.model != self.model:
            return False
        if self.tool is not None and self.tool not in {t.name for t in request.tools}:
            return False
        if self.has_tool_results is not None and bool(request.pending_results()) != self.has_tool_results:
            return False
        return self.text_contains is None or self.text_contains.lower() in request.last_user_text().lower()


Matcher: TypeAlias = FakeMatch | Callable[..., bool] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeTurn:
    """One streamed response.

    Args:
        parts: what the response says, in order.
        finish: `"stop"`, `"tool_calls"` or `"length"`; by default `tool_calls` when there are calls.
        usage: token counts (estimated where left out).
        error: end with a provider error inside the stream instead of a normal finish.
        delay: seconds to wait before each frame after the first.
        drop_after: close the connection abruptly after this many frames (httpx sees a transport error).
        drop_mid_frame: with `drop_after`, also send the first half of the next frame before closing.
        match: which requests this turn answers (a `FakeMatch` or any `callable(request) -> bool`).
        repeat: stay in the script after answering, to answer every matching request.
    """

    parts: list[FakePart] = field(default_factory=list)
    finish: Literal["stop", "tool_calls", "length"] | None = None
    usage: FakeUsage | None = None
    error: FakeStreamError | None = None
    delay: float = 0.0
    drop_after: int | None = None
    drop_mid_frame: bool = False
    match: Matcher = None
    repeat: bool = False
    type: Literal["turn"] = "turn"

    @property
    def finish_reason(self) -> Literal["stop", "tool_calls", "length"]:
        if self.finish is not None:
            return self.finish
        return "tool_calls" if any(isinstance(p, FakeToolCall) for p in self.parts) else "stop"


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeHTTPError:
    """An HTTP error answer with the provider's error body (or `body` verbatim).

    `retry_after` adds a `Retry-After` header (seconds), as rate limits (429) and overloads send.
    """

    status: int = 500
    message: str | None = None
    code: str | None = None
    retry_after: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    match: Matcher = None
    repeat: bool = False
    type: Literal["http_error"] = "http_error"

    def text(self) -> str:
        return self.message or _STATUS_MESSAGES.get(self.status, f"The request failed with HTTP {self.status}.")


_STATUS_MESSAGES = {
    400: "The request is invalid.",
    401: "Incorrect API key provided.",
    403: "You do not have access to this resource.",
    404: "The requested resource was not found.",
    429: "Rate limit reached. Please try again later.",
    500: "The server had an error while processing your request.",
    503: "The service is temporarily overloaded. Please try again later.",
    529: "Overloaded",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeRecording:
    """A recorded response body, served as it was recorded (split at its frame boundaries).

    Give `file` (a `.sse`, `.ndjson`, Gemini `.json` array or `.chunks.jsonl` file, the last wrapped
    as SSE) or `body`. The content type follows the file unless `content_type` is given.
    """

    file: str | None = None
    body: str | None = None
    status: int = 200
    content_type: str | None = None
    delay: float = 0.0
    match: Matcher = None
    repeat: bool = False
    type: Literal["recording"] = "recording"

    def respond(self, request: FakeRequest) -> FakeReply:
        """As a responder: answer every request with this recording."""
        return self

    def load(self) -> tuple[list[bytes], str]:
        """The body split into frames, and its content type."""
        from ...replay import payload_lines_to_sse

        if self.file is not None:
            path = Path(self.file)
            try:
                raw = path.read_bytes()
            except OSError as exc:
                raise UserError(f"Could not read the recorded body {path}: {exc.strerror or exc}.") from exc
            name = path.name
        elif self.body is not None:
            raw, name = self.body.encode(), ""
        else:
            raise UserError("A FakeRecording needs a file or a body.")
        if name.endswith(".chunks.jsonl"):
            raw = payload_lines_to_sse(raw)
        content_type = self.content_type or _content_type(name, raw)
        return _frames(raw, content_type), content_type


def _content_type(name: str, raw: bytes) -> str:
    if name.endswith(".ndjson"):
        return "application/x-ndjson"
    if name.endswith(".json") or raw.lstrip()[:1] in (b"[", b"{"):
        return "application/json"
    return "text/event-stream"


def _frames(raw: bytes, content_type: str) -> list[bytes]:
    """Split a body at event (SSE), line (NDJSON) or array-item (JSON) boundaries, keeping every byte."""
    if content_type == "text/event-stream":
        separator = b"\r\n\r\n" if b"\r\n\r\n" in raw else b"\n\n"
    elif content_type == "application/x-ndjson":
        separator = b"\n"
    else:
        separator = b"\n,"
    pieces = raw.split(separator)
    frames = [piece + separator for piece in pieces[:-1]]
    if pieces[-1]:
        frames.append(pieces[-1])
    return frames


FakeReply: TypeAlias = FakeTurn | FakeHTTPError | FakeRecording
"""What answers one request."""


class Responder(Protocol):
    """Anything that chooses the reply to a request: a script, the automatic responder, a recording."""

    def respond(self, request: FakeRequest) -> FakeReply: ...


class FakeScript:
    """Replies handed out in order: each request takes the first remaining reply whose `match` accepts it.

    Replies with `repeat=True` stay in the script. When no reply is left, `then` answers (for example an
    `AutoResponder`); without it the request gets an HTTP 500 that says the script is used up, followed
    by `when_used_up` (what to do about it, in the words of whoever built the script).
    """

    def __init__(self, replies: Iterable[FakeReply], *, then: Responder | None = None,
                 when_used_up: str = "Add turns to the script, or give it then=AutoResponder().") -> None:
        self._remaining: list[FakeReply] = list(replies)
        self.then = then
        self.when_used_up = when_used_up
        self.answered: list[tuple[FakeRequest, FakeReply]] = []
        self._lock = threading.Lock()

    @property
    def remaining(self) -> list[FakeReply]:
        with self._lock:
            return list(self._remaining)

    def respond(self, request: FakeRequest) -> FakeReply:
        with self._lock:
            chosen: FakeReply | None = None
            for position, reply in enumerate(self._remaining):
                if reply.match is None or reply.match(request):
                    chosen = reply
                    if not reply.repeat:
                        del self._remaining[position]
                    break
            if chosen is None:
                if self.then is not None:
                    chosen = self.then.respond(request)
                else:
                    used = len(self.answered)
                    chosen = FakeHTTPError(status=500, message=(
                        f"The fake server's script has no reply left for this request (it answered {used} "
                        f"request(s) already). {self.when_used_up}"))
            self.answered.append((request, chosen))
            return chosen

    @classmethod
    def from_file(cls, path: str | Path, *, then: Responder | None = None) -> FakeScript:
        """Load a JSON script file (see `load_script`)."""
        return cls(load_script(path), then=then)


_ScriptEntry = Annotated[FakeTurn | FakeHTTPError | FakeRecording, Discriminator("type")]
_script_adapter: TypeAdapter[list[_ScriptEntry]] = TypeAdapter(list[_ScriptEntry])


def load_script(source: str | Path | bytes | Sequence[Any], *, base_dir: str | Path | None = None) -> list[FakeReply]:
    """Read a script: a JSON list of replies, or `{"turns": [...]}`.

    Each reply is an object with a `type`: `"turn"` (the default when omitted), `"http_error"` or
    `"recording"`; their fields are the dataclass fields above, parts are `{"type": "text" | "thinking"
    | "tool_call", ...}` and `match` is a `FakeMatch` object. A recording's `file` is relative to the
    script file. Example::

        [{"parts": [{"type": "text", "text": "Let me check."},
                    {"type": "tool_call", "name": "get_weather", "arguments": {"city": "Paris"}}]},
         {"type": "http_error", "status": 429, "retry_after": 1},
         {"parts": [{"type": "text", "text": "It is sunny in Paris."}], "delay": 0.05}]
    """
    where = "the script"
    if isinstance(source, (str, Path)):
        path = Path(source)
        where = f"the script file {path}"
        try:
            raw: Any = orjson.loads(path.read_bytes())
        except OSError as exc:
            raise UserError(f"Could not read {where}: {exc.strerror or exc}.") from exc
        except orjson.JSONDecodeError as exc:
            raise UserError(f"{where[0].upper()}{where[1:]} is not valid JSON: {exc}.") from exc
        base_dir = base_dir if base_dir is not None else path.parent
    elif isinstance(source, bytes):
        try:
            raw = orjson.loads(source)
        except orjson.JSONDecodeError as exc:
            raise UserError(f"The script is not valid JSON: {exc}.") from exc
    else:
        raw = list(source)
    if isinstance(raw, dict) and "turns" in raw:
        raw = raw["turns"]
    if not isinstance(raw, list):
        raise UserError(f"{where[0].upper()}{where[1:]} must hold a JSON list of replies (or {{\"turns\": [...]}}).")
    entries = [{"type": "turn", **item} if isinstance(item, dict) and "type" not in item else item for item in raw]
    try:
        replies: list[FakeReply] = _script_adapter.validate_python(entries)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:5])
        raise UserError(f"{where[0].upper()}{where[1:]} is not a valid script ({problems}).") from exc
    if base_dir is not None:
        replies = [_rebase(reply, Path(base_dir)) for reply in replies]
    return replies


def _rebase(reply: FakeReply, base: Path) -> FakeReply:
    if isinstance(reply, FakeRecording) and reply.file is not None and not Path(reply.file).is_absolute():
        return FakeRecording(file=str(base / reply.file), body=reply.body, status=reply.status,
                             content_type=reply.content_type, delay=reply.delay, match=reply.match,
                             repeat=reply.repeat)
    return reply
