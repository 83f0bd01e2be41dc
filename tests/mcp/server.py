"""A real MCP server for the tests, written with the same `mcp` package toolwire uses.

    python -m tests.mcp.server                 # stdio
    python -m tests.mcp.server http PORT       # Streamable HTTP on 127.0.0.1:PORT/mcp

Tools: `add` and `shout` (plain), `fail` (an error result), `slow` (writes the server's pid to
$MCP_PID_FILE, then sleeps: a test kills the server mid-call), `hang` (never returns), `grow` (adds the
tool `extra` and announces the list change), `picture` (text and an image).
"""

from __future__ import annotations

import logging
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ImageContent, TextContent

server = MCPServer("toolwire-test", log_level="WARNING")
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


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        port = int(sys.argv[2])
        anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=port))
    else:
        server.run()
