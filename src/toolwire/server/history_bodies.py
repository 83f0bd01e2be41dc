"""Reading the protocol routes' bodies, which carry the client's whole history, without building it.

A Vercel AI SDK or AG-UI client sends its copy of the whole chat with every message; the server reads
only the last message (and the ids, the trigger, AG-UI's `resume`). Parsing such a body into Python
objects costs tens of times its size and, done on the event loop, stalls every other client, so:

- The body's size is capped (`Limits.max_history_bytes`, 413), checked before and while reading.
- msgspec reads it against a schema that keeps, per earlier message, only its role (a literal: no string
  is allocated) and zero-copy slices of the fields the last message needs: memory is a small multiple of
  the body (measured at most ~5x for the smallest valid messages, ~2x for real ones) and the parse
  checks the whole body is JSON of the right shape.
- A body larger than `_INLINE_BYTES` is read in a worker process (`anyio.to_process`): a C parser holds
  the GIL for as long as it runs (tens of milliseconds for megabytes), which in a thread would stall the
  event loop just the same. Smaller ones take well under a millisecond and are read in place.

What comes back is a small JSON object (`{"id", "trigger", "message"}` for Vercel, `{"threadId", "runId",
"messages": [last], "resume"}` for AG-UI) that the routes validate with their usual models. This module
imports only msgspec, so that a worker process starts quickly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import anyio.to_process
import msgspec

__all__ = ["HistoryBodyError", "read_agui", "read_vercel"]

_NULL = msgspec.Raw(b"null")

_INLINE_BYTES = 256 * 1024
"""Bodies up to this size are read on the event loop (a fraction of a millisecond); larger ones in a worker."""


class HistoryBodyError(Exception):
    """The body is not JSON (`invalid_json`) or not the protocol's shape (`invalid_request`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)  # both in `args`: it crosses back from a worker process pickled
        self.code = code
        self.message = message


class _UIMessageHead(msgspec.Struct, gc=False):
    role: Literal["system", "user", "assistant"]
    id: msgspec.Raw = _NULL
    parts: msgspec.Raw = _NULL


class _VercelBody(msgspec.Struct, gc=False):
    id: msgspec.Raw = _NULL
    trigger: msgspec.Raw = _NULL
    messageId: msgspec.Raw = _NULL
    messages: list[_UIMessageHead] | None = None
    message: _UIMessageHead | None = None
    multitask_strategy: msgspec.Raw = _NULL
    model: msgspec.Raw = _NULL


class _AguiMessageHead(msgspec.Struct, gc=False):
    role: Literal["developer", "system", "assistant", "user", "tool", "activity", "reasoning"]
    id: msgspec.Raw = _NULL
    content: msgspec.Raw = _NULL


class _AguiBody(msgspec.Struct, gc=False, rename="camel"):
    thread_id: msgspec.Raw = _NULL
    run_id: msgspec.Raw = _NULL
    messages: list[_AguiMessageHead] | None = None
    resume: msgspec.Raw = _NULL
    forwarded_props: msgspec.Raw = _NULL


class _Forwarded(msgspec.Struct, gc=False):
    multitask_strategy: msgspec.Raw = _NULL
    model: msgspec.Raw = _NULL


_vercel_decoder = msgspec.json.Decoder(_VercelBody)
_agui_decoder = msgspec.json.Decoder(_AguiBody)
_forwarded_decoder = msgspec.json.Decoder(_Forwarded)


def _object(fields: dict[str, bytes]) -> bytes:
    """A JSON object of already-encoded values (the fields' raw JSON, copied out of the body); a field that is
    null or absent is left out, so that the route's model applies its default or says it is missing."""
    return b"{" + b",".join(b'"' + key.encode() + b'":' + value for key, value in fields.items()
                            if value != b"null") + b"}"


def _decode(decoder: msgspec.json.Decoder[Any], body: bytes, what: str) -> Any:
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        return HistoryBodyError("invalid_request", f"The {what} request is not valid: {exc}.")
    except msgspec.DecodeError as exc:
        return HistoryBodyError("invalid_json", f"The request body is not valid JSON ({exc}).")


def _vercel_in_place(body: bytes) -> bytes | HistoryBodyError:
    decoded = _decode(_vercel_decoder, body, "chat")
    if isinstance(decoded, HistoryBodyError):
        return decoded
    last = decoded.message if decoded.message is not None else (decoded.messages[-1] if decoded.messages else None)
    fields = {"id": bytes(decoded.id), "trigger": bytes(decoded.trigger), "messageId": bytes(decoded.messageId),
              "multitask_strategy": bytes(decoded.multitask_strategy), "model": bytes(decoded.model)}
    if last is not None:
        fields["message"] = _object({"id": bytes(last.id), "role": f'"{last.role}"'.encode(),
                                     "parts": bytes(last.parts)})
    return _object(fields)


def _agui_in_place(body: bytes) -> bytes | HistoryBodyError:
    decoded = _decode(_agui_decoder, body, "AG-UI run")
    if isinstance(decoded, HistoryBodyError):
        return decoded
    fields = {"threadId": bytes(decoded.thread_id), "runId": bytes(decoded.run_id), "resume": bytes(decoded.resume)}
    last = decoded.messages[-1] if decoded.messages else None
    # A resumed run reads no message; a new one only a last user message (anything else is refused as such).
    if last is not None and last.role == "user" and fields["resume"] in (b"null", b"[]"):
        fields["messages"] = b"[" + _object({"id": bytes(last.id), "role": b'"user"',
                                             "content": bytes(last.content)}) + b"]"
        # Where the client's history ends: its user message before the last (a history that ends earlier than
        # the stored branch forks there, see protocol_routes.agui_run).
        earlier = next((m for m in reversed(decoded.messages[:-1]) if m.role == "user"), None)
        if earlier is not None:
            fields["previousUserMessageId"] = bytes(earlier.id)
    else:
        fields["messages"] = b"[]"
    # forwardedProps is the client's own: only the double-texting strategy and the model are read from it.
    try:
        forwarded = _forwarded_decoder.decode(decoded.forwarded_props)
        props = {"multitask_strategy": bytes(forwarded.multitask_strategy), "model": bytes(forwarded.model)}
    except msgspec.MsgspecError:
        props = {}
    if any(value != b"null" for value in props.values()):
        fields["forwardedProps"] = _object(props)
    return _object(fields)


async def _read(body: bytes, reader: Callable[[bytes], bytes | HistoryBodyError]) -> bytes:
    if len(body) <= _INLINE_BYTES:
        outcome = reader(body)
    else:
        outcome = await anyio.to_process.run_sync(reader, body)
    if isinstance(outcome, HistoryBodyError):
        raise outcome
    return outcome


async def read_vercel(body: bytes) -> bytes:
    """`{"id", "trigger", "messageId", "message"}` of a `POST /api/chat` body (the last of `messages`, or `message`)."""
    return await _read(body, _vercel_in_place)


async def read_agui(body: bytes) -> bytes:
    """`{"threadId", "runId", "messages", "resume"}` of a `RunAgentInput`, `messages` holding at most its last
    message, and only when that is a user message and nothing is resumed; then also `previousUserMessageId`,
    the id of the user message before it, if there is one."""
    return await _read(body, _agui_in_place)
