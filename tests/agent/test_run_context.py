"""The run context carries the model, the run id, the retry count and whether an output is partial;
`@agent.output_validator(partial=True)` checks partial answers while they stream; `@agent.instructions`."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from toolwire import Agent, Model, ModelRetry, OutputRejected, RunContext, UserError, tool
from toolwire.testing import ScriptedModel, ToolCall

from .support import results_of

pytestmark = pytest.mark.anyio


async def test_tools_instructions_and_validators_see_the_model_and_the_run_id() -> None:
    seen: dict[str, tuple[Any, str | None]] = {}

    @tool
    def probe(ctx: RunContext) -> str:
        """Look at the context."""
        seen["tool"] = (ctx.model, ctx.run_id)
        return "ok"

    def instruction(ctx: RunContext) -> str:
        seen["instruction"] = (ctx.model, ctx.run_id)
        return "Be brief."

    def validator(ctx: RunContext, output: str) -> str:
        seen["validator"] = (ctx.model, ctx.run_id)
        return output

    model = ScriptedModel([ToolCall("probe", {})], ["Done."])
    agent = Agent(ScriptedModel(name="unused"), tools=[probe], system=instruction, output_validators=[validator])
    with agent.override(model=model):
        async with agent.stream("Go.") as run:
            async for _ in run:
                pass
    assert set(seen) == {"tool", "instruction", "validator"}
    for where, (seen_model, run_id) in seen.items():
        assert seen_model is model, where  # the model the run really uses
        assert run_id == run.id and run_id, where
    ids = set()
    for _ in range(2):
        ids.add(await _run_id_of(Agent(ScriptedModel(["A."]), system=_remember_id)))
    assert len(ids) == 2  # every run has an id of its own


_ids: list[str] = []


def _remember_id(ctx: RunContext) -> None:
    assert ctx.run_id is not None
    _ids.append(ctx.run_id)


async def _run_id_of(agent: Agent[Any, Any]) -> str:
    await agent.run("Go.")
    return _ids[-1]


class Report(BaseModel):
    title: str
    points: list[str] = []


REPORT = {"title": "Quarterly numbers", "points": ["revenue up", "costs flat", "hiring paused", "outlook good"]}


def streaming_model() -> ScriptedModel:
    return ScriptedModel([ToolCall("final_result", REPORT, chunks=24)])


async def test_partial_validators_run_on_partials_with_partial_output_set_and_others_do_not() -> None:
    agent = Agent(streaming_model(), output_type=Report)
    calls: list[tuple[str, bool]] = []

    @agent.output_validator(partial=True)
    def shout(ctx: RunContext, report: Report) -> Report:
        calls.append(("partial-aware", ctx.partial_output))
        return report.model_copy(update={"title": report.title.upper()})

    @agent.output_validator
    def final_only(ctx: RunContext, report: Report) -> None:
        calls.append(("final-only", ctx.partial_output))

    partials: list[Report] = []
    async with agent.run_stream("Report.") as stream:
        async for chunk in stream:
            if chunk.partial is not None:
                partials.append(chunk.partial)
    assert len(partials) >= 3
    assert all(p.title == p.title.upper() for p in partials)  # what the validator returned replaced them
    assert stream.result.output.title == "QUARTERLY NUMBERS"
    partial_calls = [c for c in calls if c[1]]
    assert len(partial_calls) == len(partials) and {c[0] for c in partial_calls} == {"partial-aware"}
    assert calls[-2:] == [("partial-aware", False), ("final-only", False)]  # the final answer: every validator


async def test_a_rejected_partial_is_withheld_without_asking_the_model_again() -> None:
    agent = Agent(streaming_model(), output_type=Report)

    @agent.output_validator(partial=True)
    def enough_points(ctx: RunContext, report: Report) -> None:
        if ctx.partial_output and len(report.points) < 2:
            raise OutputRejected("Too few points to show.")
        if ctx.partial_output and len(report.points) == 3:
            raise ModelRetry("Not this one either.")

    shown: list[int] = []
    withheld = 0
    async with agent.run_stream("Report.") as stream:
        async for chunk in stream:
            if chunk.partial is not None:
                shown.append(len(chunk.partial.points))
            elif chunk.partial_data is not None:
                withheld += 1
    assert shown and min(shown) >= 2 and 3 not in shown
    assert withheld >= 1
    assert stream.result.output == Report(**REPORT)
    assert len(agent.model.requests) == 1  # type: ignore[attr-defined]  # no retry for a partial


async def test_instructions_decorator_sync_and_async_after_system() -> None:
    model = ScriptedModel([ToolCall("noop", {})], ["Done."])

    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    agent = Agent(model, tools=[noop], system="Be brief.", deps_type=str)

    @agent.instructions
    def user(ctx: RunContext[str]) -> str:
        return f"The user is {ctx.deps}."

    @agent.instructions
    async def progress(ctx: RunContext[str]) -> str | None:
        return f"Tools run so far: {ctx.tool_calls}." if ctx.step else None

    @agent.instructions
    def plain() -> str:
        return "Answer in English."

    result = await agent.run("Go.", deps="Ada")
    assert results_of(result.messages)[0].result == "ok"
    systems = [r.messages[0].text for r in model.requests]
    assert systems == ["Be brief.\n\nThe user is Ada.\n\nAnswer in English.",
                       "Be brief.\n\nThe user is Ada.\n\nTools run so far: 1.\n\nAnswer in English."]
    assert user(RunContext(deps="Bo")) == "The user is Bo."  # the function is handed back as it is
    replaced = ScriptedModel(["Hi."])
    with agent.override(model=replaced, system="Only this."):  # replaces system= and @agent.instructions
        await agent.run("Go.", deps="Ada")
    assert replaced.requests[0].messages[0].text == "Only this."
    with pytest.raises(UserError, match="decorates a function"):
        agent.instructions(42)  # type: ignore[type-var]


async def test_the_model_is_typed_on_the_context() -> None:
    def check(ctx: RunContext) -> None:
        assert isinstance(ctx.model, Model)

    await Agent(ScriptedModel(["A."]), system=check).run("Go.")
