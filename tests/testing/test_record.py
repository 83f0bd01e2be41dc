"""Recording provider streams into cassettes (secrets redacted) and replaying them without a network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.testing.conformance import comparable, counter_ids, parser_exists
from toolwire import Message, StreamInterruptedError, ToolDefinition, get_model
from toolwire.testing import (
    AutoResponder,
    CassetteError,
    FakeProviderServer,
    FakeText,
    FakeTurn,
    RecordingTransport,
    ReplayTransport,
    cassette_transport,
)
from toolwire.testing.fake import FAKE_PROTOCOLS
from toolwire.testing.record import redact_headers, redact_url

SECRET = "sk-live-0123456789abcdef"
TOOLS = [ToolDefinition(name="lookup", parameters={"type": "object", "properties": {"q": {"type": "string"}},
                                                   "required": ["q"]})]


def test_redaction_of_headers_and_query_parameters() -> None:
    headers = redact_headers({"Authorization": f"Bearer {SECRET}", "x-api-key": SECRET, "X-Goog-Api-Key": SECRET,
                              "api-key": SECRET, "Cookie": "session=abc", "Content-Type": "application/json",
                              "x-ratelimit-remaining-tokens": "100"})
    assert headers == {"authorization": "Bearer REDACTED", "x-api-key": "REDACTED", "x-goog-api-key": "REDACTED",
                       "api-key": "REDACTED", "cookie": "REDACTED", "content-type": "application/json",
                       "x-ratelimit-remaining-tokens": "100"}
    url = redact_url(f"https://example.com/v1beta/models/m:streamGenerateContent?alt=sse&key={SECRET}")
    assert url == "https://example.com/v1beta/models/m:streamGenerateContent?alt=sse&key=REDACTED"


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", [p for p in FAKE_PROTOCOLS if parser_exists(p)])
async def test_record_then_replay_gives_the_same_message(protocol: str, tmp_path: Path) -> None:
    cassette = tmp_path / "cassettes" / f"{protocol}.json"
    async with FakeProviderServer(protocol, AutoResponder(), api_key=SECRET) as server:
        base_url = server.base_url
        async with httpx.AsyncClient(transport=RecordingTransport(cassette)) as client:
            model = server.model("m", api_key=SECRET, http_client=client, id_factory=counter_ids())
            recorded = await model.request([Message.user("look something up")], tools=TOOLS)
        served = server.requests[0]

    text = cassette.read_text()
    assert SECRET not in text
    assert "REDACTED" in text
    [interaction] = orjson.loads(text)["interactions"]
    assert interaction["request"]["method"] == "POST"
    assert interaction["request"]["url"].startswith(base_url)
    assert interaction["request"]["json"] == served.body
    assert interaction["response"]["status"] == 200
    assert recorded.tool_calls and recorded.tool_calls[0].name == "lookup"

    # Replay: no server is listening any more; the cassette answers.
    transport = ReplayTransport(cassette)
    async with httpx.AsyncClient(transport=transport) as client:
        model = get_model(f"{server.provider}:m", api_key="anything", base_url=base_url, http_client=client,
                          id_factory=counter_ids())
        replayed = await model.request([Message.user("look something up")], tools=TOOLS)
    assert comparable(replayed) == comparable(recorded)
    assert replayed.tool_calls[0].id == recorded.tool_calls[0].id
    assert transport.unused == []


@pytest.mark.anyio
async def test_replay_matches_method_and_path_in_order_and_says_what_is_missing(tmp_path: Path) -> None:
    cassette = tmp_path / "two.json"
    script = [FakeTurn(parts=[FakeText(text="first")]), FakeTurn(parts=[FakeText(text="second")])]
    async with FakeProviderServer("openai-chat", script) as server:
        async with httpx.AsyncClient(transport=RecordingTransport(cassette)) as client:
            model = server.model(http_client=client)
            await model.request([Message.user("1")])
            await model.request([Message.user("2")])
        base_url = server.base_url

    async with httpx.AsyncClient(transport=ReplayTransport(cassette)) as client:
        model = get_model("openai:m", api_key="x", base_url=base_url, http_client=client)
        assert (await model.request([Message.user("1")])).text == "first"
        assert (await model.request([Message.user("2")])).text == "second"
        with pytest.raises(CassetteError, match=r"no unused recorded response for POST /v1/chat/completions"):
            await model.request([Message.user("3")])
        other = get_model("anthropic:m", api_key="x", base_url=base_url.removesuffix("/v1"), http_client=client)
        with pytest.raises(CassetteError, match=r"POST /v1/messages .*it recorded: POST /v1/chat/completions"):
            await other.request([Message.user("1")])


@pytest.mark.anyio
async def test_a_stream_that_broke_while_recording_breaks_again_on_replay(tmp_path: Path) -> None:
    cassette = tmp_path / "broken.json"
    turn = FakeTurn(parts=[FakeText(text="Half of an answer that never ends", chunks=5)], drop_after=4)
    async with FakeProviderServer("anthropic", [turn]) as server:
        async with httpx.AsyncClient(transport=RecordingTransport(cassette)) as client:
            model = server.model(http_client=client)
            with pytest.raises(StreamInterruptedError) as recorded:
                await model.request([Message.user("hi")])
        base_url = server.base_url
    assert orjson.loads(cassette.read_bytes())["interactions"][0]["response"]["error"]["type"] == "RemoteProtocolError"

    async with httpx.AsyncClient(transport=ReplayTransport(cassette)) as client:
        model = get_model("anthropic:m", api_key="x", base_url=base_url, http_client=client)
        with pytest.raises(StreamInterruptedError) as replayed:
            await model.request([Message.user("hi")])
    assert recorded.value.partial_message is not None and replayed.value.partial_message is not None
    assert replayed.value.partial_message.text == recorded.value.partial_message.text == "Half "


@pytest.mark.anyio
async def test_cassette_transport_records_once_then_replays(tmp_path: Path) -> None:
    cassette = tmp_path / "once.json"
    results: list[Any] = []
    async with FakeProviderServer("gemini", [FakeTurn(parts=[FakeText(text="Hello from Gemini")])]) as server:
        for _ in range(2):
            transport = cassette_transport(cassette, "once")
            results.append(type(transport))
            async with httpx.AsyncClient(transport=transport) as client:
                model = server.model("gemini-2.5-flash", http_client=client)
                assert (await model.request([Message.user("hi")])).text == "Hello from Gemini"
    assert results == [RecordingTransport, ReplayTransport]
    assert len(server.requests) == 1  # the second run never reached the server
    with pytest.raises(CassetteError, match="does not exist"):
        cassette_transport(tmp_path / "missing.json", "replay")
