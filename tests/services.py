"""The real servers the tests start, and `bench/load` too: PostgreSQL and Redis on free loopback ports.

Both come from Debian's packages (`scripts/test-services` installs them when missing) and run as children
of the process that starts them, in temporary folders deleted at the end, with durability switched off
(nothing here has to survive a power cut).

- PostgreSQL: a cluster made with `initdb` and started with `pg_ctl`. As root both run as the `postgres`
  user, because initdb refuses root. A template database is migrated once; `new_database()` clones it
  (`CREATE DATABASE ... TEMPLATE`, a file copy).
- Redis: `redis-server` in the foreground with no persistence (`--save ''`, `--appendonly no`).

No pytest here: the fixtures (`tests/databases.py`, `tests/redis_server.py`) turn `ServiceMissing` into a
skip, or a failure under `CI=true`; the benchmark stops with its sentence.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import hiredis

from toolwire.store import SQLStore


class ServiceMissing(RuntimeError):
    """A server's programs are not installed here; the message says which package brings them."""


TEMPLATE = "toolwire_template"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bin_dir() -> Path | None:
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


@dataclass
class PostgresCluster:
    """A PostgreSQL server on 127.0.0.1:`port`, owned by whoever started it."""

    bin_dir: Path
    data_dir: Path
    port: int
    run_as: str | None

    def _command(self, *args: str) -> list[str]:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        return ["runuser", "-u", self.run_as, "--", *command] if self.run_as else command

    def _run(self, *args: str) -> str:
        done = subprocess.run(self._command(*args), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stdout}{done.stderr}")
        return done.stdout

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> str:
        return self._run("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port),
                         "-U", "postgres", "-d", database, "-c", statement)

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data_dir / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")
        self.resume()

    def resume(self) -> None:
        """Start the (initialised, stopped) server again, on the same port and data (after `pause`)."""
        options = (f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data_dir / "data"), "-o", options, "-l", str(self.data_dir / "log"),
                  "-w", "-t", "60", "start")

    def pause(self) -> None:
        """Stop the server as an operator restarting it would (`pg_ctl stop -m fast`: every connection is closed,
        open transactions roll back); `resume` starts it again with its data."""
        self._run("pg_ctl", "-D", str(self.data_dir / "data"), "-m", "fast", "-w", "-t", "60", "stop")

    def stop(self) -> None:
        subprocess.run(self._command("pg_ctl", "-D", str(self.data_dir / "data"), "-m", "immediate", "-w", "stop"),
                       capture_output=True, timeout=60, check=False)

    def new_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.sql(f'CREATE DATABASE "{name}" TEMPLATE {TEMPLATE}')
        return name

    def drop_database(self, name: str) -> None:
        self.sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def start_postgres() -> Iterator[PostgresCluster]:
    """Start a PostgreSQL server with a migrated template database; stop it and delete its files at the end.

    Raises:
        ServiceMissing: The binaries (or, as root, the `postgres` user) are not there.
    """
    bin_dir = _bin_dir()
    if bin_dir is None:
        raise ServiceMissing("initdb and pg_ctl were not found (Debian package: postgresql)")
    run_as = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            raise ServiceMissing("running as root needs the 'postgres' user to run initdb, and there is none") from None
        run_as = "postgres"
    data_dir = Path(tempfile.mkdtemp(prefix="toolwire-pg-"))
    if run_as:
        shutil.chown(data_dir, user=run_as)
    cluster = PostgresCluster(bin_dir=bin_dir, data_dir=data_dir, port=free_port(), run_as=run_as)
    try:
        cluster.start()
        cluster.sql(f"CREATE DATABASE {TEMPLATE}")

        async def migrate() -> None:
            async with SQLStore(cluster.url(TEMPLATE)):
                pass

        # In a thread of its own: a test may start the cluster from a thread that runs an event loop already (the
        # browser tests', whose Playwright sync API keeps one running), where `anyio.run` refuses to start.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(anyio.run, migrate).result()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]
    folder: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self, *args: str) -> str:
        """Run one command with redis-cli-like framing over a plain socket; returns the raw reply.

        The read ends when hiredis's parser holds one whole reply (reading until the server went quiet for
        half a second made every call, the FLUSHALL before each replica test among them, take that long)."""
        payload = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
        reader = hiredis.Reader()
        chunks: list[bytes] = []
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(payload)
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                reader.feed(chunk)
                if reader.gets() is not False:  # one whole reply (an error reply is returned, not raised)
                    break
        return b"".join(chunks).decode(errors="replace")


@contextmanager
def start_redis() -> Iterator[RedisServer]:
    """Start `redis-server` on a free loopback port, without persistence; stop it at the end.

    Raises:
        ServiceMissing: `redis-server` is not installed.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServiceMissing("redis-server was not found (Debian package: redis-server)")
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
        stop_process(process)
        shutil.rmtree(folder, ignore_errors=True)


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if the process has not ended within `timeout` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def interruptible() -> None:
    """`preexec_fn` for a child that a test stops with Ctrl-C (SIGINT), as a user at a terminal would.

    A parent that ignores SIGINT (a pytest-xdist worker, a job started in the background) passes the ignoring
    on through exec, and Python then never raises KeyboardInterrupt; the child gets the terminal's default.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
