"""Anthropic Messages (`POST /v1/messages`, `stream: true`).

Streaming shape: named SSE events. `message_start` carries the message id, model and input usage; each
content block then streams as `content_block_start` → `content_block_delta`* → `content_block_stop`,
identified by its `index`; `message_delta` carries the stop reason and cumulative usage; `message_stop`
ends the stream. `ping` keeps the connection alive and `error` reports a failure mid-stream.

What real streams do, and how this module answers (each case has a recorded fixture in the tests):
- payloads padded with runs of spaces after the JSON object, and fields added over time (`caller`,
  `stop_details`, `inference_geo`...): parsed as JSON, unknown fields and event types ignored;
- a tool with no parameters streams `partial_json: ""` only: its arguments are `{}`;
- a `tool_use` block is complete at its own `content_block_stop`: the call ends right then, so its
  `tool_call_end` event comes before anything of the next block (the agent starts tools early);
- thinking blocks stream their text and then one `signature_delta`; `redacted_thinking` arrives whole
  with opaque `data`;
- server tools (`server_tool_use` with streamed input, then a `web_search_tool_result`-style block with
  the same `tool_use_id`) become one `ProviderToolPart`, shown but never run locally;
- `citations_delta` is not kept: text is sent back without its citations, which the API accepts.

Opaque data and its origin. Anthropic rejects a request whose thinking blocks it did not sign, so only
parts this module produced are sent back as thinking, and it marks them in `provider_data`:
- thinking: `ThinkingPart(text, signature, provider_data={"anthropic": {"type": "thinking"}})`;
- redacted thinking: `ThinkingPart(text="", redacted=True,
  provider_data={"anthropic": {"type": "redacted_thinking", "data": <opaque data>}})`;
- server tools: `ProviderToolPart(provider="anthropic", provider_data={"anthropic": {"blocks": [...]}})`
  holding the raw blocks (tool use with its final `input`, then its result) exactly as they came.
A thinking or provider-tool part without an `"anthropic"` entry came from another provider (its
signature would make the API answer 400) and is left out of the request; so is a thinking part whose
signature never arrived (a cut stream).

Request mapping: system messages become the top-level `system`; every tool result of a round becomes a
`tool_result` block (with `is_error` kept) in one user message, before any text of that message, as the
API requires; consecutive messages of the same role are merged, because the API requires the roles to
alternate. Tool-call ids from other providers that do not fit Anthropic's `^[a-zA-Z0-9_-]+$` are mapped,
the same way for a call and its result.

Usage: `input_tokens` counts every prompt token (Anthropic's uncached input plus cache reads and cache
writes), so it means the same as on the OpenAI protocols; the cache counts are also reported apart.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import orjson

from .._accumulate import Accumulator, ToolCallBuilder, parse_arguments
from ..events import FinishReason, Usage
from ..exceptions import UserError
from ..messages import (
    FilePart,
    InvalidToolCallPart,
    Message,
    ProviderToolPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from ..settings import ModelSettings, merge_extra
from ..tools import ToolDefinition
from ._base import SSEParser, StreamParser, WireProtocol
from ._files import files_note, is_image, is_pdf, is_text, no_url, not_accepted, resolved, result_file_blocks, text_of
from ._values import count, deep, need_dict, need_str, opt_str, wrong

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_THINKING_BUDGET",
    "MIN_THINKING_BUDGET",
    "AnthropicParser",
    "Protocol",
    "map_call_id",
    "map_stop_reason",
    "read_usage",
]

ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header every request carries."""

DEFAULT_MAX_TOKENS = 4096
"""`max_tokens` when the settings give none (the API requires it); a thinking budget is added on top."""

DEFAULT_THINKING_BUDGET = 4096
"""`budget_tokens` for `thinking=True`."""

MIN_THINKING_BUDGET = 1024
"""The smallest thinking budget the API accepts."""

_EFFORT_BUDGETS = {"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384}

_PROVIDER_KEY = "anthropic"

_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    # The server paused a long turn (server tools); sending the message back continues it.
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

_VALID_ID = re.compile(r"[a-zA-Z0-9_-]+")
_INVALID_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def map_stop_reason(raw: str) -> FinishReason:
    """Anthropic's `stop_reason` as a normalized finish reason (unknown reasons count as `stop`)."""
    return _STOP_REASONS.get(raw, "stop")


def read_usage(usage: dict[str, Any]) -> Usage:
    """Anthropic usage fields (already merged across events) as a `Usage`; every count is checked."""
    base = count(usage.get("input_tokens"), "usage.input_tokens")
    cache_read = count(usage.get("cache_read_input_tokens"), "usage.cache_read_input_tokens")
    cache_write = count(usage.get("cache_creation_input_tokens"), "usage.cache_creation_input_tokens")
    total_input = None
    if base is not None or cache_read is not None or cache_write is not None:
        total_input = (base or 0) + (cache_read or 0) + (cache_write or 0)
    details = need_dict(usage.get("output_tokens_details") or {}, "usage.output_tokens_details")
    return Usage(
        input_tokens=total_input,
        output_tokens=count(usage.get("output_tokens"), "usage.output_tokens"),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=count(details.get("thinking_tokens"), "usage.output_tokens_details.thinking_tokens"),
    )


# -- stream parsing ------------------------------------------------------------------------------


class _ToolUse:
    """An open `tool_use` block."""

    __slots__ = ("call", "initial")

    def __init__(self, call: ToolCallBuilder, initial: dict[str, Any] | None) -> None:
        self.call = call
        self.initial = initial


class _ServerToolUse:
    """An open `server_tool_use` (or `mcp_tool_use`) block: its input is collected, then parsed once."""

    __slots__ = ("block", "fragments", "part")

    def __init__(self, block: dict[str, Any], part: ProviderToolPart) -> None:
        self.block = block
        self.part = part
        self.fragments: list[str] = []


_OTHER = object()
"""Marks an open block whose deltas need no per-block state (text, thinking, ignored types)."""


class AnthropicParser(SSEParser):
    """Anthropic's named SSE events → accumulator calls."""

    protocol = "anthropic"

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._blocks: dict[int, _ToolUse | _ServerToolUse | object] = {}
        self._server_parts: dict[str, ProviderToolPart] = {}
        self._usage: dict[str, Any] = {}

    def on_payload(self, event: str | None, payload: dict[str, Any]) -> None:
        # The payload's own `type` decides; the `event:` line is only a fallback.
        kind = payload.get("type") or event
        if kind == "content_block_delta":  # nearly every event
            self.on_block_delta(payload)
            return
        handler = _HANDLERS.get(kind) if type(kind) is str else None
        if handler is not None:
            handler(self, payload)

    def owns(self, payload: dict[str, Any]) -> bool:
        return payload.get("type") in _HANDLERS or payload.get("type") == "ping"

    # -- message-level events

    def on_message_start(self, payload: dict[str, Any]) -> None:
        message = need_dict(payload.get("message") or {}, "message")
        if message.get("id"):
            self.acc.metadata["response_id"] = need_str(message["id"], "message.id")
        if message.get("model"):
            self.acc.metadata["model"] = need_str(message["model"], "message.model")
        usage = message.get("usage")
        if usage:
            self._merge_usage(need_dict(usage, "message.usage"))

    def on_message_delta(self, payload: dict[str, Any]) -> None:
        delta = need_dict(payload.get("delta") or {}, "delta")
        usage = payload.get("usage")
        if usage:
            self._merge_usage(need_dict(usage, "usage"))
        if delta.get("stop_sequence"):
            self.acc.metadata["stop_sequence"] = need_str(delta["stop_sequence"], "delta.stop_sequence")
        raw = delta.get("stop_reason")
        if raw:
            self.acc.finish(map_stop_reason(need_str(raw, "delta.stop_reason")), raw)

    def on_message_stop(self, payload: dict[str, Any]) -> None:
        if self.acc.finish_reason is None and self.acc.error is None:
            # `message_stop` is the completion signal even when no stop reason was given.
            self.acc.finish("stop", None)

    def on_error(self, payload: dict[str, Any]) -> None:
        error = payload.get("error")
        if isinstance(error, dict):
            kind = str(error.get("type") or "provider_error")
            message = str(error.get("message") or orjson.dumps(error).decode())
        else:
            kind, message = "provider_error", orjson.dumps(payload).decode()
        self.acc.fail(kind, f"Anthropic reported an error in the stream ({kind}): {message}")

    def _merge_usage(self, usage: dict[str, Any]) -> None:
        # `message_delta` usage is cumulative and may repeat or omit what `message_start` said.
        for key, value in usage.items():
            if value is not None:
                self._usage[key] = value
        self.acc.set_usage(read_usage(self._usage))

    # -- content blocks

    def on_block_start(self, payload: dict[str, Any]) -> None:
        index = payload["index"]
        if type(index) is not int:
            wrong("index", "a whole number", index)
        block = need_dict(payload["content_block"], "content_block")
        kind = block.get("type")
        acc = self.acc
        if kind == "text":
            self._blocks[index] = _OTHER
            if block.get("text"):
                acc.text(need_str(block["text"], "content_block.text"))
        elif kind == "thinking":
            self._blocks[index] = _OTHER
            acc.thinking(need_str(block.get("thinking") or "", "content_block.thinking"), new_block=True,
                         provider_data={_PROVIDER_KEY: {"type": "thinking"}})
            if block.get("signature"):
                acc.thinking_signature(need_str(block["signature"], "content_block.signature"))
        elif kind == "redacted_thinking":
            self._blocks[index] = _OTHER
            acc.part(ThinkingPart(text="", redacted=True, provider_data={
                _PROVIDER_KEY: {"type": "redacted_thinking",
                                "data": need_str(block.get("data") or "", "content_block.data")}}))
        elif kind == "tool_use":
            call = acc.start_call(opt_str(block.get("id"), "content_block.id"),
                                  opt_str(block.get("name"), "content_block.name"))
            initial = block.get("input")
            self._blocks[index] = _ToolUse(call, initial if isinstance(initial, dict) and initial else None)
        elif isinstance(kind, str) and kind.endswith("_tool_use"):
            deep(block, "content_block")
            part = ProviderToolPart(id=opt_str(block.get("id"), "content_block.id") or "",
                                    name=opt_str(block.get("name"), "content_block.name") or kind,
                                    provider=_PROVIDER_KEY, arguments=block.get("input") or None,
                                    status="in_progress", provider_data={_PROVIDER_KEY: {"blocks": [block]}})
            acc.part(part)
            self._blocks[index] = _ServerToolUse(block, part)
            self._server_parts[part.id] = part
        elif isinstance(kind, str) and kind.endswith("_tool_result"):
            self._blocks[index] = _OTHER
            self._server_result(kind, deep(block, "content_block"))
        else:
            self._blocks[index] = _OTHER

    def on_block_delta(self, payload: dict[str, Any]) -> None:
        delta = payload["delta"]
        if type(delta) is not dict:
            wrong("delta", "an object", delta)
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta["text"]
            if type(text) is not str:
                wrong("delta.text", "a string", text)
            self.acc.text(text)
        elif kind == "input_json_delta":
            fragment = delta["partial_json"]
            if type(fragment) is not str:
                wrong("delta.partial_json", "a string", fragment)
            if fragment:
                state = self._blocks.get(payload["index"])
                if type(state) is _ToolUse:
                    self.acc.call_arguments(state.call, fragment)
                elif type(state) is _ServerToolUse:
                    state.fragments.append(fragment)
        elif kind == "thinking_delta":
            self.acc.thinking(need_str(delta["thinking"], "delta.thinking"))
        elif kind == "signature_delta":
            self.acc.thinking_signature(need_str(delta["signature"], "delta.signature"))
        # `citations_delta` and unknown delta types carry nothing toolwire keeps.

    def on_block_stop(self, payload: dict[str, Any]) -> None:
        index = payload["index"]
        if type(index) is not int:
            wrong("index", "a whole number", index)
        state = self._blocks.pop(index, None)
        if type(state) is _ToolUse:
            call = state.call
            # A proxy may send the whole input in the start block and no deltas.
            whole = state.initial if state.initial is not None and not call.fragments else None
            self.acc.end_call(call, arguments=whole)
        elif type(state) is _ServerToolUse:
            self._server_use_done(state)

    def _server_use_done(self, state: _ServerToolUse) -> None:
        raw = "".join(state.fragments)
        arguments: Any = state.block.get("input") or {}
        block = state.block
        if raw:
            parsed, _ = parse_arguments(raw)
            if parsed is not None:
                arguments = parsed
                block = {**block, "input": parsed}
            else:
                arguments = raw
        old = self._server_parts.get(state.part.id, state.part)
        new = replace(old, arguments=arguments, provider_data={_PROVIDER_KEY: {"blocks": [block]}})
        self.acc.replace_part(old, new)
        self._server_parts[new.id] = new

    def _server_result(self, kind: str, block: dict[str, Any]) -> None:
        use_id = opt_str(block.get("tool_use_id"), "content_block.tool_use_id") or ""
        content = block.get("content")
        failed = isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
        status = "failed" if failed else "completed"
        result = _display_result(content)
        old = self._server_parts.get(use_id)
        if old is None:
            part = ProviderToolPart(id=use_id, name=kind.removesuffix("_tool_result"), provider=_PROVIDER_KEY,
                                    result=result, status=status, provider_data={_PROVIDER_KEY: {"blocks": [block]}})
            self.acc.part(part)
        else:
            blocks = [*_anthropic_blocks(old), block]
            part = replace(old, result=result, status=status, provider_data={_PROVIDER_KEY: {"blocks": blocks}})
            self.acc.replace_part(old, part)
        self._server_parts[use_id] = part


_HANDLERS: dict[str, Callable[[AnthropicParser, dict[str, Any]], None]] = {
    "message_start": AnthropicParser.on_message_start,
    "content_block_start": AnthropicParser.on_block_start,
    "content_block_delta": AnthropicParser.on_block_delta,
    "content_block_stop": AnthropicParser.on_block_stop,
    "message_delta": AnthropicParser.on_message_delta,
    "message_stop": AnthropicParser.on_message_stop,
    "error": AnthropicParser.on_error,
}


def _display_result(content: Any) -> Any:
    """A server tool's result for display: the block's content without its encrypted blobs.

    The blobs stay in the raw block (`provider_data`), which is what is sent back.
    """
    if isinstance(content, list):
        return [
            {k: v for k, v in item.items() if not k.startswith("encrypted_")} if isinstance(item, dict) else item
            for item in content
        ]
    return content


def _anthropic_blocks(part: ProviderToolPart) -> list[dict[str, Any]]:
    data = (part.provider_data or {}).get(_PROVIDER_KEY)
    if not isinstance(data, dict):
        return []
    blocks = data.get("blocks")
    return [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []


# -- request mapping -----------------------------------------------------------------------------


def map_call_id(call_id: str) -> str:
    """A tool-call id Anthropic accepts: unchanged when valid, else a stable, collision-safe rewrite."""
    if _VALID_ID.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:12]
    return f"{_INVALID_ID_CHARS.sub('_', call_id)}_{digest}"


def _result_content(part: ToolResultPart) -> str:
    if isinstance(part.result, str):
        return part.result
    return orjson.dumps(part.result).decode()


def _thinking_block(part: ThinkingPart) -> dict[str, Any] | None:
    """The block to send back for a thinking part, or None when Anthropic did not produce it."""
    data = (part.provider_data or {}).get(_PROVIDER_KEY)
    if not isinstance(data, dict):
        return None
    if part.redacted or data.get("type") == "redacted_thinking":
        opaque = data.get("data")
        return {"type": "redacted_thinking", "data": opaque} if opaque else None
    if not part.signature:
        return None
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


_OUTPUT_ONLY = frozenset({"max_tokens", "stream", "temperature", "top_p", "top_k", "stop_sequences", "metadata",
                          "service_tier"})
"""Request fields that shape only the output: the token-counting endpoint does not take them."""


class Protocol(WireProtocol):
    """Anthropic Messages (`POST /v1/messages`, `stream: true`).

    Host options (`Provider.options`): `anthropic_version` (the header value) and `default_max_tokens`.
    """

    name = "anthropic"
    display_name = "Anthropic Messages"

    def endpoint(self, model: str, settings: ModelSettings) -> str:
        return "/v1/messages"

    def new_parser(self, acc: Accumulator) -> StreamParser:
        return AnthropicParser(acc)

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"x-api-key": api_key} if api_key else {}

    def default_headers(self) -> dict[str, str]:
        return {"Accept": "text/event-stream",
                "anthropic-version": str(self.option("anthropic_version", ANTHROPIC_VERSION))}

    def count_request(self, model: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # `/v1/messages/count_tokens` takes the request's input (model, system, messages, tools, tool
        # choice, thinking) and refuses what only shapes the output, so that is left out.
        return "/v1/messages/count_tokens", {k: v for k, v in body.items() if k not in _OUTPUT_ONLY}

    def count_from(self, payload: Any) -> int | None:
        value = payload.get("input_tokens") if isinstance(payload, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def build_request(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> dict[str, Any]:
        system, mapped = self.map_messages(messages)
        thinking = self.map_thinking(settings.get("thinking"))
        budget = thinking["budget_tokens"] if thinking else 0
        max_tokens = settings.get("max_tokens")
        if max_tokens is None:
            max_tokens = int(self.option("default_max_tokens", DEFAULT_MAX_TOKENS)) + budget
        elif thinking and max_tokens <= budget:
            raise UserError(
                f"max_tokens ({max_tokens}) must be larger than the thinking budget ({budget}) for Anthropic: "
                "raise max_tokens or lower the thinking budget."
            )
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": mapped, "stream": True}
        if system:
            body["system"] = system
        if thinking:
            body["thinking"] = thinking
        if tools:
            body["tools"] = [self.map_tool(t) for t in tools]
            choice = self.map_tool_choice(settings)
            if choice is not None:
                body["tool_choice"] = choice
        for key in ("temperature", "top_p"):
            if key in settings:
                body[key] = settings[key]
        if settings.get("stop"):
            body["stop_sequences"] = settings["stop"]
        schema = settings.get("output_schema")
        if schema:
            body["output_config"] = {"format": {"type": "json_schema", "schema": schema.get("schema", {})}}
        return merge_extra(body, settings)

    # -- settings

    def map_thinking(self, value: bool | int | str | None) -> dict[str, Any] | None:
        """The `thinking` setting as Anthropic's `{"type": "enabled", "budget_tokens": N}`, or None."""
        if value is None or value is False:
            return None
        if value is True:
            budget = DEFAULT_THINKING_BUDGET
        elif isinstance(value, int):
            if value == 0:
                return None
            budget = value
        else:
            if value in ("none", "disabled"):
                return None
            if value not in _EFFORT_BUDGETS:
                known = ", ".join(sorted(_EFFORT_BUDGETS))
                raise UserError(
                    f"Anthropic does not understand the thinking effort {value!r}: use one of {known}, "
                    "True, or a token budget (an int of at least 1024)."
                )
            budget = _EFFORT_BUDGETS[value]
        if budget < MIN_THINKING_BUDGET:
            raise UserError(
                f"Anthropic needs a thinking budget of at least {MIN_THINKING_BUDGET} tokens, got {budget}: "
                f"pass thinking={MIN_THINKING_BUDGET} or more, or thinking=True."
            )
        return {"type": "enabled", "budget_tokens": budget}

    def map_tool(self, tool: ToolDefinition) -> dict[str, Any]:
        """A tool definition as `{name, description, input_schema}` (`strict` only when asked for)."""
        entry: dict[str, Any] = {"name": tool.name}
        if tool.description:
            entry["description"] = tool.description
        entry["input_schema"] = tool.parameters
        if tool.strict:
            entry["strict"] = True
        return entry

    def map_tool_choice(self, settings: ModelSettings) -> dict[str, Any] | None:
        """`tool_choice` and `parallel_tool_calls=False` as Anthropic's `tool_choice` object, or None."""
        choice = settings.get("tool_choice")
        serial = settings.get("parallel_tool_calls") is False
        if choice is None and not serial:
            return None
        if isinstance(choice, dict):
            mapped: dict[str, Any] = {"type": "tool", "name": choice["name"]}
        elif choice is None or choice == "auto":
            mapped = {"type": "auto"}
        elif choice == "required":
            mapped = {"type": "any"}
        elif choice == "none":
            return {"type": "none"}
        else:
            raise UserError(
                f"Unknown tool_choice {choice!r}: use 'auto', 'none', 'required' or {{'name': 'tool_name'}}."
            )
        if serial:
            mapped["disable_parallel_tool_use"] = True
        return mapped

    # -- messages

    def map_messages(self, messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
        """The top-level `system` text and the alternating `messages` list."""
        system: list[str] = []
        out: list[dict[str, Any]] = []
        for message in messages:
            if message.role == "system":
                if message.text:
                    system.append(message.text)
                continue
            if message.role == "assistant":
                role, blocks = "assistant", self.map_assistant(message)
            else:
                role, blocks = "user", self.map_user(message)
            if not blocks:
                continue  # e.g. a message that held only another provider's thinking
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": blocks})
        for entry in out:
            if entry["role"] == "user":
                # Results must open the user message that answers a tool round (stable sort).
                entry["content"].sort(key=lambda block: block["type"] != "tool_result")
        return ("\n\n".join(system) or None), out

    def map_assistant(self, message: Message) -> list[dict[str, Any]]:
        """An assistant message's content blocks, in the order its parts were produced."""
        blocks: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                if part.text:  # the API rejects empty text blocks
                    blocks.append({"type": "text", "text": part.text})
            elif isinstance(part, ThinkingPart):
                block = _thinking_block(part)
                if block is not None:
                    blocks.append(block)
            elif isinstance(part, ToolCallPart):
                blocks.append({"type": "tool_use", "id": map_call_id(part.id), "name": part.name,
                               "input": part.arguments})
            elif isinstance(part, InvalidToolCallPart):
                # Sent with empty input: the agent's error result explains what went wrong, and the
                # cut-off argument text is not valid input.
                blocks.append({"type": "tool_use", "id": map_call_id(part.id), "name": part.name, "input": {}})
            elif isinstance(part, ProviderToolPart):
                blocks.extend(_anthropic_blocks(part))
        return blocks

    def map_user(self, message: Message) -> list[dict[str, Any]]:
        """A user message's content blocks: tool results, text and files."""
        blocks: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": map_call_id(part.call_id)}
                content = self.map_result(part)
                if content:
                    block["content"] = content
                if part.is_error:
                    block["is_error"] = True
                blocks.append(block)
            elif isinstance(part, TextPart):
                if part.text:
                    blocks.append({"type": "text", "text": part.text})
            elif isinstance(part, FilePart):
                blocks.append(self.map_file(part))
        return blocks

    def map_result(self, part: ToolResultPart) -> str | list[dict[str, Any]]:
        """A `tool_result`'s content: its text, or with files a list of the text and `image` / `document`
        blocks (files Anthropic cannot take are named in a note instead)."""
        text = _result_content(part)
        if not part.files:
            return text
        files, skipped = result_file_blocks(part.files, self.who(), self.map_file)
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}, *files] if text else files
        if skipped:
            blocks.append({"type": "text", "text": files_note(skipped, self.who())})
        return blocks

    def map_file(self, part: FilePart) -> dict[str, Any]:
        """An image, PDF or plain-text file as an `image` or `document` block."""
        who = self.who()
        part = resolved(part, who)
        media = part.media_type
        if is_image(part) or is_pdf(part):
            if part.data is not None:
                source: dict[str, Any] = {"type": "base64", "media_type": media, "data": part.data}
            else:
                source = {"type": "url", "url": part.url}
            if is_image(part):
                return {"type": "image", "source": source}
            return self._document(source, part)
        if is_text(part):
            if part.data is None:
                raise no_url(who, part, "plain-text")
            return self._document({"type": "text", "media_type": "text/plain", "data": text_of(part, who)}, part)
        raise not_accepted(who, part, "images and PDFs (inline or by URL) and plain-text files (inline)",
                           "Convert the file to one of those, or extract its text and send that.")

    def _document(self, source: dict[str, Any], part: FilePart) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "document", "source": source}
        if part.name:
            block["title"] = part.name
        return block
