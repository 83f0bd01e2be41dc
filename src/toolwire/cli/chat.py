"""`toolwire chat MODEL [--tool M:F ...] [--mcp "CMD ARGS" ...] [--system TEXT]`: an interactive chat in the terminal.

Each turn streams the answer as it arrives and shows every tool call live: its arguments while they
stream, a spinner while the tool runs, the result or error the moment it finishes, then the turn's
token usage. The conversation is kept across turns. `/exit` (or `/quit`, Ctrl-D) ends the chat. MCP
servers (`--mcp`, `--mcp-url`) are connected once for the whole chat; a stdio server's own stderr is
discarded so it cannot break into the screen (run the server by hand to see it).
A tool that needs approval (`@tool(requires_approval=True)`) pauses the turn: the chat asks before
running it, and a declined call is answered to the model as declined.

A failed turn prints one line and the chat goes on; the turn's completed steps stay in the history
(every tool call answered), so nothing the model already did is lost. Ctrl-C during a turn cancels it:
a turn in which no tool ran is dropped whole (the history is as it was before it), while one whose tools
ran keeps what happened, the cut-off calls answered as cancelled, so the model learns what was done.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import Any, TextIO

import anyio
import httpx
from rich.console import Console
from rich.text import Text

from .._fresh_loop import run_in_new_loop
from ..agent import Agent, Approval, Denial
from ..exceptions import ToolwireError
from ..messages import Message, ToolCallPart
from ._render import RunRenderer, error_line, format_call, make_console, stream_turn
from ._tools import add_model_arguments, command_agent, tool_names

_EXIT_WORDS = frozenset({"/exit", "/quit", "/q"})


def add_parser(sub: Any) -> None:
    p = sub.add_parser("chat", help="chat with a model in the terminal, tool calls shown live",
                       description="Chat with a model; tool calls and their results are shown as they happen. "
                                   "Type /exit or press Ctrl-D to leave.")
    p.add_argument("model", help="provider:model, e.g. anthropic:claude-sonnet-4-5, or fake: the offline model "
                                 "with the demo tools (no key, no network)")
    add_model_arguments(p)
    p.set_defaults(func=run)


def _read_prompt(console: Console) -> str | None:
    """The user's next message; None at end of input. Blocking on purpose: nothing else runs meanwhile.

    Ctrl-C at the prompt leaves the chat at once (exit status 130), ending the prompt's line first so that
    the shell's prompt does not start after `you>`. asyncio's own SIGINT handler only cancels the main task,
    which would wait for the blocked `input()` to return (until Enter): while the prompt waits, Ctrl-C
    raises `KeyboardInterrupt` in it instead.
    """
    try:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: signals are not ours to set
        previous = None
    try:
        return console.input(Text("you> ", style="bold cyan"))
    except EOFError:
        return None
    except KeyboardInterrupt:
        console.print()
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


async def _chat(args: argparse.Namespace, quiet: TextIO) -> int:
    console = make_console()
    async with command_agent(args, mcp_stderr=quiet) as agent:
        tools = ", ".join(await tool_names(agent)) or "none"
        console.print(Text(f"toolwire chat · {agent.model.name} · tools: {tools} · /exit or Ctrl-D to leave",
                           style="dim"))
        return await _converse(agent, console)


async def _converse(agent: Agent[Any], console: Console) -> int:
    renderer = RunRenderer(console)
    history: list[Message] = []
    while True:
        line = _read_prompt(console)  # blocks the loop on purpose: the chat is idle while the user types
        if line is None:
            console.print()
            return 0
        prompt = line.strip()
        if prompt in _EXIT_WORDS:
            return 0
        if not prompt:
            continue
        history.extend(await _interruptible_turn(agent, prompt, history, renderer, console))


async def _interruptible_turn(agent: Agent[Any], prompt: str, history: list[Message], renderer: RunRenderer,
                              console: Console) -> list[Message]:
    """A turn that Ctrl-C cancels on its own; at the prompt, Ctrl-C still leaves the chat."""
    loop = asyncio.get_running_loop()
    kept: list[Message] = []
    with anyio.CancelScope() as scope:
        try:
            loop.add_signal_handler(signal.SIGINT, scope.cancel)
        except (NotImplementedError, RuntimeError):  # no signal handlers on this platform or thread
            return await _turn(agent, prompt, history, renderer, console, kept)
        try:
            return await _turn(agent, prompt, history, renderer, console, kept)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
    # Cancelled: the agent closed the response and cancelled the tools. `kept` holds the turn's messages
    # so far, every call answered. If a tool ran, its effect happened: keep the turn so the model knows.
    if any(m.tool_results_parts for m in kept):
        console.print(Text("(turn cancelled; the tools that ran are kept in the conversation)", style="dim"))
        return kept
    console.print(Text("(turn cancelled; the conversation is as it was before it)", style="dim"))
    return []


async def _turn(agent: Agent[Any], prompt: str, history: list[Message], renderer: RunRenderer,
                console: Console, kept: list[Message]) -> list[Message]:
    """One turn, resumed after each approval; returns the messages to add to the history (also on failure).

    `kept` grows with the turn's committed messages as they happen, so a cancelled turn still has them.
    """
    try:
        result = await stream_turn(agent, prompt, renderer, history=history, kept=kept)
        while result.paused and result.state is not None:
            approvals = _ask_approvals(console, result.pending)
            result = await stream_turn(agent, None, renderer, resume=result.state, approvals=approvals, kept=kept)
    except ToolwireError as exc:
        console.print(Text(error_line(exc), style="bold red"))
        # Keep a failed turn only when the model got somewhere; otherwise the user simply asks again.
        return kept if any(m.role == "assistant" for m in kept) else []
    return kept


def _ask_approvals(console: Console, calls: list[ToolCallPart]) -> dict[str, Approval]:
    """Ask the person about each call waiting for approval; no answer (or end of input) declines."""
    decisions: dict[str, Approval] = {}
    for call in calls:
        question = Text("Run ", style="bold yellow")
        question.append(format_call(call.name, call.arguments))
        question.append("? [y/N] ", style="bold yellow")
        try:
            answer = console.input(question).strip().lower()
        except EOFError:
            answer = ""
        decisions[call.id] = True if answer in ("y", "yes") else Denial("The user declined to run this call.")
    return decisions


def run(args: argparse.Namespace) -> int:
    try:
        import readline  # noqa: F401 - line editing and history for input(), where the platform has it
    except ImportError:
        pass
    try:
        # An MCP server's own log lines would break into the chat screen: they are discarded.
        with open(os.devnull, "w") as quiet:
            return run_in_new_loop(_chat, args, quiet)
    except (ToolwireError, httpx.HTTPError, OSError) as exc:
        sys.stderr.write(error_line(exc) + "\n")
        return 1
