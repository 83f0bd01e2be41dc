"""Tools for the durable-run tests (`--tools tests.server.durable_tools:TOOLS`, next to `gated_tools`).

Each call reports `exec:<tool>:<label>` to the gate before it blocks on its label: the gate's event list is the
journal of executions that proves which calls ran, and how many times, in whatever process.
"""

from __future__ import annotations

from typing import Any

from tests.server.gated_tools import _gate
from toolwire import tool


@tool
async def charge(label: str) -> dict[str, Any]:
    """Charge a card (not idempotent: a second run charges twice).

    Args:
        label: The gate to wait at.
    """
    await _gate("/events", {"event": f"exec:charge:{label}"})
    return await _gate(f"/tools/{label}", {"label": label})


@tool(idempotent=True)
async def lookup(label: str) -> dict[str, Any]:
    """Read a record (idempotent: running it again does no harm).

    Args:
        label: The gate to wait at.
    """
    await _gate("/events", {"event": f"exec:lookup:{label}"})
    return await _gate(f"/tools/{label}", {"label": label})


TOOLS = [charge, lookup]
