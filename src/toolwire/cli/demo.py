"""`toolwire demo`: a streamed, multi-tool conversation that runs anywhere, with no key and no network.

It starts a fake provider (`FakeProviderServer` with the `AutoResponder`) on a loopback port and runs
the demo's tools through an ordinary `Agent`, over the same HTTP and wire-protocol code a real provider
gets: the fake answers the prompt by calling every tool at once, toolwire starts each tool the moment
its call has streamed in, the slow ones finish last, one fails, and the fake's follow-up answer sums
up the results. `--protocol` picks the wire format the fake speaks.

With `--provider NAME` (or `NAME:MODEL`) the same conversation goes to that real provider instead. A
real provider is only ever called when asked for; when a key is in the environment the demo just says
which `--provider` would use it, without a question, so it never waits for input.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import httpx
from rich.console import Console
from rich.text import Text

from .._fresh_loop import run_in_new_loop
from ..agent import Agent
from ..demo_tools import DEMO_PROMPT, DEMO_SYSTEM, DEMO_TOOLS
from ..exceptions import ToolwireError, UserError
from ..models import get_model
from ..providers import get_provider, provider_names
from ..testing import AutoResponder, FakeProviderServer
from ..testing.fake import FAKE_PROTOCOLS
from ._render import RunRenderer, error_line, make_console, stream_turn
from ._tools import check_model

DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-4.1-mini",
    "openai-responses": "gpt-4.1-mini",
    "anthropic": "claude-haiku-4-5",
    "gemini": "gemini-2.5-flash",
    "mistral": "mistral-small-latest",
    "groq": "llama-3.3-70b-versatile",
    "cohere": "command-a-03-2025",
    "deepseek": "deepseek-chat",
    "xai": "grok-3-mini",
    "openrouter": "openai/gpt-4.1-mini",
    "together": "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    "fireworks": "accounts/fireworks/models/llama-v3p3-70b-instruct",
}
"""The model `--provider NAME` uses when no model is named (a small, cheap one that calls tools well)."""

_DEMO_KEY = "demo"
_TOOL_NOTES = {"get_weather": "0.8 s", "find_restaurants": "0.5 s", "convert_currency": "0.3 s",
               "book_table": "fails"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="run a streamed multi-tool conversation offline (no API key needed)",
                       description="Run a streamed conversation with parallel tool calls against a fake provider "
                                   "on this machine, or against a real one with --provider.")
    p.add_argument("--protocol", "-p", default="openai-chat", choices=sorted(FAKE_PROTOCOLS),
                   help="the wire protocol the fake provider speaks (default: openai-chat)")
    p.add_argument("--provider", default=None, metavar="NAME[:MODEL]",
                   help="use this real provider instead of the fake one (needs its API key), e.g. anthropic")
    p.add_argument("--prompt", default=DEMO_PROMPT, help="what to ask")
    p.add_argument("--delay", type=float, default=0.008,
                   help="seconds between the fake provider's stream frames (default: 0.008)")
    p.add_argument("--seed", type=int, default=7, help="the fake provider's seed (ids and arguments)")
    p.add_argument("--api-key", default=None, help="with --provider: the API key (default: its environment variable)")
    p.set_defaults(func=run)


def real_model_spec(provider: str) -> str:
    """`NAME` or `NAME:MODEL` → `provider:model`, with the demo's default model for the provider."""
    name, sep, model = provider.partition(":")
    if sep and model:
        return f"{get_provider(name).name}:{model}"
    canonical = get_provider(name).name
    default = DEFAULT_MODELS.get(canonical)
    if default is None:
        raise UserError(f"The demo has no default model for {canonical!r}; name one: --provider {canonical}:MODEL.")
    return f"{canonical}:{default}"


def available_providers() -> list[tuple[str, str]]:
    """(provider, variable) for each provider the demo could use with a key found in the environment."""
    found: list[tuple[str, str]] = []
    seen_variables: set[str] = set()
    for name in provider_names():
        provider = get_provider(name)
        if name not in DEFAULT_MODELS or not provider.api_key_required:
            continue
        variable = next((v for v in provider.api_key_env if os.environ.get(v)), None)
        if variable is not None and variable not in seen_variables:
            seen_variables.add(variable)
            found.append((name, variable))
    return found


def _note(console: Console, text: str) -> None:
    console.print(Text(text, style="dim"), soft_wrap=not console.is_terminal)


def _show_prompt(console: Console, prompt: str) -> None:
    line = Text("you> ", style="bold cyan")
    line.append(prompt)
    console.print(line, soft_wrap=not console.is_terminal)


async def _offline(args: argparse.Namespace, console: Console) -> None:
    responder = AutoResponder(seed=args.seed, delay=args.delay)
    # trust_env=False: the fake is on loopback, so a proxy configured in the environment must not apply.
    async with FakeProviderServer(args.protocol, responder, seed=args.seed, api_key=_DEMO_KEY) as server, \
            httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(60.0, connect=5.0)) as client:
        model = get_model(f"{server.provider}:demo-model", base_url=server.base_url, api_key=_DEMO_KEY,
                          http_client=client)
        _note(console, f"toolwire demo · offline: a fake {server.protocol} provider on {server.url} "
                       f"(real HTTP, {server.provider}'s wire format, no API key needed)")
        tools = ", ".join(f"{t.name} ({_TOOL_NOTES.get(t.name, 'instant')})" for t in DEMO_TOOLS)
        _note(console, f"tools: {tools}")
        _show_prompt(console, args.prompt)
        agent = Agent(model, tools=DEMO_TOOLS, system=DEMO_SYSTEM)
        await stream_turn(agent, args.prompt, RunRenderer(console, waiting=f"waiting for {model.name}"))
    _note(console, "The fake provider chose its tool arguments from the tools' JSON schemas and summed up the "
                   "results; a real model answers in its own words. Try --protocol anthropic, or "
                   "`toolwire chat MODEL --tool toolwire.demo_tools:get_weather`.")
    keys = available_providers()
    if keys:
        offers = "; ".join(f"{variable} is set: --provider {name}" for name, variable in keys)
        _note(console, f"To run this conversation against a real provider: {offers}.")


async def _real(args: argparse.Namespace, console: Console) -> None:
    spec = real_model_spec(args.provider)
    check_model(spec, api_key=args.api_key)
    async with Agent(spec, tools=DEMO_TOOLS, system=DEMO_SYSTEM, api_key=args.api_key) as agent:
        _note(console, f"toolwire demo · {spec} (a real provider: this request uses your API key)")
        _show_prompt(console, args.prompt)
        await stream_turn(agent, args.prompt, RunRenderer(console, waiting=f"waiting for {spec}"))


def run(args: argparse.Namespace) -> int:
    console = make_console()
    try:
        run_in_new_loop(_real if args.provider else _offline, args, console)
    except (ToolwireError, httpx.HTTPError, OSError) as exc:
        sys.stdout.flush()
        sys.stderr.write(error_line(exc) + "\n")
        return 1
    return 0
