"""`toolwire serve`'s options for files: their limits (`server.uploads.FileLimits`) and where their bytes are kept
(docs/guides/files.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..exceptions import UserError

_MB = 1024 * 1024
# The defaults, as `FileLimits` has them (a copy: the command line is built without the server extra too).
_MAX_FILE_MB = 20
_MAX_FILES = 10
_MAX_USER_MB = 1024
_MAX_PIXELS = 50_000_000
_TYPES = "image/png,image/jpeg,image/gif,image/webp,application/pdf,text/plain"


def add_file_arguments(p: Any) -> None:
    p.add_argument("--max-file-mb", type=float, default=_MAX_FILE_MB, metavar="MB",
                   help=f"largest file a user may upload; 413 past it (default: {_MAX_FILE_MB})")
    p.add_argument("--max-files-per-message", type=int, default=_MAX_FILES, metavar="N",
                   help=f"most files one message may carry (default: {_MAX_FILES})")
    p.add_argument("--max-user-files-mb", type=float, default=_MAX_USER_MB, metavar="MB",
                   help=f"most megabytes of files one user keeps, all chats together (default: {_MAX_USER_MB})")
    p.add_argument("--max-image-pixels", type=int, default=_MAX_PIXELS, metavar="N",
                   help=f"most pixels (width x height) an uploaded image may have (default: {_MAX_PIXELS:,})")
    p.add_argument("--file-types", default=_TYPES, metavar="TYPES",
                   help=f"media types accepted, comma-separated, judged from the bytes (default: {_TYPES})")
    p.add_argument("--blob-store", choices=("auto", "folder", "sql"), default="auto",
                   help="where files' bytes are kept: a folder, or the database itself (shared by replicas); "
                        "auto: a folder beside a SQLite file, the database otherwise (default: auto)")
    p.add_argument("--blob-folder", default=None, metavar="DIR",
                   help="the folder of --blob-store folder (default: the SQLite file's name + '.blobs')")


def file_config(args: argparse.Namespace) -> dict[str, Any]:
    """`ServerConfig` fields from the options above."""
    from ..server.uploads import FileLimits

    types = frozenset(t.strip().lower() for t in args.file_types.split(",") if t.strip())
    if not types or any("/" not in t for t in types):
        raise UserError("--file-types is a comma-separated list of media types, such as image/png,application/pdf.")
    for name in ("max_file_mb", "max_user_files_mb", "max_files_per_message", "max_image_pixels"):
        if getattr(args, name) <= 0:
            raise UserError(f"--{name.replace('_', '-')} must be more than 0.")
    limits = FileLimits(max_file_bytes=int(args.max_file_mb * _MB), max_files_per_message=args.max_files_per_message,
                        max_user_bytes=int(args.max_user_files_mb * _MB), max_image_pixels=args.max_image_pixels,
                        media_types=types)
    return {"files": limits, "blob_store": args.blob_store,
            "blob_folder": Path(args.blob_folder) if args.blob_folder else None}
