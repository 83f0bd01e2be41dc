"""Replaying a captured response body through a wire parser, without a network.

`replay(protocol, body)` is what `toolwire replay` runs; tests and users use it to see exactly how
toolwire reads a stream they captured. It never raises on bad input: the problem is in `error`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._accumulate import Accumulator, new_call_id
from .events import ErrorEvent, Event, FinishReason, Usage
from .messages import Message
from .wire import protocol_class
from .wire._base import SSEParser

__all__ = ["ReplayResult", "payload_lines_to_sse", "replay"]


@dataclass(slots=True, kw_only=True)
class ReplayResult:
    events: list[Event]
    message: Message
    finish_reason: FinishReason | None
    usage: Usage | None
    error: ErrorEvent | None

    def to_json_data(self) -> dict[str, Any]:
        """The `toolwire replay --json` object."""
        return {
            "message": self.message.to_dict(),
            "finish_reason": self.finish_reason,
            "usage": None if self.usage is None else {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "error": None if self.error is None else {
                "type": self.error.error_type,
                "message": self.error.message,
            },
        }


def payload_lines_to_sse(body: bytes) -> bytes:
    """One JSON payload per line (as some projects store streams) → SSE `data:` events."""
    return b"".join(b"data: " + line.strip() + b"\n\n" for line in body.splitlines() if line.strip())


def replay(protocol: str, body: bytes, *, chunk_size: int | None = None, previews: bool = True,
           id_factory: Any = new_call_id) -> ReplayResult:
    """Parse a whole captured response body (optionally fed in `chunk_size` pieces)."""
    acc = Accumulator(previews=previews, id_factory=id_factory)
    parser = protocol_class(protocol)().new_parser(acc)
    if isinstance(parser, SSEParser) and body.lstrip().startswith(b"{"):
        body = payload_lines_to_sse(body)
    events: list[Event] = []
    step = chunk_size or len(body) or 1
    for start in range(0, len(body), step):
        parser.feed(body[start:start + step])
        events.extend(acc.events)
        acc.events.clear()
    message = parser.close()
    events.extend(acc.events)
    acc.events.clear()
    return ReplayResult(events=events, message=message, finish_reason=acc.finish_reason, usage=acc.usage,
                        error=acc.error)
