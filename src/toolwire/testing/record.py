"""Record real provider streams into cassette files, and replay them in tests without a network.

    # record once (needs the real API key and network)
    transport = RecordingTransport("tests/cassettes/weather.json")
    # ... then in CI
    transport = ReplayTransport("tests/cassettes/weather.json")
    model = get_model("openai:gpt-4.1-mini", http_client=httpx.AsyncClient(transport=transport))

A cassette is one readable JSON file: each interaction holds the request (method, URL, headers, JSON
body) and the response (status, headers, body text exactly as streamed). Secrets never reach the file:
the `Authorization`, `X-Api-Key`, `X-Goog-Api-Key`, `Api-Key`, cookie and similar headers, `key=`-style
query parameters, and any other occurrence of those secret values are replaced by `REDACTED`.
A stream that broke while recording keeps its error, and replays it.

Replay matches requests by method and path, in recorded order, and serves each body in its recorded
frames (SSE events or JSON lines), so parsers see a realistic stream.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import orjson

from ..exceptions import UserError

__all__ = [
    "REDACTED",
    "CassetteError",
    "RecordingTransport",
    "ReplayTransport",
    "cassette_transport",
    "load_cassette",
    "redact_headers",
    "redact_url",
]

REDACTED = "REDACTED"

_SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie", "set-cookie",
    "openai-organization", "openai-project", "x-goog-user-project",
})
_SECRET_HEADER_WORDS = ("api-key", "apikey", "secret", "token", "auth")
_SECRET_QUERY = frozenset({"key", "api_key", "apikey", "api-key", "access_token", "token", "sig", "signature"})
# Headers that describe the transfer, not the content: replay sets its own.
_TRANSFER_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding", "connection"})


class CassetteError(UserError):
    """A cassette is missing, unreadable, or has no recorded response for a request."""


def _is_secret_header(name: str) -> bool:
    lowered = name.lower()
    if lowered in _SECRET_HEADERS:
        return True
    # Rate-limit counters mention tokens but are not secrets.
    return not lowered.startswith(("x-ratelimit", "anthropic-ratelimit")) and any(
        word in lowered for word in _SECRET_HEADER_WORDS)


def redact_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers with lower-case names and every credential replaced by `REDACTED`."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    for name, value in items:
        lowered = name.lower()
        if _is_secret_header(lowered):
            scheme, _, rest = value.partition(" ")
            out[lowered] = f"{scheme} {REDACTED}" if rest and scheme.lower() in ("bearer", "basic") else REDACTED
        else:
            out[lowered] = value
    return out


def redact_url(url: str) -> str:
    """The URL with a password and secret query parameters (`key=`, `api_key=`, `access_token=`...) replaced."""
    parts = urlsplit(url)
    if parts.password is not None:
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", f":{REDACTED}@", 1))
    if not parts.query:
        return urlunsplit(parts)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = [(k, REDACTED if k.lower() in _SECRET_QUERY else v) for k, v in pairs]
    return urlunsplit(parts._replace(query=urlencode(query, safe="/:")))


def _secrets(request: httpx.Request) -> list[str]:
    found: list[str] = []
    for name, value in request.headers.items():
        if _is_secret_header(name):
            found.append(value)
            found.append(value.partition(" ")[2])
    found.extend(v for k, v in parse_qsl(request.url.query.decode(), keep_blank_values=True)
                 if k.lower() in _SECRET_QUERY)
    if request.url.password:
        found.append(request.url.password)
    # Short values would redact ordinary text; real credentials are long.
    return sorted({s for s in found if len(s) >= 8}, key=len, reverse=True)


def _scrub(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
    return value


def _body_field(raw: bytes, key: str) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        return {key: orjson.loads(raw)} if key == "json" else {key: raw.decode("utf-8")}
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        pass
    try:
        return {"text": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode()}


def _decoded(raw: bytes, headers: httpx.Headers) -> bytes:
    """The body as the client reads it (gzip and friends undone), for a readable cassette."""
    encoding = headers.get("content-encoding")
    if not encoding or not raw:
        return raw
    try:
        return httpx.Response(200, headers={"content-encoding": encoding}, content=raw).content
    except httpx.DecodingError:
        return raw  # a corrupt body is kept as it came (base64 if it is not text)


class _TeeStream(httpx.AsyncByteStream):
    """Passes the response bytes through and hands them over once the stream ends or breaks."""

    def __init__(self, inner: httpx.AsyncByteStream, done: Callable[[bytes, BaseException | None], None]) -> None:
        self._inner = inner
        self._chunks: list[bytes] = []
        self._done = done
        self._reported = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                self._chunks.append(chunk)
                yield chunk
        except httpx.TransportError as exc:
            self._report(exc)
            raise
        self._report(None)

    def _report(self, error: BaseException | None) -> None:
        if not self._reported:
            self._reported = True
            self._done(b"".join(self._chunks), error)

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._report(None)


class RecordingTransport(httpx.AsyncBaseTransport):
    """Sends requests through `transport` (a real connection by default) and writes each exchange to `path`.

    The cassette file is rewritten after every response with all interactions so far; with
    `append=True` an existing cassette is extended instead of replaced.
    """

    def __init__(self, path: str | Path, transport: httpx.AsyncBaseTransport | None = None, *,
                 append: bool = False) -> None:
        self.path = Path(path)
        self._inner = transport if transport is not None else httpx.AsyncHTTPTransport()
        self._lock = threading.Lock()
        self.interactions: list[dict[str, Any]] = (
            load_cassette(self.path) if append and self.path.exists() else [])

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        secrets = _secrets(request)
        recorded_request = _scrub({
            "method": request.method,
            "url": redact_url(str(request.url)),
            "headers": redact_headers(request.headers.multi_items()),
            **_body_field(body, "json"),
        }, secrets)
        response = await self._inner.handle_async_request(request)

        def done(raw: bytes, error: BaseException | None) -> None:
            headers = {k: v for k, v in redact_headers(response.headers.multi_items()).items()
                       if k not in _TRANSFER_HEADERS}
            recorded_response: dict[str, Any] = {"status": response.status_code, "headers": headers,
                                                 **_body_field(_decoded(raw, response.headers), "body")}
            if error is not None:
                recorded_response["error"] = {"type": type(error).__name__, "message": str(error)}
            self._add({"request": recorded_request, "response": _scrub(recorded_response, secrets)})

        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_TeeStream(response.stream, done),  # type: ignore[arg-type]
                              extensions=response.extensions)

    def _add(self, interaction: dict[str, Any]) -> None:
        with self._lock:
            self.interactions.append(interaction)
            data = orjson.dumps({"toolwire_cassette": 1, "interactions": self.interactions},
                                option=orjson.OPT_INDENT_2) + b"\n"
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(self.path.name + ".partial")
            partial.write_bytes(data)
            os.replace(partial, self.path)

    async def aclose(self) -> None:
        await self._inner.aclose()


def load_cassette(source: str | Path | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The interactions of a cassette file (or of its already-parsed JSON)."""
    if isinstance(source, Mapping):
        data: Any = source
        where = "The cassette"
    else:
        path = Path(source)
        where = f"The cassette {path}"
        try:
            data = orjson.loads(path.read_bytes())
        except FileNotFoundError as exc:
            raise CassetteError(f"{where} does not exist. Record it first (RecordingTransport, "
                                "cassette_transport(..., mode='record') or `toolwire record`).") from exc
        except OSError as exc:
            raise CassetteError(f"Could not read {where[4:]}: {exc.strerror or exc}.") from exc
        except orjson.JSONDecodeError as exc:
            raise CassetteError(f"{where} is not valid JSON ({exc}).") from exc
    interactions = data.get("interactions") if isinstance(data, Mapping) else None
    if not isinstance(interactions, list):
        raise CassetteError(f"{where} has no `interactions` list; is it a toolwire cassette?")
    return list(interactions)


def _frames(body: bytes, content_type: str) -> list[bytes]:
    if "ndjson" in content_type:
        separator = b"\n"
    elif "event-stream" in content_type:
        separator = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    else:
        return [body] if body else []
    pieces = body.split(separator)
    frames = [p + separator for p in pieces[:-1]]
    if pieces[-1]:
        frames.append(pieces[-1])
    return frames


class _ReplayStream(httpx.AsyncByteStream):
    def __init__(self, frames: list[bytes], error: Mapping[str, Any] | None) -> None:
        self._frames = frames
        self._error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for frame in self._frames:
            yield frame
        if self._error is not None:
            kind = getattr(httpx, str(self._error.get("type")), None)
            cls: type[httpx.TransportError] = httpx.RemoteProtocolError
            if isinstance(kind, type) and issubclass(kind, httpx.TransportError):
                cls = kind
            raise cls(str(self._error.get("message", "the recorded stream broke here")))


class ReplayTransport(httpx.AsyncBaseTransport):
    """Answers requests from a cassette: the next unused interaction with the same method and path."""

    def __init__(self, source: str | Path | Mapping[str, Any]) -> None:
        self.name = str(source) if not isinstance(source, Mapping) else "cassette"
        self.interactions = load_cassette(source)
        self._used = [False] * len(self.interactions)
        self._lock = threading.Lock()
        self.requests: list[httpx.Request] = []

    def _take(self, method: str, path: str) -> dict[str, Any]:
        with self._lock:
            for position, interaction in enumerate(self.interactions):
                request = interaction.get("request", {})
                if (not self._used[position] and request.get("method") == method
                        and urlsplit(str(request.get("url", ""))).path == path):
                    self._used[position] = True
                    return interaction
        recorded = ", ".join(
            f"{i.get('request', {}).get('method')} {urlsplit(str(i.get('request', {}).get('url', ''))).path}"
            for i in self.interactions) or "nothing"
        raise CassetteError(f"The cassette {self.name} has no unused recorded response for {method} {path} "
                            f"(it recorded: {recorded}). Record it again if the code under test now sends "
                            "different or more requests.")

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.requests.append(request)
        recorded = self._take(request.method, request.url.path)["response"]
        if "base64" in recorded:
            body = base64.b64decode(recorded["base64"])
        elif "json" in recorded:
            body = orjson.dumps(recorded["json"])
        else:
            body = str(recorded.get("body", recorded.get("text", ""))).encode()
        headers = {k: v for k, v in recorded.get("headers", {}).items() if k.lower() not in _TRANSFER_HEADERS}
        frames = _frames(body, headers.get("content-type", ""))
        return httpx.Response(int(recorded.get("status", 200)), headers=headers,
                              stream=_ReplayStream(frames, recorded.get("error")))

    @property
    def unused(self) -> list[dict[str, Any]]:
        """Recorded interactions no request has consumed yet."""
        with self._lock:
            return [i for i, used in zip(self.interactions, self._used, strict=True) if not used]


def cassette_transport(path: str | Path, mode: Literal["once", "record", "replay"] = "once",
                       transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncBaseTransport:
    """The transport for a test: `replay` a cassette, `record` it anew, or `once` (replay if it exists).

    `transport` is what recording sends through (a real connection by default).
    """
    cassette = Path(path)
    if mode == "replay" or (mode == "once" and cassette.exists()):
        return ReplayTransport(cassette)
    if mode in ("record", "once"):
        return RecordingTransport(cassette, transport)
    raise UserError(f"Unknown cassette mode {mode!r}: use 'once', 'record' or 'replay'.")
