"""OpenAI Responses API (`POST /responses`), and the hosts that speak it (xAI, DeepSeek, OpenRouter).

Streaming shape: typed events over SSE. A response is a list of output *items* (`message`, `reasoning`,
`function_call`, and provider-side tool calls such as `web_search_call`), each opened by
`response.output_item.added`, filled by deltas that name it (`item_id`, `output_index`) and closed by
`response.output_item.done`. `response.completed` / `.incomplete` / `.failed` end the response.

What real streams do, and how this module answers (the tests replay a recording of each case; the
`content_filter` reason and hosts without deltas are hand-built streams):
- OpenRouter sends no `event:` lines and ends with `data: [DONE]`: events are dispatched on the
  payload's `type`, never on the SSE event name;
- a function call is complete at its item's `output_item.done`; its `ToolCallEnd` is emitted right
  then, before any later item's events, so an agent can start the tool while the model goes on;
- the tool-call id is the item's `call_id` (what `function_call_output` must quote); the item `id`
  goes to provider data, keyed by this protocol's name;
- reasoning arrives as summary deltas (OpenAI, xAI), raw `reasoning_text` deltas (DeepSeek,
  OpenRouter) or not at all (an `encrypted_content` blob only). Each reasoning item is one thinking
  part, and the item exactly as `output_item.done` delivered it is kept so the next request can send it
  back; OpenRouter finishes a reasoning item after the next item has started, which is why parts are
  addressed by handle rather than "the last one";
- server-side tools (web search, file search, code interpreter, MCP, image generation...) become
  `ProviderToolPart`s updated in place as their progress events arrive; they are never run locally;
- `response.incomplete` says why (`max_output_tokens` → `length`, `content_filter`); an `error` event
  and `response.failed` are an error finish that keeps everything complete before them;
- hosts that skip deltas and send only `.done` events or whole items are read from those;
- hosts that give an item a new `item_id` on every event (GitHub Copilot's endpoint): items are keyed
  by `output_index` first and by `item_id` only where no index is given, so a `.done` event never
  repeats text or starts an empty thinking part;
- refusals (`response.refusal.delta`, a `refusal` content part) are the answer's text, and
  `metadata["refusal"] = True` marks the message, as the Chat Completions adapter does;
- a field of the wrong type is an `invalid_field` error naming it; provider items kept whole (reasoning,
  provider tools) must nest at most `MAX_VALUE_DEPTH` levels.

Request mapping keeps each part's protocol data only where it is valid: reasoning items, item ids and
provider tool items go back to the host that produced them and are dropped for any other. An assistant
message whose reasoning cannot be sent (no encrypted content while nothing is stored server-side) is
sent without its item ids, because an item id without its reasoning item is refused with a 400.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from .._accumulate import Accumulator, ThinkingBlock, ToolCallBuilder
from ..events import FinishReason, Usage
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
from ._files import (
    data_url,
    files_note,
    is_image,
    is_pdf,
    is_text,
    not_accepted,
    resolved,
    result_file_blocks,
    text_block,
)
from ._values import count, deep, need_dict, need_str, opt_str, wrong
from .openai_chat import result_content, shorten_call_id

__all__ = ["KEY", "MAX_CALL_ID_LENGTH", "OpenAIResponsesParser", "Protocol", "read_usage"]

KEY = "openai-responses"
"""The key under which this protocol keeps its data in `provider_data` and `Message.metadata`."""

MAX_CALL_ID_LENGTH = 64
"""The longest `call_id` the Responses API accepts; longer ids from other providers are shortened."""

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "max_tokens": "length",
    "content_filter": "content_filter",
}

# Output item types that are toolwire's own concepts; every other item type is provider-side activity.
_OWN_ITEMS = frozenset({"message", "reasoning", "function_call"})


def read_usage(usage: dict[str, Any]) -> Usage:
    """A Responses `usage` object (on the terminal event) as toolwire's `Usage`."""
    input_details = need_dict(usage.get("input_tokens_details") or {}, "response.usage.input_tokens_details")
    output_details = need_dict(usage.get("output_tokens_details") or {}, "response.usage.output_tokens_details")
    return Usage(
        input_tokens=count(usage.get("input_tokens"), "response.usage.input_tokens"),
        output_tokens=count(usage.get("output_tokens"), "response.usage.output_tokens"),
        cache_read_tokens=count(input_details.get("cached_tokens"),
                                "response.usage.input_tokens_details.cached_tokens"),
        cache_write_tokens=count(input_details.get("cache_write_tokens"),
                                 "response.usage.input_tokens_details.cache_write_tokens"),
        reasoning_tokens=count(output_details.get("reasoning_tokens"),
                               "response.usage.output_tokens_details.reasoning_tokens"),
    )


def _provider_tool_name(item: dict[str, Any]) -> str:
    kind: str = item.get("type") or "provider_tool"
    if kind == "mcp_call" and item.get("name"):
        label = item.get("server_label")
        return f"{label}.{item['name']}" if label else str(item["name"])
    return kind.removesuffix("_call")


def _provider_tool_io(item: dict[str, Any]) -> tuple[Any, Any]:
    """What the provider-side tool was asked, and what it answered, as far as the item says."""
    kind = item.get("type")
    if kind == "web_search_call":
        return item.get("action"), None
    if kind == "file_search_call":
        return {"queries": item.get("queries")}, item.get("results")
    if kind == "code_interpreter_call":
        return {"code": item.get("code"), "container_id": item.get("container_id")}, item.get("outputs")
    if kind == "mcp_call":
        arguments = item.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = orjson.loads(arguments)
            except orjson.JSONDecodeError:
                pass
        return arguments, item.get("error") or item.get("output")
    if kind == "image_generation_call":
        return None, item.get("result")
    return item.get("arguments") or item.get("action") or item.get("input"), item.get("output")


class _Reasoning:
    """One reasoning item being streamed: its thinking part and the record sent back next time."""

    __slots__ = ("block", "has_text", "record", "streamed")

    def __init__(self, block: ThinkingBlock, record: dict[str, Any]) -> None:
        self.block = block
        self.record = record
        self.has_text = False
        self.streamed = False


class OpenAIResponsesParser(SSEParser):
    """Responses events → accumulator."""

    protocol = "openai-responses"

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._calls: dict[str, ToolCallBuilder] = {}
        self._calls_at: dict[int, ToolCallBuilder] = {}
        self._reasoning: dict[int | str, _Reasoning] = {}
        self._tools: dict[int | str, ProviderToolPart] = {}
        self._text_items: set[int | str] = set()
        """Message items whose text has arrived (as deltas or whole), by output index and by item id."""
        self._text_open = False
        """Whether the accumulator's current part is a text run (the next message's text would join it)."""
        self._message_ids: list[str | None] = []
        self._record: dict[str, Any] = {}
        acc.metadata[KEY] = self._record
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "response.output_text.delta": self._on_text_delta,
            "response.function_call_arguments.delta": self._on_arguments_delta,
            "response.reasoning_summary_text.delta": self._on_reasoning_delta,
            "response.reasoning_text.delta": self._on_reasoning_delta,
            "response.refusal.delta": self._on_refusal_delta,
            "response.output_text.done": self._on_text_done,
            "response.refusal.done": self._on_refusal_done,
            "response.function_call_arguments.done": self._on_arguments_done,
            "response.reasoning_summary_text.done": self._on_reasoning_done,
            "response.reasoning_text.done": self._on_reasoning_done,
            "response.reasoning_summary_part.added": self._on_summary_part,
            "response.output_item.added": self._on_item_added,
            "response.output_item.done": self._on_item_done,
            "response.created": self._on_response_meta,
            "response.in_progress": self._on_response_meta,
            "response.queued": self._on_response_meta,
            "response.completed": self._on_completed,
            "response.incomplete": self._on_incomplete,
            "response.failed": self._on_failed,
            "error": self._on_error,
        }

    def owns(self, payload: dict[str, Any]) -> bool:
        kind = payload.get("type")
        return isinstance(kind, str) and (kind in self._handlers or kind.startswith("response."))

    def on_payload(self, event: str | None, payload: dict[str, Any]) -> None:
        kind = payload.get("type") or event
        if not kind:
            return
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(payload)
        elif type(kind) is str and kind.startswith("response.") and self._tool_for(payload) is not None:
            self._on_tool_progress(kind, payload)

    # -- response-level events ---------------------------------------------------------------

    def _on_response_meta(self, payload: dict[str, Any]) -> None:
        response = payload.get("response")
        if not isinstance(response, dict):
            return
        if response.get("id") and "response_id" not in self._record:
            self.acc.metadata["response_id"] = self._record["response_id"] = need_str(response["id"], "response.id")
        if response.get("model") and "model" not in self.acc.metadata:
            self.acc.metadata["model"] = need_str(response["model"], "response.model")

    def _end_response(self, payload: dict[str, Any]) -> dict[str, Any]:
        self._on_response_meta(payload)
        response = payload.get("response")
        if not isinstance(response, dict):
            return {}
        usage = response.get("usage")
        if usage:
            self.acc.set_usage(read_usage(need_dict(usage, "response.usage")))
        return response

    def _on_completed(self, payload: dict[str, Any]) -> None:
        response = self._end_response(payload)
        self.acc.finish("stop", opt_str(response.get("status"), "response.status") or "completed")

    def _on_incomplete(self, payload: dict[str, Any]) -> None:
        response = self._end_response(payload)
        details = need_dict(response.get("incomplete_details") or {}, "response.incomplete_details")
        raw = opt_str(details.get("reason"), "response.incomplete_details.reason") or "incomplete"
        # An incomplete response was cut short; an unknown reason is still a cut, never a clean stop.
        self.acc.finish(_INCOMPLETE.get(raw, "length"), raw)

    def _on_failed(self, payload: dict[str, Any]) -> None:
        response = self._end_response(payload)
        self._fail(response.get("error") or {"message": "the response failed without saying why"})

    def _on_error(self, payload: dict[str, Any]) -> None:
        error = payload.get("error")
        self._fail(error if isinstance(error, dict) else payload)

    def _fail(self, error: Any) -> None:
        if not isinstance(error, dict):
            error = {"message": str(error)}
        message = error.get("message") or orjson.dumps(error).decode()
        kind = error.get("code") or error.get("type")
        if not kind or kind == "error":
            kind = "provider_error"
        self.acc.fail(str(kind), f"The provider reported an error in the stream: {message}")

    # -- output items ------------------------------------------------------------------------

    def _on_item_added(self, payload: dict[str, Any]) -> None:
        item = need_dict(payload["item"], "item")
        kind = item.get("type")
        index = _index(payload)
        if kind == "function_call":
            self._start_call(item, index)
        elif kind == "reasoning":
            self._start_reasoning(item, index)
        elif kind not in _OWN_ITEMS and kind is not None:
            self._start_tool(item, index)

    def _on_item_done(self, payload: dict[str, Any]) -> None:
        item = need_dict(payload["item"], "item")
        kind = item.get("type")
        index = _index(payload)
        if kind == "function_call":
            self._end_call(item, index)
        elif kind == "reasoning":
            self._end_reasoning(item, index)
        elif kind == "message":
            self._end_message(item, index)
        elif kind not in _OWN_ITEMS and kind is not None:
            self._end_tool(item, index)

    # -- text --------------------------------------------------------------------------------

    def _text(self, item_id: str | None, index: int | None, text: str) -> None:
        if not text:
            return
        key = index if index is not None else item_id or ""
        if key not in self._text_items:
            self._text_items.add(key)
            if item_id:
                self._text_items.add(item_id)
            if not self._text_open:
                # The n-th text part came from the n-th recorded message item: the id lets the next
                # request name the item (text of a message that directly follows another joins its part).
                self._message_ids.append(item_id)
                self._record["message_ids"] = self._message_ids
        self._text_open = True
        self.acc.text(text)

    def _has_text(self, item_id: str | None, index: int | None) -> bool:
        """Whether text of this item arrived already (by its index, or by its id where it has none)."""
        return (index is not None and index in self._text_items) or (item_id or "") in self._text_items

    def _on_text_delta(self, payload: dict[str, Any]) -> None:
        # Once per text delta: the checks are written out rather than called.
        delta = payload["delta"]
        item_id = payload.get("item_id")
        index = payload.get("output_index")
        if type(delta) is not str or (item_id is not None and type(item_id) is not str) or (
                index is not None and type(index) is not int):
            need_str(delta, "delta")  # one of these three raises, naming its field
            _item_id(payload)
            _index(payload)
        self._text(item_id, index, delta)

    def _on_refusal_delta(self, payload: dict[str, Any]) -> None:
        self.acc.metadata["refusal"] = True
        self._on_text_delta(payload)

    def _on_text_done(self, payload: dict[str, Any]) -> None:
        # Hosts that stream no deltas still send the whole text here.
        item_id, index = _item_id(payload), _index(payload)
        if not self._has_text(item_id, index):
            self._text(item_id, index, need_str(payload.get("text") or "", "text"))

    def _on_refusal_done(self, payload: dict[str, Any]) -> None:
        self.acc.metadata["refusal"] = True
        item_id, index = _item_id(payload), _index(payload)
        if not self._has_text(item_id, index):
            self._text(item_id, index, need_str(payload.get("refusal") or "", "refusal"))

    def _end_message(self, item: dict[str, Any], index: int | None) -> None:
        item_id = opt_str(item.get("id"), "item.id")
        contents = item.get("content") or ()
        if self._has_text(item_id, index):
            return
        for content in contents:
            content = need_dict(content, "item.content[]")
            if content.get("refusal") or content.get("type") == "refusal":
                self.acc.metadata["refusal"] = True
            text = content.get("text") or content.get("refusal") or ""
            self._text(item_id, index, need_str(text, "item.content[].text"))

    # -- function calls ----------------------------------------------------------------------

    def _start_call(self, item: dict[str, Any], output_index: int | None) -> ToolCallBuilder:
        self._text_open = False
        item_id = opt_str(item.get("id"), "item.id")
        call = self.acc.start_call(opt_str(item.get("call_id"), "item.call_id"), opt_str(item.get("name"), "item.name"),
                                   provider_data={KEY: {"item_id": item_id}} if item_id else None)
        if item_id:
            self._calls[item_id] = call
        if output_index is not None:
            self._calls_at[output_index] = call
        arguments = item.get("arguments")
        if arguments:
            self.acc.call_arguments(call, need_str(arguments, "item.arguments"))
        return call

    def _find_call(self, item_id: str | None, output_index: int | None) -> ToolCallBuilder | None:
        call = self._calls.get(item_id or "")
        if call is None and output_index is not None:
            call = self._calls_at.get(output_index)
        return call

    def _on_arguments_delta(self, payload: dict[str, Any]) -> None:
        delta = payload["delta"]
        if type(delta) is not str:
            wrong("delta", "a string", delta)
        item_id = payload.get("item_id")
        call = self._calls.get(item_id) if type(item_id) is str else None
        if call is None:
            call = self._find_call(_item_id(payload), _index(payload))
        if call is not None:
            self.acc.call_arguments(call, delta)

    def _on_arguments_done(self, payload: dict[str, Any]) -> None:
        call = self._find_call(_item_id(payload), _index(payload))
        if call is not None and not call.fragments and payload.get("arguments"):
            self.acc.call_arguments(call, need_str(payload["arguments"], "arguments"))

    def _end_call(self, item: dict[str, Any], output_index: int | None) -> None:
        call = self._find_call(opt_str(item.get("id"), "item.id"), output_index)
        if call is None:
            call = self._start_call(item, output_index)
        elif call.ended:
            return  # a repeated done event
        elif not call.fragments and item.get("arguments"):
            self.acc.call_arguments(call, need_str(item["arguments"], "item.arguments"))
        if item.get("status") == "incomplete":
            self.acc.end_call(call, complete=False,
                              reason="The response stopped while this call's arguments were being written, "
                                     "so it was not run.")
        else:
            self.acc.end_call(call)

    # -- reasoning ---------------------------------------------------------------------------

    def _start_reasoning(self, item: dict[str, Any], index: int | None) -> _Reasoning:
        self._text_open = False
        item_id = opt_str(item.get("id"), "item.id") or ""
        record: dict[str, Any] = {"item_id": item_id, "item": deep(item, "item")}
        block = self.acc.thinking("", new_block=True, provider_data={KEY: record})
        reasoning = _Reasoning(block, record)
        self._reasoning[item_id] = reasoning
        if index is not None:
            self._reasoning[index] = reasoning
        return reasoning

    def _reasoning_for(self, payload: dict[str, Any]) -> _Reasoning:
        item_id, index = _item_id(payload), _index(payload)
        reasoning = self._reasoning.get(index) if index is not None else None
        if reasoning is None:
            reasoning = self._reasoning.get(item_id or "")
        if reasoning is None:
            reasoning = self._start_reasoning({"type": "reasoning", "id": item_id or "", "summary": []}, index)
        return reasoning

    def _think(self, reasoning: _Reasoning, text: str) -> None:
        if text:
            reasoning.has_text = True
            self.acc.thinking(text, block=reasoning.block)

    def _on_reasoning_delta(self, payload: dict[str, Any]) -> None:
        delta = payload["delta"]
        if type(delta) is not str:
            wrong("delta", "a string", delta)
        reasoning = self._reasoning_for(payload)
        reasoning.streamed = True
        self._think(reasoning, delta)

    def _on_reasoning_done(self, payload: dict[str, Any]) -> None:
        reasoning = self._reasoning_for(payload)
        if not reasoning.streamed:
            self._think(reasoning, need_str(payload.get("text") or "", "text"))

    def _on_summary_part(self, payload: dict[str, Any]) -> None:
        # Several summary parts of one item read as paragraphs of one thinking part.
        reasoning = self._reasoning_for(payload)
        if reasoning.has_text:
            self._think(reasoning, "\n\n")

    def _end_reasoning(self, item: dict[str, Any], index: int | None) -> None:
        deep(item, "item")
        reasoning = self._reasoning.get(index) if index is not None else None
        if reasoning is None:
            reasoning = self._reasoning.get(opt_str(item.get("id"), "item.id") or "")
        if reasoning is None:
            reasoning = self._start_reasoning(item, index)
        if not reasoning.streamed and not reasoning.has_text:
            texts = [_text_of(s, "item.summary[]") for s in item.get("summary") or ()]
            if not any(texts):
                texts = [_text_of(c, "item.content[]") for c in item.get("content") or ()]
            self._think(reasoning, "\n\n".join(t for t in texts if t))
        # The finished item (with its final encrypted_content) is what the next request sends back.
        self.acc.thinking_provider_data({KEY: {**reasoning.record, "item": item}}, block=reasoning.block)

    # -- provider-side tools -----------------------------------------------------------------

    def _tool_part(self, item: dict[str, Any], status: str | None) -> ProviderToolPart:
        deep(item, "item")
        arguments, result = _provider_tool_io(item)
        return ProviderToolPart(
            id=opt_str(item.get("id"), "item.id") or "",
            name=_provider_tool_name(item),
            provider=self.acc.provider or KEY,
            arguments=arguments,
            result=result,
            status=status,
            provider_data={KEY: {"item": item}},
        )

    def _remember_tool(self, part: ProviderToolPart, index: int | None) -> None:
        self._tools[part.id] = part
        if index is not None:
            self._tools[index] = part

    def _tool_for(self, payload: dict[str, Any]) -> ProviderToolPart | None:
        index = _index(payload)
        part = self._tools.get(index) if index is not None else None
        return part if part is not None else self._tools.get(_item_id(payload) or "")

    def _start_tool(self, item: dict[str, Any], index: int | None) -> None:
        self._text_open = False
        part = self._tool_part(item, opt_str(item.get("status"), "item.status") or "in_progress")
        self._remember_tool(part, index)
        self.acc.part(part)

    def _on_tool_progress(self, kind: str, payload: dict[str, Any]) -> None:
        status = kind.rsplit(".", 1)[-1]
        if status not in ("in_progress", "searching", "interpreting", "generating", "completed", "failed"):
            return  # argument and code deltas, partial images: the finished item carries them whole
        old = self._tool_for(payload)
        if old is not None and old.status != status:
            new = ProviderToolPart(id=old.id, name=old.name, provider=old.provider, arguments=old.arguments,
                                   result=old.result, status=status, provider_data=old.provider_data)
            self._remember_tool(new, _index(payload))
            self.acc.replace_part(old, new)

    def _end_tool(self, item: dict[str, Any], index: int | None) -> None:
        new = self._tool_part(item, opt_str(item.get("status"), "item.status") or "completed")
        old = self._tools.get(index) if index is not None else None
        if old is None:
            old = self._tools.get(new.id)
        self._remember_tool(new, index)
        if old is None:
            self._text_open = False
            self.acc.part(new)
        else:
            self.acc.replace_part(old, new)


def _item_id(payload: dict[str, Any]) -> str | None:
    item_id = payload.get("item_id")
    if item_id is not None and type(item_id) is not str:
        wrong("item_id", "a string", item_id)
    return item_id


def _index(payload: dict[str, Any]) -> int | None:
    index = payload.get("output_index")
    if index is not None and type(index) is not int:
        wrong("output_index", "a whole number", index)
    return index


def _text_of(entry: Any, path: str) -> str:
    return need_str(need_dict(entry, path).get("text") or "", f"{path}.text")


class Protocol(WireProtocol):
    """OpenAI Responses (`POST /responses`, `stream: true`).

    Settings read here beyond the common ones: `stateful=True` chains on the previous response
    (`previous_response_id`) and sends only what came after it; `thinking` asks for reasoning with
    summaries and, when not stateful, for the encrypted reasoning that lets a stateless history carry it.
    """

    name = "openai-responses"
    display_name = "OpenAI Responses"

    def endpoint(self, model: str, settings: ModelSettings) -> str:
        return "/responses"

    def new_parser(self, acc: Accumulator) -> StreamParser:
        return OpenAIResponsesParser(acc)

    def build_request(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> dict[str, Any]:
        stateful = bool(settings.get("stateful"))
        thinking = settings.get("thinking")
        wants_reasoning = bool(thinking)
        # Without server-side storage, reasoning can only travel as encrypted content in the request.
        stored = not (wants_reasoning and not stateful)
        extra = settings.get("extra_body") or {}
        if extra.get("store") is False:
            stored = False

        instructions: list[str] = []
        start = 0
        while start < len(messages) and messages[start].role == "system":
            instructions.append(messages[start].text)
            start += 1
        history = list(messages[start:])
        previous_id = None
        if stateful:
            previous_id, history = self._continuation(history)

        body: dict[str, Any] = {"model": model}
        if instructions:
            body["instructions"] = "\n\n".join(instructions)
        body["input"] = self.map_messages(history, stored=stored)
        if previous_id is not None:
            body["previous_response_id"] = previous_id
        body["stream"] = True
        if tools:
            body["tools"] = [self.map_tool(t) for t in tools]
            choice = settings.get("tool_choice")
            if isinstance(choice, dict):
                body["tool_choice"] = {"type": "function", "name": choice["name"]}
            elif choice is not None:
                body["tool_choice"] = choice
            if "parallel_tool_calls" in settings:
                body["parallel_tool_calls"] = settings["parallel_tool_calls"]
        if "max_tokens" in settings:
            body["max_output_tokens"] = settings["max_tokens"]
        for key in ("temperature", "top_p"):
            if key in settings:
                body[key] = settings[key]  # type: ignore[literal-required,unused-ignore]
        if wants_reasoning:
            reasoning: dict[str, Any] = {"summary": "auto"}
            if isinstance(thinking, str):
                reasoning = {"effort": thinking, **reasoning}
            body["reasoning"] = reasoning
            if not stateful:
                body["store"] = False
                body["include"] = ["reasoning.encrypted_content"]
        schema = settings.get("output_schema")
        if schema:
            body["text"] = {"format": {
                "type": "json_schema",
                "name": schema.get("name", "output"),
                "schema": schema.get("schema", {}),
                "strict": schema.get("strict", True),
            }}
        return merge_extra(body, settings)

    def _continuation(self, history: list[Message]) -> tuple[str | None, list[Message]]:
        """The previous response to chain on, and the messages that came after it."""
        for index in range(len(history) - 1, -1, -1):
            message = history[index]
            if message.role != "assistant":
                continue
            record = message.metadata.get(KEY)
            if isinstance(record, dict) and record.get("response_id") and self._own(message):
                return str(record["response_id"]), history[index + 1:]
            break
        return None, history

    def _own(self, message: Message) -> bool:
        """Whether `message` came from the host this protocol talks to (so its item data is valid here)."""
        source = message.metadata.get("provider")
        return source is None or self.provider is None or source == self.provider.name

    def map_tool(self, tool: ToolDefinition) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "function", "name": tool.name}
        if tool.description:
            entry["description"] = tool.description
        entry["parameters"] = tool.parameters
        # The Responses API defaults to strict schemas, which reject most hand-written ones.
        entry["strict"] = bool(tool.strict)
        return entry

    def map_messages(self, messages: Sequence[Message], *, stored: bool = True) -> list[dict[str, Any]]:
        """Messages → `input` items. `stored=False`: the host keeps nothing, so ids alone mean nothing."""
        items: list[dict[str, Any]] = []
        for message in messages:
            if message.role == "assistant":
                items.extend(self.map_assistant(message, stored=stored))
            elif message.role == "system":
                items.append({"role": "system", "content": message.text})
            else:
                items.extend(self.map_user(message))
        return items

    def map_assistant(self, message: Message, *, stored: bool = True) -> list[dict[str, Any]]:
        own = self._own(message)
        record = message.metadata.get(KEY) if own else None
        message_ids: list[str | None] = list(record.get("message_ids") or ()) if isinstance(record, dict) else []
        items: list[dict[str, Any]] = []
        with_ids: list[dict[str, Any]] = []
        reasoning_complete = True
        text_index = 0
        for part in message.parts:
            data = _own_data(part, own)
            if isinstance(part, TextPart):
                entry: dict[str, Any] = {"type": "message", "role": "assistant",
                                         "content": [{"type": "output_text", "text": part.text, "annotations": []}]}
                message_id = message_ids[text_index] if text_index < len(message_ids) else None
                if message_id:
                    entry["id"] = message_id
                    entry["status"] = "completed"
                    with_ids.append(entry)
                text_index += 1
                items.append(entry)
            elif isinstance(part, ToolCallPart | InvalidToolCallPart):
                # An invalid call goes back with empty arguments: its error result tells the model what
                # went wrong, and unparseable argument text would make the whole request invalid.
                arguments = "{}"
                if isinstance(part, ToolCallPart) and part.arguments_raw.strip():
                    arguments = part.arguments_raw
                entry = {"type": "function_call", "call_id": shorten_call_id(part.id, MAX_CALL_ID_LENGTH),
                         "name": part.name, "arguments": arguments}
                if data and data.get("item_id"):
                    entry["id"] = data["item_id"]
                    with_ids.append(entry)
                items.append(entry)
            elif isinstance(part, ThinkingPart):
                # Reasoning from another provider means nothing here and is dropped.
                if data is None:
                    continue
                item = data.get("item")
                if not isinstance(item, dict):
                    item = {"type": "reasoning", "id": data.get("item_id"), "summary": []}
                if not stored and not item.get("encrypted_content") and not item.get("content"):
                    reasoning_complete = False  # an id the host cannot look up
                    continue
                items.append(item)
            elif isinstance(part, ProviderToolPart) and data is not None and isinstance(data.get("item"), dict):
                items.append(data["item"])
        if not reasoning_complete:
            for entry in with_ids:
                del entry["id"]
                entry.pop("status", None)
        return items

    def map_user(self, message: Message) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        content: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                items.append({"type": "function_call_output",
                              "call_id": shorten_call_id(part.call_id, MAX_CALL_ID_LENGTH),
                              "output": self.map_output(part)})
            elif isinstance(part, TextPart):
                content.append({"type": "input_text", "text": part.text})
            elif isinstance(part, FilePart):
                content.append(self.map_file(part))
        if content:
            items.append({"role": "user", "content": content})
        return items

    def map_output(self, part: ToolResultPart) -> str | list[dict[str, Any]]:
        """A result's `output`: its text, or with files a list of `input_text` and the files' blocks (files
        this API cannot take are named in a note instead)."""
        text = result_content(part)
        if not part.files:
            return text
        files, skipped = result_file_blocks(part.files, self.who(), self.map_file)
        output: list[dict[str, Any]] = [{"type": "input_text", "text": text}, *files]
        if skipped:
            output.append({"type": "input_text", "text": files_note(skipped, self.who())})
        return output

    def map_file(self, part: FilePart) -> dict[str, Any]:
        """Images as `input_image`, PDFs as `input_file` (inline or by URL), inline text files as text."""
        who = self.who()
        part = resolved(part, who)
        if is_image(part):
            return {"type": "input_image", "image_url": data_url(part), "detail": "auto"}
        if is_pdf(part):
            if part.data is None:
                return {"type": "input_file", "file_url": part.url}
            return {"type": "input_file", "filename": part.name or "file.pdf", "file_data": data_url(part)}
        if is_text(part):
            return {"type": "input_text", "text": text_block(part, who)}
        raise not_accepted(who, part, "images and PDFs (inline or by URL) and plain-text files (inline)",
                           "Convert the file to one of those, or extract its text and send that.")


def _own_data(part: object, own: bool) -> dict[str, Any] | None:
    """This protocol's provider data on `part`, if the part came from this host."""
    if not own:
        return None
    provider_data = getattr(part, "provider_data", None)
    if not provider_data:
        return None
    data = provider_data.get(KEY)
    return data if isinstance(data, dict) else None
