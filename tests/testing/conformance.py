"""Helpers that compare a fake provider's output with a real recording of the same protocol.

A recording is replayed through toolwire; its events are turned back into a `FakeTurn` with the same
text, thinking, calls, chunking, ids, finish reason and usage; the fake server streams that turn; and
the two bodies are compared at every level: framing bytes, SSE event names, payload key structure,
toolwire's event kinds and the assembled message.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from tests.conftest import fixture_path
from toolwire import Message
from toolwire._sse import SSEDecoder
from toolwire.events import Event
from toolwire.replay import ReplayResult, payload_lines_to_sse, replay
from toolwire.testing.fake import FakeText, FakeThinking, FakeToolCall, FakeTurn, FakeUsage

NATIVE_IDS = {"openai-chat", "openai-responses", "anthropic", "mistral", "cohere"}


def counter_ids() -> Callable[[], str]:
    numbers = itertools.count()
    return lambda: f"gen_{next(numbers)}"


def read_body(relative: str) -> bytes:
    raw = fixture_path(relative).read_bytes()
    return payload_lines_to_sse(raw) if relative.endswith(".chunks.jsonl") else raw


def parse(protocol: str, body: bytes) -> ReplayResult:
    return replay(protocol, body, id_factory=counter_ids())


def turn_from_recording(protocol: str, result: ReplayResult) -> FakeTurn:
    """The scripted turn that says what the recording said: same parts, fragments, ids, finish and usage."""
    groups: dict[str, list[list[str]]] = {"text_delta": [], "thinking_delta": []}
    call_fragments: dict[str, list[str]] = {}
    last = None
    for event in result.events:
        if event.type in groups:
            if last != event.type:
                groups[event.type].append([])
            groups[event.type][-1].append(event.text)
        elif event.type == "tool_call_delta":
            call_fragments.setdefault(event.id, []).append(event.arguments_delta)
        if event.type != "usage":  # providers that repeat usage on every chunk do not split a text run
            last = event.type
    parts: list[FakeText | FakeThinking | FakeToolCall] = []
    has_calls = bool(result.message.tool_calls)
    for part in result.message.parts:
        if part.type == "text":
            pieces = groups["text_delta"].pop(0)
            assert "".join(pieces) == part.text
            parts.append(FakeText(text=part.text, chunks=pieces))
        elif part.type == "thinking":
            pieces = groups["thinking_delta"].pop(0) if part.text else []
            assert "".join(pieces) == part.text
            if protocol == "cohere" and has_calls:
                # Cohere streams the text before its calls as a tool plan, which toolwire reads as thinking.
                parts.append(FakeText(text=part.text, chunks=pieces or None))
            else:
                parts.append(FakeThinking(text=part.text, chunks=pieces or None, signature=part.signature))
        elif part.type == "tool_call":
            pieces = [p for p in call_fragments.get(part.id, []) if p]
            parts.append(FakeToolCall(name=part.name, arguments="".join(pieces), chunks=pieces or None,
                                      id=part.id if protocol in NATIVE_IDS else None))
        else:
            raise AssertionError(f"the fake server does not script {part.type} parts")
    usage = result.usage
    finish = result.finish_reason if result.finish_reason in ("stop", "tool_calls", "length") else None
    return FakeTurn(parts=parts, finish=finish,  # type: ignore[arg-type]
                    usage=None if usage is None else FakeUsage(input_tokens=usage.input_tokens,
                                                               output_tokens=usage.output_tokens,
                                                               reasoning_tokens=usage.reasoning_tokens))


def frames(body: bytes) -> Iterator[tuple[str | None, Any]]:
    """(event name, payload) for each SSE event or JSON line of a body."""
    stripped = body.lstrip()
    if stripped.startswith(b"["):
        for item in orjson.loads(body):
            yield None, item
        return
    if stripped.startswith(b"{") and b"\ndata:" not in body:
        for line in body.splitlines():
            if line.strip():
                yield None, orjson.loads(line)
        return
    decoder = SSEDecoder()
    for event, data in [*decoder.feed(body), *decoder.close()]:
        yield event, (data.decode() if data == b"[DONE]" else orjson.loads(data))


def frame_kind(event: str | None, payload: Any) -> str:
    if isinstance(payload, str):
        return payload
    if event:
        return event
    if isinstance(payload, dict) and isinstance(payload.get("type"), str):
        return str(payload["type"])
    return "data"


def key_paths(value: Any, prefix: str = "") -> set[str]:
    paths: set[str] = set()
    if isinstance(value, dict):
        for key, sub in value.items():
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            paths |= key_paths(sub, path)
    elif isinstance(value, list):
        for item in value:
            paths |= key_paths(item, prefix + "[]")
    return paths


def structure(body: bytes) -> dict[str, set[str]]:
    """Key paths seen per frame kind."""
    out: dict[str, set[str]] = {}
    for event, payload in frames(body):
        out.setdefault(frame_kind(event, payload), set()).update(key_paths(payload))
    return out


def event_names(body: bytes) -> list[str]:
    """The frame kinds in order, consecutive repeats collapsed."""
    names = [frame_kind(e, p) for e, p in frames(body)]
    return [name for name, _ in itertools.groupby(names)]


def event_kinds(events: list[Event]) -> list[str]:
    """toolwire's event kinds in order (usage left out: providers repeat it), repeats collapsed."""
    kinds = [e.type for e in events if e.type != "usage"]
    return [kind for kind, _ in itertools.groupby(kinds)]


def comparable(message: Message) -> list[Any]:
    return [dataclasses.replace(p, provider_data=None) if hasattr(p, "provider_data") else p for p in message.parts]


def parser_exists(protocol: str) -> bool:
    """Whether toolwire has a wire parser for `protocol` (fake servers are checked only against those)."""
    from toolwire.wire import PROTOCOLS

    return importlib.util.find_spec(f"toolwire.wire.{PROTOCOLS[protocol]}") is not None
