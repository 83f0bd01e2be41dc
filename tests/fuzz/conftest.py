"""Prints how many inputs the fuzz suite tried (the long run's count goes into docs/guides/errors.md).

With `TOOLWIRE_FUZZ_REPORT=FILE` the counts so far are also written to FILE after every test, so a
long run shows its progress.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _report_progress() -> Iterator[None]:
    yield
    target = os.environ.get("TOOLWIRE_FUZZ_REPORT")
    if target:
        from tests.fuzz.test_fuzz import TRIED

        lines = [f"{name}\t{count}" for name, count in sorted(TRIED.items())]
        Path(target).write_text("\n".join([f"total\t{sum(TRIED.values())}", *lines]) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests.fuzz.test_fuzz import TRIED

    if TRIED:
        total = sum(TRIED.values())
        lines = ", ".join(f"{name}: {count}" for name, count in sorted(TRIED.items()))
        terminalreporter.write_line(f"fuzz inputs tried: {total} ({lines})")
