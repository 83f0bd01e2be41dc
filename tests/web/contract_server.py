"""A loopback HTTP server that plays the chat server's side of the contract from scripted event frames.

It serves the real page (`toolwire.web`) and answers the native API exactly as the contract describes
(bearer tokens, 404 for another user's chat, 409 while a run is active or paused, SSE frames with
`<run>-<index>` cursors, `Last-Event-ID`, 204 when nothing is active, 410 for an expired cursor), so the
browser tests drive the real page over real HTTP. What the runs say is scripted: a POST starts the next
scripted run, and the test releases its frames one by one (`release`), which is how a test holds a run
at any point: mid-argument, with two of three results in, paused for approval.

Every request is recorded (`requests`) so tests can assert what the page sent.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from toolwire.web import ASSET_TYPES, INDEX_HTML, static_file

Frame = dict[str, Any]
CSP_META = re.compile(rb'<meta http-equiv="Content-Security-Policy"[^>]*>\s*')


def cursor_key(cursor: str) -> tuple[int, int]:
    run, _, index = cursor.partition("-")
    return int(run), int(index or 0)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class Chat:
    detail: dict[str, Any]
    owner: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    log: list[Frame] = field(default_factory=list)  # every published frame, in cursor order
    scripted: list[list[Frame]] = field(default_factory=list)  # runs a POST will start, in order
    pending: list[Frame] = field(default_factory=list)  # frames of the started run, not released yet
    paused_detail: dict[str, Any] | None = None  # ChatDetail.paused once the run pauses
    active_run: str | None = None
    client_message_id: str | None = None
    expired_before: str | None = None  # cursors before this one answer 410
    cut: int = 0  # bumped to drop every open stream of the chat


class ContractServer:
    """The chat server's contract, played from scripts; `with ContractServer() as server: server.url`."""

    def __init__(self, token: str = "test-token", *, csp: bool = True) -> None:
        self.token = token
        self.csp = csp
        self.chats: dict[str, Chat] = {}
        self.requests: list[Request] = []
        self.lock = threading.Condition()
        self.created = 0
        self.chat_delay = 0.0  # seconds GET chat waits between reading the chat and answering (a slow network)
        self.unavailable: dict[tuple[str, str], int] = {}  # (method, path): how many more requests answer 503
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="contract-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/"

    def __enter__(self) -> ContractServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            for chat in self.chats.values():
                chat.cut += 1
            self.lock.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---- what tests set up

    def add_chat(self, detail: dict[str, Any], *, rows: list[dict[str, Any]] | None = None,
                 frames: list[Frame] | None = None, owner: str | None = None,
                 paused: dict[str, Any] | None = None) -> Chat:
        """A chat with stored rows and an event log (an active run if the log's last run has not finished;
        `paused` is GET chat's `paused` once a run in the log pauses)."""
        chat = Chat(detail=copy.deepcopy(detail), owner=owner or self.token, rows=copy.deepcopy(rows or []),
                    paused_detail=copy.deepcopy(paused))
        with self.lock:
            self.chats[detail["id"]] = chat
            for frame in frames or []:
                self._publish(chat, frame)
        return chat

    def script(self, chat_id: str, *runs: list[Frame], paused: dict[str, Any] | None = None) -> None:
        """Runs that the next POSTs (message or approvals) start; `paused` is GET chat's `paused` after a pause."""
        with self.lock:
            chat = self.chats[chat_id]
            chat.scripted.extend(copy.deepcopy(list(runs)))
            if paused is not None:
                chat.paused_detail = copy.deepcopy(paused)

    def start_run(self, chat_id: str) -> None:
        """Start the next scripted run as if a POST had (another tab, or a test that reloads first)."""
        with self.lock:
            self._start(self.chats[chat_id])

    def release(self, chat_id: str, count: int | None = None, *, until: Callable[[Frame], bool] | None = None) -> list[Frame]:
        """Publish the started run's next frames: `count` of them, up to and including the first that
        matches `until`, or all."""
        with self.lock:
            chat = self.chats[chat_id]
            released: list[Frame] = []
            while chat.pending and (count is None or len(released) < count):
                frame = chat.pending.pop(0)
                self._publish(chat, frame)
                released.append(frame)
                if until is not None and until(frame):
                    break
            return released

    def wait_for_run(self, chat_id: str, timeout: float = 5.0) -> str:
        """Wait until a run is active in the chat (the page's POST arrived); returns its id."""
        with self.lock:
            chat = self.chats[chat_id]
            if not self.lock.wait_for(lambda: chat.active_run is not None, timeout=timeout):
                raise AssertionError(f"No run started in chat {chat_id!r} within {timeout} s.")
            assert chat.active_run is not None
            return chat.active_run

    def drop_streams(self, chat_id: str) -> None:
        """Close every open event stream of the chat mid-run (a lost connection)."""
        with self.lock:
            self.chats[chat_id].cut += 1
            self.lock.notify_all()

    def expire_before(self, chat_id: str, cursor: str) -> None:
        with self.lock:
            self.chats[chat_id].expired_before = cursor

    def refuse_next(self, method: str, path: str, count: int = 1) -> None:
        """Answer the next `count` requests to `path` with 503 (a server restarting or too busy to answer)."""
        with self.lock:
            self.unavailable[(method, path)] = count

    def requests_to(self, method: str, path_pattern: str) -> list[Request]:
        pattern = re.compile(path_pattern)
        with self.lock:
            return [r for r in self.requests if r.method == method and pattern.fullmatch(r.path)]

    # ---- the server's bookkeeping (called with the lock held)

    def _publish(self, chat: Chat, frame: Frame) -> None:
        data = frame["data"]
        kind = data["type"]
        if kind == "run_started":
            chat.active_run = data["run_id"]
            chat.detail["paused"] = None
            if data.get("user_message"):
                self._store(chat, data["user_message"])
        elif kind == "message_saved":
            self._store(chat, data["row"])
        elif kind == "run_finished":
            chat.active_run = None
            chat.client_message_id = None
            if data["status"] == "paused":
                chat.detail["paused"] = chat.paused_detail
        chat.log.append(frame)
        self.lock.notify_all()

    def _store(self, chat: Chat, row: dict[str, Any]) -> None:
        if all(r["id"] != row["id"] for r in chat.rows):
            chat.rows.append(row)
            chat.rows.sort(key=lambda r: r["sequence_number"])

    def _start(self, chat: Chat) -> str:
        if not chat.scripted:
            raise AssertionError(f"The test scripted no run for chat {chat.detail['id']!r}.")
        run = chat.scripted.pop(0)
        first, *rest = run
        self._publish(chat, first)
        chat.pending = rest
        return str(first["data"]["run_id"])

    def _detail(self, chat: Chat) -> dict[str, Any]:
        detail = dict(chat.detail)
        last = next((f["id"] for f in reversed(chat.log)), None)
        detail["active_run"] = None if chat.active_run is None else {
            "run_id": chat.active_run, "status": "running", "last_event_id": last}
        return detail

    def _run_start_index(self, chat: Chat) -> int:
        for i in range(len(chat.log) - 1, -1, -1):
            if chat.log[i]["data"]["type"] == "run_started":
                return i
        return 0

    def follow(self, chat: Chat, position: int) -> Iterator[Frame | None]:
        """Frames from `position` on, live, until run_finished; None when the stream must be dropped."""
        cut = chat.cut
        while True:
            with self.lock:
                while position >= len(chat.log) and chat.cut == cut:
                    self.lock.wait(timeout=1.0)
                frame = None if chat.cut != cut else chat.log[position]
            if frame is None:
                yield None
                return
            position += 1
            yield frame
            if frame["data"]["type"] == "run_finished":
                return

    # ---- HTTP

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.route("GET")

            def do_POST(self) -> None:
                self.route("POST")

            def do_PATCH(self) -> None:
                self.route("PATCH")

            def do_DELETE(self) -> None:
                self.route("DELETE")

            def route(self, method: str) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with server.lock:
                    server.requests.append(Request(method, split.path, parse_qs(split.query), dict(self.headers.items()), body))
                try:
                    server.answer(self, method, split.path, parse_qs(split.query), body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                except AssertionError as exc:  # a test that scripted too little: tell the page, like a server bug would
                    self.send_error_json(500, "not_scripted", str(exc))

            def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def send_error_json(self, status: int, code: str, message: str) -> None:
                self.send_json(status, {"error": {"code": code, "message": message}})

            def send_file(self, data: bytes, content_type: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def send_stream(self, chat: Chat, position: int, run_id: str | None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("X-Accel-Buffering", "no")
                self.send_header("Connection", "close")
                if run_id is not None:
                    self.send_header("Location", f"/api/chats/{chat.detail['id']}/stream")
                    self.send_header("X-Run-Id", run_id)
                self.end_headers()
                self.close_connection = True
                self.wfile.write(b": stream\n\n")
                self.wfile.flush()
                for frame in server.follow(chat, position):
                    if frame is None:
                        return  # dropped: the connection closes without run_finished
                    payload = json.dumps(frame["data"], ensure_ascii=False)
                    self.wfile.write(f"id: {frame['id']}\ndata: {payload}\n\n".encode())
                    self.wfile.flush()

        return Handler

    def answer(self, h: Any, method: str, path: str, query: dict[str, list[str]], body: Any) -> None:
        if method == "GET" and path in ("/", "/index.html"):
            page = INDEX_HTML.read_bytes()
            h.send_file(page if self.csp else CSP_META.sub(b"", page), ASSET_TYPES[".html"])
            return
        if method == "GET" and path.startswith("/static/"):
            asset = static_file(path.removeprefix("/static/"))
            if asset is None:
                h.send_error_json(404, "not_found", "There is no such file.")
                return
            h.send_file(asset.read_bytes(), ASSET_TYPES[asset.suffix])
            return
        if not path.startswith("/api/"):
            h.send_error_json(404, "not_found", "There is no such page.")
            return
        with self.lock:
            refused = self.unavailable.get((method, path), 0)
            if refused:
                self.unavailable[(method, path)] = refused - 1
        if refused:
            h.send_json(503, {"error": {"code": "store_unavailable", "message": "The database is restarting."}},
                        {"Retry-After": "0"})
            return
        auth = h.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        if token is None or not token:
            h.send_error_json(401, "unauthorized", "This request needs an access token.")
            return
        known_tokens = {self.token} | {c.owner for c in self.chats.values()}
        if token not in known_tokens:
            h.send_error_json(401, "unauthorized", "The access token was not accepted.")
            return
        parts = path.removeprefix("/api/").strip("/").split("/")
        if parts == ["chats"]:
            if method == "GET":
                with self.lock:
                    mine = [self._detail(c) for c in self.chats.values() if c.owner == token]
                chats = [{k: d[k] for k in ("id", "title", "created_at", "updated_at")} for d in reversed(mine)]
                h.send_json(200, {"chats": chats})
                return
            if method == "POST":
                with self.lock:
                    self.created += 1
                    chat_id = f"new-{self.created}"
                    detail = {"id": chat_id, "title": (body or {}).get("title") or "", "created_at": "2025-06-01T10:00:00Z",
                              "updated_at": "2025-06-01T10:00:00Z", "active_run": None, "paused": None}
                    self.chats[chat_id] = Chat(detail=detail, owner=token)
                h.send_json(201, {k: detail[k] for k in ("id", "title", "created_at", "updated_at")})
                return
        if len(parts) < 2 or parts[0] != "chats":
            h.send_error_json(404, "not_found", "There is no such endpoint.")
            return
        with self.lock:
            chat = self.chats.get(parts[1])
        if chat is None or chat.owner != token:
            h.send_error_json(404, "chat_not_found", "There is no such chat. Open one from the list or start a new chat.")
            return
        rest = parts[2:]
        if rest == [] and method == "GET":
            with self.lock:
                detail = copy.deepcopy(self._detail(chat))
            time.sleep(self.chat_delay)
            h.send_json(200, detail)
        elif rest == [] and method == "PATCH":
            with self.lock:
                chat.detail["title"] = body["title"]
                h.send_json(200, {k: chat.detail[k] for k in ("id", "title", "created_at", "updated_at")})
        elif rest == [] and method == "DELETE":
            with self.lock:
                del self.chats[parts[1]]
                chat.cut += 1
                self.lock.notify_all()
            h.send_json(204, None)
        elif rest == ["messages"] and method == "GET":
            after = int(query["after"][0]) if "after" in query else None
            with self.lock:
                rows = [r for r in chat.rows if after is None or r["sequence_number"] > after]
            h.send_json(200, {"messages": rows})
        elif rest == ["messages"] and method == "POST":
            with self.lock:
                if chat.active_run is not None and body.get("client_message_id") != chat.client_message_id:
                    h.send_error_json(409, "run_active", "A run is active in this chat. Wait for it to finish or stop it.")
                    return
                if chat.active_run is None and chat.detail.get("paused"):
                    h.send_error_json(409, "run_paused", "This chat waits for approval decisions. Approve or deny the waiting calls first.")
                    return
                if chat.active_run is None:
                    chat.client_message_id = body["client_message_id"]
                    run_id = self._start(chat)
                else:
                    run_id = chat.active_run
                position = self._run_start_index(chat)
            h.send_stream(chat, position, run_id)
        elif rest == ["stream"] and method == "GET":
            cursor = h.headers.get("Last-Event-ID") or (query.get("after") or [None])[0]
            with self.lock:
                if cursor is not None and chat.expired_before is not None and cursor_key(cursor) < cursor_key(chat.expired_before):
                    h.send_error_json(410, "cursor_expired", "The stream position is too old. Reload the messages.")
                    return
                if cursor is None:
                    if chat.active_run is None:
                        h.send_json(204, None)
                        return
                    position = self._run_start_index(chat)
                else:
                    position = next((i for i, f in enumerate(chat.log) if cursor_key(f["id"]) > cursor_key(cursor)), len(chat.log))
                    if position == len(chat.log) and chat.active_run is None:
                        h.send_json(204, None)
                        return
            h.send_stream(chat, position, None)
        elif len(rest) == 3 and rest[0] == "runs" and rest[2] == "cancel" and method == "POST":
            with self.lock:
                if chat.active_run != rest[1]:
                    h.send_error_json(409, "run_finished", "That run has already finished.")
                    return
                run_number = cursor_key(chat.log[-1]["id"])[0]
                index = cursor_key(chat.log[-1]["id"])[1] + 1
                chat.pending = []
                self._publish(chat, {"id": f"{run_number}-{index}", "data": {
                    "type": "run_finished", "run_id": rest[1], "step": None, "status": "cancelled", "usage": None,
                    "error": None, "steps": 1, "duration": 0.5}})
            h.send_json(202, {"run_id": rest[1], "status": "cancelling"})
        elif rest == ["approvals"] and method == "POST":
            with self.lock:
                paused = chat.detail.get("paused")
                if not paused:
                    h.send_error_json(409, "not_paused", "Nothing waits for a decision in this chat.")
                    return
                wanted = {a["approval_id"] for a in paused["approvals"]}
                given = {d["approval_id"] for d in body["decisions"]}
                if given != wanted:
                    h.send_error_json(400, "decisions_incomplete", "Decide every waiting call in one request.")
                    return
                run_id = self._start(chat)
                position = self._run_start_index(chat)
            h.send_stream(chat, position, run_id)
        else:
            h.send_error_json(404, "not_found", "There is no such endpoint.")
