"""API tokens as `toolwire serve` reads and makes them: a tokens file of `USER TOKEN` lines, a new random token.

Apart from the server package (`server.auth` re-exports both) so that `toolwire serve` can read the tokens
file, and say what is wrong with it, before it imports the server.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from .exceptions import UserError

__all__ = ["generate_token", "read_tokens_file"]


def generate_token() -> str:
    """A new random API token (256 bits)."""
    return secrets.token_urlsafe(32)


def read_tokens_file(path: str | Path) -> dict[str, list[str]]:
    """User name → tokens, from a file of `USER TOKEN` lines (blank lines and `#` comments ignored)."""
    tokens: dict[str, list[str]] = {}
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"Cannot read the tokens file {str(path)!r}: {exc.strerror or exc}.") from exc
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2:
            raise UserError(f"Line {number} of the tokens file {str(path)!r} should be `USER TOKEN` (two words).")
        user, token = fields
        if len(token) < 16:
            raise UserError(f"The token of {user!r} on line {number} of {str(path)!r} is shorter than 16 characters; "
                            "use a long random one (python -c 'import secrets; print(secrets.token_urlsafe(32))').")
        tokens.setdefault(user, []).append(token)
    if not tokens:
        raise UserError(f"The tokens file {str(path)!r} names no user; add lines of the form `USER TOKEN`.")
    return tokens
