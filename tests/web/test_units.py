"""The page's pure modules (SSE parser, event reducer, Markdown) under Node's own test runner."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .conftest import ROOT, require

UNIT_TESTS = sorted((Path(__file__).parent / "js").glob("*.test.mjs"))


def test_node_unit_tests_pass() -> None:
    node = shutil.which("node")
    require("Node.js", node is not None, "run scripts/test-browser (as root) to install Debian's nodejs.")
    assert node is not None
    assert len(UNIT_TESTS) >= 3
    # Files are named one by one: Node 18 (Debian 12) and Node 22 read a directory argument differently.
    done = subprocess.run([node, "--test", *map(str, UNIT_TESTS)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    summary = "\n".join(line for line in done.stdout.splitlines() if line.startswith(("# tests", "# pass", "# fail")))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "# fail 0" in summary and "# pass 0" not in summary, summary
