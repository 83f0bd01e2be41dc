"""Real databases for the store and server tests: a SQLite file, or a PostgreSQL server started here.

PostgreSQL comes from Debian's packages (`scripts/test-services` installs them when missing). The
cluster is made with `initdb` in a temporary folder and started with `pg_ctl` on a free loopback port,
once per test session, with durability switched off (tests do not need to survive a power cut). As
root, both run as the `postgres` user, because initdb refuses root. A template database is migrated
once; every test gets its own database cloned from it (`CREATE DATABASE ... TEMPLATE`, a file copy).

Without PostgreSQL binaries the PostgreSQL variants are skipped, saying why, except under `CI=true`,
where that is a failure.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from toolwire.store import SQLStore

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


def missing_postgres(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL is needed in CI but {reason}; scripts/test-services installs it.")
    pytest.skip(f"PostgreSQL tests need a PostgreSQL server: {reason} (scripts/test-services installs it)")


@dataclass
class PostgresCluster:
    """A PostgreSQL server on 127.0.0.1:`port`, owned by the test session."""

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
        options = (f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data_dir / "data"), "-o", options, "-l", str(self.data_dir / "log"),
                  "-w", "-t", "60", "start")

    def stop(self) -> None:
        subprocess.run(self._command("pg_ctl", "-D", str(self.data_dir / "data"), "-m", "immediate", "-w", "stop"),
                       capture_output=True, timeout=60, check=False)

    def new_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.sql(f'CREATE DATABASE "{name}" TEMPLATE {TEMPLATE}')
        return name

    def drop_database(self, name: str) -> None:
        self.sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_cluster() -> Iterator[PostgresCluster]:
    bin_dir = _bin_dir()
    if bin_dir is None:
        missing_postgres("initdb and pg_ctl were not found (Debian package: postgresql)")
        return
    run_as = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            missing_postgres("running as root needs the 'postgres' user to run initdb, and there is none")
            return
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

        anyio.run(migrate)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def sqlite_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'toolwire.db'}"


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """The session's PostgreSQL server (started on first use)."""
    yield from start_cluster()


def fresh_database(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> Iterator[str]:
    """A fresh, empty database for one test: a SQLite file, or a PostgreSQL database cloned from the template."""
    if kind == "sqlite":
        yield sqlite_url(tmp_path)
        return
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    name = cluster.new_database()
    try:
        yield cluster.url(name)
    finally:
        cluster.drop_database(name)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database for one test, on each database."""
    yield from fresh_database(request, tmp_path, request.param)
