"""Typed output: native structured output per protocol, the final_result tool, partial objects, retries."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import orjson
import pytest
from pydantic import BaseModel, ConfigDict, TypeAdapter
from typing_extensions import TypedDict

from tests.agent.support import assert_valid_history, results_of
from toolwire import Agent, Message, OutputValidationError, UserError, get_model, tool
from toolwire.agent import _stream
from toolwire.testing import (
    AutoResponder,
    FakeProviderServer,
    FakeText,
    FakeToolCall,
    FakeTurn,
    ScriptedModel,
    Text,
    ToolCall,
)
from toolwire.testing.fake import FAKE_PROTOCOLS


class City(BaseModel):
    name: str
    population: int


class Landmark(BaseModel):
    name: str
    note: str


class Guide(BaseModel):
    city: str
    summary: str
    landmarks: list[Landmark]


PARIS = {"name": "Paris", "population": 2102650}
GUIDE = {"city": "Paris", "summary": "The capital of France, on the Seine.",
         "landmarks": [{"name": "Louvre", "note": "The largest art museum."},
                       {"name": "Eiffel Tower", "note": "Wrought iron, 1889."}]}


@tool
def get_population(city: str) -> int:
    """The population of a city."""
    return {"Paris": 2102650}[city]


def as_data(value: Any) -> Any:
    """A partial or final object as plain data, only the fields streamed so far."""
    if isinstance(value, BaseModel):
        return {k: as_data(getattr(value, k)) for k in value.model_fields_set}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: as_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_data(v) for v in value]
    return value


def grows(before: Any, after: Any) -> bool:
    """`after` keeps everything `before` showed: same keys, longer lists, strings extended."""
    if isinstance(before, dict):
        return isinstance(after, dict) and all(k in after and grows(v, after[k]) for k, v in before.items())
    if isinstance(before, list):
        return (isinstance(after, list) and len(before) <= len(after)
                and all(grows(a, b) for a, b in zip(before, after, strict=False)))
    if isinstance(before, str):
        return isinstance(after, str) and after.startswith(before)
    return bool(before == after)


async def partials_of(agent: Agent[Any], prompt: str = "Tell me about Paris.") -> tuple[list[Any], Any]:
    """The answer's JSON as it streamed (`partial_data`), and the result; every validated `partial` is
    checked to be a real object of the output type."""
    stream = agent.run_stream(prompt)
    data: list[Any] = []
    async for chunk in stream:
        if chunk.partial_data is not None:
            data.append(chunk.partial_data)
        if chunk.partial is not None:
            assert chunk.partial_data is not None
            TypeAdapter(agent.output_type).validate_python(as_data(chunk.partial))  # honest: it validates
    return data, stream.result


def assert_monotonic(partials: list[Any], final: Any) -> None:
    data = [as_data(p) for p in partials]
    assert len(data) >= 5
    for before, after in itertools.pairwise(data):
        assert before != after, "a partial is yielded only when it changed"
        assert grows(before, after), f"{after!r} lost part of {before!r}"
    assert data[-1] == as_data(final)


# -- request mapping per protocol, over real HTTP -------------------------------------------------

NATIVE_FIELDS = {
    "openai-chat": lambda body: body["response_format"]["json_schema"]["schema"],
    "openai-responses": lambda body: body["text"]["format"]["schema"],
    "gemini": lambda body: body["generationConfig"]["responseJsonSchema"],
    "ollama": lambda body: body["format"],
    "mistral": lambda body: body["response_format"]["json_schema"]["schema"],
    "cohere": lambda body: body["response_format"]["json_schema"],
}


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", sorted(NATIVE_FIELDS))
async def test_native_output_reaches_the_protocols_field(protocol: str) -> None:
    turn = FakeTurn(parts=[FakeText(text=orjson.dumps(PARIS).decode(), chunks=4)])
    async with FakeProviderServer(protocol, [turn]) as server:
        model = server.model("m")
        try:
            result = await Agent(model, output_type=City).run("How many people live in Paris?")
        finally:
            await model.aclose()
    assert result.output == City(**PARIS)
    body = server.requests[0].body
    schema = NATIVE_FIELDS[protocol](body)
    assert schema["required"] == ["name", "population"]
    assert schema["properties"]["population"] == {"type": "integer"}
    assert not server.requests[0].tools  # no final_result tool on the native path


@pytest.mark.anyio
async def test_openai_json_schema_is_strict_for_ordinary_models() -> None:
    """Agent state item 10: ordinary pydantic models are sent strict, their schema closed and all-required."""
    class Closed(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str
        population: int

    class Census(BaseModel):
        name: str
        population: int | None = None
        districts: list[str] = []

    class Counts(BaseModel):
        by_district: dict[str, int]

    answers = [PARIS, PARIS, {"name": "Paris", "population": None, "districts": ["1er"]}, {"by_district": {"1er": 1}}]
    turns = [FakeTurn(parts=[FakeText(text=orjson.dumps(a).decode())]) for a in answers]
    async with FakeProviderServer("openai-chat", turns) as server:
        model = server.model("gpt-4o")
        try:
            assert (await Agent(model, output_type=Closed).run("Paris?")).output.population == 2102650
            await Agent(model, output_type=City).run("Paris?")
            assert (await Agent(model, output_type=Census).run("Paris?")).output.districts == ["1er"]
            await Agent(model, output_type=Counts).run("Paris?")
        finally:
            await model.aclose()
    formats = [r.body["response_format"]["json_schema"] for r in server.requests]
    assert [f["strict"] for f in formats] == [True, True, True, False]  # open-ended keys have no strict form
    census = formats[2]["schema"]
    assert census["additionalProperties"] is False
    assert census["required"] == ["name", "population", "districts"]  # optional ones may be null or given
    assert "default" not in census["properties"]["districts"]
    assert formats[0]["name"] == "Closed"
    # A compatible host of the same protocol keeps strict off: support for it varies between hosts.
    async with FakeProviderServer("openai-chat", turns[1:2]) as server:
        model = get_model("groq:llama", base_url=server.url + "/v1", api_key="k")
        try:
            await Agent(model, output_type=City).run("Paris?")
        finally:
            await model.aclose()
    assert server.requests[0].body["response_format"]["json_schema"]["strict"] is False


@pytest.mark.anyio
async def test_json_mode_hosts_get_a_json_object_format_and_the_schema_in_the_instructions() -> None:
    turn = FakeTurn(parts=[FakeText(text="```json\n" + orjson.dumps(PARIS).decode() + "\n```")])
    async with FakeProviderServer("openai-chat", [turn]) as server:
        model = get_model("deepseek:deepseek-chat", base_url=server.url + "/v1", api_key="sk-test")
        try:
            result = await Agent(model, output_type=City, system="Be exact.").run("Paris?")
        finally:
            await model.aclose()
    assert result.output == City(**PARIS)  # the code fence some JSON-mode models add is tolerated
    body = server.requests[0].body
    assert body["response_format"] == {"type": "json_object"}
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be exact.\n\n")
    assert '"population":{"type":"integer"}' in system["content"]


@pytest.mark.anyio
async def test_anthropic_gets_a_final_result_tool_whose_call_ends_the_run() -> None:
    turns = [
        FakeTurn(parts=[FakeText(text="Let me check."), FakeToolCall(name="get_population", arguments={"city": "Paris"})]),
        FakeTurn(parts=[FakeToolCall(name="final_result", arguments=PARIS, chunks=5)]),
    ]
    async with FakeProviderServer("anthropic", turns) as server:
        model = server.model("claude-sonnet-4-5")
        try:
            result = await Agent(model, tools=[get_population], output_type=City).run("Paris?")
        finally:
            await model.aclose()
    assert result.output == City(**PARIS)
    first = server.requests[0].body
    assert "output_config" not in first
    final = next(t for t in first["tools"] if t["name"] == "final_result")
    assert final["input_schema"]["required"] == ["name", "population"]
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert results_of(result.messages)[-1].result == "The final result was accepted."
    assert_valid_history(result.messages)


@pytest.mark.anyio
async def test_anthropic_native_output_when_asked_for_maps_to_output_config() -> None:
    turn = FakeTurn(parts=[FakeText(text=orjson.dumps(PARIS).decode())])
    async with FakeProviderServer("anthropic", [turn]) as server:
        model = server.model("claude-sonnet-4-5")
        try:
            result = await Agent(model, output_type=City, output_mode="native").run("Paris?")
        finally:
            await model.aclose()
    assert result.output.name == "Paris"
    assert server.requests[0].body["output_config"]["format"]["type"] == "json_schema"


@pytest.mark.anyio
async def test_partial_objects_stream_over_http() -> None:
    turn = FakeTurn(parts=[FakeText(text=orjson.dumps(GUIDE).decode(), chunks=7)])
    async with FakeProviderServer("openai-chat", [turn]) as server:
        model = server.model("gpt-4o")
        try:
            partials, result = await partials_of(Agent(model, output_type=Guide))
        finally:
            await model.aclose()
    assert_monotonic(partials, result.output)
    assert result.output == Guide(**GUIDE)


# -- the scripted loop ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_models_of_unknown_providers_use_the_final_result_tool() -> None:
    model = ScriptedModel([ToolCall("final_result", PARIS)])
    result = await Agent(model, output_type=City).run("Paris?")
    assert result.output == City(**PARIS)
    assert [t.name for t in model.requests[0].tools] == ["final_result"]
    assert "output_schema" not in model.requests[0].settings


@pytest.mark.anyio
async def test_native_partials_grow_monotonically_and_end_at_the_output() -> None:
    model = ScriptedModel([Text(orjson.dumps(GUIDE).decode(), chunks=60)])
    partials, result = await partials_of(Agent(model, output_type=Guide, output_mode="native"))
    assert_monotonic(partials, result.output)
    assert result.output == Guide(**GUIDE)
    assert model.requests[0].settings["output_schema"]["name"] == "Guide"
    assert isinstance(partials[3], dict)  # partial_data is the JSON so far
    summaries = [d["summary"] for d in map(as_data, partials) if "summary" in d]
    full = GUIDE["summary"]
    assert any(0 < len(s) < len(full) // 2 for s in summaries)  # strings show as they stream
    assert all(full.startswith(s) for s in summaries)


@pytest.mark.anyio
async def test_tool_output_partials_follow_the_final_result_arguments() -> None:
    model = ScriptedModel([Text("Here is your guide."), ToolCall("final_result", GUIDE, chunks=40)])
    partials, result = await partials_of(Agent(model, output_type=Guide))
    assert_monotonic(partials, result.output)
    assert result.output == Guide(**GUIDE)


@pytest.mark.anyio
async def test_partials_are_fed_incrementally_and_snapshots_thin_out_on_long_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fed: list[int] = []

    class CountingPartialJSON(_stream.PartialJSON):
        def feed(self, fragment: str) -> None:
            fed.append(len(fragment))
            super().feed(fragment)

    monkeypatch.setattr(_stream, "PartialJSON", CountingPartialJSON)
    long_answer = orjson.dumps({"city": "Paris", "summary": "x" * 200_000, "landmarks": []}).decode()
    model = ScriptedModel([Text(long_answer, chunks=2000)])
    partials, result = await partials_of(Agent(model, output_type=Guide, output_mode="native"))
    assert sum(fed) == len(long_answer)  # each fragment parsed once: no re-parsing of the prefix
    assert len(partials) < 120  # geometric snapshots beyond a few KB, not one per fragment
    assert len(as_data(partials[-1])["summary"]) == 200_000
    assert result.output.summary == "x" * 200_000


@pytest.mark.anyio
async def test_dataclass_and_typeddict_outputs() -> None:
    @dataclasses.dataclass(frozen=True)
    class Point:
        label: str
        x: int
        y: int = 0

    class Box(TypedDict):
        label: str
        width: int

    model = ScriptedModel([Text('{"label": "origin", "x": 3, "y": 4}', chunks=36)])
    partials, result = await partials_of(Agent(model, output_type=Point, output_mode="native"))
    assert result.output == Point(label="origin", x=3, y=4)
    # Fields not streamed yet are missing from the data; the label shows as it streams.
    assert {"label": "ori"} in partials
    labels = [p["label"] for p in partials if "label" in p]
    assert all(b.startswith(a) for a, b in itertools.pairwise(labels))
    assert Point(**partials[-1]) == result.output

    model = ScriptedModel([ToolCall("final_result", {"label": "crate", "width": 40}, chunks=10)])
    partials, result = await partials_of(Agent(model, output_type=Box))
    assert result.output == {"label": "crate", "width": 40}
    assert {"label": "crat"} in partials  # a TypedDict partial lacks the keys not streamed yet


@pytest.mark.anyio
async def test_outputs_that_are_not_objects_are_wrapped_under_result() -> None:
    model = ScriptedModel([ToolCall("final_result", {"result": [3, 1, 2]})])
    result = await Agent(model, output_type=list[int]).run("Three numbers.")
    assert result.output == [3, 1, 2]
    schema = model.requests[0].tools[0].parameters
    assert schema["properties"]["result"] == {"items": {"type": "integer"}, "type": "array"}

    model = ScriptedModel([Text('{"result": [3, 1, 2]}')])
    result = await Agent(model, output_type=list[int], output_mode="native").run("Three numbers.")
    assert result.output == [3, 1, 2]


@pytest.mark.anyio
async def test_native_output_after_a_tool_round_and_text_before_calls_never_ends_the_run() -> None:
    # The first message is JSON that would validate, but it also calls a tool: it is not the answer.
    model = ScriptedModel(
        [Text('{"name": "Paris", "population": 1}'), ToolCall("get_population", {"city": "Paris"})],
        [Text(orjson.dumps(PARIS).decode(), chunks=3)],
    )
    result = await Agent(model, tools=[get_population], output_type=City, output_mode="native").run("Paris?")
    assert result.output == City(**PARIS)
    assert len(model.requests) == 2
    assert results_of(result.messages)[0].result == 2102650
    assert_valid_history(result.messages)


@pytest.mark.anyio
async def test_tool_output_after_a_tool_round() -> None:
    model = ScriptedModel(
        ["I will look it up first.", ToolCall("get_population", {"city": "Paris"})],
        [ToolCall("final_result", PARIS)],
    )
    result = await Agent(model, tools=[get_population], output_type=City).run("Paris?")
    assert result.output == City(**PARIS)
    assert [t.name for t in model.requests[1].tools] == ["get_population", "final_result"]
    assert len(result.steps) == 2


@pytest.mark.anyio
async def test_an_invalid_native_answer_goes_back_with_the_validation_errors() -> None:
    model = ScriptedModel([Text('{"name": "Paris"}')], [Text(orjson.dumps(PARIS).decode())])
    result = await Agent(model, output_type=City, output_mode="native").run("Paris?")
    assert result.output == City(**PARIS)
    retry = model.requests[1].last_message
    assert retry.role == "user" and "population: this field is required" in retry.text
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    assert_valid_history(result.messages)


@pytest.mark.anyio
async def test_an_invalid_final_result_call_gets_an_error_result_and_another_chance() -> None:
    model = ScriptedModel([ToolCall("final_result", {"name": "Paris", "population": "lots"})],
                          [ToolCall("final_result", PARIS)])
    result = await Agent(model, output_type=City).run("Paris?")
    assert result.output == City(**PARIS)
    error = results_of(model.requests[1].messages)[0]
    assert error.is_error and "population" in error.result["error"] and "final_result again" in error.result["error"]
    assert_valid_history(result.messages)


@pytest.mark.anyio
async def test_a_text_answer_on_the_tool_path_is_asked_again_as_a_final_result_call() -> None:
    model = ScriptedModel(["Paris has about two million people."], [ToolCall("final_result", PARIS)])
    result = await Agent(model, output_type=City).run("Paris?")
    assert result.output == City(**PARIS)
    assert "calling the final_result tool" in model.requests[1].last_message.text


@pytest.mark.anyio
async def test_retries_are_bounded_and_end_with_a_clear_error() -> None:
    model = ScriptedModel([Text("not json")], [Text('{"name": "Paris", "population": "many"}')], ["never"])
    agent = Agent(model, output_type=City, output_mode="native", output_retries=1)
    with pytest.raises(OutputValidationError, match=r"after 1 retry \(output_retries=1\)") as caught:
        await agent.run("Paris?")
    assert "population" in caught.value.errors
    assert len(model.requests) == 2
    assert [m.role for m in caught.value.messages] == ["user", "assistant", "user", "assistant"]
    assert_valid_history(caught.value.messages)

    model = ScriptedModel([ToolCall("final_result", {})])
    with pytest.raises(OutputValidationError, match="output_retries=0"):
        await Agent(model, output_type=City, output_retries=0).run("Paris?")


@pytest.mark.anyio
async def test_typed_agents_keep_tool_errors_and_stream_text_chunks() -> None:
    model = ScriptedModel([Text(orjson.dumps(PARIS).decode(), chunks=4)])
    stream = Agent(model, output_type=City, output_mode="native").run_stream("Paris?")
    text = [chunk.output async for chunk in stream]
    assert "".join(text) == orjson.dumps(PARIS).decode()
    assert stream.result.messages[-1] == Message.assistant(orjson.dumps(PARIS).decode())


def test_bad_typed_output_configuration_is_a_clear_user_error() -> None:
    @tool
    def final_result(answer: str) -> str:
        return answer

    with pytest.raises(UserError, match="rename that tool"):
        Agent(ScriptedModel(), tools=[final_result], output_type=City)
    with pytest.raises(UserError, match="output_retries must be 0 or more"):
        Agent(ScriptedModel(), output_type=City, output_retries=-1)
    with pytest.raises(UserError, match="output_mode must be"):
        Agent(ScriptedModel(), output_type=City, output_mode="json")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="cannot be used for typed output"):
        Agent(ScriptedModel(), output_type=object())  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_item8_partials_are_honest() -> None:
    """Agent state item 8: `partial` is an object of the type only when it validates; the JSON is separate."""

    @dataclasses.dataclass
    class Town:
        name: str
        population: int

    answer = '{"name": "Springfield", "population": "lots"}'
    model = ScriptedModel([Text(answer, chunks=len(answer))], [Text('{"name": "Springfield", "population": 30}')])
    chunks = [c async for c in Agent(model, output_type=Town, output_mode="native").run_stream("Town?")]
    data = [c.partial_data for c in chunks if c.partial_data is not None]
    objects = [c.partial for c in chunks if c.partial is not None]
    assert {"name": "Spring"} in data and {"name": "Springfield", "population": "lots"} in data
    # Neither a Town whose population is None, nor one whose population is 'lots': only valid ones.
    assert objects and all(isinstance(o, Town) and isinstance(o.population, int) for o in objects)
    assert objects[-1] == Town(name="Springfield", population=30)


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", sorted(FAKE_PROTOCOLS))
async def test_item17_typed_output_works_offline_against_every_fake_protocol(protocol: str) -> None:
    """CLI item 17: the fake server's auto mode answers structured-output requests with schema-valid JSON."""

    class Report(BaseModel):
        city: str
        population: int
        landmarks: list[Landmark]

    async with FakeProviderServer(protocol, AutoResponder(seed=1)) as server:
        model = server.model("fake-model")
        try:
            result = await Agent(model, output_type=Report, tools=[get_population]).run("Report on Paris.")
        finally:
            await model.aclose()
    assert isinstance(result.output, Report)
    if protocol == "anthropic":  # tool output: final_result is called with the other tools, and ends the run
        assert "final_result" in [t.name for t in server.requests[0].tools]
    else:  # native output: the tool round, then the typed answer
        assert len(server.requests) == 2 and "final_result" not in [t.name for t in server.requests[0].tools]


@pytest.mark.anyio
async def test_item17_json_mode_hosts_get_json_from_the_schema_in_the_instructions() -> None:
    """CLI item 17: JSON mode (no schema field) is answered from the schema toolwire puts in the prompt."""
    async with FakeProviderServer("openai-chat", AutoResponder(seed=2)) as server:
        model = get_model("deepseek:deepseek-chat", base_url=server.url + "/v1", api_key="sk-test")
        try:
            result = await Agent(model, output_type=City).run("Paris?")
        finally:
            await model.aclose()
    assert isinstance(result.output, City)
