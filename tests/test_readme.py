"""README stays true: the two commands come first, CI runs the test command, the provider table is current."""

from __future__ import annotations

import re
from pathlib import Path

from toolwire.providers import capability_table

ROOT = Path(__file__).resolve().parents[1]


def readme() -> str:
    return (ROOT / "README.md").read_text()


def test_readme_starts_with_the_two_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", readme(), re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["scripts/serve", "scripts/test"]
    for command in [*commands, "scripts/demo"]:
        assert (ROOT / command).stat().st_mode & 0o111, f"{command} is not executable"
    # The main job is the chat server on its defaults; the terminal demo stays one command away.
    assert "toolwire serve" in (ROOT / "scripts" / "serve").read_text()
    assert "toolwire demo" in (ROOT / "scripts" / "demo").read_text()


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test" in ci


def test_capability_table_in_readme_matches_the_code() -> None:
    text = readme()
    start = text.index("<!-- capability-table:start -->") + len("<!-- capability-table:start -->")
    end = text.index("<!-- capability-table:end -->")
    assert text[start:end].strip() == capability_table()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", readme(), re.S)


def test_item15_every_python_block_is_a_whole_program() -> None:
    """README item 15: no top-level `await` or fragment: each block compiles as a script as written."""
    blocks = python_blocks()
    assert len(blocks) >= 7
    for block in blocks:
        compile(block, "<README block>", "exec")  # a top-level await would be a SyntaxError here


def test_item15_the_readme_blocks_run_against_fake_providers(tmp_path: Path) -> None:
    """README item 15: every Python block runs as written, the providers being fake servers on loopback."""
    import subprocess
    import sys

    from tests.cli.support import clean_env
    from toolwire.testing import AutoResponder, FakeProviderServer

    with FakeProviderServer("openai-chat", AutoResponder(seed=5)) as openai, \
            FakeProviderServer("anthropic", AutoResponder(seed=5)) as anthropic:
        env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=openai.base_url,
                        ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=anthropic.base_url)
        scripts = [b for b in python_blocks() if not b.startswith(("# conftest.py", "# test_"))]
        for number, block in enumerate(scripts):
            path = tmp_path / f"block_{number}.py"
            path.write_text(block)
            done = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0, f"README block {number} failed:\n{block}\n{done.stderr}"
            assert "Traceback" not in done.stderr
        suite = tmp_path / "suite"
        suite.mkdir()
        for block in python_blocks():
            first = block.splitlines()[0]
            if first.startswith(("# conftest.py", "# test_")):
                (suite / first.removeprefix("# ").strip()).write_text(block)
        assert sorted(p.name for p in suite.iterdir()) == ["conftest.py", "test_weather.py"]
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)],
                              cwd=suite, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 passed" in done.stdout
