"""A real Redis server for the tests, started here: Debian's `redis-server` on a free loopback port.

`scripts/test-services` installs it when missing. It runs in the foreground of a child process with no
persistence (`--save ''`, `--appendonly no`) in a temporary folder, once per test session, and is
stopped at the end. Without the binary the tests that need it are skipped, saying why, except under
`CI=true`, where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.databases import free_port


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]
    folder: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self, *args: str) -> str:
        """Run one command with redis-cli-like framing over a plain socket; returns the raw reply."""
        payload = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(payload)
            sock.settimeout(0.5)
            chunks: list[bytes] = []
            try:
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
            except TimeoutError:
                pass
        return b"".join(chunks).decode(errors="replace")


def missing_redis(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Redis is needed in CI but {reason}; scripts/test-services installs it.")
    pytest.skip(f"These tests need a Redis server: {reason} (scripts/test-services installs it)")


@contextmanager
def start_redis() -> Iterator[RedisServer]:
    """Start `redis-server` on a free loopback port, without persistence; stop it at the end."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server was not found (Debian package: redis-server; scripts/test-services "
                                "installs it)")
    folder = Path(tempfile.mkdtemp(prefix="toolwire-redis-"))
    port = free_port()
    with (folder / "log").open("wb") as log:
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(folder), "--daemonize", "no", "--protected-mode", "yes", "--maxclients", "10000"],
            stdout=log, stderr=subprocess.STDOUT)
    server = RedisServer(port=port, process=process, folder=folder)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if "PONG" in server.command("PING"):
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start:\n{(folder / 'log').read_text()}")
            time.sleep(0.02)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The session's Redis server (started on first use)."""
    if shutil.which("redis-server") is None:
        missing_redis("redis-server was not found (Debian package: redis-server)")
        return
    with start_redis() as server:
        yield server
