"""The streaming path waits only for the commits a guarantee needs (issue 22).

A store whose journal writes are held (`HeldStore`, the real SQLite store with its `record_journal` made
to wait for the test) shows what follows from where the runner waits: a tool's events (its result among them)
reach a follower while the run's journal write is still held, and `run_finished` does not (it comes only once
that write and the run's end are committed). The app runs in-process under uvicorn on loopback with the fake
provider of `test_publishing` (`httpx.MockTransport`, the network edge).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
import uvicorn
from sqlalchemy import event
from starlette.applications import Starlette

from tests.server.support import IN_PROCESS_TOKEN, Event, read_events
from tests.server.test_publishing import RecordingLog, _bodies
from toolwire import Agent, Tool, get_model, tool
from toolwire.server import ChatContext, ServerConfig, create_app, runner as runner_module
from toolwire.store import SQLStore

pytestmark = pytest.mark.anyio


class HeldStore(SQLStore):
    """The SQLite store, with each `record_journal` held until `release` is set; it notes the order in which
    journal writes and the run's end were committed."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.release = anyio.Event()
        self.held = anyio.Event()
        self.order: list[str] = []

    async def record_journal(self, run_id: str, **entries: Any) -> None:
        self.held.set()
        await self.release.wait()
        await super().record_journal(run_id, **entries)
        self.order.append("journal committed")

    async def finish_run(self, run_id: str, **fields: Any) -> bool:
        self.order.append("finish_run")
        return await super().finish_run(run_id, **fields)

    async def finish_run_storing(self, run_id: str, **fields: Any) -> Any:  # the run's end with its answer
        self.order.append("finish_run")
        return await super().finish_run_storing(run_id, **fields)


@asynccontextmanager
async def serving(store: SQLStore, folder: Path, log: RecordingLog | None = None, *,
                  tools: Sequence[Tool[..., Any]] | None = None,
                  apps: list[Starlette] | None = None, words: Sequence[str] = (" one", " two"),
                  pace: float = 0.0, lease_seconds: float = 15.0,
                  model_requests: list[dict[str, Any]] | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """The app in-process on a loopback socket, its model answering with `words`, a `note` call, then "Done." (each
    SSE event `pace` seconds after the one before, when given). The model's requests, parsed, go to
    `model_requests` when given."""
    bodies = _bodies(list(words), orjson.dumps({"text": "x"}).decode())
    requests = 0

    async def paced(body: bytes) -> AsyncIterator[bytes]:
        for event_bytes in body.split(b"\n\n")[:-1]:
            await anyio.sleep(pace)
            yield event_bytes + b"\n\n"

    def provider(request: httpx.Request) -> httpx.Response:
        nonlocal requests
        if model_requests is not None:
            model_requests.append(orjson.loads(request.content))
        body = bodies[min(requests, len(bodies) - 1)]
        requests += 1
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=paced(body) if pace else body)

    # Idempotent, so it starts without waiting for the journal (a tool that is not waits for its call to be
    # committed: test_recorded_calls.py): these tests hold or delay the journal while the tool runs.
    @tool(idempotent=True)
    def note(text: str) -> str:
        """Keep a note."""
        return "kept"

    model = get_model("openai:gpt-4o", api_key="k", base_url="http://provider.invalid/v1", max_retries=0,
                      http_client=httpx.AsyncClient(transport=httpx.MockTransport(provider)))

    def factory(ctx: ChatContext) -> Agent:
        return Agent(model, tools=[note] if tools is None else list(tools), memory=ctx.memory, max_parallel_tools=ctx.max_parallel_tools)

    options: dict[str, Any] = {"event_log": log} if log is not None else {}
    app = create_app(factory, store=store, tokens={"dev": [IN_PROCESS_TOKEN]},
                     config=ServerConfig(web_dir=folder / "web", lease_seconds=lease_seconds), **options)
    if apps is not None:  # for a test that looks at the server's state
        apps.append(app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level="warning", ws="none",
                                           timeout_graceful_shutdown=1))
    # Closed however the test ends, failed ones included (an unclosed socket's ResourceWarning would fail whichever
    # test of the worker runs when it is collected).
    with sock:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.serve(sockets=[sock]))
            while not server.started:  # noqa: ASYNC110 - uvicorn has no started event
                await anyio.sleep(0.01)
            url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {IN_PROCESS_TOKEN}"},
                                         trust_env=False, timeout=30) as client:
                yield client
            server.should_exit = True


async def test_a_tool_result_reaches_followers_before_its_journal_write_commits_and_run_finished_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The journal writes at once: with its linger, this quick tool's round is stored before anything is journaled.
    monkeypatch.setattr(runner_module, "JOURNAL_LINGER_SECONDS", 0.0)
    store = HeldStore(f"sqlite:///{tmp_path / 'app.db'}")
    async with serving(store, tmp_path) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        seen: list[Event] = []

        async def follow() -> None:
            async with client.stream("POST", f"/api/chats/{chat}/messages",
                                     json={"client_message_id": "1", "text": "go"}) as response:
                async for event in read_events(response):
                    seen.append(event)

        async def until(what: str, found: Any) -> None:
            with anyio.fail_after(30):
                while not any(found(e) for e in seen):  # noqa: ASYNC110 - what the follow task collected
                    await anyio.sleep(0.01)

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            # Before the fix this never came: the event waited for its held journal write.
            await until("tool_result", lambda e: e.type == "tool_result")
            assert not store.release.is_set()  # so its journal write has not committed
            await until("the held write", lambda e: store.held.is_set())
            # The rest of the run streams too (the final answer), all but what comes with the run's end (the
            # answer's rows, its step's end, `run_finished`), which waits for the held journal write.
            await until("the answer", lambda e: e.type == "message_end" and e.data["step"] == 1)
            await anyio.sleep(0.5)
            assert "finish_run" not in store.order
            assert "run_finished" not in [e.type for e in seen]
            store.release.set()
        assert seen[-1].type == "run_finished" and seen[-1].data["status"] == "completed"
        assert store.order[0] == "journal committed" and store.order[-1] == "finish_run"
        assert store.order.count("finish_run") == 1
        # Gap-free, and resumable after any event.
        assert [e.id for e in seen] == [f"1-{i}" for i in range(1, len(seen) + 1)]
        for middle in range(0, len(seen) - 1, 3):
            async with client.stream("GET", f"/api/chats/{chat}/stream",
                                     headers={"Last-Event-ID": str(seen[middle].id)}) as response:
                replay = [e async for e in read_events(response)]
            assert [(e.id, e.data) for e in replay] == [(e.id, e.data) for e in seen[middle + 1:]]
        rows = (await client.get(f"/api/chats/{chat}/messages")).json()
        assert rows


async def test_followers_wake_once_per_batch(tmp_path: Path) -> None:
    log = RecordingLog()
    store = SQLStore(f"sqlite:///{tmp_path / 'app.db'}")
    async with serving(store, tmp_path, log) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        async with client.stream("POST", f"/api/chats/{chat}/messages",
                                 json={"client_message_id": "1", "text": "go"}) as response:
            events = [e async for e in read_events(response)]
    assert events[-1].type == "run_finished"
    # One follower: each append wakes it once, and every event is in exactly one append.
    assert sum(len(types) for types in log.appends) == len(events)
    # 9 appends here; 14 before (each step's start, each round's rows and its end, each went alone).
    assert len(log.appends) <= 10, log.appends
    assert ["step_started"] not in log.appends and ["message_saved"] not in log.appends
    assert log.wakeups <= len(log.appends)



class LaggingJournal(SQLStore):
    """The SQLite store whose first journal write waits until the run's first round is committed (a journal that
    lags behind the agent, as it does when the tools are quick); it notes every statement its writer runs."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.round_stored = anyio.Event()
        self.statements: list[str] = []

    async def open(self) -> None:
        await super().open()
        event.listen(self.write_engine, "before_cursor_execute",
                     lambda conn, cursor, statement, *rest: self.statements.append(statement))

    async def _lag(self) -> None:
        with anyio.fail_after(30):
            await self.round_stored.wait()

    async def record_journal(self, run_id: str, **entries: Any) -> None:
        await self._lag()
        await super().record_journal(run_id, **entries)

    async def append_messages(self, chat_id: str, messages: Any, **options: Any) -> Any:
        rows = await super().append_messages(chat_id, messages, **options)
        self.round_stored.set()
        return rows


async def test_a_round_committed_before_the_journal_gets_to_it_is_not_journaled_again(tmp_path: Path) -> None:
    store = LaggingJournal(f"sqlite:///{tmp_path / 'app.db'}")
    async with serving(store, tmp_path) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        async with client.stream("POST", f"/api/chats/{chat}/messages",
                                 json={"client_message_id": "1", "text": "go"}) as response:
            events = [e async for e in read_events(response)]
    assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed"
    assert [e.data["result"]["result"] for e in events if e.type == "tool_result"] == ["kept"]
    # The tool's result is in the committed round; the journal, behind it, does not write it a second time.
    journaled_results = [s for s in store.statements if s.startswith("INSERT INTO run_tool_calls") and "result_json" in s]
    assert journaled_results == []
    rounds = [s for s in store.statements if s.startswith("INSERT INTO messages")]
    assert len(rounds) == 3  # the user's message, the tool round, the answer


class SlowRound(LaggingJournal):
    """`LaggingJournal` whose journal writes wait only until the run's first round is handed to the store, and
    whose round then takes half a second to reach the writer: the journal task gets to the round's results while
    the round is on its way, not yet committed."""

    async def append_messages(self, chat_id: str, messages: Any, **options: Any) -> Any:
        if not self.round_stored.is_set():
            self.round_stored.set()
            await anyio.sleep(0.5)
        return await super().append_messages(chat_id, messages, **options)


async def test_a_round_on_its_way_to_the_store_is_not_journaled_again(tmp_path: Path) -> None:
    # The agent hands a round to the store before the run's consumer reads its results' events, so with quick tools
    # the journal task met the results while the round was queued: they were written twice (once by themselves).
    store = SlowRound(f"sqlite:///{tmp_path / 'app.db'}")
    async with serving(store, tmp_path) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        async with client.stream("POST", f"/api/chats/{chat}/messages",
                                 json={"client_message_id": "1", "text": "go"}) as response:
            events = [e async for e in read_events(response)]
    assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed"
    assert [e.data["result"]["result"] for e in events if e.type == "tool_result"] == ["kept"]
    journaled_results = [s for s in store.statements if s.startswith("INSERT INTO run_tool_calls") and "result_json" in s]
    assert journaled_results == []
    rounds = [s for s in store.statements if s.startswith("INSERT INTO messages")]
    assert len(rounds) == 3  # the user's message, the tool round (with the result), the answer


class Backlogged(SQLStore):
    """The SQLite store reporting `backlog` writes queued (`SQLStore.write_backlog`); it notes the text checkpoints."""

    def __init__(self, url: str, backlog: int) -> None:
        super().__init__(url)
        self.backlog = backlog
        self.checkpoints: list[str] = []

    @property
    def write_backlog(self) -> int:
        return self.backlog

    def checkpoint_step_text(self, run_id: str, step: int, text: str) -> None:
        self.checkpoints.append(text)
        super().checkpoint_step_text(run_id, step, text)


@pytest.mark.parametrize("backlog", [0, 1_000], ids=["idle-writer", "backlogged-writer"])
async def test_a_text_checkpoint_due_by_time_waits_while_the_writer_is_backlogged(tmp_path: Path, backlog: int) -> None:
    # Twelve words 0.15 s apart: the checkpoint due after a second of text is written by an idle writer, and
    # left out while the writer has more queued than `CHECKPOINT_BACKLOG` (the run completes the same).
    store = Backlogged(f"sqlite:///{tmp_path / 'app.db'}", backlog)
    async with serving(store, tmp_path, words=[f" w{n}" for n in range(12)], pace=0.15) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        async with client.stream("POST", f"/api/chats/{chat}/messages",
                                 json={"client_message_id": "1", "text": "go"}) as response:
            events = [e async for e in read_events(response)]
    assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed"
    if backlog:
        assert store.checkpoints == []
    else:
        assert store.checkpoints and store.checkpoints[0].startswith(" w0 w1")
