"""Limits and what tool results may become on the way out: caps, rate limits, redaction.

- `Limits`: request body size (413), message and title length, per-chat tool concurrency, per-user
  rates of runs and tool calls, the size of a tool result kept and sent.
- `RateLimiter`: per-user token buckets, checked when a run is requested (429 with `Retry-After`).
  Tool calls are counted as they start and a run is refused while the user's tool-call budget is
  spent; a run already going is never stopped halfway by a rate limit. `MemoryRateLimiter` counts in
  this process; a shared one (Redis) implements the same two calls.
- `ResultPolicy`: tool results are data. Each is made plain JSON, configured secrets (of at least
  `MIN_SECRET_CHARS` characters) are replaced by `[REDACTED]` in every string inside it, and one larger than the cap is replaced by a visible marker
  with a preview, before it is stored or streamed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import orjson

from ..messages import Message, ToolResultPart, to_jsonable

__all__ = ["Limits", "MemoryRateLimiter", "RateKind", "RateLimiter", "ResultPolicy"]

RateKind: TypeAlias = Literal["runs", "tool_calls"]

REDACTED = "[REDACTED]"


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one request, chat and user may do.

    Attributes:
        max_body_bytes: Largest request body (413 above it).
        max_message_chars: Longest user message text (422 above it).
        max_title_chars: Longest chat title.
        max_tool_concurrency: Tool calls of one chat running at the same time (the agent's
            `max_parallel_tools` may not be higher).
        runs_per_minute: Runs (messages and approval decisions) one user may start per minute.
        tool_calls_per_minute: Tool calls one user's runs may start per minute.
        max_tool_result_bytes: Largest tool result (as JSON) kept and streamed; larger ones are cut
            to a preview with a marker.
        redact: Secrets to replace by `[REDACTED]` in tool results before they are stored or streamed.
    """

    max_body_bytes: int = 1_000_000
    max_message_chars: int = 32_000
    max_title_chars: int = 500
    max_tool_concurrency: int = 8
    runs_per_minute: int = 60
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

    def __init__(self, runs_per_minute: int, tool_calls_per_minute: int) -> None:
        self._rates: dict[RateKind, float] = {"runs": float(runs_per_minute),
                                              "tool_calls": float(tool_calls_per_minute)}
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
