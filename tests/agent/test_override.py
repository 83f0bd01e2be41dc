"""`Agent.override`: a block that swaps the model, deps, tools, toolsets or instructions, restores them on
exit, nests, and stays inside the task (or thread) that entered it."""

from __future__ import annotations

import anyio
import pytest

from toolwire import Agent, FunctionToolset, RunContext, UserError, tool
from toolwire.testing import Delay, ScriptedModel, ToolCall

from .support import results_of

pytestmark = pytest.mark.anyio


@tool
def whose(ctx: RunContext[str]) -> str:
    """Whose data this run sees."""
    return f"deps={ctx.deps}"


@tool
def real_tool() -> str:
    """Talks to production."""
    raise AssertionError("the real tool must not run under an override")


@tool
def fake_tool() -> str:
    """A stand-in."""
    return "fake"


def production_agent() -> Agent[str, str]:
    return Agent(ScriptedModel(name="production"), tools=[whose], deps_type=str, system="Production rules.")


async def test_the_model_and_deps_are_replaced_inside_the_block_and_restored_after() -> None:
    agent = production_agent()
    production = agent.model
    test_model = ScriptedModel([ToolCall("whose", {})], ["Done."])
    with agent.override(model=test_model, deps="test-db"):
        assert agent.model is production  # the attribute is untouched; runs see the override
        result = await agent.run("Go.", deps="prod-db")  # the override wins over the run's own deps
    (answer,) = results_of(result.messages)
    assert answer.result == "deps=test-db"
    assert len(test_model.requests) == 2  # the call, then the answer: all to the test model
    later = ScriptedModel(["After."])
    agent.model = later
    assert (await agent.run("Go.", deps="prod-db")).output == "After."


async def test_async_with_and_nested_blocks_change_only_what_they_name() -> None:
    agent = production_agent()
    outer, inner = ScriptedModel(["outer 1"], ["outer 2"]), ScriptedModel(["inner"])
    async with agent.override(model=outer, deps="outer-deps"):
        assert (await agent.run("Go.")).output == "outer 1"
        with agent.override(model=inner, system="Test rules."):
            assert (await agent.run("Go.")).output == "inner"
        assert (await agent.run("Go.")).output == "outer 2"
    assert inner.requests[0].messages[0].text == "Test rules."
    assert outer.requests[1].messages[0].text == "Production rules."


async def test_tools_and_toolsets_are_replaced() -> None:
    agent = Agent(ScriptedModel(), tools=[real_tool], toolsets=[FunctionToolset([whose], name="prod")])
    model = ScriptedModel([ToolCall("fake_tool", {})], ["Done."])
    with agent.override(model=model, tools=[fake_tool], toolsets=[]):
        result = await agent.run("Go.")
    assert [t.name for t in model.requests[0].tools] == ["fake_tool"]
    assert results_of(result.messages)[0].result == "fake"


async def test_overrides_are_task_local_so_parallel_tests_do_not_leak() -> None:
    agent = production_agent()
    agent.model = ScriptedModel(["production answer"])
    outputs: dict[str, str] = {}
    inside = anyio.Event()

    async def test_case(label: str, delay: float) -> None:
        model = ScriptedModel([Delay(delay), f"answer of {label}"])
        with agent.override(model=model, deps=label):
            await anyio.sleep(delay)
            outputs[label] = (await agent.run("Go.")).output
            inside.set()

    async def bystander() -> None:
        await inside.wait()
        # Another task, no override of its own, while both overrides are active: it sees the agent as it is.
        outputs["bystander"] = (await agent.run("Go.")).output

    async with anyio.create_task_group() as tg:
        tg.start_soon(test_case, "a", 0.2)
        tg.start_soon(test_case, "b", 0.05)
        tg.start_soon(bystander)
    assert outputs == {"a": "answer of a", "b": "answer of b", "bystander": "production answer"}


async def test_run_sync_inside_a_running_loop_sees_the_override() -> None:
    agent = production_agent()
    with agent.override(model=ScriptedModel(["From the worker thread."])):
        result = agent.run_sync("Go.")  # runs on a thread of its own: the context goes with it
    assert result.output == "From the worker thread."


def test_run_sync_without_a_loop_sees_the_override() -> None:
    agent = production_agent()
    with agent.override(model=ScriptedModel(["Plain script."])):
        assert agent.run_sync("Go.").output == "Plain script."


async def test_a_bad_override_is_refused_at_once() -> None:
    agent = production_agent()
    with pytest.raises(UserError, match=r"override\(model=\.\.\.\) takes a Model"):
        agent.override(model=42)
    with pytest.raises(UserError, match="Toolset objects"):
        agent.override(toolsets=[whose])
