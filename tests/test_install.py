"""Packaging: the sdist and the wheel a package index would get, installed as the docs say, start what they promise.

One build per test session (`dist`, with the backend pip would use and no download): `twine check` and the
metadata; then, for the wheel and for the sdist each, a fresh virtualenv where the bare library imports
without rich or uvicorn and names the extras it lacks, `pip install '<artifact>[server]'` then
`toolwire serve` runs a chat on its defaults, and `[otel]` is enough for the tracing guide's sample. The
compose file's command line runs as written (a fresh venv, installing from this checkout) against the real
PostgreSQL and Redis the test run starts. Packages come from PyPI through pip's cache.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import httpx
import pytest
import yaml

import toolwire
from tests.databases import PostgresCluster
from tests.services import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def run(*args: str | Path, cwd: Path, timeout: float = 300,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel, built once per test session as `python -m build` makes them for an index."""
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT, cwd=out)
    (sdist,) = out.glob("toolwire-*.tar.gz")
    (wheel,) = out.glob("toolwire-*.whl")
    return {"sdist": sdist, "wheel": wheel}


def fresh_venv(folder: Path) -> Path:
    run(sys.executable, "-m", "venv", folder, cwd=folder.parent)
    return folder / "bin"


def pip_install(bin_dir: Path, requirement: str, cwd: Path) -> None:
    run(bin_dir / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q", requirement, cwd=cwd,
        timeout=600)


def test_twine_check_and_the_metadata_an_index_shows(dist: dict[str, Path]) -> None:
    run(sys.executable, "-m", "twine", "check", "--strict", dist["sdist"], dist["wheel"], cwd=ROOT)
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(wheel.read(name).decode())
        files = wheel.namelist()
    # One version source: the package's __version__ is the distribution's version.
    assert metadata["Version"] == toolwire.__version__
    assert dist["wheel"].name.startswith(f"toolwire-{toolwire.__version__}-")
    assert metadata["License-Expression"] == "MIT"
    assert metadata["Requires-Python"] == ">=3.11"
    classifiers = metadata.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3.11" in classifiers
    assert {url.split(",")[0] for url in metadata.get_all("Project-URL") or []} >= {
        "Homepage", "Documentation", "Source", "Changelog"}
    assert set(metadata.get_all("Provides-Extra") or []) >= {"cli", "server", "postgres", "redis", "otel", "mcp"}
    assert metadata.get_content_type() == "text/plain" and metadata["Description-Content-Type"] == "text/markdown"
    assert any(n.endswith("licenses/LICENSE") for n in files)
    assert "toolwire/py.typed" in files and "toolwire/web/index.html" in files
    assert any(n.startswith("toolwire/store/migrations/") for n in files)
    with tarfile.open(dist["sdist"]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"CHANGELOG.md", "LICENSE", "README.md", "pyproject.toml", "deploy/compose.yaml", "mkdocs.yml"} <= names
    # The changelog has an entry for the version being built.
    assert f"## {toolwire.__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_the_version_has_one_source() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and not re.search(r'^version\s*=', pyproject, re.M)
    assert re.search(r'^__version__ = "[^"]+"$', (ROOT / "src/toolwire/__init__.py").read_text(), re.M)


BARE_CHECK = textwrap.dedent("""
    import asyncio, importlib.util
    import toolwire
    from toolwire import Agent
    from toolwire.testing import ScriptedModel
    assert importlib.util.find_spec("rich") is None and importlib.util.find_spec("uvicorn") is None
    assert toolwire.__file__.find("site-packages") > 0
    # The mcp and otel extras are optional: without them, a clear line says which to install, and how
    # while toolwire is not on PyPI.
    assert importlib.util.find_spec("mcp") is None and importlib.util.find_spec("opentelemetry") is None
    try:
        import toolwire.mcp
    except ImportError as exc:
        assert "pip install 'toolwire[mcp]'" in str(exc) and "from a checkout" in str(exc), exc
    else:
        raise AssertionError("toolwire.mcp imported without the mcp extra")
    from toolwire import UserError, telemetry
    try:
        telemetry.instrument()
    except UserError as exc:
        assert "pip install 'toolwire[otel]'" in str(exc) and "from a checkout" in str(exc), exc
    else:
        raise AssertionError("instrument() worked without the otel extra")
    print(asyncio.run(Agent(ScriptedModel(["installed"])).run("hi")).output)
""")


def start_serve(bin_dir: Path, folder: Path, *args: str) -> tuple[subprocess.Popen[bytes], str, str]:
    """`toolwire serve ARGS` from `bin_dir`; returns the process, its base URL and the token it printed."""
    out = folder / "serve.out"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    with out.open("wb") as sink:
        process = subprocess.Popen([bin_dir / "toolwire", "serve", *args], cwd=folder, stdout=sink,
                                   stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while True:
        printed = out.read_text(errors="replace")
        opened = re.search(r"Open (http://[^/\s]+)/#token=(\S+)", printed)
        if opened:
            return process, opened.group(1), opened.group(2)
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"toolwire serve did not start ({process.returncode}):\n{printed}")
        time.sleep(0.1)


def stop_serve(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise


def chat_once(base: str, token: str, *, ready: bool = True) -> list[dict[str, object]]:
    """One real chat over HTTP: create a chat, ask for the weather, follow the run to its end."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base.replace("0.0.0.0", "127.0.0.1"), headers=headers, timeout=60,
                      trust_env=False) as client:
        assert client.get("/healthz").status_code == 200
        if ready:
            readiness = client.get("/readyz")
            assert readiness.status_code == 200, readiness.text
        chat = client.post("/api/chats", json={}).json()["id"]
        events: list[dict[str, object]] = []
        with client.stream("POST", f"/api/chats/{chat}/messages",
                           json={"client_message_id": "m1", "text": "What's the weather in Paris?"}) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
        assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed", events[-1]
        assert any(e["type"] == "tool_result" for e in events)
        return events


def tracing_sample() -> str:
    """The tracing guide's Python sample, as the docs show it."""
    (block,) = re.findall(r"```python\n(.*?)```", (DOCS / "guides" / "tracing.md").read_text(), re.S)
    return block


@pytest.mark.timeout(900)
@pytest.mark.parametrize("artifact", ["wheel", "sdist"])
def test_install_lean_then_server_then_otel(artifact: str, dist: dict[str, Path], tmp_path: Path) -> None:
    """From the wheel, and from the sdist (pip builds it), in a fresh venv: what each documented extra runs."""
    bin_dir = fresh_venv(tmp_path / "venv")
    path = dist[artifact]
    pip_install(bin_dir, str(path), tmp_path)
    assert run(bin_dir / "python", "-c", BARE_CHECK, cwd=tmp_path).stdout == "installed\n"
    bare = subprocess.run([bin_dir / "toolwire", "demo"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bare.returncode == 1 and "pip install 'toolwire[cli]'" in bare.stderr and "from a checkout" in bare.stderr

    # The docs' server install: `pip install '/path/to/toolwire[server]'`, then `toolwire serve`.
    pip_install(bin_dir, f"{path}[server]", tmp_path)
    assert run(bin_dir / "toolwire", "--version", cwd=tmp_path).stdout == f"toolwire {toolwire.__version__}\n"
    process, base, token = start_serve(bin_dir, tmp_path, "--port", "0")
    try:
        chat_once(base, token)
    finally:
        assert stop_serve(process) == 0
    assert (tmp_path / "toolwire.db").exists()

    # The otel extra is all the tracing guide's sample needs.
    pip_install(bin_dir, f"{path}[otel]", tmp_path)
    sample = tmp_path / "tracing_sample.py"
    sample.write_text(tracing_sample())
    traced = run(bin_dir / "python", sample, cwd=tmp_path)
    assert "invoke_agent weather-bot" in traced.stdout


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
def test_the_compose_command_line_serves_on_postgres_and_redis(compose_services: tuple[str, str],
                                                              tmp_path: Path) -> None:
    """The toolwire service's `sh -c` line as written, in a fresh venv (the image's pip), from this checkout,
    with only the addresses changed: the test's PostgreSQL and Redis, a free port, a tokens file here."""
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
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
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
        assert "postgresql+asyncpg://" in printed and f"Listening on http://0.0.0.0:{port}" in printed, printed
        # --tokens-file reached the server: its token works, and no token was made up for `local`.
        assert "Tokens: 1 user(s)" in printed
        events = chat_once(f"http://127.0.0.1:{port}", "a-long-random-token-for-alice")
        assert events[0]["type"] == "run_started"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    assert code == 0, out.read_text(errors="replace")
