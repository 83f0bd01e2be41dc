"""Tool definitions as the wire layer sees them: a name, a description and a JSON schema.

The agent's `Tool` (a function plus its schema, built by `@tool`) produces a `ToolDefinition`; the wire
adapters only ever see definitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolDefinition"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """What a provider is told about a tool."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None
