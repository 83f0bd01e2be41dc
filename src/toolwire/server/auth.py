"""Bearer tokens: who is asking. Tokens are long random strings; the store keeps only their SHA-256.

`toolwire serve` without a configured token makes one at start-up (`generate_token`) for the user
`local` and prints the URL carrying it. A tokens file names users and their tokens, one pair a line:

    # user   token
    alice    3q2-Vf...
    bob      Zk9_0w...
"""

from __future__ import annotations

from starlette.requests import Request

from .._tokens import generate_token as generate_token, read_tokens_file as read_tokens_file
from ..store import Store, User
from .errors import ApiError

__all__ = ["authenticate", "generate_token", "read_tokens_file"]

_BEARER = "bearer "


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
