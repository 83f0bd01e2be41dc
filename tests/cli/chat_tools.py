"""Tools the CLI tests load with `--tool tests.cli.chat_tools:NAME` (imported by the toolwire process)."""

from __future__ import annotations

import anyio

from toolwire import tool


@tool
async def get_weather(city: str) -> dict[str, object]:
    """The weather in a city.

    Args:
        city: The city name.
    """
    await anyio.sleep(1.0)  # long enough for the terminal test to see the spinner while it runs
    return {"city": city, "sky": "sunny", "temperature_c": 24}


@tool
def local_time(city: str) -> str:
    """The local time in a city."""
    return f"14:05 in {city}"


@tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


def plain_function(x: int) -> int:
    """Doubles a number (a plain function, wrapped with @tool by the loader)."""
    return 2 * x


not_a_tool = 42


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Deletes a file (pretends to): needs a person's approval first."""
    return f"deleted {path}"
