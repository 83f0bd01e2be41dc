"""Files in tool results, per provider, and their round trip through each fake provider.

Where the API takes files in tool results they go there (Anthropic `tool_result` content, OpenAI Responses
`function_call_output` content, Gemini `functionResponse.parts`, Ollama `images` on the tool message); OpenAI
chat and Mistral send them in a user message after the round's results; Cohere, and any file a provider
cannot take, get a note naming them.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from toolwire import FilePart, Message, TextPart, ToolCallPart, ToolResultPart, UserError
from toolwire.providers import Provider
from toolwire.testing.fake import FakeRequest, fake_protocol, file_size
from toolwire.wire import protocol_class

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PDF = base64.b64encode(b"%PDF-1.4\n%%EOF\n").decode()
CHART = FilePart(media_type="image/png", data=PNG, name="chart.png")
REPORT = FilePart(media_type="application/pdf", data=PDF, name="report.pdf")
ARCHIVE = FilePart(media_type="application/zip", data="UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA==", name="data.zip")
PNG_URL = f"data:image/png;base64,{PNG}"
PDF_URL = f"data:application/pdf;base64,{PDF}"


def history(*files: FilePart, text: str = "Plot it.") -> list[Message]:
    call = ToolCallPart(id="call_1", name="plot", arguments={}, arguments_raw="{}")
    other = ToolCallPart(id="call_2", name="total", arguments={}, arguments_raw="{}")
    return [
        Message.user(text),
        Message(role="assistant", parts=[call, other]),
        Message.tool_results([ToolResultPart(call_id="call_1", name="plot", result={"points": 3}, files=list(files)),
                              ToolResultPart(call_id="call_2", name="total", result=42)]),
    ]


def build(protocol: str, messages: list[Message], **options: Any) -> dict[str, Any]:
    provider = Provider(name="test", protocol=protocol, base_url="http://x", options=options) if options else None
    body: dict[str, Any] = protocol_class(protocol)(provider).build_request("m", messages, [], {})
    return body


def test_anthropic_puts_files_in_the_tool_result_content() -> None:
    body = build("anthropic", history(CHART, REPORT))
    first, second = body["messages"][2]["content"]
    assert first == {"type": "tool_result", "tool_use_id": "call_1", "content": [
        {"type": "text", "text": '{"points":3}'},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
         "title": "report.pdf"},
    ]}
    assert second == {"type": "tool_result", "tool_use_id": "call_2", "content": "42"}


def test_openai_responses_puts_files_in_the_function_call_output() -> None:
    body = build("openai-responses", history(CHART, REPORT))
    first, second = (item for item in body["input"] if item.get("type") == "function_call_output")
    assert first["output"] == [
        {"type": "input_text", "text": '{"points":3}'},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_file", "filename": "report.pdf", "file_data": PDF_URL},
    ]
    assert second["output"] == "42"


def test_gemini_puts_files_in_the_function_response_parts() -> None:
    body = build("gemini", history(CHART, REPORT))
    first, second = body["contents"][2]["parts"]
    assert first == {"functionResponse": {"name": "plot", "response": {"points": 3}, "parts": [
        {"inlineData": {"mimeType": "image/png", "data": PNG, "displayName": "chart.png"}},
        {"inlineData": {"mimeType": "application/pdf", "data": PDF, "displayName": "report.pdf"}},
    ]}}
    assert second == {"functionResponse": {"name": "total", "response": {"result": 42}}}


def test_gemini_before_3_gets_the_files_alongside_the_responses() -> None:
    body = build("gemini", history(CHART), tool_result_files="alongside")
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "plot", "response": {"points": 3}}},
        {"functionResponse": {"name": "total", "response": {"result": 42}}},
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
    ]


@pytest.mark.parametrize("protocol", ["openai-chat", "mistral"])
def test_openai_chat_sends_the_files_in_a_user_message_after_the_round(protocol: str) -> None:
    body = build(protocol, history(CHART, REPORT))
    roles = [m["role"] for m in body["messages"]]
    bridge = ["assistant"] if protocol == "mistral" else []  # Mistral refuses user right after tool
    assert roles == ["user", "assistant", "tool", "tool", *bridge, "user"]
    assert body["messages"][2]["content"] == '{"points":3}'
    intro, image, pdf = body["messages"][-1]["content"]
    sent_id = body["messages"][2]["tool_call_id"]  # Mistral rewrites ids to its own 9-character form
    assert intro == {"type": "text", "text": f"The tool call {sent_id} (plot) returned these files with its result: "
                                             "chart.png (image/png, 70 bytes), report.pdf (application/pdf, 15 bytes)."}
    assert image == {"type": "image_url", "image_url": {"url": PNG_URL}}
    assert pdf == ({"type": "file", "file": {"filename": "report.pdf", "file_data": PDF_URL}}
                   if protocol == "openai-chat" else {"type": "document_url", "document_url": PDF_URL})


def test_ollama_puts_images_on_the_tool_message_and_names_other_files() -> None:
    body = build("ollama", history(CHART, REPORT))
    tool = body["messages"][2]
    assert tool["images"] == [PNG]
    assert tool["content"].startswith('{"points":3}\n\n[The tool also returned files that Ollama cannot take')
    assert "report.pdf (application/pdf, 15 bytes)" in tool["content"]


def test_cohere_names_the_files_in_a_note() -> None:
    body = build("cohere", history(CHART))
    tool = body["messages"][2]
    assert tool["content"][1]["type"] == "text"
    assert "Cohere Chat v2 cannot take" in tool["content"][1]["text"] and "chart.png (image/png" in tool["content"][1]["text"]


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses", "anthropic", "gemini"])
def test_a_file_no_provider_form_fits_is_named_not_refused(protocol: str) -> None:
    body = build(protocol, history(CHART, ARCHIVE))
    assert "data.zip (application/zip, 22 bytes)" in str(body)
    assert PNG in str(body)  # the image still goes


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses", "anthropic", "gemini", "mistral",
                                      "cohere", "ollama"])
def test_a_result_file_naming_only_a_blob_is_refused(protocol: str) -> None:
    with pytest.raises(UserError, match="still refers to the blob store"):
        build(protocol, history(FilePart(media_type="image/png", blob_id="b_1")))


# -- the fakes read the files back --------------------------------------------------------------------------

UNNAMED_IMAGE = FilePart(media_type="image/png", data=PNG)  # image blocks carry no file name
UNNAMED_PDF = FilePart(media_type="application/pdf", data=PDF)
ROUND_TRIP = {
    # protocol: the files that come back (what the provider received)
    "openai-chat": [UNNAMED_IMAGE, REPORT],
    "mistral": [UNNAMED_IMAGE, UNNAMED_PDF],
    "openai-responses": [UNNAMED_IMAGE, REPORT],
    "anthropic": [UNNAMED_IMAGE, REPORT],
    "gemini": [CHART, REPORT],
    "ollama": [UNNAMED_IMAGE],  # images only (the PDF is named in a note)
}


def decoded(protocol: str, body: dict[str, Any]) -> FakeRequest:
    request = FakeRequest(protocol=protocol, method="POST", path="/", body=body,
                          query={"alt": "sse"} if protocol == "gemini" else {})
    fake_protocol(protocol).decode(request)
    return request


@pytest.mark.parametrize("protocol", sorted(ROUND_TRIP))
def test_the_fake_provider_reads_the_result_files_back(protocol: str) -> None:
    request = decoded(protocol, build(protocol, history(CHART, REPORT)))
    (plot, total) = request.pending_results()
    assert plot.name == "plot"
    if protocol != "ollama":  # Ollama's result text carries the note on the PDF it could not take
        assert plot.result == {"points": 3}
    assert plot.files == ROUND_TRIP[protocol]
    assert total.files == []
    assert total.result in (42, {"result": 42})


USER_FILES = {
    "openai-chat": [TextPart(text="Look."), UNNAMED_IMAGE, REPORT],
    "mistral": [TextPart(text="Look."), UNNAMED_IMAGE, UNNAMED_PDF],
    "openai-responses": [TextPart(text="Look."), UNNAMED_IMAGE, REPORT],
    "anthropic": [TextPart(text="Look."), UNNAMED_IMAGE, REPORT],
    "gemini": [TextPart(text="Look."), UNNAMED_IMAGE, UNNAMED_PDF],  # names go only in function responses
    "cohere": [TextPart(text="Look."), UNNAMED_IMAGE],
    "ollama": [TextPart(text="Look."), UNNAMED_IMAGE],
}


@pytest.mark.parametrize("protocol", sorted(USER_FILES))
def test_the_fake_provider_reads_user_files_back(protocol: str) -> None:
    sent = [TextPart(text="Look."), CHART] + ([REPORT] if protocol not in ("cohere", "ollama") else [])
    request = decoded(protocol, build(protocol, [Message(role="user", parts=sent)]))
    (message,) = request.messages
    assert message.parts == USER_FILES[protocol]
    assert request.user_files() == [p for p in USER_FILES[protocol] if isinstance(p, FilePart)]
    assert [file_size(f) for f in request.user_files()][:1] == [70]


def test_user_files_are_the_persons_not_the_tools() -> None:
    messages = [Message(role="user", parts=[TextPart(text="Plot this."), REPORT]), *history(CHART)[1:]]
    request = decoded("openai-chat", build("openai-chat", messages))
    assert request.user_files() == [REPORT]
    assert request.pending_results()[0].files == [UNNAMED_IMAGE]


def test_a_text_file_round_trips_through_the_openai_chat_fake() -> None:
    notes = FilePart(media_type="text/plain", data=base64.b64encode(b"Milk\n").decode(), name="list.txt")
    request = decoded("openai-chat", build("openai-chat", [Message(role="user", parts=[TextPart(text="Read."), notes])]))
    assert request.user_files() == [notes]


def test_files_beside_gemini_results_are_not_taken_for_the_persons() -> None:
    provider = Provider(name="test", protocol="gemini", base_url="http://x", options={"tool_result_files": "alongside"})
    body = protocol_class("gemini")(provider).build_request("m", history(CHART), [], {})
    request = decoded("gemini", body)
    assert request.user_files() == []  # the person attached nothing; the chart came from the tool
    (message,) = [m for m in request.messages if m.tool_results_parts]
    assert UNNAMED_IMAGE in message.parts


def test_file_labels_carry_the_names_the_image_blocks_cannot() -> None:
    messages = [Message(role="user", parts=[TextPart(text="Look."), CHART, REPORT])]
    body = build("openai-chat", messages, file_labels=True)
    assert body["messages"][0]["content"][1] == {"type": "text",
                                                 "text": "[Attached file: chart.png (image/png, 70 bytes)]"}
    request = decoded("openai-chat", body)
    assert request.messages[0].parts == [TextPart(text="Look."), CHART, REPORT]
    assert "Attached file" not in str(build("openai-chat", messages))  # off unless a host asks for it
