"""Agent state item 11: a tool's exception is kept (event, log) and nothing a tool raises breaks the run."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

from tests.agent.support import assert_valid_history, results_of
from tests.cli.support import clean_env
from toolwire import Agent, InMemoryChatMemory, ToolResultEvent, tool
from toolwire.testing import ScriptedModel, ToolCall


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


@pytest.mark.anyio
async def test_item11_the_exception_and_its_traceback_reach_the_event_and_the_log(
        caplog: pytest.LogCaptureFixture) -> None:
    """Agent state item 11: ToolResultEvent.exception and a `toolwire` log record with the traceback."""

    @tool
    def parse(text: str) -> int:
        """Parse a number."""
        return int(text)

    events: list[ToolResultEvent] = []
    model = ScriptedModel([ToolCall("parse", {"text": "x" * 3000})], ["It was not a number."])
    with caplog.at_level(logging.INFO, logger="toolwire"):
        result = await Agent(model, tools=[parse], on_tool_result=events.append).run("Parse it.")
    assert result.output == "It was not a number."
    exception = events[0].exception
    assert isinstance(exception, ValueError) and exception.__traceback__ is not None
    record = next(r for r in caplog.records if r.name == "toolwire")
    assert record.levelno == logging.WARNING and record.exc_info is not None and record.exc_info[1] is exception
    # The model reads the type and a shortened message, never a traceback.
    error = results_of(result.messages)[0].result["error"]
    assert error.startswith("The tool 'parse' failed with ValueError: invalid literal")
    assert len(error) < 1100 and "Traceback" not in error
    # The event's JSON form (what a server sends) leaves the exception out.
    from toolwire.events import event_to_dict

    assert "exception" not in event_to_dict(events[0])


@pytest.mark.anyio
async def test_item11_an_exception_whose_str_raises_is_an_ordinary_error_result() -> None:
    """Agent state item 11: a broken `__str__` no longer aborts the run with a bare ExceptionGroup."""

    @tool
    def weird() -> str:
        """Fails oddly."""
        raise Unprintable()

    model = ScriptedModel([ToolCall("weird", {})], ["Recovered."])
    result = await Agent(model, tools=[weird]).run("go")
    assert result.output == "Recovered."
    assert "its message could not be read: RuntimeError" in results_of(result.messages)[0].result["error"]


@pytest.mark.anyio
@pytest.mark.parametrize("exit_type", [SystemExit, KeyboardInterrupt])
@pytest.mark.parametrize("sync", [True, False])
async def test_item11_system_exit_in_a_tool_stores_the_round_then_propagates(exit_type: type[BaseException],
                                                                             sync: bool) -> None:
    """Agent state item 11: SystemExit/KeyboardInterrupt end the run cleanly: round stored, raised bare."""
    memory = InMemoryChatMemory()
    done: list[str] = []

    @tool
    async def fine() -> str:
        """Works."""
        done.append("fine")
        return "fine"

    def stop_sync() -> str:
        raise exit_type()

    async def stop_async() -> str:
        raise exit_type()

    stop = tool(name="stop", description="Stops the program.")(stop_sync if sync else stop_async)
    model = ScriptedModel([ToolCall("fine", {}), ToolCall("stop", {})], ["never requested"])
    with pytest.raises(exit_type):  # the exception itself, not an ExceptionGroup
        await Agent(model, tools=[fine, stop], memory=memory).run("go", conversation_id="c")
    stored = memory.messages("c")
    assert_valid_history(stored)
    assert [m.role for m in stored] == ["user", "assistant", "user"]
    assert results_of(stored)[0].result == "fine"
    assert f"stopped the program ({exit_type.__name__})" in results_of(stored)[1].result["error"]
    assert len(model.requests) == 1


def test_item11_nothing_is_printed_by_default() -> None:
    """Agent state item 11: the `toolwire` logger has a NullHandler: a failing tool prints nothing."""
    script = textwrap.dedent("""
        import asyncio
        from toolwire import Agent, tool
        from toolwire.testing import ScriptedModel, ToolCall

        @tool
        def boom() -> str:
            "Fails."
            raise ValueError("boom")

        agent = Agent(ScriptedModel([ToolCall("boom", {})], ["ok"]), tools=[boom])
        print(asyncio.run(agent.run("go")).output)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=clean_env(),
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n" and done.stderr == ""


