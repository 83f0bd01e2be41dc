"""The two tools every server of the side-by-side benchmark runs (the Node server has the same two in JS).

Plain functions with type hints and docstrings, which `toolwire serve --tools`, pydantic-ai's `Agent` and the
relay all take as they are. The model calls both at once, each with a text of stamps (see `bench.load.provider`).
"""

from __future__ import annotations

TOOLS_MODULE = "bench.side_by_side.tools:TOOLS"


def word_count(text: str) -> int:
    """The number of words in a text."""
    return len(text.split())


def char_count(text: str) -> int:
    """The number of characters in a text."""
    return len(text)


TOOLS = [word_count, char_count]
