"""Tools the end-to-end web tests add to the server's (`--tools tests.web.e2e_tools:TOOLS`)."""

from __future__ import annotations

from typing import Any

from toolwire import tool


@tool
async def explode(message: str) -> dict[str, Any]:
    """Fail with this message.

    Args:
        message: What the failure says.
    """
    raise RuntimeError(message)


TOOLS = [explode]
