"""Wire protocols: one module per protocol, each exposing its `WireProtocol` subclass as `Protocol`.

Modules are imported on first use, so a program that talks to one provider loads one parser.
"""

from __future__ import annotations

import importlib

from ..exceptions import UserError
from ._base import JSONLinesParser, SSEParser, StreamParser, WireProtocol

__all__ = ["PROTOCOLS", "JSONLinesParser", "SSEParser", "StreamParser", "WireProtocol", "protocol_class"]

PROTOCOLS: dict[str, str] = {
    "openai-chat": "openai_chat",
    "openai-responses": "openai_responses",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "ollama": "ollama",
    "mistral": "mistral",
    "cohere": "cohere",
}
"""Protocol name → module in this package."""


def protocol_class(name: str) -> type[WireProtocol]:
    module_name = PROTOCOLS.get(name)
    if module_name is None:
        known = ", ".join(sorted(PROTOCOLS))
        raise UserError(f"Unknown wire protocol {name!r}. Known protocols: {known}.")
    try:
        module = importlib.import_module(f"{__name__}.{module_name}")
    except ModuleNotFoundError as exc:
        raise UserError(f"The {name!r} wire protocol is not available in this version of toolwire.") from exc
    cls: type[WireProtocol] = module.Protocol
    return cls
