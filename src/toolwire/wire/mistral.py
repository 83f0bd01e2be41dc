"""Mistral chat completions (`POST /v1/chat/completions`): OpenAI Chat with Mistral's own rules.

The stream is OpenAI-shaped, so the parser and the request mapping extend `openai_chat`; only what
Mistral does differently lives here.

Streams (recorded fixtures in the tests show the first three cases):
- tool calls arrive whole, without `index`, several in one delta, each with its own id: the id decides
  which call an entry belongs to (the OpenAI parser's rule when `index` is absent);
- `delta.content` is either a string or a list of typed chunks: `{"type": "text", "text"}` and
  `{"type": "thinking", "thinking": [{"type": "text", "text"}]}` (Magistral, and Mistral Small with
  `reasoning_effort`). Thinking becomes a `ThinkingPart` marked `{"mistral": {...}}` in its provider data;
- the padding field `p` on chunks is ignored; usage comes on the finish chunk;
- `finish_reason: "error"` is an error finish.

Requests:
- Mistral accepts only tool-call ids of exactly nine characters from `[a-zA-Z0-9]`. Ids from another
  provider (`call_...`, `toolu_...`) are replaced by a nine-character id derived from a hash of the
  original, so a call and its result always get the same new id, and so does every later request of
  the same conversation. Ids that already follow the rule are sent unchanged; within one request no
  two different ids ever map to the same one;
- thinking that came from Mistral is sent back as a `thinking` content chunk; thinking from other
  providers is dropped (its signatures mean nothing to Mistral, and its text was never Mistral's);
- `max_tokens`, no `stream_options`, `tool_choice` (`auto` / `none` / `any` / `required` / a named
  function), `parallel_tool_calls`, `response_format` with a JSON schema, `reasoning_effort`.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .._accumulate import Accumulator
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
from . import openai_chat
from ._base import StreamParser
from ._files import data_url, is_image, is_pdf, is_text, not_accepted, resolved, text_block
from ._values import need_dict, need_list, need_str
from .openai_chat import OpenAIChatParser, map_finish_reason

__all__ = ["MistralParser", "Protocol", "map_call_ids", "mistral_call_id"]

_VALID_ID = re.compile(r"[A-Za-z0-9]{9}")
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

THINKING_DATA: dict[str, Any] = {"mistral": {"type": "thinking"}}
"""Provider data on thinking parts read from a Mistral stream: they may be sent back to Mistral."""


def mistral_call_id(call_id: str, attempt: int = 0) -> str:
    """A nine-character `[a-zA-Z0-9]` id derived from `call_id` (a different one for each `attempt`)."""
    seed = call_id if attempt == 0 else f"{attempt}:{call_id}"
    number = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big")
    chars = []
    for _ in range(9):
        number, digit = divmod(number, 62)
        chars.append(_ALPHABET[digit])
    return "".join(chars)


def _call_ids(messages: Iterable[Message]) -> list[str]:
    """Every tool-call id the history mentions, in order of first appearance."""
    seen: dict[str, None] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, (ToolCallPart, InvalidToolCallPart)):
                seen.setdefault(part.id, None)
            elif isinstance(part, ToolResultPart):
                seen.setdefault(part.call_id, None)
    return list(seen)


def map_call_ids(ids: Sequence[str]) -> dict[str, str]:
    """Original id → the id Mistral will accept, collision-free across `ids`."""
    table = {i: i for i in ids if _VALID_ID.fullmatch(i)}
    taken = set(table.values())
    for original in ids:
        if original in table:
            continue
        attempt = 0
        new = mistral_call_id(original)
        while new in taken:
            attempt += 1
            new = mistral_call_id(original, attempt)
        table[original] = new
        taken.add(new)
    return table


class MistralParser(OpenAIChatParser):
    """OpenAI chunks, plus content given as a list of typed chunks and an `error` finish."""

    protocol = "mistral"

    def on_content(self, content: Any) -> None:
        if type(content) is str:
            self.acc.text(content)
            return
        for chunk in need_list(content, "choices[0].delta.content"):
            kind = need_dict(chunk, "choices[0].delta.content[]").get("type")
            if kind == "text":
                self.acc.text(need_str(chunk.get("text") or "", "choices[0].delta.content[].text"))
            elif kind == "thinking":
                for inner in need_list(chunk.get("thinking") or [], "choices[0].delta.content[].thinking"):
                    inner = need_dict(inner, "choices[0].delta.content[].thinking[]")
                    if inner.get("type", "text") == "text" and inner.get("text"):
                        text = need_str(inner["text"], "choices[0].delta.content[].thinking[].text")
                        self.acc.thinking(text, provider_data=THINKING_DATA)
            # Other chunk types (references, images) carry nothing toolwire shows.

    def on_finish(self, raw: str) -> None:
        super().on_finish(raw)
        if map_finish_reason(raw) == "error":
            self.acc.fail("provider_error", "Mistral ended the response with finish_reason 'error'; "
                                            "the parts before it are kept. Retry the request.")


TOOL_RESULTS_BRIDGE = "Tool results received."
"""The assistant turn placed between tool results and following user text (Mistral requires one)."""


class Protocol(openai_chat.Protocol):
    """Mistral chat completions (`POST /chat/completions`, `stream: true`)."""

    name = "mistral"
    display_name = "Mistral Chat"

    # Filled per request, on a copy of the protocol (see `build_request`).
    _ids: dict[str, str] | None = None

    def new_parser(self, acc: Accumulator) -> StreamParser:
        return MistralParser(acc)

    def build_request(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> dict[str, Any]:
        # The id table belongs to this one request: it is set on a copy, so a protocol shared by
        # concurrent requests never sees another request's table.
        request = copy.copy(self)
        request._ids = map_call_ids(_call_ids(messages))
        base_settings: ModelSettings = {k: v for k, v in settings.items()  # type: ignore[assignment]
                                        if k not in ("extra_body", "max_tokens", "thinking")}
        body = super(Protocol, request).build_request(model, messages, tools, base_settings)
        body.pop("stream_options", None)
        if "max_tokens" in settings:
            body["max_tokens"] = settings["max_tokens"]
        if "thinking" in settings:
            body["reasoning_effort"] = _reasoning_effort(settings["thinking"])
        return merge_extra(body, settings)

    def map_messages(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        # Mistral answers 400 ("Unexpected role 'user' after role 'tool'") when new user text follows
        # tool results without an assistant turn between them, which happens whenever a user speaks
        # after an interrupted tool round. A short assistant turn bridges the two in the request only;
        # the stored history is not changed.
        out: list[dict[str, Any]] = []
        for entry in super().map_messages(messages):
            if entry["role"] == "user" and out and out[-1]["role"] == "tool":
                out.append({"role": "assistant", "content": TOOL_RESULTS_BRIDGE})
            out.append(entry)
        return out

    def map_call_id(self, call_id: str) -> str:
        if self._ids is not None and call_id in self._ids:
            return self._ids[call_id]
        return call_id if _VALID_ID.fullmatch(call_id) else mistral_call_id(call_id)

    def map_assistant(self, message: Message) -> dict[str, Any]:
        entry = super().map_assistant(message)
        if any(_is_mistral_thinking(p) for p in message.parts):
            chunks: list[dict[str, Any]] = []
            for part in message.parts:
                if isinstance(part, TextPart) and part.text:
                    chunks.append({"type": "text", "text": part.text})
                elif isinstance(part, ThinkingPart) and _is_mistral_thinking(part):
                    chunks.append({"type": "thinking", "thinking": [{"type": "text", "text": part.text}]})
            entry["content"] = chunks
        return entry

    def map_tool_result(self, part: ToolResultPart) -> dict[str, Any]:
        # Mistral's tool messages also carry the tool's name.
        return {**super().map_tool_result(part), "name": part.name}

    def map_file(self, part: FilePart) -> dict[str, Any]:
        """Images as `image_url` and PDFs as `document_url` (a URL, or the bytes as a base64 data URL);
        inline text files as text."""
        who = self.who()
        part = resolved(part, who)
        if is_image(part):
            return {"type": "image_url", "image_url": {"url": data_url(part)}}
        if is_pdf(part):
            return {"type": "document_url", "document_url": data_url(part)}
        if is_text(part):
            return {"type": "text", "text": text_block(part, who)}
        raise not_accepted(who, part, "images and PDFs (inline or by URL) and plain-text files (inline)",
                           "Convert the file to one of those, or extract its text and send that.")


def _is_mistral_thinking(part: Any) -> bool:
    return (isinstance(part, ThinkingPart) and not part.redacted and bool(part.text)
            and "mistral" in (part.provider_data or {}))


def _reasoning_effort(thinking: bool | int | str) -> str:
    """toolwire's `thinking` setting as Mistral's `reasoning_effort` (`none` or `high`, or as given)."""
    if isinstance(thinking, str):
        return thinking
    return "high" if thinking else "none"
