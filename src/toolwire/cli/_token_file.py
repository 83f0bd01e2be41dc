"""The token `toolwire serve` makes for the user `local`, kept beside a SQLite database and reused at each start.

The rule: only a token the server generated is kept. `--token` and `--tokens-file` name the tokens
themselves, so no file is read or written then. The file is `<database file>.token` (`toolwire.db.token`
for the default database), readable by its owner only (mode 0600): a server refuses to start with a token
file that other users can read, as ssh does with a private key. A PostgreSQL database or an in-memory
SQLite one has no file to stand beside: each start then makes a new token (configure tokens there).

Two servers starting at once on one database agree on one token: the file is written under another name
and linked into place, which fails for the second one, who then reads the first one's token.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from ..exceptions import UserError

__all__ = ["kept_token", "token_file_for"]

_SUFFIX = ".token"
_MIN_LENGTH = 16


def token_file_for(database: str) -> Path | None:
    """Where the generated token of the database `database` (`--db`) is kept, or None when it has no file."""
    from ..store._engine import normalize_url

    url = normalize_url(database)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:" \
            or url.database.startswith("file:"):
        return None
    return Path(url.database + _SUFFIX)


def kept_token(path: Path, generate: Callable[[], str]) -> str:
    """The token kept in `path`; a new one from `generate()` is written there (mode 0600) when there is none."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    token = generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(token + "\n")
        try:
            os.link(draft, path)  # atomic, and never replaces a token another server kept a moment ago
        except FileExistsError:
            return _read(path)
    except OSError as exc:
        raise UserError(f"Cannot keep the access token in {str(path)!r} ({exc.strerror or exc}); pass --token or "
                        "--tokens-file, or make its folder writable.") from exc
    finally:
        with contextlib.suppress(OSError):
            draft.unlink()
    return token


def _read(path: Path) -> str:
    try:
        mode = path.stat().st_mode
        text = path.read_text()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UserError(f"Cannot read the kept access token {str(path)!r} ({exc.strerror or exc}).") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UserError(f"The kept access token {str(path)!r} can be read by other users of this machine; make it "
                        f"private (chmod 600 {path}) or delete it for a new token.")
    token = text.strip()
    if len(token) < _MIN_LENGTH or any(c.isspace() for c in token):
        raise UserError(f"The kept access token {str(path)!r} is not a token (one line of at least {_MIN_LENGTH} "
                        "characters); delete the file for a new one.")
    return token
