"""A run's file parts: references put back as bytes for the model, a tool's bytes kept as references.

Messages are stored with a `FilePart` holding the file's id as `blob_id` and no bytes. `resolve` puts the bytes
back (as base64 `data`) when a run's history is loaded for the model; `keep_result_files` stores the files a tool
returned as blobs when its round is committed, so the stored row holds references only; events to the browser
(and the run's recovery journal) carry `without_data` results, whose files the page finds through the round's
`message_saved` rows.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Sequence
from typing import Any

import anyio

from ..messages import FilePart, Message, ToolResultPart
from ..store import StoreError
from ..store.blobs import Files, spool_bytes
from .uploads import file_name

__all__ = ["keep_result_files", "resolve", "without_data"]


async def resolve(messages: list[Message], files: Files) -> list[Message]:
    """`messages` with the bytes of every stored file put back as base64 `data` (a provider request needs them);
    a file whose bytes are gone becomes a note in text, so that the model is told rather than the run failing."""
    out = []
    for message in messages:
        if not any(_has_blob(p) for p in message.parts):
            out.append(message)
            continue
        parts: list[Any] = []
        for part in message.parts:
            if isinstance(part, FilePart) and part.blob_id and part.data is None:
                parts.append(await _loaded(part, files))
            elif isinstance(part, ToolResultPart) and any(f.blob_id and f.data is None for f in part.files):
                parts.append(dataclasses.replace(part, files=[await _loaded(f, files) for f in part.files]))
            else:
                parts.append(part)
        out.append(dataclasses.replace(message, parts=parts))
    return out


def _has_blob(part: Any) -> bool:
    if isinstance(part, FilePart):
        return part.blob_id is not None and part.data is None
    return isinstance(part, ToolResultPart) and any(f.blob_id for f in part.files)


async def _loaded(part: FilePart, files: Files) -> FilePart:
    if part.blob_id is None:
        return part
    found = await files.read_all(part.blob_id)
    if found is None:
        return dataclasses.replace(part, data=base64.b64encode(b"").decode(), media_type="text/plain")
    record, data = found
    encoded = await anyio.to_thread.run_sync(base64.b64encode, data)
    return dataclasses.replace(part, data=encoded.decode(), media_type=record.media_type)


async def keep_result_files(messages: Sequence[Message], files: Files, *, user_id: str, chat_id: str) -> list[Message]:
    """`messages` with each file a tool returned stored as a blob, its part holding the reference only."""
    out = []
    for message in messages:
        if not any(isinstance(p, ToolResultPart) and any(f.data is not None for f in p.files) for p in message.parts):
            out.append(message)
            continue
        parts: list[Any] = []
        for part in message.parts:
            if isinstance(part, ToolResultPart) and part.files:
                parts.append(dataclasses.replace(part, files=[
                    await _kept(f, files, user_id=user_id, chat_id=chat_id) for f in part.files]))
            else:
                parts.append(part)
        out.append(dataclasses.replace(message, parts=parts))
    return out


async def _kept(part: FilePart, files: Files, *, user_id: str, chat_id: str) -> FilePart:
    if part.data is None:
        return part
    try:
        data = base64.b64decode(part.data, validate=True)
    except ValueError:
        return dataclasses.replace(part, data=None, name=file_name(part.name))  # not base64: nothing to keep
    name = file_name(part.name)
    spooled = await anyio.to_thread.run_sync(lambda: spool_bytes(data, media_type=part.media_type, name=name))
    try:
        # A tool's files are the server's own doing: counted in the user's usage, never refused by the quota
        # (the round must be stored whole).
        record = await files.add(user_id, chat_id, spooled)
    except StoreError:
        return dataclasses.replace(part, data=None, name=name)
    finally:
        spooled.path.unlink(missing_ok=True)
    return FilePart(media_type=part.media_type, name=name, blob_id=record.id)


def without_data(part: ToolResultPart) -> ToolResultPart:
    """The result as the browser and the journal get it: its files' names and types without their bytes."""
    if not any(f.data is not None for f in part.files):
        return part
    return dataclasses.replace(part, files=[dataclasses.replace(f, data=None) for f in part.files])
