"""What the server tests stand on: a gate server the test controls, the real server in a subprocess, a client.

Cut points are deterministic because the test holds both ends of what a run waits for, across the
process boundary:

- `GateServer` runs in the test process (uvicorn on loopback, in a thread). It is the model provider:
  an OpenAI-compatible `/v1/chat/completions` that answers with the turns a test scripted for its tag
  (`[[tag]]` in the user's message), frames encoded by toolwire's own fake OpenAI encoder. A *gated*
  script sends each frame only when the test releases it. It is also the side channel of the tools in
  `gated_tools.py`: `gated(label)` blocks in an HTTP request to the gate until the test releases that
  label; tools report events (`start:x`, `transfer:...`) the test can wait for.
- `ServerProcess` starts `python -m toolwire serve` (the real command: uvicorn with httptools) with a
  fresh database, the gate as its model's base URL and those tools, on a free loopback port.
- `Api` is an httpx client with one user's token; `read_events` parses the SSE body as it arrives.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.server import forkserver
from toolwire.server import ServerConfig, create_app
from toolwire.testing.fake import FakeRequest, FakeText, FakeToolCall, FakeTurn, fake_protocol

REPO = Path(__file__).resolve().parents[2]
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef",
          "carol": "carol-token-0123456789abcdef"}
_TAG = re.compile(r"\[\[([\w-]+)\]\]")


async def until(condition: Callable[[], bool], timeout: float = 15.0, what: str = "condition") -> None:
    """Wait (polling) until `condition()` holds."""
    with anyio.fail_after(timeout):
        while not condition():  # noqa: ASYNC110 - the condition is set by another thread or process
            await anyio.sleep(0.005)


def text(value: str, chunks: int | list[str] | None = None) -> FakeTurn:
    return FakeTurn(parts=[FakeText(text=value, chunks=chunks)])


def calls(*items: tuple[str, dict[str, Any]], preamble: str | None = None) -> FakeTurn:
    parts: list[Any] = [FakeText(text=preamble)] if preamble else []
    parts += [FakeToolCall(name=name, arguments=arguments, id=f"call_{i}_{name}") for i, (name, arguments) in
              enumerate(items)]
    return FakeTurn(parts=parts)


class Script:
    """The turns answering one tag's requests, in order; gated scripts wait for `release` per frame.

    Two counts follow each frame out, because a client can read a frame before the gate's next line runs:
    `handed` counts the frames given to the response (counted before, so from the moment a client could
    see a frame, the count includes it: a test reading events compares with this one), `sent` those whose
    write has returned (counted after, so a test waiting on it knows the frame has gone out).
    """

    def __init__(self, turns: Sequence[FakeTurn], gated: bool) -> None:
        self.turns = list(turns)
        self.gated = gated
        self.requests = 0
        self.handed = 0
        self.sent = 0
        self.finished = 0
        self._permits = 0
        self._lock = threading.Lock()

    def release(self, frames: int = 1) -> None:
        with self._lock:
            self._permits += frames

    def open(self) -> None:
        self.gated = False

    def take(self) -> bool:
        with self._lock:
            if not self.gated:
                return True
            if self._permits > 0:
                self._permits -= 1
                return True
            return False


@dataclass
class GateServer:
    scripts: dict[str, Script] = field(default_factory=dict)
    permits: dict[str, int] = field(default_factory=dict)
    waiting: dict[str, int] = field(default_factory=dict)
    passed: dict[str, int] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    """The model requests' bodies, in order (what a provider was sent)."""
    active: int = 0
    peak: int = 0
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    def script(self, tag: str, *turns: FakeTurn, gated: bool = False) -> Script:
        script = self.scripts[tag] = Script(turns, gated)
        return script

    def release_tool(self, label: str, count: int = 1) -> None:
        with self._lock:
            self.permits[label] = self.permits.get(label, 0) + count

    def reset(self) -> None:
        """Forget every script, permit and event (each test starts from a clean gate)."""
        with self._lock:
            self.scripts.clear()
            self.permits.clear()
            self.passed.clear()
            self.events.clear()
            self.bodies.clear()
            self.peak = self.active

    def reset_peak(self) -> None:
        with self._lock:
            self.peak = self.active

    def _app(self) -> Starlette:
        protocol = fake_protocol("openai-chat")
        rng = random.Random(7)

        async def completions(request: Request) -> Response:
            fake = FakeRequest(protocol="openai-chat", method="POST", path=request.url.path,
                               body=orjson.loads(await request.body()))
            protocol.decode(fake)
            self.bodies.append(fake.body)
            found = _TAG.search(fake.last_user_text())
            script = self.scripts.get(found.group(1)) if found else None
            if script is None or script.requests >= len(script.turns):
                script = Script([text("Nothing was scripted for this message.")], gated=False)
            turn = script.turns[script.requests]
            script.requests += 1
            encoder = protocol.encoder(fake, rng)
            content = list(encoder.content(turn))
            if turn.error is not None:  # the provider fails inside the stream, after `after` frames
                frames = [*content[:turn.error.after], *encoder.error(turn.error)]
            else:
                frames = [*content, *encoder.end(turn, turn.finish_reason, encoder.usage(turn))]

            async def body() -> AsyncIterator[bytes]:
                for number, frame in enumerate(frames):
                    if number:
                        while not script.take():  # noqa: ASYNC110 - released from the test's thread
                            await anyio.sleep(0.002)
                    script.handed += 1
                    yield frame
                    script.sent += 1
                script.finished += 1

            return StreamingResponse(body(), media_type="text/event-stream")

        async def tool_gate(request: Request) -> Response:
            label = request.path_params["label"]
            with self._lock:
                self.waiting[label] = self.waiting.get(label, 0) + 1
                self.active += 1
                self.peak = max(self.peak, self.active)
                self.events.append(f"wait:{label}")
            try:
                polls = 0
                while True:
                    with self._lock:
                        if self.permits.get(label, 0) > 0:
                            self.permits[label] -= 1
                            self.passed[label] = self.passed.get(label, 0) + 1
                            break
                    polls += 1
                    if polls % 50 == 0 and await request.is_disconnected():
                        return Response(status_code=499)  # the tool's run was stopped
                    await anyio.sleep(0.002)
            finally:
                with self._lock:
                    self.waiting[label] -= 1
                    self.active -= 1
            return JSONResponse({"label": label, "released": True})

        async def event(request: Request) -> Response:
            data = orjson.loads(await request.body())
            with self._lock:
                self.events.append(data["event"])
            return JSONResponse({})

        return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"]),
                                 Route("/tools/{label}", tool_gate, methods=["POST"]),
                                 Route("/events", event, methods=["POST"])])

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(self._app(), log_config=None, log_level="warning", lifespan="off", ws="none",
                                timeout_graceful_shutdown=1)
        self._server = server = uvicorn.Server(config)
        self._thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True, name="gate")
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.005)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)


class ServerProcess:
    """`toolwire serve` in a subprocess: a fresh server on a free port, pointed at the gate."""

    def __init__(self, *, db_url: str, gate_url: str, folder: Path, args: Sequence[str] = (),
                 lease_seconds: float = 2.0, preexec: Callable[[], None] | None = None) -> None:
        self.db_url = db_url
        self.preexec = preexec  # run in the child before it starts (resource limits, say)
        self.gate_url = gate_url
        self.folder = folder
        self.args = list(args)
        self.lease_seconds = lease_seconds
        self.url = ""
        self.process: subprocess.Popen[bytes] | forkserver.ForkedProcess | None = None
        self._starts = 0

    def start(self) -> None:
        self._starts += 1
        tokens = self.folder / "tokens.txt"
        tokens.write_text("".join(f"{user} {token}\n" for user, token in TOKENS.items()))
        out = self.folder / f"server-{self._starts}.out"
        err = self.folder / f"server-{self._starts}.err"
        env = {**os.environ, "OPENAI_API_KEY": "gate-key", "TOOLWIRE_GATE_URL": self.gate_url,
               "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
        command = [sys.executable, "-m", "toolwire", "serve", "--db", self.db_url, "--port", "0",
                   "--model", "openai:gate-model", "--base-url", f"{self.gate_url}/v1",
                   "--tools", "tests.server.gated_tools:TOOLS", "--tokens-file", str(tokens),
                   "--lease-seconds", str(self.lease_seconds), *self.args]
        # Forked from a process that imported the server once (tests/server/forkserver.py): a start's imports
        # were most of the suite's CPU time.
        self.process = forkserver.popen(command, env=env, cwd=self.folder, stdout=out, stderr=err,
                                        preexec=self.preexec)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(rb"Listening on (http://\S+)", out.read_bytes())
            if found:
                self.url = found.group(1).decode()
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"toolwire serve did not start:\n{out.read_text()}\n{err.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stderr(self) -> str:
        return (self.folder / f"server-{self._starts}.err").read_text()

    def api(self, user: str = "alice") -> Api:
        return Api(self.url, TOKENS[user])


@dataclass
class Event:
    id: str | None
    data: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.data["type"])


class Api:
    """One user's client (an `httpx.AsyncClient` with a bearer token)."""

    def __init__(self, url: str, token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.AsyncClient(base_url=url, headers=headers, trust_env=False,
                                        timeout=httpx.Timeout(30.0, connect=10.0))

    async def __aenter__(self) -> Api:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()

    async def new_chat(self, title: str | None = None) -> str:
        response = await self.client.post("/api/chats", json={} if title is None else {"title": title})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    async def rows(self, chat_id: str, after: int = 0) -> list[dict[str, Any]]:
        response = await self.client.get(f"/api/chats/{chat_id}/messages", params={"after": after})
        assert response.status_code == 200, response.text
        rows: list[dict[str, Any]] = response.json()["messages"]
        return rows

    async def chat(self, chat_id: str) -> dict[str, Any]:
        response = await self.client.get(f"/api/chats/{chat_id}")
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()
        return data

    @asynccontextmanager
    async def send(self, chat_id: str, text_: str, client_id: str | None = None,
                   **extra: Any) -> AsyncIterator[httpx.Response]:
        body = {"client_message_id": client_id or f"m-{random.random()}", "text": text_, **extra}
        async with self.client.stream("POST", f"/api/chats/{chat_id}/messages", json=body) as response:
            yield response

    @asynccontextmanager
    async def follow(self, chat_id: str, after: str | None = None) -> AsyncIterator[httpx.Response]:
        headers = {"Last-Event-ID": after} if after else {}
        async with self.client.stream("GET", f"/api/chats/{chat_id}/stream", headers=headers) as response:
            yield response

    @asynccontextmanager
    async def decide(self, chat_id: str, decisions: list[dict[str, Any]]) -> AsyncIterator[httpx.Response]:
        async with self.client.stream("POST", f"/api/chats/{chat_id}/approvals",
                                      json={"decisions": decisions}) as response:
            yield response

    async def run(self, chat_id: str, text_: str, **extra: Any) -> list[Event]:
        """Send a message and read its whole event stream."""
        async with self.send(chat_id, text_, **extra) as response:
            assert response.status_code == 200, (await response.aread()).decode()
            return [event async for event in read_events(response)]


async def first_text(api: Api, chat_id: str, text_: str) -> Event:
    """Send `text_` and read its run's events up to the first `text_delta`, which is returned; the request is
    then closed (the run goes on without a follower)."""
    async with api.send(chat_id, text_) as response:
        async for event in read_events(response):
            if event.type == "text_delta":
                return event
    raise AssertionError("The run ended without streaming any text.")


async def read_events(response: httpx.Response, heartbeats: list[float] | None = None) -> AsyncIterator[Event]:
    """The SSE events of a streaming response, as they arrive (comments are counted in `heartbeats`)."""
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif line.startswith(":"):
            if heartbeats is not None:
                heartbeats.append(time.monotonic())
        elif line == "" and data:
            yield Event(event_id, orjson.loads("\n".join(data)))
            event_id, data = None, []


def types(events: Sequence[Event], skip: Iterator[str] | Sequence[str] = ("text_delta", "tool_call_delta")) -> list[str]:
    return [e.type for e in events if e.type not in skip]


IN_PROCESS_TOKEN = "in-process-user-token-0123456789"


@asynccontextmanager
async def serve_in_process(factory: Callable[..., Any], folder: Path, config: ServerConfig | None = None,
                           **app_options: Any) -> AsyncIterator[httpx.AsyncClient]:
    """`create_app` under uvicorn on a loopback socket in this process (SQLite in `folder`), and a client
    signed in as the user `dev` (token `IN_PROCESS_TOKEN`); `app_options` go to `create_app`."""
    app = create_app(factory, store=f"sqlite:///{folder / 'app.db'}", tokens={"dev": [IN_PROCESS_TOKEN]},
                     config=config or ServerConfig(web_dir=folder / "web"), **app_options)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level="warning", ws="none",
                                           timeout_graceful_shutdown=1))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        while not server.started:  # noqa: ASYNC110 - uvicorn has no started event
            await anyio.sleep(0.01)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {IN_PROCESS_TOKEN}"},
                                     trust_env=False, timeout=10) as client:
            yield client
        server.should_exit = True
