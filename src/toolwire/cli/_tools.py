"""Setting up a command's agent: tools named `module:function` on the command line, the model, its key.

`--tool pkg.module:function` imports the module (the current directory is searched first, as
`python -m` does, so a `tools.py` next to you is found) and takes the attribute: a `Tool` (from
`@tool`) as it is, a plain function wrapped with `@tool`, or a list of them. `--tool ./path/file.py:f`
loads a Python file by its path instead.

`--mcp "command args..."` starts an MCP server over stdio and `--mcp-url URL` connects to one over
Streamable HTTP (both repeatable, `mcp` extra); their tools are offered next to the `--tool`s. A server
started from the command line gets the caller's environment, as if they had run it themselves.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import httpx

from .._install import install_hint
from ..agent import Agent
from ..exceptions import UserError
from ..providers import get_provider
from ..tools import Tool
from ..toolsets import Toolset

__all__ = ["add_mcp_arguments", "add_model_arguments", "check_model", "command_agent", "load_tool", "load_tools",
           "make_agent", "mcp_toolsets"]


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The options `chat` and `run` share: tools, system prompt, endpoint and key."""
    parser.add_argument("--tool", "-t", action="append", default=[], metavar="MODULE:FUNCTION",
                        help="a tool to offer the model (repeatable), e.g. toolwire.demo_tools:get_weather")
    parser.add_argument("--system", "-s", default=None, metavar="TEXT", help="a system prompt")
    parser.add_argument("--base-url", default=None, help="send requests to this base URL instead of the provider's")
    parser.add_argument("--api-key", default=None, help="the API key (default: the provider's environment variable)")
    parser.add_argument("--max-steps", type=int, default=20, help="the most model requests one turn may make")
    add_mcp_arguments(parser)
    add_timeout_argument(parser)


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    """`--mcp` and `--mcp-url`, shared by `chat`, `run` and `serve`."""
    parser.add_argument("--mcp", action="append", default=[], metavar='"COMMAND ARGS..."',
                        help="an MCP server to start over stdio; its tools are offered (repeatable; mcp extra)")
    parser.add_argument("--mcp-url", action="append", default=[], metavar="URL",
                        help="an MCP server to connect to over Streamable HTTP (repeatable; mcp extra)")


def mcp_toolsets(args: argparse.Namespace, *, stderr: TextIO | None = None) -> list[Toolset]:
    """The MCP servers `--mcp` / `--mcp-url` name (none without them; a clear error without the mcp extra)."""
    commands, urls = getattr(args, "mcp", []) or [], getattr(args, "mcp_url", []) or []
    if not commands and not urls:
        return []
    try:
        from ..mcp import servers_from_specs
    except ImportError as exc:
        raise UserError(f"--mcp and --mcp-url need the mcp extra: {install_hint('mcp')}.") from exc
    return list(servers_from_specs(commands, urls, stderr=stderr))


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
    module = _load_file(module_name, spec) if _is_path(module_name) else _import(module_name, spec)
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


def _is_path(module_name: str) -> bool:
    return module_name.endswith(".py") or "/" in module_name or os.sep in module_name


def _import(module_name: str, spec: str) -> ModuleType:
    if os.getcwd() not in sys.path and "" not in sys.path:
        # A console script does not search the working directory; `--tool mytools:f` should find ./mytools.py.
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise UserError(f"The module {module_name!r} of the tool {spec!r} was not found; check the name, "
                            "or run toolwire from the directory that holds it.") from exc
        raise UserError(f"Importing {module_name!r} for the tool {spec!r} failed: {exc}.") from exc
    except Exception as exc:
        raise UserError(f"Importing {module_name!r} for the tool {spec!r} failed "
                        f"({type(exc).__name__}: {exc}).") from exc


def _load_file(path_text: str, spec: str) -> ModuleType:
    """A Python file named by its path, loaded as a module of its own (its folder importable, as for scripts)."""
    path = Path(path_text).expanduser()
    if path.suffix != ".py":
        raise UserError(f"The tool {spec!r} names {path_text!r}, which is not a .py file; name a Python file "
                        "(./tools.py:function) or a module (mytools:function).")
    if not path.is_file():
        raise UserError(f"The file {path_text!r} of the tool {spec!r} does not exist.")
    name = f"_toolwire_tools_{path.stem}"
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise UserError(f"The file {path_text!r} of the tool {spec!r} cannot be loaded as Python.")
    module = importlib.util.module_from_spec(loader_spec)
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise UserError(f"Loading {path_text!r} for the tool {spec!r} failed ({type(exc).__name__}: {exc}).") from exc
    return module


def load_tools(specs: Iterable[str]) -> list[Tool[..., Any]]:
    """Every tool named on the command line, in order."""
    return [t for spec in specs for t in load_tool(spec)]


def check_model(spec: str, *, api_key: str | None, base_url: str | None = None) -> None:
    """Raise `UserError` for a model name without a provider, a provider whose API key is not set, or a
    base URL without a scheme.

    `get_model` would say the same for a Python caller; this says it for a command line user: which
    environment variable to set, or `--api-key`.
    """
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise UserError(f"The base URL {base_url!r} needs a scheme: write --base-url http://{base_url} (or https://).")
    provider_name, sep, model_name = spec.partition(":")
    if not sep or not model_name:
        raise UserError(f"The model {spec!r} has no provider; name it provider:model, e.g. openai:gpt-4.1-mini "
                        "(`toolwire providers` lists the providers).")
    provider = get_provider(provider_name)
    if api_key is None and provider.api_key_required and not any(os.environ.get(v) for v in provider.api_key_env):
        variables = " or ".join(provider.api_key_env)
        raise UserError(f"No API key for {provider.name!r}: set {variables} in the environment, or pass --api-key.")


def make_agent(args: argparse.Namespace, *, tools: Sequence[Tool[..., Any]] | None = None,
               mcp_stderr: TextIO | None = None) -> Agent:
    """The agent a `chat` or `run` command line describes (`async with agent:` opens its MCP servers)."""
    loaded = load_tools(args.tool) if tools is None else list(tools)
    check_model(args.model, api_key=args.api_key, base_url=args.base_url)
    return Agent(args.model, tools=loaded, toolsets=mcp_toolsets(args, stderr=mcp_stderr), system=args.system,
                 max_steps=args.max_steps, api_key=args.api_key, base_url=args.base_url,
                 timeout=args.timeout)


@asynccontextmanager
async def command_agent(args: argparse.Namespace, *, mcp_stderr: TextIO | None = None) -> AsyncIterator[Agent]:
    """The agent of a `chat` or `run` command line, open (its MCP servers connected) for the block.

    The model `fake` is the offline model `toolwire serve` uses, with the demo tools and their system
    prompt when no `--tool` or MCP server is given, so `toolwire chat fake` works with no key and no network.
    """
    from ._offline import FAKE_MODEL, offline_model

    if args.model != FAKE_MODEL:
        async with make_agent(args, mcp_stderr=mcp_stderr) as agent:
            yield agent
        return
    from ..demo_tools import DEMO_SYSTEM, DEMO_TOOLS

    if args.base_url or args.api_key:
        raise UserError("The offline model 'fake' takes no --base-url or --api-key; name a provider:model to use them.")
    toolsets = mcp_toolsets(args, stderr=mcp_stderr)
    demo = not args.tool and not toolsets
    clients: list[httpx.AsyncClient] = []
    async with offline_model(delay=_FAKE_DELAY, clients=clients) as (model, _):
        agent = Agent(model, tools=list(DEMO_TOOLS) if demo else load_tools(args.tool), toolsets=toolsets,
                      system=args.system if args.system is not None else (DEMO_SYSTEM if demo else None),
                      max_steps=args.max_steps, timeout=args.timeout)
        async with agent:
            yield agent


_FAKE_DELAY = 0.02
"""Seconds between the offline model's stream frames: text visibly streams, as with `serve`'s default."""


async def tool_names(agent: Agent[Any, Any]) -> list[str]:
    """Every tool an open agent offers: its own, then its toolsets' (MCP servers' as last listed)."""
    from ..tools import RunContext

    names = [t.name for t in agent.tools]
    for toolset in agent.toolsets:
        names.extend(t.name for t in await toolset.get_tools(RunContext()))
    return names
