"""The agent loop against scripted models: parallel and eager tools, error results, limits, streaming output."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import date
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tests.agent.support import assert_valid_history, collect, kinds, results_of
from toolwire import (
    Agent,
    MaxStepsExceeded,
    Message,
    ProviderHTTPError,
    ProviderStreamError,
    RunContext,
    Tool,
    ToolError,
    ToolResultEvent,
    ToolResultPart,
    ToolStartedEvent,
    UserError,
    tool,
)
from toolwire.events import MessageEndEvent, TextDelta, ToolCallEnd, Usage
from toolwire.messages import InvalidToolCallPart, TextPart, ToolCallPart
from toolwire.testing import Delay, Fail, Finish, ScriptedModel, Text, ToolCall


@pytest.mark.anyio
async def test_parallel_calls_finish_out_of_order_and_results_keep_the_calls_order() -> None:
    b_done = anyio.Event()
    running: list[str] = []
    peak = 0

    @tool
    async def work(name: str) -> str:
        nonlocal peak
        running.append(name)
        peak = max(peak, len(running))
        if name == "a":
            await b_done.wait()  # a finishes only after b: completion order is b, a
        else:
            b_done.set()
        running.remove(name)
        return f"{name} done"

    model = ScriptedModel(
        [ToolCall("work", {"name": "a"}), ToolCall("work", {"name": "b"})],
        ["Both done."],
    )
    events, run = await collect(Agent(model, tools=[work]))

    finished = [e.result.result for e in events if isinstance(e, ToolResultEvent)]
    assert finished == ["b done", "a done"]
    assert peak == 2
    result = run.result
    assert result.output == "Both done."
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    assert [r.result for r in result.messages[2].parts] == ["a done", "b done"]  # type: ignore[union-attr]
    assert [r.call_id for r in result.messages[2].parts] == ["call_1", "call_2"]  # type: ignore[union-attr]
    assert_valid_history(result.messages)
    # The second request carried the whole round, results in one user message.
    assert model.requests[1].messages == result.messages[:3]


@pytest.mark.anyio
async def test_eager_tool_starts_while_the_model_is_still_streaming() -> None:
    stream_finished_at_start: list[bool] = []
    model = ScriptedModel(
        [ToolCall("lookup", {"key": "first"}, chunks=3), Delay(0.2), "Still writing...",
         ToolCall("lookup", {"key": "second"})],
        ["Done."],
    )

    @tool
    async def lookup(key: str) -> str:
        stream_finished_at_start.append(model.requests[0].finished)
        return key

    events, _ = await collect(Agent(model, tools=[lookup]))
    first_end = next(i for i, e in enumerate(events) if isinstance(e, ToolCallEnd))
    first_start = next(i for i, e in enumerate(events)
                       if isinstance(e, ToolStartedEvent) and e.call.id == "call_1")
    later_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    message_end = next(i for i, e in enumerate(events) if isinstance(e, MessageEndEvent))
    assert first_end < first_start < later_text < message_end
    # The first tool ran before the model's response was over; the second call came at its end.
    assert stream_finished_at_start == [False, True]


@pytest.mark.anyio
async def test_after_stream_mode_waits_for_the_response_and_sequential_never_overlaps() -> None:
    overlap: list[int] = []
    active = 0

    @tool
    async def step(n: int) -> int:
        nonlocal active
        active += 1
        overlap.append(active)
        await anyio.sleep(0.02)
        active -= 1
        return n

    def script() -> ScriptedModel:
        return ScriptedModel([ToolCall("step", {"n": 1}), Delay(0.05), ToolCall("step", {"n": 2})], ["ok"])

    events, _ = await collect(Agent(script(), tools=[step], tool_execution="after_stream"))
    first_start = kinds(events).index("tool_started")
    assert first_start > kinds(events).index("message_end")
    assert max(overlap) == 2

    overlap.clear()
    events, run = await collect(Agent(script(), tools=[step], tool_execution="sequential"))
    assert max(overlap) == 1
    assert [e.result.result for e in events if isinstance(e, ToolResultEvent)] == [1, 2]
    assert_valid_history(run.messages)


@pytest.mark.anyio
async def test_max_parallel_tools_limits_concurrency() -> None:
    active = 0
    peak = 0

    @tool
    async def slow(n: int) -> int:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await anyio.sleep(0.02)
        active -= 1
        return n

    model = ScriptedModel([ToolCall("slow", {"n": i}) for i in range(5)], ["ok"])
    result = await Agent(model, tools=[slow], max_parallel_tools=2).run("go")
    assert peak == 2
    assert [r.result for r in results_of(result.messages)] == [0, 1, 2, 3, 4]


@pytest.mark.anyio
async def test_tool_exceptions_become_error_results_and_the_run_goes_on() -> None:
    @tool
    def explode(kind: str) -> str:
        if kind == "tool_error":
            raise ToolError("The city database is offline; try again in a minute.")
        if kind == "silent":
            raise RuntimeError
        raise ValueError("bad value.")

    model = ScriptedModel(
        [ToolCall("explode", {"kind": "tool_error"}), ToolCall("explode", {"kind": "value"}),
         ToolCall("explode", {"kind": "silent"})],
        ["Sorry, the tools failed."],
    )
    result = await Agent(model, tools=[explode]).run("go")
    assert result.output == "Sorry, the tools failed."
    errors = results_of(result.messages)
    assert all(r.is_error for r in errors)
    assert [r.result for r in errors] == [
        {"error": "The city database is offline; try again in a minute."},
        {"error": "The tool 'explode' failed with ValueError: bad value."},
        {"error": "The tool 'explode' failed with RuntimeError (no message)."},
    ]
    assert model.requests[1].messages[-1].parts == errors


@pytest.mark.anyio
async def test_timeouts_stop_the_tool_and_report_it() -> None:
    stopped: list[str] = []

    @tool
    async def hang(name: str) -> str:
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class():
            stopped.append(name)
            raise
        return "never"

    @tool(timeout=0.05)
    async def own_timeout() -> str:
        await anyio.sleep(10)
        return "never"

    model = ScriptedModel([ToolCall("hang", {"name": "x"}), ToolCall("own_timeout", {})], ["ok"])
    with anyio.fail_after(5):
        result = await Agent(model, tools=[hang, own_timeout], tool_timeout=0.1).run("go")
    assert [r.result for r in results_of(result.messages)] == [
        {"error": "The tool 'hang' did not finish within 0.1 seconds and was stopped."},
        {"error": "The tool 'own_timeout' did not finish within 0.05 seconds and was stopped."},
    ]
    assert stopped == ["x"]


@pytest.mark.anyio
async def test_a_timeout_error_raised_by_the_tool_itself_is_not_reported_as_a_timeout() -> None:
    @tool
    async def upstream() -> str:
        raise TimeoutError("upstream API timed out")

    model = ScriptedModel([ToolCall("upstream", {})], ["ok"])
    result = await Agent(model, tools=[upstream], tool_timeout=5).run("go")
    assert results_of(result.messages)[0].result == {
        "error": "The tool 'upstream' failed with TimeoutError: upstream API timed out."}


@pytest.mark.anyio
async def test_unknown_tools_and_invalid_arguments_are_answered_without_running_anything() -> None:
    ran: list[int] = []

    @tool
    def count(n: int) -> int:
        ran.append(n)
        return n

    model = ScriptedModel(
        [ToolCall("no_such_tool", {"x": 1}), ToolCall("count", {"n": "not a number"}),
         ToolCall("count", {"m": 1})],
        [ToolCall("count", {"n": 3})],
        ["Fixed."],
    )
    events, run = await collect(Agent(model, tools=[count]))
    first_round = results_of(run.messages[:3])
    assert first_round[0].result == {
        "error": "There is no tool named 'no_such_tool'. The available tools are: 'count'."}
    assert first_round[1].result["error"].startswith("The arguments for tool 'count' are invalid: n: Input should be")
    assert first_round[2].result["error"] == (
        "The arguments for tool 'count' are invalid: n: this argument is required; m: there is no such "
        "parameter. Call the tool again with arguments that match its schema.")
    assert all(r.is_error for r in first_round)
    assert ran == [3]
    assert run.result.output == "Fixed."
    # Every call gets a result event; only the one that really ran was reported as started.
    assert sum(isinstance(e, ToolResultEvent) for e in events) == 4
    assert [e.call.arguments for e in events if isinstance(e, ToolStartedEvent)] == [{"n": 3}]


@pytest.mark.anyio
async def test_truncated_calls_are_never_run_and_get_an_error_result() -> None:
    ran: list[Any] = []

    @tool
    def save(text: str) -> str:
        ran.append(text)
        return "saved"

    model = ScriptedModel(
        [ToolCall("save", '{"text": "a long docu', complete=False), Finish("length")],
        [ToolCall("save", {"text": "short"})],
        ["Saved."],
    )
    result = await Agent(model, tools=[save]).run("go")
    first = result.messages[1]
    assert isinstance(first.parts[0], InvalidToolCallPart)
    error = results_of(result.messages)[0]
    assert error.is_error and error.call_id == first.parts[0].id
    assert error.result["error"].startswith("The call to tool 'save' could not be run: The stream ended")
    assert ran == ["short"]
    assert_valid_history(result.messages)


@pytest.mark.anyio
async def test_max_steps_raises_with_a_valid_history_that_can_be_continued() -> None:
    @tool
    def again() -> str:
        return "again"

    model = ScriptedModel(*([ToolCall("again", {})] for _ in range(3)), ["Finally."])
    agent = Agent(model, tools=[again], max_steps=3)
    with pytest.raises(MaxStepsExceeded) as info:
        await agent.run("loop")
    messages = info.value.messages
    assert "max_steps=3" in str(info.value)
    assert len(model.requests) == 3
    assert [m.role for m in messages] == ["user"] + ["assistant", "user"] * 3
    assert_valid_history(messages)
    assert results_of(messages)[-1].result == "again"
    resumed = await agent.run(history=messages)
    assert resumed.output == "Finally."
    assert resumed.messages[0].text == "Finally."


@pytest.mark.anyio
async def test_a_run_starting_past_steps_taken_elsewhere_counts_them_against_max_steps() -> None:
    """`AgentRun.first_step` (a server continuing a run whose process stopped): the steps before it are the run's."""
    seen: list[int] = []

    @tool
    def again(ctx: RunContext) -> str:
        seen.append(ctx.step)
        return "again"

    model = ScriptedModel(*([ToolCall("again", {})] for _ in range(3)), ["Finally."])
    agent = Agent(model, tools=[again], max_steps=3)
    stream = agent.stream("loop")
    stream.first_step = 1
    with pytest.raises(MaxStepsExceeded):
        async with stream as run:
            async for _ in run:
                pass
    assert len(model.requests) == 2 and seen == [1, 2]  # two requests left of three, numbered on from 1


@pytest.mark.anyio
async def test_before_tool_is_awaited_before_each_tool_that_is_not_idempotent_starts() -> None:
    """`AgentRun.before_tool` (a server committing the call to its journal): awaited before a tool that must not
    run twice starts, and not for an idempotent one."""
    order: list[str] = []

    @tool
    def charge(amount: int) -> str:
        order.append(f"charge {amount} ran")
        return "charged"

    @tool(idempotent=True)
    def lookup(key: str) -> str:
        order.append(f"lookup {key} ran")
        return "found"

    async def before_tool(call: ToolCallPart) -> None:
        order.append(f"recorded {call.name}")
        await anyio.sleep(0.05)  # a commit: the tool must not start meanwhile

    model = ScriptedModel([ToolCall("charge", {"amount": 5})], [ToolCall("lookup", {"key": "k"})], ["Done."])
    stream = Agent(model, tools=[charge, lookup]).stream("go")
    stream.before_tool = before_tool
    async with stream as run:
        async for _ in run:
            pass
    assert order == ["recorded charge", "charge 5 ran", "lookup k ran"]


@pytest.mark.anyio
async def test_run_stream_prefixes_the_first_text_after_a_tool_round_with_a_newline() -> None:
    @tool
    def clock() -> str:
        return "12:00"

    model = ScriptedModel(
        ["Let me check the time.", ToolCall("clock", {})],
        [Text("It is noon.", chunks=2)],
    )
    outputs: list[str] = []
    history: list[Message] = []
    async for chunk in Agent(model, tools=[clock]).run_stream("Time?"):
        outputs.append(chunk.output)
        history.extend(chunk.messages)
        assert_valid_history(history)
    shown = [o for o in outputs if o]
    assert shown == ["Let me check the time.", "\nIt is", " noon."]
    assert history[-1].text == "It is noon."  # stored messages are never altered
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]


@pytest.mark.anyio
async def test_no_newline_when_nothing_was_shown_before_the_tool_round() -> None:
    @tool
    def clock() -> str:
        return "12:00"

    model = ScriptedModel([ToolCall("clock", {})], ["It is noon."])
    outputs = [c.output async for c in Agent(model, tools=[clock]).run_stream("Time?") if c.output]
    assert outputs == ["It is noon."]


@pytest.mark.anyio
async def test_hiding_tool_steps_shows_only_the_final_answer() -> None:
    @tool
    def clock() -> str:
        return "12:00"

    def script() -> ScriptedModel:
        return ScriptedModel(["Let me check.", ToolCall("clock", {})], [Text("It is noon.", chunks=3)])

    chunks = [c async for c in Agent(script(), tools=[clock], stream_tool_steps=False).run_stream("Time?")]
    assert [c.output for c in chunks if c.output] == ["It is noon."]
    messages = [m for c in chunks for m in c.messages]
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[1].text == "Let me check."  # hidden from output, kept in the history

    shown = [c.output async for c in Agent(script(), tools=[clock]).run_stream("Time?") if c.output]
    assert shown == ["Let me check.", "\nIt ", "is n", "oon."]


@pytest.mark.anyio
async def test_result_callback_sync_and_async_sees_every_result_as_it_arrives() -> None:
    seen: list[tuple[str, Any, dict[str, Any]]] = []
    b_done = anyio.Event()

    @tool
    async def fetch(ctx: RunContext, name: str) -> str:
        ctx.metadata["source"] = f"cache:{name}"
        if name == "a":
            await b_done.wait()
        else:
            b_done.set()
        return name.upper()

    def on_result(event: ToolResultEvent) -> None:
        seen.append(("sync", event.result.result, event.metadata))

    model = ScriptedModel([ToolCall("fetch", {"name": "a"}), ToolCall("fetch", {"name": "b"})], ["ok"])
    await Agent(model, tools=[fetch], on_tool_result=on_result).run("go")
    assert seen == [("sync", "B", {"source": "cache:b"}), ("sync", "A", {"source": "cache:a"})]

    async def on_result_async(event: ToolResultEvent) -> None:
        await anyio.lowlevel.checkpoint()
        seen.append(("async", event.result.call_id, {}))
        assert event.duration is not None and event.duration >= 0

    seen.clear()
    b_done = anyio.Event()
    model = ScriptedModel([ToolCall("fetch", {"name": "a"}), ToolCall("fetch", {"name": "b"})], ["ok"])
    await Agent(model, tools=[fetch], on_tool_result=on_result_async).run("go")
    assert seen == [("async", "call_2", {}), ("async", "call_1", {})]


def test_run_sync_without_an_event_loop_and_inside_one() -> None:
    @tool
    def where() -> int:
        return threading.get_ident()

    model = ScriptedModel([ToolCall("where", {})], ["done"], ["again"])
    agent = Agent(model, tools=[where])
    result = agent.run_sync("go")
    assert result.output == "done"
    assert results_of(result.messages)[0].result != threading.get_ident()

    async def inside_a_loop() -> str:
        return agent.run_sync("again", history=result.messages).output  # a notebook cell does this

    assert anyio.run(inside_a_loop) == "again"


@pytest.mark.anyio
async def test_history_system_prompt_and_settings_reach_the_model() -> None:
    model = ScriptedModel(["first"], ["second"])
    agent = Agent(model, system="Be brief.", settings={"temperature": 0.1, "max_tokens": 50})
    first = await agent.run("Hello")
    second = await agent.run("Again", history=first.messages, settings={"max_tokens": 10})
    sent = model.requests[1].messages
    assert [(m.role, m.text) for m in sent] == [("system", "Be brief."), ("user", "Hello"),
                                                 ("assistant", "first"), ("user", "Again")]
    assert model.requests[1].settings == {"temperature": 0.1, "max_tokens": 10}
    assert [m.role for m in second.messages] == ["user", "assistant"]  # the system prompt is not stored


@pytest.mark.anyio
async def test_prompt_as_message_and_no_prompt() -> None:
    model = ScriptedModel(["a"], ["b"])
    agent = Agent(model)
    result = await agent.run(Message(role="user", parts=[TextPart(text="x"), TextPart(text="y")]))
    assert result.messages[0].text == "xy"
    again = await agent.run(history=[Message.user("continue")])
    assert [m.role for m in again.messages] == ["assistant"]


def test_a_broken_history_is_refused_before_any_request() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model)
    call = ToolCallPart(id="c1", name="t", arguments={}, arguments_raw="{}")
    history = [Message.user("hi"), Message(role="assistant", parts=[call]), Message.user("and?")]
    with pytest.raises(UserError, match=r"Message 1 of the history calls tool 't' \(id 'c1'\), but message 2"):
        agent.stream("go", history=history)
    with pytest.raises(UserError, match="There is nothing to answer"):
        agent.stream()
    assert model.requests == []


@pytest.mark.anyio
async def test_usage_is_summed_and_kept_per_step() -> None:
    @tool
    def noop() -> None:
        return None

    model = ScriptedModel(
        [ToolCall("noop", {}), Usage(input_tokens=10, output_tokens=2)],
        ["done", Usage(input_tokens=15, output_tokens=3, cache_read_tokens=4)],
    )
    result = await Agent(model, tools=[noop]).run("go")
    assert result.usage == Usage(input_tokens=25, output_tokens=5, cache_read_tokens=4)
    assert [s.usage for s in result.steps] == [Usage(input_tokens=10, output_tokens=2),
                                               Usage(input_tokens=15, output_tokens=3, cache_read_tokens=4)]
    assert [s.finish_reason for s in result.steps] == ["tool_calls", "stop"]
    assert result.steps[0].results == results_of(result.messages)
    assert result.final_message.text == "done"
    assert results_of(result.messages)[0].result is None


@pytest.mark.anyio
async def test_calls_missing_from_the_events_are_found_on_the_assembled_message() -> None:
    """A model that reports calls only in its final message still gets them run (aggregate, then detect)."""
    ran: list[str] = []

    @tool
    def ping(host: str) -> str:
        ran.append(host)
        return "pong"

    call = ToolCallPart(id="x1", name="ping", arguments={"host": "h"}, arguments_raw='{"host":"h"}')
    message = Message(role="assistant", parts=[TextPart(text="pinging"), call])
    model = ScriptedModel([TextDelta(text="pinging"), MessageEndEvent(message=message)], ["ok"])
    result = await Agent(model, tools=[ping]).run("go")
    assert ran == ["h"]
    assert results_of(result.messages) == [ToolResultPart(call_id="x1", name="ping", result="pong")]


@pytest.mark.anyio
async def test_results_are_serialised_to_json() -> None:
    @dataclass
    class Forecast:
        day: date
        high: float

    @tool
    def forecast() -> list[Forecast]:
        return [Forecast(day=date(2025, 1, 2), high=3.5)]

    model = ScriptedModel([ToolCall("forecast", {})], ["ok"])
    result = await Agent(model, tools=[forecast]).run("go")
    assert results_of(result.messages)[0].result == [{"day": "2025-01-02", "high": 3.5}]


@pytest.mark.anyio
async def test_tools_needing_approval_are_not_run_before_a_person_decides() -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def delete_everything() -> str:
        ran.append("oops")
        return "deleted"

    model = ScriptedModel([ToolCall("delete_everything", {})], ["ok"])
    result = await Agent(model, tools=[delete_everything]).run("go")
    assert ran == []
    assert result.paused and [c.name for c in result.pending] == ["delete_everything"]
    assert results_of(result.messages) == []  # the paused round waits in result.state
    assert len(model.requests) == 1


@pytest.mark.anyio
async def test_a_stream_error_keeps_the_valid_partial_message_and_carries_the_history() -> None:
    finished: list[str] = []

    @tool
    async def slow(n: int) -> int:
        await anyio.sleep(0.05)
        finished.append(str(n))
        return n

    model = ScriptedModel(
        [ToolCall("slow", {"n": 1}), "and ", ToolCall("slow", '{"n": 2', complete=False),
         Fail("Overloaded.", error_type="overloaded_error")],
    )
    agent = Agent(model, tools=[slow])
    async with agent.stream("go") as run:
        with pytest.raises(ProviderStreamError) as info:
            async for _ in run:
                pass
    messages = info.value.messages  # type: ignore[attr-defined]
    assert messages == run.messages
    assert_valid_history(messages)
    assert finished == ["1"]  # the complete call that had started ran to its end
    results = results_of(messages)
    assert results[0].result == 1
    assert results[1].is_error and "could not be run" in results[1].result["error"]
    assert run.error is info.value
    with pytest.raises(UserError, match="ended with an error"):
        _ = run.result


@pytest.mark.anyio
async def test_an_error_opening_the_second_request_carries_the_first_round() -> None:
    @tool
    def noop() -> str:
        return "ok"

    error = ProviderHTTPError("Rate limited.", provider="scripted", status_code=429, body="{}")
    model = ScriptedModel([ToolCall("noop", {})], error)
    with pytest.raises(ProviderHTTPError) as info:
        await Agent(model, tools=[noop]).run("go")
    messages = info.value.messages  # type: ignore[attr-defined]
    assert [m.role for m in messages] == ["user", "assistant", "user"]
    assert_valid_history(messages)


@pytest.mark.anyio
async def test_reading_the_result_before_the_end_is_a_clear_error() -> None:
    agent = Agent(ScriptedModel(["a", Delay(0.05), "b"]))
    async with agent.stream("go") as run:
        with pytest.raises(UserError, match="has not finished"):
            _ = run.result
        assert [e async for e in run][-1].type == "message_end"
    assert run.result.output == "ab"


def test_agent_arguments_are_checked() -> None:
    model = ScriptedModel()

    def twin() -> None:
        pass

    with pytest.raises(UserError, match="Two tools are named 'twin'"):
        Agent(model, tools=[twin, Tool(twin)])
    with pytest.raises(UserError, match="max_steps"):
        Agent(model, max_steps=0)
    with pytest.raises(UserError, match="tool_execution"):
        Agent(model, tool_execution="later")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="configure the Model object"):
        Agent(model, base_url="http://localhost")
    with pytest.raises(UserError, match="has no provider"):
        Agent("gpt-4o")
    agent = Agent(model, tools=[twin])
    assert [t.name for t in agent.tools] == ["twin"]
    assert repr(agent) == "Agent(model='scripted:scripted', tools=['twin'])"
