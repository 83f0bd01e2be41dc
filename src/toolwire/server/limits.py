"""Limits and what tool results may become on the way out: caps, rate limits, redaction.

- `Limits`: request body size (413), message and title length, per-chat tool concurrency, per-user
  rates of runs, tool calls and writes, per-user requests at once, the size of a tool result kept and sent.
- `RateLimiter`: per-user token buckets, checked when a run is requested and, for writes, before a
  write's body is read (429 with `Retry-After`).
  Tool calls are counted as they start and a run is refused while the user's tool-call budget is
  spent; a run already going is never stopped halfway by a rate limit. `MemoryRateLimiter` counts in
  this process; a shared one (Redis) implements the same two calls.
- `UserRequests`: each user's requests answered at once by this process, streams included (429 beyond).
- `ResultPolicy`: tool results are data. Each is made plain JSON, configured secrets (of at least
  `MIN_SECRET_CHARS` characters) are replaced by `[REDACTED]` in every string inside it, and one larger
  than the cap is replaced by a visible marker with a preview, before it is stored or streamed.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import orjson

from ..messages import Message, ToolResultPart, to_jsonable

__all__ = ["Limits", "MemoryRateLimiter", "RateKind", "RateLimiter", "ResultPolicy", "UserRequests"]

RateKind: TypeAlias = Literal["runs", "tool_calls", "writes"]

REDACTED = "[REDACTED]"


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one request, chat and user may do.

    Attributes:
        max_body_bytes: Largest request body (413 above it), and largest last message of a protocol route.
        max_history_bytes: Largest body of the protocol routes (`/api/chat`, `/api/agui`), whose clients
            send their whole copy of the chat with each message (413 above it).
        max_message_chars: Longest user message text (422 above it).
        max_title_chars: Longest chat title.
        max_tool_concurrency: Tool calls of one chat running at the same time (the agent's
            `max_parallel_tools` may not be higher).
        runs_per_minute: Runs (messages and approval decisions) one user may start per minute.
        writes_per_minute: Writes (every `POST`, `PATCH` and `DELETE`: chats created, renamed, deleted,
            messages, decisions, cancellations) one user may make per minute, checked before the body is read.
        max_user_requests: Requests of one user this process answers at once, open streams included
            (429 beyond).
        tool_calls_per_minute: Tool calls one user's runs may start per minute.
        max_tool_result_bytes: Largest tool result (as JSON) kept and streamed; larger ones are cut
            to a preview with a marker.
        redact: Secrets to replace by `[REDACTED]` in tool results before they are stored or streamed.
    """

    max_body_bytes: int = 1_000_000
    max_history_bytes: int = 4_000_000
    max_message_chars: int = 32_000
    max_title_chars: int = 500
    max_tool_concurrency: int = 8
    runs_per_minute: int = 60
    writes_per_minute: int = 120
    max_user_requests: int = 64
    tool_calls_per_minute: int = 600
    max_tool_result_bytes: int = 65_536
    redact: tuple[str, ...] = ()


@runtime_checkable
class RateLimiter(Protocol):
    """Per-user budgets. Both calls return `None` when allowed, else the seconds to wait."""

    async def acquire(self, user_id: str, kind: RateKind) -> float | None:
        """Take one unit of `kind` (or say how long until one is there)."""
        ...

    async def spend(self, user_id: str, kind: RateKind, amount: int = 1) -> None:
        """Count units used (the budget may go below zero; later `acquire`s then wait longer)."""
        ...


class MemoryRateLimiter:
    """Token buckets in this process: `per_minute` units, refilled continuously."""

    def __init__(self, runs_per_minute: int, tool_calls_per_minute: int, writes_per_minute: int = 120) -> None:
        self._rates: dict[RateKind, float] = {"runs": float(runs_per_minute),
                                              "tool_calls": float(tool_calls_per_minute),
                                              "writes": float(writes_per_minute)}
        self._buckets: dict[tuple[str, RateKind], tuple[float, float]] = {}

    def _level(self, user_id: str, kind: RateKind) -> float:
        capacity = self._rates[kind]
        level, stamp = self._buckets.get((user_id, kind), (capacity, time.monotonic()))
        now = time.monotonic()
        level = min(capacity, level + (now - stamp) * capacity / 60.0)
        self._buckets[(user_id, kind)] = (level, now)
        return level

    async def acquire(self, user_id: str, kind: RateKind) -> float | None:
        level = self._level(user_id, kind)
        if kind == "tool_calls":
            # Tool calls are spent as they happen; a run may start while any budget is left.
            return None if level > 0 else (1 - level) * 60.0 / self._rates[kind]
        if level >= 1:
            self._buckets[(user_id, kind)] = (level - 1, time.monotonic())
            return None
        return (1 - level) * 60.0 / self._rates[kind]

    async def spend(self, user_id: str, kind: RateKind, amount: int = 1) -> None:
        level = self._level(user_id, kind)
        floor = -self._rates[kind]
        self._buckets[(user_id, kind)] = (max(floor, level - amount), time.monotonic())


MIN_SECRET_CHARS = 8
"""Shorter values are not redacted: a one-letter "key" would turn every such letter of every result into
`[REDACTED]`, corrupting results while hiding nothing a guess would not find."""


class UserRequests:
    """The requests of each user being answered in this process (a stream counts until it closes).

    `enter` takes a place for the user, or says no when `limit` are taken; the place is given back by
    calling what `enter` stored in the request's ASGI scope (`RELEASE`), which `ReleaseUserRequests`
    does once the response is over, however it ended.
    """

    RELEASE = "toolwire.release_request"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}

    def enter(self, user_id: str, scope: MutableMapping[str, Any]) -> bool:
        if scope.get(self.RELEASE) is not None:
            return True  # this request already holds its place
        count = self._open.get(user_id, 0)
        if count >= self.limit:
            return False
        self._open[user_id] = count + 1
        scope[self.RELEASE] = lambda: self._leave(user_id)
        return True

    def _leave(self, user_id: str) -> None:
        count = self._open.pop(user_id, 1) - 1
        if count > 0:
            self._open[user_id] = count

    def open(self, user_id: str) -> int:
        return self._open.get(user_id, 0)


class ReleaseUserRequests:
    """ASGI middleware: gives back the request's `UserRequests` place once its response is over."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            release = scope.pop(UserRequests.RELEASE, None)
            if release is not None:
                release()


class ResultPolicy:
    """Makes tool results safe to store and stream: JSON only, secrets redacted, size capped."""

    def __init__(self, *, max_bytes: int, secrets: Iterable[str] = ()) -> None:
        self.max_bytes = max_bytes
        # Longest first, so a secret containing another is replaced whole.
        self.secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    def _redact(self, value: Any) -> Any:
        if isinstance(value, str):
            for secret in self.secrets:
                if secret in value:
                    value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, list):
            return [self._redact(v) for v in value]
        if isinstance(value, dict):
            return {self._redact(k): self._redact(v) for k, v in value.items()}
        return value

    def value(self, value: Any) -> Any:
        """A result value made safe (the same object when nothing had to change)."""
        try:
            data = orjson.dumps(value)
        except TypeError:  # not plain JSON: made plain the way the agent makes tool return values
            value = to_jsonable(value)
            try:
                data = orjson.dumps(value)
            except TypeError:  # still not (integers beyond 64 bits, say): its text, rather than a failed run
                value = str(value)
                data = orjson.dumps(value)
        if self.secrets and any(s.encode() in data for s in self.secrets):
            value = self._redact(value)
            data = orjson.dumps(value)
        if len(data) > self.max_bytes:
            preview = data[: self.max_bytes].decode("utf-8", "ignore")
            value = {"truncated": True, "original_bytes": len(data), "preview": preview,
                     "note": f"The tool result was {len(data):,} bytes; only its first {self.max_bytes:,} are kept."}
        return value

    def result(self, part: ToolResultPart) -> ToolResultPart:
        value = self.value(part.result)
        return part if value is part.result else replace(part, result=value)

    def message(self, message: Message) -> Message:
        """The message with each of its tool results made safe."""
        if not any(isinstance(p, ToolResultPart) for p in message.parts):
            return message
        parts = [self.result(p) if isinstance(p, ToolResultPart) else p for p in message.parts]
        return replace(message, parts=parts)
