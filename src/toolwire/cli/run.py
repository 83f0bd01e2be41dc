"""`toolwire run MODEL PROMPT [--tool M:F ...] [--system TEXT] [--json]`: one prompt, answered to the end.

Without `--json` the run is rendered like a chat turn. With `--json` nothing but the run's new messages
(prompt, assistant messages, tool results, final answer) is printed to standard output, in the format
`toolwire.load_messages` reads; when the run fails, the messages it completed are still printed there
and the error goes to standard error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
import httpx

from ..agent import RunResult
from ..exceptions import ToolwireError
from ..messages import Message, dump_messages
from ._render import RunRenderer, error_line, make_console, stream_turn
from ._tools import add_model_arguments, make_agent


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="answer one prompt (with tools) and exit",
                       description="Send one prompt, run the tools the model calls, and print the answer.")
    p.add_argument("model", help="provider:model, e.g. openai:gpt-4.1-mini")
    p.add_argument("prompt", help="the user message")
    add_model_arguments(p)
    p.add_argument("--json", action="store_true",
                   help="print the run's new messages as JSON (toolwire.load_messages reads them)")
    p.set_defaults(func=run)


async def _run(args: argparse.Namespace) -> RunResult[Any]:
    agent = make_agent(args)
    async with agent:
        if args.json:
            result = await agent.run(args.prompt)
        else:
            result = await stream_turn(agent, args.prompt, RunRenderer(make_console()))
    return result


def run(args: argparse.Namespace) -> int:
    try:
        result = anyio.run(_run, args)
    except (ToolwireError, httpx.HTTPError, OSError) as exc:
        kept = getattr(exc, "messages", None)
        if args.json and kept:
            _print_json(kept)
        sys.stdout.flush()
        sys.stderr.write(error_line(exc) + "\n")
        return 1
    if args.json:
        _print_json(result.messages)
    if result.paused:
        names = ", ".join(repr(call.name) for call in result.pending)
        sys.stdout.flush()
        sys.stderr.write(f"toolwire: The run stopped before calling {names}, which needs a person's approval; "
                         "`toolwire run` cannot ask for it, `toolwire chat` can.\n")
        return 1
    return 0


def _print_json(messages: list[Message]) -> None:
    sys.stdout.write(dump_messages(messages).decode() + "\n")
