"""`toolwire providers [--markdown]`: the providers toolwire knows and what each can do.

The rich table and the Markdown are both read from `toolwire.providers.capability_table()`, the
text the providers guide embeds, so the three can never disagree. A terminal too narrow for the whole table gets one
short block per provider instead, so no name is ever split mid-word.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..providers import capability_table
from ._render import make_console

_STYLES = {"yes": "green", "no": "red"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("providers", help="list the providers and their capabilities",
                       description="List the providers toolwire knows, their wire protocols and capabilities.")
    p.add_argument("--markdown", action="store_true", help="print the Markdown table the docs embed")
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
        table.add_column(name, style="bold" if position == 0 else None, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(c, style=_STYLES.get(c, "")) for c in row))
    console = make_console()
    if not console.is_terminal:
        console.width = 250  # a pipe has no width: let the table take its natural one instead of 80 columns
    console.print("The providers toolwire knows (a provider is configuration of a wire protocol):", markup=False)
    natural = Measurement.get(console, console.options.update(max_width=10_000), table).maximum
    if natural <= console.width:
        console.print(table)
    else:
        for row in rows:
            console.print(_block(header, row), soft_wrap=False)
    console.print("Use a provider as provider:model, e.g. `toolwire chat openai:gpt-4.1-mini`.", markup=False)
    return 0


def _block(header: list[str], row: list[str]) -> Text:
    """One provider on one line (wrapped between words): name, protocol, key, what it lacks."""
    values = dict(zip(header, row, strict=False))
    line = Text(row[0], style="bold")
    details = [values.get("wire protocol", ""), values.get("API key variable", ""),
               f"structured output: {values.get('structured output', '')}",
               f"{values.get('streaming format', '')} stream"]
    lacks = [key for key in header[2:] if values.get(key) == "no"]
    details.append("no " + ", no ".join(lacks) if lacks else "all capabilities")
    line.append("  " + " · ".join(details), style="")
    return line
