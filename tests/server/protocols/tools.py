"""Tools the protocol tests add to the server tests' own (`--tools tests.server.protocols.tools:TOOLS`)."""

from __future__ import annotations

from typing import Any

from toolwire import tool


@tool
async def explode(why: str) -> dict[str, Any]:
    """Fail, saying why.

    Args:
        why: What the error message says.
    """
    raise RuntimeError(f"exploded: {why}")


TOOLS = [explode]
