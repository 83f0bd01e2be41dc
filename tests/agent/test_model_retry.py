"""`ModelRetry`: a tool or an output validator asks the model to try again; per-tool retry limits end the
run with `ToolRetriesExceeded` and a valid history."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from toolwire import (
    Agent,
    ModelRetry,
    OutputValidationError,
    RunContext,
    ToolResultEvent,
    ToolRetriesExceeded,
    UserError,
    tool,
)
from toolwire.testing import ScriptedModel, ToolCall

from .support import assert_valid_history, results_of

pytestmark = pytest.mark.anyio


def lookup_tool(fail_times: int, *, retries: int | None = None, seen: list[int] | None = None) -> Any:
    calls = {"n": 0}

    @tool(retries=retries)
    def lookup(ctx: RunContext, city: str) -> str:
        """Look a city up."""
        if seen is not None:
            seen.append(ctx.retry)
        calls["n"] += 1
        if calls["n"] <= fail_times:
            raise ModelRetry(f"No city named {city!r}; use the full English name.")
        return f"{city}: found"

    return lookup


async def test_the_message_goes_back_as_the_error_result_and_the_model_tries_again() -> None:
    seen: list[int] = []
    model = ScriptedModel([ToolCall("lookup", {"city": "Pari"})], [ToolCall("lookup", {"city": "Paris"})], ["Ok."])
    events: list[ToolResultEvent] = []
    agent = Agent(model, tools=[lookup_tool(1, seen=seen)], on_tool_result=events.append)
    result = await agent.run("Find Paris.")
    first, second = results_of(result.messages)
    assert first.is_error and first.result == {"error": "No city named 'Pari'; use the full English name."}
    assert (second.is_error, second.result) == (False, "Paris: found")
    assert seen == [0, 1]  # ctx.retry: how many retries this tool has asked for so far
    assert isinstance(events[0].exception, ModelRetry)
    assert result.output == "Ok."
    assert_valid_history(result.messages)


async def test_one_retry_more_than_the_tools_limit_stops_the_run_with_a_typed_error() -> None:
    model = ScriptedModel(*[[ToolCall("lookup", {"city": f"x{i}"})] for i in range(5)], ["never"])
    agent = Agent(model, tools=[lookup_tool(99, retries=2)])
    with pytest.raises(ToolRetriesExceeded) as caught:
        await agent.run("Find it.")
    error = caught.value
    assert (error.tool, error.retries) == ("lookup", 2)
    assert len(model.requests) == 3  # the first try and two retries; the third retry was not asked for
    assert "3 time(s) in a row, more than its limit of 2" in str(error)
    assert "No city named 'x2'" in str(error)
    assert_valid_history(error.messages)
    last = results_of(error.messages)[-1]
    assert last.is_error and "x2" in last.result["error"]  # the round that went over is kept, answered


async def test_the_agents_default_applies_to_tools_without_their_own_limit() -> None:
    model = ScriptedModel([ToolCall("lookup", {"city": "a"})], ["never"])
    with pytest.raises(ToolRetriesExceeded) as caught:
        await Agent(model, tools=[lookup_tool(99)], retries=0).run("Go.")
    assert caught.value.retries == 0
    model = ScriptedModel(*[[ToolCall("lookup", {"city": str(i)})] for i in range(4)], ["Found."])
    result = await Agent(model, tools=[lookup_tool(3)], retries=3).run("Go.")
    assert result.output == "Found."


async def test_a_success_starts_the_count_again() -> None:
    outcomes = iter([ModelRetry("once"), "ok", ModelRetry("twice"), "ok"])

    @tool(retries=1)
    def flaky() -> str:
        """Sometimes asks again."""
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    model = ScriptedModel(*[[ToolCall("flaky", {})] for _ in range(4)], ["Done."])
    result = await Agent(model, tools=[flaky]).run("Go.")
    assert result.output == "Done."
    assert [r.is_error for r in results_of(result.messages)] == [True, False, True, False]


async def test_an_output_validator_raising_model_retry_sends_the_answer_back() -> None:
    class City(BaseModel):
        name: str

    retries_seen: list[int] = []
    model = ScriptedModel([ToolCall("final_result", {"name": "paris"})], [ToolCall("final_result", {"name": "Paris"})])
    agent = Agent(model, output_type=City)

    @agent.output_validator
    def capitalised(ctx: RunContext, city: City) -> City:
        retries_seen.append(ctx.retry)
        if not city.name[:1].isupper():
            raise ModelRetry("Capitalise the name.")
        return city

    result = await agent.run("Which city?")
    assert result.output == City(name="Paris")
    assert retries_seen == [0, 1]
    first = results_of(result.messages)[0]
    assert "Capitalise the name." in first.result["error"]

    text_model = ScriptedModel(["no"], ["still no"])
    strict = Agent(text_model, output_retries=1, output_validators=[_always_retry])
    with pytest.raises(OutputValidationError, match=r"Say yes\."):
        await strict.run("Say yes.")
    assert text_model.requests[1].messages[-1].text.startswith("Your answer was not accepted: Say yes.")


def _always_retry(output: str) -> str:
    raise ModelRetry("Say yes.")


def test_a_negative_retry_limit_is_refused() -> None:
    with pytest.raises(UserError, match="retries must be a whole number"):
        tool(retries=-1)(lambda: None)
    with pytest.raises(UserError, match="retries"):
        Agent(ScriptedModel(), retries=-2)
