"""Bearer tokens: who is asking. Tokens are long random strings; the store keeps only their SHA-256.

`toolwire serve` without a configured token makes one at start-up (`generate_token`) for the user
`local` and prints the URL carrying it. A tokens file names users and their tokens, one pair a line:

    # user   token
    alice    3q2-Vf...
    bob      Zk9_0w...
"""

from __future__ import annotations

import secrets
from pathlib import Path

from starlette.requests import Request

from ..exceptions import UserError
from ..store import Store, User
from .errors import ApiError

__all__ = ["authenticate", "generate_token", "read_tokens_file"]

_BEARER = "bearer "


def generate_token() -> str:
    """A new random API token (256 bits)."""
    return secrets.token_urlsafe(32)


async def authenticate(request: Request, store: Store) -> User:
    """The user whose valid token the request carries, or a 401 `ApiError`."""
    header = request.headers.get("authorization", "")
    if not header:
        raise ApiError(401, "unauthorized", "This API needs an API token: send `Authorization: Bearer <token>`.",
                       headers={"WWW-Authenticate": "Bearer"})
    if header[: len(_BEARER)].lower() != _BEARER or not header[len(_BEARER):].strip():
        raise ApiError(401, "unauthorized", "The Authorization header must be `Bearer <token>`.",
                       headers={"WWW-Authenticate": "Bearer"})
    token = header[len(_BEARER):].strip()
    user = await store.user_for_token(token) if len(token) <= 512 else None
    if user is None:
        raise ApiError(401, "unauthorized", "This API token is not valid (unknown or revoked); use a current token.",
                       headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return user


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
