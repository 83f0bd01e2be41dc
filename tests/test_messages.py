import orjson

from toolwire import (
    FilePart,
    InvalidToolCallPart,
    Message,
    ProviderToolPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    dump_messages,
    load_messages,
)

HISTORY = [
    Message.system("sys"),
    Message(role="user", parts=[TextPart(text="look"), FilePart(media_type="image/png", data="iVBORw0KGgo=")]),
    Message(
        role="assistant",
        parts=[
            ThinkingPart(text="hmm", signature="sig==", provider_data={"anthropic": {"x": 1}}),
            ThinkingPart(text="", redacted=True, provider_data={"anthropic": {"data": "opaque"}}),
            ProviderToolPart(id="srv_1", name="web_search", provider="anthropic", arguments={"q": "x"},
                             result=[{"url": "u"}], status="completed"),
            ToolCallPart(id="call_1", name="f", arguments={"a": [1, {"b": None}]}, arguments_raw='{"a":[1,{"b":null}]}'),
            InvalidToolCallPart(id="call_2", name="g", arguments_raw='{"x', reason="cut off"),
        ],
        metadata={"response_id": "resp_1", "usage": {"input_tokens": 3}},
    ),
    Message.tool_results([
        ToolResultPart(call_id="call_1", name="f", result="ok"),
        ToolResultPart(call_id="call_2", name="g", result={"error": "cut off"}, is_error=True),
    ]),
]


def test_json_round_trip_is_lossless() -> None:
    data = dump_messages(HISTORY)
    assert load_messages(data) == HISTORY
    for message in HISTORY:
        assert Message.from_json(message.to_json()) == message
        assert Message.from_dict(message.to_dict()) == message


def test_json_format_uses_the_public_tags_and_field_names() -> None:
    data = orjson.loads(dump_messages(HISTORY))
    assert data[2]["parts"][3] == {
        "type": "tool_call", "id": "call_1", "name": "f", "arguments": {"a": [1, {"b": None}]},
        "arguments_raw": '{"a":[1,{"b":null}]}', "provider_data": None,
    }
    assert data[3]["parts"][1] == {
        "type": "tool_result", "call_id": "call_2", "name": "g", "result": {"error": "cut off"}, "is_error": True,
    }
    assert data[2]["parts"][0]["type"] == "thinking" and data[2]["parts"][0]["signature"] == "sig=="
    assert data[2]["parts"][4]["type"] == "invalid_tool_call"


def test_helpers() -> None:
    message = HISTORY[2]
    assert [c.id for c in message.tool_calls] == ["call_1"]
    assert [c.id for c in message.invalid_tool_calls] == ["call_2"]
    assert Message.user("a").text == "a"
