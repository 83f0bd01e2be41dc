"""Cohere v2 chat (`POST /v2/chat`, `stream: true`).

Streaming shape: SSE events named by `event:` and repeated in the payload's `type` (recordings that kept
only the payloads are read the same way). One response is:

    message-start → (content-start → content-delta* → content-end)* / tool-plan-delta*
    → (tool-call-start → tool-call-delta* → tool-call-end)* → message-end → data: [DONE]

What real streams do, and how this module answers (recorded fixtures in the tests show each case but
the citations):
- `tool-plan-delta` streams the model's plan before it calls tools. It is thinking-like text: it becomes
  a `ThinkingPart` with provider data `{"cohere": {"tool_plan": true}}`, and is sent back as the
  assistant message's `tool_plan`;
- reasoning models stream a content block of type `thinking`: a `ThinkingPart` marked
  `{"cohere": {"tool_plan": false}}`, sent back as a `thinking` content item;
- a call is complete at its `tool-call-end`, and ends right there; a parameterless call starts with
  `arguments: ""` and has no delta (`{}`);
- `message-end` carries the finish reason and usage; `ERROR` (with `error` and
  `error_type: INVALID_TOOL_GENERATION`) is an error finish that keeps the plan streamed before it;
- citation events and unknown events are ignored.

Requests: messages with roles system / user / assistant / tool (one `tool` message per result, its
content a document holding the result's JSON, or text for string results); `p` for top_p,
`stop_sequences`, `thinking: {"type": "enabled", "token_budget": N}`, `response_format` of type
`json_object` with the schema, `tool_choice` `REQUIRED` / `NONE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .._accumulate import Accumulator, ToolCallBuilder
from ..events import FinishReason, Usage
from ..exceptions import UserError
from ..messages import (
    FilePart,
    InvalidToolCallPart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from ..settings import ModelSettings, merge_extra
from ..tools import ToolDefinition
from ._base import SSEParser, StreamParser, WireProtocol
from ._files import data_url, files_note, is_image, is_text, not_accepted, resolved, text_block
from ._values import count, need_dict, need_str, opt_str, wrong

__all__ = ["CohereParser", "Protocol"]

TOOL_PLAN_DATA: dict[str, Any] = {"cohere": {"tool_plan": True}}
"""Provider data on thinking parts read from `tool-plan-delta` events."""

THINKING_DATA: dict[str, Any] = {"cohere": {"tool_plan": False}}
"""Provider data on thinking parts read from `thinking` content blocks."""

_FINISH: dict[str, FinishReason] = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "TOOL_CALL": "tool_calls",
    "MAX_TOKENS": "length",
}

_ERROR_FINISHES = frozenset({"ERROR", "INVALID_TOOL_GENERATION", "TIMEOUT"})


def read_usage(usage: dict[str, Any]) -> Usage | None:
    """`tokens` are what the model processed, `billed_units` what was charged; prefer the former."""
    tokens = need_dict(usage.get("tokens") or {}, "delta.usage.tokens")
    billed = need_dict(usage.get("billed_units") or {}, "delta.usage.billed_units")
    input_tokens = count(tokens.get("input_tokens", billed.get("input_tokens")), "delta.usage.tokens.input_tokens")
    output_tokens = count(tokens.get("output_tokens", billed.get("output_tokens")), "delta.usage.tokens.output_tokens")
    cached = count(usage.get("cached_tokens"), "delta.usage.cached_tokens")
    if input_tokens is None and output_tokens is None and cached is None:
        return None
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cached)


class CohereParser(SSEParser):
    """Cohere v2 stream events → accumulator."""

    protocol = "cohere"

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._calls: dict[int, ToolCallBuilder] = {}
        self._kinds: dict[int, str] = {}
        # Which source produced the last thinking text ("plan" or a content index): a change of
        # source starts a new part, so a plan and a thinking block never merge into one.
        self._thinking_source: object = None

    def owns(self, payload: dict[str, Any]) -> bool:
        kind = payload.get("type")
        return isinstance(kind, str) and (kind.startswith(("message-", "content-", "tool-", "citation-")))

    def on_payload(self, event: str | None, payload: dict[str, Any]) -> None:
        kind = payload.get("type") or event
        if kind == "content-delta":
            self._content(payload, need_dict(_message(payload)["content"], "delta.message.content"))
        elif kind == "tool-plan-delta":
            plan = _message(payload).get("tool_plan")
            if plan:
                self._thinking("plan", need_str(plan, "delta.message.tool_plan"), TOOL_PLAN_DATA)
        elif kind == "tool-call-delta":
            call = self._calls[_index(payload)]
            function = need_dict(_tool_call(payload).get("function") or {}, "delta.message.tool_calls.function")
            arguments = function.get("arguments")
            if arguments:
                self.acc.call_arguments(call, need_str(arguments, "delta.message.tool_calls.function.arguments"))
        elif kind == "content-start":
            content = need_dict(_message(payload)["content"], "delta.message.content")
            self._kinds[_index(payload)] = content.get("type", "text")
            self._content(payload, content)
        elif kind == "tool-call-start":
            self._start_call(payload)
        elif kind == "tool-call-end":
            ended = self._calls.get(_index(payload))
            if ended is not None:
                self.acc.end_call(ended)
        elif kind == "message-start":
            if payload.get("id"):
                self.acc.metadata["response_id"] = need_str(payload["id"], "id")
        elif kind == "message-end":
            self._end(need_dict(payload.get("delta") or {}, "delta"))
        # citation-start / citation-end / content-end / debug: nothing to assemble.

    def _content(self, payload: dict[str, Any], content: dict[str, Any]) -> None:
        index = _index(payload)
        if "thinking" in content or self._kinds.get(index) == "thinking":
            text = content.get("thinking")
            if text:
                self._thinking(index, need_str(text, "delta.message.content.thinking"), THINKING_DATA)
        else:
            text = content.get("text")
            if text:
                self.acc.text(need_str(text, "delta.message.content.text"))

    def _thinking(self, source: object, text: str, data: dict[str, Any]) -> None:
        self.acc.thinking(text, new_block=source != self._thinking_source, provider_data=data)
        self._thinking_source = source

    def _start_call(self, payload: dict[str, Any]) -> None:
        call = _tool_call(payload)
        function = need_dict(call.get("function") or {}, "delta.message.tool_calls.function")
        handle = self.acc.start_call(opt_str(call.get("id"), "delta.message.tool_calls.id") or None,
                                     opt_str(function.get("name"), "delta.message.tool_calls.function.name") or None)
        self._calls[_index(payload)] = handle
        arguments = function.get("arguments")
        if arguments:
            self.acc.call_arguments(handle, need_str(arguments, "delta.message.tool_calls.function.arguments"))

    def _end(self, delta: dict[str, Any]) -> None:
        usage = delta.get("usage")
        if usage:
            read = read_usage(need_dict(usage, "delta.usage"))
            if read is not None:
                self.acc.set_usage(read)
            if usage.get("billed_units"):
                self.acc.metadata["billed_units"] = usage["billed_units"]
        raw = opt_str(delta.get("finish_reason"), "delta.finish_reason") or None
        error = delta.get("error")
        error_type = delta.get("error_type")
        if raw in _ERROR_FINISHES or error or error_type:
            self.acc.finish("error", raw)
            label = error_type or raw or "ERROR"
            detail = str(error).rstrip(". ") if error else "no details were given"
            self.acc.fail(str(label).lower(), f"Cohere ended the response with an error ({label}): {detail}. "
                                              "Everything streamed before it is kept.")
            return
        self.acc.finish(_FINISH.get(raw or "", "stop"), raw)


def _message(payload: dict[str, Any]) -> dict[str, Any]:
    delta = need_dict(payload["delta"], "delta")
    return need_dict(delta["message"], "delta.message")


def _index(payload: dict[str, Any]) -> int:
    index = payload.get("index", 0)
    if type(index) is not int:
        wrong("index", "a whole number", index)
    return index


def _tool_call(payload: dict[str, Any]) -> dict[str, Any]:
    calls = _message(payload)["tool_calls"]
    if isinstance(calls, list):  # the documented shape is one object; tolerate a one-item list
        calls = calls[0]
    return need_dict(calls, "delta.message.tool_calls")


class Protocol(WireProtocol):
    """Cohere v2 chat (`POST /v2/chat`, `stream: true`)."""

    name = "cohere"
    display_name = "Cohere Chat v2"

    def endpoint(self, model: str, settings: ModelSettings) -> str:
        return "/v2/chat"

    def new_parser(self, acc: Accumulator) -> StreamParser:
        return CohereParser(acc)

    def build_request(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": self.map_messages(messages), "stream": True}
        if tools:
            offered = list(tools)
            choice = settings.get("tool_choice")
            if isinstance(choice, dict):
                # Cohere cannot name the tool to call: offering only that one and requiring a call
                # has the same effect.
                offered = [t for t in tools if t.name == choice["name"]] or offered
                body["tool_choice"] = "REQUIRED"
            elif choice == "required":
                body["tool_choice"] = "REQUIRED"
            elif choice == "none":
                body["tool_choice"] = "NONE"
            body["tools"] = [self.map_tool(t) for t in offered]
            if any(t.strict for t in offered):
                body["strict_tools"] = True
        if "max_tokens" in settings:
            body["max_tokens"] = settings["max_tokens"]
        if "temperature" in settings:
            body["temperature"] = settings["temperature"]
        if "top_p" in settings:
            body["p"] = settings["top_p"]
        if "stop" in settings:
            body["stop_sequences"] = settings["stop"]
        if "thinking" in settings:
            body["thinking"] = _thinking(settings["thinking"])
        schema = settings.get("output_schema")
        if schema:
            body["response_format"] = {"type": "json_object", "json_schema": schema.get("schema", {})}
        return merge_extra(body, settings)

    def map_tool(self, tool: ToolDefinition) -> dict[str, Any]:
        function: dict[str, Any] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters
        return {"type": "function", "function": function}

    def map_messages(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for message in messages:
            if message.role == "assistant":
                entry = self.map_assistant(message)
                if entry is not None:
                    out.append(entry)
            elif message.role == "system":
                out.append({"role": "system", "content": message.text})
            else:
                out.extend(self.map_user(message))
        return out

    def map_assistant(self, message: Message) -> dict[str, Any] | None:
        """One assistant message, or None when nothing in it can be sent to Cohere."""
        plan: list[str] = []
        foreign_thinking: list[str] = []
        content: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                if part.text:
                    content.append({"type": "text", "text": part.text})
            elif isinstance(part, ThinkingPart):
                if part.redacted or not part.text:
                    continue
                cohere = (part.provider_data or {}).get("cohere")
                if cohere is None:
                    foreign_thinking.append(part.text)
                elif cohere.get("tool_plan"):
                    plan.append(part.text)
                else:
                    content.append({"type": "thinking", "thinking": part.text})
            elif isinstance(part, ToolCallPart):
                calls.append(_call(part.id, part.name, part.arguments_raw if part.arguments_raw.strip() else "{}"))
            elif isinstance(part, InvalidToolCallPart):
                # Sent with empty arguments: the agent's error result explains what went wrong, and
                # unparseable argument text would make the request itself invalid.
                calls.append(_call(part.id, part.name, "{}"))
        if calls and not plan and foreign_thinking:
            # Another provider's reasoning before its calls is the closest thing to a plan; its
            # signatures stay behind, only the text travels.
            plan = foreign_thinking
        if not content and not calls:
            return None
        entry: dict[str, Any] = {"role": "assistant"}
        if plan:
            entry["tool_plan"] = "".join(plan)
        if calls:
            entry["tool_calls"] = calls
        if content:
            entry["content"] = content
        return entry

    def map_user(self, message: Message) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        content: list[dict[str, Any]] = []
        has_files = False
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                items = [_result_item(part)]
                if part.files:
                    # Cohere's tool messages hold text and documents only, and its tool-calling models
                    # read no images: the files are named for the model instead.
                    files = [resolved(f, self.who()) for f in part.files]
                    items.append({"type": "text", "text": files_note(files, self.who())})
                out.append({"role": "tool", "tool_call_id": part.call_id, "content": items})
            elif isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, FilePart):
                content.append(self.map_file(part))
                has_files = True
        if content:
            if not has_files:
                out.append({"role": "user", "content": "".join(c["text"] for c in content)})
            else:
                out.append({"role": "user", "content": content})
        return out

    def map_file(self, part: FilePart) -> dict[str, Any]:
        """An image (inline or by URL) as `image_url` content; an inline text file as text."""
        who = self.who()
        part = resolved(part, who)
        if is_image(part):
            return {"type": "image_url", "image_url": {"url": data_url(part)}}
        if is_text(part):
            return {"type": "text", "text": text_block(part, who)}
        raise not_accepted(who, part, "images (inline or by URL) and plain-text files (inline)",
                           "Extract the file's text and send it as text (or pass it as a Cohere document "
                           "through extra_body).")


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _result_item(part: ToolResultPart) -> dict[str, Any]:
    """Text stays text; any other result is a document whose `data` is its JSON text."""
    if isinstance(part.result, str):
        return {"type": "text", "text": part.result}
    return {"type": "document", "document": {"data": orjson.dumps(part.result).decode()}}


def _file_item(part: FilePart) -> dict[str, Any]:
    if not part.media_type.startswith("image/"):
        raise UserError(
            f"Cohere's chat messages accept images but not {part.media_type} files. Extract the file's text "
            "and send it as a text part (or pass it as a Cohere document through extra_body)."
        )
    url = part.url or f"data:{part.media_type};base64,{part.data or ''}"
    return {"type": "image_url", "image_url": {"url": url}}


def _thinking(thinking: bool | int | str) -> dict[str, Any]:
    """toolwire's `thinking` setting as Cohere's `thinking` object."""
    if isinstance(thinking, bool):
        return {"type": "enabled" if thinking else "disabled"}
    if isinstance(thinking, int):
        return {"type": "enabled", "token_budget": thinking} if thinking > 0 else {"type": "disabled"}
    return {"type": "disabled" if thinking.lower() in ("none", "disabled", "off") else "enabled"}
