"""The two tools every server of the side-by-side benchmark runs (the Node server has the same two in JS).

Plain functions with type hints and docstrings, which `toolwire serve --tools`, pydantic-ai's `Agent` and the
relay all take as they are. The model calls both at once, each with a text of stamps (see `bench.load.provider`).
"""

from __future__ import annotations

from toolwire import Tool

TOOLS_MODULE = "bench.side_by_side.tools:TOOLWIRE_TOOLS"


def word_count(text: str) -> int:
    """The number of words in a text."""
    return len(text.split())


def char_count(text: str) -> int:
    """The number of characters in a text."""
    return len(text)


TOOLS = [word_count, char_count]

# For toolwire, the same two declared idempotent (they are: counting twice changes nothing), as a user would
# declare them: a tool that is not idempotent waits for its call to be committed before it starts, so that a
# server continuing the run after a crash never runs it twice (docs/guides/durable-runs.md).
TOOLWIRE_TOOLS = [Tool(function, idempotent=True) for function in TOOLS]
