"""Starting the test MCP server (tests/mcp/server.py) over stdio or Streamable HTTP on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

from toolwire.mcp import MCPServer

ROOT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "tests.mcp.server"]


def stdio_server(pid_file: Path | None = None, *, env: dict[str, str] | None = None, **options: object) -> MCPServer:
    env = {**({"MCP_PID_FILE": str(pid_file)} if pid_file is not None else {}), **(env or {})} or None
    return MCPServer.stdio(COMMAND[0], COMMAND[1:], cwd=ROOT, env=env, **options)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def http_process(
    pid_file: Path | None = None, *, kind: str = "http", env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The test server as an HTTP process on loopback: `(url, process)`; killed at the end.

    `kind`: "http" (Streamable HTTP, the URL ends in /mcp) or "sse" (the legacy transport, /sse); `env`
    adds to the server's environment (MCP_TOKEN, MCP_INSTRUCTIONS).
    """
    port = free_port()
    env = {**os.environ, **({"MCP_PID_FILE": str(pid_file)} if pid_file is not None else {}), **(env or {})}
    process = subprocess.Popen([*COMMAND, kind, str(port)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("The test MCP server did not start listening.") from None
                time.sleep(0.05)
        scheme = "https" if "MCP_TLS_CERT" in env else "http"
        yield f"{scheme}://127.0.0.1:{port}/{'sse' if kind == 'sse' else 'mcp'}", process
    finally:
        process.kill()
        process.wait(timeout=10)


async def kill_when_busy(pid_file: Path, *, timeout: float = 20.0) -> int:
    """Wait until the server's `slow` tool wrote its pid, then kill the server (SIGKILL); the pid."""
    path = anyio.Path(pid_file)
    with anyio.fail_after(timeout):
        while not await path.exists() or not await path.read_text():  # noqa: ASYNC110 - another process writes it
            await anyio.sleep(0.02)
    pid = int(await path.read_text())
    await anyio.sleep(0.1)  # the call is in flight: the tool is sleeping
    os.kill(pid, signal.SIGKILL)
    return pid


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
