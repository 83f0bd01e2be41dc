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
- hosts that skip deltas and send only `.done` events or whole items are read from those.

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
    input_details = usage.get("input_tokens_details") or {}
    output_details = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
        cache_read_tokens=input_details.get("cached_tokens"),
        cache_write_tokens=input_details.get("cache_write_tokens"),
        reasoning_tokens=output_details.get("reasoning_tokens"),
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

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._calls: dict[str, ToolCallBuilder] = {}
        self._calls_at: dict[int, ToolCallBuilder] = {}
        self._reasoning: dict[str, _Reasoning] = {}
        self._tools: dict[str, ProviderToolPart] = {}
        self._text_items: set[str] = set()
        """Message items whose text has arrived (as deltas or whole)."""
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
            "response.refusal.delta": self._on_text_delta,
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

    def on_payload(self, event: str | None, payload: dict[str, Any]) -> None:
        kind = payload.get("type") or event
        if not kind:
            return
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(payload)
        elif kind.startswith("response.") and payload.get("item_id") in self._tools:
            self._on_tool_progress(kind, payload)

    # -- response-level events ---------------------------------------------------------------

    def _on_response_meta(self, payload: dict[str, Any]) -> None:
        response = payload.get("response")
        if not isinstance(response, dict):
            return
        if response.get("id") and "response_id" not in self._record:
            self.acc.metadata["response_id"] = response["id"]
            self._record["response_id"] = response["id"]
        if response.get("model") and "model" not in self.acc.metadata:
            self.acc.metadata["model"] = response["model"]

    def _end_response(self, payload: dict[str, Any]) -> dict[str, Any]:
        self._on_response_meta(payload)
        response = payload.get("response")
        if not isinstance(response, dict):
            return {}
        usage = response.get("usage")
        if usage:
            self.acc.set_usage(read_usage(usage))
        return response

    def _on_completed(self, payload: dict[str, Any]) -> None:
        response = self._end_response(payload)
        self.acc.finish("stop", response.get("status") or "completed")

    def _on_incomplete(self, payload: dict[str, Any]) -> None:
        response = self._end_response(payload)
        details = response.get("incomplete_details") or {}
        raw = details.get("reason") or "incomplete"
        # An incomplete response was cut short; an unknown reason is still a cut, never a clean stop.
        self.acc.finish(_INCOMPLETE.get(raw, "length"), raw)

    def _on_failed(self, payload: dict[str, Any]) -> None:
        response = self._end_response(payload)
        self._fail(response.get("error") or {"message": "the response failed without saying why"})

    def _on_error(self, payload: dict[str, Any]) -> None:
        error = payload.get("error")
        self._fail(error if isinstance(error, dict) else payload)

    def _fail(self, error: dict[str, Any]) -> None:
        message = error.get("message") or orjson.dumps(error).decode()
        kind = error.get("code") or error.get("type")
        if not kind or kind == "error":
            kind = "provider_error"
        self.acc.fail(str(kind), f"The provider reported an error in the stream: {message}")

    # -- output items ------------------------------------------------------------------------

    def _on_item_added(self, payload: dict[str, Any]) -> None:
        item = payload["item"]
        kind = item.get("type")
        if kind == "function_call":
            self._start_call(item, payload.get("output_index"))
        elif kind == "reasoning":
            self._start_reasoning(item)
        elif kind not in _OWN_ITEMS and kind is not None:
            self._start_tool(item)

    def _on_item_done(self, payload: dict[str, Any]) -> None:
        item = payload["item"]
        kind = item.get("type")
        if kind == "function_call":
            self._end_call(item, payload.get("output_index"))
        elif kind == "reasoning":
            self._end_reasoning(item)
        elif kind == "message":
            self._end_message(item)
        elif kind not in _OWN_ITEMS and kind is not None:
            self._end_tool(item)

    # -- text --------------------------------------------------------------------------------

    def _text(self, item_id: str | None, text: str) -> None:
        if not text:
            return
        key = item_id or ""
        if key not in self._text_items:
            self._text_items.add(key)
            if not self._text_open:
                # The n-th text part came from the n-th recorded message item: the id lets the next
                # request name the item (text of a message that directly follows another joins its part).
                self._message_ids.append(item_id)
                self._record["message_ids"] = self._message_ids
        self._text_open = True
        self.acc.text(text)

    def _on_text_delta(self, payload: dict[str, Any]) -> None:
        self._text(payload.get("item_id"), payload["delta"])

    def _on_text_done(self, payload: dict[str, Any]) -> None:
        # Hosts that stream no deltas still send the whole text here.
        if (payload.get("item_id") or "") not in self._text_items:
            self._text(payload.get("item_id"), payload.get("text") or "")

    def _on_refusal_done(self, payload: dict[str, Any]) -> None:
        if (payload.get("item_id") or "") not in self._text_items:
            self._text(payload.get("item_id"), payload.get("refusal") or "")

    def _end_message(self, item: dict[str, Any]) -> None:
        item_id = item.get("id")
        if (item_id or "") in self._text_items:
            return
        for content in item.get("content") or ():
            self._text(item_id, content.get("text") or content.get("refusal") or "")

    # -- function calls ----------------------------------------------------------------------

    def _start_call(self, item: dict[str, Any], output_index: int | None) -> ToolCallBuilder:
        self._text_open = False
        item_id = item.get("id")
        call = self.acc.start_call(item.get("call_id"), item.get("name"),
                                   provider_data={KEY: {"item_id": item_id}} if item_id else None)
        if item_id:
            self._calls[item_id] = call
        if output_index is not None:
            self._calls_at[output_index] = call
        arguments = item.get("arguments")
        if arguments:
            self.acc.call_arguments(call, arguments)
        return call

    def _find_call(self, payload: dict[str, Any]) -> ToolCallBuilder | None:
        call = self._calls.get(payload.get("item_id") or "")
        if call is None:
            index = payload.get("output_index")
            if index is not None:
                call = self._calls_at.get(index)
        return call

    def _on_arguments_delta(self, payload: dict[str, Any]) -> None:
        call = self._calls.get(payload.get("item_id") or "") or self._find_call(payload)
        if call is not None:
            self.acc.call_arguments(call, payload["delta"])

    def _on_arguments_done(self, payload: dict[str, Any]) -> None:
        call = self._find_call(payload)
        if call is not None and not call.fragments and payload.get("arguments"):
            self.acc.call_arguments(call, payload["arguments"])

    def _end_call(self, item: dict[str, Any], output_index: int | None) -> None:
        call = self._find_call({"item_id": item.get("id"), "output_index": output_index})
        if call is None:
            call = self._start_call(item, output_index)
        elif call.ended:
            return  # a repeated done event
        elif not call.fragments and item.get("arguments"):
            self.acc.call_arguments(call, item["arguments"])
        if item.get("status") == "incomplete":
            self.acc.end_call(call, complete=False,
                              reason="The response stopped while this call's arguments were being written, "
                                     "so it was not run.")
        else:
            self.acc.end_call(call)

    # -- reasoning ---------------------------------------------------------------------------

    def _start_reasoning(self, item: dict[str, Any]) -> _Reasoning:
        self._text_open = False
        item_id = item.get("id") or ""
        record: dict[str, Any] = {"item_id": item_id, "item": item}
        block = self.acc.thinking("", new_block=True, provider_data={KEY: record})
        reasoning = _Reasoning(block, record)
        self._reasoning[item_id] = reasoning
        return reasoning

    def _reasoning_for(self, payload: dict[str, Any]) -> _Reasoning:
        item_id = payload.get("item_id") or ""
        reasoning = self._reasoning.get(item_id)
        if reasoning is None:
            reasoning = self._start_reasoning({"type": "reasoning", "id": item_id, "summary": []})
        return reasoning

    def _think(self, reasoning: _Reasoning, text: str) -> None:
        if text:
            reasoning.has_text = True
            self.acc.thinking(text, block=reasoning.block)

    def _on_reasoning_delta(self, payload: dict[str, Any]) -> None:
        reasoning = self._reasoning_for(payload)
        reasoning.streamed = True
        self._think(reasoning, payload["delta"])

    def _on_reasoning_done(self, payload: dict[str, Any]) -> None:
        reasoning = self._reasoning_for(payload)
        if not reasoning.streamed:
            self._think(reasoning, payload.get("text") or "")

    def _on_summary_part(self, payload: dict[str, Any]) -> None:
        # Several summary parts of one item read as paragraphs of one thinking part.
        reasoning = self._reasoning_for(payload)
        if reasoning.has_text:
            self._think(reasoning, "\n\n")

    def _end_reasoning(self, item: dict[str, Any]) -> None:
        reasoning = self._reasoning.get(item.get("id") or "")
        if reasoning is None:
            reasoning = self._start_reasoning(item)
        if not reasoning.streamed and not reasoning.has_text:
            texts = [s.get("text") or "" for s in item.get("summary") or ()]
            if not any(texts):
                texts = [c.get("text") or "" for c in item.get("content") or ()]
            self._think(reasoning, "\n\n".join(t for t in texts if t))
        # The finished item (with its final encrypted_content) is what the next request sends back.
        self.acc.thinking_provider_data({KEY: {**reasoning.record, "item": item}}, block=reasoning.block)

    # -- provider-side tools -----------------------------------------------------------------

    def _tool_part(self, item: dict[str, Any], status: str | None) -> ProviderToolPart:
        arguments, result = _provider_tool_io(item)
        return ProviderToolPart(
            id=item.get("id") or "",
            name=_provider_tool_name(item),
            provider=self.acc.provider or KEY,
            arguments=arguments,
            result=result,
            status=status,
            provider_data={KEY: {"item": item}},
        )

    def _start_tool(self, item: dict[str, Any]) -> None:
        self._text_open = False
        part = self._tool_part(item, item.get("status") or "in_progress")
        self._tools[part.id] = part
        self.acc.part(part)

    def _on_tool_progress(self, kind: str, payload: dict[str, Any]) -> None:
        status = kind.rsplit(".", 1)[-1]
        if status not in ("in_progress", "searching", "interpreting", "generating", "completed", "failed"):
            return  # argument and code deltas, partial images: the finished item carries them whole
        old = self._tools[payload["item_id"]]
        if old.status != status:
            new = ProviderToolPart(id=old.id, name=old.name, provider=old.provider, arguments=old.arguments,
                                   result=old.result, status=status, provider_data=old.provider_data)
            self._tools[old.id] = new
            self.acc.replace_part(old, new)

    def _end_tool(self, item: dict[str, Any]) -> None:
        new = self._tool_part(item, item.get("status") or "completed")
        old = self._tools.get(new.id)
        self._tools[new.id] = new
        if old is None:
            self._text_open = False
            self.acc.part(new)
        else:
            self.acc.replace_part(old, new)


class Protocol(WireProtocol):
    """OpenAI Responses (`POST /responses`, `stream: true`).

    Settings read here beyond the common ones: `stateful=True` chains on the previous response
    (`previous_response_id`) and sends only what came after it; `thinking` asks for reasoning with
    summaries and, when not stateful, for the encrypted reasoning that lets a stateless history carry it.
    """

    name = "openai-responses"

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
                              "output": result_content(part)})
            elif isinstance(part, TextPart):
                content.append({"type": "input_text", "text": part.text})
            elif isinstance(part, FilePart):
                content.append(self.map_file(part))
        if content:
            items.append({"role": "user", "content": content})
        return items

    def map_file(self, part: FilePart) -> dict[str, Any]:
        if part.media_type.startswith("image/"):
            url = part.url or f"data:{part.media_type};base64,{part.data or ''}"
            return {"type": "input_image", "image_url": url, "detail": "auto"}
        if part.url:
            return {"type": "input_file", "file_url": part.url}
        return {"type": "input_file", "filename": part.name or "file",
                "file_data": f"data:{part.media_type};base64,{part.data or ''}"}


def _own_data(part: object, own: bool) -> dict[str, Any] | None:
    """This protocol's provider data on `part`, if the part came from this host."""
    if not own:
        return None
    provider_data = getattr(part, "provider_data", None)
    if not provider_data:
        return None
    data = provider_data.get(KEY)
    return data if isinstance(data, dict) else None
