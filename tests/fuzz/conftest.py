"""Prints how many inputs the fuzz suite tried (the long run's count goes into README)."""

from __future__ import annotations

from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests.fuzz.test_fuzz import TRIED

    if TRIED:
        total = sum(TRIED.values())
        lines = ", ".join(f"{name}: {count}" for name, count in sorted(TRIED.items()))
        terminalreporter.write_line(f"fuzz inputs tried: {total} ({lines})")
