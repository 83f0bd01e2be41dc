"""Models: one streamed request at a time, no tool execution.

    model = get_model("openai:gpt-4.1-mini")
    async with model.stream(messages, tools=tools) as response:
        async for event in response:
            ...
    response.message   # the assembled assistant Message

`Model` is the interface the agent needs; `HTTPModel` implements it over a wire protocol and httpx, and
`toolwire.testing.ScriptedModel` implements it without a network. Leaving the `async with` early closes
the HTTP response. A stream that breaks or reports an error still yields `message_end` with everything
complete so far, then raises a `StreamError` carrying that partial message (marked
`metadata["incomplete"] = True`): whatever the body holds, nothing but toolwire's exceptions escapes.

Time is bounded per request (`timeout=`, see `Timeout`) without a timer per network read: on asyncio
over an HTTP/1.1 connection, one alarm is armed for the earlier of the deadline and "last complete
event + idle", re-armed when it finds progress, and when it finds none it shuts the connection's
socket down, so the pending read ends at once and the stream reports the timeout. Elsewhere (trio,
HTTP/2, transports without a socket) a read gets a cancel scope of its own once less time is left than
the socket's read timeout would wait. Either way the per-read cost is one clock reading.

An `HTTPModel` that creates its own HTTP client keeps one per event loop and closes it when that loop
ends (`asyncio.run`, `anyio.run`, a test's loop): a pooled connection never outlives or crosses the
loop it was opened in, so one model (or a module-level `Agent`) works across any number of loops.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import orjson

from ._accumulate import Accumulator, new_call_id
from ._sse import MAX_EVENT_BYTES
from ._transport import RetryPolicy, Secrets, Timeout, display_url, open_stream
from .events import Event, FinishReason, Usage
from .exceptions import (
    MalformedStreamError,
    ProviderConnectionError,
    ProviderError,
    ProviderStreamError,
    ProviderTimeoutError,
    StreamInterruptedError,
    UserError,
)
from .messages import Message
from .providers import Provider, get_provider
from .settings import ModelSettings
from .tools import ToolDefinition
from .wire import WireProtocol, protocol_class

__all__ = ["HTTPModel", "Model", "ModelResponse", "Timeout", "get_model"]


class ModelResponse(ABC):
    """An open response stream: an async context manager and an async iterator of events."""

    message: Message | None = None
    usage: Usage | None = None
    finish_reason: FinishReason | None = None

    @abstractmethod
    async def __aenter__(self) -> ModelResponse: ...

    @abstractmethod
    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    @abstractmethod
    def __aiter__(self) -> AsyncIterator[Event]: ...


class Model(ABC):
    """Something that streams one assistant message for a history."""

    name: str = "model"
    provider_name: str = "model"
    protocol_name: str | None = None

    @abstractmethod
    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Open one streamed request. Use as `async with model.stream(...) as response:`."""

    async def count_tokens(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> int | None:
        """The input tokens the request `stream` would send for these arguments takes, as the provider
        counts them, or None when the provider offers no way to count before a request."""
        return None

    async def request(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> Message:
        """Stream a response to the end and return the assembled message."""
        async with self.stream(messages, tools=tools, settings=settings) as response:
            async for _ in response:
                pass
        assert response.message is not None
        return response.message


class HTTPModel(Model):
    """A model reached over HTTP through a wire protocol."""

    def __init__(
        self,
        provider: Provider,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | Timeout | httpx.Timeout | None = None,
        max_retries: int = 2,
        headers: dict[str, str] | None = None,
        settings: ModelSettings | None = None,
        previews: bool = True,
        id_factory: Callable[[], str] = new_call_id,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        """See `get_model`. `timeout`: seconds for the whole request, or a `Timeout` (the default when
        None, or the socket timeouts of `http_client` with the default deadline); `max_event_bytes`: the
        largest single event a stream may send before it is stopped with `event_too_large`."""
        self.provider = provider
        self.model = model
        self.name = f"{provider.name}:{model}"
        self.provider_name = provider.name
        self.protocol_name = provider.protocol
        self.protocol: WireProtocol = protocol_class(provider.protocol)(provider)
        self.api_key = provider.resolve_api_key(api_key)
        self.base_url = provider.resolve_base_url(base_url)
        self._client = http_client
        self._owns_client = http_client is None
        self._loop_clients: dict[anyio.lowlevel.EventLoopToken, _LoopClient] = {}
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float, Timeout, httpx.Timeout, type(None))):
            raise UserError(f"timeout must be seconds (a number), a toolwire Timeout or None; got {timeout!r}.")
        if isinstance(timeout, (int, float)) and timeout <= 0:
            raise UserError(f"timeout must be a positive number of seconds; got {timeout!r}.")
        # Every request gets these socket timeouts, even on a caller's client (whose own timeouts are the
        # default then); the idle timeout and the deadline are toolwire's own (see `Timeout`).
        self.timeouts = Timeout.of(timeout if timeout is not None or http_client is None else http_client.timeout)
        self.timeout = self.timeouts.httpx()
        self.retry = RetryPolicy(max_retries=max_retries)
        self.max_event_bytes = max_event_bytes
        self.headers = {**provider.headers, **(headers or {})}
        self.settings: ModelSettings = settings or {}
        self.previews = previews
        self.id_factory = id_factory

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client requests of the running event loop use: the caller's, or this model's for this loop."""
        if self._client is not None:
            return self._client
        return self._loop_client().client

    def _loop_client(self) -> _LoopClient:
        token = anyio.lowlevel.current_token()
        entry = self._loop_clients.get(token)
        if entry is None or entry.client.is_closed:
            # Forget clients of loops that have ended (their loop closed them, or can no longer).
            for key in [k for k, v in self._loop_clients.items() if v.client.is_closed or _loop_closed(k)]:
                del self._loop_clients[key]
            entry = self._loop_clients[token] = _LoopClient(httpx.AsyncClient(timeout=self.timeout))
        return entry

    async def _request_client(self) -> httpx.AsyncClient:
        if self._client is not None:
            return self._client
        entry = self._loop_client()
        if entry.closer is None:
            # An async generator suspended at its `yield` is finalised when its loop shuts down
            # (asyncio's shutdown_asyncgens, trio's end of run), which closes the client in that loop.
            entry.closer = _close_at_loop_end(entry.client)
            await entry.closer.asend(None)
        return entry.client

    async def aclose(self) -> None:
        """Close the HTTP client this model created for the running event loop (a caller's client stays open)."""
        if self._owns_client:
            entry = self._loop_clients.pop(anyio.lowlevel.current_token(), None)
            if entry is not None:
                await entry.client.aclose()

    def build_request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> tuple[str, dict[str, Any], dict[str, str]]:
        """The URL, JSON body and headers that `stream` would send (useful for debugging)."""
        merged: ModelSettings = {**self.settings, **(settings or {})}
        body = self.protocol.build_request(self.model, messages, tools, merged)
        url = self.base_url + self.protocol.endpoint(self.model, merged)
        headers = {
            "Content-Type": "application/json",
            **self.protocol.default_headers(),
            **self.protocol.auth_headers(self.api_key),
            **self.headers,
            **merged.get("extra_headers", {}),
        }
        return url, body, headers

    async def count_tokens(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> int | None:
        """Ask the provider's counting endpoint (Anthropic `/v1/messages/count_tokens`, Gemini
        `:countTokens`) how many input tokens the request `stream` would send takes; None for protocols
        without one. The counted body is built by the same code as the request's, minus what shapes only
        the output. Raises the same `ProviderError`s as a request (with the same retries and deadline)."""
        url, body, headers = self.build_request(messages, tools, settings)
        counting = self.protocol.count_request(self.model, body)
        if counting is None:
            return None
        path, count_body = counting
        url = self.base_url + path
        headers = {**headers, "Accept": "application/json"}
        secrets = Secrets.of_request(url, headers, self.api_key)
        total = self.timeouts.total
        deadline = None if total is None else time.monotonic() + total
        name = self.provider_name
        response = await open_stream(
            await self._request_client(), url=url, body=_encode(count_body), headers=headers, provider=name,
            retry=self.retry, timeout=self.timeouts, deadline=deadline, secrets=secrets,
        )
        try:
            with anyio.fail_after(None if deadline is None else max(0.0, deadline - time.monotonic())):
                raw = await response.aread()
        except TimeoutError as exc:
            raise ProviderTimeoutError(f"{name} did not finish answering the token count within the request's "
                                       f"deadline of {total:g} s. Raise timeout= (Timeout(total=...)).",
                                       provider=name) from exc
        except httpx.HTTPError as exc:
            raise ProviderConnectionError(f"The connection to {name} failed while it answered the token count "
                                          f"({type(exc).__name__}).", provider=name) from exc
        finally:
            await response.aclose()
        try:
            count = self.protocol.count_from(orjson.loads(raw))
        except orjson.JSONDecodeError:
            count = None
        if count is None:
            shown = secrets.redact(raw[:200].decode("utf-8", "replace"))
            raise ProviderError(f"{name} answered the token count with a body that holds no count: {shown!r}.",
                                provider=name)
        return count

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> StreamedResponse:
        url, body, headers = self.build_request(messages, tools, settings)
        return StreamedResponse(self, url, _encode(body), headers)


class _LoopClient:
    """A client this model made for one event loop, and the generator that closes it when the loop ends."""

    __slots__ = ("client", "closer")

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.closer: AsyncGenerator[None, None] | None = None


async def _close_at_loop_end(client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.aclose()


def _loop_closed(token: anyio.lowlevel.EventLoopToken) -> bool:
    is_closed = getattr(token.native_token, "is_closed", None)
    return bool(is_closed()) if callable(is_closed) else False


class StreamedResponse(ModelResponse):
    """One HTTP response being streamed and assembled."""

    def __init__(self, model: HTTPModel, url: str, body: bytes, headers: dict[str, str]) -> None:
        self._model = model
        self._url = url
        self._body = body
        self._headers = headers
        self._response: httpx.Response | None = None
        self._iterator: AsyncIterator[Event] | None = None
        self._deadline: float | None = None
        self._alarm: _Alarm | None = None
        self._secrets = Secrets.of_request(url, headers, model.api_key)
        self.accumulator = Accumulator(previews=model.previews, id_factory=model.id_factory,
                                       provider=model.provider_name)
        self.message: Message | None = None
        self.usage: Usage | None = None
        self.finish_reason: FinishReason | None = None

    async def __aenter__(self) -> StreamedResponse:
        m = self._model
        total = m.timeouts.total
        self._deadline = None if total is None else time.monotonic() + total
        self._response = await open_stream(
            await m._request_client(), url=self._url, body=self._body, headers=self._headers, provider=m.provider_name,
            retry=m.retry, timeout=m.timeouts, deadline=self._deadline, secrets=self._secrets,
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        iterator, self._iterator = self._iterator, None
        if iterator is not None:
            await iterator.aclose()  # type: ignore[attr-defined]
        response, self._response = self._response, None
        if response is not None:
            await response.aclose()

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._response is None:
            raise UserError("Use the response inside `async with model.stream(...) as response:` before iterating.")
        if self._iterator is not None:
            raise UserError("A response can be iterated only once; keep the events you need as they arrive.")
        self._iterator = self._events(self._response)
        return self._iterator

    async def _events(self, response: httpx.Response) -> AsyncIterator[Event]:
        acc = self.accumulator
        m = self._model
        parser = m.protocol.new_parser(acc)
        parser.content_type = response.headers.get("content-type")
        if m.max_event_bytes != MAX_EVENT_BYTES:
            parser.max_event_bytes = m.max_event_bytes
        acc.metadata["provider"] = m.provider_name
        name = m.provider_name
        idle = m.timeouts.idle
        deadline = self._deadline if self._deadline is not None else math.inf
        reader = response.aiter_bytes()
        read = reader.__anext__
        monotonic = time.monotonic
        now = last_progress = monotonic()
        alarm = _Alarm.arm(response, deadline, idle, now)
        # Without an alarm: while more time is left than this, a read relies on the socket's read timeout
        # (idle) and costs nothing extra; below it, a read gets a cancel scope of its own.
        slack = min(1.0, idle / 10)
        plain_limit = deadline - idle + slack
        plain_until = min(now + slack, plain_limit) if alarm is None else math.inf
        frames = 0
        events = acc.events  # filled by the parser, emptied here after each read
        self._alarm = alarm
        try:
            while True:
                try:
                    if now < plain_until:
                        chunk = await read()
                    else:
                        limit = min(last_progress + idle, deadline)
                        wait = limit - now
                        got: bytes | None = None
                        if wait > 0:
                            with anyio.move_on_after(wait):
                                got = await read()
                        if got is None:
                            self._time_out(limit == deadline)
                            break
                        chunk = got
                except StopAsyncIteration:
                    break
                parser.feed(chunk)
                now = monotonic()  # one clock reading per read
                if parser.frames != frames:
                    frames = parser.frames
                    last_progress = now
                    if alarm is not None:
                        alarm.progress = now
                    else:
                        plain_until = now + slack
                        if plain_until > plain_limit:
                            plain_until = plain_limit
                if events:
                    # Each event is let go of as it is handed over: a preview, once read, may be large,
                    # and a read can complete hundreds of events.
                    if len(events) > 1:
                        events.reverse()
                    while events:
                        yield events.pop()
                if parser.stopped:
                    break
            if alarm is not None and alarm.fired is not None:
                self._time_out(alarm.fired == "deadline")  # the socket was shut down: not an end of body
        except httpx.HTTPError as exc:
            self._transport_failed(exc, response)
        finally:
            if alarm is not None:
                alarm.cancel()
            await reader.aclose()  # type: ignore[attr-defined]
        self.message = parser.close()
        self.usage = acc.usage
        self.finish_reason = acc.finish_reason
        error = acc.error
        if error is not None:
            error.message = self._secrets.redact(error.message).replace(self._url, display_url(self._url))
        events, acc.events = acc.events, []
        for event in events:
            yield event
        if error is not None:
            kind = error.error_type
            cls = (StreamInterruptedError if kind in _INTERRUPTIONS
                   else MalformedStreamError if kind in _MALFORMED else ProviderStreamError)
            raise cls(error.message, provider=name, error_type=kind, partial_message=self.message)

    def _transport_failed(self, exc: httpx.HTTPError, response: httpx.Response) -> None:
        acc, name = self.accumulator, self._model.provider_name
        alarm = self._alarm
        if alarm is not None and alarm.fired is not None:
            self._time_out(alarm.fired == "deadline")  # the alarm shut the socket down
        elif isinstance(exc, httpx.TimeoutException):
            acc.fail("timeout", f"{name} stopped sending before the response was complete (read timeout: "
                                f"{type(exc).__name__}). Raise timeout= (Timeout(idle=...)) if the model is expected "
                                "to pause longer.")
        elif isinstance(exc, httpx.DecodingError):
            encoding = response.headers.get("content-encoding", "none")
            acc.fail("decoding_error", f"The response body from {name} could not be decoded (content-encoding "
                                       f"{encoding}: {exc}). The body is corrupt, or a proxy changed it without "
                                       "saying so; everything complete before that point is kept.")
        else:
            acc.fail("connection_lost", f"The connection to {name} dropped before the response was complete "
                                        f"({type(exc).__name__}: {exc}).")

    def _time_out(self, deadline: bool) -> None:
        m = self._model
        if deadline:
            self.accumulator.fail(
                "deadline", f"The response from {m.provider_name} did not finish within the request's deadline of "
                            f"{m.timeouts.total:g} s, so it was stopped. Raise timeout= (Timeout(total=...)) for "
                            "longer answers.")
        else:
            self.accumulator.fail(
                "timeout", f"{m.provider_name} sent no complete event for {m.timeouts.idle:g} s, so the response "
                           "was stopped (bytes that do not complete an event do not count). Raise timeout= "
                           "(Timeout(idle=...)) if the model is expected to pause longer.")


class _Alarm:
    """Ends a read that outlives the deadline or the idle timeout, with one timer per idle period.

    Armed for the earlier of the deadline and `progress + idle`; when it fires after progress, it is
    armed again for the new limit; otherwise it shuts the connection's socket down, so the read waiting on
    it ends at once (the stream then reports the timeout, never a dropped connection). Only for asyncio
    and HTTP/1.1 (an HTTP/2 socket carries other requests too) over a real socket.
    """

    __slots__ = ("_deadline", "_handle", "_idle", "_loop", "_socket", "fired", "progress")

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: Any, deadline: float, idle: float,
                 now: float) -> None:
        self._loop = loop
        self._socket = sock
        self._deadline = deadline
        self._idle = idle
        self.progress = now
        self.fired: str | None = None
        self._handle = loop.call_at(min(now + idle, deadline), self._fire)

    @classmethod
    def arm(cls, response: httpx.Response, deadline: float, idle: float, now: float) -> _Alarm | None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None  # not asyncio (trio): reads get cancel scopes
        if response.http_version != "HTTP/1.1" or abs(loop.time() - now) > 1.0:
            return None
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not callable(getattr(sock, "shutdown", None)):
            return None  # a mock transport, or a stream without a socket
        return cls(loop, sock, deadline, idle, now)

    def _fire(self) -> None:
        limit = min(self.progress + self._idle, self._deadline)
        if self._loop.time() < limit:
            self._handle = self._loop.call_at(limit, self._fire)
            return
        self.fired = "deadline" if limit == self._deadline else "idle"
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed: the read has ended anyway

    def cancel(self) -> None:
        self._handle.cancel()


_INTERRUPTIONS = frozenset({"incomplete_stream", "connection_lost", "timeout", "deadline", "decoding_error"})
_MALFORMED = frozenset({"malformed_chunk", "invalid_field", "unrecognised_body", "event_too_large"})


def _encode(body: dict[str, Any]) -> bytes:
    """The request body as JSON; values orjson refuses (past 255 levels, huge integers) take the slow way."""
    try:
        return orjson.dumps(body)
    except TypeError:
        pass
    try:
        return json.dumps(body, separators=(",", ":")).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        raise UserError(
            f"The request cannot be encoded as JSON ({type(exc).__name__}: {exc}). A message holds a value that "
            "is not JSON or is nested too deeply; remove it from the history."
        ) from exc


def get_model(
    spec: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    http_client: httpx.AsyncClient | None = None,
    **kwargs: Any,
) -> HTTPModel:
    """A model from `"provider:model"` (e.g. `"openai:gpt-4.1-mini"`, `"groq:llama-3.3-70b-versatile"`).

    Keyword arguments go to `HTTPModel`: `timeout=` (seconds for the whole request, or a `Timeout` with
    `total`, `connect` and `idle`), `max_retries=`, `headers=`, `settings=`, `previews=`, `id_factory=`,
    `max_event_bytes=`.
    """
    provider_name, sep, model = spec.partition(":")
    if not sep or not model:
        raise UserError(
            f"Model {spec!r} has no provider. Name models 'provider:model', e.g. 'openai:gpt-4.1-mini'."
        )
    return HTTPModel(get_provider(provider_name), model, api_key=api_key, base_url=base_url,
                     http_client=http_client, **kwargs)
