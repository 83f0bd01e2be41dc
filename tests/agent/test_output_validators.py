"""Output validators: reject an answer with a message to the model (retried like a validation error), or
change it; and union output types."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from toolwire import Agent, OutputRejected, OutputValidationError, RunContext, ToolResultPart
from toolwire.testing import ScriptedModel, ToolCall

from .support import assert_valid_history

pytestmark = pytest.mark.anyio


class City(BaseModel):
    name: str
    country: str


class Country(BaseModel):
    code: str
    population: int


def no_shouting(output: str) -> str:
    if output.isupper():
        raise OutputRejected("Do not answer in capitals.")
    return output.strip()


async def test_a_rejected_text_answer_is_sent_back_and_answered_again() -> None:
    model = ScriptedModel(["HELLO."], ["  Hello.  "])
    result = await Agent(model, output_validators=[no_shouting]).run("Greet me.")
    assert result.output == "Hello."
    assert model.requests[1].messages[-1].text == "Your answer was not accepted: Do not answer in capitals. Answer again."
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


async def test_rejections_count_against_output_retries() -> None:
    model = ScriptedModel(["NO."], ["STILL NO."])
    with pytest.raises(OutputValidationError) as caught:
        await Agent(model, output_validators=[no_shouting], output_retries=1).run("Greet me.")
    assert caught.value.errors == "Do not answer in capitals."
    assert_valid_history(caught.value.messages)


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_typed_output_is_validated_then_checked_by_the_validators(mode: str) -> None:
    calls: list[str] = []

    agent = Agent(ScriptedModel(), output_type=City, output_mode=mode, deps_type=str)  # type: ignore[arg-type]

    @agent.output_validator
    async def in_the_right_country(ctx: RunContext[str], city: City) -> City:
        calls.append(city.name)
        if city.country != ctx.deps:
            raise OutputRejected(f"The city must be in {ctx.deps}.")
        return city.model_copy(update={"name": city.name.title()})

    model = agent.model
    assert isinstance(model, ScriptedModel)
    if mode == "native":
        model.add_turn(['{"name": "lyon", "country": "Spain"}'])
        model.add_turn(['{"name": "lyon", "country": "France"}'])
    else:
        model.add_turn([ToolCall("final_result", {"name": "lyon", "country": "Spain"})])
        model.add_turn([ToolCall("final_result", {"name": "lyon", "country": "France"})])
    result = await agent.run("A city?", deps="France")
    assert result.output == City(name="Lyon", country="France")
    assert calls == ["lyon", "lyon"]
    if mode == "native":
        assert "not accepted: The city must be in France." in model.requests[1].messages[-1].text
    else:
        rejected = model.requests[1].messages[-1].parts[0]
        assert isinstance(rejected, ToolResultPart) and rejected.is_error
        assert "The final result was not accepted: The city must be in France." in rejected.result["error"]
    assert_valid_history(result.messages)


async def test_a_validator_that_crashes_ends_the_run_with_its_exception() -> None:
    def broken(output: str) -> str:
        raise RuntimeError("validator bug")

    agent = Agent(ScriptedModel(["Hi."]), output_validators=[broken])
    async with agent.stream("Go.") as run:
        with pytest.raises(RuntimeError, match="validator bug"):
            async for _ in run:
                pass
    assert [m.role for m in run.messages] == ["user", "assistant"]


async def test_a_union_output_type_validates_either_member() -> None:
    agent = Agent(ScriptedModel([ToolCall("final_result", {"result": {"code": "FR", "population": 68}})]),
                  output_type=City | Country)
    result = await agent.run("Something.")
    output = result.output
    assert isinstance(output, Country) and output.code == "FR"
    tool = agent.model.requests[0].tools[-1]  # type: ignore[attr-defined]
    assert tool.name == "final_result" and "anyOf" in tool.parameters["properties"]["result"]
