"""Fake provider protocols: one module per wire protocol, each exposing its `FakeProtocol` as `Protocol`.

The shared pieces live beside them: `_turns` (what a response says: turns, scripts, matchers),
`_base` (request decoding and response encoding interfaces), `_schema_values` and `_auto` (the
automatic responder that calls offered tools with schema-valid arguments).
"""

from __future__ import annotations

import importlib

from ...exceptions import UserError
from ._base import FakeProtocol, FakeRequest, estimate_tokens
from ._files import file_size
from ._turns import (
    FakeHTTPError,
    FakeMatch,
    FakeRecording,
    FakeReply,
    FakeScript,
    FakeStreamError,
    FakeText,
    FakeThinking,
    FakeToolCall,
    FakeTurn,
    FakeUsage,
    Responder,
    load_script,
)

__all__ = [
    "FAKE_PROTOCOLS",
    "FakeHTTPError",
    "FakeMatch",
    "FakeProtocol",
    "FakeRecording",
    "FakeReply",
    "FakeRequest",
    "FakeScript",
    "FakeStreamError",
    "FakeText",
    "FakeThinking",
    "FakeToolCall",
    "FakeTurn",
    "FakeUsage",
    "Responder",
    "estimate_tokens",
    "fake_protocol",
    "file_size",
    "load_script",
]

FAKE_PROTOCOLS: dict[str, str] = {
    "openai-chat": "openai_chat",
    "openai-responses": "openai_responses",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "ollama": "ollama",
    "mistral": "mistral",
    "cohere": "cohere",
}
"""Protocol name (as in `toolwire.wire.PROTOCOLS`) → module in this package."""


def fake_protocol(name: str) -> FakeProtocol:
    """A fresh server-side implementation of the named wire protocol."""
    module_name = FAKE_PROTOCOLS.get(name)
    if module_name is None:
        known = ", ".join(sorted(FAKE_PROTOCOLS))
        raise UserError(f"There is no fake server for the protocol {name!r}. Known protocols: {known}.")
    module = importlib.import_module(f"{__name__}.{module_name}")
    protocol: FakeProtocol = module.Protocol()
    return protocol
