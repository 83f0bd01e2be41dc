"""README stays short and true: the two commands come first, CI runs the test command, its links lead into the
docs site, and its example is short. (Its Python block runs with the docs' samples, in tests/test_docs.py.)"""

from __future__ import annotations

import re
from pathlib import Path

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


def test_readme_is_a_short_page_with_one_short_example() -> None:
    text = readme()
    assert len(text.splitlines()) <= 80
    (example,) = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(example.splitlines()) <= 22
    compile(example, "<README example>", "exec")


def test_readme_links_lead_to_pages_that_exist() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme())
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        assert (ROOT / link).exists(), link
    for section in ("quickstart", "concepts/events", "guides/server", "reference/http-api", "reference/python",
                    "benchmarks"):
        assert f"docs/{section}.md" in links
