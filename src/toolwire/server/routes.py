"""The HTTP API: one handler per route (the contract is docs/guides/server.md and `/openapi.json`).

Every `/api` handler first authenticates the caller and then looks the chat up *as that user's*: a chat
of another user is exactly as absent as one that never existed (404 on every route). Handlers never
run agent code: they store, ask the run manager, and follow the chat's event log.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response

from ..store import Chat, ChatPath, Decision, Run, RunSummary, Store, StoreError, User, iso, new_chat, new_id
from ..store.blobs import Files
from .approvals import paused_view
from .auth import authenticate
from .encode import NativeEncoder
from .errors import ApiError, store_error
from .eventlog import Cursor, EventLog, Position
from .limits import Limits, UserRequests
from .model_choice import ServerModels, choose_model
from .multitask import queued_response
from .runs import RunManager, renumbered_start
from .schemas import ChatCreate, ChatUpdate, DecisionsIn, MessageIn, read_body
from .sse import EventStreamResponse, follow
from .uploads import FileLimits

__all__ = ["ServerState", "path_response", "scoped_chat_id"]

_MAX_ID = 200


@dataclass(slots=True, kw_only=True)
class ServerState:
    """What the handlers share (`app.state.toolwire`)."""

    store: Store
    manager: RunManager
    log: EventLog
    limits: Limits
    heartbeat: float
    openapi: bytes
    web_dir: Path | None
    user_requests: UserRequests = field(default_factory=lambda: UserRequests(Limits().max_user_requests))
    suggestions: tuple[str, ...] = ()
    files: Files | None = None
    """Uploaded and tool-made files (`files.py`); `None` when the store is not an `SQLStore`."""
    file_limits: FileLimits = field(default_factory=FileLimits)
    models: ServerModels = field(default_factory=ServerModels)
    """The models chats choose from (`model_choice.py`); none: no choice."""
    startup_error: Exception | None = None
    """Why the app's start-up failed (read by `toolwire serve` to say it in one sentence)."""


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json", headers=headers)


def _server(request: Request) -> ServerState:
    state: ServerState = request.app.state.toolwire
    return state


async def _caller(request: Request, *, query: tuple[str, ...] | None = ()) -> tuple[ServerState, User]:
    """The server and the authenticated user; refuses query parameters other than `query` (None: any)."""
    server = _server(request)
    user = await authenticate(request, server.store)
    if query is not None:
        unknown = sorted(set(request.query_params) - set(query))
        if unknown:
            # A misspelt parameter silently ignored would answer another question than the one asked.
            takes = f"takes only {', '.join(query)}" if query else "takes no query parameters"
            raise ApiError(400, "unknown_parameter", f"Unknown query parameter {unknown[0]!r}: this endpoint "
                                                     f"{takes}.")
    # Quotas before anything is read or stored: a user's requests at once, then the user's writes per minute.
    if not server.user_requests.enter(user.id, request.scope):
        raise ApiError(429, "too_many_requests", f"This user already has {server.user_requests.limit} requests "
                                                 "(streams included) open on this server; close some, or try again "
                                                 "in a moment.", headers={"Retry-After": "1"})
    if request.method not in ("GET", "HEAD"):
        wait = await server.manager.limiter.acquire(user.id, "writes")
        if wait is not None:
            seconds = max(1, int(wait + 0.999))
            raise ApiError(429, "rate_limited", f"Too many writes (chats created, renamed or deleted, messages, "
                                                f"decisions, cancellations) for this user right now; try again in "
                                                f"{seconds} s.", headers={"Retry-After": str(seconds)})
    return server, user


def scoped_chat_id(user_id: str, client_id: str) -> str:
    """The server's id of the chat a client names `client_id` (the protocol routes let clients choose ids).

    Derived from the user and the client's id, so that each user has their own chat under any client id:
    two users using the same id never meet, and no id can be taken from another user or tell whether
    another user uses it. Every lookup is by (user, id) anyway; the hash only keeps ids apart.
    """
    digest = hashlib.sha256(f"{user_id}\x00{client_id}".encode()).digest()
    return "chat_" + base64.urlsafe_b64encode(digest[:18]).decode()


async def _chat(request: Request, server: ServerState, user: User) -> Chat:
    chat_id = request.path_params["chat_id"]
    chat = None
    if len(chat_id) <= _MAX_ID and "\x00" not in chat_id:
        chat = await server.store.get_chat(user.id, chat_id)
        if chat is None:  # a chat made through the protocol routes, named by the client's id
            chat = await server.store.get_chat(user.id, scoped_chat_id(user.id, chat_id))
    if chat is None:
        raise ApiError(404, "chat_not_found", "There is no chat with this id for this API token.")
    return chat


def _chat_json(chat: Chat) -> dict[str, Any]:
    return {"id": chat.id, "title": chat.title, "created_at": iso(chat.created_at), "updated_at": iso(chat.updated_at),
            "model": chat.model}


def _title(value: str, limits: Limits) -> str:
    title = value.strip()
    if len(title) > limits.max_title_chars:
        raise ApiError(422, "invalid_request", f"The title is longer than {limits.max_title_chars} characters; "
                                               "shorten it.")
    return title


def _title_from(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 60 else line[:59].rstrip() + "…"


# -- chats -----------------------------------------------------------------------------------

async def create_chat(request: Request) -> Response:
    server, user = await _caller(request)
    body = await read_body(request, ChatCreate, server.limits.max_body_bytes)
    model = server.models.check(body.model) if body.model is not None else None
    first = body.message
    if first is None:
        chat_id = new_id("chat")
        with server.manager.making_chat(chat_id):
            chat = await server.store.create_chat(user.id, _title(body.title or "", server.limits), chat_id=chat_id,
                                                  model=model)
        return _json(_chat_json(chat), 201)
    # The chat and its first message in one request: a page's first message no longer waits for a request that
    # only creates the chat, and the server handles one request where it handled two (about 1 ms of CPU each).
    _check_text(server, first)
    if first.parent_id not in (None, "root"):
        raise ApiError(422, "invalid_request", "A new chat's first message goes at its root; leave out `parent_id` "
                                               "(or send \"root\").")
    if first.files:
        raise ApiError(422, "invalid_request", "A new chat has no files yet: create the chat, upload the files to "
                                               "it, then send the message that carries them.")
    if first.model is not None:
        model = server.models.check(first.model)
    # The chat is stored with its first message, in the run start's transaction: one write where there were two,
    # and a first message refused (a rate limit, a server shutting down) leaves no empty chat behind.
    chat = new_chat(user.id, _title(body.title or "", server.limits), model=model)
    # (Its model is the chat's already.)
    return await _send(server, user, chat, first.model_copy(update={"model": None}), headers={"X-Chat-Id": chat.id},
                       new=True)


async def list_chats(request: Request) -> Response:
    server, user = await _caller(request)
    return _json({"chats": [_chat_json(c) for c in await server.store.list_chats(user.id)]})


_SEARCH_PAGE = 20
_MAX_SEARCH_PAGE = 50
_MAX_SEARCH_OFFSET = 1_000  # fifty pages: further than anyone reads, and the offset bounds the database's work
_MAX_QUERY_CHARS = 200


async def search_chats(request: Request) -> Response:
    """The caller's chats whose title or messages have every word of `q`, newest first, a page at a time."""
    server, user = await _caller(request, query=("q", "limit", "cursor"))
    query = request.query_params.get("q", "")
    if not query.strip():
        raise ApiError(400, "invalid_query", "Say what to search for in the `q` query parameter.")
    if len(query) > _MAX_QUERY_CHARS:
        raise ApiError(400, "invalid_query", f"The search is longer than {_MAX_QUERY_CHARS} characters; shorten it.")
    limit = _page_number(request, "limit", _SEARCH_PAGE, 1, _MAX_SEARCH_PAGE)
    # The cursor is the number of results already returned: opaque to clients, but plain to read here.
    offset = _page_number(request, "cursor", 0, 0, _MAX_SEARCH_OFFSET)
    # One more than asked, to know whether another page follows without counting every match.
    hits = await server.store.search_chats(user.id, query, limit=limit + 1, offset=offset)
    more = len(hits) > limit and offset + limit < _MAX_SEARCH_OFFSET
    return _json({"results": [{"chat": _chat_json(hit.chat), "message_id": hit.message_id,
                               "sequence_number": hit.sequence_number, "snippet": hit.snippet}
                              for hit in hits[:limit]],
                  "next_cursor": str(offset + limit) if more else None})


def _page_number(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 6 and low <= int(raw) <= high):
        raise ApiError(400, "invalid_query", f"`{name}` must be a whole number from {low} to {high}; "
                                             f"{raw[:20]!r} is not.")
    return int(raw)


async def get_chat(request: Request) -> Response:
    server, user = await _caller(request)
    chat = await _chat(request, server, user)
    active = await server.store.active_run(chat.id)
    paused = await server.store.paused_run(chat.id)
    active_run = None
    if active is not None:
        last = await server.log.last_cursor(chat.id, active.run_number)
        active_run = {"run_id": active.id, "status": "running", "run_number": active.run_number,
                      "last_event_id": str(last) if last is not None else None, "model": active.model}
    return _json({**_chat_json(chat), "active_run": active_run,
                  "paused": paused_view(paused) if paused is not None else None})


async def update_chat(request: Request) -> Response:
    server, user = await _caller(request)
    chat = await _chat(request, server, user)
    body = await read_body(request, ChatUpdate, server.limits.max_body_bytes)
    # `"model": null` goes back to the server's default; no `model` leaves the choice as it is.
    new_model = "model" in body.model_fields_set
    if new_model and body.model is not None:
        server.models.check(body.model)  # before the title is stored: a refused request changes nothing
    if body.title is None and not new_model:
        raise ApiError(422, "invalid_request", "Send a new `title`, a `model`, or both.")
    if body.title is not None:
        renamed = await server.store.rename_chat(user.id, chat.id, _title(body.title, server.limits))
        if renamed is None:  # deleted a moment ago
            raise ApiError(404, "chat_not_found", "There is no chat with this id for this API token.")
        chat = renamed
    if new_model:
        chat = await choose_model(server, user, chat, body.model)
    return _json(_chat_json(chat))


async def delete_chat(request: Request) -> Response:
    server, user = await _caller(request)
    chat = await _chat(request, server, user)
    contents = await server.files.chat_contents(chat.id) if server.files is not None else []
    await server.manager.delete_chat(user, chat)
    if server.files is not None:  # after a crash right here, the sweep deletes them (store/blobs.py)
        await server.files.release(contents)
    return Response(status_code=204)


# -- messages and runs ------------------------------------------------------------------------

async def list_messages(request: Request) -> Response:
    server, user = await _caller(request, query=("after", "leaf"))
    chat = await _chat(request, server, user)
    after_text = request.query_params.get("after", "0").strip()
    if not after_text.isascii() or not after_text.isdigit():
        raise ApiError(400, "invalid_request", "`after` must be a sequence number (a whole number, 0 or more).")
    # Beyond any real sequence number there is nothing: clamped so that every database takes it.
    after = min(int(after_text), 2**31 - 1)
    leaf = request.query_params.get("leaf")
    if leaf is not None and (not leaf or len(leaf) > _MAX_ID or "\x00" in leaf):
        raise ApiError(404, "message_not_found", "This chat has no such message; use the id of one of its rows.")
    try:
        path = await server.store.chat_path(chat.id, leaf)
    except StoreError as exc:
        raise store_error(exc) from None
    return await path_response(server, chat, path, after=after)


async def path_response(server: ServerState, chat: Chat, path: ChatPath, *, after: int = 0) -> Response:
    """One branch of the chat (`ChatPath`): its rows after `after`, each with its parent and siblings, and how
    their runs ended."""
    rows = [row for row in path.rows if row.sequence_number > after]
    run_ids = {row.run_id for row in rows}
    summaries = [s for s in await server.store.run_summaries(chat.id, after=after) if s.run.id in run_ids] \
        if rows else []
    body = (b'{"leaf_id":' + orjson.dumps(path.leaf_id) + b',"messages":['
            + b",".join(_row_json(row, path.siblings.get(row.id)) for row in rows) + b'],"runs":'
            + orjson.dumps([_summary_json(s) for s in summaries]) + b"}")
    return Response(body, media_type="application/json")


def _summary_json(summary: RunSummary) -> dict[str, Any]:
    """How a run of the returned rows ended (what `run_finished` said), and the decisions it resumed with."""
    run = summary.run
    duration = (run.finished_at - run.created_at).total_seconds() if run.finished_at is not None else None
    return {"run_id": run.id, "status": run.status, "model": run.model, "usage": run.usage, "error": run.error,
            "steps": run.steps, "duration": round(duration, 3) if duration is not None else None,
            "decisions": [{"call_id": a.call.id, "approved": a.status == "approved", "reason": a.reason}
                          for a in summary.decisions]}


def _row_json(row: Any, siblings: list[str] | None = None) -> bytes:
    # The stored JSON goes out as it is: no parsing, no re-encoding.
    return orjson.dumps({"id": row.id, "sequence_number": row.sequence_number, "kind": row.kind, "role": row.role,
                         "run_id": row.run_id, "created_at": iso(row.created_at),
                         "messages": orjson.Fragment(row.message_json), "parent_id": row.parent_id,
                         "sibling_ids": siblings or [row.id]})


def _follow_response(server: ServerState, chat: Chat, after: Cursor, *, run_id: str | None = None,
                     cancel_on_disconnect: bool = False, headers: dict[str, str] | None = None) -> Response:
    headers = {"Location": f"/api/chats/{chat.id}/stream", **(headers or {})}
    if run_id is not None:
        headers["X-Run-Id"] = run_id
    on_disconnect = None
    if cancel_on_disconnect and run_id is not None:
        async def cancel() -> None:
            await server.manager.signals.cancel(run_id, "cancel")

        on_disconnect = cancel
    encoder = NativeEncoder()
    frames = follow(server.log, chat.id, after, encoder, heartbeat=server.heartbeat)
    return EventStreamResponse(frames, media_type=encoder.media_type, headers=headers, on_disconnect=on_disconnect)


async def post_message(request: Request) -> Response:
    server, user = await _caller(request)
    chat = await _chat(request, server, user)
    body = await read_body(request, MessageIn, server.limits.max_body_bytes)
    _check_text(server, body)
    return await _send(server, user, chat, body)


def _check_text(server: ServerState, body: MessageIn) -> None:
    if not body.text.strip():
        raise ApiError(422, "invalid_request", "The message text is empty; send some text.")
    if len(body.text) > server.limits.max_message_chars:
        raise ApiError(422, "message_too_long", f"The message is longer than {server.limits.max_message_chars:,} "
                                                "characters; shorten it or split it.")


async def _send(server: ServerState, user: User, chat: Chat, body: MessageIn, *,
                headers: dict[str, str] | None = None, new: bool = False) -> Response:
    """Send `body` to `chat` and answer with its run's events (or its place in the queue). `new`: the chat is not
    stored yet, and is stored with this message (which then has no model of its own and no files)."""
    from .files import user_files  # files.py builds on this module's helpers

    if body.model is not None:
        chat = await choose_model(server, user, chat, body.model)
    attached = await user_files(server, user.id, chat.id, body.files)
    # A chat without a title is named after its first message in the transaction that starts the run.
    handle = await server.manager.send_message(user, chat, body.text, body.client_message_id,
                                               title=None if chat.title else _title_from(body.text), files=attached,
                                               parent_id=None if body.parent_id is None else
                                               "" if body.parent_id == "root" else body.parent_id,
                                               strategy=body.multitask_strategy, new=new)
    if handle.queued is not None:  # it waits for its turn (double texting)
        return await queued_response(server.manager, server.log, chat.id, handle, NativeEncoder(),
                                     heartbeat=server.heartbeat,
                                     headers={"Location": f"/api/chats/{chat.id}/stream", **(headers or {})},
                                     announce=True, cancel_on_disconnect=body.on_disconnect == "cancel")
    first = Cursor(handle.run.run_number, 0)
    await attach(server.log, chat.id, handle.run, created=handle.created)
    return _follow_response(server, chat, first, run_id=handle.run.id,
                            cancel_on_disconnect=body.on_disconnect == "cancel", headers=headers)


_ATTACH_WAIT = 10.0
"""Seconds a request waits for the events of a run that ended a moment ago to reach the log (its end is stored
before it is published)."""
_LIVE_ATTACH_WAIT = 30.0
"""Seconds a request waits for a live run's events to reach the log: a run started by the same message on
another replica a moment ago, or a log that Redis lost and the run's replica is writing again. The run is
live, so its events are coming: answering 410 ("no longer kept") early would be false. On a loaded two-core
machine, 180 copies of one message sent to two replicas at once had one copy wait over 10 s."""


async def attach(log: EventLog, chat_id: str, run: Run, *, created: bool) -> None:
    """Prepare to follow `run` from its start: tells the log which run the database knows by that number (so
    that a copy of a deleted chat's log under a reused id is never served, `EventLog.expect_run`); for a run
    this request did not start, makes sure the log holds it, waiting while it is live or ended a moment ago
    (`_LIVE_ATTACH_WAIT`, `_ATTACH_WAIT`), else 410."""
    await log.expect_run(chat_id, run.run_number, run.id)
    if created:
        return  # its events are on their way from this process
    first = Cursor(run.run_number, 0)
    # A run that ended a moment ago may still have its events on their way to the log (its end is stored
    # before it is published), so it is waited for like a live one.
    ended = run.finished_at
    recent = ended is not None and (datetime.now(UTC) - ended).total_seconds() < _ATTACH_WAIT
    if await _known(log, chat_id, first, wait=_LIVE_ATTACH_WAIT if run.active else _ATTACH_WAIT if recent else 0):
        return
    raise ApiError(410, "run_expired", "This message was already sent and its run's events are no longer kept; "
                                       "reload the chat's messages (its answer is stored there).")


async def _known(log: EventLog, chat_id: str, cursor: Cursor, *, wait: float) -> bool:
    """Whether the log can be read after `cursor`, waiting up to `wait` seconds for it to be.

    The wait ends early once the cursor is `EXPIRED`: a server that continues a run it took over starts the
    run's log past every cursor of the stopped process (`InMemoryEventLog.seed`), and from then on those cursors
    stay expired. Waiting out the rest of `wait` only delayed the 410 that sends the client to the stored rows.
    """
    deadline = anyio.current_time() + wait
    pause = 0.02
    while True:
        # Polled, not `log.wait`ed: waiting positions a log's local copy at the cursor, which would then answer
        # for it before the events are really there.
        where = await log.position(chat_id, cursor)
        if where is not Position.UNKNOWN and where is not Position.BEYOND:
            return where is Position.KNOWN
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(min(pause, max(0.0, deadline - anyio.current_time())))
        pause = min(0.2, pause * 2)


async def stream(request: Request) -> Response:
    server, user = await _caller(request, query=("after",))
    chat = await _chat(request, server, user)
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    try:
        cursor = Cursor.parse(raw) if raw else None
    except ValueError as exc:
        raise ApiError(400, "invalid_cursor", str(exc)) from None
    start = await _stream_start(server, chat, cursor)
    if start is None:
        return Response(status_code=204, headers={"cache-control": "no-cache"})
    return _follow_response(server, chat, start)


async def _stream_start(server: ServerState, chat: Chat, cursor: Cursor | None) -> Cursor | None:
    """Where a follower starts (it gets the events after the returned cursor), or `None` for 204."""
    store, log = server.store, server.log
    active = await store.active_run(chat.id)
    if cursor is None:
        if active is None:
            return None
        await log.expect_run(chat.id, active.run_number, active.id)
        first = Cursor(active.run_number, 0)
        # A live run this log may hold nothing of yet (taken over from a stopped process a moment from now, or
        # started on another replica a moment ago): following from its start at once would end at once, and the
        # client would retry with growing pauses. Returns at once when the log holds it.
        await _known(log, chat.id, first, wait=_LIVE_ATTACH_WAIT)
        return await renumbered_start(log, chat.id, active.run_number) or first
    expired = ApiError(410, "cursor_expired", "The events after this id are no longer kept; reload the chat's "
                                              "messages (GET /api/chats/{id}/messages), then follow from there.")
    run = active if active is not None and active.run_number == cursor.run else \
        await store.run_by_number(chat.id, cursor.run)
    if run is not None:
        await log.expect_run(chat.id, cursor.run, run.id)
    where = await log.position(chat.id, cursor)
    if where in (Position.UNKNOWN, Position.BEYOND) and run is not None and run.active and \
            await _known(log, chat.id, cursor, wait=_LIVE_ATTACH_WAIT):
        where = Position.KNOWN  # the live run's events reached the log (see `_LIVE_ATTACH_WAIT`)
    if where is Position.EXPIRED:
        raise expired
    if where is Position.KNOWN:
        if await log.read_after(chat.id, cursor, limit=1) or active is not None:
            return cursor
        return None
    if run is None or (where is Position.BEYOND and not run.active):
        raise ApiError(400, "invalid_cursor", f"This chat has no event {cursor}; use an id it sent.")
    if where is Position.BEYOND or run.active or run.event_count is None or cursor.index < run.event_count:
        raise expired  # the run's events are not (or no longer) in this server's log
    if cursor.index > run.event_count:
        raise ApiError(400, "invalid_cursor", f"This chat has no event {cursor}; use an id it sent.")
    # The follower saw the whole run: it goes on with the next run, if there is one to follow.
    later = await log.runs_after(chat.id, cursor.run)
    if later:
        next_run = await store.run_by_number(chat.id, later[0])
        if next_run is None:
            raise expired
        await log.expect_run(chat.id, next_run.run_number, next_run.id)
        next_start = Cursor(later[0], 0)
        if await log.position(chat.id, next_start) is not Position.KNOWN:
            raise expired
        return next_start
    if active is not None:
        raise expired
    return None


async def cancel_run(request: Request) -> Response:
    server, user = await _caller(request)
    chat = await _chat(request, server, user)
    run_id = request.path_params["run_id"]
    if len(run_id) > _MAX_ID or "\x00" in run_id:
        raise ApiError(404, "run_not_found", f"This chat has no run {run_id[:40]!r}.")
    run = await server.manager.cancel(chat.id, run_id)
    return _json({"run_id": run.id, "status": "cancelling"}, 202)


async def decide(request: Request) -> Response:
    server, user = await _caller(request)
    chat = await _chat(request, server, user)
    body = await read_body(request, DecisionsIn, server.limits.max_body_bytes)
    decisions = [Decision(approval_id=d.approval_id, approved=d.approved, reason=d.reason) for d in body.decisions]
    handle = await server.manager.decide(user, chat, decisions)
    await server.log.expect_run(chat.id, handle.run.run_number, handle.run.id)
    return _follow_response(server, chat, Cursor(handle.run.run_number, 0), run_id=handle.run.id)


# -- service routes --------------------------------------------------------------------------

async def healthz(_request: Request) -> Response:
    return _json({"status": "ok"})


async def readyz(request: Request) -> Response:
    server = _server(request)
    if not server.manager.accepting:
        return _json({"status": "unavailable", "reason": "The server is starting or shutting down."}, 503)
    down = await server.manager.problems()  # the database, failing writes, Redis: each named with a sentence
    if down:
        return _json({"status": "unavailable", "reason": " ".join(down.values()), "down": down}, 503)
    return _json({"status": "ready", "runs": server.manager.running})


async def openapi(request: Request) -> Response:
    return Response(_server(request).openapi, media_type="application/json")


_NO_CLIENT = """<!doctype html><html><head><meta charset="utf-8"><title>toolwire</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; line-height: 1.5">
<h1>toolwire chat server</h1>
<p>This server is running, but the web client is not installed here. The API is described at
<a href="/openapi.json">/openapi.json</a>; the server guide of the docs (docs/guides/server.md) shows curl.</p>
</body></html>"""


async def index(request: Request) -> Response:
    web_dir = _server(request).web_dir
    page = web_dir / "index.html" if web_dir is not None else None
    if page is not None and page.is_file():
        return FileResponse(page, headers={"cache-control": "no-cache"})
    return HTMLResponse(_NO_CLIENT)
