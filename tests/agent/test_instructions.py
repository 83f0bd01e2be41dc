"""Dynamic instructions: `system=` as text, functions of the run context (sync or async), or a list."""

from __future__ import annotations

import pytest

from toolwire import Agent, InMemoryChatMemory, InstructionError, Message, RunContext, UserError, tool
from toolwire.testing import ScriptedModel, ToolCall

from .support import assert_valid_history

pytestmark = pytest.mark.anyio


@tool
def noop() -> str:
    """Nothing."""
    return "ok"


def system_of(model: ScriptedModel, index: int) -> str | None:
    first = model.requests[index].messages[0]
    return first.text if first.role == "system" else None


async def test_functions_are_evaluated_before_every_request() -> None:
    def step(ctx: RunContext) -> str:
        return f"This is request {ctx.step + 1}."

    async def later(ctx: RunContext) -> str | None:
        return "Tools have run." if ctx.tool_calls else None

    def plain() -> str:
        return "No context needed."

    model = ScriptedModel([ToolCall("noop", {})], ["Done."])
    await Agent(model, tools=[noop], system=["Be brief.", step, later, plain]).run("Go.")
    assert system_of(model, 0) == "Be brief.\n\nThis is request 1.\n\nNo context needed."
    assert system_of(model, 1) == "Be brief.\n\nThis is request 2.\n\nTools have run.\n\nNo context needed."


async def test_a_single_function_and_plain_text_still_work() -> None:
    model = ScriptedModel(["A."], ["B."])
    await Agent(model, system=lambda ctx: "From a lambda.").run("Go.")
    await Agent(model, system="Static.").run("Go.")
    assert [system_of(model, 0), system_of(model, 1)] == ["From a lambda.", "Static."]


async def test_an_instruction_that_returns_nothing_adds_no_system_message() -> None:
    model = ScriptedModel(["A."])
    await Agent(model, system=lambda ctx: None).run("Go.")
    assert system_of(model, 0) is None


async def test_an_instruction_that_raises_names_itself_and_keeps_the_history_valid() -> None:
    def user_profile(ctx: RunContext) -> str:
        if ctx.step == 1:
            raise KeyError("profile")
        return "Profile."

    memory = InMemoryChatMemory()
    model = ScriptedModel([ToolCall("noop", {})], ["Never."])
    agent = Agent(model, tools=[noop], system=user_profile, memory=memory)
    with pytest.raises(InstructionError) as caught:
        await agent.run("Go.", conversation_id="c")
    error = caught.value
    assert error.instruction.endswith("test_an_instruction_that_raises_names_itself_and_keeps_the_history_valid."
                                      "<locals>.user_profile")
    assert "raised KeyError" in str(error) and "before model request 2" in str(error)
    assert isinstance(error.__cause__, KeyError)
    assert [m.role for m in error.messages] == ["user", "assistant", "user"]
    assert_valid_history(error.messages)
    assert memory.messages("c") == error.messages  # the round that ran is stored; nothing half-done
    assert len(model.requests) == 1  # the second request was never sent


async def test_an_instruction_returning_something_else_than_text_is_an_error() -> None:
    with pytest.raises(InstructionError, match="returned int; it must return text"):
        await Agent(ScriptedModel(["A."]), system=lambda ctx: 42).run("Go.")  # type: ignore[arg-type,return-value]


def test_system_must_be_text_or_functions() -> None:
    with pytest.raises(UserError, match="Each part of system= is text or a function"):
        Agent(ScriptedModel(["A."]), system=["ok", 3])  # type: ignore[list-item]


async def test_instructions_are_not_stored_in_the_history() -> None:
    result = await Agent(ScriptedModel(["A."]), system=lambda ctx: "Secret rules.").run("Go.")
    assert all(m.role != "system" for m in result.messages)
    assert result.messages[0] == Message.user("Go.")
