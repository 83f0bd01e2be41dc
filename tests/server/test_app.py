"""`create_app` used as a library: mounted in-process with a scripted model and uvicorn on loopback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.support import read_events, serve_in_process
from toolwire import Agent, tool
from toolwire.server import ChatContext
from toolwire.store import SQLStore
from toolwire.testing import ScriptedModel, ToolCall

pytestmark = pytest.mark.anyio


async def run(client: httpx.AsyncClient, text: str) -> list[Any]:
    chat = (await client.post("/api/chats", json={})).json()["id"]
    async with client.stream("POST", f"/api/chats/{chat}/messages",
                             json={"client_message_id": "1", "text": text}) as response:
        return [e async for e in read_events(response)]


async def test_create_app_serves_an_agent_built_per_run(tmp_path: Path) -> None:
    @tool
    def double(n: int) -> int:
        """Twice n."""
        return 2 * n

    model = ScriptedModel([ToolCall("double", {"n": 21})], ["It is 42."])
    seen: list[ChatContext] = []

    def factory(ctx: ChatContext) -> Agent:
        seen.append(ctx)
        return Agent(model, tools=[double], memory=ctx.memory, max_parallel_tools=ctx.max_parallel_tools)

    async with serve_in_process(factory, tmp_path) as client:
        events = await run(client, "double 21")
        chat = events[0].data["chat_id"]
        rows = (await client.get(f"/api/chats/{chat}/messages")).json()["messages"]
    assert events[-1].data["status"] == "completed"
    assert [e.data["result"]["result"] for e in events if e.type == "tool_result"] == [42]
    assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]
    assert seen[0].chat_id == chat and seen[0].user.name == "dev" and seen[0].run_id == events[0].data["run_id"]
    async with SQLStore(f"sqlite:///{tmp_path / 'app.db'}") as store:  # the same rows, read as a ChatMemory
        assert [m.role for m in await store.load(chat)] == ["user", "assistant", "user", "assistant"]


async def test_an_agent_built_without_the_runs_memory_fails_the_run_clearly(tmp_path: Path) -> None:
    def factory(ctx: ChatContext) -> Agent:
        return Agent(ScriptedModel(["hi"]))  # forgot memory=ctx.memory

    async with serve_in_process(factory, tmp_path) as client:
        events = await run(client, "hello")
    finished = events[-1].data
    assert finished["status"] == "failed" and finished["error"]["code"] == "agent_misconfigured"
    assert "memory=ctx.memory" in finished["error"]["message"]


async def test_a_failing_model_fails_the_run_and_keeps_the_chat_usable(tmp_path: Path) -> None:
    model = ScriptedModel(RuntimeError("the model is down"), ["Back up."])

    async with serve_in_process(lambda ctx: Agent(model, memory=ctx.memory, max_parallel_tools=ctx.max_parallel_tools),
                       tmp_path) as client:
        events = await run(client, "hello")
        chat = events[0].data["chat_id"]
        async with client.stream("POST", f"/api/chats/{chat}/messages",
                                 json={"client_message_id": "2", "text": "again"}) as response:
            again = [e async for e in read_events(response)]
    assert events[-1].data["status"] == "failed" and events[-1].data["error"]["code"] == "internal_error"
    assert again[-1].data["status"] == "completed"


async def test_the_web_client_folder_is_served_when_present(tmp_path: Path) -> None:
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>toolwire web</title><script src='/static/app.js'></script>")
    (web / "app.js").write_text("console.log('hi')")
    async with serve_in_process(lambda ctx: None, tmp_path) as client:
        page = await client.get("/")
        script = await client.get("/static/app.js")
    assert page.status_code == 200 and "toolwire web" in page.text and page.headers["cache-control"] == "no-cache"
    assert script.status_code == 200 and script.text == "console.log('hi')"


def test_start_up_leaves_the_optional_protocols_unimported(tmp_path: Path) -> None:
    """`toolwire serve`'s start does not import AG-UI's models (imported by the first AG-UI request) or Redis's
    client (only a server given other backends meets its errors): together a third of a second of every start.
    A fresh interpreter, as a start has: this test process has imported both long ago."""
    program = """
import sys
from toolwire.cli import build_parser
from toolwire.server import create_app
build_parser()
create_app(lambda ctx: None, store="sqlite:///" + sys.argv[1])
print(sorted(name for name in ("ag_ui", "redis") if name in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path / "app.db")], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
