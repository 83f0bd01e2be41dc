"""`ScriptedModel`: scripted turns behave like real streams and every request is recorded."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from toolwire.events import (
    ErrorEvent,
    Event,
    FinishEvent,
    MessageEndEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UsageEvent,
)
from toolwire.exceptions import ProviderHTTPError, ProviderStreamError, StreamInterruptedError, UserError
from toolwire.messages import InvalidToolCallPart, Message, TextPart, ThinkingPart, ToolCallPart
from toolwire.testing import (
    Delay,
    Disconnect,
    Fail,
    Finish,
    ScriptedModel,
    ScriptedRequest,
    Text,
    Thinking,
    ToolCall,
)
from toolwire.tools import ToolDefinition


async def play(model: ScriptedModel, messages: list[Message] | None = None, **kwargs: Any) -> list[Event]:
    events: list[Event] = []
    async with model.stream(messages or [Message.user("hi")], **kwargs) as response:
        async for event in response:
            events.append(event)
    return events


@pytest.mark.anyio
async def test_text_and_chunked_tool_call_assemble_like_a_real_stream() -> None:
    model = ScriptedModel(["Let me ", Text("check that.", chunks=3),
                           ToolCall("get_weather", {"city": "Paris"}, chunks=4)])
    events = await play(model)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me ", "che", "ck t", "hat."]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [len(d.arguments_delta) for d in deltas] == [4, 4, 4, 4]  # exactly the fragments asked for
    assert "".join(d.arguments_delta for d in deltas) == '{"city":"Paris"}'
    start = next(e for e in events if isinstance(e, ToolCallStart))
    assert (start.id, start.name, start.index) == ("call_1", "get_weather", 0)
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert end.call == ToolCallPart(id="call_1", name="get_weather", arguments={"city": "Paris"},
                                    arguments_raw='{"city":"Paris"}')
    assert isinstance(events[-2], FinishEvent) and events[-2].reason == "tool_calls"
    final = events[-1]
    assert isinstance(final, MessageEndEvent)
    assert final.message.parts == [TextPart(text="Let me check that."), end.call]


@pytest.mark.anyio
async def test_requests_are_recorded_with_messages_tools_and_settings() -> None:
    model = ScriptedModel(["one"], ["two"])
    tool_def = ToolDefinition(name="t")
    await play(model, [Message.user("first")], tools=[tool_def], settings={"temperature": 0.5})
    await play(model, [Message.user("second")])
    assert [r.index for r in model.requests] == [0, 1]
    first = model.requests[0]
    assert first.messages == [Message.user("first")]
    assert first.tools == [tool_def]
    assert first.settings == {"temperature": 0.5}
    assert first.finished and first.closed
    assert first.opened_at is not None and first.closed_at is not None and first.opened_at <= first.closed_at
    assert model.requests[1].last_message == Message.user("second")


@pytest.mark.anyio
async def test_delays_space_events_in_time() -> None:
    model = ScriptedModel([ToolCall("a", {}, delay=0.05), Delay(0.05), "after"])
    stamps: list[tuple[str, float]] = []
    async with model.stream([Message.user("hi")]) as response:
        async for event in response:
            stamps.append((event.type, time.perf_counter()))
    end_at = next(t for kind, t in stamps if kind == "tool_call_end")
    text_at = next(t for kind, t in stamps if kind == "text_delta")
    assert text_at - end_at >= 0.045


@pytest.mark.anyio
async def test_fail_ends_the_stream_with_a_provider_error_and_keeps_what_completed() -> None:
    model = ScriptedModel(["partial ", ToolCall("a", {"x": 1}), ToolCall("b", '{"y": ', complete=False),
                           Fail("overloaded", error_type="overloaded_error"), "never sent"])
    events: list[Event] = []
    with pytest.raises(ProviderStreamError) as info:
        async with model.stream([Message.user("hi")]) as response:
            async for event in response:
                events.append(event)
    assert info.value.error_type == "overloaded_error"
    partial = info.value.partial_message
    assert partial is not None and partial == response.message
    assert partial.text == "partial "
    assert [type(p) for p in partial.parts] == [TextPart, ToolCallPart, InvalidToolCallPart]
    assert isinstance(events[-2], ErrorEvent) and isinstance(events[-1], MessageEndEvent)
    assert response.finish_reason == "error"


@pytest.mark.anyio
async def test_disconnect_interrupts_the_stream_and_invalidates_open_calls() -> None:
    model = ScriptedModel([ToolCall("a", '{"city": "Bos', complete=False), Disconnect()])
    with pytest.raises(StreamInterruptedError) as info:
        await play(model)
    partial = info.value.partial_message
    assert partial is not None
    assert partial.invalid_tool_calls[0].arguments_raw == '{"city": "Bos'
    assert info.value.error_type == "connection_lost"


@pytest.mark.anyio
async def test_open_calls_are_parsed_when_the_turn_finishes_normally() -> None:
    model = ScriptedModel([ToolCall("a", '{"k": 1}', complete=False)])
    events = await play(model)
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert isinstance(end.call, ToolCallPart) and end.call.arguments == {"k": 1}


@pytest.mark.anyio
async def test_finish_length_leaves_open_calls_invalid_and_usage_is_reported() -> None:
    model = ScriptedModel([Thinking("hmm", signature="sig"), ToolCall("a", '{"k":', complete=False),
                           Usage(input_tokens=3, output_tokens=5), Finish("length", "max_tokens")])
    events = await play(model)
    message = events[-1].message  # type: ignore[union-attr]
    assert message.parts[0] == ThinkingPart(text="hmm", signature="sig")
    assert isinstance(message.parts[1], InvalidToolCallPart)
    assert any(isinstance(e, UsageEvent) and e.usage.output_tokens == 5 for e in events)
    finish = next(e for e in events if isinstance(e, FinishEvent))
    assert (finish.reason, finish.raw_reason) == ("length", "max_tokens")


@pytest.mark.anyio
async def test_exception_turns_raise_when_the_request_opens() -> None:
    error = ProviderHTTPError("Rate limited.", provider="scripted", status_code=429, body="{}")
    model = ScriptedModel(error, ["ok"])
    with pytest.raises(ProviderHTTPError):
        await play(model)
    assert [e.text for e in await play(model) if isinstance(e, TextDelta)] == ["ok"]


@pytest.mark.anyio
async def test_ready_made_events_are_played_verbatim() -> None:
    message = Message.assistant("hello")
    scripted: list[Any] = [TextDelta(text="hello"), Delay(0.01), FinishEvent(reason="stop"),
                           MessageEndEvent(message=message)]
    model = ScriptedModel(scripted)
    async with model.stream([Message.user("hi")]) as response:
        events = [e async for e in response]
    assert events == [scripted[0], scripted[2], scripted[3]]
    assert response.message is message and response.finish_reason == "stop"
    with pytest.raises(UserError, match="MessageEndEvent"):
        await play(ScriptedModel([TextDelta(text="x")]))


@pytest.mark.anyio
async def test_function_turns_see_the_request() -> None:
    def answer(request: ScriptedRequest) -> list[Any]:
        return [f"You said {request.last_message.text!r} with {len(request.tools)} tools."]

    model = ScriptedModel(answer)
    events = await play(model, [Message.user("ping")])
    assert events[-1].message.text == "You said 'ping' with 0 tools."  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_running_out_of_turns_is_a_clear_error() -> None:
    model = ScriptedModel(["only"])
    await play(model)
    with pytest.raises(UserError, match="asked for response 2 but was given only 1"):
        await play(model)
    model.add_turn(["another"])
    with pytest.raises(UserError, match="asked for response 3"):
        await play(model)


@pytest.mark.anyio
async def test_leaving_early_closes_the_response() -> None:
    model = ScriptedModel(["a", Delay(10), "b"])
    with anyio.fail_after(2):
        async with model.stream([Message.user("hi")]) as response:
            async for event in response:
                assert isinstance(event, TextDelta)
                break
    request = model.requests[0]
    assert request.closed and not request.finished
