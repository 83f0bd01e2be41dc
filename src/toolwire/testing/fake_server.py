"""Fake provider servers: real HTTP on loopback that streams exactly like a provider's API.

    async with FakeProviderServer("anthropic", [FakeTurn(parts=[FakeText(text="Hi!")])]) as server:
        model = server.model("claude-sonnet-4-5")          # get_model(..., base_url=server.base_url)
        message = await model.request([Message.user("Hello")])
        server.requests[0].messages                         # what toolwire sent, decoded

`FakeProviderApp` is the ASGI application (one wire protocol, its real endpoint path); it answers
each request with the reply its responder chooses: a scripted `FakeTurn`, a `FakeHTTPError`, a
recorded body (`FakeRecording`), or the `AutoResponder`, which calls the tools it is offered.
`FakeProviderServer` runs that app with uvicorn on 127.0.0.1 and a free port, in a background thread,
as an async or a plain context manager. Every request received is kept in `requests`, with secrets
redacted, so tests can assert what the client sent. Where the provider has a token-counting endpoint
(Anthropic `/v1/messages/count_tokens`, Gemini `:countTokens`), the app answers it in the provider's
format with `estimate_tokens` of the counted body (one token per four bytes of compact JSON); those
requests are kept too, with `stream=False` and their own `path`.

A dropped connection is a real one: the app stops mid-body and the server closes the socket without
finishing the chunked response, so the client's HTTP library sees a transport error.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from itertools import chain
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import anyio
import orjson

from ..exceptions import UserError
from .fake import FakeProtocol, fake_protocol
from .fake._auto import AutoResponder
from .fake._base import FakeRequest, RequestError, ResponseEncoder, random_hex
from .fake._turns import FakeHTTPError, FakeRecording, FakeReply, FakeScript, FakeTurn, Responder
from .record import redact_headers

if TYPE_CHECKING:
    from ..models import HTTPModel

__all__ = ["FakeProviderApp", "FakeProviderServer"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_KEY_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")


class _ConnectionDropped(Exception):
    """Raised inside the app to make the server abort the connection mid-body (on purpose)."""


class _QuietDrops(logging.Filter):
    """Keeps uvicorn from logging a deliberate drop as an application error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and record.exc_info[0] is _ConnectionDropped)


logging.getLogger("uvicorn.error").addFilter(_QuietDrops())


def as_responder(value: Responder | FakeReply | Sequence[FakeReply] | None, seed: int | None = None) -> Responder:
    """A responder from what users pass: None (automatic), one reply, a list of replies, or a responder."""
    if value is None:
        return AutoResponder(seed=seed or 0)
    if isinstance(value, FakeRecording):
        return value
    if isinstance(value, (FakeTurn, FakeHTTPError)):
        return FakeScript([value])
    if isinstance(value, (list, tuple)):
        return FakeScript(value)
    if callable(getattr(value, "respond", None)):
        return value  # type: ignore[return-value]
    raise UserError("A fake server answers with a responder, a reply or a list of replies, "
                    f"not {type(value).__name__}.")


class FakeProviderApp:
    """The ASGI app of a fake provider speaking one wire protocol.

    Args:
        protocol: the wire protocol name (`"openai-chat"`, `"anthropic"`, `"gemini"`...).
        responder: a `FakeScript`, a list of replies, one reply, a `FakeRecording`, an `AutoResponder`,
            or None for an `AutoResponder`.
        seed: makes ids (and automatic arguments) reproducible.
        api_key: when given, requests must carry this key the way the provider expects, or get a 401.
    """

    def __init__(self, protocol: str | FakeProtocol = "openai-chat",
                 responder: Responder | FakeReply | Sequence[FakeReply] | None = None, *,
                 seed: int | None = None, api_key: str | None = None) -> None:
        self.protocol = fake_protocol(protocol) if isinstance(protocol, str) else protocol
        self.responder = as_responder(responder, seed)
        self.rng = random.Random(seed)
        self.api_key = api_key
        self.requests: list[FakeRequest] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        raw_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers", [])]
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        request = FakeRequest(protocol=self.protocol.name, method=scope["method"], path=scope["path"], query=query,
                              headers=redact_headers(raw_headers))
        body = await _read_body(receive)
        if self.protocol.counts(request.method, request.path):
            await self._count(send, request, body, raw_headers)
            return
        try:
            self._accept(request, body, raw_headers)
        except RequestError as exc:
            self.requests.append(request)
            await self._send_error(send, exc.status, exc.message, exc.code, {})
            return
        self.requests.append(request)
        try:
            reply = self.responder.respond(request)
            frames, content_type = reply.load() if isinstance(reply, FakeRecording) else ([], "")
            if isinstance(reply, FakeTurn):
                for part in reply.parts:
                    part.pieces()  # a script mistake is reported now, not halfway through the stream
        except Exception as exc:
            # A broken script or responder is the test author's to fix: say so to the client that asked.
            await self._send_error(send, 500, f"The fake server could not answer this request "
                                              f"({type(exc).__name__}: {exc}).", None, {})
            return
        if isinstance(reply, FakeHTTPError):
            headers = dict(reply.headers)
            if reply.retry_after is not None:
                headers["retry-after"] = f"{reply.retry_after:g}"
            if reply.body is not None:
                await _send_whole(send, reply.status, reply.body.encode(), "application/json", headers)
            else:
                await self._send_error(send, reply.status, reply.text(), reply.code, headers)
            return
        if isinstance(reply, FakeRecording):
            dropped = await self._stream(receive, send, reply.status, content_type, iter(frames), reply.delay,
                                         None, False)
        else:
            encoder = self.protocol.encoder(request, self.rng)
            dropped = await self._stream(receive, send, 200, self.protocol.response_media_type(request),
                                         _turn_frames(encoder, reply), reply.delay, reply.drop_after,
                                         reply.drop_mid_frame)
        if dropped:
            raise _ConnectionDropped("The fake provider dropped the connection as its script asked.")

    async def _count(self, send: Send, request: FakeRequest, body: bytes, raw_headers: list[tuple[str, str]]) -> None:
        """Answer the provider's token-counting endpoint: a deterministic count, never the responder."""
        request.stream = False
        self.requests.append(request)
        try:
            self._authenticate(request, raw_headers)
            request.body = _parse_json(body)
            try:
                answer = self.protocol.count(request)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise RequestError(400, f"The request body does not have the shape the {self.protocol.name} API "
                                        f"expects ({type(exc).__name__}: {exc}).") from exc
        except RequestError as exc:
            await self._send_error(send, exc.status, exc.message, exc.code, {})
            return
        await _send_whole(send, 200, answer, "application/json", {})

    def _accept(self, request: FakeRequest, body: bytes, raw_headers: list[tuple[str, str]]) -> None:
        """Route, parse and authenticate the request the way the real API would."""
        if not self.protocol.accepts(request.method, request.path):
            raise RequestError(404, f"This fake {self.protocol.name} server serves {self.protocol.route}; it has "
                                    f"nothing at {request.method} {request.path}.")
        self._authenticate(request, raw_headers)
        request.body = _parse_json(body)
        try:
            self.protocol.decode(request)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RequestError(400, f"The request body does not have the shape the {self.protocol.name} API "
                                    f"expects ({type(exc).__name__}: {exc}).") from exc
        if not request.stream:
            raise RequestError(400, f"This fake {self.protocol.name} server only streams: send `stream: true` "
                                    "(toolwire always does).")

    def _authenticate(self, request: FakeRequest, raw_headers: list[tuple[str, str]]) -> None:
        if self.api_key is not None:
            offered = {v.removeprefix("Bearer ").removeprefix("bearer ") for k, v in raw_headers
                       if k.lower() in _KEY_HEADERS}
            if request.query.get("key"):
                offered.add(request.query["key"])
            if self.api_key not in offered:
                raise RequestError(401, "Incorrect API key provided. You can find your API key in your "
                                        "account settings.", None)

    async def _send_error(self, send: Send, status: int, message: str, code: str | None,
                          headers: dict[str, str]) -> None:
        body = self.protocol.error_body(status, message, code, self.rng)
        await _send_whole(send, status, body, "application/json", headers)

    async def _stream(self, receive: Receive, send: Send, status: int, content_type: str, frames: Iterator[bytes],
                      delay: float, drop_after: int | None, drop_mid_frame: bool) -> bool:
        """Send frames as they come; returns True when the connection must now be dropped."""
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", content_type.encode()), (b"cache-control", b"no-cache"),
            (b"x-request-id", f"req_{random_hex(self.rng, 24)}".encode())]})
        dropped = False
        async with anyio.create_task_group() as group:
            # Race the body against the client going away (then there is no one left to stream to).
            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(watch_disconnect)
            for sent, frame in enumerate(frames):
                if drop_after is not None and sent >= drop_after:
                    if drop_mid_frame:
                        await send({"type": "http.response.body", "body": frame[: len(frame) // 2], "more_body": True})
                    break
                if sent and delay:
                    await anyio.sleep(delay)
                await send({"type": "http.response.body", "body": frame, "more_body": True})
            if drop_after is not None:
                dropped = True
            else:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            group.cancel_scope.cancel()
        return dropped


def _turn_frames(encoder: ResponseEncoder, turn: FakeTurn) -> Iterator[bytes]:
    """A turn's frames, pulled lazily so an error or a drop can cut it anywhere."""

    def ending() -> Iterator[bytes]:
        # Usage is estimated from what was streamed, so it is computed only once the content is out.
        yield from encoder.end(turn, turn.finish_reason, encoder.usage(turn))

    error = turn.error
    if error is None:
        yield from chain(encoder.content(turn), ending())
        return
    if error.after is None:
        yield from encoder.content(turn)
    else:
        for count, frame in enumerate(chain(encoder.content(turn), ending())):
            if count >= error.after:
                break
            yield frame
    yield from encoder.error(error)


def _parse_json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RequestError(400, f"We could not parse the JSON body of your request ({exc}).") from exc


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _send_whole(send: Send, status: int, body: bytes, content_type: str, headers: dict[str, str]) -> None:
    head = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    head.extend((k.lower().encode(), v.encode()) for k, v in headers.items())
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class FakeProviderServer:
    """A fake provider on a loopback port, for `async with` (or `with`) in tests.

    Args:
        protocol: the wire protocol to speak (`"openai-chat"`, `"openai-responses"`, `"anthropic"`,
            `"gemini"`, `"ollama"`, `"mistral"`, `"cohere"`).
        responder: what to answer (see `FakeProviderApp`); None answers automatically.
        seed: reproducible ids and automatic arguments.
        api_key: require this key on every request (a missing or wrong key gets the provider's 401).
        host: the address to listen on.
        port: the port to listen on; 0 picks a free one.
    """

    def __init__(self, protocol: str = "openai-chat",
                 responder: Responder | FakeReply | Sequence[FakeReply] | None = None, *,
                 seed: int | None = None, api_key: str | None = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.app = FakeProviderApp(protocol, responder, seed=seed, api_key=api_key)
        self.api_key = api_key
        self.host = host
        self.port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    @property
    def protocol(self) -> str:
        return self.app.protocol.name

    @property
    def responder(self) -> Responder:
        return self.app.responder

    @property
    def requests(self) -> list[FakeRequest]:
        """Every request received so far, decoded, with secrets redacted."""
        return self.app.requests

    @property
    def url(self) -> str:
        """The server's origin, `http://127.0.0.1:PORT`."""
        if not self.port:
            raise UserError("The fake server has no port yet: use it inside `async with` / `with`, or call start().")
        return f"http://{self.host}:{self.port}"

    @property
    def provider(self) -> str:
        """The toolwire provider whose configuration speaks this protocol."""
        return self.app.protocol.provider

    @property
    def base_url(self) -> str:
        """What to pass as `base_url` so toolwire's provider appends the real endpoint path to it."""
        return self.base_url_for(self.protocol)

    def base_url_for(self, protocol: str) -> str:
        """The base URL for `protocol`'s provider (this server speaks only its own protocol)."""
        if protocol != self.protocol:
            raise UserError(f"This fake server speaks {self.protocol}, not {protocol}; start one "
                            f"FakeProviderServer per protocol.")
        from ..providers import get_provider

        default = get_provider(self.provider).base_url or ""
        return self.url + urlsplit(default).path.rstrip("/")

    def model(self, model: str = "fake-model", **kwargs: Any) -> HTTPModel:
        """`get_model("provider:model")` pointed at this server (with a placeholder key unless one is given)."""
        from ..models import get_model

        kwargs.setdefault("api_key", self.api_key or "fake-api-key")
        return get_model(f"{self.provider}:{model}", base_url=self.base_url, **kwargs)

    def _socket(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        # Listening at once lets clients connect (into the backlog) as soon as the URL is announced,
        # before uvicorn's loop starts accepting.
        sock.listen(128)
        self.port = sock.getsockname()[1]
        return sock

    def _uvicorn(self) -> Any:
        import uvicorn

        config = uvicorn.Config(self.app, log_config=None, log_level="warning", access_log=False, lifespan="off",
                                ws="none", timeout_graceful_shutdown=2)
        return uvicorn.Server(config)

    def start(self, timeout: float = 10.0) -> None:
        """Start serving in a background thread; returns once the port accepts connections."""
        if self._thread is not None:
            raise UserError("This fake server is already running.")
        sock = self._socket()
        self._server = server = self._uvicorn()

        def serve() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # reported by start(); a thread cannot raise to its creator
                self._failure = exc
            finally:
                sock.close()

        self._thread = threading.Thread(target=serve, name=f"fake-{self.protocol}-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise UserError(f"The fake {self.protocol} server did not start on {self.host}:{self.port} "
                                f"({self._failure or 'timed out'}).")
            time.sleep(0.005)

    def stop(self) -> None:
        """Stop serving and wait for the thread to end (open streams get a short grace period)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._thread = None
        self._server = None

    def serve_forever(self, ready: Callable[[FakeProviderServer], None] | None = None) -> None:
        """Serve in the calling (main) thread until interrupted; `ready` is called once the port is bound."""
        sock = self._socket()
        server = self._uvicorn()
        if ready is not None:
            ready(self)
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()

    def __enter__(self) -> FakeProviderServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    async def __aenter__(self) -> FakeProviderServer:
        await anyio.to_thread.run_sync(self.start)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await anyio.to_thread.run_sync(self.stop)
