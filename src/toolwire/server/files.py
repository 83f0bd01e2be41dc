"""Files in the chat server: upload, download, and the blob references of the messages that hold them.

Routes (docs/guides/files.md):
- `POST /api/chats/{chat_id}/files?name=...`: the body is the file (any `Content-Type`; it is sniffed, see
  `uploads.py`), streamed to a temporary file under the size limit, checked, then kept in the blob store and
  counted against the user's quota. Answers 201 with the file's id, type, size and download URL.
- `GET /api/files/{file_id}`: the bytes, to the file's owner only (404 for anyone else, exactly as for a file
  that never existed), with `Content-Disposition: attachment` for anything but an image, and a
  `Content-Security-Policy: sandbox` so that even a file opened in a tab runs nothing.

Messages hold a `FilePart` with the file's id as `blob_id` and no bytes (`file_parts.py` turns references into
bytes for the model and a tool's bytes into references for the store).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..messages import FilePart
from ..store.blobs import Files, QuotaExceeded
from .errors import ApiError
from .routes import _caller, _chat, _json, _server
from .uploads import IMAGE_TYPES, FileLimits, file_name, receive_upload

__all__ = ["download_file", "file_json", "upload_file", "user_files"]


def _files(request: Request) -> Files:
    files: Files | None = _server(request).files
    if files is None:
        raise ApiError(404, "files_disabled", "This server keeps no files (its store is not an SQLStore).")
    return files


def _limits(request: Request) -> FileLimits:
    limits: FileLimits = _server(request).file_limits
    return limits


def file_json(record: Any) -> dict[str, Any]:
    return {"id": record.id, "name": record.name, "media_type": record.media_type, "size": record.size,
            "url": f"/api/files/{record.id}"}


async def upload_file(request: Request) -> Response:
    server, user = await _caller(request, query=("name",))
    chat = await _chat(request, server, user)
    files = _files(request)
    limits = _limits(request)
    name = file_name(request.query_params.get("name"))
    spooled = await receive_upload(request, limits, name=name)
    try:
        record = await files.add(user.id, chat.id, spooled, quota=limits.max_user_bytes)
    except QuotaExceeded as exc:
        raise ApiError(413, exc.code, str(exc)) from None
    finally:
        spooled.path.unlink(missing_ok=True)
    return _json(file_json(record), 201, headers={"Location": f"/api/files/{record.id}"})


async def download_file(request: Request) -> Response:
    _server_state, user = await _caller(request)
    files = _files(request)
    file_id = request.path_params["file_id"]
    record = await files.get(user.id, file_id) if len(file_id) <= 200 else None
    if record is None:
        raise ApiError(404, "file_not_found", "There is no file with this id for this API token.")
    disposition = "inline" if record.media_type in IMAGE_TYPES else "attachment"
    ascii_name = record.name.encode("ascii", "replace").decode().replace("?", "_")
    headers = {
        "Content-Disposition": f"{disposition}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(record.name)}",
        "Content-Length": str(record.size),
        # A file opened in a tab of its own is a document of the server's origin: sandboxed, it runs nothing and
        # reaches nothing of the page's (`BrowserHeaders` adds `default-src 'none'` and `nosniff` besides).
        "Content-Security-Policy": "sandbox; default-src 'none'; img-src 'self'; style-src 'unsafe-inline'",
        # Content-addressed and never changed: a browser may keep it, but no shared cache (it is one user's).
        "Cache-Control": "private, max-age=86400, immutable",
    }
    try:
        chunks = files.read(record)
        first = await anext(chunks)
    except (FileNotFoundError, StopAsyncIteration):
        raise ApiError(404, "file_not_found", "This file's bytes are gone (its chat is being deleted).") from None

    async def body() -> Any:
        yield first
        async for chunk in chunks:
            yield chunk

    return StreamingResponse(body(), media_type=record.media_type, headers=headers)


async def user_files(server: Any, user_id: str, chat_id: str, file_ids: Sequence[str]) -> list[FilePart]:
    """The parts referencing `file_ids` (files of this chat), for a user's message; 422 naming one that is not."""
    files: Files | None = server.files
    limits: FileLimits = server.file_limits
    if not file_ids:
        return []
    if files is None:
        raise ApiError(422, "files_disabled", "This server keeps no files; send the message without any.")
    if len(file_ids) > limits.max_files_per_message:
        raise ApiError(422, "too_many_files", f"A message may reference at most {limits.max_files_per_message} "
                                              f"files; this one references {len(file_ids)}.")
    found = await files.in_chat(chat_id, set(file_ids))
    parts = []
    for file_id in file_ids:
        record = found.get(file_id)
        if record is None or record.user_id != user_id:
            raise ApiError(422, "file_not_found", f"There is no file {file_id[:80]!r} in this chat; upload it to "
                                                  "this chat first.")
        parts.append(FilePart(media_type=record.media_type, name=record.name, blob_id=record.id))
    return parts
