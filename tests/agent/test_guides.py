"""The guides of the agent API (docs/guides/) stay true: each ```python block runs as a whole program, with
no network, exactly as written (a sample that builds an agent for a real provider gets a placeholder key and
a loopback URL nothing listens on: the samples replace that model before any request)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.support import clean_env

ROOT = Path(__file__).resolve().parents[2]
GUIDES = ["testing-with-override", "retries", "instructions", "run-context", "usage-budgets", "mcp-http"]


def blocks(name: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "guides" / f"{name}.md").read_text(), re.S)


@pytest.mark.parametrize("name", GUIDES)
def test_every_python_block_of_the_guide_runs(name: str, tmp_path: Path) -> None:
    found = blocks(name)
    assert found, f"docs/guides/{name}.md has no python block"
    for number, block in enumerate(found):
        path = tmp_path / f"{name}_{number}.py"
        path.write_text(block)
        done = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=clean_env(OPENAI_API_KEY="sk-placeholder",
                              OPENAI_BASE_URL="http://127.0.0.1:9/v1"), capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, f"block {number} of docs/guides/{name}.md failed:\n{block}\n{done.stderr}"
        assert "Traceback" not in done.stderr
