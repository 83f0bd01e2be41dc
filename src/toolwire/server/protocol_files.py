"""Files in the other protocols' user messages: the Vercel AI SDK's `file` parts and AG-UI's image and document
content, turned into the same stored files (and `FilePart` references) as the native upload route makes.

A file arrives in one of two forms:
- inline, as a data URL (`data:image/png;base64,...`, what `sendMessage({ files })` sends for a `FileList`) or
  AG-UI's `{"type": "data", "value": base64}` source: decoded, checked exactly as an upload is (type sniffed
  from the bytes, images through Pillow, the size limit) and stored as a file of the chat. Such a file is part
  of the request body, so it is also bounded by `--max-body-bytes`; larger files go through the upload route.
- by reference, as the URL the upload route answered (`/api/files/{id}`, relative or absolute): the caller's own
  file, in any of their chats. Any other URL is refused: the server fetches nothing on a client's behalf.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import anyio

from ..messages import FilePart
from ..store import User
from ..store.blobs import Files, QuotaExceeded, spool_bytes
from .errors import ApiError
from .routes import ServerState
from .uploads import check_bytes, file_name

__all__ = ["agui_files", "ui_file_part", "vercel_files"]

_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?(?:;[\w-]+=[^;,]*)*;base64,(.*)", re.S)
_FILE_URL = re.compile(r"(?:https?://[^/]+)?/api/files/([A-Za-z0-9_-]{1,200})")


def _files(server: ServerState) -> Files:
    if server.files is None:
        raise ApiError(422, "files_disabled", "This server keeps no files; send the message without any.")
    return server.files


async def _inline(server: ServerState, user: User, chat_id: str, encoded: str, name: str) -> FilePart:
    limits = server.file_limits
    if len(encoded) > limits.max_file_bytes * 4 // 3 + 4:
        raise ApiError(413, "file_too_large", f"{name!r} is larger than this server accepts "
                                              f"({limits.max_file_bytes:,} bytes); send a smaller one.")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(422, "invalid_request", f"The data of {name!r} is not valid base64.") from None
    if not data:
        raise ApiError(422, "empty_file", f"{name!r} is empty; send a file with something in it.")
    spooled = await anyio.to_thread.run_sync(lambda: spool_bytes(data, media_type="", name=name))
    try:
        media_type = await anyio.to_thread.run_sync(lambda: check_bytes(spooled.path, limits, claimed_name=name))
        record = await _files(server).add(user.id, chat_id, _with_type(spooled, media_type),
                                          quota=limits.max_user_bytes)
    except QuotaExceeded as exc:
        raise ApiError(413, exc.code, str(exc)) from None
    finally:
        await anyio.Path(spooled.path).unlink(missing_ok=True)
    return FilePart(media_type=record.media_type, name=record.name, blob_id=record.id)


def _with_type(spooled: Any, media_type: str) -> Any:
    import dataclasses

    return dataclasses.replace(spooled, media_type=media_type)


async def _referenced(server: ServerState, user: User, url: str) -> FilePart:
    found = _FILE_URL.fullmatch(url)
    record = await _files(server).get(user.id, found.group(1)) if found else None
    if record is None:
        raise ApiError(422, "file_not_found", "A file's URL must be one this server gave for an upload of yours "
                                              "(/api/files/...), or a data URL; this server fetches no other URL.")
    return FilePart(media_type=record.media_type, name=record.name, blob_id=record.id)


async def _one(server: ServerState, user: User, chat_id: str, url: Any, name: str) -> FilePart:
    if not isinstance(url, str) or not url:
        raise ApiError(422, "invalid_request", f"The file {name!r} has no URL; send a data URL or the URL of an "
                                               "upload.")
    inline = _DATA_URL.fullmatch(url)
    if inline is not None:
        return await _inline(server, user, chat_id, inline.group(2), name)
    return await _referenced(server, user, url)


def _check_count(server: ServerState, count: int) -> None:
    if count > server.file_limits.max_files_per_message:
        raise ApiError(422, "too_many_files", f"A message may carry at most {server.file_limits.max_files_per_message}"
                                              f" files; this one carries {count}.")


async def vercel_files(server: ServerState, user: User, chat_id: str, parts: list[dict[str, Any]]) -> list[FilePart]:
    """The `file` parts of a UI message (`{type: "file", mediaType, filename?, url}`) as stored files."""
    files = [p for p in parts if p.get("type") == "file"]
    _check_count(server, len(files))
    return [await _one(server, user, chat_id, p.get("url"), file_name(_str(p.get("filename")))) for p in files]


async def agui_files(server: ServerState, user: User, chat_id: str, content: Any) -> list[FilePart]:
    """The image and document parts of an AG-UI user message (`source`: data or url) as stored files."""
    if isinstance(content, str):
        return []
    found = [p for p in content or [] if getattr(p, "type", None) in ("image", "document", "binary")]
    _check_count(server, len(found))
    out = []
    for part in found:
        source = getattr(part, "source", None)
        metadata = getattr(part, "metadata", None)
        name = file_name(_str(getattr(part, "filename", None))
                         or _str(metadata.get("filename") if isinstance(metadata, dict) else None))
        if source is None:  # the older `binary` content: `data` or `url` on the part itself
            data, url = getattr(part, "data", None), getattr(part, "url", None)
            out.append(await _inline(server, user, chat_id, data, name) if isinstance(data, str)
                       else await _one(server, user, chat_id, url, name))
        elif getattr(source, "type", None) == "data":
            out.append(await _inline(server, user, chat_id, str(source.value), name))
        else:
            out.append(await _one(server, user, chat_id, getattr(source, "value", None), name))
    return out


def ui_file_part(part: dict[str, Any]) -> dict[str, Any]:
    """A stored `FilePart` (as JSON) as a UI message's `file` part, its URL the server's download route."""
    shown: dict[str, Any] = {"type": "file", "mediaType": part.get("media_type")}
    if part.get("name"):
        shown["filename"] = part["name"]
    shown["url"] = f"/api/files/{part['blob_id']}" if part.get("blob_id") else part.get("url")
    return shown


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
