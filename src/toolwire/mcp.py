"""MCP (Model Context Protocol) servers as toolsets: their tools become agent tools (`mcp` extra).

    from toolwire.mcp import MCPServer

    files = MCPServer.stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"])
    search = MCPServer.http("https://mcp.example.com/mcp", name="search", bearer_token=os.environ["TOKEN"])
    agent = Agent(model, toolsets=[files.prefixed("fs"), search.filtered(["search", "fetch"])])
    async with agent:                       # opens both connections; closed when the block ends
        await agent.run("...")

Built on the official `mcp` package: stdio (the server runs as a subprocess and speaks over its stdin and
stdout), Streamable HTTP and the legacy HTTP+SSE transport (`MCPServer.sse`). HTTP servers take
`headers=`, `bearer_token=`, an `auth=` flow, TLS settings (`verify=`, `cert=`) or an `http_client=` of
the caller's (an `httpx2.AsyncClient`: the `mcp` package speaks HTTP with httpx2). A server that refuses
the credentials (401/403) fails to open with an `MCPServerError` that says so.

The server's `instructions` (sent when the connection opens) are added to the system prompt of every
request that offers its tools, after the agent's own instructions (`use_instructions=False` leaves them
out). `process_tool_call=` sees every call with the run context, so `ctx.deps` can reach the server:
as `_meta` of the request (`call_tool(name, args, meta={...})`) or by changing the arguments.

The tool list is read once when the connection opens and again, before the
next step, after the server announces a change (`notifications/tools/list_changed`, or a
`subscriptions/listen` event on 2026-era servers). MCP tools run like any other tool: arguments go to
the server as the model wrote them (the server validates them against its schema), `tool_timeout` and
`MCPServer(timeout=...)` bound a call, and approval rules apply.

Results: structured content when the server gives it, else the text (several text blocks joined by
newlines); content that is not text (images, audio, binary resources) becomes the result's files
(`ToolResultPart.files`), which each provider receives where its API takes files in tool results (see
the files-and-providers guide); the JSON result describes them (kind, media type, size) where they stood,
and `ToolResultEvent.metadata["files"]` still hands them to the application. An error result from the
server, the server dying mid-call, a hung call stopped by the timeout and a connection that is gone are
all error results: the run goes on and its history stays valid.

The connection lives in a task of its own, so a transport that fails (a server killed mid-request)
ends only the connection, never the task that opened it. A dead server's tools stay listed and answer
with an error saying the server is gone; toolwire does not restart servers (a restarted stdio server
would have lost its state), so open it again (`async with`) to reconnect.

`servers_from_specs` builds servers from command-line style specs, as `toolwire chat/run/serve --mcp
"cmd args..." --mcp-url URL` do.
"""

from __future__ import annotations

import logging
import os
import shlex
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TextIO, TypeAlias
from urllib.parse import urlsplit

import anyio
import anyio.abc

from ._install import install_hint
from .exceptions import MCPServerError, ToolError, UserError
from .messages import FilePart
from .tools import ApprovalPredicate, RunContext, Tool, ToolReturn, check_retries
from .toolsets import Toolset
from .wire._files import decoded_size

try:
    import httpx2
    import mcp_types
    from mcp import Client, StdioServerParameters
    from mcp.client.sse import sse_client
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised by the install test without the extra
    raise ImportError(f"toolwire.mcp needs the mcp extra: {install_hint('mcp')}.") from exc

if TYPE_CHECKING:
    from typing import Self

__all__ = ["CallMCPTool", "MCPServer", "ProcessToolCall", "servers_from_specs"]

logger = logging.getLogger("toolwire.mcp")

_CONNECTION_CLOSED = -32000
"""The JSON-RPC error code the `mcp` client gives a request whose connection closed."""
_MAX_PAGES = 100
"""The most `tools/list` pages read: a server that paginates forever cannot hang a step."""
_HTTP_TIMEOUT = 30.0
_HTTP_READ_TIMEOUT = 300.0
"""The `mcp` package's own defaults for the clients it makes: a server may hold a stream open for minutes."""


class CallMCPTool(Protocol):
    """Calls a tool of the server: `await call_tool(name, arguments, meta={...})`; returns the result value."""

    def __call__(self, name: str, arguments: dict[str, Any], *, meta: dict[str, Any] | None = None) -> Awaitable[Any]:
        ...


ProcessToolCall: TypeAlias = Callable[[RunContext[Any], CallMCPTool, str, dict[str, Any]], Awaitable[Any]]
"""`async def process(ctx, call_tool, name, arguments)`: sees every call to the server's tools with the run
context; it calls `call_tool` (with `meta=` built from `ctx.deps`, or changed arguments) and returns the
result, or raises `ToolError`/`ModelRetry` to answer the call without reaching the server."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _HTTPOptions:
    """How an HTTP server is reached: the transport and the HTTP client's settings."""

    transport: Literal["streamable_http", "sse"] = "streamable_http"
    headers: Mapping[str, str] | None = None
    bearer_token: str | None = None
    auth: httpx2.Auth | None = None
    verify: ssl.SSLContext | bool = True
    http_client: httpx2.AsyncClient | None = None


class MCPServer(Toolset):
    """The tools of one MCP server, reached over stdio or Streamable HTTP.

    Build one with `MCPServer.stdio(command, args)`, `MCPServer.http(url)` or `MCPServer.sse(url)`. Open it
    with `async with server:` (or `async with agent:`) to share one connection among runs; a run given a
    server that is not open opens it for itself alone.

    Args:
        target: `StdioServerParameters` or an HTTP URL.
        name: Names the server in errors, logs and traces (default: the command line, or host:port).
        timeout: Seconds one call may take (default: the agent's `tool_timeout`).
        connect_timeout: Seconds to start the server, agree on a protocol version and list its tools.
        requires_approval: Approval for every tool of the server: `True`, or a rule as for `@tool`.
        stderr: Where a stdio server's own stderr goes (default: this process's stderr).
        use_instructions: Add the server's `instructions` to the system prompt (default `True`).
        process_tool_call: Sees each call with the run context (see `ProcessToolCall`).
        retries: How many times in a row each of its tools may raise `ModelRetry` (from
            `process_tool_call`); `None` takes the agent's `retries`.
    """

    def __init__(
        self,
        target: StdioServerParameters | str,
        *,
        name: str | None = None,
        timeout: float | None = None,
        connect_timeout: float = 30.0,
        requires_approval: bool | ApprovalPredicate = False,
        stderr: TextIO | None = None,
        use_instructions: bool = True,
        process_tool_call: ProcessToolCall | None = None,
        retries: int | None = None,
        http: _HTTPOptions | None = None,
    ) -> None:
        if not isinstance(target, (StdioServerParameters, str)):
            raise UserError(f"An MCPServer connects to StdioServerParameters or a URL; got {type(target).__name__}.")
        if timeout is not None and not timeout > 0:
            raise UserError(f"timeout must be a positive number of seconds or None; got {timeout!r}.")
        if process_tool_call is not None and not callable(process_tool_call):
            raise UserError(f"process_tool_call must be an async function (ctx, call_tool, name, arguments); got "
                            f"{type(process_tool_call).__name__}.")
        self.target = target
        self.use_instructions = use_instructions
        self.process_tool_call = process_tool_call
        self.retries = check_retries(retries, "MCPServer(retries=...)")
        self._http = http if http is not None else _HTTPOptions()
        self._instructions: str | None = None
        self._refused: int | None = None
        """The status of a 401/403 answer seen while connecting: the `mcp` client reports it without one."""
        self.name = name or _default_name(target)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.requires_approval = requires_approval
        self._stderr = stderr
        self._client: Client | None = None
        self._tools: list[Tool[..., Any]] = []
        self._stale = False
        self._refresh = anyio.Lock()
        self._opened = 0
        self._run_owner: object | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._stop = anyio.Event()
        self._dead = anyio.Event()
        self._lost: str | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> MCPServer:
        """A server started as `command args...`, spoken to over its stdin and stdout.

        `env` is added to the small default environment the `mcp` package gives servers (PATH, HOME...);
        pass `env=dict(os.environ)` to hand it everything. Other options are those of `MCPServer`.
        """
        params = StdioServerParameters(command=command, args=list(args), env=env,
                                       cwd=os.fspath(cwd) if cwd is not None else None)
        return cls(params, **options)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        bearer_token: str | None = None,
        auth: httpx2.Auth | None = None,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        http_client: httpx2.AsyncClient | None = None,
        **options: Any,
    ) -> MCPServer:
        """A server at a Streamable HTTP endpoint (`https://host/mcp`).

        Args:
            url: The endpoint.
            headers: Sent with every request (`{"X-Api-Key": "..."}`).
            bearer_token: Sent as `Authorization: Bearer <token>` with every request.
            auth: An `httpx2.Auth` flow (the `mcp` package's OAuth client provider, or your own).
            verify: TLS verification: `True` (the system's CAs), a CA bundle path, an `ssl.SSLContext`, or
                `False` (no verification: never against a server you do not run).
            cert: A client certificate (a path, or `(cert, key)`), for servers that require mutual TLS.
            http_client: Your own `httpx2.AsyncClient`, used as it is (its headers, auth, TLS, proxies,
                timeouts) and never closed by toolwire; it excludes the options above.
            options: Those of `MCPServer`.
        """
        return cls(url, http=_http_options("streamable_http", url, headers=headers, bearer_token=bearer_token,
                                           auth=auth, verify=verify, cert=cert, http_client=http_client), **options)

    @classmethod
    def sse(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        bearer_token: str | None = None,
        auth: httpx2.Auth | None = None,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        http_client: httpx2.AsyncClient | None = None,
        **options: Any,
    ) -> MCPServer:
        """A server speaking the legacy HTTP+SSE transport (`https://host/sse`), which older servers still
        offer; the options are those of `MCPServer.http`."""
        return cls(url, http=_http_options("sse", url, headers=headers, bearer_token=bearer_token, auth=auth,
                                           verify=verify, cert=cert, http_client=http_client), **options)

    # -- the connection --------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """The connection is open (it may have been lost since: see `connected`)."""
        return self._opened > 0

    @property
    def connected(self) -> bool:
        """The server is connected and answering (not closed, not lost)."""
        return self._client is not None and not self._dead.is_set()

    @property
    def tools(self) -> list[Tool[..., Any]]:
        """The tools as last listed (empty before the connection opens)."""
        return list(self._tools)

    @property
    def instructions(self) -> str | None:
        """The instructions the server sent when the connection opened (`None` before, or if it sent none)."""
        return self._instructions

    async def get_instructions(self, context: RunContext[Any]) -> str | None:
        return self._instructions if self.use_instructions else None

    async def __aenter__(self) -> Self:
        if self._opened:
            self._opened += 1  # nested opening in the same task: one connection, closed by the outermost
            return self
        self._stop, self._dead, self._lost, self._stale = anyio.Event(), anyio.Event(), None, False
        self._refused = None
        self._refresh = anyio.Lock()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        try:
            with anyio.fail_after(self.connect_timeout):
                await tg.start(self._host)
                await self._list(refresh=False)
        except BaseException as exc:
            self._stop.set()
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)
            if isinstance(exc, TimeoutError):
                raise MCPServerError(f"The MCP server {self.name!r} did not start and list its tools within "
                                     f"{self.connect_timeout:g} seconds. Check that {self._what()} is an MCP "
                                     "server, or raise connect_timeout.", server=self.name) from exc
            if isinstance(exc, Exception):
                raise self._connect_error(exc) from exc
            raise
        self._tg = tg
        self._opened = 1
        logger.info("Connected to MCP server %r (%d tools).", self.name, len(self._tools))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._opened > 1:
            self._opened -= 1
            return
        tg, self._tg = self._tg, None
        self._opened = 0
        self._stop.set()
        try:
            if tg is not None:
                # The connection task ends on its own once told to stop (the `mcp` client shields its own
                # shutdown, so a stdio server is stopped even when this task is being cancelled).
                await tg.__aexit__(None, None, None)
        finally:
            self._client = None
        logger.info("Closed the connection to MCP server %r.", self.name)

    def run_scope(self) -> AbstractAsyncContextManager[Any]:
        """A run's use of the server: the open connection, or one opened for this run alone."""
        if self._run_owner is not None:
            raise UserError(f"The MCP server {self.name!r} was opened by another run, for that run alone; to share "
                            "it between runs, open it once around them: `async with server:` (or `async with "
                            "agent:`).")
        if self._opened:
            return nullcontext()
        return self._owned_by_run()

    @asynccontextmanager
    async def _owned_by_run(self) -> AsyncIterator[None]:
        token = object()
        async with self:
            self._run_owner = token
            try:
                yield
            finally:
                self._run_owner = None

    async def _host(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Holds the connection in a task of its own until asked to stop, or until the transport fails."""
        started = False
        try:
            async with self._client_for() as client, anyio.create_task_group() as inner:
                self._client = client
                self._instructions = client.instructions or None
                capability = client.server_capabilities.tools
                if capability is not None and capability.list_changed:
                    inner.start_soon(self._listen, client)
                started = True
                task_status.started()
                await self._stop.wait()
                inner.cancel_scope.cancel()
        except Exception as exc:
            if not started:
                raise
            self._lost = _describe(exc)
            logger.warning("The connection to MCP server %r was lost: %s", self.name, self._lost)
        finally:
            self._client = None
            self._dead.set()

    def _client_for(self) -> Client:
        target = self.target
        info = mcp_types.Implementation(name="toolwire", version=_version())
        if isinstance(target, StdioServerParameters):
            transport: Any = stdio_client(target, errlog=self._stderr if self._stderr is not None else sys.stderr)
        else:
            transport = self._http_transport(target)
        return Client(transport, message_handler=self._on_message, client_info=info)

    @asynccontextmanager
    async def _http_transport(self, url: str) -> AsyncIterator[Any]:
        """The HTTP transport on the caller's client, or on one made from the options (closed at the end)."""
        options = self._http

        async def note_refusal(response: httpx2.Response) -> None:
            if response.status_code in (401, 403):
                self._refused = response.status_code

        async with AsyncExitStack() as stack:
            client = options.http_client
            if client is None:
                headers = dict(options.headers or {})
                if options.bearer_token is not None:
                    headers["Authorization"] = f"Bearer {options.bearer_token}"
                client = await stack.enter_async_context(httpx2.AsyncClient(
                    headers=headers, auth=options.auth, verify=options.verify,
                    timeout=httpx2.Timeout(_HTTP_TIMEOUT, read=_HTTP_READ_TIMEOUT),
                    event_hooks={"response": [note_refusal]}))
            else:
                # The caller's client gets the hook only while this connection is open.
                hooks = client.event_hooks
                client.event_hooks = {**hooks, "response": [*hooks.get("response", []), note_refusal]}
                stack.callback(_remove_hook, client, note_refusal)
            if options.transport == "sse":
                borrowed = _Borrowed(client)
                async with sse_client(url, httpx_client_factory=lambda **_: borrowed) as streams:  # type: ignore[arg-type]
                    yield streams
            else:
                async with streamable_http_client(url, http_client=client) as streams:
                    yield streams

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            logger.debug("MCP server %r changed its tools; listing them again before the next step.", self.name)
            self._stale = True
        elif isinstance(message, Exception):
            logger.warning("MCP server %r sent something unreadable: %s", self.name, message)

    async def _listen(self, client: Client) -> None:
        """On 2026-era servers list changes are a subscription; earlier ones send notifications unasked."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._stale = True
        except Exception as exc:  # a lost subscription only means no refresh; the calls still work
            if "not available at protocol version" not in str(exc):
                logger.info("MCP server %r: list-change subscription ended (%s).", self.name, _describe(exc))

    def _what(self) -> str:
        if isinstance(self.target, str):
            return self.target
        return shlex.join([self.target.command, *self.target.args])

    def _connect_error(self, exc: Exception) -> MCPServerError:
        status = _http_status(exc) or self._refused
        if status in (401, 403):
            given = ("the credentials it was given were refused" if self._has_credentials() else
                     "it needs credentials and none were given")
            return MCPServerError(
                f"The MCP server {self.name!r} ({self._what()}) refused the connection with HTTP {status} "
                f"{'Unauthorized' if status == 401 else 'Forbidden'}: {given}. Pass bearer_token=..., headers=... "
                "or auth=... to MCPServer.http/sse (or an http_client that authenticates), with a token the "
                "server accepts.", server=self.name)
        if status is not None:
            return MCPServerError(f"Could not connect to the MCP server {self.name!r} ({self._what()}): it answered "
                                  f"HTTP {status}. Check the URL (Streamable HTTP endpoints usually end in /mcp, "
                                  "SSE ones in /sse: use MCPServer.sse for those).", server=self.name)
        return MCPServerError(f"Could not connect to the MCP server {self.name!r} ({self._what()}): {_describe(exc)}. "
                              "Check the command or URL, and that the server speaks MCP.", server=self.name)

    def _has_credentials(self) -> bool:
        options = self._http
        if options.bearer_token is not None or options.auth is not None or options.http_client is not None:
            return True
        return any(k.lower() == "authorization" for k in (options.headers or {}))

    # -- tools -----------------------------------------------------------------------------------

    async def get_tools(self, context: RunContext[Any]) -> list[Tool[..., Any]]:
        if not self._opened:
            raise UserError(f"The MCP server {self.name!r} is not open; open it with `async with server:` or give it "
                            "to an agent run (toolsets=[...]), which opens it.")
        if self._stale and self.connected:
            async with self._refresh:
                if self._stale:
                    self._stale = False
                    try:
                        await self._list(refresh=True)
                    except Exception as exc:  # the old list stays; the calls will say what is wrong
                        logger.warning("Listing the tools of MCP server %r again failed: %s", self.name, _describe(exc))
        return self._tools

    async def _list(self, *, refresh: bool) -> None:
        client = self._client
        assert client is not None
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh" if refresh else "use")
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self._tools = [self._tool(t) for t in listed]

    def _tool(self, listed: mcp_types.Tool) -> Tool[..., Any]:
        name = listed.name

        async def call_mcp_tool(_mcp_context: RunContext[Any], **arguments: Any) -> Any:
            return await self._call(name, arguments, _mcp_context)

        schema = dict(listed.input_schema or {})
        schema.pop("title", None)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        description = listed.description or listed.title or ""
        # A read-only tool changes nothing, so running it twice is as safe as an idempotent one (MCP defines
        # `idempotentHint` for tools that do write); a continued run may run either again (durable-runs.md).
        hints = listed.annotations
        idempotent = hints is not None and bool(hints.read_only_hint or hints.idempotent_hint)
        made = Tool.from_schema(name, description, schema, call_mcp_tool, timeout=self.timeout,
                                requires_approval=self.requires_approval, retries=self.retries,
                                idempotent=idempotent)
        made.tool_type = "extension"
        return made

    async def _call(self, name: str, arguments: dict[str, Any], context: RunContext[Any]) -> Any:
        process = self.process_tool_call
        if process is None:
            return await self._call_server(name, arguments, context)

        async def call_tool(name: str, arguments: dict[str, Any], *, meta: dict[str, Any] | None = None) -> Any:
            return await self._call_server(name, arguments, context, meta=meta)

        return await process(context, call_tool, name, arguments)

    async def _call_server(
        self, name: str, arguments: dict[str, Any], context: RunContext[Any], *, meta: dict[str, Any] | None = None
    ) -> Any:
        client = self._client
        if client is None or self._dead.is_set():
            reason = f" ({self._lost})" if self._lost else ""
            raise ToolError(f"The MCP server {self.name!r} is not connected any more{reason}, so its tool {name!r} "
                            "could not run. Do not call its tools again in this conversation.")
        result: mcp_types.CallToolResult | None = None
        async with anyio.create_task_group() as tg:
            # The transport may fail without failing this request (the connection's task sees it first):
            # end the wait as soon as the connection is known to be gone.
            async def watch() -> None:
                await self._dead.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                result = await client.call_tool(name, arguments, meta=meta)  # type: ignore[arg-type]
            except MCPError as exc:
                if exc.code == _CONNECTION_CLOSED:
                    # The server is gone (a stdio server that exited): every later call is answered at once.
                    self._lost = self._lost or "its connection closed"
                    self._dead.set()
                else:
                    raise ToolError(f"The MCP server {self.name!r} refused the call to {name!r}: "
                                    f"{exc.message}") from exc
            finally:
                tg.cancel_scope.cancel()
        if result is None:
            raise ToolError(f"The MCP server {self.name!r} stopped while its tool {name!r} was running, so the call "
                            "has no result (it may or may not have taken effect). Its tools cannot be used any more "
                            "in this conversation.")
        return _result_value(name, result, context)


def _remove_hook(client: httpx2.AsyncClient, hook: Any) -> None:
    hooks = client.event_hooks
    client.event_hooks = {**hooks, "response": [h for h in hooks.get("response", []) if h is not hook]}


class _Borrowed:
    """The caller's client as the `async with` the SSE transport enters, without closing it at the end."""

    def __init__(self, client: httpx2.AsyncClient) -> None:
        self.client = client

    async def __aenter__(self) -> httpx2.AsyncClient:
        return self.client

    async def __aexit__(self, *exc_info: object) -> None:
        return None


def _http_options(
    transport: Literal["streamable_http", "sse"],
    url: str,
    *,
    headers: Mapping[str, str] | None,
    bearer_token: str | None,
    auth: httpx2.Auth | None,
    verify: ssl.SSLContext | str | bool,
    cert: Any,
    http_client: httpx2.AsyncClient | None,
) -> _HTTPOptions:
    """The HTTP options, checked: each mistake is named before any connection is tried."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise UserError(f"The MCP server URL {url!r} must start with http:// or https://.")
    if http_client is not None:
        if not isinstance(http_client, httpx2.AsyncClient):
            raise UserError(f"http_client must be an httpx2.AsyncClient (the `mcp` package speaks HTTP with httpx2, "
                            f"not httpx); got {type(http_client).__module__}.{type(http_client).__name__}. Make one "
                            "with httpx2.AsyncClient(headers=..., verify=...), or pass those options here instead.")
        if headers or bearer_token is not None or auth is not None or verify is not True or cert is not None:
            raise UserError("http_client is used as it is, so headers, bearer_token, auth, verify and cert cannot be "
                            "given with it; configure them on the client.")
    if bearer_token is not None:
        if not isinstance(bearer_token, str) or not bearer_token.strip():
            raise UserError("bearer_token must be the token's text (without 'Bearer '); got an empty value.")
        if any(k.lower() == "authorization" for k in (headers or {})):
            raise UserError("Give either bearer_token or an Authorization header, not both.")
    if auth is not None and not isinstance(auth, httpx2.Auth):
        raise UserError(f"auth must be an httpx2.Auth flow; got {type(auth).__name__}. For a plain token use "
                        "bearer_token=...")
    return _HTTPOptions(transport=transport, headers=dict(headers) if headers else None, bearer_token=bearer_token,
                        auth=auth, verify=_tls_context(verify, cert), http_client=http_client)


def _tls_context(verify: ssl.SSLContext | str | bool, cert: Any) -> ssl.SSLContext | bool:
    """`verify=` and `cert=` as httpx2 takes them: an `ssl.SSLContext` (paths are deprecated there), or a bool."""
    if isinstance(verify, ssl.SSLContext):
        if cert is not None:
            raise UserError("Give the client certificate to your SSLContext (load_cert_chain) instead of cert=.")
        return verify
    if verify is False:
        if cert is not None:
            raise UserError("cert= needs TLS verification on (verify=True or a CA bundle).")
        return False
    try:
        if isinstance(verify, str):
            context = (ssl.create_default_context(capath=verify) if os.path.isdir(verify)
                       else ssl.create_default_context(cafile=verify))
        elif verify is True:
            if cert is None:
                return True
            context = ssl.create_default_context()
        else:
            raise UserError(f"verify must be True, False, a CA bundle path or an ssl.SSLContext; got {verify!r}.")
        if cert is not None:
            certfile, keyfile = (cert, None) if isinstance(cert, (str, os.PathLike)) else cert
            context.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise UserError(f"The TLS settings could not be loaded ({exc}); check the paths given as verify= and "
                        "cert=.") from exc
    return context


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status an exception (possibly inside exception groups) reports, if any."""
    seen: list[BaseException] = [exc]
    visited: set[int] = set()
    while seen:
        current = seen.pop()
        if id(current) in visited:
            continue
        visited.add(id(current))
        if isinstance(current, BaseExceptionGroup):
            seen.extend(current.exceptions)
            continue
        response = getattr(current, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int):
            return status
        seen.extend(linked for linked in (current.__cause__, current.__context__) if linked is not None)
    return None


def _result_value(name: str, result: mcp_types.CallToolResult, context: RunContext[Any]) -> Any:
    """An MCP tool result as toolwire's result value (or `ToolError` for an error result).

    Images, audio and binary resources become the result's files (`ToolReturn.files`, then
    `ToolResultPart.files`): each provider receives them where its API takes files in tool results, and the
    JSON result describes them (kind, media type, size) where they stood among the content."""
    texts: list[str] = []
    items: list[Any] = []
    files: list[FilePart] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            texts.append(block.text)
            items.append({"type": "text", "text": block.text})
        elif isinstance(block, (mcp_types.ImageContent, mcp_types.AudioContent)):
            files.append(FilePart(media_type=block.mime_type, data=block.data))
            items.append(_described(block.type, files[-1]))
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                texts.append(resource.text)
                items.append({"type": "resource", "uri": str(resource.uri), "text": resource.text})
            else:
                uri = str(resource.uri)
                files.append(FilePart(media_type=resource.mime_type or "application/octet-stream",
                                      data=resource.blob, name=_file_name(uri)))
                items.append({**_described("resource", files[-1]), "uri": uri})
        elif isinstance(block, mcp_types.ResourceLink):
            link = {"type": "resource_link", "uri": str(block.uri), "name": block.name}
            if block.description:
                link["description"] = block.description
            items.append(link)
        else:
            items.append({"type": getattr(block, "type", "unknown")})
    if files:
        # Kept for applications written before results carried files.
        context.metadata.setdefault("files", []).extend(
            {"type": "file", "media_type": f.media_type, "data": f.data, "url": None, "name": f.name} for f in files)
    if result.is_error:
        message = "\n".join(texts).strip() or f"The MCP tool {name!r} reported an error without a message."
        raise ToolError(message)
    if result.structured_content is not None:
        value: Any = result.structured_content
    elif not items:
        value = None
    elif len(texts) == len(items):
        value = "\n".join(texts)
    else:
        value = items
    return ToolReturn(value, files=files) if files else value


def _file_name(uri: str) -> str:
    """A resource's file name: the last segment of its URI's path (the URI itself when there is none)."""
    path = urlsplit(uri).path.rstrip("/")
    return path.rsplit("/", 1)[-1] or uri


def _described(kind: str, file: FilePart) -> dict[str, Any]:
    """A file where it stood in the result's content: its kind, type and size (the bytes go as a file)."""
    return {"type": kind, "media_type": file.media_type, "bytes": decoded_size(file) or 0}


def _describe(exc: BaseException) -> str:
    """The most telling leaf of an exception (transports wrap theirs in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _default_name(target: StdioServerParameters | str) -> str:
    if isinstance(target, str):
        return urlsplit(target).netloc or target
    line = shlex.join([target.command, *target.args])
    return line if len(line) <= 80 else line[:79] + "…"


def _version() -> str:
    from . import __version__

    return __version__


def servers_from_specs(
    commands: Sequence[str] = (),
    urls: Sequence[str] = (),
    *,
    inherit_env: bool = True,
    stderr: TextIO | None = None,
    timeout: float | None = None,
) -> list[MCPServer]:
    """MCP servers from command-line style specs: `"cmd arg..."` (stdio, split as a shell would) and URLs.

    Servers a person names on a command line get that person's environment (`inherit_env`), as if they
    had started the command themselves. Used by `toolwire chat`, `run` and `serve` (`--mcp`, `--mcp-url`).
    """
    servers: list[MCPServer] = []
    for spec in commands:
        try:
            words = shlex.split(spec)
        except ValueError as exc:
            raise UserError(f"The MCP server command {spec!r} cannot be read ({exc}); quote it as a shell "
                            "would.") from exc
        if not words:
            raise UserError("An MCP server command is empty; write --mcp \"command args...\".")
        servers.append(MCPServer.stdio(words[0], words[1:], env=dict(os.environ) if inherit_env else None,
                                       stderr=stderr, timeout=timeout))
    servers.extend(MCPServer.http(url, timeout=timeout) for url in urls)
    return servers
