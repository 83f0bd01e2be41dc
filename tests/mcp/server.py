"""A real MCP server for the tests, written with the same `mcp` package toolwire uses.

    python -m tests.mcp.server                 # stdio
    python -m tests.mcp.server http PORT       # Streamable HTTP on 127.0.0.1:PORT/mcp
    python -m tests.mcp.server sse PORT        # the legacy SSE transport on 127.0.0.1:PORT/sse

Tools: `add` and `shout` (plain), `fail` (an error result), `slow` (writes the server's pid to
$MCP_PID_FILE, then sleeps: a test kills the server mid-call), `hang` (never returns), `grow` (adds the
tool `extra` and announces the list change), `picture` (text and an image); with $MCP_WHOAMI set, also
`whoami` (the request's `x-team` header and the `_meta` the client sent; opt-in so that the tool lists
other tests assert stay as they are); with $MCP_FILES set, also `report` (text, an image and an
embedded PDF resource).

$MCP_INSTRUCTIONS becomes the server's `instructions`; over HTTP, $MCP_TOKEN makes every request need
`Authorization: Bearer <token>` (401 without it, as hosted servers answer).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import BlobResourceContents, EmbeddedResource, ImageContent, TextContent

server = MCPServer("toolwire-test", log_level="WARNING", instructions=os.environ.get("MCP_INSTRUCTIONS") or None)
logging.getLogger("mcp").setLevel(logging.WARNING)

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper() + "!"


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot do that: {reason}")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    pid_file = os.environ.get("MCP_PID_FILE")
    if pid_file:
        await anyio.Path(pid_file).write_text(str(os.getpid()))
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def hang() -> str:
    """Never answers."""
    await anyio.sleep_forever()
    return "never"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `extra`."""

    @server.tool()
    def extra(word: str) -> str:
        """A tool that was not there at first."""
        return f"extra {word}"

    await ctx.notify_tools_changed()  # 2026-era clients: their list-change subscription
    try:
        await ctx.session.send_tool_list_changed()  # earlier clients: the notification
    except Exception:
        pass
    return "grown"


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A caption and a one-pixel image."""
    return [TextContent(type="text", text="a red dot"), ImageContent(type="image", data=PNG, mime_type="image/png")]


def whoami(ctx: Context) -> dict[str, Any]:
    """Who is calling: the x-team header and the request's _meta."""
    headers = ctx.headers or {}
    meta = ctx.request_context.meta or {}
    user = meta.get("user") if isinstance(meta, dict) else getattr(meta, "user", None)
    return {"team": headers.get("x-team"), "user": user}


if os.environ.get("MCP_WHOAMI"):
    server.tool()(whoami)

PDF = "JVBERi0xLjQKJSVFT0YK"  # "%PDF-1.4\n%%EOF\n"


def report() -> list[TextContent | ImageContent | EmbeddedResource]:
    """A caption, a chart and the report itself as an embedded binary resource."""
    pdf = BlobResourceContents(uri="file:///reports/q3.pdf", mime_type="application/pdf", blob=PDF)
    return [TextContent(type="text", text="Q3 report"), ImageContent(type="image", data=PNG, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=pdf)]


if os.environ.get("MCP_FILES"):
    server.tool()(report)


def require_token(app: Any, token: str) -> Any:
    """ASGI middleware: HTTP requests without `Authorization: Bearer <token>` get 401, as hosted servers answer."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                body = b'{"error": "invalid_token", "error_description": "A bearer token is required."}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer error="invalid_token"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def serve_http(kind: str, port: int) -> None:
    app = server.sse_app() if kind == "sse" else server.streamable_http_app()
    token = os.environ.get("MCP_TOKEN")
    if token:
        app = require_token(app, token)
    # $MCP_TLS_CERT / $MCP_TLS_KEY: serve HTTPS with that certificate (the TLS tests make a self-signed one).
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            ssl_certfile=os.environ.get("MCP_TLS_CERT"), ssl_keyfile=os.environ.get("MCP_TLS_KEY"))
    anyio.run(uvicorn.Server(config).serve)


if __name__ == "__main__":
    if sys.argv[1:2] in (["http"], ["sse"]):
        serve_http(sys.argv[1], int(sys.argv[2]))
    else:
        server.run()
