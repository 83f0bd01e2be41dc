"""JSON errors: `{"error": {"code": "snake_case", "message": "A full sentence saying what to do."}}`.

Handlers raise `ApiError`; store refusals are mapped to their status here; a database that is away
(`StoreUnavailable`, raised by the store for a refused connection, a restart, a timeout or a disk that
refuses writes) answers 503 `store_unavailable` with `Retry-After`; anything unexpected is
logged with its traceback and answered 500 with a sentence, never a stack trace. Bad input never
reaches that last branch: bodies, parameters, cursors and ids are all checked first (the property
tests over the OpenAPI document look for any 5xx).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..store import StoreError, StoreUnavailable

__all__ = ["ApiError", "error_response", "handle_api_error", "handle_http_exception", "handle_store_unavailable",
           "handle_unexpected", "store_error"]

STORE_RETRY_AFTER = "2"
"""Seconds a client is told to wait before trying again while the database is away."""

logger = logging.getLogger("toolwire.server")

_STORE_STATUS = {
    "chat_not_found": 404,
    "run_active": 409,
    "run_paused": 409,
    "client_message_id_reused": 409,
    "approval_not_found": 404,
    "approval_decided": 409,
    "approvals_incomplete": 400,
    "not_paused": 409,
    "message_not_found": 404,
    "invalid_parent": 422,
}


class ApiError(Exception):
    """An error answer: HTTP status, a snake_case code and a full-sentence message."""

    def __init__(self, status: int, code: str, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


def store_error(exc: StoreError) -> ApiError:
    return ApiError(_STORE_STATUS.get(exc.code, 409), exc.code, str(exc))


def error_response(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> Response:
    body = orjson.dumps({"error": {"code": code, "message": message}})
    return Response(body, status_code=status, media_type="application/json", headers=dict(headers or {}))


async def handle_api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.headers)


_HTTP_CODES = {404: ("not_found", "There is nothing at this address; see /openapi.json for the API."),
               405: ("method_not_allowed", "This address does not accept that method; see /openapi.json.")}


async def handle_http_exception(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code, message = _HTTP_CODES.get(exc.status_code, ("http_error", str(exc.detail)))
    return error_response(exc.status_code, code, message, exc.headers)


def _overloaded(exc: Exception) -> bool:
    """The database pool had no free connection in time, or Redis did not answer: the server is overloaded
    or a service is away for a moment, which a retry (here or on another replica) may not meet."""
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    if isinstance(exc, PoolTimeout):
        return True
    kind = type(exc)
    return kind.__module__.startswith("redis.") and kind.__name__ in ("ConnectionError", "TimeoutError")


async def handle_store_unavailable(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StoreUnavailable)
    logger.warning("Answered %s %s with 503 store_unavailable: %s", request.method, request.url.path, exc)
    return error_response(503, "store_unavailable", "The server's database cannot be reached right now (or refuses "
                                                    "to write); nothing was changed. Try again in a moment.",
                          {"Retry-After": STORE_RETRY_AFTER})


async def handle_unexpected(request: Request, exc: Exception) -> Response:
    if isinstance(exc, StoreUnavailable):  # raised outside the routes (in a middleware): the same answer
        return await handle_store_unavailable(request, exc)
    if _overloaded(exc):
        logger.warning("Answered %s %s with 503: %s", request.method, request.url.path, exc)
        return error_response(503, "unavailable", "The server is too busy to answer this request right now (or its "
                                                  "database or Redis did not answer in time); try again in a moment.",
                              {"Retry-After": "2"})
    logger.exception("Unexpected error while answering %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "The server failed while answering this request; the failure was "
                                                 "logged. Try again, and report it if it persists.")
