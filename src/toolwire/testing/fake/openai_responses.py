"""A fake OpenAI Responses server (`POST /v1/responses`, `stream: true`).

Events are named SSE events whose payload repeats the name in `type` and carries a `sequence_number`,
as recorded: `response.created` and `response.in_progress` with the response object, then per output
item `response.output_item.added` ... `response.output_item.done` (`rs_` reasoning items with
`reasoning_summary_*` events, `msg_` message items with `content_part` and `output_text` events,
`fc_` function_call items whose `call_id` is a `call_...` id, with `function_call_arguments.delta` /
`.done`), then `response.completed` with usage — or `response.incomplete` (`max_output_tokens`) for a
`length` finish. Errors inside the stream are an `error` event followed by `response.failed`.

Responses are stored unless the request says `store: false`, so a later request that sends only
`previous_response_id` and its new items is answered with the whole conversation in view.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

from ...messages import FilePart, Message, Part, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from ._base import (
    FakeProtocol,
    FakeRequest,
    FinishKind,
    RequestError,
    ResponseEncoder,
    content_text,
    parse_arguments,
    parse_result,
    random_alnum,
    random_hex,
    require_dict,
    require_list,
    sse,
    tool_definition,
)
from ._files import file_from_url, text_part
from ._turns import FakeStreamError, FakeText, FakeThinking, FakeToolCall, FakeTurn, FakeUsage

__all__ = ["Protocol", "ResponsesEncoder"]


def _decode_input(items: Any, names: dict[str, str]) -> list[Message]:
    if isinstance(items, str):
        return [Message.user(items)]
    out: list[Message] = []

    def add(role: str, part: Part) -> None:
        # Consecutive items of one side form one message: an assistant turn's text and calls, or one
        # round of tool results.
        if out and out[-1].role == role and role != "system":
            out[-1].parts.append(part)
        else:
            out.append(Message(role=role, parts=[part]))  # type: ignore[arg-type]

    for raw in require_list(items, "input"):
        item = require_dict(raw, "Each input item")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            content = item.get("content")
            if role in ("system", "developer"):
                out.append(Message.system(content_text(content)))
            elif role == "user" and isinstance(content, list):
                for part in _input_parts(content):
                    add(role, part)
            elif role in ("user", "assistant"):
                add(role, TextPart(text=content_text(content)))
            else:
                raise RequestError(400, f"Invalid value: {role!r}. Supported values are: 'assistant', 'system', "
                                        "'developer', and 'user'.")
        elif kind == "function_call":
            call_id, name = str(item.get("call_id", "")), str(item.get("name", ""))
            names[call_id] = name
            raw_arguments = item.get("arguments")
            add("assistant", ToolCallPart(id=call_id, name=name, arguments=parse_arguments(raw_arguments),
                                          arguments_raw=raw_arguments if isinstance(raw_arguments, str) else "{}"))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id", ""))
            output = item.get("output") or ""
            files: list[FilePart] = []
            if isinstance(output, list):
                parts = _input_parts(output)
                files = [p for p in parts if isinstance(p, FilePart)]
                # The first text is the result; a later one is the note on files that could not go.
                output = next((p.text for p in parts if isinstance(p, TextPart)), "")
            add("user", ToolResultPart(call_id=call_id, name=names.get(call_id, ""), result=parse_result(output),
                                       files=files))
        elif kind == "reasoning":
            summary = "".join(s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict))
            add("assistant", ThinkingPart(text=summary))
    return out


def _input_parts(content: list[Any]) -> list[Part]:
    """`input_text`, `input_image` and `input_file` blocks (of a message or a function call's output)."""
    parts: list[Part] = []
    for raw in content:
        block = require_dict(raw, "A content part")
        kind = block.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(text_part(str(block.get("text", ""))))
        elif kind == "input_image":
            file = file_from_url(block.get("image_url"), media_type="image/png")
            if file is not None:
                parts.append(file)
        elif kind == "input_file":
            file = (file_from_url(block.get("file_data"), media_type="application/pdf", name=block.get("filename"))
                    or file_from_url(block.get("file_url"), media_type="application/pdf"))
            if file is not None:
                parts.append(file)
    return parts


class ResponsesEncoder(ResponseEncoder):
    def __init__(self, request: FakeRequest, rng: random.Random, store: ResponseStore) -> None:
        super().__init__(request, rng)
        self.id = "resp_" + random_hex(rng, 50)
        self.created = int(time.time())
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self.parts: list[Part] = []
        self.store = store

    def event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse(payload, kind)

    def response(self, status: str, **fields: Any) -> dict[str, Any]:
        body = self.request.body if isinstance(self.request.body, dict) else {}
        tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
        return {
            "id": self.id, "object": "response", "created_at": self.created, "status": status,
            "background": False, "error": None, "incomplete_details": None,
            "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
            "max_tool_calls": None, "model": self.request.model, "output": list(self.output),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"), "prompt_cache_key": None,
            "reasoning": {"effort": None, "summary": None}, "safety_identifier": None, "service_tier": "default",
            "store": body.get("store", True), "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"), "tools": tools, "top_logprobs": 0, "top_p": 1.0,
            "truncation": "disabled", "usage": None, "user": None, "metadata": {}, **fields,
        }

    def pad(self) -> str:
        return random_alnum(self.rng, self.rng.randint(3, 15))

    def content(self, turn: FakeTurn) -> Iterator[bytes]:
        yield self.event("response.created", response=self.response("in_progress"))
        yield self.event("response.in_progress", response=self.response("in_progress"))
        for part in turn.parts:
            if isinstance(part, FakeText):
                yield from self.message(part)
            elif isinstance(part, FakeThinking):
                yield from self.reasoning(part)
            elif isinstance(part, FakeToolCall):
                yield from self.function_call(part)

    def message(self, part: FakeText) -> Iterator[bytes]:
        index, item_id = len(self.output), "msg_" + random_hex(self.rng, 50)
        yield self.event("response.output_item.added", output_index=index, item={
            "id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"})
        empty = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        yield self.event("response.content_part.added", **where, part=empty)
        for piece in part.pieces():
            yield self.event("response.output_text.delta", **where, delta=self.count(piece), logprobs=[],
                             obfuscation=self.pad())
        yield self.event("response.output_text.done", **where, text=part.text, logprobs=[])
        yield self.event("response.content_part.done", **where, part={**empty, "text": part.text})
        item = {"id": item_id, "type": "message", "status": "completed",
                "content": [{**empty, "text": part.text}], "role": "assistant"}
        self.output.append(item)
        self.parts.append(TextPart(text=part.text))
        yield self.event("response.output_item.done", output_index=index, item=item)

    def reasoning(self, part: FakeThinking) -> Iterator[bytes]:
        index, item_id = len(self.output), "rs_" + random_hex(self.rng, 50)
        yield self.event("response.output_item.added", output_index=index,
                         item={"id": item_id, "type": "reasoning", "summary": []})
        summaries: list[dict[str, Any]] = []
        if part.text:
            # Without a summary (the default unless `reasoning.summary` is requested) the item has no events
            # of its own between added and done.
            where = {"item_id": item_id, "output_index": index, "summary_index": 0}
            yield self.event("response.reasoning_summary_part.added", **where,
                             part={"type": "summary_text", "text": ""})
            for piece in part.pieces():
                yield self.event("response.reasoning_summary_text.delta", **where,
                                 delta=self.count(piece, reasoning=True))
            yield self.event("response.reasoning_summary_text.done", **where, text=part.text)
            summaries.append({"type": "summary_text", "text": part.text})
            yield self.event("response.reasoning_summary_part.done", **where, part=summaries[0])
        item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": summaries}
        include = self.request.body.get("include") if isinstance(self.request.body, dict) else None
        if isinstance(include, list) and "reasoning.encrypted_content" in include:
            item["encrypted_content"] = "gAAAAA" + base64.urlsafe_b64encode(self.rng.randbytes(120)).decode()
        self.output.append(item)
        self.parts.append(ThinkingPart(text=part.text))
        yield self.event("response.output_item.done", output_index=index, item=item)

    def function_call(self, part: FakeToolCall) -> Iterator[bytes]:
        index, item_id = len(self.output), "fc_" + random_hex(self.rng, 50)
        call_id = part.id or "call_" + random_alnum(self.rng, 24)
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": call_id, "name": part.name}
        yield self.event("response.output_item.added", output_index=index, item=item)
        for piece in part.pieces():
            yield self.event("response.function_call_arguments.delta", item_id=item_id, output_index=index,
                             delta=self.count(piece), obfuscation=self.pad())
        arguments = part.arguments_text()
        yield self.event("response.function_call_arguments.done", item_id=item_id, output_index=index,
                         arguments=arguments)
        done = {**item, "status": "completed", "arguments": arguments}
        self.output.append(done)
        self.parts.append(ToolCallPart(id=call_id, name=part.name, arguments=parse_arguments(arguments),
                                       arguments_raw=arguments))
        yield self.event("response.output_item.done", output_index=index, item=done)

    def end(self, turn: FakeTurn, finish: FinishKind, usage: FakeUsage) -> Iterator[bytes]:
        prompt, completion = usage.input_tokens or 0, usage.output_tokens or 0
        counts = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": completion,
                  "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
                  "total_tokens": prompt + completion}
        self.store.keep(self.request, self.id, Message(role="assistant", parts=self.parts))
        if finish == "length":
            yield self.event("response.incomplete", response=self.response(
                "incomplete", incomplete_details={"reason": "max_output_tokens"}, usage=counts))
        else:
            yield self.event("response.completed", response=self.response("completed", usage=counts))

    def error(self, error: FakeStreamError) -> Iterator[bytes]:
        code = error.code or "server_error"
        yield self.event("error", error={"type": code, "code": code, "message": error.message, "param": None})
        yield self.event("response.failed", response=self.response(
            "failed", error={"code": code, "message": error.message}))


class ResponseStore:
    """Conversations by response id, for requests that continue one with `previous_response_id`."""

    def __init__(self) -> None:
        self._histories: dict[str, list[Message]] = {}
        self._lock = threading.Lock()

    def keep(self, request: FakeRequest, response_id: str, message: Message) -> None:
        body = request.body if isinstance(request.body, dict) else {}
        if body.get("store", True) is not False:
            with self._lock:
                self._histories[response_id] = [*request.messages, message]

    def history(self, response_id: str) -> list[Message]:
        with self._lock:
            history = self._histories.get(response_id)
        if history is None:
            raise RequestError(400, f"Previous response with id '{response_id}' not found.",
                               "previous_response_not_found")
        return history


class Protocol(FakeProtocol):
    name = "openai-responses"
    provider = "openai-responses"
    route = "POST /v1/responses"

    def __init__(self) -> None:
        self.store = ResponseStore()

    def accepts(self, method: str, path: str) -> bool:
        return method == "POST" and path in ("/v1/responses", "/responses")

    def decode(self, request: FakeRequest) -> None:
        body = require_dict(request.body, "The request body")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise RequestError(400, "Missing required parameter: 'model'.", "missing_required_parameter")
        request.model = model
        previous = body.get("previous_response_id")
        history = self.store.history(previous) if isinstance(previous, str) and previous else []
        names = {p.id: p.name for m in history for p in m.tool_calls}
        instructions = body.get("instructions")
        messages = [Message.system(instructions)] if isinstance(instructions, str) and instructions else []
        request.messages = [*history, *messages, *_decode_input(body.get("input"), names)]
        request.tools = [tool_definition(t.get("name"), t.get("description"), t.get("parameters"))
                         for t in (require_dict(t, "Each tool") for t in require_list(body.get("tools"), "tools"))
                         if t.get("type") == "function"]
        choice = body.get("tool_choice")
        request.tool_choice = choice if isinstance(choice, str) else (
            str(choice.get("name")) if isinstance(choice, dict) and choice.get("name") else None)
        request.stream = body.get("stream") is True

    def encoder(self, request: FakeRequest, rng: random.Random) -> ResponseEncoder:
        return ResponsesEncoder(request, rng, self.store)

    def error_body(self, status: int, message: str, code: str | None, rng: random.Random) -> bytes:
        kind = "server_error" if status >= 500 else ("requests" if status == 429 else "invalid_request_error")
        default_code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
        error = {"message": message, "type": kind, "param": None, "code": code or default_code}
        return json.dumps({"error": error}, indent=2).encode()

