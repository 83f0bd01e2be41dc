"""`GET /api/me`: who the caller's token belongs to (the page shows who is signed in), and the prompts the page
suggests in an empty chat (`ServerConfig.suggestions`)."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from .routes import _caller

__all__ = ["me"]


async def me(request: Request) -> Response:
    server, user = await _caller(request)
    return Response(orjson.dumps({"name": user.name, "suggestions": server.suggestions}),
                    media_type="application/json")
