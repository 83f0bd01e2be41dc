"""The accumulator, driven directly with literals (no network, no asyncio)."""

from toolwire._accumulate import Accumulator
from toolwire.events import (
    ErrorEvent,
    FinishEvent,
    MessageEndEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UsageEvent,
    event_from_json,
    event_to_dict,
    event_to_json,
)
from toolwire.messages import InvalidToolCallPart, TextPart, ThinkingPart, ToolCallPart


def ids() -> object:
    n = iter(range(100))
    return lambda: f"gen_{next(n)}"


def test_text_runs_consolidate_and_split_around_calls() -> None:
    acc = Accumulator(id_factory=ids())  # type: ignore[arg-type]
    acc.text("Hel")
    acc.text("lo")
    acc.text("")
    call = acc.start_call(None, "f")
    acc.call_arguments(call, '{"a": 1}')
    acc.end_call(call)
    acc.text("after")
    acc.finish("tool_calls", "tool_calls")
    message = acc.close()
    assert message.parts == [
        TextPart(text="Hello"),
        ToolCallPart(id="gen_0", name="f", arguments={"a": 1}, arguments_raw='{"a": 1}'),
        TextPart(text="after"),
    ]
    kinds = [e.type for e in acc.events]
    assert kinds == ["text_delta", "text_delta", "tool_call_start", "tool_call_delta", "tool_call_end",
                     "text_delta", "finish", "message_end"]


def test_empty_null_and_missing_arguments_mean_an_empty_object() -> None:
    acc = Accumulator()
    for number, raw in enumerate(("", "null", "  ", None)):
        call = acc.start_call(f"c{number}", "f")
        if raw is not None:
            acc.call_arguments(call, raw)
        assert acc.end_call(call) == ToolCallPart(id=f"c{number}", name="f", arguments={}, arguments_raw=raw or "")


def test_whole_calls_from_objects_strings_and_none() -> None:
    acc = Accumulator(id_factory=ids())  # type: ignore[arg-type]
    a = acc.whole_call(None, "f", {"x": 1})
    b = acc.whole_call(None, "f", '{"x": 2}')
    c = acc.whole_call("", "f", None)
    d = acc.whole_call("own", "f", "[")
    assert a == ToolCallPart(id="gen_0", name="f", arguments={"x": 1}, arguments_raw='{"x":1}')
    assert b == ToolCallPart(id="gen_1", name="f", arguments={"x": 2}, arguments_raw='{"x": 2}')
    assert c == ToolCallPart(id="gen_2", name="f", arguments={}, arguments_raw="")
    assert isinstance(d, InvalidToolCallPart) and d.id == "own" and d.arguments_raw == "["


def test_close_without_completion_signal_marks_open_calls_invalid_and_reports_it() -> None:
    acc = Accumulator()
    done = acc.start_call("c1", "f")
    acc.call_arguments(done, "{}")
    acc.end_call(done)
    open_call = acc.start_call("c2", "g")
    acc.call_arguments(open_call, '{"path": "a')
    message = acc.close()
    assert isinstance(message.parts[0], ToolCallPart)
    assert isinstance(message.parts[1], InvalidToolCallPart)
    assert message.parts[1].arguments_raw == '{"path": "a'
    assert acc.finish_reason == "error"
    assert acc.error is not None and acc.error.error_type == "incomplete_stream"
    assert [e.type for e in acc.events][-3:] == ["finish", "error", "message_end"]


def test_thinking_blocks_keep_their_signatures_apart() -> None:
    acc = Accumulator()
    acc.thinking("a")
    acc.thinking_signature("s1")
    acc.thinking("b", new_block=True)
    acc.thinking_signature("s2")
    acc.finish("stop")
    message = acc.close()
    assert message.parts == [ThinkingPart(text="a", signature="s1"), ThinkingPart(text="b", signature="s2")]


def test_previews_grow_and_can_be_switched_off() -> None:
    acc = Accumulator()
    call = acc.start_call("c", "f")
    for frag in ['{"q": "hel', 'lo", "n"', ": 3}"]:
        acc.call_arguments(call, frag)
    previews = [e.arguments for e in acc.events if isinstance(e, ToolCallDelta)]
    assert previews == [{"q": "hel"}, {"q": "hello"}, {"q": "hello", "n": 3}]
    off = Accumulator(previews=False)
    call = off.start_call("c", "f")
    off.call_arguments(call, '{"q": 1}')
    assert [e.arguments for e in off.events if isinstance(e, ToolCallDelta)] == [None]


def test_events_serialise_to_json_with_their_tags() -> None:
    part = ToolCallPart(id="c", name="f", arguments={}, arguments_raw="{}")
    events = [TextDelta(text="x"), ToolCallStart(id="c", name="f", index=0),
              ToolCallDelta(id="c", index=0, arguments_delta="{", arguments={}),
              ToolCallEnd(index=0, call=part), UsageEvent(usage=Usage(input_tokens=1, output_tokens=2)),
              FinishEvent(reason="stop", raw_reason="end_turn"), ErrorEvent(error_type="x", message="y")]
    for event in events:
        assert event_from_json(event_to_json(event)) == event
    assert event_to_dict(events[3]) == {"type": "tool_call_end", "index": 0, "call": {
        "type": "tool_call", "id": "c", "name": "f", "arguments": {}, "arguments_raw": "{}", "provider_data": None}}
    acc = Accumulator()
    acc.text("hi")
    acc.finish("stop")
    acc.close()
    end = acc.events[-1]
    assert isinstance(end, MessageEndEvent)
    assert event_from_json(event_to_json(end)) == end


def test_usage_adds_up() -> None:
    total = Usage(input_tokens=1, output_tokens=2) + Usage(input_tokens=3, reasoning_tokens=4)
    assert total == Usage(input_tokens=4, output_tokens=2, reasoning_tokens=4)


def test_a_response_that_ends_with_an_error_is_marked_incomplete() -> None:
    """Every partial message from a stream error says so (hostile-input items 1-10)."""
    acc = Accumulator(id_factory=ids())  # type: ignore[arg-type]
    acc.text("cut")
    acc.fail("connection_lost", "The connection dropped.")
    assert acc.close().metadata == {"incomplete": True}
    done = Accumulator()
    done.text("whole")
    done.finish("stop")
    assert done.close().metadata == {}


def test_a_repeated_provider_id_is_replaced_so_ids_stay_unique() -> None:
    """Hostile-input item 2: two calls with one id could not both be answered."""
    acc = Accumulator(id_factory=ids())  # type: ignore[arg-type]
    first = acc.start_call("call_x", "f")
    second = acc.start_call("call_x", "f")
    assert (first.id, second.id) == ("call_x", "gen_0")


def test_arguments_nested_past_the_limit_are_an_invalid_call() -> None:
    """Hostile-input item 3: whole arguments (an object) and streamed text alike."""
    deep: object = {}
    for _ in range(200):
        deep = {"k": deep}
    acc = Accumulator(id_factory=ids())  # type: ignore[arg-type]
    whole = acc.whole_call(None, "f", deep)
    streamed = acc.start_call(None, "g")
    acc.call_arguments(streamed, '{"k": ' * 200 + "1" + "}" * 200)
    assert isinstance(whole, InvalidToolCallPart) and "more than 128 levels" in whole.reason
    result = acc.end_call(streamed)
    assert isinstance(result, InvalidToolCallPart) and "more than 128 levels" in result.reason
    shallow = acc.start_call(None, "h")
    acc.call_arguments(shallow, '{"k": ' * 100 + "1" + "}" * 100)
    assert isinstance(acc.end_call(shallow), ToolCallPart)
