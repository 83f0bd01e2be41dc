"""Sending a streaming request: retries before the first byte, typed errors, nothing after.

A request is retried on connection errors, timeouts, HTTP 408/409/429 and 5xx — but only until the
response headers say 2xx. Once streaming has begun nothing is retried: the caller has already seen
events, and a replay would duplicate them.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from typing import Any

import anyio
import httpx
import orjson

from .exceptions import ProviderConnectionError, ProviderHTTPError, ProviderTimeoutError

__all__ = ["RetryPolicy", "error_message_from_body", "open_stream"]

logger = logging.getLogger("toolwire")

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})


class RetryPolicy:
    """Exponential backoff with jitter; `Retry-After` (seconds or HTTP date) wins when present."""

    def __init__(self, max_retries: int = 2, base_delay: float = 0.5, max_delay: float = 20.0) -> None:
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay

    def delay(self, attempt: int, response: httpx.Response | None = None) -> float:
        if response is not None:
            after = _retry_after(response)
            if after is not None:
                return min(after, self.max_delay)
        backoff: float = min(self.base_delay * (2**attempt), self.max_delay)
        return backoff * (0.75 + random.random() / 2)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def error_message_from_body(body: bytes) -> str:
    """The human message inside a provider's error body (OpenAI, Anthropic, Gemini, Cohere shapes)."""
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body.decode("utf-8", "replace").strip()
        return text[:500] or "(empty body)"
    if isinstance(data, list) and data:
        data = data[0]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            for key in ("message", "detail", "error"):
                value = err.get(key)
                if isinstance(value, str) and value:
                    return value
        if isinstance(err, str):
            return err
        for key in ("message", "detail"):
            value = data.get(key)
            if isinstance(value, str):
                return value
    return body.decode("utf-8", "replace")[:500]


async def open_stream(
    client: httpx.AsyncClient,
    *,
    url: str,
    body: bytes,
    headers: dict[str, str],
    provider: str,
    retry: RetryPolicy,
    timeout: httpx.Timeout | None = None,
) -> httpx.Response:
    """POST `body` and return the open 2xx response, ready to stream."""
    attempt = 0
    while True:
        request = client.build_request("POST", url, content=body, headers=headers,
                                       timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT)
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            if attempt < retry.max_retries:
                await _backoff(retry, attempt, provider, f"a timeout ({type(exc).__name__})")
                attempt += 1
                continue
            raise ProviderTimeoutError(
                f"{provider} did not answer in time ({type(exc).__name__}) after {attempt + 1} attempt(s). "
                "Raise the timeout or try again later.",
                provider=provider,
            ) from exc
        except httpx.TransportError as exc:
            if attempt < retry.max_retries:
                await _backoff(retry, attempt, provider, f"a connection error ({type(exc).__name__}: {exc})")
                attempt += 1
                continue
            raise ProviderConnectionError(
                f"Could not connect to {provider} at {url} ({type(exc).__name__}: {exc}) "
                f"after {attempt + 1} attempt(s). Check the base URL and your network.",
                provider=provider,
            ) from exc
        if response.status_code < 400:
            return response
        try:
            error_body = await response.aread()
        except httpx.HTTPError:
            error_body = b""
        finally:
            await response.aclose()
        if response.status_code in _RETRY_STATUS and attempt < retry.max_retries:
            await _backoff(retry, attempt, provider, f"HTTP {response.status_code}", response)
            attempt += 1
            continue
        detail = error_message_from_body(error_body)
        raise ProviderHTTPError(
            f"{provider} answered HTTP {response.status_code}: {detail}",
            provider=provider,
            status_code=response.status_code,
            body=error_body.decode("utf-8", "replace"),
        )


async def _backoff(
    retry: RetryPolicy, attempt: int, provider: str, reason: str, response: httpx.Response | None = None
) -> None:
    delay = retry.delay(attempt, response)
    logger.info("Retrying the request to %s in %.1f s after %s (retry %d of %d).", provider, delay, reason,
                attempt + 1, retry.max_retries)
    await anyio.sleep(delay)
