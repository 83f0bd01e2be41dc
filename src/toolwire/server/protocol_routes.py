"""Routes for front ends that speak another protocol: the Vercel AI SDK's UI message stream and AG-UI.

Both are thin: they read the protocol's request, then do exactly what the native routes do (store the
user's message and start a run, or decide approvals and resume) through the same run manager, and
answer by following the chat's one event log through the protocol's encoder (`encode/vercel.py`,
`encode/agui.py`). There is no second agent loop and no second persistence path: a run started here
is stored, resumable and visible through every route alike.

Chat ids. These protocols let the client choose the chat id (`useChat`'s `id`, AG-UI's `threadId`:
letters, digits and `_ - . :`, up to 128 characters). A client's id is the user's own: the server's chat
for it is `scoped_chat_id(user, id)`, created on the user's first message under it, so two users using
the same id each have their own chat, and no answer depends on whether anyone else uses the id. Reads
of an id the user has not used (history, resume) answer an empty chat; approval responses for it and
stopping it answer 404, creating nothing. A chat made through the native API (`chat_...`) works here
too, and the native routes take a client's id for the chat it names (`X-Chat-Id` says the server's id).

History. The chat's history is the server's: of the messages a client sends, only the last one is read
(a new user message, or the assistant message carrying approval responses); the rest of the body is
not trusted or used, which is why a client may send only the last message. Bodies may be up to
`Limits.max_history_bytes` and are read without building the history (`history_bodies`); the last
message may be up to `max_body_bytes`, as any other route's body.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from ..messages import FilePart
from ..store import Chat, ChatIdTaken, Decision, MessageRow, PausedRun, Run, Store, User
from .approvals import paused_view
from .encode.vercel import HEADERS as VERCEL_HEADERS, VercelEncoder, ui_step_parts
from .errors import ApiError
from .eventlog import Cursor, Position
from .history_bodies import HistoryBodyError, read_agui, read_vercel
from .model_choice import choose_model
from .multitask import queued_response
from .protocol_files import agui_files, ui_file_part, vercel_files
from .routes import ServerState, _caller, _json, _title_from, attach, scoped_chat_id
from .runs import MULTITASK_STRATEGIES, RunHandle
from .schemas import parse_body, read_bytes
from .sse import Encoder, EventStreamResponse, follow

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput

    from .encode.agui import AguiEncoder

__all__ = ["agui_run", "ui_history", "vercel_chat", "vercel_history", "vercel_stop", "vercel_stream"]

_CLIENT_CHAT_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_MAX_CHAIN = 1000


def _valid_chat_id(chat_id: str) -> bool:
    return _CLIENT_CHAT_ID.fullmatch(chat_id) is not None and chat_id not in (".", "..")


async def _find_chat(server: ServerState, user: User, chat_id: str) -> Chat | None:
    """The caller's chat for a client's id (or for one of the user's own server ids), if there is one."""
    if not _valid_chat_id(chat_id):
        return None
    return (await server.store.get_chat(user.id, scoped_chat_id(user.id, chat_id))
            or await server.store.get_chat(user.id, chat_id))


async def _chat_for_message(server: ServerState, user: User, chat_id: str) -> Chat:
    """The caller's chat for a client's id, created now if the user has none (see the module docstring)."""
    if not _valid_chat_id(chat_id):
        raise ApiError(422, "invalid_request", "A chat id is 1 to 128 letters, digits, '_', '-', '.' or ':' (and "
                                               "not '.' or '..'); send an id such as the ones useChat generates.")
    chat = await _find_chat(server, user, chat_id)
    if chat is not None:
        return chat
    scoped = scoped_chat_id(user.id, chat_id)
    try:
        with server.manager.making_chat(scoped):
            return await server.store.create_chat(user.id, "", chat_id=scoped)
    except ChatIdTaken:
        chat = await server.store.get_chat(user.id, scoped)  # a concurrent first message of the same user
        if chat is None:
            raise ApiError(409, "chat_exists", "This chat id cannot be used; choose another.") from None
        return chat


async def _paused_chat(server: ServerState, user: User, chat_id: str) -> Chat:
    """The caller's chat that approval responses answer: never created by them (404 when there is none)."""
    chat = await _find_chat(server, user, chat_id)
    if chat is None:
        raise ApiError(404, "chat_not_found", "There is no chat with this id for this API token.")
    return chat


_Body = TypeVar("_Body", bound=BaseModel)


async def _history_body(request: Request, server: ServerState, model: type[_Body],
                        reader: Callable[[bytes], Awaitable[bytes]]) -> _Body:
    """The parts of a protocol body the route reads (see `history_bodies`), as `model`."""
    body = await read_bytes(request, server.limits.max_history_bytes)
    if not body.strip():
        raise ApiError(400, "invalid_json", "The request needs a JSON object as its body.")
    try:
        wanted = await reader(body)
    except HistoryBodyError as exc:
        raise ApiError(400 if exc.code == "invalid_json" else 422, exc.code, exc.message) from None
    del body
    if len(wanted) > server.limits.max_body_bytes:
        raise ApiError(413, "body_too_large", f"The last message is larger than this server accepts "
                                              f"({server.limits.max_body_bytes:,} bytes); send less.")
    return parse_body(wanted, model)


async def _turn(store: Store, chat_id: str, run: Run) -> list[Run]:
    """The run and the runs it resumes, newest first: one turn, whose UI message id is the oldest run's id."""
    chain = [run]
    while chain[-1].resumed_from is not None and len(chain) < _MAX_CHAIN:
        earlier = await store.get_run(chat_id, chain[-1].resumed_from)
        if earlier is None:
            break
        chain.append(earlier)
    return chain


def _stream(server: ServerState, chat: Chat, run: Run, encoder: Encoder,
            headers: dict[str, str] | None = None) -> Response:
    frames = follow(server.log, chat.id, Cursor(run.run_number, 0), encoder, heartbeat=server.heartbeat)
    return EventStreamResponse(frames, media_type=encoder.media_type,
                               headers={"X-Run-Id": run.id, "X-Chat-Id": chat.id, **(headers or {})})


def _invalid(what: str, exc: ValidationError) -> ApiError:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    return ApiError(422, "invalid_request", f"The {what} is not valid at {where!r}: {first['msg']}.")


def _no_nul(*values: str | None) -> None:
    if any(value is not None and "\x00" in value for value in values):  # no database stores NUL in text
        raise ApiError(422, "invalid_request", "Ids, texts and reasons must not contain NUL characters.")


def _check_text(server: ServerState, text: str) -> None:
    _no_nul(text)
    if not text.strip():
        raise ApiError(422, "invalid_request", "The message has no text; send some text.")
    if len(text) > server.limits.max_message_chars:
        raise ApiError(422, "message_too_long", f"The message is longer than {server.limits.max_message_chars:,} "
                                                "characters; shorten it or split it.")


async def _start(server: ServerState, user: User, chat: Chat, text: str, client_message_id: str,
                 strategy: Any, *, files: list[FilePart], parent_id: str | None = None, model: Any = None) -> RunHandle:
    """Store the user's message and start its run (or attach to the run the same message started, or queue it);
    `model`, the id of one of the server's models, becomes the chat's (as the native routes' `model` does)."""
    if strategy is not None and strategy not in MULTITASK_STRATEGIES:
        raise ApiError(422, "invalid_request", f"multitask_strategy is one of {', '.join(MULTITASK_STRATEGIES)}; "
                                               f"{str(strategy)[:40]!r} is not.")
    if model is not None:
        chat = await choose_model(server, user, chat, model)
    handle = await server.manager.send_message(user, chat, text, client_message_id,
                                               title=None if chat.title else _title_from(text), strategy=strategy,
                                               files=files, parent_id=parent_id)
    if handle.queued is None:
        await attach(server.log, chat.id, handle.run, created=handle.created)
    return handle


async def _answer(server: ServerState, chat: Chat, handle: RunHandle, encoder: Encoder,
                  headers: dict[str, str] | None = None) -> Response:
    if handle.queued is None:
        return _stream(server, chat, handle.run, encoder, headers)
    return await queued_response(server.manager, server.log, chat.id, handle, encoder, heartbeat=server.heartbeat,
                                 headers={"X-Chat-Id": chat.id, **(headers or {})}, announce=False)


# -- the Vercel AI SDK's UI message stream ------------------------------------------------------

class _ChatRequest(BaseModel):
    """What `DefaultChatTransport` posts: `messages` (or just the last `message`), `trigger`, `messageId`."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1, max_length=200)
    messages: list[Any] | None = None
    message: Any = None
    trigger: str = "submit-message"
    messageId: str | None = Field(None, min_length=1, max_length=200)
    multitask_strategy: Any = None
    model: Any = None
    """Sent by `useChat` as an extra `body` field (`sendMessage(..., {body: {model}})`): the chat's model."""


class _UIMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1, max_length=200)
    role: str
    parts: list[dict[str, Any]] = Field(default_factory=list)


def _user_text(message: _UIMessage) -> str:
    texts = []
    for part in message.parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n\n".join(texts)


def _approval_responses(message: _UIMessage) -> list[Decision]:
    decisions = []
    for part in message.parts:
        approval = part.get("approval")
        if part.get("state") != "approval-responded" or not isinstance(approval, dict):
            continue
        approval_id, approved, reason = approval.get("id"), approval.get("approved"), approval.get("reason")
        if not isinstance(approval_id, str) or not isinstance(approved, bool) or \
                (reason is not None and not isinstance(reason, str)):
            raise ApiError(422, "invalid_request", "An approval response needs an approval id (a string), `approved` "
                                                   "(true or false) and, optionally, a `reason` (a string).")
        _no_nul(approval_id, reason)
        decisions.append(Decision(approval_id=approval_id[:200], approved=approved,
                                  reason=reason[:2000] if reason else None))
    return decisions


async def vercel_chat(request: Request) -> Response:
    """`POST /api/chat`: a user message starts a run; an assistant message with approval responses resumes one."""
    server, user = await _caller(request, query=None)  # other protocols' clients: lenient
    body = await _history_body(request, server, _ChatRequest, read_vercel)
    raw = body.message if body.message is not None else (body.messages[-1] if body.messages else None)
    if raw is None:
        raise ApiError(422, "invalid_request", "The request has no message: send `messages` (as useChat does) or "
                                               "just the last one as `message`.")
    try:
        last = _UIMessage.model_validate(raw)
    except ValidationError as exc:
        raise _invalid("last message", exc) from None
    # The request is checked whole before anything is stored (a chat id is only taken by a valid message).
    if last.role == "assistant":
        decisions = _approval_responses(last)
        if not decisions:
            raise ApiError(422, "invalid_request", "The last message is the assistant's and answers no approval; "
                                                   "send a user message, or approval responses (addToolApproval"
                                                   "Response) for every pending approval.")
        chat = await _paused_chat(server, user, body.id)
        handle = await server.manager.decide(user, chat, decisions)
        await server.log.expect_run(chat.id, handle.run.run_number, handle.run.id)
        turn = await _turn(server.store, chat.id, handle.run)
        return _stream(server, chat, handle.run, VercelEncoder(message_id=turn[-1].id), VERCEL_HEADERS)
    if last.role != "user":
        raise ApiError(422, "invalid_request", f"The last message has the role {last.role[:20]!r}; send a user "
                                               "message.")
    _no_nul(last.id, body.messageId)
    if body.trigger == "regenerate-message":
        # `regenerate()` drops the answer (and what followed) and sends the history up to the user message it
        # answers: that message is answered again, on a new branch beside the old answer.
        chat = await _paused_chat(server, user, body.id)
        row = await _stored_user_message(server, chat, last.id)
        if body.model is not None:  # answering again on another model
            chat = await choose_model(server, user, chat, body.model)
        handle = await server.manager.regenerate(user, chat, row.id, None)
        await attach(server.log, chat.id, handle.run, created=handle.created)
        return _stream(server, chat, handle.run, VercelEncoder(message_id=handle.run.id), VERCEL_HEADERS)
    text = _user_text(last)
    _check_text(server, text)
    if body.model is not None:
        server.models.check(body.model)  # before the chat is made: a refused request creates nothing
    chat = await _chat_for_message(server, user, body.id)
    files = await vercel_files(server, user, chat.id, last.parts)
    parent_id: str | None = None
    client_message_id = last.id
    if body.messageId is not None:
        # `sendMessage({text, messageId})` edits an earlier user message: the new text goes under that message's
        # parent (a new branch), under an id of its own (the client keeps the edited message's id).
        edited = await _stored_user_message(server, chat, body.messageId)
        parent_id = edited.parent_id or ""
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        client_message_id = f"{body.messageId[:150]}~edit~{digest}"
    handle = await _start(server, user, chat, text, client_message_id, body.multitask_strategy, files=files,
                          parent_id=parent_id, model=body.model)
    run_id = handle.queued.id if handle.queued is not None else handle.run.id
    return await _answer(server, chat, handle, VercelEncoder(message_id=run_id), VERCEL_HEADERS)


async def _stored_user_message(server: ServerState, chat: Chat, message_id: str) -> MessageRow:
    """The user message of the chat's active branch that the client calls `message_id` (its own id for it, or the
    server's)."""
    path = await server.store.chat_path(chat.id)
    for row in reversed(path.rows):
        if row.kind == "user" and message_id in (row.client_message_id, row.id):
            return row
    raise ApiError(404, "message_not_found", f"This chat has no user message {message_id[:80]!r} on its shown "
                                             "branch; reload the chat's messages (GET /api/chat/{id}/messages).")


async def vercel_stream(request: Request) -> Response:
    """`GET /api/chat/{id}/stream`: the active run's turn from its `start`, then live; 204 when nothing runs."""
    server, user = await _caller(request, query=None)  # other protocols' clients: lenient
    chat = await _find_chat(server, user, request.path_params["chat_id"])
    active = await server.store.active_run(chat.id) if chat is not None else None
    if chat is None or active is None:
        return Response(status_code=204, headers={"cache-control": "no-cache"})
    await server.log.expect_run(chat.id, active.run_number, active.id)
    if await server.log.position(chat.id, Cursor(active.run_number, 0)) is Position.EXPIRED:
        return Response(status_code=204, headers={"cache-control": "no-cache"})
    turn = await _turn(server.store, chat.id, active)
    history: list[tuple[Any, Any]] = []
    if len(turn) > 1:
        earlier = {run.id for run in turn[1:]}
        for row in (await server.store.chat_path(chat.id)).rows:
            if row.run_id in earlier and row.kind in ("assistant", "tools_aggregate"):
                messages = orjson.loads(row.message_json)
                history.append((messages[0], messages[1]["parts"] if len(messages) > 1 else []))
    encoder = VercelEncoder(message_id=turn[-1].id, rebuild=True, history=history)
    return _stream(server, chat, active, encoder, VERCEL_HEADERS)


async def vercel_stop(request: Request) -> Response:
    """`POST /api/chat/{id}/stop`: cancel the chat's running run (202), or 204 when nothing runs."""
    server, user = await _caller(request, query=None)  # other protocols' clients: lenient
    chat = await _find_chat(server, user, request.path_params["chat_id"])
    if chat is None:
        raise ApiError(404, "chat_not_found", "There is no chat with this id for this API token.")
    active = await server.store.active_run(chat.id)
    if active is None:
        if await server.store.paused_run(chat.id) is not None:
            raise ApiError(409, "run_paused", "This chat's run is paused for approval, not running; deny its tool "
                                              "calls to end it.")
        return Response(status_code=204)
    run = await server.manager.cancel(chat.id, active.id)
    return _json({"run_id": run.id, "status": "cancelling"}, 202)


async def vercel_history(request: Request) -> Response:
    """`GET /api/chat/{id}/messages`: the stored chat as `UIMessage`s (`useChat`'s initial `messages`)."""
    server, user = await _caller(request, query=None)  # other protocols' clients: lenient
    chat = await _find_chat(server, user, request.path_params["chat_id"])
    if chat is None:
        return _json({"messages": []})
    rows = (await server.store.chat_path(chat.id)).rows  # the branch the chat shows
    paused = await server.store.paused_run(chat.id)
    return _json({"messages": ui_history(rows, paused, await _turn_ids(server.store, chat.id, rows, paused))})


async def _turn_ids(store: Store, chat_id: str, rows: list[MessageRow], paused: PausedRun | None) -> dict[str, str]:
    """The UI message id of each answer's turn, by the id of a run that wrote it: the oldest run of its chain
    (`_turn`), as the stream named it. Only runs that no user message started are looked up (regenerated
    answers, resumed runs): a run a user message started begins its own turn."""
    started = {row.run_id for row in rows if row.kind == "user"}
    writers = {row.run_id for row in rows if row.kind != "user" and row.run_id is not None}
    if paused is not None:
        writers.add(paused.run.id)
    ids: dict[str, str] = {}
    for run_id in writers - started:
        run = paused.run if paused is not None and paused.run.id == run_id else await store.get_run(chat_id, run_id)
        if run is not None:
            ids[run_id] = (await _turn(store, chat_id, run))[-1].id
    return ids


def ui_history(rows: list[MessageRow], paused: PausedRun | None,
               turn_ids: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Stored rows as UI messages: each user message, then one assistant message per turn (its steps in order).

    Ids are the ones the stream uses: a user message keeps the id the client gave it, and a turn's
    message is the id of the run that started it: the run its user message started, or, for an answer
    regenerated under that message, the regenerating run (`turn_ids` maps the id of a run that wrote an
    answer to its turn's, where they differ). A round paused for approval is the turn's last step, its
    waiting calls in the `approval-requested` state.
    """
    turn_ids = turn_ids or {}
    out: list[dict[str, Any]] = []
    turn: dict[str, Any] | None = None
    turn_id: str | None = None
    for row in rows:
        messages = orjson.loads(row.message_json)
        if row.kind == "user":
            parts = [{"type": "text", "text": p["text"]} if p.get("type") == "text" else ui_file_part(p)
                     for p in messages[0]["parts"] if p.get("type") in ("text", "file")]
            out.append({"id": row.client_message_id or row.id, "role": "user", "parts": parts})
            turn, turn_id = None, row.run_id or row.id
        elif row.kind in ("assistant", "tools_aggregate"):
            if turn is None:
                writer = row.run_id or ""
                turn = {"id": turn_ids.get(writer) or turn_id or row.id, "role": "assistant", "parts": []}
                out.append(turn)
            turn["parts"] += ui_step_parts(messages[0], messages[1]["parts"] if len(messages) > 1 else [], key=row.id)
    if paused is not None:
        view = paused_view(paused)
        if turn is None:
            turn = {"id": turn_ids.get(paused.run.id) or turn_id or paused.run.id, "role": "assistant", "parts": []}
            out.append(turn)
        approvals = {a["call"]["id"]: a["approval_id"] for a in view["approvals"]}
        turn["parts"] += ui_step_parts(view["message"], view["results"], key=paused.run.id, approvals=approvals)
    return out


# -- AG-UI -----------------------------------------------------------------------------------------

def _import_agui() -> tuple[type[RunAgentInput], type[AguiEncoder]]:
    from ag_ui.core import RunAgentInput

    from .encode.agui import AguiEncoder

    return RunAgentInput, AguiEncoder


_agui: tuple[type[RunAgentInput], type[AguiEncoder]] | None = None


async def _agui_modules() -> tuple[type[RunAgentInput], type[AguiEncoder]]:
    """AG-UI's request model and our encoder, imported on the first AG-UI request rather than at start-up:
    `ag_ui.core` builds some hundred pydantic models when imported (a quarter of a second of a server's start),
    which a server whose clients never speak AG-UI need not pay. The import runs in a worker thread, so that it
    does not hold up the other requests' streams."""
    global _agui
    if _agui is None:
        _agui = await anyio.to_thread.run_sync(_import_agui)
    return _agui


def _resume_decisions(agent_input: RunAgentInput) -> list[Decision]:
    decisions = []
    for entry in agent_input.resume or []:
        approved: Any = False
        reason: Any = None
        if entry.status == "resolved":
            payload = entry.payload
            approved = payload.get("approved") if isinstance(payload, dict) else payload
            reason = payload.get("reason") if isinstance(payload, dict) else None
            if not isinstance(approved, bool) or (reason is not None and not isinstance(reason, str)):
                raise ApiError(422, "invalid_request", "A resolved approval's payload is {\"approved\": true|false, "
                                                       "\"reason\"?: string} (or just true or false).")
        else:
            reason = "The person dismissed this approval."
        _no_nul(entry.interrupt_id, reason)
        decisions.append(Decision(approval_id=entry.interrupt_id[:200], approved=approved,
                                  reason=reason[:2000] if reason else None))
    return decisions


def _agui_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for part in content or []:
        kind = getattr(part, "type", None)
        if kind in ("image", "document", "binary"):
            continue  # stored as files (`protocol_files.agui_files`)
        if kind != "text":
            raise ApiError(422, "invalid_request", "This server takes text, images and documents; send the message "
                                                   "without audio or video.")
        texts.append(part.text)
    return "\n\n".join(texts)


async def agui_run(request: Request) -> Response:
    """`POST /api/agui`: an AG-UI `RunAgentInput`; answers the run as AG-UI events."""
    server, user = await _caller(request, query=None)  # other protocols' clients: lenient
    run_agent_input, encoder = await _agui_modules()
    agent_input = await _history_body(request, server, run_agent_input, read_agui)
    if agent_input.resume:
        decisions = _resume_decisions(agent_input)
        chat = await _paused_chat(server, user, agent_input.thread_id)
        run = (await server.manager.decide(user, chat, decisions)).run
        await server.log.expect_run(chat.id, run.run_number, run.id)
    else:
        last = agent_input.messages[-1] if agent_input.messages else None
        if last is None or last.role != "user":
            raise ApiError(422, "invalid_request", "The last message must be the user's (or send `resume` entries "
                                                   "answering the interrupts of the paused run).")
        text = _agui_text(getattr(last, "content", ""))
        _check_text(server, text)
        if not 1 <= len(last.id) <= 200:
            raise ApiError(422, "invalid_request", "A message id is 1 to 200 characters.")
        _no_nul(last.id)
        props = agent_input.forwarded_props if isinstance(agent_input.forwarded_props, dict) else {}
        if props.get("model") is not None:
            server.models.check(props["model"])  # before the chat is made: a refused request creates nothing
        chat = await _chat_for_message(server, user, agent_input.thread_id)
        files = await agui_files(server, user, chat.id, getattr(last, "content", ""))
        previous = (agent_input.model_extra or {}).get("previousUserMessageId")
        parent_id = await _agui_fork(server, chat, previous if isinstance(previous, str) else None)
        handle = await _start(server, user, chat, text, last.id, props.get("multitask_strategy"), files=files,
                              parent_id=parent_id, model=props.get("model"))
        return await _answer(server, chat, handle,
                             encoder(thread_id=agent_input.thread_id, run_id=agent_input.run_id))
    return _stream(server, chat, run, encoder(thread_id=agent_input.thread_id, run_id=agent_input.run_id))


async def _agui_fork(server: ServerState, chat: Chat, previous_user_id: str | None) -> str | None:
    """Where a new AG-UI message goes: after the turn of the client's previous user message when that turn is an
    earlier one of the chat's shown branch (the client went back: a fork there); else `None`, the active leaf.

    Only the turn is taken from the client (by the id of its user message, which the server stored): what the
    turn holds, and everything before it, is the stored history, as for every run."""
    if previous_user_id is None:
        return None
    rows = (await server.store.chat_path(chat.id)).rows
    users = [index for index, row in enumerate(rows) if row.kind == "user"]
    found = next((index for index in users if previous_user_id in (rows[index].client_message_id, rows[index].id)),
                 None)
    if found is None or found == users[-1]:
        return None  # not on the stored branch (nothing to fork from), or its last turn (no fork)
    following = next(index for index in users if index > found)
    return rows[following - 1].id
