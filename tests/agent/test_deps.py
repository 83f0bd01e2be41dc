"""`deps=` reaches everything a run calls: tools, approval rules, dynamic instructions, output validators and
toolset filters, each through `RunContext.deps`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from toolwire import Agent, FunctionToolset, RunContext, ToolCallPart, UserError, tool
from toolwire.memory import InMemoryChatMemory
from toolwire.testing import ScriptedModel, ToolCall

from .support import results_of

pytestmark = pytest.mark.anyio


@dataclass
class Deps:
    user: str
    limit: int = 100
    seen: list[str] = field(default_factory=list)


@tool
def whoami(ctx: RunContext[Deps]) -> str:
    """The current user."""
    ctx.deps.seen.append(f"tool@{ctx.step}:{ctx.call.id}")
    return ctx.deps.user


@tool
def pay(ctx: RunContext[Deps], amount: int) -> str:
    """Pay."""
    return f"{ctx.deps.user} paid {amount}"


async def test_deps_reach_a_tool_a_predicate_an_instruction_a_validator_and_a_filter() -> None:
    deps = Deps(user="ada", limit=100)

    def over_the_users_limit(ctx: RunContext[Deps], call: ToolCallPart) -> bool:
        deps.seen.append(f"rule:{call.name}:{ctx.deps.user}")
        return bool(call.arguments.get("amount", 0) > ctx.deps.limit)

    def instruction(ctx: RunContext[Deps]) -> str:
        ctx.deps.seen.append(f"instruction@{ctx.step}")
        return f"The user is {ctx.deps.user}."

    def validator(ctx: RunContext[Deps], output: str) -> str:
        ctx.deps.seen.append("validator")
        return f"{output} ({ctx.deps.user})"

    def only_for_ada(ctx: RunContext[Deps], t: Any) -> bool:
        return ctx.deps.user == "ada"

    model = ScriptedModel([ToolCall("whoami", {}), ToolCall("pay", {"amount": 50}), ToolCall("pay", {"amount": 500})],
                          ["Done."])
    agent = Agent(model, tools=[whoami], toolsets=[FunctionToolset([pay]).filtered(only_for_ada)],
                  system=["Be brief.", instruction], requires_approval=over_the_users_limit,
                  output_validators=[validator], deps_type=Deps)
    result = await agent.run("Pay twice.", deps=deps)
    assert result.paused
    assert [c.arguments for c in result.pending] == [{"amount": 500}]
    assert model.requests[0].messages[0].text == "Be brief.\n\nThe user is ada."
    assert "tool@0:call_1" in deps.seen and "instruction@0" in deps.seen
    assert "rule:pay:ada" in deps.seen

    assert result.state is not None
    resumed = await agent.run(resume=result.state, approvals={result.pending[0].id: True}, deps=deps)
    assert resumed.output == "Done. (ada)"
    assert [r.result for r in results_of(resumed.messages)] == ["ada", "ada paid 50", "ada paid 500"]
    assert deps.seen[-2:] == ["instruction@1", "validator"]

    # Another user: the filter hides `pay` (the model calls it anyway and is told there is no such tool).
    other = Deps(user="bob")
    model.add_turn([ToolCall("pay", {"amount": 1})])
    model.add_turn(["No."])
    refused = await agent.run("Pay.", deps=other)
    assert [t.name for t in model.requests[-1].tools] == ["whoami"]
    assert "There is no tool named 'pay'" in results_of(refused.messages)[0].result["error"]


async def test_an_agent_without_deps_gives_none() -> None:
    @tool
    def peek(ctx: RunContext) -> str:
        """Peek."""
        return repr(ctx.deps)

    result = await Agent(ScriptedModel([ToolCall("peek", {})], ["Ok."]), tools=[peek]).run("Go.")
    assert results_of(result.messages)[0].result == "None"


async def test_the_context_carries_the_run_so_far() -> None:
    contexts: list[tuple[int, int, int, str | None, int]] = []

    @tool
    def probe(ctx: RunContext) -> str:
        """Probe."""
        contexts.append((ctx.step, ctx.requests, ctx.tool_calls, ctx.conversation_id, len(ctx.messages)))
        return "ok"

    from toolwire import Usage

    model = ScriptedModel([ToolCall("probe", {}), Usage(input_tokens=10, output_tokens=2)],
                          [ToolCall("probe", {})], ["Done."])
    agent = Agent(model, tools=[probe], memory=InMemoryChatMemory())
    await agent.run("Go.", conversation_id="c1")
    assert contexts == [(0, 1, 1, "c1", 1), (1, 2, 2, "c1", 3)]


def test_run_context_call_exists_only_inside_a_tool() -> None:
    ctx: RunContext[None] = RunContext()
    assert ctx.tool_call is None
    with pytest.raises(UserError, match="only inside a tool"):
        _ = ctx.call
