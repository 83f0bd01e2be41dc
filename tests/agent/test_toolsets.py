"""Per-run tools and toolsets: added to the agent's for one run, filtered, prefixed, clashes refused."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

import pytest

from toolwire import Agent, FunctionToolset, RunContext, Tool, Toolset, UserError, tool
from toolwire.testing import ScriptedModel, ToolCall

from .support import results_of

pytestmark = pytest.mark.anyio


@tool
def alpha() -> str:
    """A."""
    return "a"


@tool
def beta() -> str:
    """B."""
    return "b"


@tool
def gamma() -> str:
    """C."""
    return "c"


def offered(model: ScriptedModel, index: int = 0) -> list[str]:
    return [t.name for t in model.requests[index].tools]


async def test_per_run_tools_and_toolsets_add_to_the_agents_for_that_run_only() -> None:
    model = ScriptedModel([ToolCall("beta", {}), ToolCall("x_gamma", {})], ["Ok."], ["Again."])
    agent = Agent(model, tools=[alpha])
    result = await agent.run("Go.", tools=[beta], toolsets=[FunctionToolset([gamma]).prefixed("x")])
    assert offered(model) == ["alpha", "beta", "x_gamma"]
    assert [r.result for r in results_of(result.messages)] == ["b", "c"]
    await agent.run("Again.")
    assert offered(model, 2) == ["alpha"]


async def test_filters_by_name_and_by_a_predicate_of_the_context() -> None:
    model = ScriptedModel(["A."], ["B."])
    toolset = FunctionToolset([alpha, beta, gamma])
    await Agent(model, toolsets=[toolset.filtered(["alpha", "gamma"])]).run("Go.")

    def step_zero_only_beta(ctx: RunContext, t: Tool[..., Any]) -> bool:
        return t.name == "beta" and ctx.deps == "admin"

    await Agent(model, toolsets=[toolset.filtered(step_zero_only_beta)]).run("Go.", deps="admin")
    assert offered(model, 0) == ["alpha", "gamma"]
    assert offered(model, 1) == ["beta"]
    with pytest.raises(UserError, match="as a list"):
        toolset.filtered("alpha")


async def test_a_clash_is_refused_with_both_sources_named() -> None:
    agent = Agent(ScriptedModel(["Never."]), tools=[alpha])
    with pytest.raises(UserError, match="Two tools are named 'alpha': one from the agent's tools, one from toolset"):
        await agent.run("Go.", toolsets=[FunctionToolset([alpha], name="mine")])
    with pytest.raises(UserError, match="one from the agent's tools, one from this run's tools; rename one"):
        await agent.run("Go.", tools=[alpha])
    final = Tool(lambda: "x", name="final_result")
    typed = Agent(ScriptedModel(["Never."]), output_type=int, output_mode="tool")
    with pytest.raises(UserError, match="final_result"):
        await typed.run("Go.", tools=[final])


class Counting(Toolset):
    """A toolset that records being opened (the way a connection would be)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.name = "counting"

    async def get_tools(self, context: RunContext[Any]) -> Sequence[Tool[..., Any]]:
        self.events.append(f"tools@{context.step}")
        return [alpha]

    async def __aenter__(self) -> Counting:
        self.events.append("open")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.events.append("close")


async def test_async_with_agent_opens_its_toolsets_and_each_step_asks_them() -> None:
    counting = Counting()
    agent = Agent(ScriptedModel([ToolCall("alpha", {})], ["Ok."]), toolsets=[counting])
    async with agent:
        await agent.run("Go.")
        assert counting.events == ["open", "tools@0", "tools@1"]
    assert counting.events[-1] == "close"
    with pytest.raises(UserError, match="toolsets= takes Toolset objects"):
        await agent.run("Go.", toolsets=[alpha])  # type: ignore[list-item]
