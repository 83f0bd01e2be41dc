"""What must hold for any input, and the mutations that make hostile inputs from good ones.

The oracle (`check`) replays a body and asserts the documented contract, nothing more specific:
- replaying never raises; an error is an `ErrorEvent` with a kind and a full message, and the partial
  message it leaves is marked `metadata["incomplete"]`;
- every part holds values of the types the message model declares (ids and names are strings,
  arguments are JSON objects within `MAX_VALUE_DEPTH`), so nothing fails later;
- the message, every event and the `replay --json` object can be encoded, and the message round-trips;
- the next request can be built for every protocol (the history is usable anywhere).
"""

from __future__ import annotations

import gzip
import random
from typing import Any

import orjson

from toolwire._accumulate import new_call_id
from toolwire._depth import MAX_VALUE_DEPTH, depth_exceeds
from toolwire.events import event_to_json
from toolwire.messages import (
    InvalidToolCallPart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from toolwire.models import _encode
from toolwire.replay import ReplayResult, replay
from toolwire.wire import PROTOCOLS, protocol_class

__all__ = ["MUTATIONS", "check", "mutate", "next_request_bytes"]

_TARGETS = {name: protocol_class(name)() for name in PROTOCOLS}


def next_request_bytes(target: str, message: Message) -> bytes:
    """The request that would follow `message` (every call answered) in `target`'s protocol, encoded."""
    calls = [p for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))]
    history = [Message.user("go"), message]
    if calls:
        history.append(Message.tool_results(
            ToolResultPart(call_id=c.id, name=c.name, result={"ok": True}) for c in calls))
    history.append(Message.user("and now?"))
    return _encode(_TARGETS[target].build_request("model", history, [], {}))


def check(protocol: str, body: bytes, *, chunk_size: int | None = None, targets: tuple[str, ...] | None = None
          ) -> ReplayResult:
    result = replay(protocol, body, chunk_size=chunk_size, id_factory=new_call_id)
    message = result.message
    error = result.error
    if error is not None:
        assert isinstance(error.error_type, str) and error.error_type
        assert isinstance(error.message, str) and len(error.message) > 10
        assert message.metadata.get("incomplete") is True, error
        assert result.finish_reason == "error"
    else:
        assert "incomplete" not in message.metadata
        assert result.finish_reason in ("stop", "tool_calls", "length", "content_filter")
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            assert type(part.id) is str and part.id and type(part.name) is str
            assert type(part.arguments) is dict and type(part.arguments_raw) is str
            assert not depth_exceeds(part.arguments, MAX_VALUE_DEPTH)
        elif isinstance(part, InvalidToolCallPart):
            assert type(part.id) is str and part.id and type(part.name) is str
            assert type(part.arguments_raw) is str and type(part.reason) is str
        elif isinstance(part, (TextPart, ThinkingPart)):
            assert type(part.text) is str
            part.text.encode("utf-8")  # no lone surrogate
        if isinstance(part, ThinkingPart):
            assert part.signature is None or type(part.signature) is str
    assert len({p.id for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))}) == \
        len([p for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))])
    usage = result.usage
    if usage is not None:
        for value in (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.reasoning_tokens):
            assert value is None or (type(value) is int and value >= 0)
        _ = usage + usage
    assert Message.from_json(message.to_json()) == message
    for event in result.events:
        event_to_json(event)
    orjson.dumps(result.to_json_data())
    for target in targets if targets is not None else (protocol,):
        next_request_bytes(target, message)
    return result


# -- mutations ----------------------------------------------------------------------------------------

_REPLACEMENTS: list[Any] = [
    0, 5, -1, 3.5, 1e308, 10**30, True, False, None, "", "x", "\u0000", [], ["x"], [1, [2]], {}, {"a": "b"},
    {"type": "text", "text": 7}, "x" * 70_000,
]


def _deep(levels: int, kind: str) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value] if kind == "list" else {"k": value}
    return value


def _payload_lines(body: bytes) -> list[tuple[int, int, bytes]]:
    """(start, end, json) of each line that holds one JSON payload (`data: {...}` or a bare `{...}`)."""
    out = []
    position = 0
    for line in body.split(b"\n"):
        end = position + len(line)
        text = line.rstrip(b"\r")
        if text.startswith(b"data:"):
            offset = 6 if text[5:6] == b" " else 5
            if text[offset:offset + 1] == b"{":
                out.append((position + offset, position + len(text), text[offset:]))
        elif text.startswith(b"{"):
            out.append((position, position + len(text), text))
        position = end + 1
    return out


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            paths.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            paths.extend(_paths(child, (*prefix, index)))
    return paths


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _substitute(body: bytes, rng: random.Random, new: Any | None = None) -> bytes:
    """One key path of one payload gets a value of another type (or `new`)."""
    lines = _payload_lines(body)
    if not lines:
        return body
    start, end, data = rng.choice(lines)
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        return body
    paths = _paths(payload)
    if not paths:
        return body
    path = rng.choice(paths)
    if new is None:
        new = rng.choice(_REPLACEMENTS)
    try:
        text = orjson.dumps(_replace(payload, path, new))
    except TypeError:
        return body
    return body[:start] + text + body[end:]


def _flip(body: bytes, rng: random.Random) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randint(1, 8)):
        if data:
            data[rng.randrange(len(data))] ^= rng.choice((1, 2, 4, 8, 16, 32, 64, 128, 255))
    return bytes(data)


def _insert(body: bytes, rng: random.Random, pieces: tuple[bytes, ...]) -> bytes:
    at = rng.randrange(len(body) + 1)
    return body[:at] + rng.choice(pieces) + body[at:]


def _truncate(body: bytes, rng: random.Random) -> bytes:
    return body[:rng.randrange(len(body) + 1)]


def _duplicate(body: bytes, rng: random.Random) -> bytes:
    lines = _payload_lines(body)
    if not lines:
        return body
    start, end, _ = rng.choice(lines)
    return body[:end] + b"\n\n" + body[start - 6 if body[start - 6:start] == b"data: " else start:end] + body[end:]


def _drop_line(body: bytes, rng: random.Random) -> bytes:
    lines = body.split(b"\n")
    if len(lines) > 1:
        del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def _surrogates(body: bytes, rng: random.Random) -> bytes:
    """A UTF-16 surrogate half as a JSON escape inside a string (a proxy slicing UTF-16)."""
    quotes = [i for i in range(len(body)) if body[i:i + 1] == b'"']
    if not quotes:
        return body
    at = rng.choice(quotes)
    return body[:at] + rng.choice((b"\\ud83d", b"\\ude00", b"\\ud83d\\ude00", b"\\uDBFF")) + body[at:]


MUTATIONS = {
    "flip": _flip,
    "truncate": _truncate,
    "substitute": _substitute,
    "huge_string": lambda body, rng: _substitute(body, rng, "é" * rng.choice((10, 100_000, 1_000_000))),
    "huge_number": lambda body, rng: _substitute(body, rng, rng.choice((10**40, -(10**19), 2**63, 1e300))),
    "deep": lambda body, rng: _substitute(body, rng, _deep(rng.choice((50, 130, 300, 1000)), rng.choice(("list", "dict")))),
    "invalid_utf8": lambda body, rng: _insert(body, rng, (b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf0\x9f\x98")),
    "nul": lambda body, rng: _insert(body, rng, (b"\x00", b"\x00" * 64)),
    "framing": lambda body, rng: _insert(body, rng, (b"\n", b"\r", b"\r\n\r\n", b"\n\n", b"data: ", b"event: x\n",
                                                     b": comment\n", b"data: [DONE]\n\n", b"[", b"]", b"{", b"}")),
    "duplicate": _duplicate,
    "drop_line": _drop_line,
    "surrogates": _surrogates,
    "gzip_inside": lambda body, rng: _insert(body, rng, (gzip.compress(b"data: {}\n\n"),)),
}
"""Name → function(body, rng) returning a mutated body."""


def mutate(body: bytes, names: list[str], rng: random.Random) -> bytes:
    for name in names:
        body = MUTATIONS[name](body, rng)
    return body
