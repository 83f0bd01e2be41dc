"""A continued run keeps the limits and the counts of the whole run, not of the process that finishes it
(docs/guides/durable-runs.md, "Decisions"): its step limit counts the steps stored before the takeover, and its
usage includes theirs.

One server on SQLite, SIGKILLed between two rounds (the first round stored, the next model request sent and not
answered) and started again on the same database: it continues the run from its stored round.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest

from tests.server.support import Event, GateServer, ServerProcess, calls, read_events, text, until
from tests.server.test_runs import assert_valid_history
from toolwire.testing.fake import FakeTurn, FakeUsage

pytestmark = pytest.mark.anyio


async def continued_after_a_kill_between_rounds(gate: GateServer, tmp_path: Path, tag: str, label: str,
                                                args: Sequence[str] = ()) -> tuple[ServerProcess, str, list[Event]]:
    """Run the script of `tag` (its first turn calls the tool gated at `label`) until its first round is stored and its second
    request sent, SIGKILL the server, start it again and follow the continued run to its end: the server, the chat
    and the continued run's events (from its `run_resumed`). The server is left running (the caller stops it)."""
    server = ServerProcess(db_url=f"sqlite:///{tmp_path / 'limits.db'}", gate_url=gate.url, folder=tmp_path,
                           args=["--tools", "tests.server.durable_tools:TOOLS", *args], lease_seconds=1.0)
    script = gate.scripts[tag]
    server.start()
    async with server.api() as api:
        chat = await api.new_chat()
        async with api.send(chat, f"[[{tag}]] go") as response:
            async for event in read_events(response):
                if event.type == "tool_started":
                    break
        await until(lambda: gate.waiting.get(label, 0) == 1)
        script.gated = True  # the second request is held before its answer
        gate.release_tool(label)
        await until(lambda: script.requests == 2)
        server.kill()
    server.start()  # the same database, a new process: it continues the run
    await until(lambda: script.requests == 3, timeout=30)  # its request is held until the follower is there
    async with server.api() as api, api.follow(chat) as response:
        assert response.status_code == 200
        script.open()
        events = [event async for event in read_events(response)]
    assert events[0].type == "run_resumed" and events[0].data["restarted_step"] == 1
    return server, chat, events


async def test_a_continued_run_counts_the_steps_taken_before_the_takeover_against_max_steps(
        gate: GateServer, tmp_path: Path) -> None:
    """`--max-steps 2`: the first step was stored before the kill, so the continued run may make one more request
    (not two more), and ends `failed` with `max_steps` as the run would have without the kill."""
    script = gate.script("steps", calls(("lookup", {"label": "step-0"})), calls(("lookup", {"label": "step-1"})),
                         calls(("lookup", {"label": "step-1"})), text("A third step, past the limit."))
    gate.release_tool("step-1")
    server, chat, events = await continued_after_a_kill_between_rounds(gate, tmp_path, "steps", "step-0",
                                                                       ["--max-steps", "2"])
    try:
        async with server.api() as api:
            rows = await api.rows(chat)
    finally:
        server.stop()
    finished = events[-1].data
    assert finished["status"] == "failed" and finished["error"]["code"] == "max_steps", finished
    assert finished["steps"] == 2
    assert script.requests == 3  # the held request, sent again; no third step
    assert [e.data["step"] for e in events if e.type == "step_started"] == [1]
    assert_valid_history(rows)
    assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "tools_aggregate"]


async def test_a_continued_runs_usage_includes_the_steps_stored_before_the_takeover(
        gate: GateServer, tmp_path: Path) -> None:
    """The first step (100 in, 10 out) was stored by the killed process, the answer (200 in, 20 out) made by the
    next: the run's usage is their sum, in `run_finished` and in its stored row."""
    first = dataclasses.replace(calls(("lookup", {"label": "usage-0"})),
                                usage=FakeUsage(input_tokens=100, output_tokens=10))
    answer: FakeTurn = dataclasses.replace(text("Counted."), usage=FakeUsage(input_tokens=200, output_tokens=20))
    script = gate.script("usage", first, answer, answer)
    server, chat, events = await continued_after_a_kill_between_rounds(gate, tmp_path, "usage", "usage-0")
    server.stop()
    finished = events[-1].data
    assert finished["status"] == "completed"
    assert (finished["usage"]["input_tokens"], finished["usage"]["output_tokens"]) == (300, 30), finished["usage"]
    with sqlite3.connect(tmp_path / "limits.db") as db:
        [(stored,)] = db.execute("SELECT usage_json FROM runs WHERE chat_id = ?", (chat,)).fetchall()
    usage = orjson.loads(stored)
    assert (usage["input_tokens"], usage["output_tokens"]) == (300, 30), usage
    assert script.requests == 3
