"""The routes of branching chats: regenerate an answer, and switch the branch a chat shows.

A chat is a tree of rows (`store/_tree.py`). Sending a message with `parent_id` (an edit) and reading a branch
(`GET /api/chats/{id}/messages?leaf=`) are the message routes' own (`routes.py`); this module adds

- `POST /api/chats/{id}/messages/{message_id}/regenerate`: a new run answering the user message of that row's
  turn again (regenerate, or retry after a failed run); its answer is a sibling of the earlier one, the user
  message is not stored again. Followed like a sent message; idempotent by `client_message_id`;
- `PUT /api/chats/{id}/leaf`: the branch through `message_id` (down to its newest leaf) becomes the one the chat
  shows and answers next; answers that branch, so a client switches in one round trip.

Both under the same rules as every chat route: another user's chat (or row) is 404, writes count against the
user's write rate, a run start against the run rate.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..store import StoreError
from .errors import ApiError, store_error
from .eventlog import Cursor
from .routes import _MAX_ID, _caller, _chat, _follow_response, attach, path_response
from .schemas import LeafIn, RegenerateIn, parse_body, read_body, read_bytes

__all__ = ["regenerate", "switch_leaf"]


def _message_id(request: Request) -> str:
    message_id = request.path_params["message_id"]
    if not message_id or len(message_id) > _MAX_ID or "\x00" in message_id:
        raise ApiError(404, "message_not_found", "This chat has no such message; use the id of one of its rows.")
    return str(message_id)


async def regenerate(request: Request) -> Response:
    server, user = await _caller(request)
    chat = await _chat(request, server, user)
    message_id = _message_id(request)
    raw = await read_bytes(request, server.limits.max_body_bytes)
    body = parse_body(raw, RegenerateIn) if raw.strip() else RegenerateIn()  # the body is optional
    handle = await server.manager.regenerate(user, chat, message_id, body.client_message_id)
    await attach(server.log, chat.id, handle.run, created=handle.created)
    return _follow_response(server, chat, Cursor(handle.run.run_number, 0), run_id=handle.run.id,
                            cancel_on_disconnect=body.on_disconnect == "cancel")


async def switch_leaf(request: Request) -> Response:
    server, user = await _caller(request)
    chat = await _chat(request, server, user)
    body = await read_body(request, LeafIn, server.limits.max_body_bytes)
    try:
        path = await server.store.switch_leaf(chat.id, body.message_id)
    except StoreError as exc:
        raise store_error(exc) from None
    return await path_response(server, chat, path)
