"""Packaging: the sdist and the wheel a package index would get, installed as the docs say, start what they promise.

One build per test session (`dist`, with the backend pip would use and no download): `twine check` and the
metadata; then a fresh virtualenv where the bare wheel imports without rich or uvicorn and names the extras it
lacks, `pip install '<wheel>[server]'` then `toolwire serve` runs a chat on its defaults, and `[otel]` is enough
for the tracing guide's sample. The sdist is checked by what pip makes of it: the wheel pip builds from the
sdist holds exactly the files of the wheel that was tested (the compose file's command line, which installs
from a checkout, is tests/test_compose.py). Dependencies come from one download per test run
(tests/wheelhouse.py).
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
from email.parser import Parser
from pathlib import Path

import httpx
import pytest

import toolwire
from tests.wheelhouse import offline_pip_env, wheelhouse

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


def pip_install(bin_dir: Path, requirement: str, cwd: Path, packages: Path) -> None:
    run(bin_dir / "python", "-m", "pip", "install", "-q", requirement, cwd=cwd, timeout=600,
        env=offline_pip_env(packages))


@pytest.fixture(scope="session")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return wheelhouse(tmp_path_factory)


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


def stop_serve(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a process manager stops it: the server drains and exits by itself (uvicorn then re-raises
    the signal it caught, so the status is 0 or -SIGTERM, never a crash's 1)."""
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    assert code in (0, -signal.SIGTERM), code


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
def test_the_sdist_builds_the_wheel_that_was_tested(dist: dict[str, Path], packages: Path, tmp_path: Path) -> None:
    """pip builds a wheel from the sdist (as it does for `pip install toolwire-X.tar.gz`); that wheel has the
    same files as the tested one, so what the wheel's tests show holds for the sdist too. (`python -m build`
    makes its wheel from the sdist as well, so a file the sdist lacks is missing from the tested wheel.)"""
    out = tmp_path / "built"
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", out, dist["sdist"], cwd=tmp_path,
        timeout=600, env=offline_pip_env(packages))
    (built,) = out.glob("toolwire-*.whl")

    def contents(wheel: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(wheel) as archive:
            # RECORD lists hashes of the files compared here; it differs only where they do.
            return {n: archive.read(n) for n in archive.namelist() if not n.endswith(".dist-info/RECORD")}

    tested, from_sdist = contents(dist["wheel"]), contents(built)
    assert sorted(from_sdist) == sorted(tested)
    assert [n for n in tested if tested[n] != from_sdist[n]] == []


@pytest.mark.timeout(900)
def test_install_lean_then_server_then_otel(dist: dict[str, Path], packages: Path, tmp_path: Path) -> None:
    """From the wheel in a fresh venv: what each documented extra runs."""
    bin_dir = fresh_venv(tmp_path / "venv")
    path = dist["wheel"]
    pip_install(bin_dir, str(path), tmp_path, packages)
    assert run(bin_dir / "python", "-c", BARE_CHECK, cwd=tmp_path).stdout == "installed\n"
    bare = subprocess.run([bin_dir / "toolwire", "demo"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bare.returncode == 1 and "pip install 'toolwire[cli]'" in bare.stderr and "from a checkout" in bare.stderr

    # The docs' server install, `pip install '/path/to/toolwire[server]'`, then `toolwire serve`; with the otel
    # extra in the same pip run (it adds only OpenTelemetry, none of what `serve` needs) to save an install.
    pip_install(bin_dir, f"{path}[server,otel]", tmp_path, packages)
    assert run(bin_dir / "toolwire", "--version", cwd=tmp_path).stdout == f"toolwire {toolwire.__version__}\n"
    process, base, token = start_serve(bin_dir, tmp_path, "--port", "0")
    try:
        chat_once(base, token)
    finally:
        stop_serve(process)
    assert (tmp_path / "toolwire.db").exists()

    # The otel extra is all the tracing guide's sample needs.
    sample = tmp_path / "tracing_sample.py"
    sample.write_text(tracing_sample())
    traced = run(bin_dir / "python", sample, cwd=tmp_path)
    assert "invoke_agent weather-bot" in traced.stdout
