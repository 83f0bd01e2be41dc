"""The fake servers stream what the real APIs stream: checked against the recorded fixtures.

For each recording, the turn it contains is scripted on the fake server of the same protocol, and the
fake's body must match the recording at every level toolwire and other clients look at: the framing
bytes, the sequence of SSE event names (or JSON lines), every payload key (each must occur in a real
recording of that protocol), toolwire's event kinds, and the assembled message (text, thinking, call
ids, names, arguments exactly as streamed), finish reason and usage — both from the raw body and
through the real HTTP path.
"""

from __future__ import annotations

import dataclasses
import functools

import httpx
import orjson
import pytest

from tests.conftest import fixture_files
from tests.testing.conformance import (
    comparable,
    counter_ids,
    event_kinds,
    event_names,
    parse,
    parser_exists,
    read_body,
    structure,
    turn_from_recording,
)
from toolwire import Message
from toolwire.testing.fake_server import FakeProviderServer
from toolwire.wire import PROTOCOLS

# Recordings of what a fake turn can say (text, thinking, tool calls, finish reasons). Server-side tools,
# redacted thinking, data-only Responses hosts and DeepSeek's reasoning_text events are out of scope.
RECORDINGS: dict[str, list[str]] = {
    "openai-chat": [
        "openai-chat/gpt-4o_parallel-2-tools.magentic.sse",
        "openai-chat/gpt-4o_parallel-2-tools-empty-args.pydantic-ai.sse",
        "openai-chat/gpt-4o_text-then-tool.magentic.sse",
        "openai-chat/gpt-4o-mini_single-tool.pydantic-ai.sse",
        "openai-chat/gpt-4o_text-only-max-tokens.mirascope.sse",
        "openai-chat/gpt-5-mini_length-no-content.mirascope.sse",
    ],
    "anthropic": [
        "anthropic/claude-3-opus_parallel-2-tools.magentic.sse",
        "anthropic/claude-3-opus_text-then-tool.magentic.sse",
        "anthropic/haiku-4.5_parallel-2-tools-empty-args.llm-anthropic.sse",
        "anthropic/haiku-4.5_single-tool-whitespace-padding.ruby_llm.sse",
        "anthropic/haiku-4.5_text-only.ruby_llm.sse",
        "anthropic/haiku-4.5_thinking-signature-then-tool-empty-args.llm-anthropic.sse",
        "anthropic/haiku-4.5_tool-no-params.ruby_llm.sse",
    ],
    "openai-responses": [
        "openai-responses/gpt-4o_parallel-2-function-calls.mirascope.sse",
        "openai-responses/gpt-4o_text-then-function-call.mirascope.sse",
        "openai-responses/gpt-4o_text-only-incomplete-max-tokens.mirascope.sse",
        "openai-responses/xai-grok_reasoning-then-function-call-empty-args.ruby_llm.sse",
        "openai-responses/gpt-5-nano_function-call-empty-args.ruby_llm.sse",
        "openai-responses/gpt-5_reasoning-then-function-call.pydantic-ai.sse",
    ],
    "gemini": [
        "gemini/gemini-2.5-flash_call-no-params.ruby_llm.sse",
        "gemini/gemini-3-pro_call-empty-args-thought-signature.pydantic-ai.sse",
        "gemini/gemini-2.5-pro_thinking-text-only.pydantic-ai.sse",
        "gemini/gemini-2.5-flash_text-only-max-tokens.mirascope.sse",
        "gemini/vertex_gemini-2.5-flash_single-call.ruby_llm.sse",
    ],
    "ollama": [
        "ollama/gemma3-1b_text-only-api-chat.langchaingo.ndjson",
        "ollama/llama3.1_text-only-api-chat.magentic.ndjson",
    ],
    "mistral": [
        "mistral/mistral-large_parallel-2-tools-one-chunk.magentic.sse",
        "mistral/mistral-large_single-tool.magentic.sse",
        "mistral/mistral-small_text-only.ruby_llm.sse",
        "mistral/magistral-medium_thinking-text-only.pydantic-ai.sse",
        "mistral/mistral-small_hybrid-reasoning-text-only.ruby_llm.sse",
    ],
    "cohere": [
        "cohere/command-r_tool-plan-then-tool.langchain-cohere.sse",
        "cohere/command-a_tool-no-params.ruby_llm.sse",
        "cohere/text-only.langchain-cohere.sse",
        "cohere/tool-plan-then-2-tool-calls.vercel.chunks.jsonl",
        "cohere/empty-tool-call.vercel.chunks.jsonl",
        "cohere/thinking-text-only.vercel.chunks.jsonl",
    ],
}

# Where a protocol's real payload keys are collected from (OpenAI-compatible hosts add `reasoning`).
KEY_SOURCES = {"openai-chat": ("openai-chat", "openai-compatible")}


CASES = [pytest.param(protocol, name, id=name.split("/", 1)[1])
         for protocol, names in RECORDINGS.items() if parser_exists(protocol) for name in names]


def test_every_existing_wire_protocol_is_covered() -> None:
    covered = {protocol for protocol, _ in ((p.values[0], p.values[1]) for p in CASES)}
    assert covered == {name for name in PROTOCOLS if parser_exists(name)}


@functools.cache
def real_structure(protocol: str) -> dict[str, frozenset[str]]:
    """Every payload key path seen per event kind in the recordings of a protocol."""
    union: dict[str, set[str]] = {}
    for folder in KEY_SOURCES.get(protocol, (protocol,)):
        for name in fixture_files(folder, ".sse", ".ndjson", ".json", ".chunks.jsonl"):
            if "error-400" in name:
                continue
            for kind, paths in structure(read_body(name)).items():
                union.setdefault(kind, set()).update(paths)
    return {kind: frozenset(paths) for kind, paths in union.items()}


async def fake_body(protocol: str, server: FakeProviderServer) -> bytes:
    model = server.model("recorded-model")
    url, body, headers = model.build_request([Message.user("hi")])
    async with httpx.AsyncClient() as client:
        response = await client.post(url, content=orjson.dumps(body), headers=headers)
    assert response.status_code == 200, response.text
    return response.content


def framing(body: bytes) -> dict[str, bool]:
    """Byte-level traits of a body: line endings, event lines, the [DONE] terminator."""
    if body.lstrip().startswith(b"{") and b"data:" not in body:
        lines = body.split(b"\n")
        return {"ndjson": True, "newline_terminated": lines[-1] == b"", "one_object_per_line":
                all(line.startswith(b"{") and line.endswith(b"}") for line in lines[:-1])}
    separator = b"\r\n\r\n" if b"\r\n" in body else b"\n\n"
    events = [e for e in body.split(separator) if e.strip()]
    data_events = [e for e in events if not e.startswith(b"data: [DONE]")]
    return {
        "crlf": b"\r\n" in body,
        "lf_only": b"\r" not in body,
        "blank_line_terminated": body.endswith(separator),
        "named_events": all(e.startswith(b"event: ") for e in data_events),
        "unnamed_events": all(e.startswith(b"data: ") for e in data_events),
        "done_terminator": body.rstrip().endswith(b"data: [DONE]"),
    }


@pytest.mark.anyio
@pytest.mark.parametrize(("protocol", "recording"), CASES)
async def test_fake_stream_matches_recording(protocol: str, recording: str) -> None:
    real_body = read_body(recording)
    real = parse(protocol, real_body)
    assert real.error is None
    turn = turn_from_recording(protocol, real)
    async with FakeProviderServer(protocol, [dataclasses.replace(turn, repeat=True)], seed=7) as server:
        body = await fake_body(protocol, server)
        model = server.model("recorded-model", id_factory=counter_ids())
        async with model.stream([Message.user("hi")]) as response:
            streamed = [event async for event in response]
        assert response.message is not None
        await model.aclose()

    fake = parse(protocol, body)
    assert fake.error is None
    assert comparable(fake.message) == comparable(real.message)
    assert event_kinds(fake.events) == event_kinds(real.events)
    assert fake.finish_reason == real.finish_reason
    assert (fake.usage is None) == (real.usage is None)
    if real.usage is not None and fake.usage is not None:
        assert (fake.usage.input_tokens, fake.usage.output_tokens, fake.usage.reasoning_tokens) == (
            real.usage.input_tokens, real.usage.output_tokens, real.usage.reasoning_tokens)

    # The same message and events arrive through the real HTTP path (uvicorn → httpx → HTTPModel).
    assert comparable(response.message) == comparable(real.message)
    assert event_kinds(streamed) == event_kinds(real.events)

    real_names = event_names(real_body)
    if recording.endswith(".chunks.jsonl"):
        real_names.append("[DONE]")  # those files keep payloads only; the SSE terminator was not stored
    assert event_names(body) == real_names

    known = real_structure(protocol)
    for kind, paths in structure(body).items():
        assert kind in known, f"the fake sends {kind!r} frames, which no recording of {protocol} has"
        assert paths <= known[kind], f"keys no {protocol} recording has in {kind!r}: {sorted(paths - known[kind])}"

    if not recording.endswith(".chunks.jsonl"):
        assert framing(body) == framing(real_body)


@pytest.mark.anyio
async def test_gemini_without_alt_sse_streams_the_recorded_json_array_layout() -> None:
    recording = "gemini/gemini-2.5-flash_thought-then-call-no-args.jsonarray.llm-gemini.json"
    real_body = read_body(recording)
    real = parse("gemini", real_body)
    turn = turn_from_recording("gemini", real)
    async with FakeProviderServer("gemini", [turn]) as server, httpx.AsyncClient() as client:
        response = await client.post(server.base_url + "/models/gemini-2.5-flash:streamGenerateContent",
                                     json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    body = response.content
    assert response.headers["content-type"].startswith("application/json")
    assert body.startswith(b"[{\n  \"candidates\": [\n") and real_body.startswith(b"[{\n  \"candidates\": [\n")
    assert body.count(b"\n,\r\n") == len(orjson.loads(body)) - 1
    assert real_body.count(b"\n,\r\n") == len(orjson.loads(real_body)) - 1
    assert body.endswith(b"\n]") and real_body.endswith(b"\n]")
    fake = parse("gemini", body)
    assert comparable(fake.message) == comparable(real.message)
    assert event_kinds(fake.events) == event_kinds(real.events)
