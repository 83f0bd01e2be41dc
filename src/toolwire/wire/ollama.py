"""Ollama's native chat API (`POST /api/chat`), local or Ollama Cloud.

Streaming shape: newline-delimited JSON, one object per line. Each line carries a piece of
`message.content` and/or `message.thinking`; tool calls arrive whole in `message.tool_calls`
(arguments as a JSON object, with or without an `id` and a `function.index` depending on the version);
the last line says `done: true` with `done_reason` and the token counts. A non-streamed answer
(`stream: false`) is that same last line alone, so it parses the same way.

What real streams do, and how this module answers:
- several calls in one line, even to the same tool: each is its own call; a missing id, or one already
  used in this response, is replaced by a generated one, so ids are unique;
- `done_reason` is `stop`, `length`, or `load`/`unload` (a request that only loaded the model): the
  `done: true` line is the completion signal; Ollama says `stop` after tool calls, reported as
  `tool_calls`;
- `{"error": "..."}` as a line (for example a model that failed mid-generation): an error finish.

Requests: tool results become one `role: "tool"` message each, in the order of the calls, naming the tool
(`tool_name`) and the call (`tool_call_id`); images travel as base64 in `images`. Ollama has no
`tool_choice`: `"none"` leaves the tools out of the request, other choices are not expressible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .._accumulate import Accumulator
from ..events import FinishReason, Usage
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
from ._base import JSONLinesParser, StreamParser, WireProtocol
from ._files import files_note, is_image, is_text, no_url, not_accepted, resolved, result_file_blocks, text_block
from ._values import count, need_dict, need_list, need_str, opt_str

__all__ = ["OllamaParser", "Protocol", "map_finish_reason"]

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length"}


def map_finish_reason(raw: str | None) -> FinishReason:
    """Ollama's `done_reason` → toolwire's; `load`, `unload` and anything new are a stop."""
    return _FINISH.get(raw or "stop", "stop")


class OllamaParser(JSONLinesParser):
    """NDJSON lines → accumulator."""

    protocol = "ollama"

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._ids: set[str] = set()
        self._seen_meta = False

    def on_payload(self, event: str | None, payload: dict[str, Any]) -> None:
        acc = self.acc
        error = payload.get("error")
        if error is not None:
            message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
            acc.fail("provider_error", f"Ollama reported an error in the stream: {message}")
            return
        if not self._seen_meta and payload.get("model"):
            self._seen_meta = True
            acc.metadata["model"] = need_str(payload["model"], "model")
        message = payload.get("message")
        if message:
            message = need_dict(message, "message")
            thinking = message.get("thinking")
            if thinking:
                acc.thinking(need_str(thinking, "message.thinking"))
            content = message.get("content")
            if content:
                acc.text(need_str(content, "message.content"))
            for call in need_list(message.get("tool_calls") or [], "message.tool_calls"):
                self.on_tool_call(need_dict(call, "message.tool_calls[]"))
        if payload.get("done"):
            acc.set_usage(Usage(input_tokens=count(payload.get("prompt_eval_count"), "prompt_eval_count"),
                                output_tokens=count(payload.get("eval_count"), "eval_count")))
            raw = opt_str(payload.get("done_reason"), "done_reason")
            acc.finish(map_finish_reason(raw), raw)

    def owns(self, payload: dict[str, Any]) -> bool:
        return any(key in payload for key in ("message", "done", "error", "model"))

    def on_tool_call(self, call: dict[str, Any]) -> None:
        function = need_dict(call.get("function") or {}, "message.tool_calls[].function")
        call_id = opt_str(call.get("id"), "message.tool_calls[].id") or None
        if call_id in self._ids:
            call_id = None  # a repeated id would make two calls indistinguishable
        name = opt_str(function.get("name"), "message.tool_calls[].function.name") or ""
        part = self.acc.whole_call(call_id, name, function.get("arguments"))
        self._ids.add(part.id)


def tool_result_content(part: ToolResultPart) -> str:
    """A tool result as the text of a `tool` message; errors are marked so the model can tell."""
    content = part.result if isinstance(part.result, str) else orjson.dumps(part.result).decode()
    return f"Error: {content}" if part.is_error else content


class Protocol(WireProtocol):
    """Ollama `POST /api/chat` with `stream: true`."""

    name = "ollama"
    display_name = "Ollama"

    def endpoint(self, model: str, settings: ModelSettings) -> str:
        return "/api/chat"

    def default_headers(self) -> dict[str, str]:
        return {"Accept": "application/x-ndjson"}

    def new_parser(self, acc: Accumulator) -> StreamParser:
        return OllamaParser(acc)

    def build_request(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": self.map_messages(messages), "stream": True}
        if tools and settings.get("tool_choice") != "none":
            body["tools"] = [self.map_tool(t) for t in tools]
        options: dict[str, Any] = {}
        if "max_tokens" in settings:
            options["num_predict"] = settings["max_tokens"]
        if "temperature" in settings:
            options["temperature"] = settings["temperature"]
        if "top_p" in settings:
            options["top_p"] = settings["top_p"]
        if settings.get("stop"):
            options["stop"] = settings["stop"]
        if options:
            body["options"] = options
        thinking = settings.get("thinking")
        if isinstance(thinking, bool | str):
            body["think"] = thinking  # a bool, or a level ("low", "medium", "high") for models that take one
        elif isinstance(thinking, int):
            body["think"] = thinking != 0  # Ollama has no token budget: any non-zero budget asks to think
        schema = settings.get("output_schema")
        if schema:
            body["format"] = schema.get("schema", {})
        return merge_extra(body, settings)

    def map_tool(self, tool: ToolDefinition) -> dict[str, Any]:
        function: dict[str, Any] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters
        return {"type": "function", "function": function}

    def map_messages(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        calls: list[ToolCallPart | InvalidToolCallPart] = []
        for message in messages:
            if message.role == "system":
                out.append({"role": "system", "content": message.text})
            elif message.role == "assistant":
                out.append(self.map_assistant(message))
                calls = [p for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))]
            else:
                out.extend(self.map_user(message, calls))
        return out

    def map_assistant(self, message: Message) -> dict[str, Any]:
        entry: dict[str, Any] = {"role": "assistant", "content": message.text}
        # Thinking is plain text here: any provider's (except redacted blocks) can be shown to the model.
        thinking = "".join(p.text for p in message.parts if isinstance(p, ThinkingPart) and not p.redacted)
        if thinking:
            entry["thinking"] = thinking
        calls: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls.append({"id": part.id, "function": {"name": part.name, "arguments": part.arguments}})
            elif isinstance(part, InvalidToolCallPart):
                # Sent with empty arguments: its error result tells the model what went wrong.
                calls.append({"id": part.id, "function": {"name": part.name, "arguments": {}}})
        if calls:
            entry["tool_calls"] = calls
        images = [self.map_image(p) for p in message.parts if isinstance(p, FilePart)]
        if images:
            entry["images"] = images
        return entry

    def map_user(self, message: Message,
                 calls: Sequence[ToolCallPart | InvalidToolCallPart]) -> list[dict[str, Any]]:
        order = {call.id: position for position, call in enumerate(calls)}
        names = {call.id: call.name for call in calls}
        results = sorted((p for p in message.parts if isinstance(p, ToolResultPart)),
                         key=lambda r: order.get(r.call_id, len(order)))
        out: list[dict[str, Any]] = []
        for result in results:
            entry: dict[str, Any] = {"role": "tool", "content": tool_result_content(result),
                                     "tool_name": result.name or names.get(result.call_id, "")}
            if result.call_id:
                entry["tool_call_id"] = result.call_id
            if result.files:
                self.add_result_files(entry, result.files)
            out.append(entry)
        texts: list[str] = []
        images: list[str] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, FilePart):
                file = resolved(part, self.who())
                if is_text(file):
                    texts.append(("\n\n" if texts else "") + text_block(file, self.who()))
                else:
                    images.append(self.map_image(file))
        if texts or images:
            entry = {"role": "user", "content": "".join(texts)}
            if images:
                entry["images"] = images
            out.append(entry)
        return out

    def add_result_files(self, entry: dict[str, Any], files: Sequence[FilePart]) -> None:
        """A result's images go on its `tool` message (Ollama reads `images` on any message); other files,
        and images given only by URL, are named in a note."""
        images, skipped = result_file_blocks(files, self.who(), lambda file: str(file.data),
                                             accepts=lambda file: is_image(file) and file.data is not None)
        if images:
            entry["images"] = images
        if skipped:
            entry["content"] = f"{entry['content']}\n\n{files_note(skipped, self.who())}"

    def map_image(self, part: FilePart) -> str:
        """An image as the base64 string Ollama expects; Ollama cannot fetch URLs or read other files."""
        who = self.who()
        part = resolved(part, who)
        if not is_image(part):
            raise not_accepted(who, part, "images (inline) and plain-text files (inline)",
                               "Extract the file's text and send it as a text part instead.")
        if part.data is None:
            raise no_url(who, part, "image")
        return part.data
