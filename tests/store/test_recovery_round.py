"""The pure helpers behind rows and recovery (no database)."""

from __future__ import annotations

from toolwire.messages import InvalidToolCallPart, Message, ToolCallPart, ToolResultPart
from toolwire.store._recovery import interrupted_round, rows_for


def call(call_id: str) -> ToolCallPart:
    return ToolCallPart(id=call_id, name="t", arguments={}, arguments_raw="{}")


def result(call_id: str) -> ToolResultPart:
    return ToolResultPart(call_id=call_id, name="t", result="ok")


def test_rows_pair_calls_with_their_results_and_nothing_else() -> None:
    calls = Message(role="assistant", parts=[call("a")])
    results = Message.tool_results([result("a")])
    text = Message.assistant("hi")
    kinds = [(kind, len(group)) for kind, group in rows_for([Message.user("q"), calls, results, text, calls])]
    assert kinds == [("user", 1), ("tools_aggregate", 2), ("assistant", 1), ("assistant", 1)]


def test_a_round_cut_before_its_message_ended_keeps_the_started_calls() -> None:
    round_ = interrupted_round(step_message=None, calls=[call("a"), call("b")], results=[result("b")], committed=[])
    assert round_ is not None
    message, answers = round_
    assert message.metadata == {"incomplete": True} and [p.id for p in message.tool_calls] == ["a", "b"]
    assert [(r.call_id, r.result) for r in answers.tool_results_parts] == [("a", {"error": "interrupted"}),
                                                                           ("b", "ok")]


def test_invalid_calls_of_the_step_are_answered_too() -> None:
    invalid = InvalidToolCallPart(id="x", name="t", arguments_raw="{", reason="cut off")
    step = Message(role="assistant", parts=[invalid, call("a")])
    round_ = interrupted_round(step_message=step, calls=[], results=[result("a")], committed=[])
    assert round_ is not None and [r.call_id for r in round_[1].tool_results_parts] == ["x", "a"]


def test_nothing_to_recover_without_calls_or_when_already_committed() -> None:
    assert interrupted_round(step_message=Message.assistant("text only"), calls=[], results=[], committed=[]) is None
    step = Message(role="assistant", parts=[call("a")])
    assert interrupted_round(step_message=step, calls=[call("a")], results=[], committed=[step]) is None
