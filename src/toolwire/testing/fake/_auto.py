"""The automatic responder: a fake model that uses the tools it is offered.

Given a request that offers tools, it calls them (all, a chosen subset, or the one `tool_choice`
names) in parallel with arguments generated from their JSON schemas; given the follow-up request that
carries the tool results, it answers with text that summarises them. Without tools it answers a short
text. When the request asks for structured output (a JSON schema in the protocol's own field, or JSON
mode with the schema in the instructions), the answer is instead a JSON value generated from that
schema, so typed output can be tried offline on every protocol. It works on the decoded,
protocol-neutral request, so the same conversation runs over every protocol, and it is deterministic for
a given seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from ...messages import ToolResultPart
from ...tools import ToolDefinition
from ._base import FakeRequest
from ._schema_values import schema_example
from ._turns import Chunks, FakeText, FakeThinking, FakeToolCall, FakeTurn

__all__ = ["AutoResponder"]

_RESULT_PREVIEW = 200


class AutoResponder:
    """Answers every request by itself: tool calls when tools are offered, then a summary of the results.

    Args:
        seed: makes the generated arguments (and so the conversation) reproducible.
        tools: the names of the tools to call (default: every tool offered), or a function choosing
            the definitions to call from those offered.
        max_calls: call at most this many tools per round.
        rounds: how many rounds of tool calls to make before answering with the summary.
        preamble: say which tools it is about to call, as text before the calls.
        thinking: a thinking text to stream before each answer (for testing reasoning display).
        answer: the text for requests without tools (default: a short reply quoting the user).
        chunks: how text and arguments are cut into fragments (see `FakeText`).
        delay: seconds between frames of every response.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        tools: Sequence[str] | Callable[[list[ToolDefinition]], list[ToolDefinition]] | None = None,
        max_calls: int | None = None,
        rounds: int = 1,
        preamble: bool = True,
        thinking: str | None = None,
        answer: str | None = None,
        chunks: Chunks = None,
        delay: float = 0.0,
    ) -> None:
        self.seed = seed
        self.tools = tools
        self.max_calls = max_calls
        self.rounds = rounds
        self.preamble = preamble
        self.thinking = thinking
        self.answer = answer
        self.chunks = chunks
        self.delay = delay

    def respond(self, request: FakeRequest) -> FakeTurn:
        rounds_done = request.tool_rounds()
        results = request.pending_results()
        calls = self.choose(request) if rounds_done < self.rounds else []
        if calls:
            return self.turn(self.call_parts(request, calls, rounds_done))
        schema = requested_output_schema(request)
        if schema is not None:
            rng = random.Random(f"{self.seed}:output:{rounds_done}")
            value = schema_example(schema, rng) if schema else {}
            return self.turn([FakeText(text=orjson.dumps(value).decode(), chunks=self.chunks)])
        if results:
            return self.turn([FakeText(text=summarize(results), chunks=self.chunks)])
        text = self.answer or _plain_answer(request)
        return self.turn([FakeText(text=text, chunks=self.chunks)])

    def turn(self, parts: list[FakeText | FakeThinking | FakeToolCall]) -> FakeTurn:
        if self.thinking:
            parts = [FakeThinking(text=self.thinking, chunks=self.chunks), *parts]
        return FakeTurn(parts=list(parts), delay=self.delay)

    def choose(self, request: FakeRequest) -> list[ToolDefinition]:
        offered = list(request.tools)
        choice = request.tool_choice
        if not offered or choice == "none":
            return []
        if choice not in (None, "auto", "required", "any"):
            return [t for t in offered if t.name == choice][:1]
        if callable(self.tools):
            chosen = list(self.tools(offered))
        elif self.tools is not None:
            wanted = set(self.tools)
            chosen = [t for t in offered if t.name in wanted]
        else:
            chosen = offered
        if not chosen and choice == "required":
            chosen = offered[:1]
        return chosen[: self.max_calls] if self.max_calls is not None else chosen

    def call_parts(self, request: FakeRequest, tools: list[ToolDefinition],
                   round_index: int) -> list[FakeText | FakeThinking | FakeToolCall]:
        parts: list[FakeText | FakeThinking | FakeToolCall] = []
        if self.preamble:
            names = [t.name for t in tools]
            listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            parts.append(FakeText(text=f"Let me use {listed}.", chunks=self.chunks))
        for position, tool in enumerate(tools):
            # One generator per call, seeded by what the call is, so adding a tool does not change the
            # arguments of the others.
            rng = random.Random(f"{self.seed}:{tool.name}:{round_index}:{position}")
            arguments = schema_example(tool.parameters, rng)
            if not isinstance(arguments, dict):
                arguments = {}
            parts.append(FakeToolCall(name=tool.name, arguments=arguments, chunks=self.chunks))
        return parts


def requested_output_schema(request: FakeRequest) -> dict[str, Any] | None:
    """The JSON schema a request asks its answer to follow (`{}` for JSON without one), or `None`.

    Read from where each protocol puts it: OpenAI / Mistral / Cohere `response_format`, the Responses
    API's `text.format`, Gemini's `generationConfig.responseJsonSchema`, Ollama's `format`, Anthropic's
    `output_config.format`. JSON mode without a schema takes the schema from the system text, where
    toolwire puts it ("...JSON schema:\n{...}"), when there is one.
    """
    body = request.body if isinstance(request.body, dict) else {}
    candidates: list[Any] = [
        body.get("response_format"),
        (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None,
        (body.get("output_config") or {}).get("format") if isinstance(body.get("output_config"), dict) else None,
    ]
    for found in candidates:
        if not isinstance(found, dict):
            continue
        kind = found.get("type")
        if kind == "json_schema":
            inner = found.get("json_schema", found)
            schema = inner.get("schema") if isinstance(inner, dict) else None
            return schema if isinstance(schema, dict) else {}
        if kind == "json_object":
            schema = found.get("json_schema") or found.get("schema")
            return schema if isinstance(schema, dict) else _schema_in_instructions(request)
    config = body.get("generationConfig")
    if isinstance(config, dict) and isinstance(config.get("responseJsonSchema"), dict):
        return dict(config["responseJsonSchema"])
    if isinstance(config, dict) and config.get("responseMimeType") == "application/json":
        return {}
    if request.protocol == "ollama" and "format" in body:
        return body["format"] if isinstance(body["format"], dict) else {}
    return None


def _schema_in_instructions(request: FakeRequest) -> dict[str, Any]:
    for message in request.messages:
        if message.role != "system":
            continue
        _, marker, rest = message.text.partition("JSON schema:")
        if marker:
            try:
                schema = orjson.loads(rest.strip().splitlines()[0])
            except (orjson.JSONDecodeError, IndexError):
                return {}
            return schema if isinstance(schema, dict) else {}
    return {}


def summarize(results: Sequence[ToolResultPart]) -> str:
    """A plain-language summary of one round of tool results."""
    lines = ["Here is what the tools returned:"]
    for result in results:
        # Protocols without an error flag on results (OpenAI chat) carry toolwire's `{"error": ...}`.
        error = result.result.get("error") if isinstance(result.result, dict) and len(result.result) == 1 else None
        failed = result.is_error or isinstance(error, str)
        shown = error if isinstance(error, str) else result.result
        value = shown if isinstance(shown, str) else orjson.dumps(shown).decode()
        if len(value) > _RESULT_PREVIEW:
            value = value[:_RESULT_PREVIEW] + "…"
        name = result.name or result.call_id
        lines.append(f"- {name} failed: {value}" if failed else f"- {name} returned {value}")
    return "\n".join(lines)


def _plain_answer(request: FakeRequest) -> str:
    said = request.last_user_text().strip()
    if len(said) > _RESULT_PREVIEW:
        said = said[:_RESULT_PREVIEW] + "…"
    if said:
        return f'You said: "{said}". This is an automatic answer from a fake {request.protocol} server.'
    return f"This is an automatic answer from a fake {request.protocol} server."
