"""`toolwire run MODEL [PROMPT | -] [--tool M:F ...] [--mcp "CMD ARGS" ...] [--system TEXT] [--json | --quiet]`:
one prompt, answered.

Standard output gets the answer and nothing else; the trace (tool calls, results, usage) goes to
standard error, so `toolwire run ... > answer.txt` or `| jq` see only the answer. On a terminal, where
both are the same screen, the run is rendered like a chat turn. `--quiet` leaves the trace out. The
prompt is the argument, or standard input when the argument is `-` or missing and input is piped.

With `--json` nothing but the run's new messages (prompt, assistant messages, tool results, final
answer) is printed to standard output, in the format `toolwire.load_messages` reads; when the run fails,
the messages it completed are still printed there and the error goes to standard error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx

from .._fresh_loop import run_in_new_loop
from ..agent import RunResult
from ..exceptions import ToolwireError, UserError
from ..messages import Message, dump_messages
from ._render import RunRenderer, error_line, make_console, stream_turn
from ._tools import add_model_arguments, command_agent


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="answer one prompt (with tools) and exit",
                       description="Send one prompt, run the tools the model calls, and print the answer.")
    p.add_argument("model", help="provider:model, e.g. openai:gpt-4.1-mini, or fake: the offline model with the "
                                 "demo tools (no key, no network)")
    p.add_argument("prompt", nargs="?", default=None,
                   help="the user message; '-' or nothing reads it from standard input")
    add_model_arguments(p)
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true",
                        help="print the run's new messages as JSON (toolwire.load_messages reads them)")
    output.add_argument("--quiet", "-q", action="store_true", help="print only the answer, without the trace")
    p.set_defaults(func=run)


def read_prompt(argument: str | None) -> str:
    """The prompt from the command line, or from standard input for `-` (or no argument, in a pipe)."""
    if argument is not None and argument != "-":
        return argument
    if argument is None and sys.stdin.isatty():
        raise UserError("Give the prompt as an argument (toolwire run MODEL \"...\"), or pipe it in.")
    text = sys.stdin.read().strip()
    if not text:
        raise UserError("The prompt read from standard input is empty.")
    return text


async def _run(args: argparse.Namespace, prompt: str) -> RunResult[Any]:
    async with command_agent(args) as agent:
        if args.json or args.quiet:
            return await agent.run(prompt)
        if sys.stdout.isatty():
            return await stream_turn(agent, prompt, RunRenderer(make_console()))
        result = await stream_turn(agent, prompt, RunRenderer(make_console(file=sys.stderr)))
        if not result.paused:
            sys.stdout.write(result.output + "\n")
        return result


def run(args: argparse.Namespace) -> int:
    try:
        prompt = read_prompt(args.prompt)
        result = run_in_new_loop(_run, args, prompt)
    except (ToolwireError, httpx.HTTPError, OSError) as exc:
        kept = getattr(exc, "messages", None)
        if args.json and kept:
            _print_json(kept)
        sys.stdout.flush()
        sys.stderr.write(error_line(exc) + "\n")
        return 1
    if args.json:
        _print_json(result.messages)
    elif args.quiet and not result.paused:
        sys.stdout.write(result.output + "\n")
    if result.paused:
        names = ", ".join(repr(call.name) for call in result.pending)
        sys.stdout.flush()
        sys.stderr.write(f"toolwire: The run stopped before calling {names}, which needs a person's approval; "
                         "`toolwire run` cannot ask for it, `toolwire chat` can.\n")
        return 1
    return 0


def _print_json(messages: list[Message]) -> None:
    sys.stdout.write(dump_messages(messages).decode() + "\n")
