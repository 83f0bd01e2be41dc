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
    assert commands == ["scripts/demo", "scripts/test"]
    for command in commands:
        assert (ROOT / command).stat().st_mode & 0o111, f"{command} is not executable"


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test" in ci


def test_capability_table_in_readme_matches_the_code() -> None:
    text = readme()
    start = text.index("<!-- capability-table:start -->") + len("<!-- capability-table:start -->")
    end = text.index("<!-- capability-table:end -->")
    assert text[start:end].strip() == capability_table()
