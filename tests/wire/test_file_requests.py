"""Files in user messages, per provider: the request body against the recorded request shapes.

The recordings in the shared fixtures hold no file content, so each case takes the user message of a
recorded text request (its envelope: keys, role, how content is written) and puts into it the file blocks
as each provider's API reference documents them; toolwire's request must be exactly that. References:
- OpenAI Chat Completions: `image_url` ({"url": data URL or https}) and `file` ({"filename", "file_data":
  data URL}) content parts (platform.openai.com, "Images and vision" and "File inputs").
- OpenAI Responses: `input_image` ({"image_url", "detail"}), `input_file` ({"filename", "file_data"} or
  {"file_url"}); the same items are allowed in `function_call_output.output`.
- Anthropic Messages: `image` and `document` blocks with `base64`, `url` or `text` sources.
- Gemini: `inlineData` ({"mimeType", "data"}) and `fileData` ({"mimeType", "fileUri"}) parts.
- Mistral: `image_url` and `document_url` chunks.
- Cohere v2: `{"type": "image_url", "image_url": {"url": ...}}` content (docs.cohere.com, "Image Inputs").
- Ollama: base64 strings in the message's `images`.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import fixture_path
from tests.wire.helpers import chunked_transport
from toolwire import FilePart, Message, TextPart, UserError, get_model
from toolwire.wire import protocol_class

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n").decode()
NOTES = base64.b64encode(b"Milk\nEggs\n").decode()
IMAGE = FilePart(media_type="image/png", data=PNG, name="dot.png")
REPORT = FilePart(media_type="application/pdf", data=PDF, name="report.pdf")
IMAGE_URL = FilePart(media_type="image/jpeg", url="https://example.com/cat.jpg")
REPORT_URL = FilePart(media_type="application/pdf", url="https://example.com/report.pdf")
TEXT_FILE = FilePart(media_type="text/plain", data=NOTES, name="list.txt")
PNG_URL = f"data:image/png;base64,{PNG}"
PDF_URL = f"data:application/pdf;base64,{PDF}"


def recorded_user(relative: str) -> tuple[str, dict[str, Any]]:
    """The model and first user message of a recorded request (key `messages`, `input` or `contents`)."""
    body = orjson.loads(fixture_path(relative).read_bytes())
    for key in ("messages", "input", "contents"):
        if key in body:
            return body.get("model", "gemini-2.5-flash"), body[key][0]
    raise AssertionError(relative)


def build(protocol: str, model: str, parts: list[Any]) -> dict[str, Any]:
    body: dict[str, Any] = protocol_class(protocol)().build_request(model, [Message(role="user", parts=parts)], [], {})
    return body


def sent_user(protocol: str, body: dict[str, Any]) -> Any:
    key = {"openai-responses": "input", "gemini": "contents"}.get(protocol, "messages")
    (message,) = body[key]
    return message


def with_content(recorded: dict[str, Any], content: Any, key: str = "content") -> dict[str, Any]:
    assert key in recorded  # the recording writes its content under the same key
    return {**recorded, key: content}


# -- each provider: image and PDF, inline and by URL ------------------------------------------------------


def test_openai_chat_sends_images_as_image_url_and_pdfs_as_file_data() -> None:
    model, recorded = recorded_user("openai-chat/gpt-4o_text-only-max-tokens.mirascope.request.json")
    text = recorded["content"]
    body = build("openai-chat", model, [TextPart(text=text), IMAGE, IMAGE_URL, REPORT])
    assert sent_user("openai-chat", body) == with_content(recorded, [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF_URL}},
    ])


def test_openai_responses_sends_input_image_and_input_file() -> None:
    model, recorded = recorded_user("openai-responses/gpt-4o_text-only-incomplete-max-tokens.mirascope.request.json")
    text = recorded["content"]
    body = build("openai-responses", model, [TextPart(text=text), IMAGE, REPORT, REPORT_URL])
    assert sent_user("openai-responses", body) == with_content(recorded, [
        {"type": "input_text", "text": text},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_file", "filename": "report.pdf", "file_data": PDF_URL},
        {"type": "input_file", "file_url": "https://example.com/report.pdf"},
    ])


def test_anthropic_sends_image_and_document_blocks_with_base64_url_and_text_sources() -> None:
    model, recorded = recorded_user("anthropic/haiku-4.5_text-only.ruby_llm.request.json")
    (text_block,) = recorded["content"]
    body = build("anthropic", model, [TextPart(text=text_block["text"]), IMAGE, REPORT, IMAGE_URL, REPORT_URL,
                                      TEXT_FILE])
    assert sent_user("anthropic", body) == with_content(recorded, [
        text_block,
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
         "title": "report.pdf"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/report.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Milk\nEggs\n"},
         "title": "list.txt"},
    ])


def test_gemini_sends_inline_data_and_file_data() -> None:
    model, recorded = recorded_user("gemini/gemini-2.5-flash_text-only-max-tokens.mirascope.request.json")
    (text_part,) = recorded["parts"]
    gcs = FilePart(media_type="application/pdf", url="gs://bucket/report.pdf")
    body = build("gemini", model, [TextPart(text=text_part["text"]), IMAGE, REPORT, gcs, TEXT_FILE])
    assert sent_user("gemini", body) == with_content(recorded, [
        text_part,
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
        {"inlineData": {"mimeType": "application/pdf", "data": PDF}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://bucket/report.pdf"}},
        {"inlineData": {"mimeType": "text/plain", "data": NOTES}},
    ], key="parts")


def test_mistral_sends_image_url_and_document_url_chunks() -> None:
    model, recorded = recorded_user("mistral/mistral-small_text-only.ruby_llm.request.json")
    text = recorded["content"]
    body = build("mistral", model, [TextPart(text=text), IMAGE, REPORT_URL, REPORT])
    assert sent_user("mistral", body) == with_content(recorded, [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
        {"type": "document_url", "document_url": "https://example.com/report.pdf"},
        {"type": "document_url", "document_url": PDF_URL},
    ])


def test_cohere_sends_image_url_content() -> None:
    model, recorded = recorded_user("cohere/text-only.langchain-cohere.request.json")
    text = recorded["content"]
    body = build("cohere", model, [TextPart(text=text), IMAGE, IMAGE_URL])
    assert sent_user("cohere", body) == with_content(recorded, [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
    ])


def test_ollama_sends_base64_images_beside_the_text() -> None:
    model, recorded = recorded_user("ollama/gemma3-1b_text-only-api-chat.langchaingo.request.json")
    body = build("ollama", model, [TextPart(text=recorded["content"]), IMAGE,
                                   FilePart(media_type="image/png", url=PNG_URL)])
    assert sent_user("ollama", body) == {**recorded, "images": [PNG, PNG]}


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses", "mistral", "cohere", "ollama"])
def test_inline_text_files_become_a_text_block_where_there_is_no_text_document(protocol: str) -> None:
    body = build(protocol, "m", [TextPart(text="Read this."), TEXT_FILE])
    content = sent_user(protocol, body)["content"]
    shown = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
    assert '<file name="list.txt" media_type="text/plain">\nMilk\nEggs\n\n</file>' in shown


# -- what a provider cannot take: a typed error naming it and the media type, before any request -------------

REFUSED = [
    ("openai-chat", REPORT_URL, r"OpenAI Chat Completions takes PDF files only inline, not by URL"),
    ("openai-chat", FilePart(media_type="application/zip", data="UEsFBg=="), r"cannot take an application/zip file"),
    ("openai-responses", FilePart(media_type="audio/wav", data="UklGRg=="), r"OpenAI Responses cannot take"),
    ("anthropic", FilePart(media_type="text/plain", url="https://example.com/a.txt"), r"plain-text files only inline"),
    ("anthropic", FilePart(media_type="application/zip", data="UEsFBg=="), r"Anthropic Messages cannot take"),
    ("gemini", FilePart(media_type="application/zip", data="UEsFBg=="), r"Gemini cannot take an application/zip"),
    ("mistral", FilePart(media_type="application/zip", data="UEsFBg=="), r"Mistral Chat cannot take"),
    ("cohere", REPORT, r"Cohere Chat v2 cannot take 'report.pdf' \(application/pdf\)"),
    ("ollama", REPORT, r"Ollama cannot take 'report.pdf' \(application/pdf\) in a message: it accepts images"),
    ("ollama", IMAGE_URL, r"Ollama takes image files only inline, not by URL"),
]


@pytest.mark.parametrize(("protocol", "file", "said"), REFUSED)
def test_a_file_the_provider_cannot_take_is_a_user_error(protocol: str, file: FilePart, said: str) -> None:
    with pytest.raises(UserError, match=said):
        build(protocol, "m", [TextPart(text="Look."), file])


PROTOCOL_SPECS = {
    "openai-chat": "openai:gpt-4o", "openai-responses": "openai-responses:gpt-4o", "anthropic": "anthropic:claude",
    "gemini": "gemini:gemini-2.5-flash", "mistral": "mistral:mistral-small", "cohere": "cohere:command-a",
    "ollama": "ollama:gemma3",
}


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", sorted(PROTOCOL_SPECS))
async def test_a_file_still_naming_only_a_blob_fails_before_any_request(protocol: str) -> None:
    seen: list[httpx.Request] = []
    blob = FilePart(media_type="image/png", name="dot.png", blob_id="b_123")
    async with httpx.AsyncClient(transport=chunked_transport(b"", seen=seen)) as client:
        model = get_model(PROTOCOL_SPECS[protocol], api_key="test", http_client=client,
                          base_url="http://provider.invalid")
        with pytest.raises(UserError, match=r"'dot.png' \(image/png\) still refers to the blob store \(blob_id='b_123'\)"):
            await model.request([Message(role="user", parts=[TextPart(text="Look."), blob])])
    assert seen == []  # nothing was sent


@pytest.mark.parametrize("protocol", sorted(PROTOCOL_SPECS))
def test_a_data_url_is_sent_as_inline_data(protocol: str) -> None:
    by_url = build(protocol, "m", [TextPart(text="Look."), FilePart(media_type="image/png", url=PNG_URL)])
    inline = build(protocol, "m", [TextPart(text="Look."), FilePart(media_type="image/png", data=PNG)])
    assert by_url == inline
