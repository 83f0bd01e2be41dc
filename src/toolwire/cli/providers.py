"""`toolwire providers [--markdown]`: the providers toolwire knows and what each can do.

The rich table and the Markdown are both read from `toolwire.providers.capability_table()`, the
text README embeds, so the three can never disagree.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.table import Table
from rich.text import Text

from ..providers import capability_table
from ._render import make_console

_STYLES = {"yes": "green", "no": "red"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("providers", help="list the providers and their capabilities",
                       description="List the providers toolwire knows, their wire protocols and capabilities.")
    p.add_argument("--markdown", action="store_true", help="print the Markdown table README embeds")
    p.set_defaults(func=run)


def table_rows(markdown: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a Markdown table (cells stripped of their code backticks)."""
    lines = [line.strip() for line in markdown.splitlines() if line.strip().startswith("|")]

    def cells(line: str) -> list[str]:
        return [cell.strip().strip("`") for cell in line.strip("|").split("|")]

    header, *rest = lines
    return cells(header), [cells(line) for line in rest if not set(line) <= set("|-: ")]


def run(args: argparse.Namespace) -> int:
    markdown = capability_table()
    if args.markdown:
        sys.stdout.write(markdown + "\n")
        return 0
    header, rows = table_rows(markdown)
    table = Table()
    for position, name in enumerate(header):
        table.add_column(name, style="bold" if position == 0 else None, overflow="fold")
    for row in rows:
        table.add_row(*(Text(c, style=_STYLES.get(c, "")) for c in row))
    console = make_console()
    if not console.is_terminal:
        console.width = 250  # a pipe has no width: let the table take its natural one instead of 80 columns
    console.print("The providers toolwire knows (a provider is configuration of a wire protocol):", markup=False)
    console.print(table)
    console.print("Use a provider as provider:model, e.g. `toolwire chat openai:gpt-4.1-mini`.", markup=False)
    return 0
