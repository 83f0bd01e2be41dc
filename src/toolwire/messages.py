"""Messages and their parts: the conversation model every layer speaks.

Parts are pure values. The `type` tags and field names below are the public JSON format and do not
change; a new kind of content is a new part, never a new meaning for an old field.

Invariants:
- A `Message` holds parts in the order they were produced; text is one part per contiguous run.
- Every `ToolCallPart` in an assistant message is answered by a `ToolResultPart` with the same id in the
  next `user` message. All results of one round travel together in that one message; each wire adapter
  splits it the way its provider wants.
- `InvalidToolCallPart` is a call whose arguments were cut off or are not a JSON object. It is never
  executed; the agent answers it with an error result so the model can try again.
- Vendor-opaque data (signatures, response ids, reasoning ids, item ids) lives in `provider_data` or
  `metadata`, keyed by the wire protocol that produced it, and survives JSON round trips.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

import orjson
from pydantic import Discriminator, SerializerFunctionWrapHandler, TypeAdapter, model_serializer

__all__ = [
    "FilePart",
    "InvalidToolCallPart",
    "Message",
    "Part",
    "ProviderToolPart",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolResultPart",
    "dump_messages",
    "load_messages",
]

Role: TypeAlias = Literal["system", "user", "assistant"]

JSONObject: TypeAlias = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    """Plain text."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingPart:
    """Reasoning the model showed (or hid: `redacted=True` keeps the opaque data in `provider_data`).

    `signature` and `provider_data` must be sent back unchanged to the provider that produced them.
    """

    text: str
    signature: str | None = None
    redacted: bool = False
    provider_data: JSONObject | None = None
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallPart:
    """A complete tool call whose arguments parsed as a JSON object.

    `arguments_raw` is the argument text exactly as the provider streamed it (or its JSON encoding when
    the provider sent an object).
    """

    id: str
    name: str
    arguments: JSONObject
    arguments_raw: str
    provider_data: JSONObject | None = None
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidToolCallPart:
    """A tool call that must not run: its stream was cut off or its arguments are not a JSON object."""

    id: str
    name: str
    arguments_raw: str
    reason: str
    provider_data: JSONObject | None = None
    type: Literal["invalid_tool_call"] = "invalid_tool_call"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultPart:
    """The result of running a tool call; `result` is any JSON value, `files` what the tool returned as files
    (images, PDFs), sent to the model where its API takes files in tool results."""

    call_id: str
    name: str
    result: Any
    is_error: bool = False
    files: list[FilePart] = field(default_factory=list)
    type: Literal["tool_result"] = "tool_result"

    @model_serializer(mode="wrap")
    def _leave_out_no_files(self, handler: SerializerFunctionWrapHandler) -> Any:
        # `files` is written only when there are some: results without files keep the JSON they always had.
        data = handler(self)
        if not self.files:
            data.pop("files", None)
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class FilePart:
    """An image or other file, inline (`data`, base64), by `url`, or by `blob_id`: a reference into the
    server's blob store, replaced by the bytes before a provider request."""

    media_type: str
    data: str | None = None
    url: str | None = None
    name: str | None = None
    blob_id: str | None = None
    type: Literal["file"] = "file"

    @model_serializer(mode="wrap")
    def _leave_out_no_blob(self, handler: SerializerFunctionWrapHandler) -> Any:
        # `blob_id` is written only when set: files kept inline or by URL keep the JSON they always had.
        data = handler(self)
        if self.blob_id is None:
            data.pop("blob_id", None)
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderToolPart:
    """Tool activity that ran on the provider's side (web search, code interpreter, MCP...).

    It is shown, stored and sent back to the same provider, but never executed locally.
    """

    id: str
    name: str
    provider: str
    arguments: Any = None
    result: Any = None
    status: str | None = None
    provider_data: JSONObject | None = None
    type: Literal["provider_tool"] = "provider_tool"


Part: TypeAlias = Annotated[
    TextPart | ThinkingPart | ToolCallPart | InvalidToolCallPart | ToolResultPart | FilePart | ProviderToolPart,
    Discriminator("type"),
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message of a conversation.

    Build them with the helpers for the common cases: `Message.user("hi")`, `Message.system(...)`,
    `Message.assistant(...)`, `Message.tool_results([...])`.
    """

    role: Role
    parts: list[Part]
    metadata: JSONObject = field(default_factory=dict)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", parts=[TextPart(text=text)])

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", parts=[TextPart(text=text)])

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(role="assistant", parts=[TextPart(text=text)])

    @classmethod
    def tool_results(cls, results: Iterable[ToolResultPart]) -> Message:
        """The one `user` message that carries every result of a tool round."""
        return cls(role="user", parts=list(results))

    @property
    def text(self) -> str:
        """All text parts joined (thinking excluded)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def invalid_tool_calls(self) -> list[InvalidToolCallPart]:
        return [p for p in self.parts if isinstance(p, InvalidToolCallPart)]

    @property
    def tool_results_parts(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    def to_json(self) -> bytes:
        return _message_adapter.dump_json(self)

    @classmethod
    def from_json(cls, data: str | bytes) -> Message:
        return _message_adapter.validate_json(data)

    def to_dict(self) -> JSONObject:
        result: JSONObject = _message_adapter.dump_python(self, mode="json")
        return result

    @classmethod
    def from_dict(cls, data: JSONObject) -> Message:
        return _message_adapter.validate_python(data)


_message_adapter: TypeAdapter[Message] = TypeAdapter(Message)
_messages_adapter: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def dump_messages(messages: Sequence[Message]) -> bytes:
    """Serialise a history to JSON bytes (lossless: `load_messages(dump_messages(h)) == h`)."""
    return _messages_adapter.dump_json(list(messages))


def load_messages(data: str | bytes) -> list[Message]:
    """Read a history written by `dump_messages` (or any list of message objects)."""
    return _messages_adapter.validate_json(data)


def to_jsonable(value: Any) -> Any:
    """Turn a tool result (any Python value) into plain JSON data.

    orjson handles the common types fast (dataclasses, datetimes, UUIDs, numpy-free); pydantic handles
    models and the rest; anything left becomes its `str`.
    """
    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:
        pass
    try:
        return TypeAdapter(Any).dump_python(value, mode="json")
    except Exception:
        return str(value)
