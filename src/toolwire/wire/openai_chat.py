"""OpenAI Chat Completions, and every host that speaks it (OpenRouter, Groq, DeepSeek, xAI, vLLM...).

Streaming shape: `chat.completion.chunk` objects over SSE. Tool calls arrive as partial entries in
`choices[0].delta.tool_calls`, merged by `index`; the first entry of a call carries `id` and name.

What real streams do, and how this module answers (each case has a recorded fixture in the tests):
- a final usage-only chunk with `choices: []` (`stream_options.include_usage`): usage is read from any
  chunk that has it, the last one wins;
- unknown fields (`obfuscation`, `x_groq`, `prompt_token_ids`, `channel`...): ignored;
- `reasoning` / `reasoning_content` (Groq, Ollama, OpenRouter, DeepSeek, Z.ai) become thinking;
  OpenRouter's `reasoning_details` repeats the same text and is not read twice;
- `: comment` lines and a missing `data: [DONE]`: fine; the finish reason is the completion signal;
- `data: [DONE]` without any finish reason (Snowflake Cortex, some OpenRouter upstreams): `[DONE]` is a
  completion signal too, so the calls streamed before it are complete;
- several choices (`n` > 1): choice 0 is assembled, the others are ignored by their `index` (never
  mixed into it) and `metadata["other_choices_ignored"]` says so. toolwire assembles one message per
  response; ask for several answers with several requests;
- `delta.refusal` (a safety refusal, e.g. with structured output): the refusal is the answer's text, and
  `metadata["refusal"] = True` marks the message, as the Responses adapter does;
- values of the wrong type (text that is a number, an id that is a list, a count that is a string):
  an `invalid_field` error naming the field, checked here where each field is read;
- an error inside the stream, either as `event: error` with `{"error": {...}}` (Groq) or as an `error`
  field on a chunk (OpenRouter): an error finish, open calls invalid;
- `finish_reason: "stop"` on a response that called tools (Gemini's and Ollama's compatible endpoints):
  reported as `tool_calls`;
- whole calls with an empty `id` (Gemini compat), several in one chunk: each gets its own generated id.

Call identity, decided from the data, never from the host's name: an entry continues the call at its
`index` unless it carries a different non-empty id, or a name while that call already has one and the
entry has no id (a complete call without id: a new call). Without `index` (Mistral), the id decides.

Requests: OpenAI answers 400 to a tool-call id longer than 40 characters, and some hosts issue longer
ones (46 on a vLLM host behind OpenRouter), so a history from them is sent with those ids shortened,
the same way for a call and its result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson

from .._accumulate import Accumulator, ToolCallBuilder
from ..events import FinishReason, Usage
from ..messages import (
    FilePart,
    InvalidToolCallPart,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..settings import ModelSettings, merge_extra
from ..tools import ToolDefinition
from ._base import SSEParser, StreamParser, WireProtocol
from ._files import (
    data_url,
    file_label,
    files_note,
    is_image,
    is_pdf,
    is_text,
    no_url,
    not_accepted,
    resolved,
    result_file_blocks,
    result_files_intro,
    text_block,
)
from ._values import count, deep, need_dict, need_str, wrong

__all__ = ["MAX_CALL_ID_LENGTH", "OpenAIChatParser", "Protocol", "map_finish_reason", "result_content",
           "shorten_call_id"]

MAX_CALL_ID_LENGTH = 40
"""The longest tool-call id OpenAI's Chat Completions accepts."""

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "end_turn": "stop",
    "eos": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "model_length": "length",
    "max_tokens": "length",
    "content_filter": "content_filter",
    "error": "error",
}


_EMPTY: dict[str, Any] = {}


def map_finish_reason(raw: str) -> FinishReason:
    """The provider's `finish_reason` → toolwire's; unknown reasons are a stop."""
    return _FINISH.get(raw, "stop")


def shorten_call_id(call_id: str, limit: int) -> str:
    """`call_id` when it has at most `limit` characters, else a stable shorter id ending in a hash of it.

    The same id always gives the same result, so a call and its result still match; the hash keeps
    ids that share a long prefix apart.
    """
    if len(call_id) <= limit:
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:16]
    return f"{call_id[:limit - 17]}_{digest}"


def result_content(part: ToolResultPart) -> str:
    """A tool result as the string these APIs expect: strings as they are, anything else as JSON."""
    if isinstance(part.result, str):
        return part.result
    return orjson.dumps(part.result).decode()


def read_usage(usage: dict[str, Any]) -> Usage:
    """A chunk's `usage` object; every count is checked (`invalid_field` for one that is not a count)."""
    prompt_details = need_dict(usage.get("prompt_tokens_details") or {}, "usage.prompt_tokens_details")
    completion_details = need_dict(usage.get("completion_tokens_details") or {},
                                   "usage.completion_tokens_details")
    return Usage(
        input_tokens=count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        output_tokens=count(usage.get("completion_tokens"), "usage.completion_tokens"),
        cache_read_tokens=count(prompt_details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens"),
        reasoning_tokens=count(completion_details.get("reasoning_tokens"),
                               "usage.completion_tokens_details.reasoning_tokens"),
    )


class OpenAIChatParser(SSEParser):
    """Chunks → accumulator. Subclasses (Mistral) override `on_content` for structured content."""

    protocol = "openai-chat"

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._by_index: dict[int, ToolCallBuilder] = {}
        self._by_id: dict[str, ToolCallBuilder] = {}
        self._seen_meta = False

    def owns(self, payload: dict[str, Any]) -> bool:
        return "choices" in payload or "error" in payload or str(payload.get("object", "")).startswith("chat.")

    def on_payload(self, event: str | None, payload: dict[str, Any]) -> None:
        acc = self.acc
        if not self._seen_meta:
            self._seen_meta = True
            if payload.get("id"):
                acc.metadata["response_id"] = need_str(payload["id"], "id")
            if payload.get("model"):
                acc.metadata["model"] = need_str(payload["model"], "model")
        usage = payload.get("usage")
        if usage:
            acc.set_usage(read_usage(need_dict(usage, "usage")))
        choices = payload.get("choices")
        if choices:
            if type(choices) is not list:
                wrong("choices", "a list", choices)
            for choice in choices:
                if type(choice) is not dict:
                    wrong("choices[]", "an object", choice)
                index = choice.get("index")
                if index:  # n > 1: only choice 0 is assembled (see the module docstring)
                    if type(index) is not int:
                        wrong("choices[].index", "a whole number", index)
                    acc.metadata["other_choices_ignored"] = True
                    continue
                delta = choice.get("delta")
                if delta:
                    if type(delta) is not dict:
                        wrong("choices[0].delta", "an object", delta)
                    content = delta.get("content")
                    tool_calls = delta.get("tool_calls")
                    # Nearly every delta holds one key (`content` or `tool_calls`): the others are only
                    # looked up when the delta has more keys than those two account for.
                    others = len(delta) - (content is not None) - (tool_calls is not None)
                    if others:
                        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                        if reasoning:
                            acc.thinking(need_str(reasoning, "choices[0].delta.reasoning"))
                    if content:
                        if type(content) is str:
                            acc.text(content)
                        else:
                            self.on_content(content)
                    if others:
                        refusal = delta.get("refusal")
                        if refusal:
                            acc.metadata["refusal"] = True
                            acc.text(need_str(refusal, "choices[0].delta.refusal"))
                    if tool_calls:
                        if type(tool_calls) is not list:
                            wrong("choices[0].delta.tool_calls", "a list", tool_calls)
                        self.on_tool_calls(tool_calls)
                finish = choice.get("finish_reason")
                if finish:
                    self.on_finish(need_str(finish, "choices[0].finish_reason"))
        error = payload.get("error")
        if error or event == "error":
            self.on_error(error if error is not None else payload)

    def on_content(self, content: Any) -> None:
        if type(content) is str:
            self.acc.text(content)
        elif type(content) is list:
            # A few compatible hosts send content as typed parts; their text is the text.
            for item in content:
                if type(item) is dict and item.get("type") == "text":
                    self.acc.text(need_str(item.get("text") or "", "choices[0].delta.content[].text"))
        else:
            wrong("choices[0].delta.content", "a string", content)

    def on_tool_calls(self, entries: list[Any]) -> None:
        acc = self.acc
        for entry in entries:
            if type(entry) is not dict:
                wrong("choices[0].delta.tool_calls[]", "an object", entry)
            # The checks are written out: this runs once per argument fragment.
            index = entry.get("index")
            if index is not None and type(index) is not int:
                wrong("choices[0].delta.tool_calls[].index", "a whole number", index)
            call_id = entry.get("id")
            if call_id is not None and type(call_id) is not str:
                wrong("choices[0].delta.tool_calls[].id", "a string", call_id)
            call_id = call_id or None
            function = entry.get("function") or _EMPTY
            if type(function) is not dict:
                wrong("choices[0].delta.tool_calls[].function", "an object", function)
            name = function.get("name")
            if name is not None and type(name) is not str:
                wrong("choices[0].delta.tool_calls[].function.name", "a string", name)
            name = name or None
            if index is not None:
                call = self._by_index.get(index)
            else:
                call = self._by_id.get(call_id) if call_id else None
            if (
                call is None
                or call.ended
                or (call_id is not None and call_id != call.id)
                or (name is not None and call_id is None and call.name)
            ):
                call = acc.start_call(call_id, name)
                if index is not None:
                    self._by_index[index] = call
                self._by_id[call.id] = call
            elif name and not call.name:
                call.name = name
            arguments = function.get("arguments")
            if arguments:
                if type(arguments) is str:
                    acc.call_arguments(call, arguments)
                elif type(arguments) is dict:  # a few hosts send an object instead of a string
                    path = "choices[0].delta.tool_calls[].function.arguments"
                    acc.call_arguments(call, orjson.dumps(deep(arguments, path)).decode())
                else:
                    wrong("choices[0].delta.tool_calls[].function.arguments", "a string", arguments)

    def on_finish(self, raw: str) -> None:
        reason = map_finish_reason(raw)
        if reason != "length" and reason != "error":
            # No per-call completion signal in this protocol: the finish reason completes every call.
            for call in self.acc.calls:
                if not call.ended:
                    self.acc.end_call(call)
        self.acc.finish(reason, raw)

    def on_done(self) -> None:
        # `[DONE]` ends the response: where no finish reason came, it is the completion signal.
        acc = self.acc
        if acc.finish_reason is None and acc.error is None:
            for call in acc.calls:
                if not call.ended:
                    acc.end_call(call)
            acc.finish("stop", None)

    def on_error(self, error: Any) -> None:
        if isinstance(error, dict):
            message = error.get("message") or orjson.dumps(error).decode()
            kind = error.get("code") or error.get("type") or "provider_error"
        else:
            message, kind = str(error), "provider_error"
        self.acc.fail(str(kind), f"The provider reported an error in the stream: {message}")


class Protocol(WireProtocol):
    """OpenAI Chat Completions (`POST /chat/completions`, `stream: true`)."""

    name = "openai-chat"
    display_name = "OpenAI Chat Completions"

    def endpoint(self, model: str, settings: ModelSettings) -> str:
        return "/chat/completions"

    def new_parser(self, acc: Accumulator) -> StreamParser:
        return OpenAIChatParser(acc)

    def build_request(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": self.map_messages(messages), "stream": True}
        if self.option("stream_options", True):
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = [self.map_tool(t) for t in tools]
            choice = settings.get("tool_choice")
            if choice is not None:
                body["tool_choice"] = self.map_tool_choice(choice)
            if "parallel_tool_calls" in settings:
                body["parallel_tool_calls"] = settings["parallel_tool_calls"]
        if "max_tokens" in settings:
            body[self.option("max_tokens_field", "max_completion_tokens")] = settings["max_tokens"]
        for key in ("temperature", "top_p", "stop"):
            if key in settings:
                body[key] = settings[key]  # type: ignore[literal-required,unused-ignore]
        thinking = settings.get("thinking")
        if isinstance(thinking, str):
            body["reasoning_effort"] = thinking
        schema = settings.get("output_schema")
        if schema:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": schema.get("name", "output"),
                    "schema": schema.get("schema", {}),
                    "strict": schema.get("strict", True),
                },
            }
        return merge_extra(body, settings)

    def map_tool(self, tool: ToolDefinition) -> dict[str, Any]:
        function: dict[str, Any] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters
        if tool.strict is not None:
            function["strict"] = tool.strict
        return {"type": "function", "function": function}

    def map_tool_choice(self, choice: Any) -> Any:
        if isinstance(choice, dict):
            return {"type": "function", "function": {"name": choice["name"]}}
        return choice

    def map_call_id(self, call_id: str) -> str:
        """The id a call and its result are sent with (providers with their own id rules override it)."""
        return shorten_call_id(call_id, MAX_CALL_ID_LENGTH)

    def map_messages(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for message in messages:
            if message.role == "assistant":
                out.append(self.map_assistant(message))
            elif message.role == "system":
                out.append({"role": "system", "content": message.text})
            else:
                out.extend(self.map_user(message))
        return out

    def map_assistant(self, message: Message) -> dict[str, Any]:
        text = message.text
        calls: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                arguments = part.arguments_raw if part.arguments_raw.strip() else "{}"
                calls.append(self._call(part.id, part.name, arguments))
            elif isinstance(part, InvalidToolCallPart):
                # Sent as a call with empty arguments: its error result (from the agent) tells the model
                # what went wrong, and unparseable argument text would make the request itself invalid.
                calls.append(self._call(part.id, part.name, "{}"))
        entry: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            entry["tool_calls"] = calls
        return entry

    def _call(self, call_id: str, name: str, arguments: str) -> dict[str, Any]:
        return {"id": self.map_call_id(call_id), "type": "function",
                "function": {"name": name, "arguments": arguments}}

    def map_user(self, message: Message) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        content: list[dict[str, Any]] = []
        result_files: list[dict[str, Any]] = []
        has_files = False
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                entry = self.map_tool_result(part)
                blocks, skipped = self.map_result_files(part)
                if skipped:
                    entry["content"] = f"{entry['content']}\n\n{files_note(skipped, self.who())}"
                out.append(entry)
                result_files.extend(blocks)
            elif isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, FilePart):
                if part.name and self.option("file_labels", False):
                    # Image blocks carry no name: a host that wants it (the offline model) gets a line first.
                    content.append({"type": "text", "text": file_label(resolved(part, self.who()))})
                content.append(self.map_file(part))
                has_files = True
        if result_files:
            # A `tool` message holds text only: the files a tool returned follow all the round's results
            # in one user message, each result's files after a line naming the call (the model sees them,
            # and the request stays valid: every call is answered before anything else is said).
            out.append({"role": "user", "content": result_files})
        if content:
            if not has_files:
                out.append({"role": "user", "content": "".join(c["text"] for c in content)})
            else:
                out.append({"role": "user", "content": content})
        return out

    def map_tool_result(self, part: ToolResultPart) -> dict[str, Any]:
        """One `tool` message per result (the consolidated results message is split here)."""
        return {"role": "tool", "tool_call_id": self.map_call_id(part.call_id), "content": result_content(part)}

    def map_result_files(self, part: ToolResultPart) -> tuple[list[dict[str, Any]], list[FilePart]]:
        """A result's files as user-message blocks (opened by a line naming the call), and the files this API
        cannot take, which the tool message names instead."""
        sent: list[FilePart] = []

        def mapped(file: FilePart) -> dict[str, Any]:
            block = self.map_file(file)
            sent.append(file)
            return block

        blocks, skipped = result_file_blocks(part.files, self.who(), mapped)
        if blocks:
            intro = result_files_intro(self.map_call_id(part.call_id), part.name, sent)
            blocks.insert(0, {"type": "text", "text": intro})
        return blocks, skipped

    def map_file(self, part: FilePart) -> dict[str, Any]:
        """An image (inline or URL) as `image_url`, an inline PDF as `file`, an inline text file as text."""
        who = self.who()
        part = resolved(part, who)
        if is_image(part):
            return {"type": "image_url", "image_url": {"url": data_url(part)}}
        if is_pdf(part):
            if part.data is None:
                raise no_url(who, part, "PDF")
            return {"type": "file", "file": {"filename": part.name or "file.pdf", "file_data": data_url(part)}}
        if is_text(part):
            return {"type": "text", "text": text_block(part, who)}
        raise not_accepted(who, part, "images (inline or by URL), PDFs and plain-text files (inline)",
                           "Convert the file to one of those, or extract its text and send that.")
