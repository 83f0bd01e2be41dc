"""Sending a streaming request: a deadline, retries before the first byte, typed errors, no secrets.

A request is retried on connection errors, connect timeouts, HTTP 408/409/429 and 5xx — but only until
the response headers say 2xx. A server that accepted the request and then stayed silent for the whole
idle timeout is not asked again: that would multiply the wait. Once streaming has begun nothing is
retried: the caller has already seen events, and a replay would duplicate them.

Time is bounded by a `Timeout`: `connect` for each connection, `idle` for the longest wait for the
response to begin or for the next event once it streams (bytes that do not complete an event do not
count, so a server trickling a byte at a time cannot hold a request open), and `total`, a deadline for
the whole request: every attempt, every retry wait and the whole stream. A retry whose wait would pass
the deadline is not made. `Retry-After` is honoured as the provider says, never shortened: a wait longer
than `RetryPolicy.max_retry_after` (or past the deadline) ends the request at once with a
`ProviderHTTPError` that carries the headers and `retry_after`.

Error bodies are read up to `MAX_ERROR_BODY` bytes, and every message, body and URL that reaches an
exception has the request's secrets (API key, auth header values, a password or key in the URL)
replaced by `REDACTED`.
"""

from __future__ import annotations

import email.utils
import functools
import logging
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, parse_qsl, urlsplit, urlunsplit

import anyio
import httpx

from ._net import AsyncioNetwork, use_asyncio_network
from .exceptions import ProviderConnectionError, ProviderHTTPError, ProviderTimeoutError, UserError
from .wire._values import error_message_from_body

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_ERROR_BODY",
    "REDACTED",
    "RetryPolicy",
    "Secrets",
    "ShardedTransport",
    "Timeout",
    "error_message_from_body",
    "open_stream",
]

logger = logging.getLogger("toolwire")

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})

MAX_ERROR_BODY = 64 * 1024
"""The most of an error body that is read and kept (a provider's message is in its first lines)."""

REDACTED = "REDACTED"


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeout:
    """How long a request may take. Pass it (or a number of seconds) as `timeout=`.

    Attributes:
        total: The deadline for the whole request, retries and the whole stream included; `None` for
            none. The default, 30 minutes, lets the longest single answers models give (over 100,000
            output tokens at 100 tokens a second take about 20 minutes) finish.
        connect: Seconds to open a connection.
        idle: The longest wait for the response to begin, or for the next event once it streams. The
            default, 5 minutes, covers reasoning models that think silently before their first token.
            Bytes that do not complete an event do not count as progress.

    A number `n` as `timeout=n` means `Timeout(total=n, connect=min(10, n), idle=min(300, n))`:
    nothing takes longer than `n` seconds. An `httpx.Timeout` sets `connect` and `idle` (from its read
    timeout) and keeps the default deadline.
    """

    total: float | None = 1800.0
    connect: float = 10.0
    idle: float = 300.0

    @classmethod
    def of(cls, value: float | Timeout | httpx.Timeout | None) -> Timeout:
        """`value` as a `Timeout` (`None`: the defaults)."""
        if value is None:
            return DEFAULT_TIMEOUT
        if isinstance(value, Timeout):
            return value
        if isinstance(value, httpx.Timeout):
            return cls(connect=value.connect if value.connect is not None else DEFAULT_TIMEOUT.connect,
                       idle=value.read if value.read is not None else DEFAULT_TIMEOUT.idle)
        seconds = float(value)
        return cls(total=seconds, connect=min(seconds, DEFAULT_TIMEOUT.connect),
                   idle=min(seconds, DEFAULT_TIMEOUT.idle))

    def httpx(self, remaining: float | None = None) -> httpx.Timeout:
        """The socket-level timeouts for one attempt, none longer than what is left of the deadline."""
        connect, idle = self.connect, self.idle
        if remaining is not None:
            connect, idle = min(connect, remaining), min(idle, remaining)
        return httpx.Timeout(idle, connect=connect, pool=connect)


DEFAULT_TIMEOUT = Timeout()


class ShardedTransport(httpx.AsyncBaseTransport):
    """Several connection pools behind one transport, each request sent on the next pool in turn.

    For a client that streams from one host on hundreds of connections at once (the chat server's model
    client). httpcore 1.0.9's pool does its bookkeeping at each request and each response close, and that
    bookkeeping is quadratic in the pool's connections (for each idle one it counts them all again): at 500
    open streams it cost milliseconds per request (`bench/model_pool.py`). Split over `shards` pools, each
    pool holds a `shards`-th of the connections, and the bookkeeping a `shards`-th squared. The limits are
    split the same way (`None` stays unlimited). `options` go to each `httpx.AsyncHTTPTransport`.

    `network`: the pools open their connections with this `AsyncioNetwork` (`_net.py`: fewer system calls per
    read on asyncio) instead of httpcore's default backend.
    """

    def __init__(self, shards: int = 16, *, limits: httpx.Limits | None = None,
                 network: AsyncioNetwork | None = None, **options: object) -> None:
        if shards < 1:
            raise UserError(f"A sharded transport needs at least one pool; got shards={shards}.")
        limits = limits or httpx.Limits()

        def share(total: int | None) -> int | None:
            return None if total is None else max(1, -(-total // shards))

        each = httpx.Limits(max_connections=share(limits.max_connections),
                            max_keepalive_connections=share(limits.max_keepalive_connections),
                            keepalive_expiry=limits.keepalive_expiry)
        if "verify" not in options and "cert" not in options:
            # One TLS context for every pool: each pool would otherwise load the system's CA certificates again
            # (tens of ms of CPU each, 16 times at every server start).
            options = {**options, "verify": httpx.create_ssl_context(trust_env=bool(options.get("trust_env", True)))}
        self._pools = [httpx.AsyncHTTPTransport(limits=each, **options) for _ in range(shards)]  # type: ignore[arg-type]
        self.network = network if network is not None and all(use_asyncio_network(pool, network)
                                                               for pool in self._pools) else None
        """The `AsyncioNetwork` the pools connect with, or `None` (httpcore's default backend)."""
        self._next = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        pools = self._pools
        pool = pools[self._next]
        self._next = (self._next + 1) % len(pools)
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


class RetryPolicy:
    """Exponential backoff with jitter; `Retry-After` (seconds or HTTP date) wins when present.

    `max_delay` caps the backoff toolwire chooses; a `Retry-After` from the provider is never shortened,
    and one longer than `max_retry_after` is not waited for (the error is raised with `retry_after`).
    """

    def __init__(self, max_retries: int = 2, base_delay: float = 0.5, max_delay: float = 20.0,
                 max_retry_after: float = 60.0) -> None:
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_retry_after = max_retry_after

    def delay(self, attempt: int, response: httpx.Response | None = None) -> float:
        if response is not None:
            after = retry_after(response)
            if after is not None:
                return after
        backoff: float = min(self.base_delay * (2**attempt), self.max_delay)
        return backoff * (0.75 + random.random() / 2)


def retry_after(response: httpx.Response) -> float | None:
    """Seconds the response asks to wait (`retry-after-ms`, `retry-after` as seconds or a date)."""
    value = response.headers.get("retry-after-ms")
    if value:
        try:
            return max(float(value) / 1000, 0.0)
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


class Secrets:
    """The secret values of a request (key, auth headers, URL password and keys), and their removal."""

    __slots__ = ("values",)

    # Shorter values would redact ordinary words; real credentials are long.
    MIN_LENGTH = 8

    def __init__(self, values: Iterable[str | None]) -> None:
        found = {v for v in values if v and len(v) >= self.MIN_LENGTH}
        self.values = sorted(found, key=len, reverse=True)

    @classmethod
    def of_request(cls, url: str, headers: dict[str, str], api_key: str | None) -> Secrets:
        values: list[str | None] = [api_key]
        for name, value in headers.items():
            lowered = name.lower()
            if lowered in _SECRET_HEADERS or any(word in lowered for word in ("key", "token", "secret", "auth")):
                values.append(value)
                values.append(value.partition(" ")[2])
        parts = _split(url)
        if parts is not None:
            values.append(parts.password)
            values.extend(v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() in _SECRET_QUERY)
        return cls(values)

    def redact(self, text: str) -> str:
        for secret in self.values:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text


_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key",
                             "cookie"})
_SECRET_QUERY = frozenset({"key", "api_key", "apikey", "api-key", "access_token", "token", "sig", "signature"})


@functools.lru_cache(maxsize=256)
def _parsed_url(url: str) -> httpx.URL:
    """`url` parsed once: a model asks the same few URLs over and over, and httpx parses a string URL anew on every
    request (in pure Python: 30 µs of a request build, 20 µs with the URL parsed). An `httpx.URL` is immutable, so one
    parse serves every request; `httpx.URL(url)` on one is free."""
    return httpx.URL(url)


def display_url(url: str) -> str:
    """`url` without a password and with secret query parameters replaced, for messages."""
    parts = _split(url)
    if parts is None:
        return url
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(f":{parts.password}@", f":{REDACTED}@", 1)
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = "&".join(f"{k}={REDACTED if k.lower() in _SECRET_QUERY else v}" for k, v in pairs)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _split(url: str) -> SplitResult | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port only shows when read
    except ValueError:
        return None
    return parts


def _public_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower() not in ("set-cookie", "cookie")}


async def _read_error_body(response: httpx.Response) -> bytes:
    """At most `MAX_ERROR_BODY` bytes of an error body; the rest is never read."""
    pieces: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            pieces.append(chunk)
            size += len(chunk)
            if size >= MAX_ERROR_BODY:
                break
    except httpx.HTTPError:
        pass
    finally:
        await response.aclose()
    return b"".join(pieces)[:MAX_ERROR_BODY]


async def open_stream(
    client: httpx.AsyncClient,
    *,
    url: str,
    body: bytes,
    headers: dict[str, str],
    provider: str,
    retry: RetryPolicy,
    timeout: Timeout | None = None,
    deadline: float | None = None,
    secrets: Secrets | None = None,
) -> httpx.Response:
    """POST `body` and return the open 2xx response, ready to stream.

    `deadline` is a `time.monotonic()` value the whole request must finish by.
    """
    timeout = timeout or DEFAULT_TIMEOUT
    secrets = secrets or Secrets(())
    shown_url = display_url(url)
    attempt = 0
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise ProviderTimeoutError(
                f"{provider} did not answer within the request's deadline of {timeout.total:g} s "
                f"({attempt} attempt(s)). Raise timeout= (Timeout(total=...)) or try again later.",
                provider=provider,
            )
        try:
            request = client.build_request("POST", _parsed_url(url), content=body, headers=headers,
                                           timeout=timeout.httpx(remaining))
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise UserError(f"The URL {shown_url} cannot be requested ({exc}). Check base_url: it must be "
                            "an http:// or https:// URL.") from exc
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            # A server that accepted the request and then said nothing for a whole idle timeout is not
            # asked again (that would multiply the wait); one that could not be reached in time is.
            hung = isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout))
            if not hung and await _wait_to_retry(retry, attempt, None, deadline, provider,
                                                      f"a timeout ({type(exc).__name__})"):
                attempt += 1
                continue
            raise ProviderTimeoutError(
                f"{provider} did not answer in time ({type(exc).__name__}) after {attempt + 1} attempt(s). "
                "Raise the timeout or try again later.",
                provider=provider,
            ) from exc
        except httpx.TransportError as exc:
            if await _wait_to_retry(retry, attempt, None, deadline, provider,
                                          f"a connection error ({type(exc).__name__})"):
                attempt += 1
                continue
            why = secrets.redact(f"{type(exc).__name__}: {exc}").replace(url, shown_url)
            raise ProviderConnectionError(
                f"Could not connect to {provider} at {shown_url} ({why}) after {attempt + 1} attempt(s). "
                "Check the base URL and your network.",
                provider=provider,
            ) from exc
        if response.status_code < 400:
            return response
        error_body = await _read_error_body(response)
        after = retry_after(response)
        status = response.status_code
        waited_too_long = after is not None and after > retry.max_retry_after
        if status in _RETRY_STATUS and not waited_too_long and \
                await _wait_to_retry(retry, attempt, response, deadline, provider, f"HTTP {status}"):
            attempt += 1
            continue
        detail = secrets.redact(error_message_from_body(error_body))
        message = f"{provider} answered HTTP {status}: {detail}"
        if after is not None and status in _RETRY_STATUS:
            if waited_too_long:
                message += (f" It asked to retry after {after:g} s, longer than toolwire waits on its own "
                            f"({retry.max_retry_after:g} s): retry after that time, or raise "
                            "RetryPolicy.max_retry_after.")
            elif attempt < retry.max_retries:
                message += f" It asked to retry after {after:g} s, which would pass the request's deadline."
        raise ProviderHTTPError(
            message,
            provider=provider,
            status_code=status,
            body=secrets.redact(error_body.decode("utf-8", "replace")),
            headers=_public_headers(response),
            retry_after=after,
        )


async def _wait_to_retry(retry: RetryPolicy, attempt: int, response: httpx.Response | None,
                         deadline: float | None, provider: str, reason: str) -> bool:
    """Sleep before the next attempt and say True, or say False when no attempt is left in time."""
    if attempt >= retry.max_retries:
        return False
    delay = retry.delay(attempt, response)
    if deadline is not None and time.monotonic() + delay >= deadline:
        return False
    logger.info("Retrying the request to %s in %.1f s after %s (retry %d of %d).", provider, delay, reason,
                attempt + 1, retry.max_retries)
    await anyio.sleep(delay)
    return True
