"""What the fuzz suite mutates: every recorded stream, plus generated streams of all seven protocols.

Recordings come from the shared fixtures (read in place); generated streams are written by the fake
provider servers' encoders (`toolwire.testing.fake`), so every protocol is covered even where few
recordings exist, with the shapes those encoders produce: text, thinking, several calls with arguments
cut into small fragments, escapes and non-ASCII text, usage and a finish.
"""

from __future__ import annotations

import random
from functools import cache

from tests.conftest import FIXTURES
from toolwire.replay import payload_lines_to_sse
from toolwire.testing.fake import fake_protocol
from toolwire.testing.fake._base import FakeRequest
from toolwire.testing.fake._turns import FakeStreamError, FakeText, FakeThinking, FakeToolCall, FakeTurn
from toolwire.wire import PROTOCOLS

__all__ = ["PROTOCOLS_FUZZED", "corpus"]

PROTOCOLS_FUZZED = sorted(PROTOCOLS)

_FOLDERS = {"openai-compatible": "openai-chat"}

_TURNS = [
    FakeTurn(parts=[FakeText(text="Hello — naïve café, 日本語 and \"quotes\" \\ back\nslash.", chunks=7)]),
    FakeTurn(parts=[
        FakeThinking(text="Let me think about both cities.", signature="sig-abc123", chunks=9),
        FakeText(text="Checking the weather.", chunks=5),
        FakeToolCall(name="get_weather", id="call_one", arguments={"city": "Paris", "units": "c", "days": [1, 2]},
                     chunks=4),
        FakeToolCall(name="get_weather", id="call_two", arguments={"city": "Zürich \"ZH\"", "nested": {"a": [None, True]}},
                     chunks=3),
    ]),
    FakeTurn(parts=[FakeText(text="Cut short by the limit", chunks=6)], finish="length"),
    FakeTurn(parts=[FakeText(text="Then it failed", chunks=4)], error=FakeStreamError(message="overloaded", code="overloaded")),
]


def _generated(protocol: str) -> list[tuple[str, bytes]]:
    fake = fake_protocol(protocol)
    out = []
    for number, turn in enumerate(_TURNS):
        request = FakeRequest(protocol=protocol, method="POST", path="/", body={"model": "m"}, model="m",
                              options={"include_usage": True, "sse": True})
        encoder = fake.encoder(request, random.Random(number))
        frames = list(encoder.content(turn))
        if turn.error is not None:
            frames += list(encoder.error(turn.error))
        else:
            frames += list(encoder.end(turn, turn.finish_reason, encoder.usage(turn)))
        out.append((f"generated/{protocol}/{number}", b"".join(frames)))
    return out


@cache
def corpus(protocol: str) -> list[tuple[str, bytes]]:
    """(name, body) pairs for `protocol`: its recordings (if the fixtures are present) and generated streams."""
    bodies = _generated(protocol)
    if FIXTURES.is_dir():
        for folder in sorted(FIXTURES.iterdir()):
            if _FOLDERS.get(folder.name, folder.name) != protocol:
                continue
            for path in sorted(folder.iterdir()):
                if path.name.endswith(".request.json") or path.suffix not in (".sse", ".jsonl", ".json", ".ndjson"):
                    continue
                body = path.read_bytes()
                if path.name.endswith(".chunks.jsonl"):
                    body = payload_lines_to_sse(body)
                bodies.append((f"{folder.name}/{path.name}", body))
    return bodies
