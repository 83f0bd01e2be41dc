"""deploy/compose.yaml: the toolwire service's command is one shell line with every option, and it runs.

The line runs as written in a fresh virtualenv (standing in for the image's Python), installing from this
checkout as the service installs from `/src`, against the real PostgreSQL and Redis the test run starts
(tests/databases.py, tests/redis_server.py; under CI=true a missing server fails). A file of its own so that
the test workers run it beside the wheel and sdist installs.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.services import PostgresCluster, RedisServer, free_port
from tests.test_install import chat_once, fresh_venv, stop_serve
from tests.wheelhouse import offline_pip_env, wheelhouse

ROOT = Path(__file__).resolve().parents[1]


def compose_command() -> str:
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    command = compose["services"]["toolwire"]["command"]
    assert command[:2] == ["sh", "-c"] and len(command) == 3
    line: str = command[2]
    # One shell line: a line break would end `sh -c`'s command before the server's options.
    assert "\n" not in line.strip()
    return line


def test_the_compose_command_is_one_line_with_every_option() -> None:
    line = compose_command()
    assert line.startswith("pip install -q '/src[postgres,redis]' && exec toolwire serve ")
    for option in ("--db postgresql://", "--redis redis://", "--host 0.0.0.0", "--port 8000", "--tokens-file ",
                   "--drain-seconds 30"):
        assert option in line, option


@pytest.fixture
def compose_services(postgres_cluster: PostgresCluster, redis_server: RedisServer) -> Iterator[tuple[str, str]]:
    name = postgres_cluster.new_database()
    try:
        yield postgres_cluster.url(name), redis_server.url
    finally:
        postgres_cluster.drop_database(name)


@pytest.mark.timeout(900)
def test_the_compose_command_line_serves_on_postgres_and_redis(compose_services: tuple[str, str], tmp_path: Path,
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    """The toolwire service's `sh -c` line as written, in a fresh venv (the image's pip), from this checkout,
    with only the addresses changed: the test's PostgreSQL and Redis, a free port, a tokens file here. pip
    resolves against the run's one download of the dependencies (tests/wheelhouse.py)."""
    db_url, redis_url = compose_services
    port = free_port()
    (tmp_path / "tokens.txt").write_text("alice a-long-random-token-for-alice\n")
    line = (compose_command()
            .replace("'/src[", f"'{ROOT}[")
            .replace("postgresql://toolwire:pw@db/toolwire", db_url)
            .replace("redis://cache:6379/0", redis_url)
            .replace("--port 8000", f"--port {port}")
            .replace("/etc/toolwire/tokens.txt", str(tmp_path / "tokens.txt")))
    bin_dir = fresh_venv(tmp_path / "venv")
    env = offline_pip_env(wheelhouse(tmp_path_factory))
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '')}", OPENAI_API_KEY="")
    out = tmp_path / "compose.out"
    with out.open("wb") as sink:
        process = subprocess.Popen(["sh", "-c", line], cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while "Listening on" not in out.read_text(errors="replace"):
            assert process.poll() is None, f"the compose command exited:\n{out.read_text(errors='replace')}"
            assert time.monotonic() < deadline, out.read_text(errors="replace")
            time.sleep(0.2)
        printed = out.read_text(errors="replace")
        assert "postgresql+asyncpg://" in printed and re.search(rf"Listening on http://\S+:{port}\b", printed), printed
        # --tokens-file reached the server: its token works, and no token was made up for `local`.
        assert "Tokens: 1 user(s)" in printed
        events = chat_once(f"http://127.0.0.1:{port}", "a-long-random-token-for-alice")
        assert events[0]["type"] == "run_started"
    finally:
        stop_serve(process)
    assert "Traceback" not in out.read_text(errors="replace")
