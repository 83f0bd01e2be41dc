"""Google Gemini `streamGenerateContent` (Gemini API and Vertex AI), and every host that speaks it.

Streaming shape: `GenerateContentResponse` chunks, each with `candidates[0].content.parts`, a
`finishReason` on the last one and `usageMetadata` on every one. The body comes in one of three framings,
told apart by its first non-space byte:
- `alt=sse` (what `Protocol` asks for): `data:` events with CRLF line endings;
- without `alt=sse`: one pretty-printed JSON array of chunks (`[{...}\\r\\n,\\r\\n{...}]`) that arrives
  in pieces: split incrementally by `_ObjectSplitter`, in linear time;
- `{`: a plain JSON object (an error body, a single response) or objects one after another.

What real streams do, and how this module answers (each case has a recorded fixture in the tests):
- `functionCall` parts arrive whole and without ids, several in one chunk: each is its own call with a
  generated id (never merged by name);
- Gemini 3 streamed arguments: a `functionCall` with `name` and `willContinue`, then parts holding
  `partialArgs` (`jsonPath` + a typed value, strings possibly in pieces), then an empty
  `functionCall: {}` that completes the call. They become one call whose argument text is written as JSON
  while it streams (so previews work); a call cut before its terminator is an `InvalidToolCallPart`;
- `thought: true` parts are thinking; a `thoughtSignature` may sit on a thought, a text or a call part;
- no end-of-stream event: the `finishReason` is the completion signal; usage comes on every chunk and
  the last one wins;
- an `error` object (an HTTP error body, or inside the stream): an error finish.

Where signatures are kept, so that the next request carries each one on the part it came with (Gemini 3
answers 400 to a tool round without them):
- thought part: `ThinkingPart.signature`, with `provider_data={"gemini": {"part": "thought"}}`;
- function call: `ToolCallPart.provider_data["gemini"]["thoughtSignature"]`;
- text part: `TextPart` has no provider data, so the signature travels on an empty `ThinkingPart` with
  `provider_data={"gemini": {"part": "text"}}` placed just before the text it belongs to (`"empty": True`
  when the signed text part was empty). The request builder puts it back on that text part.
Thought parts go back only with their signature (an unsigned summary carries no state, only tokens);
thinking from other providers is dropped from Gemini requests (its signatures mean nothing here); an
assistant turn with calls but no Gemini signature at all (a history from another provider) gets Google's
documented placeholder signature on its first call, so Gemini 3 accepts it.

Tool schemas go out as `parametersJsonSchema` and structured output as `responseJsonSchema`: both take
ordinary JSON Schema (`$ref`, `anyOf`, `additionalProperties`...), so schemas need no rewriting into
Gemini's older OpenAPI subset.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson

from .._accumulate import Accumulator, ToolCallBuilder
from .._sse import MAX_EVENT_BYTES, EventTooLarge, SSEDecoder
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
from ._base import StreamParser, WireProtocol, sse_prefix
from ._files import files_note, is_image, is_pdf, not_accepted, resolved, result_file_blocks
from ._gemini_arguments import StreamedArguments
from ._values import count, need_dict, need_list, need_str, opt_str, wrong

__all__ = ["GeminiParser", "Protocol", "map_finish_reason", "read_usage"]

KEY = "gemini"
"""The `provider_data` key under which this protocol keeps its opaque data."""

SIGNATURE_PLACEHOLDER = "skip_thought_signature_validator"
"""The value Google documents for calls whose real signature is unknown (a history from elsewhere)."""

_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
}

_ERROR_FINISH_TYPE = {
    "MALFORMED_FUNCTION_CALL": "malformed_function_call",
    "UNEXPECTED_TOOL_CALL": "unexpected_tool_call",
    "TOO_MANY_TOOL_CALLS": "too_many_tool_calls",
}

_TOOL_CHOICE_MODE = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


# `FinishReason` and `BlockReason` as numbers: what the API sends when a request asks for integer enums
# (the order of the enums in Google's API definition).
_FINISH_NUMBERS = (
    "FINISH_REASON_UNSPECIFIED", "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER", "BLOCKLIST",
    "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL", "IMAGE_SAFETY", "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS", "LANGUAGE", "MISSING_THOUGHT_SIGNATURE",
)
_BLOCK_NUMBERS = ("BLOCK_REASON_UNSPECIFIED", "SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "IMAGE_SAFETY")


def map_finish_reason(raw: str) -> FinishReason:
    """Gemini's `finishReason` → toolwire's; unknown reasons (`OTHER`, `LANGUAGE`...) are a stop."""
    return _FINISH.get(raw, "stop")


def enum_name(value: Any, names: tuple[str, ...], path: str) -> str:
    """An enum value as its name: names pass through, numbers are looked up (unknown ones named by number)."""
    if type(value) is str:
        return value
    if type(value) is int:
        return names[value] if 0 <= value < len(names) else f"{path.rsplit('.', 1)[-1]}_{value}"
    wrong(path, "an enum name or number", value)


def read_usage(usage: dict[str, Any]) -> Usage | None:
    """`usageMetadata` → `Usage`; `None` when the chunk carries no counts (Vertex's `trafficType` only).

    Output tokens include the thinking tokens (`thoughtsTokenCount`), as they are billed as output and
    as OpenAI's `completion_tokens` include reasoning; `reasoning_tokens` says how many of them there were.
    """
    prompt = count(usage.get("promptTokenCount"), "usageMetadata.promptTokenCount")
    candidates = count(usage.get("candidatesTokenCount"), "usageMetadata.candidatesTokenCount")
    thoughts = count(usage.get("thoughtsTokenCount"), "usageMetadata.thoughtsTokenCount")
    cached = count(usage.get("cachedContentTokenCount"), "usageMetadata.cachedContentTokenCount")
    if prompt is None and candidates is None and thoughts is None and cached is None:
        return None
    output = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return Usage(input_tokens=prompt, output_tokens=output, cache_read_tokens=cached, reasoning_tokens=thoughts)


# -- framing ------------------------------------------------------------------------------------


class _ObjectSplitter:
    """Cuts a byte stream holding a JSON array of objects, or objects one after another, into objects.

    Only brace depth and string/escape state are tracked, so each byte is looked at once (regex scans
    jump to the next interesting byte); an object split across chunks is kept as pieces joined once.
    """

    __slots__ = ("_base", "_depth", "_escape", "_in_string", "_pieces", "_size", "max_object_bytes")

    _STRUCTURE = re.compile(rb'[{}\[\]"]')
    _STRING_END = re.compile(rb'["\\]')
    _SEPARATORS = b" \t\r\n,"

    def __init__(self, *, array: bool, max_object_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_object_bytes = max_object_bytes
        self._size = 0  # bytes in `_pieces`
        # `_base` is the depth at which whole objects sit: 1 inside the outer array, 0 otherwise.
        self._base = 0
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._pieces: list[bytes] = []
        if array:
            self._base = self._depth = 1

    @property
    def inside_object(self) -> bool:
        return self._depth > self._base

    def feed(self, chunk: bytes, start: int = 0) -> list[bytes]:
        """Return the objects completed by `chunk[start:]`; raise ValueError on bytes that are not JSON."""
        out: list[bytes] = []
        n = len(chunk)
        i = start
        begin: int | None = start if self._depth > self._base else None
        while i < n:
            if self._in_string:
                if self._escape:
                    self._escape = False
                    i += 1
                    continue
                m = self._STRING_END.search(chunk, i)
                if m is None:
                    break
                i = m.start()
                if chunk[i] == 0x5C:  # backslash: the next byte is escaped, wherever it arrives
                    self._escape = True
                else:
                    self._in_string = False
                i += 1
                continue
            m = self._STRUCTURE.search(chunk, i)
            j = n if m is None else m.start()
            if self._depth == self._base and chunk[i:j].strip(self._SEPARATORS):
                raise ValueError("unexpected bytes between the objects of a JSON stream")
            if m is None:
                break
            c = chunk[j]
            if self._depth == self._base:
                if c == 0x7B:  # {
                    begin = j
                    self._depth += 1
                elif c == 0x5D and self._base == 1:  # ] closes the outer array
                    self._base = self._depth = 0
                else:
                    raise ValueError("a JSON stream of objects holds something that is not an object")
            elif c == 0x22:  # "
                self._in_string = True
            elif c == 0x7B or c == 0x5B:
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == self._base:
                    assert begin is not None
                    if self._pieces:
                        self._pieces.append(chunk[begin:j + 1])
                        out.append(b"".join(self._pieces))
                        self._pieces = []
                        self._size = 0
                    else:
                        out.append(chunk[begin:j + 1])
                    begin = None
            i = j + 1
        if begin is not None and self._depth > self._base:
            self._pieces.append(chunk[begin:])
            self._size += n - begin
            if self._size > self.max_object_bytes:
                raise EventTooLarge(self._size, self.max_object_bytes)
        return out


class GeminiParser(StreamParser):
    """Gemini response bodies (SSE, JSON array or plain JSON) → accumulator."""

    protocol = "gemini"

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._framing: str | None = None
        self._sse = SSEDecoder()
        self._splitter: _ObjectSplitter | None = None
        self._streamed: ToolCallBuilder | None = None
        self._streamed_args: StreamedArguments | None = None
        self._last_kind: str | None = None
        self._thought_signed = False
        self._usage: Usage | None = None
        self._seen_meta = False

    def on_limit(self, value: int) -> None:
        self._sse.max_event_bytes = value
        if self._splitter is not None:
            self._splitter.max_object_bytes = value

    def stream_prefix(self, head: bytes) -> bool:
        return head[:1] in (b"[", b"{") or sse_prefix(head)

    def owns(self, payload: dict[str, Any]) -> bool:
        return any(key in payload for key in ("candidates", "usageMetadata", "promptFeedback", "error"))

    # -- framing --

    def feed(self, chunk: bytes) -> None:
        if self.stopped or not chunk:
            return
        if not self.frames:
            self.seen(chunk)
        start = 0
        if self._framing is None:
            stripped = chunk.lstrip(b" \t\r\n\xef\xbb\xbf")
            if not stripped:
                return
            start = len(chunk) - len(stripped)
            first = stripped[:1]
            if first == b"[":
                self._framing = "json"
                self._splitter = _ObjectSplitter(array=True, max_object_bytes=self.max_event_bytes)
                start += 1
            elif first == b"{":
                self._framing = "json"
                self._splitter = _ObjectSplitter(array=False, max_object_bytes=self.max_event_bytes)
            else:
                self._framing = "sse"
        try:
            if self._splitter is not None:
                try:
                    objects = self._splitter.feed(chunk, start)
                except EventTooLarge:
                    raise
                except ValueError as exc:
                    self.malformed(chunk[start:], exc)
                    return
            else:
                objects = [data for _event, data in self._sse.feed(chunk[start:] if start else chunk)]
        except EventTooLarge as exc:
            self.too_large(exc)
            return
        if objects:
            self.framed(objects[0])
            self.frames += len(objects)
        for data in objects:
            self.handle(data)
            if self.stopped:
                return

    def flush(self) -> None:
        # An unterminated last event or object is a body cut short: it is dropped, and the accumulator
        # reports the stream as incomplete rather than malformed.
        if self._framing != "sse":
            return
        for _event, data in self._sse.close():
            try:
                orjson.loads(data)
            except orjson.JSONDecodeError:
                if b"\\ud" not in data.lower():
                    return
            self.framed(data)
            self.frames += 1
            self.handle(data)
            if self.stopped:
                return

    def handle(self, data: bytes) -> None:
        if data != b"[DONE]":  # not Gemini's, but some proxies in front of it add OpenAI's terminator
            self.dispatch(data)

    # -- chunks --

    def on_payload(self, event: str | None, payload: dict[str, Any]) -> None:
        acc = self.acc
        error = payload.get("error")
        if error is not None:
            self.on_error(error)
            return
        if not self._seen_meta:
            self._seen_meta = True
            if payload.get("responseId"):
                acc.metadata["response_id"] = need_str(payload["responseId"], "responseId")
            if payload.get("modelVersion"):
                acc.metadata["model"] = need_str(payload["modelVersion"], "modelVersion")
        for candidate in need_list(payload.get("candidates") or [], "candidates"):
            if type(candidate) is not dict:
                wrong("candidates[]", "an object", candidate)
            if candidate.get("index", 0) != 0:
                continue  # toolwire assembles one message: the first candidate
            content = need_dict(candidate.get("content") or {}, "candidates[0].content")
            for part in need_list(content.get("parts") or [], "candidates[0].content.parts"):
                if type(part) is not dict:
                    wrong("candidates[0].content.parts[]", "an object", part)
                self.on_part(part)
            finish = candidate.get("finishReason")
            if finish:
                message = opt_str(candidate.get("finishMessage"), "candidates[0].finishMessage")
                self.on_finish(enum_name(finish, _FINISH_NUMBERS, "candidates[0].finishReason"), message)
        feedback = payload.get("promptFeedback")
        if feedback and need_dict(feedback, "promptFeedback").get("blockReason"):
            reason = enum_name(feedback["blockReason"], _BLOCK_NUMBERS, "promptFeedback.blockReason")
            acc.metadata["block_reason"] = reason
            acc.finish("content_filter", reason)
        usage_data = payload.get("usageMetadata")
        if usage_data:
            usage = read_usage(need_dict(usage_data, "usageMetadata"))
            if usage is not None and usage != self._usage:
                self._usage = usage
                acc.set_usage(usage)

    def on_part(self, part: dict[str, Any]) -> None:
        acc = self.acc
        signature = opt_str(part.get("thoughtSignature"), "candidates[0].content.parts[].thoughtSignature")
        call = part.get("functionCall")
        if call is not None:
            self.on_function_call(need_dict(call, "candidates[0].content.parts[].functionCall"), signature)
            self._last_kind = "call"
            return
        inline = part.get("inlineData")
        if inline is not None:  # generated media (image models)
            path = "candidates[0].content.parts[].inlineData"
            inline = need_dict(inline, path)
            media_type = need_str(inline.get("mimeType", "application/octet-stream"), f"{path}.mimeType")
            acc.part(FilePart(media_type=media_type, data=opt_str(inline.get("data"), f"{path}.data")))
            self._last_kind = "file"
            return
        text = opt_str(part.get("text"), "candidates[0].content.parts[].text")
        if part.get("thought"):
            new_block = self._last_kind != "thought" or self._thought_signed
            acc.thinking(text or "", new_block=new_block, provider_data={KEY: {"part": "thought"}})
            self._thought_signed = False if new_block else self._thought_signed
            if signature:
                acc.thinking_signature(signature)
                self._thought_signed = True
            self._last_kind = "thought"
            return
        if signature:
            marker: dict[str, Any] = {"part": "text"}
            if not text:
                marker["empty"] = True
            acc.thinking("", new_block=True, provider_data={KEY: marker})
            acc.thinking_signature(signature)
            self._last_kind = "signature"
        if text:
            acc.text(text)
            self._last_kind = "text"

    def on_function_call(self, call: dict[str, Any], signature: str | None) -> None:
        acc = self.acc
        path = "candidates[0].content.parts[].functionCall"
        name = opt_str(call.get("name"), f"{path}.name")
        if name:
            if self._streamed is not None:
                # A new call began before the open one's terminator: the open one is over.
                self.close_streamed()
            data: dict[str, Any] = {}
            if signature:
                data["thoughtSignature"] = signature
            call_id = opt_str(call.get("id"), f"{path}.id") or None
            if call_id:
                data["id"] = call_id
            provider_data = {KEY: data} if data else None
            if call.get("willContinue") or "partialArgs" in call:
                self._streamed = acc.start_call(call_id, name, provider_data=provider_data)
                self._streamed_args = StreamedArguments()
                self.apply_partial(call)
                if not call.get("willContinue"):
                    self.close_streamed()
                return
            args = call.get("args")
            acc.whole_call(call_id, name, {} if args is None else args, provider_data=provider_data)
            return
        builder = self._streamed
        if builder is None:
            if call.get("partialArgs"):
                raise ValueError("partialArgs arrived for a function call that never started")
            return  # a stray terminator: nothing is open
        if signature:
            previous = (builder.provider_data or {}).get(KEY, {})
            builder.provider_data = {**(builder.provider_data or {}), KEY: {**previous, "thoughtSignature": signature}}
        self.apply_partial(call)
        if not call.get("willContinue"):
            self.close_streamed()

    def apply_partial(self, call: dict[str, Any]) -> None:
        builder, arguments = self._streamed, self._streamed_args
        assert builder is not None
        assert arguments is not None
        path = "candidates[0].content.parts[].functionCall.partialArgs"
        for entry in need_list(call.get("partialArgs") or [], path):
            self.acc.call_arguments(builder, arguments.feed(need_dict(entry, f"{path}[]")))

    def close_streamed(self, *, complete: bool = True) -> None:
        """The open streamed call is over: complete unless a string value was still streaming."""
        builder, arguments = self._streamed, self._streamed_args
        self._streamed = self._streamed_args = None
        if builder is None or arguments is None:
            return
        if not complete or arguments.pending:
            self.acc.end_call(builder, complete=False,
                              reason="The call ended while one of its argument values was still streaming, "
                                     "so it was not run.")
            return
        self.acc.call_arguments(builder, arguments.finish())
        self.acc.end_call(builder, arguments=arguments.root)

    def on_finish(self, raw: str, message: str | None) -> None:
        reason = map_finish_reason(raw)
        if self._streamed is not None:
            # Stopping normally completes a call whose terminator never came; any other end cuts it.
            self.close_streamed(complete=reason == "stop")
        self.acc.finish(reason, raw)
        if message:
            self.acc.metadata["finish_message"] = message
        if reason == "error":
            why = f": {message}" if message else "."
            self.acc.fail(_ERROR_FINISH_TYPE.get(raw, "provider_error"),
                          f"Gemini stopped the response with finish reason {raw}{why}")

    def on_error(self, error: Any) -> None:
        if isinstance(error, dict):
            message = error.get("message") or orjson.dumps(error).decode()
            kind = error.get("status") or error.get("code") or "provider_error"
        else:
            message, kind = str(error), "provider_error"
        self.acc.fail(str(kind).lower(), f"Gemini reported an error in the stream: {message}")


# -- requests -----------------------------------------------------------------------------------


def function_response(part: ToolResultPart) -> dict[str, Any]:
    """A tool result as `functionResponse.response`, which must be a JSON object."""
    if part.is_error:
        return {"error": part.result}
    if isinstance(part.result, dict):
        return part.result
    return {"result": part.result}


def _gemini_data(provider_data: dict[str, Any] | None) -> dict[str, Any] | None:
    if not provider_data:
        return None
    data = provider_data.get(KEY)
    return data if isinstance(data, dict) else None


class Protocol(WireProtocol):
    """Gemini `POST /models/{model}:streamGenerateContent?alt=sse`."""

    name = "gemini"
    display_name = "Gemini"

    def endpoint(self, model: str, settings: ModelSettings) -> str:
        model = model.removeprefix("models/")
        return f"/models/{model}:streamGenerateContent?alt=sse"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"x-goog-api-key": api_key} if api_key else {}

    def count_request(self, model: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # `countTokens` counts a whole GenerateContentRequest (system instruction and tools included)
        # when it comes as `generateContentRequest`, which then names the model too.
        model = model.removeprefix("models/")
        return f"/models/{model}:countTokens", {"generateContentRequest": {"model": f"models/{model}", **body}}

    def count_from(self, payload: Any) -> int | None:
        value = payload.get("totalTokens", 0) if isinstance(payload, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def new_parser(self, acc: Accumulator) -> StreamParser:
        return GeminiParser(acc)

    def build_request(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> dict[str, Any]:
        system: list[dict[str, Any]] = []
        contents: list[dict[str, Any]] = []
        calls: list[ToolCallPart | InvalidToolCallPart] = []
        for message in messages:
            if message.role == "system":
                system.extend({"text": p.text} for p in message.parts if isinstance(p, TextPart))
                continue
            if message.role == "assistant":
                role, parts = "model", self.map_assistant(message)
                calls = [p for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))]
            else:
                role, parts = "user", self.map_user(message, calls)
            if not parts:
                continue
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)  # Gemini wants the roles to alternate
            else:
                contents.append({"role": role, "parts": parts})
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": system}
        choice = settings.get("tool_choice")
        if tools:
            body["tools"] = [{"functionDeclarations": [self.map_tool(t) for t in tools]}]
            if choice is not None:
                body["toolConfig"] = {"functionCallingConfig": self.map_tool_choice(choice)}
        config = self.generation_config(settings)
        if config:
            body["generationConfig"] = config
        return merge_extra(body, settings)

    def generation_config(self, settings: ModelSettings) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if "max_tokens" in settings:
            config["maxOutputTokens"] = settings["max_tokens"]
        if "temperature" in settings:
            config["temperature"] = settings["temperature"]
        if "top_p" in settings:
            config["topP"] = settings["top_p"]
        if settings.get("stop"):
            config["stopSequences"] = settings["stop"]
        thinking = settings.get("thinking")
        # `False` asks for nothing: the model's default applies (Gemini 3 and 2.5 Pro cannot stop thinking).
        if thinking is True:
            config["thinkingConfig"] = {"includeThoughts": True}
        elif isinstance(thinking, int) and not isinstance(thinking, bool):
            # A budget: 0 turns thinking off where the model allows it, -1 lets the model decide.
            config["thinkingConfig"] = {"includeThoughts": thinking != 0, "thinkingBudget": thinking}
        elif isinstance(thinking, str):
            config["thinkingConfig"] = {"includeThoughts": True, "thinkingLevel": thinking.upper()}
        schema = settings.get("output_schema")
        if schema:
            config["responseMimeType"] = "application/json"
            config["responseJsonSchema"] = schema.get("schema", {})
        return config

    def map_tool(self, tool: ToolDefinition) -> dict[str, Any]:
        declaration: dict[str, Any] = {"name": tool.name}
        if tool.description:
            declaration["description"] = tool.description
        declaration["parametersJsonSchema"] = tool.parameters
        return declaration

    def map_tool_choice(self, choice: Any) -> dict[str, Any]:
        if isinstance(choice, dict):
            return {"mode": "ANY", "allowedFunctionNames": [choice["name"]]}
        return {"mode": _TOOL_CHOICE_MODE.get(choice, "AUTO")}

    def map_assistant(self, message: Message) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        text_signature: str | None = None  # from a marker, for the text part that follows it
        signed = False
        first_call: dict[str, Any] | None = None
        for part in message.parts:
            if text_signature is not None and not isinstance(part, TextPart):
                parts.append({"text": "", "thoughtSignature": text_signature})
                text_signature = None
            if isinstance(part, TextPart):
                entry: dict[str, Any] = {"text": part.text}
                if text_signature is not None:
                    entry["thoughtSignature"] = text_signature
                    text_signature = None
                parts.append(entry)
            elif isinstance(part, ThinkingPart):
                data = _gemini_data(part.provider_data)
                if data is None:
                    continue  # another provider's reasoning: its signature means nothing to Gemini
                signed = signed or bool(part.signature)
                if data.get("part") == "text":
                    if part.signature and data.get("empty"):
                        parts.append({"text": "", "thoughtSignature": part.signature})
                    elif part.signature:
                        text_signature = part.signature
                    continue
                if part.signature:  # an unsigned thought summary carries no state: not worth its tokens
                    parts.append({"text": part.text, "thought": True, "thoughtSignature": part.signature})
            elif isinstance(part, (ToolCallPart, InvalidToolCallPart)):
                arguments = part.arguments if isinstance(part, ToolCallPart) else {}
                function: dict[str, Any] = {"name": part.name, "args": arguments}
                data = _gemini_data(part.provider_data) or {}
                if data.get("id") == part.id:
                    function["id"] = part.id
                entry = {"functionCall": function}
                if data.get("thoughtSignature"):
                    entry["thoughtSignature"] = data["thoughtSignature"]
                    signed = True
                if first_call is None:
                    first_call = entry
                parts.append(entry)
            elif isinstance(part, FilePart):
                parts.append(self.map_file(part))
        if text_signature is not None:
            parts.append({"text": "", "thoughtSignature": text_signature})
        placeholder = self.option("signature_placeholder", SIGNATURE_PLACEHOLDER)
        if first_call is not None and not signed and placeholder:
            first_call["thoughtSignature"] = placeholder
        return parts

    def map_user(self, message: Message,
                 calls: Sequence[ToolCallPart | InvalidToolCallPart]) -> list[dict[str, Any]]:
        order = {call.id: position for position, call in enumerate(calls)}
        by_id = {call.id: call for call in calls}
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        # Gemini pairs responses with calls by position and name: answer in the order of the calls.
        results.sort(key=lambda r: order.get(r.call_id, len(order)))
        parts: list[dict[str, Any]] = []
        alongside: list[dict[str, Any]] = []
        for result in results:
            call = by_id.get(result.call_id)
            response: dict[str, Any] = {"name": result.name or (call.name if call else ""),
                                        "response": function_response(result)}
            data = _gemini_data(call.provider_data) if call is not None else None
            if data and data.get("id") == result.call_id:
                response["id"] = result.call_id
            parts.append({"functionResponse": response})
            if result.files:
                alongside.extend(self.map_result_files(result, response))
        parts.extend(alongside)
        for part in message.parts:
            if isinstance(part, TextPart):
                parts.append({"text": part.text})
            elif isinstance(part, FilePart):
                parts.append(self.map_file(part))
        return parts

    def map_result_files(self, result: ToolResultPart, response: dict[str, Any]) -> list[dict[str, Any]]:
        """Put a result's files into its `functionResponse` (`parts`, Gemini 3's multimodal function responses:
        images, PDFs and plain text), or with the provider option `tool_result_files="alongside"` (models before
        Gemini 3) return them as parts that follow the round's responses. Files that cannot go are named in
        the response's `files_not_shown`."""
        who = self.who()
        alongside = self.option("tool_result_files", "parts") == "alongside"

        def mapped(file: FilePart) -> dict[str, Any]:
            blob = self.map_file(file)
            if not alongside and file.name:
                next(iter(blob.values()))["displayName"] = file.name
            return blob

        def in_parts(file: FilePart) -> bool:  # what a functionResponse's `parts` take
            return is_image(file) or is_pdf(file) or file.media_type == "text/plain"

        blobs, skipped = result_file_blocks(result.files, who, mapped, accepts=None if alongside else in_parts)
        if skipped:
            response["response"] = {**response["response"], "files_not_shown": files_note(skipped, who)}
        if alongside:
            return blobs
        if blobs:
            response["parts"] = blobs
        return []

    def map_file(self, part: FilePart) -> dict[str, Any]:
        """Inline bytes as `inlineData` (images, PDFs, text, audio, video), a URL as `fileData`."""
        who = self.who()
        part = resolved(part, who)
        if not part.media_type.startswith(_MEDIA_PREFIXES) and part.media_type not in _MEDIA_TYPES:
            raise not_accepted(who, part, "images, PDFs, plain text, audio and video (inline or by URL)",
                               "Convert the file to one of those, or extract its text and send that.")
        if part.data is not None:
            return {"inlineData": {"mimeType": part.media_type, "data": part.data}}
        return {"fileData": {"mimeType": part.media_type, "fileUri": part.url}}


_MEDIA_PREFIXES = ("image/", "text/", "audio/", "video/")
_MEDIA_TYPES = ("application/pdf", "application/json")
