"""Retries before the first byte, never after; typed HTTP errors carrying the provider's message."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from toolwire import (
    Message,
    ProviderConnectionError,
    ProviderHTTPError,
    StreamInterruptedError,
    get_model,
)
from toolwire._transport import RetryPolicy, error_message_from_body

OK_BODY = (
    b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    b'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


async def run(handler: Any, **kwargs: Any) -> Message:
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = get_model("openai:gpt-4o", api_key="k", http_client=client, **kwargs)
        model.retry.base_delay = 0.001
        return await model.request([Message.user("x")])


@pytest.mark.anyio
async def test_429_with_retry_after_then_success() -> None:
    calls: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(429, headers={"retry-after": "0"}, json={"error": {"message": "slow down"}})
        if len(calls) == 2:
            return httpx.Response(503, json={"error": {"message": "overloaded"}})
        return httpx.Response(200, content=OK_BODY)

    message = await run(handler)
    assert message.text == "hi"
    assert len(calls) == 3


@pytest.mark.anyio
async def test_http_error_is_typed_with_status_provider_and_message() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "Incorrect API key provided.", "type": "auth"}})

    with pytest.raises(ProviderHTTPError) as info:
        await run(handler)
    assert info.value.status_code == 401
    assert info.value.provider == "openai"
    assert "Incorrect API key provided." in str(info.value)
    assert "Incorrect API key" in info.value.body


@pytest.mark.anyio
async def test_retries_give_up_with_the_last_error() -> None:
    attempts: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        return httpx.Response(500, text="boom")

    with pytest.raises(ProviderHTTPError, match="HTTP 500: boom"):
        await run(handler, max_retries=2)
    assert len(attempts) == 3


@pytest.mark.anyio
async def test_connection_errors_are_retried_then_typed() -> None:
    attempts: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        raise httpx.ConnectError("refused")

    with pytest.raises(ProviderConnectionError, match="Could not connect"):
        await run(handler, max_retries=1)
    assert len(attempts) == 2


@pytest.mark.anyio
async def test_nothing_is_retried_after_streaming_began() -> None:
    attempts: list[int] = []

    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b'data: {"choices":[{"index":0,"delta":{"content":"par"}}]}\n\n'
            raise httpx.RemoteProtocolError("peer closed connection")

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        return httpx.Response(200, stream=Broken())

    with pytest.raises(StreamInterruptedError) as info:
        await run(handler)
    assert len(attempts) == 1
    assert info.value.partial_message is not None and info.value.partial_message.text == "par"


def test_retry_after_header_forms() -> None:
    policy = RetryPolicy(base_delay=1.0)
    assert policy.delay(0, httpx.Response(429, headers={"retry-after": "3"})) == 3.0
    assert policy.delay(0, httpx.Response(429, headers={"retry-after-ms": "250"})) == 0.25
    assert policy.delay(0, httpx.Response(429, headers={"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert 0.75 <= policy.delay(0) <= 1.25
    assert 3.0 <= policy.delay(2) <= 5.0


def test_error_messages_from_each_provider_shape() -> None:
    assert error_message_from_body(b'{"error":{"message":"m1","type":"x"}}') == "m1"
    assert error_message_from_body(b'{"type":"error","error":{"type":"overloaded_error","message":"m2"}}') == "m2"
    assert error_message_from_body(b'[{"error":{"code":400,"message":"m3","status":"INVALID_ARGUMENT"}}]') == "m3"
    assert error_message_from_body(b'{"message":"m4"}') == "m4"
    assert error_message_from_body(b"plain text") == "plain text"


def test_timeout_of_numbers_objects_and_httpx_timeouts() -> None:
    """Hostile-input item 6: what `timeout=` accepts and means."""
    from toolwire import Timeout

    assert Timeout.of(None) == Timeout(total=1800.0, connect=10.0, idle=300.0)
    assert Timeout.of(30) == Timeout(total=30.0, connect=10.0, idle=30.0)
    assert Timeout.of(httpx.Timeout(5.0, connect=2.0)) == Timeout(total=1800.0, connect=2.0, idle=5.0)
    custom = Timeout(total=None, idle=900)
    assert Timeout.of(custom) is custom
    assert custom.httpx(remaining=3).read == 3


def test_secrets_are_redacted_and_urls_shown_without_them() -> None:
    """Hostile-input item 8."""
    from toolwire._transport import Secrets, display_url

    secrets = Secrets.of_request("https://u:pa55word-long@h.test/v1?key=querykey12345",
                                 {"Authorization": "Bearer sk-secret-key-1", "X-Custom-Token": "tok-0987654321"},
                                 "sk-secret-key-1")
    text = "Bearer sk-secret-key-1 pa55word-long querykey12345 tok-0987654321 short"
    assert secrets.redact(text) == "REDACTED REDACTED REDACTED REDACTED short"
    assert display_url("https://u:pa55word-long@h.test/v1?key=querykey12345&alt=sse") == \
        "https://u:REDACTED@h.test/v1?key=REDACTED&alt=sse"


def test_a_retry_after_longer_than_the_cap_is_never_shortened() -> None:
    """Hostile-input item 10: the delay is the provider's, not min(provider's, 20 s)."""
    policy = RetryPolicy(max_delay=20.0)
    assert policy.delay(0, httpx.Response(429, headers={"retry-after": "100"})) == 100.0
