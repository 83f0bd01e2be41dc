"""Files in the requests the fake providers read: the request shapes of `toolwire.wire` turned back into `FilePart`s.

Every fake decodes the file blocks of its protocol (data URLs, base64 sources, URLs) into parts, so a
`FakeRequest` shows what a real provider would have received, and a round trip through a fake keeps the
files: those of user messages and those of tool results, including OpenAI chat's tool-result files, which
travel in a user message after the round's results, each result's files after a line naming its call.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import mimetypes
from typing import Any

from ...messages import FilePart, Part, TextPart, ToolResultPart
from ...wire._files import RESULT_FILES_INTRO, decoded_size, parse_text_block

__all__ = ["attach_result_files", "file_from_url", "file_size", "image_type", "text_part"]


def file_from_url(url: Any, *, media_type: str | None = None, name: Any = None) -> FilePart | None:
    """A `data:` URL as an inline part, any other URL as a part by URL (None for something that is no URL).

    `media_type` is the type to assume where neither the data URL nor the URL's extension tells it."""
    if not isinstance(url, str) or not url:
        return None
    label = name if isinstance(name, str) and name else None
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        given = header[5:].removesuffix(";base64")
        return FilePart(media_type=given or media_type or "application/octet-stream", data=data, name=label)
    guessed = mimetypes.guess_type(url.split("?", 1)[0])[0]
    return FilePart(media_type=guessed or media_type or "application/octet-stream", url=url, name=label)


def file_size(part: FilePart) -> int | None:
    """An inline file's size in bytes (from its base64 length, without decoding); None for a file by URL."""
    return decoded_size(part)


def image_type(data: str) -> str:
    """An inline image's media type from its first bytes (Ollama's `images` carry no type)."""
    try:
        head = base64.b64decode(data[:24] + "=" * (-len(data[:24]) % 4))
    except (binascii.Error, ValueError):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return "image/png"


def text_part(text: str) -> Part:
    """A text block: the file a wire adapter wrote as text, or plain text."""
    return parse_text_block(text) or TextPart(text=text)


def attach_result_files(results: list[Part], parts: list[Part]) -> list[Part] | None:
    """When `parts` (a user message after tool results) open with a line naming a call's files, put the files
    after each such line onto that call's result in `results`; return the parts left over, or None when
    `parts` do not hold result files."""
    first = parts[0] if parts else None
    if not isinstance(first, TextPart) or not RESULT_FILES_INTRO.match(first.text):
        return None
    by_call: dict[str, list[FilePart]] = {}
    current: str | None = None
    rest: list[Part] = []
    for part in parts:
        match = RESULT_FILES_INTRO.match(part.text) if isinstance(part, TextPart) else None
        if match is not None:
            current = match.group(1)
            by_call.setdefault(current, [])
        elif current is not None and isinstance(part, FilePart):
            by_call[current].append(part)
        else:
            current = None
            rest.append(part)
    for index, result in enumerate(results):
        if isinstance(result, ToolResultPart) and result.call_id in by_call:
            results[index] = dataclasses.replace(result, files=[*result.files, *by_call[result.call_id]])
    return rest
