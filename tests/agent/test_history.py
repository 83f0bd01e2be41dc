"""History validation: what the agent refuses to send, and that its messages name the culprit."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire import Agent, UserError
from toolwire.agent._history import validate_history
from toolwire.messages import InvalidToolCallPart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from toolwire.testing import ScriptedModel


def call(call_id: str, name: str = "t") -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments={}, arguments_raw="{}")


def result(call_id: str, name: str = "t", value: Any = "ok") -> ToolResultPart:
    return ToolResultPart(call_id=call_id, name=name, result=value)


def assistant(*parts: Any) -> Message:
    return Message(role="assistant", parts=list(parts))


def test_a_complete_conversation_is_valid() -> None:
    invalid = InvalidToolCallPart(id="c3", name="t", arguments_raw='{"a', reason="cut")
    validate_history([
        Message.system("sys"),
        Message.user("hi"),
        assistant(ThinkingPart(text="hm"), TextPart(text="checking"), call("c1"), call("c2")),
        Message.tool_results([result("c2"), result("c1")]),  # any order inside the message
        assistant(invalid),
        Message(role="user", parts=[result("c3", value={"error": "cut"}), TextPart(text="also this")]),
        Message.assistant("done"),
        Message.user("thanks"),
    ])


@pytest.mark.parametrize(
    ("history", "message"),
    [
        pytest.param([Message.user("hi"), assistant(call("c1")), Message.user("what?")],
                     r"Message 1 of the history calls tool 't' \(id 'c1'\), but message 2 of the history holds no result",
                     id="result-missing"),
        pytest.param([Message.user("hi"), assistant(call("c1")), Message.assistant("again")],
                     r"message 2 of the history is an assistant message, not the user message with its results",
                     id="assistant-after-calls"),
        pytest.param([Message.user("hi"), assistant(call("c1", "lookup"))],
                     r"calls tool 'lookup' \(id 'c1'\), but the history ends there",
                     id="ends-with-unanswered-call"),
        pytest.param([Message.user("hi"), Message.tool_results([result("zz")])],
                     r"Message 1 of the history holds a result for call id 'zz'",
                     id="stray-result"),
        pytest.param([Message.user("hi"), assistant(call("c1")), Message.tool_results([result("c1"), result("c1")])],
                     r"holds two results for call id 'c1'", id="duplicate-result"),
        pytest.param([Message.user("hi"), assistant(call("c1"), call("c1")), Message.tool_results([result("c1")])],
                     r"Message 1 of the history has two tool calls with the id 'c1'", id="duplicate-call-id"),
        pytest.param([Message(role="user", parts=[call("c1")])],
                     r"Message 0 of the history is a user message holding a ToolCallPart", id="call-in-user"),
        pytest.param([Message.user("hi"), assistant(result("c1"))],
                     r"is an assistant message holding a ToolResultPart", id="result-in-assistant"),
        pytest.param([Message(role="tool", parts=[])],  # type: ignore[arg-type]
                     r"Message 0 of the history has role 'tool'", id="unknown-role"),
        pytest.param(["hello"], r"Message 0 of the history is a str, not a toolwire Message", id="not-a-message"),
        pytest.param([], r"There is nothing to answer", id="empty"),
    ],
)
def test_invalid_histories_are_refused_naming_the_message(history: list[Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        validate_history(history)


def test_the_prompt_is_named_as_such() -> None:
    model = ScriptedModel()
    with pytest.raises(UserError, match=r"Message 1 of the history calls tool 't' .* but the prompt message holds"):
        Agent(model).stream("next question", history=[Message.user("hi"), assistant(call("c1"))])
    assert model.requests == []
