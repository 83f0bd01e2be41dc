"""Tools for the server tests, loaded by the server process with `--tools tests.server.gated_tools:TOOLS`.

They reach back to the test's gate server (`TOOLWIRE_GATE_URL`) over loopback HTTP: `gated` blocks until
the test releases its label, and every call reports that it started, so the test knows exactly where a
run stands in another process.
"""

from __future__ import annotations

import base64
import os
from typing import Any

import anyio
import httpx

from toolwire import ToolReturn, tool
from toolwire.messages import FilePart

_GATE = os.environ.get("TOOLWIRE_GATE_URL", "http://127.0.0.1:9")


async def _gate(path: str, payload: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(trust_env=False, timeout=None) as client:
        response = await client.post(f"{_GATE}{path}", json=payload)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data


@tool
async def gated(label: str) -> dict[str, Any]:
    """Wait until the test releases this label, then return.

    Args:
        label: The gate to wait at.
    """
    return await _gate(f"/tools/{label}", {"label": label})


@tool
async def sleepy(seconds: float, label: str) -> dict[str, Any]:
    """Sleep, then say so.

    Args:
        seconds: How long to sleep.
        label: A name for this call.
    """
    await _gate("/events", {"event": f"start:{label}"})
    await anyio.sleep(seconds)
    return {"label": label, "slept": seconds}


@tool
async def big(size: int, text: str = "") -> dict[str, Any]:
    """A large result, with `text` inside it.

    Args:
        size: How many characters of filler.
        text: Text to put in front of the filler.
    """
    return {"text": text, "filler": "x" * size}


@tool(requires_approval=True)
async def transfer(to: str, amount: int) -> dict[str, Any]:
    """Send money (needs a person's approval).

    Args:
        to: Who receives it.
        amount: How much.
    """
    await _gate("/events", {"event": f"transfer:{to}:{amount}"})
    return {"sent": amount, "to": to}


async def paint(color: str) -> ToolReturn:
    """A small PNG of one color, returned as a file with the result.

    Args:
        color: A color name Pillow knows.
    """
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(out, "PNG")
    return ToolReturn({"drawn": color}, files=[FilePart(media_type="image/png", name=f"{color}.png",
                                                        data=base64.b64encode(out.getvalue()).decode())])


TOOLS = [gated, sleepy, big, transfer, paint]
