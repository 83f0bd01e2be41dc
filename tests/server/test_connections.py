"""Hostile connections against the real `toolwire serve`: header floods, half-open sockets, idle keep-alives.

The attackers are raw sockets; the honest clients are httpx. Memory is the server process's RSS read from
/proc, descriptors are capped in the child with RLIMIT_NOFILE. Timings are measured and printed (`-s`)
with generous bounds: the machine running the tests may be loaded.
"""

from __future__ import annotations

import os
import re
import resource
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx
import orjson
import pytest

from tests.databases import sqlite_url
from tests.server.support import TOKENS, Event, GateServer, ServerProcess, read_events, text
from toolwire.server.connections import ConnectionLimits

MiB = 1024 * 1024


@pytest.fixture
def launch(gate: GateServer, tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start `toolwire serve` (SQLite: these limits are the HTTP layer's, the same on every database)."""
    started: list[ServerProcess] = []

    def start(*args: str, preexec: Callable[[], None] | None = None) -> ServerProcess:
        process = ServerProcess(db_url=sqlite_url(tmp_path), gate_url=gate.url, folder=tmp_path, args=args,
                                preexec=preexec)
        process.start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def address(server: ServerProcess) -> tuple[str, int]:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def rss(server: ServerProcess) -> int:
    """The server process's resident memory, in bytes."""
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc")


def cpu_seconds(server: ServerProcess) -> float:
    assert server.process is not None
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def answer(sock: socket.socket, wait: float = 10.0) -> bytes:
    """What the server sends until it closes the connection (or `wait` passes)."""
    sock.settimeout(wait)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return received


def until_closed(sock: socket.socket, wait: float) -> bytes | None:
    """What the server sends before it closes the connection; None if it is still open after `wait`."""
    sock.settimeout(wait)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return received


def flood(where: tuple[str, int], start: bytes, filler: bytes, limit: int) -> tuple[socket.socket, int, bytes]:
    """Send `start` and then `filler` again and again (a request head that never ends), up to `limit` bytes
    or until the server answers or closes. Returns the socket (still open), the bytes sent and the answer."""
    sock = socket.create_connection(where)
    sock.sendall(start)
    sent = len(start)
    while sent < limit:
        readable, writable, _ = select.select([sock], [sock], [], 10)
        if readable:
            return sock, sent, answer(sock)
        if not writable:
            break
        try:
            sent += sock.send(filler)
        except (BrokenPipeError, ConnectionResetError):
            break
    return sock, sent, answer(sock, wait=1.0)


def one_response(sock: socket.socket) -> bytes:
    """One whole response (with a content-length) from a kept-alive connection."""
    sock.settimeout(10)
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, body = received.split(b"\r\n\r\n", 1)
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def status(response: bytes) -> int:
    assert response.startswith(b"HTTP/1.1 "), response[:200]
    return int(response[9:12])


def error_code(response: bytes) -> str:
    body = orjson.loads(response.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["message"].endswith("."), body
    return str(body["error"]["code"])


def test_a_header_flood_is_refused_early_and_costs_no_memory(launch: Callable[..., ServerProcess]) -> None:
    server = launch()
    where = address(server)
    assert httpx.get(f"{server.url}/healthz", trust_env=False).status_code == 200
    before = rss(server)
    connections = 10
    line = b"X-Flood: " + b"f" * 1000 + b"\r\n"
    floods = [flood(where, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", line * 64, limit=8 * MiB)
              for _ in range(connections)]
    time.sleep(1.0)  # whatever was sent has been read
    grown = rss(server) - before
    per_connection = grown / connections
    print(f"\nheader flood: {connections} connections sent {sum(f[1] for f in floods) / MiB:.1f} MiB in all; "
          f"server RSS grew {grown / MiB:.1f} MiB ({per_connection / 1024:.0f} KiB per connection)")
    for sock, _, _ in floods:
        sock.close()
    for _, _, response in floods:
        assert status(response) == 431, response[:200]
        assert error_code(response) == "request_header_fields_too_large"
    assert per_connection < 512 * 1024


def test_one_endless_header_value_is_refused_at_once(launch: Callable[..., ServerProcess]) -> None:
    server = launch()
    spent = cpu_seconds(server)
    started = time.monotonic()
    sock, sent, response = flood(address(server), b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ",
                                 b"v" * 65536, limit=64 * MiB)
    elapsed = time.monotonic() - started
    sock.close()
    spent = cpu_seconds(server) - spent
    print(f"\none endless header value: {sent / 1024:.0f} KiB sent before the answer, {elapsed:.2f} s, "
          f"{spent:.2f} s of the server's CPU")
    assert status(response) == 431
    assert sent < 64 * MiB  # answered long before (what was sent includes what the kernel's buffers hold)


def request_head(target: str = "/healthz", fields: list[tuple[str, str]] | None = None) -> bytes:
    lines = [f"GET {target} HTTP/1.1", "Host: x", *(f"{name}: {value}" for name, value in fields or [])]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def ask(where: tuple[str, int], head: bytes) -> bytes:
    with socket.create_connection(where) as sock:
        sock.sendall(head)
        return answer(sock)


def test_heads_beyond_the_limits_get_a_clear_error_and_honest_ones_pass(
        launch: Callable[..., ServerProcess]) -> None:
    server = launch()
    where = address(server)
    long_target = ask(where, request_head("/healthz?" + "q" * 9000))
    assert status(long_target) == 414 and error_code(long_target) == "uri_too_long"
    many = ask(where, request_head(fields=[(f"X-F{i}", "v") for i in range(101)]))
    assert status(many) == 431 and error_code(many) == "request_header_fields_too_large"
    one_large = ask(where, request_head(fields=[("X-Large", "v" * 8200)]))
    assert status(one_large) == 431
    large_in_all = ask(where, request_head(fields=[(f"X-F{i}", "v" * 4000) for i in range(10)]))
    assert status(large_in_all) == 431
    # What browsers and proxies send, generously: 90 fields, one of 8000 bytes, 20 KiB in all.
    honest = [(f"X-F{i}", "v" * 130) for i in range(89)] + [("Cookie", "c=" + "x" * 7990)]
    with httpx.Client(base_url=server.url, trust_env=False, timeout=30,
                      headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as client:
        response = client.get("/api/chats", headers=honest)
        assert response.status_code == 200, response.text
        assert client.get("/healthz?" + "q" * 7000).status_code == 200
    # The limits hold on every request of a kept-alive connection, not only on its first.
    with socket.create_connection(where) as sock:
        sock.sendall(request_head())
        assert status(one_response(sock)) == 200
        sock.sendall(request_head(fields=[(f"X-F{i}", "v") for i in range(150)]))
        assert status(answer(sock)) == 431


def few_descriptors() -> None:
    """The server child may open 256 files and sockets (its database, the model's client, the listening socket
    and its connections)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


HEADER_TIMEOUT = 2.0


def test_half_open_connections_do_not_lock_honest_clients_out(launch: Callable[..., ServerProcess]) -> None:
    server = launch("--header-timeout", str(HEADER_TIMEOUT), preexec=few_descriptors)
    where = address(server)
    half_open: list[socket.socket] = []
    try:
        for _ in range(300):
            sock = socket.create_connection(where)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Never: ")
            half_open.append(sock)
        # The honest client may be accepted while the half-open connections are being closed and more than
        # the connection cap (128 here) are still open: it is answered 503 then, the overload answer, and
        # asks again as clients of an overloaded server do. Locked out would be never being answered, or
        # 503 after the half-open connections are gone.
        started = time.monotonic()
        overloaded = 0
        while True:
            response = httpx.get(f"{server.url}/healthz", trust_env=False, timeout=HEADER_TIMEOUT + 60)
            if response.status_code != 503 or time.monotonic() - started > HEADER_TIMEOUT + 30:
                break
            overloaded += 1
            time.sleep(0.2)
        waited = time.monotonic() - started
        assert response.status_code == 200
        timed_out = 0
        for sock in half_open:
            got = until_closed(sock, wait=HEADER_TIMEOUT + 10)
            if got is not None:
                assert status(got) == 408 and error_code(got) == "request_timeout"
                timed_out += 1
    finally:
        for sock in half_open:
            sock.close()
    print(f"\n300 half-open sockets, 256 descriptors: the honest client was served after {waited:.1f} s "
          f"(header timeout {HEADER_TIMEOUT} s, {overloaded} answers 503 before); {timed_out} half-open "
          f"connections were closed")
    assert waited < HEADER_TIMEOUT + 30
    assert timed_out == 300


def test_idle_connections_are_closed_and_the_connection_cap_answers_503(
        launch: Callable[..., ServerProcess]) -> None:
    server = launch("--timeout-keep-alive", "1", "--header-timeout", "1", "--limit-concurrency", "4")
    where = address(server)
    idle = [socket.create_connection(where) for _ in range(4)]  # connected, silent
    with httpx.Client(base_url=server.url, trust_env=False, timeout=30) as client:
        busy = client.get("/healthz")
        assert busy.status_code == 503
        started = time.monotonic()
        for sock in idle:
            assert until_closed(sock, wait=15) == b""  # closed without a word: it asked nothing
            sock.close()
        print(f"\nsilent connections closed after {time.monotonic() - started:.1f} s (header timeout 1 s)")
        # Polled: the server may still be closing its side of those connections.
        for _ in range(100):
            response = client.get("/healthz")
            if response.status_code == 200:
                break
            time.sleep(0.1)
        assert response.status_code == 200
    with socket.create_connection(where) as sock:
        sock.sendall(request_head())
        assert status(one_response(sock)) == 200
        started = time.monotonic()
        assert until_closed(sock, wait=15) == b""  # the kept-alive connection, once idle, is closed
        assert time.monotonic() - started < 10


@pytest.mark.anyio
async def test_an_event_stream_outlives_every_connection_timeout(launch: Callable[..., ServerProcess],
                                                                 gate: GateServer) -> None:
    server = launch("--timeout-keep-alive", "1", "--header-timeout", "1", "--heartbeat-seconds", "1")
    script = gate.script("long", text("Still here."), gated=True)
    heartbeats: list[float] = []
    events: list[Event] = []
    quiet = 4.0  # four times each timeout with nothing but heartbeats on the stream

    async def release_later() -> None:
        await anyio.sleep(quiet)
        script.open()

    async with server.api() as api:
        chat = await api.new_chat()
        started = time.monotonic()
        async with api.send(chat, "[[long]] wait") as response, anyio.create_task_group() as tg:
            assert response.status_code == 200
            tg.start_soon(release_later)
            events.extend([event async for event in read_events(response, heartbeats)])
        lasted = time.monotonic() - started
    assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed"
    assert lasted >= quiet and len(heartbeats) >= 2


def test_the_docs_name_each_limit_with_its_flag_and_default() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "security.md").read_text()
    section = guide.split("## Connection limits and the reverse proxy", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([^|]+) \| ([^|]+) \| `(--[\w-]+)` \| ([^|]+) \|$", section, re.M)
    helped = subprocess.run([sys.executable, "-m", "toolwire", "serve", "--help"], capture_output=True, text=True,
                            check=True, env={**os.environ, "COLUMNS": "200"}).stdout
    documented = {flag for _, _, flag, _ in rows}
    assert documented == {"--max-request-line", "--max-header-fields", "--max-header-field-bytes",
                          "--max-header-bytes", "--header-timeout", "--timeout-keep-alive", "--limit-concurrency"}
    defaults = ConnectionLimits()
    for _, default, flag, _ in rows:
        assert flag in helped, flag
        number = re.match(r"[\d.]+", default)
        if number is not None and flag != "--max-header-bytes":
            value = {"--max-request-line": defaults.max_request_line_bytes,
                     "--max-header-fields": defaults.max_header_fields,
                     "--max-header-field-bytes": defaults.max_header_field_bytes,
                     "--header-timeout": defaults.header_timeout,
                     "--timeout-keep-alive": defaults.keep_alive_timeout}[flag]
            assert float(number.group()) == value, flag
    assert defaults.max_header_bytes == 32 * 1024


def test_the_help_copy_of_the_limits_defaults_matches_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --help` shows a copy of the defaults (the parser does not import the server), kept equal here."""
    from toolwire.cli._connections import _defaults
    from toolwire.server.connections import ConnectionLimits

    monkeypatch.setitem(sys.modules, "toolwire.server.connections", None)  # importing it now fails
    copy = _defaults()
    assert not isinstance(copy, ConnectionLimits)
    real = ConnectionLimits()
    assert vars(copy) == {name: getattr(real, name) for name in vars(copy)}
    assert set(vars(copy)) == {f for f in ConnectionLimits.__dataclass_fields__ if f != "max_connections"}
