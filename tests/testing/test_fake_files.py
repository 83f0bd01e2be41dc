"""Files end to end over real HTTP: an agent sends a person's image and a tool's chart and PDF to each fake
provider, which reads them back into its requests (what the offline model describes)."""

from __future__ import annotations

import base64

import pytest

from tests.agent.support import results_of
from toolwire import Agent, FilePart, Message, TextPart, ToolReturn, tool
from toolwire.testing import FakeProviderServer
from toolwire.testing.fake import FakeText, FakeToolCall, FakeTurn, file_size

pytestmark = pytest.mark.anyio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PDF = base64.b64encode(b"%PDF-1.4\n%%EOF\n").decode()
PHOTO = FilePart(media_type="image/png", data=PNG, name="photo.png")
CHART = FilePart(media_type="image/png", data=PNG, name="chart.png")
REPORT = FilePart(media_type="application/pdf", data=PDF, name="report.pdf")
IMAGE = FilePart(media_type="image/png", data=PNG)  # as received where image blocks carry no name

RECEIVED = {
    # protocol: (the person's files as received, the tool's files as received)
    "openai-chat": ([IMAGE], [IMAGE, REPORT]),
    "openai-responses": ([IMAGE], [IMAGE, REPORT]),
    "anthropic": ([IMAGE], [IMAGE, REPORT]),
    "gemini": ([IMAGE], [CHART, REPORT]),
    "mistral": ([IMAGE], [IMAGE, FilePart(media_type="application/pdf", data=PDF)]),
    "cohere": ([IMAGE], []),  # Cohere gets a note naming the tool's files
    "ollama": ([IMAGE], [IMAGE]),  # Ollama takes the image; the PDF is named in a note
}


@pytest.mark.parametrize("protocol", sorted(RECEIVED))
async def test_user_and_tool_files_reach_the_fake_provider(protocol: str) -> None:
    @tool
    def plot(title: str) -> ToolReturn:
        """Plot a chart."""
        return ToolReturn({"title": title}, files=[CHART, REPORT])

    turns = [FakeTurn(parts=[FakeToolCall(name="plot", arguments={"title": "Sales"})]),
             FakeTurn(parts=[FakeText(text="Here it is.")])]
    async with FakeProviderServer(protocol, turns) as provider:
        prompt = Message(role="user", parts=[TextPart(text="Plot this photo's colours."), PHOTO])
        result = await Agent(provider.model(), tools=[plot]).run(prompt)
    assert result.output == "Here it is."
    (sent,) = results_of(result.messages)
    assert sent.files == [CHART, REPORT]  # the history keeps what the tool returned

    user_files, tool_files = RECEIVED[protocol]
    first, second = provider.requests
    assert first.user_files() == user_files
    assert [file_size(f) for f in first.user_files()] == [70]
    assert second.user_files() == user_files  # still the person's last message, not the tool's files
    (received,) = second.pending_results()
    assert received.files == tool_files
    if not tool_files or protocol == "ollama":
        assert "report.pdf (application/pdf, 15 bytes)" in str(second.body)
