"""Setting up a command's agent: tools named `module:function` on the command line, the model, its key.

`--tool pkg.module:function` imports the module (the current directory is searched first, as
`python -m` does, so a `tools.py` next to you is found) and takes the attribute: a `Tool` (from
`@tool`) as it is, a plain function wrapped with `@tool`, or a list of them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from ..agent import Agent
from ..exceptions import UserError
from ..providers import get_provider
from ..tools import Tool

__all__ = ["add_model_arguments", "check_model", "load_tool", "load_tools", "make_agent"]


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The options `chat` and `run` share: tools, system prompt, endpoint and key."""
    parser.add_argument("--tool", "-t", action="append", default=[], metavar="MODULE:FUNCTION",
                        help="a tool to offer the model (repeatable), e.g. toolwire.demo_tools:get_weather")
    parser.add_argument("--system", "-s", default=None, metavar="TEXT", help="a system prompt")
    parser.add_argument("--base-url", default=None, help="send requests to this base URL instead of the provider's")
    parser.add_argument("--api-key", default=None, help="the API key (default: the provider's environment variable)")
    parser.add_argument("--max-steps", type=int, default=20, help="the most model requests one turn may make")
    add_timeout_argument(parser)


def add_timeout_argument(parser: argparse.ArgumentParser) -> None:
    """`--timeout SECONDS`: the deadline of each model request (`timeout=` of `get_model`)."""
    parser.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                        help="the most seconds one model request may take in all (default: 1800, with 300 "
                             "without a new event)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def load_tool(spec: str) -> list[Tool[..., Any]]:
    """The tool(s) that `module:attribute` names; raises `UserError` saying what is wrong with it."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UserError(f"The tool {spec!r} is not of the form module:function "
                        "(for example toolwire.demo_tools:get_weather).")
    if os.getcwd() not in sys.path and "" not in sys.path:
        # A console script does not search the working directory; `--tool mytools:f` should find ./mytools.py.
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise UserError(f"The module {module_name!r} of the tool {spec!r} was not found; check the name, "
                            "or run toolwire from the directory that holds it.") from exc
        raise UserError(f"Importing {module_name!r} for the tool {spec!r} failed: {exc}.") from exc
    except Exception as exc:
        raise UserError(f"Importing {module_name!r} for the tool {spec!r} failed "
                        f"({type(exc).__name__}: {exc}).") from exc
    value: Any = module
    for name in attribute.split("."):
        try:
            value = getattr(value, name)
        except AttributeError:
            raise UserError(f"The module {module_name!r} has no {attribute!r} (from the tool {spec!r}).") from None
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    tools: list[Tool[..., Any]] = []
    for item in items:
        if isinstance(item, Tool):
            tools.append(item)
        elif callable(item):
            tools.append(Tool(item))
        else:
            raise UserError(f"{spec!r} is {type(item).__name__}, not a function or a Tool; "
                            "name a function (or a list of them).")
    return tools


def load_tools(specs: Iterable[str]) -> list[Tool[..., Any]]:
    """Every tool named on the command line, in order."""
    return [t for spec in specs for t in load_tool(spec)]


def check_model(spec: str, *, api_key: str | None) -> None:
    """Raise `UserError` for a model name without a provider, or a provider whose API key is not set.

    `get_model` would say the same for a Python caller; this says it for a command line user: which
    environment variable to set, or `--api-key`.
    """
    provider_name, sep, model_name = spec.partition(":")
    if not sep or not model_name:
        raise UserError(f"The model {spec!r} has no provider; name it provider:model, e.g. openai:gpt-4.1-mini "
                        "(`toolwire providers` lists the providers).")
    provider = get_provider(provider_name)
    if api_key is None and provider.api_key_required and not any(os.environ.get(v) for v in provider.api_key_env):
        variables = " or ".join(provider.api_key_env)
        raise UserError(f"No API key for {provider.name!r}: set {variables} in the environment, or pass --api-key.")


def make_agent(args: argparse.Namespace, *, tools: Sequence[Tool[..., Any]] | None = None) -> Agent:
    """The agent a `chat` or `run` command line describes."""
    loaded = load_tools(args.tool) if tools is None else list(tools)
    check_model(args.model, api_key=args.api_key)
    return Agent(args.model, tools=loaded, system=args.system, max_steps=args.max_steps, api_key=args.api_key,
                 base_url=args.base_url, timeout=args.timeout)
