"""The benchmark's inputs and bookkeeping: its seeded streams must be streams toolwire reads into exactly
the calls they were built from, its limit must frame SSE as toolwire does, and its report must judge the
targets from the numbers it is given. (No timing here: the benchmark itself is `bench/run`.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from bench.contenders import CONTENDERS, Outcome, chunked, iter_payloads, limit
from bench.report import targets, write_report
from bench.streams import GENERATORS, SIZES, generate

from tests.conftest import fixture_files, fixture_path
from toolwire._sse import SSEDecoder
from toolwire.replay import replay

PROTOCOLS = sorted(GENERATORS)


def _arguments_fragments(protocol: str, body: bytes) -> list[str]:
    """The argument text pieces exactly as the stream carries them."""
    out: list[str] = []
    for _, payload in iter_payloads([body]):
        if protocol == "openai-chat":
            for choice in payload.get("choices") or []:
                for entry in choice["delta"].get("tool_calls") or []:
                    if "id" not in entry:
                        out.append(entry["function"]["arguments"])
        elif protocol == "openai-responses":
            if payload["type"] == "response.function_call_arguments.delta":
                out.append(payload["delta"])
        elif payload.get("type") == "content_block_delta" and payload["delta"]["type"] == "input_json_delta":
            out.append(payload["delta"]["partial_json"])
    return out


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("size", ["S", "M"])
def test_generated_stream_replays_into_its_text_and_calls(protocol: str, size: str) -> None:
    stream = generate(protocol, size)
    result = replay(protocol, stream.body, chunk_size=997)
    assert result.error is None
    assert result.finish_reason == "tool_calls"
    assert result.message.text == stream.text
    calls = [(c.id, c.name, c.arguments) for c in result.message.tool_calls]
    assert calls == [(c.id, c.name, c.arguments) for c in stream.calls]
    assert [c.name for c in stream.calls] == ["write_file", "run_tests"]
    assert abs(stream.events - SIZES[size]) <= SIZES[size] * 0.1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_large_stream_is_one_long_call_in_small_fragments(protocol: str) -> None:
    stream = generate(protocol, "L")
    assert abs(stream.events - SIZES["L"]) <= SIZES["L"] * 0.05
    (call,) = stream.calls
    assert call.name == "write_file"
    assert len(call.arguments["content"]) > 300_000
    fragments = _arguments_fragments(protocol, stream.body)
    nonempty = [f for f in fragments if f]
    assert len(nonempty) > 0.9 * stream.events
    assert all(1 <= len(f) <= 8 for f in nonempty)
    assert orjson.loads("".join(fragments)) == call.arguments
    result = replay(protocol, stream.body, chunk_size=16_384, previews=False)
    assert result.error is None
    assert [(c.name, c.arguments) for c in result.message.tool_calls] == [(call.name, call.arguments)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fragments_cut_escapes_and_keep_the_wire_envelope(protocol: str) -> None:
    stream = generate(protocol, "M")
    fragments = _arguments_fragments(protocol, stream.body)
    # Cuts fall inside escape sequences too, as they do on the wire.
    assert any(f.endswith("\\") for f in fragments)
    payloads = [p for _, p in iter_payloads([stream.body])]
    if protocol == "openai-chat":
        assert stream.body.endswith(b"data: [DONE]\n\n")
        assert payloads[-1]["choices"] == [] and payloads[-1]["usage"]["completion_tokens"] > 0
        assert all(p["object"] == "chat.completion.chunk" and "obfuscation" in p for p in payloads)
    elif protocol == "openai-responses":
        assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
        assert payloads[-1]["type"] == "response.completed" and payloads[-1]["response"]["usage"]["output_tokens"] > 0
        done = [p["arguments"] for p in payloads if p["type"] == "response.function_call_arguments.done"]
        assert [orjson.loads(arguments) for arguments in done] == [c.arguments for c in stream.calls]
    else:
        assert payloads[0]["type"] == "message_start" and payloads[-1]["type"] == "message_stop"
        assert b'event: ping\ndata: {"type": "ping"}\n\n' in stream.body
        assert b"  }\n\n" in stream.body  # the trailing-space padding real streams have


def test_generation_is_seeded() -> None:
    assert generate("openai-chat", "S").body == generate("openai-chat", "S").body
    assert generate("openai-chat", "S", seed=8).body != generate("openai-chat", "S").body


@pytest.mark.parametrize("name", fixture_files("openai-chat", ".sse") + fixture_files("anthropic", ".sse"))
def test_limit_frames_a_recording_as_toolwire_does(name: str) -> None:
    body = fixture_path(name).read_bytes()
    decoder = SSEDecoder()
    events = [data for chunk in chunked(body, 7) for _, data in decoder.feed(chunk)]
    events += [data for _, data in decoder.close()]
    assert limit(chunked(body, 7)) == sum(1 for data in events if data != b"[DONE]")


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", ["toolwire", "toolwire (no previews)"])
async def test_toolwire_contender_assembles_the_expected_outcome(protocol: str, name: str) -> None:
    stream = generate(protocol, "S")
    contender = next(c for c in CONTENDERS if c.name == name)
    run: Any = contender.prepare(stream, chunked(stream.body, 4096))
    outcome = await run()
    assert outcome == Outcome(stream.text, [(c.name, c.arguments) for c in stream.calls])


def _measurement(protocol: str, size: str, contender: str, kind: str, us: float | None,
                 ratio: float | None = None, status: str = "ok", note: str = "") -> dict[str, Any]:
    return {"protocol": protocol, "size": size, "contender": contender, "kind": kind, "events": 1000,
            "body_bytes": 100_000, "status": status, "note": note, "runs": [], "us_per_event": us,
            "limit_ratio": ratio}


def _data() -> dict[str, Any]:
    rows = []
    for size, tw in (("M", 3.0), ("L", 5.0)):
        rows += [
            _measurement("openai-chat", size, "limit", "limit", 2.0, 1.0),
            _measurement("openai-chat", size, "toolwire", "toolwire", tw, tw / 2.0),
            _measurement("openai-chat", size, "openai SDK", "peer", 400.0),
            _measurement("openai-chat", size, "LiteLLM", "peer", 40.0),
        ]
    rows.append(_measurement("openai-chat", "S", "pydantic-ai", "peer", None, status="skipped",
                             note="not available (ImportError: no module)"))
    return {
        "when": "2026-01-01 00:00 UTC", "machine": {"cpus": 2, "processor": "test"},
        "versions": {"python": "3.11", "toolwire": "0"}, "chunk_size": 16384, "seed": 7, "quick": False,
        "elapsed_s": 1.0, "sizes": {"S": 200, "M": 5000, "L": 100000}, "measurements": rows,
        "memory": [{"protocol": "openai-chat", "contender": "toolwire", "peak_bytes": 4e6, "body_bytes": 1e6,
                    "ratio": 4.0, "ok": True}],
        "latency": [{"protocol": "openai-chat", "raw_us": 1.0, "toolwire_us": 11.0, "overhead_us": 10.0,
                     "trials": 3}],
        "fixtures": {}, "broken": {"pydantic-ai": "not available (ImportError: no module)"},
    }


def test_targets_are_judged_from_the_measured_numbers() -> None:
    verdicts = {target: met for target, _, met in targets(_data())}
    assert verdicts["OpenAI Chat Completions M: toolwire (previews on) ≤ 2x the limit"] is True
    assert verdicts["OpenAI Chat Completions L: toolwire (previews on) ≤ 2x the limit"] is False
    # The fastest peer is LiteLLM (40 µs): 13.3x on M, 8x on L.
    assert verdicts["OpenAI Chat Completions M: ≥ 10x faster than the fastest peer"] is True
    assert verdicts["OpenAI Chat Completions L: ≥ 10x faster than the fastest peer"] is False
    assert verdicts["OpenAI Chat Completions: per-event cost on L ≤ 1.25x M"] is False  # 5/3
    assert verdicts["OpenAI Chat Completions L: peak memory ≤ 3x the stream's size"] is False
    assert verdicts["OpenAI Chat Completions: first text delta ≤ 0.2 ms over a raw httpx read"] is True


def test_report_lists_every_contender_and_why_one_was_skipped(tmp_path: Path) -> None:
    write_report(_data(), tmp_path)
    text = (tmp_path / "results.md").read_text()
    assert "| **toolwire** |" in text and "| openai SDK |" in text
    assert "pydantic-ai: not available (ImportError: no module)" in text
    assert "| OpenAI Chat Completions M: toolwire (previews on) ≤ 2x the limit | 1.50x (3.00 vs 2.00 µs/event) | yes |" \
        in text
