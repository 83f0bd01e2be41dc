"""Seeded, protocol-faithful response streams for the benchmark, and the recorded fixtures.

Every generated stream plays the same script, the shape that makes tool calling expensive: a short
text preamble streamed a word at a time, then tool calls whose JSON argument text (a source file with
newlines, quotes, tabs, backslashes and non-ASCII characters) is cut into fragments of 1-8 characters.
Cuts fall anywhere, inside escape sequences included, as they do on the wire. Sizes:

- S (~200 events) and M (~5,000): text, a long `write_file` call, then a short `run_tests` call;
- L (~100,000 events): text and one `write_file` call with a ~450 KB argument string.

Envelopes copy the recorded streams in the shared fixtures field for field: OpenAI's
`chat.completion.chunk` with `service_tier`, `system_fingerprint`, `obfuscation`, a role chunk, a
finish chunk, the usage-only chunk and `[DONE]`; Anthropic's named events with `ping`, the `tool_use`
block's empty first `input_json_delta`, and the trailing-space padding inside each payload; the
Responses API's items with their `added`/`delta`/`done` events, sequence numbers, and the final
`response.completed` that repeats the whole output. (Mistral, Gemini, Ollama and Cohere send calls whole
or in a few pieces; their recorded streams are replayed, not generated.)

The same seed gives the same bytes, so every contender in a run reads identical input.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "FIXTURES",
    "GENERATORS",
    "SIZES",
    "BenchStream",
    "ExpectedCall",
    "fixture_streams",
    "generate",
    "responses_event_writer",
]

SIZES: dict[str, int] = {"S": 200, "M": 5_000, "L": 100_000}
"""Target number of wire events per size."""

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
"""Recorded provider streams, read in place."""

_ALNUM = string.ascii_letters + string.digits
_WORDS = [
    "the", "file", "module", "value", "parser", "stream", "request", "config", "handler", "result", "buffer",
    "token", "schema", "client", "server", "retry", "limit", "cache", "index", "record", "payload", "session",
    "worker", "queue", "event", "message", "agent", "tool", "update", "write", "read", "check", "build",
    "merge", "split", "render", "format",
]


@dataclass(frozen=True, slots=True)
class ExpectedCall:
    """A tool call the stream carries, as every implementation must assemble it."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BenchStream:
    """One response body and what it must assemble into."""

    protocol: str
    """toolwire's wire protocol name (`openai-chat`, `anthropic`, ...)."""
    label: str
    """`S`, `M`, `L`, or the fixture's file name."""
    body: bytes
    events: int
    """Wire events in the body (SSE events, `[DONE]` included; JSON lines for NDJSON)."""
    text: str
    calls: tuple[ExpectedCall, ...]
    model: str
    content_type: str = "text/event-stream"
    generated: bool = True


# -- the script: text tokens and calls cut into fragments ------------------------------------------


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    arguments: dict[str, Any]
    fragments: list[str]


def _ident(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_ALNUM) for _ in range(n))


def _text_tokens(rng: random.Random, count: int) -> list[str]:
    tokens = ["I'll"]
    while len(tokens) < count:
        roll = rng.random()
        if roll < 0.06:
            tokens.append(".")
        elif roll < 0.1:
            tokens.append(",")
        elif roll < 0.12:
            tokens.append("\n\n")
        else:
            tokens.append(" " + rng.choice(_WORDS))
    return tokens


def _source_text(rng: random.Random, chars: int) -> str:
    """Python-like source with every character class JSON must escape or keep as UTF-8."""
    lines: list[str] = []
    size = 0
    n = 0
    while size < chars:
        w1, w2, w3 = rng.choice(_WORDS), rng.choice(_WORDS), rng.choice(_WORDS)
        n += 1
        block = [
            f"def {w1}_{w2}_{n}(value, *, limit={rng.randint(1, 999)}):",
            f'    """Return the {w1} {w2} for \u201c{w3}\u201d \u2014 caf\u00e9 \u2192 r\u00e9sum\u00e9."""',
            "    if value is None:",
            f'        raise ValueError("{w3} must not be None; got %r" % (value,))',
            f'    path = "C:\\\\data\\\\{w1}\\\\{w2}.json"',
            f'\treturn {{"{w1}": value, "{w2}": limit * {rng.randint(2, 9)}}}',
            "",
        ]
        lines.extend(block)
        size += sum(len(line) + 1 for line in block)
    return "\n".join(lines)[:chars]


def _cut(rng: random.Random, text: str) -> list[str]:
    """Fragments of 1-8 characters, cut at random places."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        step = rng.randint(1, 8)
        out.append(text[i : i + step])
        i += step
    return out


def _arguments_text(arguments: dict[str, Any]) -> str:
    # Models write `{"key": value, ...}` with spaces after separators and raw UTF-8.
    return json.dumps(arguments, ensure_ascii=False)


def _script(rng: random.Random, events: int, overhead: int, per_call: int,
            id_factory: Callable[[random.Random], str]) -> tuple[list[str], list[_Call]]:
    """Text tokens and calls whose pieces add up to about `events` wire events."""
    long_only = events >= 50_000
    text_count = max(8, events // 25)
    calls: list[_Call] = []
    budget = events - overhead - text_count
    if not long_only:
        args = {"command": f"pytest -q tests/test_{rng.choice(_WORDS)}.py", "timeout": 120}
        short = _Call(id_factory(rng), "run_tests", args, _cut(rng, _arguments_text(args)))
        budget -= len(short.fragments) + per_call
    budget -= per_call
    # Fragments average 4.5 characters of argument JSON, where escaping makes the content ~10% longer.
    content = _source_text(rng, max(0, int(budget * 4.5 / 1.1) - 40))
    args = {"path": f"src/app/{rng.choice(_WORDS)}_{rng.randint(1, 99)}.py", "content": content}
    long = _Call(id_factory(rng), "write_file", args, _cut(rng, _arguments_text(args)))
    calls.append(long)
    if not long_only:
        calls.append(short)
    return _text_tokens(rng, text_count), calls


def _expected(protocol: str, label: str, body: bytes, events: int, tokens: list[str], calls: list[_Call],
              model: str) -> BenchStream:
    return BenchStream(
        protocol=protocol, label=label, body=body, events=events, text="".join(tokens),
        calls=tuple(ExpectedCall(c.id, c.name, c.arguments) for c in calls), model=model,
    )


# -- OpenAI Chat Completions -----------------------------------------------------------------------

_OPENAI_MODEL = "gpt-4o-2024-08-06"


def openai_chat(size: str, seed: int = 7) -> BenchStream:
    """A `chat.completion.chunk` stream as api.openai.com sends it with `include_usage`."""
    rng = random.Random(f"openai-chat/{size}/{seed}")
    target = SIZES[size]
    # role chunk, finish chunk, usage chunk, [DONE]; one opening chunk per call.
    tokens, calls = _script(rng, target, 4, 1, lambda r: "call_" + _ident(r, 24))
    response_id = "chatcmpl-" + _ident(rng, 29)
    created = 1754432618
    fingerprint = "fp_" + "".join(rng.choice("0123456789abcdef") for _ in range(10))

    def chunk(delta: dict[str, Any] | None, *, finish: str | None = None, usage: Any = None) -> bytes:
        payload: dict[str, Any] = {
            "id": response_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": _OPENAI_MODEL,
            "service_tier": "default",
            "system_fingerprint": fingerprint,
        }
        if delta is None:
            payload["choices"] = []
            payload["usage"] = usage
        elif finish is not None:
            payload["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            payload["usage"] = None
        else:
            payload["usage"] = None
            payload["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]
        payload["obfuscation"] = _ident(rng, rng.randint(2, 14))
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out.extend(chunk({"content": token}) for token in tokens)
    for index, call in enumerate(calls):
        out.append(chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                          "function": {"name": call.name, "arguments": ""}}]}))
        out.extend(chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
                   for fragment in call.fragments)
    out.append(chunk({}, finish="tool_calls"))
    completion = len(tokens) + sum(len(c.fragments) for c in calls)
    out.append(chunk(None, usage={
        "prompt_tokens": 412, "completion_tokens": completion, "total_tokens": 412 + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
    }))
    out.append(b"data: [DONE]\n\n")
    return _expected("openai-chat", size, b"".join(out), len(out), tokens, calls, _OPENAI_MODEL)


# -- Anthropic Messages ----------------------------------------------------------------------------

_ANTHROPIC_MODEL = "claude-sonnet-4-5-20250929"


def anthropic(size: str, seed: int = 7) -> BenchStream:
    """A Messages stream as api.anthropic.com sends it (2025-2026 shape, padded payloads)."""
    rng = random.Random(f"anthropic/{size}/{seed}")
    target = SIZES[size]
    # message_start, text start, ping, text stop, message_delta, message_stop;
    # per call: block start, the empty first delta, block stop.
    tokens, calls = _script(rng, target, 6, 3, lambda r: "toolu_01" + _ident(r, 22))

    def event(name: str, payload: dict[str, Any]) -> bytes:
        data = orjson.dumps(payload)
        pad = rng.randint(0, 15)
        if pad:
            data = data[:-1] + b" " * pad + b"}"
        return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"

    usage_start = {"input_tokens": 633, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                   "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
                   "output_tokens": 1, "service_tier": "standard", "inference_geo": "not_available"}
    out = [event("message_start", {"type": "message_start", "message": {
        "model": _ANTHROPIC_MODEL, "id": "msg_01" + _ident(rng, 22), "type": "message", "role": "assistant",
        "content": [], "stop_reason": None, "stop_sequence": None, "stop_details": None, "usage": usage_start}})]
    out.append(event("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}}))
    out.append(b'event: ping\ndata: {"type": "ping"}\n\n')
    out.extend(event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": token}})
               for token in tokens)
    out.append(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    for offset, call in enumerate(calls):
        index = offset + 1
        out.append(event("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": call.id, "name": call.name, "input": {}, "caller": {"type": "direct"}}}))
        for fragment in ["", *call.fragments]:
            out.append(event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                     "delta": {"type": "input_json_delta", "partial_json": fragment}}))
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
    completion = len(tokens) + sum(len(c.fragments) for c in calls)
    out.append(event("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": "tool_use", "stop_sequence": None, "stop_details": None},
                                       "usage": {"input_tokens": 633, "cache_creation_input_tokens": 0,
                                                 "cache_read_input_tokens": 0, "output_tokens": completion}}))
    out.append(event("message_stop", {"type": "message_stop"}))
    return _expected("anthropic", size, b"".join(out), len(out), tokens, calls, _ANTHROPIC_MODEL)


# -- OpenAI Responses ------------------------------------------------------------------------------

_RESPONSES_MODEL = "gpt-4o-2024-08-06"



def responses_event_writer() -> Callable[[dict[str, Any]], bytes]:
    """One Responses API SSE event per call, numbered by `sequence_number` from 0 as the API numbers them."""
    sequence = 0

    def event(payload: dict[str, Any]) -> bytes:
        nonlocal sequence
        payload["sequence_number"] = sequence
        sequence += 1
        return b"event: " + payload["type"].encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    return event

def openai_responses(size: str, seed: int = 7) -> BenchStream:
    """A Responses API stream as api.openai.com sends it: a message item, then function_call items."""
    rng = random.Random(f"openai-responses/{size}/{seed}")
    target = SIZES[size]
    # created, in_progress, message added, part added, text done, part done, message done, completed;
    # per call: item added, arguments done, item done.
    tokens, calls = _script(rng, target, 8, 3, lambda r: "call_" + _ident(r, 24))
    response_id = "resp_" + "".join(rng.choice("0123456789abcdef") for _ in range(50))
    message_id = "msg_" + "".join(rng.choice("0123456789abcdef") for _ in range(50))
    item_ids = ["fc_" + "".join(rng.choice("0123456789abcdef") for _ in range(50)) for _ in calls]
    text = "".join(tokens)
    event = responses_event_writer()

    def response(status: str, output: list[dict[str, Any]], usage: Any) -> dict[str, Any]:
        return {
            "id": response_id, "object": "response", "created_at": 1768463824, "status": status,
            "background": False, "completed_at": 1768463825 if status == "completed" else None, "error": None,
            "incomplete_details": None, "instructions": None, "max_output_tokens": None, "model": _RESPONSES_MODEL,
            "output": output, "parallel_tool_calls": True, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "service_tier": "auto", "store": True,
            "temperature": 1.0, "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto",
            "tools": [{"type": "function", "name": c.name, "description": None, "parameters": {"type": "object"},
                       "strict": False} for c in calls],
            "top_p": 1.0, "truncation": "disabled", "usage": usage, "user": None, "metadata": {},
        }

    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    message_item = {"id": message_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    out = [
        event({"type": "response.created", "response": response("in_progress", [], None)}),
        event({"type": "response.in_progress", "response": response("in_progress", [], None)}),
        event({"type": "response.output_item.added", "item": message_item, "output_index": 0}),
        event({"type": "response.content_part.added", "content_index": 0, "item_id": message_id, "output_index": 0,
               "part": part}),
    ]
    out.extend(event({"type": "response.output_text.delta", "content_index": 0, "delta": token, "item_id": message_id,
                      "logprobs": [], "obfuscation": _ident(rng, rng.randint(2, 14)), "output_index": 0})
               for token in tokens)
    done_part = {**part, "text": text}
    done_message = {**message_item, "status": "completed", "content": [done_part]}
    out.append(event({"type": "response.output_text.done", "content_index": 0, "item_id": message_id, "logprobs": [],
                      "output_index": 0, "text": text}))
    out.append(event({"type": "response.content_part.done", "content_index": 0, "item_id": message_id,
                      "output_index": 0, "part": done_part}))
    out.append(event({"type": "response.output_item.done", "item": done_message, "output_index": 0}))
    output: list[dict[str, Any]] = [done_message]
    for offset, (call, item_id) in enumerate(zip(calls, item_ids, strict=True)):
        index = offset + 1
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call.id,
                "name": call.name}
        out.append(event({"type": "response.output_item.added", "item": item, "output_index": index}))
        out.extend(event({"type": "response.function_call_arguments.delta", "delta": fragment, "item_id": item_id,
                          "obfuscation": _ident(rng, rng.randint(2, 14)), "output_index": index})
                   for fragment in call.fragments)
        arguments = "".join(call.fragments)
        out.append(event({"type": "response.function_call_arguments.done", "arguments": arguments,
                          "item_id": item_id, "output_index": index}))
        done_item = {**item, "status": "completed", "arguments": arguments}
        out.append(event({"type": "response.output_item.done", "item": done_item, "output_index": index}))
        output.append(done_item)
    completion = len(tokens) + sum(len(c.fragments) for c in calls)
    usage = {"input_tokens": 197, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": completion,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 197 + completion}
    out.append(event({"type": "response.completed", "response": response("completed", output, usage)}))
    return _expected("openai-responses", size, b"".join(out), len(out), tokens, calls, _RESPONSES_MODEL)


GENERATORS: dict[str, Callable[[str, int], BenchStream]] = {
    "openai-chat": openai_chat,
    "anthropic": anthropic,
    "openai-responses": openai_responses,
}
"""Protocol name → generator of its streams."""


def generate(protocol: str, size: str, seed: int = 7) -> BenchStream:
    """The seeded stream of `size` (`S`, `M`, `L`) for `protocol`."""
    return GENERATORS[protocol](size, seed)


# -- the recorded fixtures ----------------------------------------------------------------------------

_FIXTURE_SUFFIXES = (".sse", ".ndjson", ".chunks.jsonl")


def fixture_streams(folder_name: str) -> Iterator[BenchStream]:
    """The recorded real streams in one fixtures folder (`openai-compatible` hosts speak `openai-chat`).

    Expected text and calls are left empty: the wire tests check what toolwire assembles from them.
    """
    protocol = "openai-chat" if folder_name == "openai-compatible" else folder_name
    folder = FIXTURES / folder_name
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        if not path.name.endswith(_FIXTURE_SUFFIXES):
            continue
        body = path.read_bytes()
        if path.name.endswith(".chunks.jsonl"):
            body = b"".join(b"data: " + line.strip() + b"\n\n" for line in body.splitlines() if line.strip())
        if path.name.endswith(".ndjson"):
            events = sum(1 for line in body.splitlines() if line.strip())
            content_type = "application/x-ndjson"
        else:
            events = sum(1 for line in body.splitlines() if line.startswith(b"data:"))
            content_type = "text/event-stream"
        yield BenchStream(protocol=protocol, label=path.name, body=body, events=events, text="", calls=(),
                          model="recorded", content_type=content_type, generated=False)
