"""MCP servers as toolsets, against a real MCP server process (tests/mcp/server.py): stdio and HTTP."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.agent.support import assert_valid_history, results_of
from toolwire import Agent, FilePart, MCPServerError, ToolResultEvent, UserError
from toolwire.mcp import MCPServer, servers_from_specs
from toolwire.testing import Delay, FakeProviderServer, ScriptedModel, ToolCall
from toolwire.testing.fake import FakeText, FakeToolCall, FakeTurn

from .server import PDF, PNG
from .support import http_process, kill_when_busy, process_gone, stdio_server

pytestmark = pytest.mark.anyio


@contextmanager
def server_for(transport: str, pid_file: Path | None = None, **options: Any) -> Iterator[MCPServer]:
    if transport == "stdio":
        yield stdio_server(pid_file, **options)
    else:
        with http_process(pid_file) as (url, _process):
            yield MCPServer.http(url, **options)


TRANSPORTS = ["stdio", "http"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_two_tools_are_listed_and_called_in_one_run(transport: str) -> None:
    with server_for(transport) as server:
        model = ScriptedModel([ToolCall("add", {"a": 2, "b": 40}), ToolCall("shout", {"text": "hi"})], ["Done."])
        agent = Agent(model, toolsets=[server])
        async with agent:
            assert server.connected
            result = await agent.run("Add and shout.")
        assert not server.connected
    offered = [t.name for t in model.requests[0].tools]
    assert offered == ["add", "shout", "fail", "slow", "hang", "grow", "picture"]
    assert model.requests[0].tools[0].description == "Add two numbers."
    assert model.requests[0].tools[0].parameters["required"] == ["a", "b"]
    added, shouted = results_of(result.messages)
    assert (added.name, added.result, added.is_error) == ("add", {"result": 42}, False)
    assert (shouted.name, shouted.result) == ("shout", {"result": "HI!"})
    assert result.output == "Done."
    assert_valid_history(result.messages)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_killed_mid_call_is_an_error_result_and_the_run_goes_on(transport: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with server_for(transport, pid_file) as server:
        model = ScriptedModel([ToolCall("slow", {"seconds": 30})], [ToolCall("add", {"a": 1, "b": 1})],
                              ["The server is gone."])
        agent = Agent(model, toolsets=[server])
        async with agent, anyio.create_task_group() as tg:
            tg.start_soon(kill_when_busy, pid_file)
            with anyio.fail_after(20):
                result = await agent.run("Sleep.")
        pid = int(pid_file.read_text())
    stopped, later = results_of(result.messages)
    assert stopped.is_error and "stopped while its tool 'slow' was running" in stopped.result["error"]
    assert later.is_error and "is not connected any more" in later.result["error"]
    assert result.output == "The server is gone."
    assert_valid_history(result.messages)
    await anyio.sleep(0.2)
    assert process_gone(pid)


async def test_a_tool_returning_an_error_is_an_error_result() -> None:
    model = ScriptedModel([ToolCall("fail", {"reason": "no"}), ToolCall("add", {"a": 1, "b": 2})], ["Ok."])
    async with stdio_server() as server:
        result = await Agent(model, toolsets=[server]).run("Try.")
    failed, added = results_of(result.messages)
    assert failed.is_error and failed.result == {"error": "Error executing tool fail"}
    assert added.result == {"result": 3}
    assert "Error executing tool fail" in str(model.requests[1].messages[-1].parts[0])


async def test_arguments_the_server_rejects_are_an_error_result_the_model_can_fix() -> None:
    model = ScriptedModel([ToolCall("add", {"a": 1}), ToolCall("add", {"a": "x", "b": 1})], ["Sorry."])
    async with stdio_server() as server:
        result = await Agent(model, toolsets=[server]).run("Add.")
    missing, wrong = results_of(result.messages)
    assert missing.is_error and "b: this argument is required" in missing.result["error"]  # checked before the call
    assert wrong.is_error and "a" in wrong.result["error"]  # the server validates the rest


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_list_changed_refreshes_the_tools_before_the_next_step(transport: str) -> None:
    with server_for(transport) as server:
        # The model streams on for a moment after its call (as models do): over HTTP the announcement
        # travels on a stream of its own, so it may arrive just after the call's result.
        model = ScriptedModel([ToolCall("grow", {}), Delay(0.5)], [ToolCall("extra", {"word": "hi"})], ["Grown."])
        async with server:
            result = await Agent(model, toolsets=[server]).run("Grow.")
            assert "extra" in [t.name for t in server.tools]
    assert "extra" not in [t.name for t in model.requests[0].tools]
    assert "extra" in [t.name for t in model.requests[1].tools]
    grown, extra = results_of(result.messages)
    assert grown.result == {"result": "grown"}
    assert (extra.result, extra.is_error) == ({"result": "extra hi"}, False)


async def test_a_hung_server_obeys_the_tool_timeout_and_stays_usable() -> None:
    model = ScriptedModel([ToolCall("hang", {})], [ToolCall("add", {"a": 5, "b": 5})], ["Ok."])
    async with stdio_server() as server:
        with anyio.fail_after(15):
            result = await Agent(model, toolsets=[server], tool_timeout=0.5).run("Hang.")
        assert server.connected
    hung, added = results_of(result.messages)
    assert hung.is_error and "did not finish within 0.5 seconds" in hung.result["error"]
    assert added.result == {"result": 10}


async def test_the_servers_own_timeout_wins_over_the_agents() -> None:
    model = ScriptedModel([ToolCall("hang", {})], ["Ok."])
    async with stdio_server(timeout=0.3) as server:
        result = await Agent(model, toolsets=[server], tool_timeout=30).run("Hang.")
    (hung,) = results_of(result.messages)
    assert "did not finish within 0.3 seconds" in hung.result["error"]


async def test_the_connection_is_owned_by_async_with_and_closed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    server = stdio_server(pid_file)
    assert not server.is_open
    async with server:
        model = ScriptedModel([ToolCall("slow", {"seconds": 0})], ["Ok."])
        await Agent(model, toolsets=[server]).run("Go.")
        pid = int(pid_file.read_text())
        assert not process_gone(pid)
    assert not server.is_open and not server.connected
    assert process_gone(pid)
    with pytest.raises(UserError, match="is not open"):
        await server.get_tools(None)  # type: ignore[arg-type]


async def test_a_run_opens_a_server_that_is_not_open_for_itself_alone(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    server = stdio_server(pid_file)
    entered = anyio.Event()
    release = anyio.Event()

    async def tool_hook(event: ToolResultEvent) -> None:
        entered.set()
        await release.wait()

    first = Agent(ScriptedModel([ToolCall("slow", {"seconds": 0})], ["Ok."]), toolsets=[server],
                  on_tool_result=tool_hook)
    second = Agent(ScriptedModel(["Hi."]), toolsets=[server])
    async with anyio.create_task_group() as tg:
        tg.start_soon(first.run, "Go.")
        await entered.wait()
        assert server.is_open
        with pytest.raises(UserError, match="opened by another run, for that run alone"):
            await second.run("Hello.")
        release.set()
    assert not server.is_open
    assert process_gone(int(pid_file.read_text()))


async def test_non_text_content_is_described_to_the_model_and_handed_to_the_application() -> None:
    events: list[ToolResultEvent] = []
    model = ScriptedModel([ToolCall("picture", {})], ["A dot."])
    async with stdio_server() as server:
        result = await Agent(model, toolsets=[server], on_tool_result=events.append).run("Draw.")
    (picture,) = results_of(result.messages)
    text, image = picture.result
    assert text == {"type": "text", "text": "a red dot"}
    assert (image["type"], image["media_type"], image["bytes"]) == ("image", "image/png", 70)
    assert "data" not in image  # the model never receives the bytes as text
    (file,) = events[0].metadata["files"]
    assert file["media_type"] == "image/png" and file["data"].startswith("iVBORw0KGgo")


async def test_images_and_binary_resources_become_the_results_files_and_reach_the_provider() -> None:
    turns = [FakeTurn(parts=[FakeToolCall(name="report", arguments={})]), FakeTurn(parts=[FakeText(text="Read.")])]
    async with FakeProviderServer("anthropic", turns) as provider, stdio_server(env={"MCP_FILES": "1"}) as server:
        result = await Agent(provider.model(), toolsets=[server]).run("The Q3 report, please.")
    (report,) = results_of(result.messages)
    assert report.files == [FilePart(media_type="image/png", data=PNG),
                            FilePart(media_type="application/pdf", data=PDF, name="q3.pdf")]
    text, image, resource = report.result  # the JSON result says where each file stood
    assert text == {"type": "text", "text": "Q3 report"}
    assert image == {"type": "image", "media_type": "image/png", "bytes": 70}
    assert resource == {"type": "resource", "media_type": "application/pdf", "bytes": 15,
                        "uri": "file:///reports/q3.pdf"}
    # The provider received them in the tool_result's content (read back by the fake Anthropic server).
    (received,) = provider.requests[1].pending_results()
    assert received.files == [FilePart(media_type="image/png", data=PNG),
                              FilePart(media_type="application/pdf", data=PDF, name="q3.pdf")]


async def test_prefixed_and_filtered_toolsets_over_one_connection() -> None:
    model = ScriptedModel([ToolCall("calc_add", {"a": 1, "b": 2})], ["3."])
    async with stdio_server() as server:
        toolset = server.filtered(["add", "shout"]).prefixed("calc")
        result = await Agent(model, toolsets=[toolset]).run("Add.")
    assert [t.name for t in model.requests[0].tools] == ["calc_add", "calc_shout"]
    (added,) = results_of(result.messages)
    assert (added.name, added.result) == ("calc_add", {"result": 3})


async def test_a_server_given_per_run_is_added_to_the_agents_tools() -> None:
    def local(x: int) -> int:
        """Local."""
        return x

    model = ScriptedModel([ToolCall("local", {"x": 1}), ToolCall("add", {"a": 1, "b": 1})], ["Ok."])
    agent = Agent(model, tools=[local])
    result = await agent.run("Go.", toolsets=[stdio_server().filtered(["add"])])
    assert [t.name for t in model.requests[0].tools] == ["local", "add"]
    assert [r.result for r in results_of(result.messages)] == [1, {"result": 2}]
    assert [t.name for t in agent.tools] == ["local"]  # nothing of the run stays on the agent


async def test_a_clash_between_toolsets_names_both() -> None:
    model = ScriptedModel(["Never."])
    async with stdio_server() as one, stdio_server() as two:
        with pytest.raises(UserError, match=r"Two tools are named 'add'.*prefixed"):
            await Agent(model, toolsets=[one, two]).run("Go.")
        result = await Agent(ScriptedModel(["Fine."]), toolsets=[one.prefixed("a"), two.prefixed("b")]).run("Go.")
    assert result.output == "Fine."


@pytest.mark.parametrize(
    ("command", "match"),
    [(["/no/such/server"], "Could not connect to the MCP server '/no/such/server'.*FileNotFoundError"),
     ([sys.executable, "-c", "pass"], "Could not connect to the MCP server")],
)
async def test_a_server_that_cannot_start_is_a_clear_error(command: list[str], match: str) -> None:
    with pytest.raises(MCPServerError, match=match):
        async with MCPServer.stdio(command[0], command[1:], connect_timeout=10):
            pass


async def test_a_program_that_does_not_speak_mcp_times_out_clearly() -> None:
    server = MCPServer.stdio(sys.executable, ["-c", "import time; time.sleep(60)"], connect_timeout=1)
    with pytest.raises(MCPServerError, match="did not start and list its tools within 1 seconds"):
        async with server:
            pass


async def test_a_run_whose_server_cannot_start_fails_with_a_valid_history() -> None:
    agent = Agent(ScriptedModel(["Never."]), toolsets=[MCPServer.stdio("/no/such/server")])
    async with agent.stream("Hi.") as run:
        with pytest.raises(MCPServerError):
            async for _ in run:
                pass
    assert run.messages == []


def test_servers_from_command_line_specs() -> None:
    stdio, http = servers_from_specs(["python -m tests.mcp.server --flag 'two words'"], ["http://127.0.0.1:9/mcp"])
    assert stdio.target.command == "python"  # type: ignore[union-attr]
    assert stdio.target.args == ["-m", "tests.mcp.server", "--flag", "two words"]  # type: ignore[union-attr]
    assert stdio.name == "python -m tests.mcp.server --flag 'two words'"
    assert http.target == "http://127.0.0.1:9/mcp" and http.name == "127.0.0.1:9"
    with pytest.raises(UserError, match="cannot be read"):
        servers_from_specs(["python 'unclosed"])
    with pytest.raises(UserError, match="must start with http"):
        servers_from_specs([], ["localhost:8000/mcp"])



async def test_concurrent_runs_share_one_open_connection() -> None:
    outputs: list[str] = []
    async with stdio_server() as server:
        agents = [Agent(ScriptedModel([ToolCall("slow", {"seconds": 0.3})], [f"Run {i}."]), toolsets=[server])
                  for i in range(3)]

        async def run(agent: Agent) -> None:
            result = await agent.run("Go.")
            assert results_of(result.messages)[0].result == {"result": "slept 0.3"}
            outputs.append(result.output)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for agent in agents:
                    tg.start_soon(run, agent)
    assert sorted(outputs) == ["Run 0.", "Run 1.", "Run 2."]


async def test_mcp_tools_are_traced_as_extensions() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolwire.telemetry import Instrumentation

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel([ToolCall("fail", {"reason": "x"})], ["Ok."])
    async with stdio_server() as server:
        await Agent(model, toolsets=[server], instrument=Instrumentation(tracer_provider=provider)).run("Go.")
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool fail"]
    assert (span.attributes or {})["gen_ai.tool.type"] == "extension"
    assert (span.attributes or {})["error.type"] == "tool_error"
