"""Models: one streamed request at a time, no tool execution.

    model = get_model("openai:gpt-4.1-mini")
    async with model.stream(messages, tools=tools) as response:
        async for event in response:
            ...
    response.message   # the assembled assistant Message

`Model` is the interface the agent needs; `HTTPModel` implements it over a wire protocol and httpx, and
`toolwire.testing.ScriptedModel` implements it without a network. Leaving the `async with` early closes
the HTTP response. A stream that breaks or reports an error still yields `message_end` with everything
complete so far, then raises a `StreamError` carrying that partial message.

An `HTTPModel` that creates its own HTTP client keeps one per event loop and closes it when that loop
ends (`asyncio.run`, `anyio.run`, a test's loop): a pooled connection never outlives or crosses the
loop it was opened in, so one model (or a module-level `Agent`) works across any number of loops.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Any

import anyio.lowlevel
import httpx
import orjson

from ._accumulate import Accumulator, new_call_id
from ._transport import RetryPolicy, open_stream
from .events import Event, FinishReason, Usage
from .exceptions import ProviderStreamError, StreamInterruptedError, UserError
from .messages import Message
from .providers import Provider, get_provider
from .settings import ModelSettings
from .tools import ToolDefinition
from .wire import WireProtocol, protocol_class

__all__ = ["HTTPModel", "Model", "ModelResponse", "get_model"]


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
        timeout: float | httpx.Timeout | None = None,
        max_retries: int = 2,
        headers: dict[str, str] | None = None,
        settings: ModelSettings | None = None,
        previews: bool = True,
        id_factory: Callable[[], str] = new_call_id,
    ) -> None:
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
        if isinstance(timeout, (int, float)):
            timeout = httpx.Timeout(timeout, connect=min(float(timeout), 10.0))
        # An explicit timeout applies per request, even on a caller's client; otherwise a client we
        # create waits long (reasoning models can think for minutes) but connects fast.
        self.request_timeout = timeout
        self.timeout = timeout or httpx.Timeout(600.0, connect=10.0)
        self.retry = RetryPolicy(max_retries=max_retries)
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

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> StreamedResponse:
        url, body, headers = self.build_request(messages, tools, settings)
        return StreamedResponse(self, url, orjson.dumps(body), headers)


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
        self.accumulator = Accumulator(previews=model.previews, id_factory=model.id_factory,
                                       provider=model.provider_name, previews_per_read=True)
        self.message: Message | None = None
        self.usage: Usage | None = None
        self.finish_reason: FinishReason | None = None

    async def __aenter__(self) -> StreamedResponse:
        m = self._model
        self._response = await open_stream(
            await m._request_client(), url=self._url, body=self._body, headers=self._headers, provider=m.provider_name,
            retry=m.retry, timeout=m.request_timeout,
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
        acc.metadata["provider"] = m.provider_name
        try:
            async for chunk in response.aiter_bytes():
                parser.feed(chunk)
                if acc._stale:
                    acc.refresh_previews()
                if acc.events:
                    events, acc.events = acc.events, []
                    for event in events:
                        yield event
                if parser.stopped:
                    break
        except httpx.TimeoutException as exc:
            acc.fail("timeout", f"{m.provider_name} stopped sending before the response was complete "
                                f"(read timeout: {exc}).")
        except httpx.TransportError as exc:
            acc.fail("connection_lost", f"The connection to {m.provider_name} dropped before the response "
                                        f"was complete ({type(exc).__name__}: {exc}).")
        self.message = parser.close()
        self.usage = acc.usage
        self.finish_reason = acc.finish_reason
        events, acc.events = acc.events, []
        for event in events:
            yield event
        error = acc.error
        if error is not None:
            cls = StreamInterruptedError if error.error_type in _INTERRUPTIONS else ProviderStreamError
            raise cls(error.message, provider=m.provider_name, error_type=error.error_type,
                      partial_message=self.message)


_INTERRUPTIONS = frozenset({"incomplete_stream", "connection_lost", "timeout", "malformed_chunk"})


def get_model(
    spec: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    http_client: httpx.AsyncClient | None = None,
    **kwargs: Any,
) -> HTTPModel:
    """A model from `"provider:model"` (e.g. `"openai:gpt-4.1-mini"`, `"groq:llama-3.3-70b-versatile"`)."""
    provider_name, sep, model = spec.partition(":")
    if not sep or not model:
        raise UserError(
            f"Model {spec!r} has no provider. Name models 'provider:model', e.g. 'openai:gpt-4.1-mini'."
        )
    return HTTPModel(get_provider(provider_name), model, api_key=api_key, base_url=base_url,
                     http_client=http_client, **kwargs)
