"""`@tool` and `Tool`: schemas from signatures and docstrings, argument validation, how functions run."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel, Field

from toolwire import RunContext, Tool, ToolDefinition, ToolError, UserError, tool
from toolwire.messages import ToolCallPart


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    zip_code: str


@dataclass
class Box:
    width: float
    height: float


def test_schema_from_type_hints_defaults_literal_optional_and_docstring() -> None:
    @tool
    async def get_weather(
        city: str,
        unit: Literal["c", "f"] = "c",
        days: int | None = None,
        tags: list[str] | None = None,
        verbose: bool = False,
    ) -> dict[str, Any]:
        """Current weather for a city.

        Uses the nearest station.

        Args:
            city: The city name,
                for example "Paris".
            unit (str): Celsius or Fahrenheit.
            days: How many days of forecast.

        Returns:
            The weather.
        """
        return {}

    assert get_weather.name == "get_weather"
    assert get_weather.description == "Current weather for a city.\n\nUses the nearest station."
    assert get_weather.parameters == {
        "type": "object",
        "additionalProperties": False,
        "required": ["city"],
        "properties": {
            "city": {"type": "string", "description": 'The city name, for example "Paris".'},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c", "description": "Celsius or Fahrenheit."},
            "days": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None,
                     "description": "How many days of forecast."},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None},
            "verbose": {"type": "boolean", "default": False},
        },
    }
    assert get_weather.definition == ToolDefinition(
        name="get_weather", description=get_weather.description, parameters=get_weather.parameters
    )


def test_nested_models_enums_dataclasses_and_annotated_fields() -> None:
    @tool(name="ship", description="Ship a box.", timeout=3, requires_approval=True, strict=True)
    def ship_box(box: Box, to: Address, color: Color, weight: Annotated[float, Field(gt=0)]) -> str:
        return "ok"

    schema = ship_box.parameters
    assert ship_box.name == "ship" and ship_box.description == "Ship a box."
    assert ship_box.timeout == 3 and ship_box.requires_approval and ship_box.strict is True
    assert ship_box.definition.strict is True
    assert schema["required"] == ["box", "to", "color", "weight"]
    assert schema["properties"]["weight"] == {"type": "number", "exclusiveMinimum": 0}
    assert {"Address", "Box", "Color"} <= set(schema["$defs"])
    assert schema["$defs"]["Color"]["enum"] == ["red", "blue"]


def test_sphinx_param_descriptions_are_read_too() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        :param a: The first.
        :param int b: The second.
        """
        return a + b

    assert add.description == "Add two numbers."
    assert add.parameters["properties"]["a"]["description"] == "The first."
    assert add.parameters["properties"]["b"]["description"] == "The second."


def test_decorated_function_is_still_callable_directly() -> None:
    @tool
    def double(x: int) -> int:
        return 2 * x

    assert double(4) == 8
    assert repr(double) == "Tool(name='double')"


def test_parameters_without_hints_accept_anything() -> None:
    @tool
    def echo(value, note: str = "") -> Any:  # type: ignore[no-untyped-def]
        return value

    assert echo.parameters["properties"]["value"] == {}
    assert echo.validate({"value": [1, {"a": 2}]}) == {"value": [1, {"a": 2}], "note": ""}


@pytest.mark.anyio
async def test_validation_lists_every_problem() -> None:
    @tool
    async def get_weather(city: str, unit: Literal["c", "f"] = "c", days: int = 1) -> str:
        return city

    with pytest.raises(ToolError) as info:
        await get_weather.run({"unit": "k", "days": "many", "extra": 1})
    message = str(info.value)
    assert message.startswith("The arguments for tool 'get_weather' are invalid: ")
    assert "city: this argument is required" in message
    assert "unit: Input should be 'c' or 'f' (got 'k')" in message
    assert "days: Input should be a valid integer" in message
    assert "extra: there is no such parameter" in message
    assert message.endswith("Call the tool again with arguments that match its schema.")


@pytest.mark.anyio
async def test_arguments_are_coerced_and_nested_models_built() -> None:
    seen: list[Any] = []

    @tool
    async def ship(to: Address, count: int = 1) -> str:
        seen.append((to, count))
        return "shipped"

    assert await ship.run({"to": {"street": "Main", "zip_code": "1"}, "count": "3"}) == "shipped"
    assert seen == [(Address(street="Main", zip_code="1"), 3)]


@pytest.mark.anyio
async def test_sync_tools_run_in_a_worker_thread() -> None:
    threads: list[int] = []

    @tool
    def where() -> str:
        threads.append(threading.get_ident())
        return "here"

    assert await where.run({}) == "here"
    assert threads and threads[0] != threading.get_ident()


@pytest.mark.anyio
async def test_sync_tools_see_the_callers_context_and_free_their_thread_while_the_loop_is_busy() -> None:
    # Through `anyio.to_thread` a call's thread token went back only when its task ran again: with the event loop
    # busy, 40 quick calls took every token for a turn of the loop each, and the next ones waited for it.
    import contextvars
    import time

    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")
    finished_at: list[float] = []

    @tool
    def quick(n: int) -> str:
        finished_at.append(time.monotonic())
        return f"{request_id.get()}:{n}"

    request_id.set("abc")
    async with anyio.create_task_group() as tg:
        results: list[str] = []

        async def call(n: int) -> None:
            results.append(await quick.run({"n": n}))

        for n in range(120):  # three times the pool's threads
            tg.start_soon(call, n)
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        time.sleep(0.3)  # noqa: ASYNC251 - the loop busy on purpose: the threads go on with the queued calls
        loop_free = time.monotonic()
    assert sorted(results) == sorted(f"abc:{n}" for n in range(120))
    assert sum(at < loop_free for at in finished_at) == 120


@pytest.mark.anyio
async def test_positional_only_parameters_are_passed_positionally() -> None:
    @tool
    def power(base: int, /, exponent: int = 2) -> int:
        return int(base**exponent)

    assert await power.run({"base": 3}) == 9
    assert power.validate({"base": 3, "exponent": 3}) == {"base": 3, "exponent": 3}


@pytest.mark.anyio
async def test_run_context_parameter_is_filled_in_and_not_in_the_schema() -> None:
    @tool
    async def whoami(ctx: RunContext, greeting: str = "hi") -> str:
        ctx.metadata["seen"] = True
        return f"{greeting} {ctx.call.id} at step {ctx.step}"

    assert list(whoami.parameters["properties"]) == ["greeting"]
    call = ToolCallPart(id="c1", name="whoami", arguments={}, arguments_raw="{}")
    context = RunContext(call=call, step=2)
    assert await whoami.run({}, context) == "hi c1 at step 2"
    assert context.metadata == {"seen": True}
    with pytest.raises(UserError, match="takes a RunContext"):
        await whoami.run({})


@pytest.mark.anyio
async def test_from_schema_checks_required_and_unknown_keys() -> None:
    calls: list[dict[str, Any]] = []

    async def search(**kwargs: Any) -> list[str]:
        calls.append(kwargs)
        return ["result"]

    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
              "additionalProperties": False}
    search_tool = Tool.from_schema("search", "Search the web.", schema, search, timeout=2)
    assert search_tool.definition == ToolDefinition(name="search", description="Search the web.", parameters=schema)
    assert search_tool.timeout == 2
    assert await search_tool.run({"query": "toolwire"}) == ["result"]
    assert calls == [{"query": "toolwire"}]
    with pytest.raises(ToolError, match=r"query: this argument is required; page: there is no such parameter"):
        await search_tool.run({"page": 2})


@pytest.mark.anyio
async def test_from_schema_with_a_sync_function_and_context() -> None:
    def lookup(ctx: RunContext, key: str) -> str:
        return f"{key}@{ctx.step}"

    lookup_tool = Tool.from_schema("lookup", "", {"type": "object", "properties": {"key": {"type": "string"}}}, lookup)
    call = ToolCallPart(id="c", name="lookup", arguments={}, arguments_raw="")
    assert await lookup_tool.run({"key": "k"}, RunContext(call=call, step=4)) == "k@4"


def test_variadic_parameters_are_refused() -> None:
    def anything(*args: Any) -> None:
        pass

    with pytest.raises(UserError, match=r"takes \*args"):
        tool(anything)


def test_unresolvable_hints_are_a_clear_error() -> None:
    def broken(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(UserError, match="could not be resolved"):
        tool(broken)


@pytest.mark.anyio
async def test_async_callable_objects_are_awaited() -> None:
    class Counter:
        def __init__(self) -> None:
            self.count = 0

        async def __call__(self, step: int = 1) -> int:
            await anyio.lowlevel.checkpoint()
            self.count += step
            return self.count

    counter_tool = Tool(Counter(), name="count")
    assert counter_tool.parameters["properties"] == {"step": {"type": "integer", "default": 1}}
    assert await counter_tool.run({"step": 2}) == 2
