"""`UsageBudget`: limits shared by several runs and agents, concurrent or not; the per-request input limit."""

from __future__ import annotations

import threading

import anyio
import pytest

from toolwire import (
    Agent,
    Usage,
    UsageBudget,
    UsageBudgetExceeded,
    UsageLimitExceeded,
    UsageLimits,
    UserError,
    tool,
)
from toolwire.testing import Delay, ScriptedModel, ToolCall

from .support import assert_valid_history

pytestmark = pytest.mark.anyio


@tool
def work(n: int) -> str:
    """Do some work."""
    return f"did {n}"


def two_step_model(*, delay: float = 0.0, tokens: int = 0) -> ScriptedModel:
    """A run of two requests: a tool call, then the answer (each reporting `tokens` in and out)."""
    usage = [Usage(input_tokens=tokens, output_tokens=tokens)] if tokens else []
    return ScriptedModel([Delay(delay), ToolCall("work", {"n": 1}), *usage], [Delay(delay), "Done.", *usage])


async def test_one_budget_spans_runs_of_different_agents() -> None:
    budget = UsageBudget(requests=3, name="team-a")
    first, second = two_step_model(), two_step_model()
    await Agent(first, tools=[work], budget=budget).run("Go.")
    with pytest.raises(UsageBudgetExceeded) as caught:
        await Agent(second, tools=[work]).run("Go.", budget=budget)
    error = caught.value
    assert isinstance(error, UsageLimitExceeded) and (error.limit, error.value) == ("requests", 3)
    assert "the usage budget 'team-a' (requests=3)" in str(error)
    assert "The runs sharing the budget have made 3 model request(s)" in str(error)
    assert (len(first.requests), len(second.requests)) == (2, 1)
    assert budget.requests_used == 3
    assert_valid_history(error.messages)


async def test_concurrent_runs_never_make_more_requests_than_the_budget() -> None:
    budget = UsageBudget(requests=7)
    models = [two_step_model(delay=0.02) for _ in range(6)]
    outcomes: list[str] = []

    async def one(model: ScriptedModel) -> None:
        try:
            await Agent(model, tools=[work]).run("Go.", budget=budget)
            outcomes.append("done")
        except UsageBudgetExceeded as exc:
            assert_valid_history(exc.messages)
            outcomes.append("stopped")

    async with anyio.create_task_group() as tg:
        for model in models:
            tg.start_soon(one, model)
    assert sum(len(m.requests) for m in models) == 7 == budget.requests_used
    assert outcomes.count("stopped") >= 3  # 6 runs of 2 requests cannot all finish on 7


def test_runs_on_threads_share_a_budget_exactly() -> None:
    budget = UsageBudget(tool_calls=5)
    stopped: list[int] = []
    limits: list[str] = []

    def one(index: int) -> None:
        model = ScriptedModel([ToolCall("work", {"n": 1}), ToolCall("work", {"n": 2})], ["Done."])
        try:
            Agent(model, tools=[work]).run_sync("Go.", budget=budget)
        except UsageBudgetExceeded as exc:
            stopped.append(index)
            limits.append(exc.limit)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert budget.tool_calls_used == 5  # 8 calls were asked for; exactly 5 ran
    assert len(stopped) >= 2 and set(limits) == {"tool_calls"}


async def test_tokens_of_every_run_count_against_the_budget() -> None:
    budget = UsageBudget(total_tokens=500)
    await Agent(two_step_model(tokens=100), tools=[work], budget=budget).run("Go.")
    assert budget.usage == Usage(input_tokens=200, output_tokens=200)
    late = two_step_model(tokens=100)
    with pytest.raises(UsageBudgetExceeded) as caught:
        await Agent(late, tools=[work], budget=budget).run("Go.")
    assert caught.value.limit == "total_tokens"
    assert len(late.requests) == 1  # 400 used + its first request's 100 input: the second is refused


async def test_the_per_request_input_limit_stops_before_a_request_that_would_resend_too_much() -> None:
    turns = [[ToolCall("work", {"n": i}), Usage(input_tokens=100 * (i + 1), output_tokens=5)] for i in range(4)]
    model = ScriptedModel(*turns, ["Finished."])
    agent = Agent(model, tools=[work], usage_limits=UsageLimits(request_input_tokens=150))
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("Work.")
    error = caught.value
    assert (error.limit, error.value) == ("request_input_tokens", 150)
    assert len(model.requests) == 2  # the second sent 200 input tokens; nothing more was sent after it
    assert "Its last request sent 200 input tokens" in str(error)
    assert_valid_history(error.messages)
    with pytest.raises(UserError, match="request_input_tokens"):
        UsageLimits(request_input_tokens=-1)


async def test_a_budget_must_be_a_usage_budget() -> None:
    with pytest.raises(UserError, match="budget= takes a UsageBudget"):
        await Agent(ScriptedModel(["A."])).run("Go.", budget=UsageLimits(requests=1))  # type: ignore[arg-type]
