"""Files in requests: what every wire adapter needs to send a `FilePart`, and the words it fails with.

A file reaches an adapter inline (`data`, base64), by `url`, or (a bug upstream) by `blob_id` alone: the
server replaces a blob reference with the bytes before a request, so a part that still has only a
`blob_id` here is a `UserError`, raised while the request body is built, before anything is sent. A
`data:` URL given as `url` is inline data and is treated as such everywhere.

User files a provider cannot take (a PDF to Ollama, a URL where only inline data goes) are a
`UserError` naming the provider and the media type, also before any request. Files that a *tool*
returned are different: the tool, not the person, chose them, and failing the request would end the
run over a chart. Where a provider cannot take such a file, the adapter sends a note naming it
(`files_note`) and the model reads that instead.

Inline plain-text files (`text/*`) go to providers without a text-document input as a text block
(`text_block`), which `parse_text_block` reads back (the fake providers use it to rebuild the part).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from ..exceptions import UserError
from ..messages import FilePart

__all__ = [
    "FILE_LABEL",
    "RESULT_FILES_INTRO",
    "data_url",
    "decoded_size",
    "describe",
    "file_label",
    "files_note",
    "is_image",
    "is_pdf",
    "is_text",
    "label",
    "no_url",
    "not_accepted",
    "parse_text_block",
    "resolved",
    "result_file_blocks",
    "result_files_intro",
    "text_block",
    "text_of",
]


Block = TypeVar("Block")


def label(part: FilePart) -> str:
    """How a message names the file: `'chart.png' (image/png)`, or `an image/png file` without a name."""
    return f"{part.name!r} ({part.media_type})" if part.name else f"an {part.media_type} file"


def resolved(part: FilePart, provider: str) -> FilePart:
    """`part` ready to send: a `data:` URL becomes inline data; a part with nothing to send is a `UserError`."""
    if part.data is not None:
        return part
    url = part.url
    if url:
        if not url.startswith("data:"):
            return part
        header, comma, data = url.partition(",")
        if not comma or not header.endswith(";base64"):
            raise UserError(
                f"The file {label(part)} is a data: URL that is not base64-encoded, which {provider} cannot take; "
                "encode its bytes as base64 (data:<type>;base64,...) or pass them as FilePart.data."
            )
        return dataclasses.replace(part, data=data, url=None)
    if part.blob_id:
        raise UserError(
            f"The file {label(part)} still refers to the blob store (blob_id={part.blob_id!r}) and carries no data, "
            f"so it cannot be sent to {provider}: load the blob's bytes into FilePart.data (base64) before the "
            "request; the server does this for the files it stores."
        )
    raise UserError(f"The file {label(part)} has neither data nor a url; give one of them before sending it to "
                    f"{provider}.")


def is_image(part: FilePart) -> bool:
    return part.media_type.startswith("image/")


def is_pdf(part: FilePart) -> bool:
    return part.media_type == "application/pdf"


def is_text(part: FilePart) -> bool:
    return part.media_type.startswith("text/")


def data_url(part: FilePart) -> str:
    """The part as a URL: its own, or a base64 `data:` URL of its bytes (`part` must be `resolved`)."""
    if part.data is not None:
        return f"data:{part.media_type};base64,{part.data}"
    return part.url or ""


def decoded_size(part: FilePart) -> int | None:
    """The file's size in bytes, computed from the base64 length without decoding (None for a URL)."""
    data = part.data
    if data is None:
        return None
    data = data.rstrip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def describe(part: FilePart) -> str:
    """`chart.png (image/png, 1,234 bytes)`: a file as a note names it."""
    size = decoded_size(part)
    detail = part.media_type if size is None else f"{part.media_type}, {size:,} bytes"
    return f"{part.name or 'unnamed file'} ({detail})"


def not_accepted(provider: str, part: FilePart, accepts: str, hint: str = "") -> UserError:
    """The error for a user file `provider` cannot take in any form."""
    where = " by URL" if part.data is None and part.url else ""
    return UserError(
        f"{provider} cannot take {label(part)}{where} in a message: it accepts {accepts}."
        + (f" {hint}" if hint else "")
    )


def no_url(provider: str, part: FilePart, kind: str) -> UserError:
    """The error for a URL where `provider` takes `kind` files only inline."""
    return UserError(
        f"{provider} takes {kind} files only inline, not by URL ({(part.url or '')[:80]!r}, {part.media_type}): "
        "download the file and pass its bytes as FilePart.data (base64)."
    )


def text_of(part: FilePart, provider: str) -> str:
    """The UTF-8 text of an inline text file (`part` must be `resolved` and inline)."""
    try:
        return base64.b64decode(part.data or "", validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise UserError(
            f"The text file {label(part)} for {provider} must carry base64-encoded UTF-8 data ({exc})."
        ) from exc


def text_block(part: FilePart, provider: str) -> str:
    """An inline text file as the text a provider without text documents reads (see `parse_text_block`)."""
    if part.data is None:
        raise no_url(provider, part, "text")
    name = (part.name or "file").replace('"', "'")
    return f'<file name="{name}" media_type="{part.media_type}">\n{text_of(part, provider)}\n</file>'


_TEXT_BLOCK = re.compile(r'\A<file name="([^"]*)" media_type="([^"]+)">\n(.*)\n</file>\Z', re.S)


def parse_text_block(text: str) -> FilePart | None:
    """The file a `text_block` wrote, or None for any other text."""
    match = _TEXT_BLOCK.match(text)
    if match is None:
        return None
    name, media_type, body = match.groups()
    return FilePart(media_type=media_type, name=name, data=base64.b64encode(body.encode()).decode())


def result_file_blocks(files: Sequence[FilePart], provider: str, map_file: Callable[[FilePart], Block],
                       accepts: Callable[[FilePart], bool] | None = None) -> tuple[list[Block], list[FilePart]]:
    """A tool result's files as `provider`'s blocks (`map_file` of each, `resolved` first), and the files left out,
    for a note (`files_note`): those `accepts` refuses and those `map_file` raises `UserError` for. A user's file
    that cannot go fails its request; a tool's must not end the run."""
    blocks: list[Block] = []
    skipped: list[FilePart] = []
    for file in files:
        file = resolved(file, provider)
        if accepts is not None and not accepts(file):
            skipped.append(file)
            continue
        try:
            blocks.append(map_file(file))
        except UserError:
            skipped.append(file)
    return blocks, skipped


def result_files_intro(call_id: str, name: str, files: Sequence[FilePart]) -> str:
    """The text before the files of one tool result sent in a user message (OpenAI chat, Mistral)."""
    listed = ", ".join(describe(f) for f in files)
    return f"The tool call {call_id} ({name}) returned these files with its result: {listed}."


RESULT_FILES_INTRO = re.compile(r"\AThe tool call (\S+) \((.*?)\) returned these files with its result: ")
"""Matches `result_files_intro` (the fake providers read it back to rebuild the result's files)."""


def file_label(part: FilePart) -> str:
    """The line before a named user file where the provider option `file_labels` is on (the block itself
    carries no name on OpenAI chat): `[Attached file: dot.png (image/png, 70 bytes)]`."""
    return f"[Attached file: {describe(part)}]"


FILE_LABEL = re.compile(r"\A\[Attached file: (.+) \(([^,()]+)(?:, [\d,]+ bytes)?\)\]\Z")
"""Matches `file_label` (the fake providers read the name back from it)."""


def files_note(files: Sequence[FilePart], provider: str) -> str:
    """The note that stands for tool-result files `provider` cannot take."""
    listed = "; ".join(describe(f) for f in files)
    return (f"[The tool also returned files that {provider} cannot take, so they are not shown here: {listed}. "
            "The application received them.]")
