"""Usage limits: requests, tool calls and tokens, checked before what would exceed them; a typed error with a
valid history."""

from __future__ import annotations

import pytest

from toolwire import Agent, InMemoryChatMemory, Usage, UsageLimitExceeded, UsageLimits, UserError, tool
from toolwire.testing import ScriptedModel, ToolCall

from .support import assert_valid_history, results_of

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool
def work(n: int) -> str:
    """Do some work."""
    ran.append(str(n))
    return f"did {n}"


def looping_model(rounds: int, *, input_tokens: int = 100, output_tokens: int = 10) -> ScriptedModel:
    turns = [[ToolCall("work", {"n": i}), Usage(input_tokens=input_tokens * (i + 1), output_tokens=output_tokens)]
             for i in range(rounds)]
    return ScriptedModel(*turns, ["Finished."])


async def test_a_request_limit_hit_mid_run_stops_before_the_request() -> None:
    memory = InMemoryChatMemory()
    model = looping_model(5)
    agent = Agent(model, tools=[work], usage_limits=UsageLimits(requests=3), memory=memory)
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("Work.", conversation_id="c")
    error = caught.value
    assert (error.limit, error.value) == ("requests", 3)
    assert len(model.requests) == 3  # the fourth request was never sent
    assert "one more would exceed the limit of 3" in str(error)
    assert len(error.messages) == 7  # prompt + 3 rounds of (call, results)
    assert_valid_history(error.messages)
    assert memory.messages("c") == error.messages


async def test_a_tool_call_limit_answers_the_calls_beyond_it_and_commits_the_round() -> None:
    ran.clear()
    model = ScriptedModel([ToolCall("work", {"n": 1}), ToolCall("work", {"n": 2}), ToolCall("work", {"n": 3})],
                          ["Never."])
    agent = Agent(model, tools=[work], usage_limits=UsageLimits(tool_calls=2), tool_execution="sequential")
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("Work.")
    assert caught.value.limit == "tool_calls"
    assert ran == ["1", "2"]
    first, second, third = results_of(caught.value.messages)
    assert (first.result, second.result) == ("did 1", "did 2")
    assert third.is_error and "reached its limit of 2 tool call(s)" in third.result["error"]
    assert_valid_history(caught.value.messages)
    assert len(model.requests) == 1


async def test_output_tokens_stop_the_run_before_the_next_request() -> None:
    model = looping_model(5, output_tokens=30)
    with pytest.raises(UsageLimitExceeded) as caught:
        await Agent(model, tools=[work], usage_limits=UsageLimits(output_tokens=50)).run("Work.")
    assert caught.value.limit == "output_tokens"
    assert len(model.requests) == 2  # 60 output tokens after two; a third would add more


async def test_input_tokens_are_projected_from_the_previous_request() -> None:
    # Requests take 100, 200, 300... input tokens. After two (300 used) the next would take at least 200
    # more: 500 > 450, so it is not sent, although 300 alone is under the limit.
    model = looping_model(5)
    with pytest.raises(UsageLimitExceeded) as caught:
        await Agent(model, tools=[work], usage_limits=UsageLimits(input_tokens=450)).run("Work.")
    assert caught.value.limit == "input_tokens"
    assert len(model.requests) == 2
    assert "at least 200 more" in str(caught.value)


async def test_total_tokens() -> None:
    model = looping_model(5)
    with pytest.raises(UsageLimitExceeded) as caught:
        await Agent(model, tools=[work], usage_limits=UsageLimits(total_tokens=400)).run("Work.")
    assert caught.value.limit == "total_tokens"
    assert len(model.requests) == 2  # 320 used, the next takes at least 201


async def test_a_response_that_ends_the_run_is_kept_even_over_a_token_limit() -> None:
    model = ScriptedModel(["A long answer.", Usage(input_tokens=10, output_tokens=500)])
    result = await Agent(model, usage_limits=UsageLimits(output_tokens=100)).run("Go.")
    assert result.output == "A long answer."


async def test_a_runs_own_limits_replace_the_agents_and_counts_are_reported() -> None:
    model = looping_model(2)
    agent = Agent(model, tools=[work], usage_limits=UsageLimits(requests=1))
    result = await agent.run("Work.", usage_limits=UsageLimits(requests=10, tool_calls=10))
    assert (result.requests, result.tool_calls) == (3, 2)
    assert result.usage.input_tokens == 300


def test_limits_are_whole_numbers() -> None:
    with pytest.raises(UserError, match=r"requests=\.\.\.\) must be a whole number"):
        UsageLimits(requests=-1)
    with pytest.raises(UserError, match="tool_calls"):
        UsageLimits(tool_calls=1.5)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="usage_limits must be a UsageLimits"):
        Agent(ScriptedModel(["A."]), usage_limits={"requests": 1})  # type: ignore[typeddict-item]
