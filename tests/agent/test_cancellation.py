"""Stopping a run at any point: the model response is closed, tools are cancelled, the history stays valid."""

from __future__ import annotations

import asyncio
import gc
import threading
from contextlib import aclosing

import anyio
import pytest

from tests.agent.support import assert_valid_history, collect, eventually, results_of
from toolwire import Agent, ToolResultEvent, ToolStartedEvent, tool
from toolwire.events import MessageEndEvent
from toolwire.messages import TextPart, ToolCallPart
from toolwire.testing import Delay, ScriptedModel, Text, ToolCall


class Recorder:
    """Tools that record whether they finished or were cancelled."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []

        @tool
        async def work(name: str, seconds: float = 0.0) -> str:
            self.started.append(name)
            try:
                await anyio.sleep(seconds)
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(name)
                raise
            self.finished.append(name)
            return f"{name} done"

        self.tool = work


def other_tasks() -> set[asyncio.Task[object]]:
    current = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t is not current}


@pytest.mark.anyio
async def test_leaving_async_with_mid_stream_closes_the_model_and_cancels_started_tools() -> None:
    rec = Recorder()
    model = ScriptedModel(["Working on it. ", ToolCall("work", {"name": "slow", "seconds": 10}),
                           Delay(10), "never streamed"])
    before = other_tasks()
    async with Agent(model, tools=[rec.tool]).stream("go") as run:
        async for event in run:
            if isinstance(event, ToolStartedEvent):
                break
    assert rec.cancelled == ["slow"]
    assert model.requests[0].closed and not model.requests[0].finished
    assert other_tasks() == before  # nothing left running

    messages = run.messages
    assert_valid_history(messages)
    assert [m.role for m in messages] == ["user", "assistant", "user"]
    partial = messages[1]
    assert partial.metadata == {"incomplete": True}
    assert partial.parts[0] == TextPart(text="Working on it. ")
    assert isinstance(partial.parts[1], ToolCallPart)
    assert results_of(messages)[0].result == {"error": "cancelled"}
    assert results_of(messages)[0].is_error


@pytest.mark.anyio
async def test_cancelled_mid_tool_keeps_finished_results_and_cancels_the_rest() -> None:
    rec = Recorder()
    model = ScriptedModel([ToolCall("work", {"name": "fast", "seconds": 0.05}),
                           ToolCall("work", {"name": "slow", "seconds": 10})])
    response_done = False
    before = other_tasks()
    async with Agent(model, tools=[rec.tool]).stream("go") as run:
        async for event in run:
            response_done = response_done or isinstance(event, MessageEndEvent)
            if isinstance(event, ToolResultEvent):
                assert response_done
                break  # the fast tool finished; the slow one is still running
    assert rec.finished == ["fast"] and rec.cancelled == ["slow"]
    assert other_tasks() == before
    messages = run.messages
    assert_valid_history(messages)
    assert "incomplete" not in messages[1].metadata  # the response itself had completed
    assert [r.result for r in results_of(messages)] == ["fast done", {"error": "cancelled"}]
    assert len(model.requests) == 1


@pytest.mark.anyio
async def test_cancelling_the_task_from_outside_stops_the_run() -> None:
    rec = Recorder()
    model = ScriptedModel([Text("thinking aloud", chunks=3, delay=0.01),
                           ToolCall("work", {"name": "slow", "seconds": 10})])
    started = anyio.Event()

    async def note_start(event: ToolResultEvent) -> None:
        pass

    agent = Agent(model, tools=[rec.tool], on_tool_result=note_start)
    run_holder = []
    async with anyio.create_task_group() as tg:
        async def consume() -> None:
            async with agent.stream("go") as run:
                run_holder.append(run)
                async for event in run:
                    if isinstance(event, ToolStartedEvent):
                        started.set()

        tg.start_soon(consume)
        await started.wait()
        tg.cancel_scope.cancel()
    run = run_holder[0]
    assert rec.cancelled == ["slow"]
    assert model.requests[0].closed
    assert_valid_history(run.messages)
    assert run.messages[1].text == "thinking aloud"
    assert results_of(run.messages)[0].result == {"error": "cancelled"}


@pytest.mark.anyio
async def test_cancelled_before_any_event_keeps_only_the_prompt() -> None:
    model = ScriptedModel([Delay(10), "late"])
    with anyio.move_on_after(0.05):
        async with Agent(model).stream("go") as run:
            async for _ in run:
                pass
    assert [m.role for m in run.messages] == ["user"]
    assert model.requests[0].closed


@pytest.mark.anyio
async def test_run_stream_with_async_with_stops_at_once_when_left() -> None:
    rec = Recorder()
    model = ScriptedModel(["Let me see.", ToolCall("work", {"name": "slow", "seconds": 10})])
    async with Agent(model, tools=[rec.tool]).run_stream("go") as chunks:
        async for chunk in chunks:
            if chunk.output:
                break
        assert chunks.messages == chunks.run.messages
    assert model.requests[0].closed
    assert_valid_history(chunks.messages)


@pytest.mark.anyio
async def test_breaking_out_of_bare_run_stream_cleans_up_without_harming_the_caller() -> None:
    rec = Recorder()
    model = ScriptedModel(["Checking.", ToolCall("work", {"name": "slow", "seconds": 10}), Delay(10)])
    before = other_tasks()
    stream = Agent(model, tools=[rec.tool]).run_stream("go")
    async for chunk in stream:
        if chunk.output:
            await anyio.sleep(0.02)  # let the eager tool start
            break
    gc.collect()
    await eventually(lambda: model.requests[0].closed and other_tasks() == before)
    # The caller's own task was not touched by the run's cancellation.
    await anyio.sleep(0.01)
    assert rec.cancelled == ["slow"]
    assert_valid_history(stream.messages)
    assert results_of(stream.messages)[0].result == {"error": "cancelled"}


@pytest.mark.anyio
async def test_closing_the_run_stream_iterator_stops_the_run() -> None:
    rec = Recorder()
    model = ScriptedModel([ToolCall("work", {"name": "slow", "seconds": 10}), Delay(10)])
    stream = Agent(model, tools=[rec.tool]).run_stream("go")
    async with aclosing(stream.__aiter__()) as chunks:
        async for chunk in chunks:
            if chunk.messages:  # the prompt
                await anyio.sleep(0.02)
                break
    assert model.requests[0].closed
    assert rec.cancelled == ["slow"]
    assert_valid_history(stream.messages)


@pytest.mark.anyio
async def test_a_failing_result_callback_ends_the_run_with_its_error_and_a_valid_history() -> None:
    rec = Recorder()

    def broken(event: ToolResultEvent) -> None:
        raise KeyError("callback bug")

    model = ScriptedModel([ToolCall("work", {"name": "fast", "seconds": 0.05}),
                           ToolCall("work", {"name": "slow", "seconds": 10})])
    async with Agent(model, tools=[rec.tool], on_tool_result=broken).stream("go") as run:
        with pytest.raises(KeyError, match="callback bug"):
            async for _ in run:
                pass
    assert rec.cancelled == ["slow"]
    assert [r.result for r in results_of(run.messages)] == ["fast done", {"error": "cancelled"}]
    assert_valid_history(run.messages)


@pytest.mark.anyio
async def test_an_exception_in_the_callers_block_propagates_unwrapped() -> None:
    rec = Recorder()
    model = ScriptedModel([ToolCall("work", {"name": "slow", "seconds": 10})])
    with pytest.raises(LookupError, match="mine"):
        async with Agent(model, tools=[rec.tool]).stream("go") as run:
            async for event in run:
                if isinstance(event, ToolStartedEvent):
                    raise LookupError("mine")
    assert rec.cancelled == ["slow"]
    assert_valid_history(run.messages)


@pytest.mark.anyio
async def test_a_cancelled_sync_tool_is_abandoned_at_once() -> None:
    release = threading.Event()
    entered = threading.Event()

    @tool
    def blocking() -> str:
        entered.set()
        release.wait(5)
        return "late"

    model = ScriptedModel([ToolCall("blocking", {})])
    try:
        async with Agent(model, tools=[blocking]).stream("go") as run:
            async for event in run:
                if isinstance(event, ToolStartedEvent):
                    assert await anyio.to_thread.run_sync(entered.wait, 5)
                    break
        # The run is over while the thread is still blocked: cancellation did not wait for it.
        assert not release.is_set()
        assert results_of(run.messages)[0].result == {"error": "cancelled"}
    finally:
        release.set()


@pytest.mark.anyio
async def test_history_is_valid_when_cancelled_after_any_event() -> None:
    """Stop after every possible number of events: each time the history handed back is valid."""
    def script() -> ScriptedModel:
        return ScriptedModel(
            [Text("Looking.", chunks=2), ToolCall("work", {"name": "a", "seconds": 0.01}, chunks=2),
             ToolCall("work", {"name": "b", "seconds": 0.03})],
            [ToolCall("work", {"name": "c"})],
            [Text("Done.", chunks=2)],
        )

    events, _ = await collect(Agent(script(), tools=[Recorder().tool]))
    total = len(events)
    assert total > 20
    for stop_after in range(total + 1):
        model = script()
        async with Agent(model, tools=[Recorder().tool]).stream("go") as run:
            seen = 0
            async for _ in run:
                seen += 1
                if seen >= stop_after:
                    break
        assert_valid_history(run.messages)
        assert all(r.closed == (r.opened_at is not None) for r in model.requests)
        for i, message in enumerate(run.messages):
            assert message.role == ("user" if i % 2 == 0 else "assistant")


@pytest.mark.anyio
async def test_chunks_history_is_valid_whenever_the_stream_is_left() -> None:
    def script() -> ScriptedModel:
        return ScriptedModel(["Looking.", ToolCall("work", {"name": "a", "seconds": 0.01})], ["Done."])

    total = len([c async for c in Agent(script(), tools=[Recorder().tool]).run_stream("go")])
    for stop_after in range(total + 1):
        history = []
        async with Agent(script(), tools=[Recorder().tool]).run_stream("go") as chunks:
            seen = 0
            async for chunk in chunks:
                history.extend(chunk.messages)
                assert_valid_history(history)
                seen += 1
                if seen >= stop_after:
                    break
        assert_valid_history(chunks.messages)
        assert chunks.messages[:len(history)] == history


@pytest.mark.anyio
async def test_message_end_then_cancel_keeps_the_full_message() -> None:
    rec = Recorder()
    model = ScriptedModel(["Full text.", ToolCall("work", {"name": "slow", "seconds": 10})])
    async with Agent(model, tools=[rec.tool]).stream("go") as run:
        async for event in run:
            if isinstance(event, MessageEndEvent):
                break
    assert run.messages[1].text == "Full text."
    assert "incomplete" not in run.messages[1].metadata
    assert_valid_history(run.messages)
