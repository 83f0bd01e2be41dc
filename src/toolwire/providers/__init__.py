"""Providers: hosts configured onto a wire protocol.

A provider is configuration only: its wire protocol, default base URL, where its API key and base URL
come from in the environment (each provider's own conventions), protocol quirks (`options`) and what it
can do (`capabilities`). Adding an OpenAI-compatible host is one entry in `_hosts.py`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import UserError

__all__ = ["Capabilities", "Provider", "capability_table", "get_provider", "provider_names"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What a provider supports, as toolwire uses it (rendered in docs/guides/providers.md by `capability_table`)."""

    streaming: bool = True
    tools: bool = True
    parallel_calls: bool = True
    native_ids: bool = True
    """The provider gives each tool call its own id (otherwise toolwire generates them)."""
    thinking: bool = False
    structured_output: str = "json_schema"
    """How typed output is obtained: `json_schema`, `response_schema`, `format`, `json_mode` or `tool`."""
    streaming_format: str = "SSE"


@dataclass(frozen=True, slots=True, kw_only=True)
class Provider:
    name: str
    protocol: str
    base_url: str | None
    api_key_env: tuple[str, ...] = ()
    base_url_env: tuple[str, ...] = ()
    api_key_required: bool = True
    headers: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    capabilities: Capabilities = field(default_factory=Capabilities)
    description: str = ""

    def resolve_api_key(self, explicit: str | None = None) -> str | None:
        if explicit:
            return explicit
        for name in self.api_key_env:
            value = os.environ.get(name)
            if value:
                return value
        if self.api_key_required:
            where = " or ".join(self.api_key_env) or "api_key="
            raise UserError(
                f"No API key for {self.name!r}: set the environment variable {where}, "
                "or pass api_key=... to get_model() / Agent()."
            )
        return None

    def resolve_base_url(self, explicit: str | None = None) -> str:
        url = explicit
        if not url:
            for name in self.base_url_env:
                value = os.environ.get(name)
                if value:
                    url = value
                    break
        url = url or self.base_url
        if not url:
            where = " or ".join(self.base_url_env) or "base_url="
            raise UserError(
                f"The provider {self.name!r} has no default address: pass base_url=... or set {where}."
            )
        if self.options.get("base_url_scheme_default") and "://" not in url:
            url = "http://" + url  # OLLAMA_HOST is often given as host:port
        return url.rstrip("/")


def get_provider(name: str) -> Provider:
    from ._hosts import ALIASES, PROVIDERS

    provider = PROVIDERS.get(ALIASES.get(name, name))
    if provider is None:
        known = ", ".join(sorted(PROVIDERS))
        raise UserError(f"Unknown provider {name!r}. Known providers: {known}. Models are named 'provider:model'.")
    return provider


def provider_names() -> list[str]:
    from ._hosts import PROVIDERS

    return list(PROVIDERS)


def capability_table() -> str:
    """The providers and their capabilities as a Markdown table (docs/guides/providers.md shows exactly this)."""
    from ._hosts import PROVIDERS

    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    rows = [
        "| provider | wire protocol | streaming | tools | parallel calls | native ids | thinking "
        "| structured output | streaming format | API key variable |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in PROVIDERS.values():
        c = p.capabilities
        key = " / ".join(p.api_key_env) if p.api_key_env else "(none)"
        if not p.api_key_required and p.api_key_env:
            key += " (optional)"
        rows.append(
            f"| `{p.name}` | {p.protocol} | {yes(c.streaming)} | {yes(c.tools)} | {yes(c.parallel_calls)} "
            f"| {yes(c.native_ids)} | {yes(c.thinking)} | {c.structured_output} | {c.streaming_format} | {key} |"
        )
    return "\n".join(rows)
