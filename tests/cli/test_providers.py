"""`toolwire providers`: the capability table as Markdown (exactly the providers guide's, docs/guides/providers.md) and as a terminal table."""

from __future__ import annotations

import pytest

from toolwire.cli import main
from toolwire.cli.providers import table_rows
from toolwire.providers import capability_table, provider_names

from .support import ANSI


def test_markdown_is_exactly_the_capability_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["providers", "--markdown"]) == 0
    assert capsys.readouterr().out == capability_table() + "\n"


def test_table_lists_every_provider_with_its_key_variable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["providers"]) == 0
    out = capsys.readouterr().out
    assert ANSI.search(out) is None
    for name in provider_names():
        assert name in out
    assert "ANTHROPIC_API_KEY" in out and "NDJSON" in out


def test_table_rows_read_the_markdown_cell_by_cell() -> None:
    header, rows = table_rows(capability_table())
    assert header[:3] == ["provider", "wire protocol", "streaming"]
    assert [row[0] for row in rows] == provider_names()
    assert all(len(row) == len(header) for row in rows)
