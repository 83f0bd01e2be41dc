"""Receiving a file: the body streamed to a temporary file under the size limit, its type sniffed from its bytes,
an image re-checked with Pillow, before anything is stored.

- The body is read a chunk at a time and written to a temporary file while it is hashed; past
  `FileLimits.max_file_bytes` the request is refused (413). Up to `DRAIN_BYTES` more of the body is read and
  thrown away first, so that a client a little over the limit (a photo slightly too big: the usual case)
  finishes sending and reads its 413: closing on a body not yet read makes the kernel reset the connection,
  and the client then sees a broken connection instead of the answer. Past that allowance (or a declared
  `Content-Length` beyond it) the answer goes out at once with `Connection: close`, and the rest is never read,
  so memory stays flat whatever a client sends.
- The type is what the bytes say (puremagic's signatures; text is UTF-8 without NUL characters), never what the
  client's `Content-Type` or file name claim: a PNG named `.pdf` is stored as the PNG it is, and a type not in
  `FileLimits.media_types` is refused (415).
- An image is opened with Pillow, which reads its header: a width times height over `max_image_pixels` (a
  decompression bomb: a few kilobytes that would unpack to gigabytes) or a file Pillow cannot read is refused
  (422) before it is stored.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import puremagic
from starlette.requests import ClientDisconnect, Request

from ..store.blobs import Spooled
from .errors import ApiError

__all__ = ["DEFAULT_MEDIA_TYPES", "IMAGE_TYPES", "FileLimits", "check_bytes", "file_paths", "receive_upload", "sniff"]

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Images shown inline (and checked with Pillow). SVG is not among them: it can carry script."""

DEFAULT_MEDIA_TYPES = frozenset({*IMAGE_TYPES, "application/pdf", "text/plain"})

_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True, kw_only=True)
class FileLimits:
    """Limits on files (each a `toolwire serve` flag; docs/guides/files.md).

    Attributes:
        max_file_bytes: The largest file accepted (`--max-file-mb`, 20 MB).
        max_files_per_message: The most files one message references (`--max-files-per-message`, 10).
        max_user_bytes: The most bytes of files one user keeps, all chats together (`--max-user-files-mb`, 1 GB).
        max_image_pixels: The most pixels (width x height) an image may have (`--max-image-pixels`, 50 million).
        media_types: The types accepted (`--file-types`): PNG, JPEG, GIF, WebP, PDF and plain text.
    """

    max_file_bytes: int = 20 * 1024 * 1024
    max_files_per_message: int = 10
    max_user_bytes: int = 1024 * 1024 * 1024
    max_image_pixels: int = 50_000_000
    media_types: frozenset[str] = DEFAULT_MEDIA_TYPES


def sniff(head: bytes) -> str | None:
    """The media type `head` (a file's first bytes) shows, or `None` when it shows none that is known."""
    if not head:
        return None
    try:
        matches = puremagic.magic_string(head)
    except (puremagic.PureError, ValueError):
        matches = []
    for match in matches:  # best first
        if match.mime_type:
            return str(match.mime_type)
    if b"\x00" in head:
        return None
    try:
        # A multi-byte character cut at the end of the head is still text.
        head.decode("utf-8") if len(head) < _SNIFF_BYTES else head[:-4].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "text/plain"


def check_bytes(path: Path, limits: FileLimits, *, claimed_name: str) -> str:
    """The sniffed media type of the file at `path`, or an `ApiError` saying why it is refused."""
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    media_type = sniff(head)
    if media_type is None or media_type not in limits.media_types:
        shown = media_type or "an unknown type"
        allowed = ", ".join(sorted(limits.media_types))
        raise ApiError(415, "unsupported_file_type", f"{claimed_name!r} is {shown}, judged from its bytes; this "
                                                     f"server accepts {allowed}.")
    if media_type in IMAGE_TYPES:
        _check_image(path, limits, claimed_name)
    return media_type


def _check_image(path: Path, limits: FileLimits, claimed_name: str) -> None:
    from PIL import Image

    try:
        with warnings.catch_warnings():
            # Pillow warns past its own bomb limit and raises past twice it; the limit here is ours.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                width, height = image.size
                if width * height > limits.max_image_pixels:
                    raise ApiError(422, "image_too_large", f"{claimed_name!r} is {width} x {height} pixels, more than "
                                                           f"the {limits.max_image_pixels:,} this server accepts "
                                                           "(an image that small on disk and that large unpacked is "
                                                           "refused as a decompression bomb).")
                image.verify()
    except ApiError:
        raise
    except Image.DecompressionBombError:
        raise ApiError(422, "image_too_large", f"{claimed_name!r} has more pixels than this server accepts "
                                               f"({limits.max_image_pixels:,}).") from None
    except Exception as exc:
        raise ApiError(422, "invalid_image", f"{claimed_name!r} is not an image that can be read ({exc}); send "
                                             "another file.") from None


def file_name(raw: str | None) -> str:
    """A file name as shown and offered for download: the last path component, printable, at most 200 characters."""
    name = (raw or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if c.isprintable() and c not in '"').strip()
    return name[:200] or "file"


async def receive_upload(request: Request, limits: FileLimits, *, name: str) -> Spooled:
    """The request's body in a temporary file, checked (module docstring); the caller adds it to the store."""
    declared = request.headers.get("content-length")
    stream = request.stream()
    if declared is not None and declared.isdigit() and int(declared) > limits.max_file_bytes:
        raise await _refusal(stream, limits, int(declared))
    handle, raw_path = tempfile.mkstemp(prefix="toolwire-upload-")
    os.close(handle)
    path = Path(raw_path)
    digest = hashlib.sha256()
    size = 0
    try:
        async with await anyio.open_file(path, "wb") as out:
            async for chunk in stream:
                size += len(chunk)
                if size > limits.max_file_bytes:
                    raise await _refusal(stream, limits, None)
                digest.update(chunk)
                await out.write(chunk)
        if size == 0:
            raise ApiError(422, "empty_file", "The file is empty; send a file with something in it.")
        media_type = await anyio.to_thread.run_sync(lambda: check_bytes(path, limits, claimed_name=name))
    except ClientDisconnect:
        path.unlink(missing_ok=True)  # noqa: ASYNC240 - one unlink; an await here could itself be cancelled
        raise ApiError(400, "upload_interrupted", "The upload ended before the whole file arrived; send it again.") \
            from None
    except BaseException:
        path.unlink(missing_ok=True)  # noqa: ASYNC240 - one unlink; an await here could itself be cancelled
        raise
    return Spooled(path=path, sha256=digest.hexdigest(), size=size, media_type=media_type, name=name)


DRAIN_BYTES = 4 * 1024 * 1024
DRAIN_SECONDS = 5.0


async def _refusal(stream: AsyncIterator[bytes], limits: FileLimits, declared: int | None) -> ApiError:
    """The 413, after reading what is left of a body a little over the limit (module docstring)."""
    if declared is None or declared - limits.max_file_bytes <= DRAIN_BYTES:
        drained = 0
        try:
            with anyio.move_on_after(DRAIN_SECONDS):
                async for chunk in stream:
                    drained += len(chunk)
                    if drained > DRAIN_BYTES:
                        break
                else:
                    return _too_large(limits, close=False)
        except ClientDisconnect:
            pass  # the client is gone: the answer has nobody to reach
    return _too_large(limits, close=True)


def _too_large(limits: FileLimits, *, close: bool) -> ApiError:
    # `Connection: close`: uvicorn then closes the connection after the answer instead of reading (and
    # discarding) the rest of the body to keep it alive, so a client sending 1 GB is cut off near the limit.
    return ApiError(413, "file_too_large", f"The file is larger than this server accepts "
                                           f"({limits.max_file_bytes:,} bytes); send a smaller one.",
                    headers={"Connection": "close"} if close else None)


def file_paths(op: Any, chat_id: dict[str, Any], error: Any) -> dict[str, Any]:
    """The OpenAPI description of the file routes (`files.py`), built with the document's own helpers."""
    file_json = {"type": "object", "required": ["id", "name", "media_type", "size", "url"], "properties": {
        "id": {"type": "string"}, "name": {"type": "string"}, "media_type": {"type": "string"},
        "size": {"type": "integer", "minimum": 1}, "url": {"type": "string"}}}
    upload = op("Upload a file to the chat (the body is the file; its type is judged from its bytes)", {
        "201": {"description": "Stored", "content": {"application/json": {"schema": file_json}},
                "headers": {"Location": {"schema": {"type": "string"}}}},
        "400": error("The upload was cut short, or a query parameter the operation does not take."),
        "413": error("The file is over the size limit, or the user's storage quota."),
        "415": error("The file's type (judged from its bytes) is not accepted."),
        "422": error("The file is empty, or an image too large or unreadable.")},
        parameters=[chat_id, {"name": "name", "in": "query", "required": False, "schema": {"type": "string"}}])
    upload["requestBody"] = {"required": True, "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}}
    download = op("A file's bytes, to its owner (inline for images, an attachment otherwise)", {
        "200": {"description": "The file", "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}},
        "404": error("No such file for this API token.")},
        parameters=[{"name": "file_id", "in": "path", "required": True, "schema": {"type": "string"}}])
    return {"/api/chats/{chat_id}/files": {"post": upload}, "/api/files/{file_id}": {"get": download}}
