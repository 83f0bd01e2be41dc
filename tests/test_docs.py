"""The docs site stays true: it builds without a warning, and what its pages show runs.

Every page under docs/ (found by globbing, so pages added later are covered without an edit here) and README:
- each ```python block is a whole program and runs as written, the providers being fake servers on loopback
  (a `# conftest.py` / `# test_*.py` pair is run as a pytest suite instead);
- each ```bash command either runs here or is one of the long-running commands that a named test runs
  (`toolwire serve` and its install line, the compose line, the two scripts);
- the HTTP API page is what the server's `/openapi.json` says, and the provider table what the code says.
`mkdocs build --strict` runs once per test session.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.cli.support import clean_env
from toolwire.providers import capability_table

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
SAMPLED = [*PAGES, ROOT / "README.md"]


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(), re.S | re.M)


def is_pytest_file(block: str) -> bool:
    return block.startswith(("# conftest.py", "# test_"))


def bash_commands(block: str) -> list[str]:
    """The commands of a ```bash block: continuation lines joined, comments and shown output (`# ...`) dropped."""
    commands: list[str] = []
    pending = ""
    for raw in block.splitlines():
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        # A comment is two spaces or more, then `#` (never inside this project's quoted arguments).
        line = re.sub(r"\s{2,}#.*$", "", line)
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        commands.append(" ".join((pending + line.strip()).split()))
        pending = ""
    return commands


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the site ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once per test session with `mkdocs build --strict` (a warning fails the build)."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    assert "WARNING" not in done.stderr, done.stderr
    return out


@pytest.mark.timeout(600)
def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    for page in PAGES:
        relative = page.relative_to(DOCS).with_suffix("")
        built = site / ("index.html" if relative.name == "index" else relative / "index.html")
        assert built.exists(), f"{page_id(page)} was not built"
    home = (site / "index.html").read_text()
    for page in PAGES:  # every page is in the navigation (mkdocs.yml names it, or the hook adds a guide)
        relative = page.relative_to(DOCS).with_suffix("")
        if relative.name != "index":
            assert f'href="{relative.as_posix()}/"' in home or f'href="./{relative.as_posix()}/"' in home, relative
    # The API reference was rendered from the docstrings, not left as `::: toolwire...` lines.
    python_api = (site / "reference" / "python" / "index.html").read_text()
    assert ":::" not in python_api and "def run_sync" not in python_api
    assert 'id="toolwire.agent.Agent"' in python_api or 'id="toolwire.agent.Agent.run"' in python_api
    assert (site / "benchmarks" / "plot.png").exists()


def test_a_guide_missing_from_the_nav_joins_the_guides(tmp_path: Path) -> None:
    """Pages from other branches (docs/guides/<topic>.md) are built and linked without an edit of mkdocs.yml."""
    hooks = load_script("mkdocs_hooks")
    (tmp_path / "guides").mkdir()
    for name, title in (("server.md", "The server"), ("store-writes.md", "Store writes"),
                        ("budgets.md", "Token budgets")):
        (tmp_path / "guides" / name).write_text(f"# {title}\n")
    config = {"docs_dir": str(tmp_path), "nav": [{"Home": "index.md"}, {"Guides": ["guides/server.md"]}]}
    hooks.on_config(config)
    assert config["nav"][1]["Guides"] == ["guides/server.md", "guides/store-writes.md", "guides/budgets.md"]


# --- Python samples ---------------------------------------------------------------------------------------

def test_every_python_block_is_a_whole_program() -> None:
    """No top-level `await` or fragment: each block compiles as a script as written."""
    count = 0
    for page in SAMPLED:
        for block in blocks(page, "python"):
            ast.parse(block, f"<{page_id(page)}>")  # a top-level await is a SyntaxError here
            compile(block, f"<{page_id(page)}>", "exec")
            count += 1
    assert count >= 15


@pytest.fixture(scope="module")
def fake_env() -> Iterator[dict[str, str]]:
    from toolwire.testing import AutoResponder, FakeProviderServer

    with FakeProviderServer("openai-chat", AutoResponder(seed=5)) as openai, \
            FakeProviderServer("anthropic", AutoResponder(seed=5)) as anthropic:
        yield clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=openai.base_url,
                        ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=anthropic.base_url)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", [p for p in SAMPLED if blocks(p, "python")], ids=page_id)
def test_the_python_blocks_run_against_fake_providers(page: Path, fake_env: dict[str, str], tmp_path: Path) -> None:
    samples = blocks(page, "python")
    for number, block in enumerate(b for b in samples if not is_pytest_file(b)):
        path = tmp_path / f"block_{number}.py"
        path.write_text(block)
        done = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=fake_env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, f"{page_id(page)} block {number} failed:\n{block}\n{done.stderr}"
        assert "Traceback" not in done.stderr
    suite_files = [b for b in samples if is_pytest_file(b)]
    if suite_files:
        suite = tmp_path / "suite"
        suite.mkdir()
        for block in suite_files:
            (suite / block.splitlines()[0].removeprefix("# ").strip()).write_text(block)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)],
                              cwd=suite, env=fake_env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"{len(suite_files) - 1} passed" in done.stdout or "passed" in done.stdout


# --- shell commands ---------------------------------------------------------------------------------------

COMPOSE_TEST = "tests/test_compose.py::test_the_compose_command_line_serves_on_postgres_and_redis"
SERVER_INSTALL_TEST = "tests/test_install.py::test_install_lean_then_server_then_otel"

TESTED_ELSEWHERE = {
    # Long-running, or installing: run by the named tests.
    "scripts/serve": "tests/test_readme.py::test_readme_starts_with_the_two_commands",
    "scripts/test": "tests/test_readme.py::test_ci_runs_the_readme_test_command",
    "pip install '/path/to/toolwire[server]'": SERVER_INSTALL_TEST,
    "toolwire serve": SERVER_INSTALL_TEST,
    "pip install '/path/to/toolwire[postgres,redis]'": COMPOSE_TEST,
    "toolwire serve --db postgresql://toolwire:pw@db/toolwire --redis redis://cache:6379/0 --host 0.0.0.0 "
    "--port 8000 --tokens-file tokens.txt --drain-seconds 30": COMPOSE_TEST,
}
CURL_SAMPLE = "tests/test_docs.py::test_the_curl_sample_follows_a_run_of_toolwire_serve"
RUN_HERE = {
    "toolwire demo": "book_table failed",
    "toolwire run fake \"What's the weather in Paris and Lima?\"": "Here is the weather",
    "toolwire replay --protocol openai-chat openai.sse": "get_weather",
    "toolwire replay --protocol anthropic anthropic.sse --json": '"finish_reason"',
}


RUN_BY = re.compile(r"<!-- run by (tests/\S+\.py::\w+) -->\n+```bash\n(.*?)^```", re.S | re.M)
"""A page may name the test that runs a block's commands, in a comment just before it:
`<!-- run by tests/server/test_x.py::test_y -->` (for commands that start servers, say)."""


def documented_commands() -> dict[str, str]:
    """Every command of every ```bash block, with the page that gives it."""
    found: dict[str, str] = {}
    for page in SAMPLED:
        for block in blocks(page, "bash"):
            for command in bash_commands(block):
                found.setdefault(command, page_id(page))
    return found


def commands_run_by_named_tests() -> dict[str, str]:
    """Commands of the blocks whose page names the test that runs them (`<!-- run by ... -->`)."""
    return {command: node for page in SAMPLED for node, block in RUN_BY.findall(page.read_text())
            for command in bash_commands(block)}


def curl_block() -> str:
    (block,) = [b for b in blocks(DOCS / "guides" / "server.md", "bash") if "curl" in b]
    return block


def test_every_documented_command_runs_in_a_test() -> None:
    curl_commands = set(bash_commands(curl_block()))
    named = commands_run_by_named_tests()
    for command, page in documented_commands().items():
        if command in RUN_HERE or command in curl_commands or command in named:
            continue
        assert command in TESTED_ELSEWHERE, (f"{page} gives `{command}`, which no test runs: add it to RUN_HERE in "
                                             "tests/test_docs.py, or name the test that runs it in a "
                                             "`<!-- run by tests/...py::test_name -->` line before the block")
    for node in {*TESTED_ELSEWHERE.values(), *named.values()}:
        path, name = node.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), node
    # The replica command is the compose file's, options and all.
    from tests.test_compose import compose_command

    replica = next(c for c in TESTED_ELSEWHERE if c.startswith("toolwire serve --db"))
    assert replica.replace("tokens.txt", "/etc/toolwire/tokens.txt") in compose_command()


def write_replay_bodies(folder: Path) -> None:
    """`openai.sse` and `anthropic.sse`: a text and a call, as the fake servers' encoders write them."""
    from toolwire.testing.fake import FakeRequest, FakeText, FakeToolCall, FakeTurn, fake_protocol

    turn = FakeTurn(parts=[FakeText(text="Checking.", chunks=2),
                           FakeToolCall(name="get_weather", arguments={"city": "Paris"}, chunks=3)])
    for protocol, name in (("openai-chat", "openai.sse"), ("anthropic", "anthropic.sse")):
        request = FakeRequest(protocol=protocol, method="POST", path="/", body={"model": "m"}, model="m",
                              options={"include_usage": True, "sse": True})
        encoder = fake_protocol(protocol).encoder(request, random.Random(1))
        frames = [*encoder.content(turn), *encoder.end(turn, turn.finish_reason, encoder.usage(turn))]
        (folder / name).write_bytes(b"".join(frames))


@pytest.mark.timeout(300)
def test_the_commands_that_run_here(tmp_path: Path) -> None:
    write_replay_bodies(tmp_path)
    env = clean_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    documented = documented_commands()
    for command, expected in RUN_HERE.items():
        assert command in documented, f"`{command}` is no longer in the docs: drop it from RUN_HERE"
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, f"`{command}` failed:\n{done.stdout}\n{done.stderr}"
        assert expected in done.stdout, f"`{command}` printed:\n{done.stdout}"


@pytest.mark.timeout(300)
def test_the_curl_sample_follows_a_run_of_toolwire_serve(tmp_path: Path) -> None:
    """The server guide's curl lines, as written, against `toolwire serve` (only its token and address put in).
    The same server's `/openapi.json` is the HTTP API reference's document."""
    out = tmp_path / "serve.out"
    with out.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "toolwire", "serve", "--port", "0", "--fake-delay", "0"],
                                   cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT, env=clean_env())
    try:
        deadline = time.monotonic() + 60
        while not (opened := re.search(r"Open (http://\S+)/#token=(\S+)", out.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
        base, token = opened.groups()
        block = curl_block()
        shown_token = re.search(r"^T=(\S+);", block, re.M)
        assert shown_token is not None
        script = block.replace(shown_token.group(1), token).replace("http://127.0.0.1:8000", base)
        env = clean_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        events = [json.loads(line[6:]) for line in done.stdout.splitlines() if line.startswith("data: ")]
        assert events[0]["type"] == "run_started"
        assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed"
        assert {e["result"]["name"] for e in events if e["type"] == "tool_result"} >= {"get_weather"}
        served = subprocess.run(["curl", "-s", f"{base}/openapi.json"], capture_output=True, text=True, timeout=30,
                                check=True).stdout
        assert json.loads(served) == json.loads((DOCS / "reference" / "openapi.json").read_text())
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


# --- generated content ------------------------------------------------------------------------------------

def test_the_http_api_page_is_current() -> None:
    """docs/reference/ is what scripts/http_api_docs.py writes from the OpenAPI document: run it after a change."""
    generator = load_script("http_api_docs")
    document = generator.openapi()
    assert (DOCS / "reference" / "http-api.md").read_text() == generator.render(document), \
        "docs/reference/http-api.md is stale: run .venv/bin/python scripts/http_api_docs.py"
    assert (DOCS / "reference" / "openapi.json").read_text() == generator.serialised(document), \
        "docs/reference/openapi.json is stale: run .venv/bin/python scripts/http_api_docs.py"
    for path, item in document["paths"].items():
        for method in item:
            assert f"## {method.upper()} {path}\n" in generator.render(document)


def test_the_provider_table_matches_the_code() -> None:
    text = (DOCS / "guides" / "providers.md").read_text()
    start = text.index("<!-- capability-table:start -->") + len("<!-- capability-table:start -->")
    end = text.index("<!-- capability-table:end -->")
    assert text[start:end].strip() == capability_table()


def test_a_page_can_name_the_test_that_runs_a_block() -> None:
    page = "Start it:\n\n<!-- run by tests/test_compose.py::test_x -->\n```bash\ntoolwire serve --x 1   # note\n```\n"
    assert RUN_BY.findall(page) == [("tests/test_compose.py::test_x", "toolwire serve --x 1   # note\n")]


def test_bash_commands_are_split_as_a_shell_would_read_them() -> None:
    block = "pip install 'x'   # a comment\n# shown output\ntoolwire serve --db a \\\n    --port 1     # same\n"
    assert bash_commands(block) == ["pip install 'x'", "toolwire serve --db a --port 1"]
    assert shlex.split(bash_commands(block)[1])[-1] == "1"
