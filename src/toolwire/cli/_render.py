"""Showing an agent run in the terminal: streamed text, tool calls as they form, results as they finish.

One `RunRenderer` serves `chat`, `run` and `demo`, in two modes fed by the same events:

- On a terminal, a rich `Live` region holds what is still moving: the unfinished line of text, calls
  whose arguments are streaming, tools running behind a spinner. Whatever settles (a finished line,
  a tool's result) is printed above the region once, so the scrollback reads as a clean transcript
  and results appear in the order they complete.
- Anywhere else (a pipe, a CI log, `TERM=dumb`) the same transcript is written as it happens, line by
  line, without cursor movement or colour codes: text as it streams, `->` lines when a call is
  complete, a result line when its tool finishes.

Per event the work is small and constant: text fragments are appended to a list and joined only at
a newline; the live region is redrawn by a ticker about twelve times a second, never per chunk.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx
import orjson
from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from ..agent import Agent, AgentRun, Approval, RunResult, RunState
from ..events import (
    Event,
    FinishEvent,
    MessageEndEvent,
    ProviderToolEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultEvent,
    ToolStartedEvent,
    Usage,
)
from ..exceptions import ToolwireError
from ..messages import InvalidToolCallPart, Message, ToolCallPart, ToolResultPart

__all__ = ["RunRenderer", "error_line", "make_console", "stream_turn"]

_REFRESH_SECONDS = 1 / 12
_ARGS_LIMIT = 160
"""Characters of a call's arguments shown on one line."""
_RESULT_LIMIT = 240
"""Characters of a tool result shown; the model still gets all of it."""


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich exits with status 1 when the reader of a pipe goes away; `toolwire ... | head` is not an
        # error, so it ends quietly (main() does the same for output written without rich).
        raise BrokenPipeError


def make_console(file: Any = None) -> Console:
    """A console that styles only real terminals (rich drops colour for pipes, `NO_COLOR` and `TERM=dumb`)."""
    return _Console(file=file, highlight=False, emoji=False)


def error_line(exc: BaseException) -> str:
    """The one line a command prints for an error that ends it (no traceback).

    A closed stdout (`| head`) is not an error to report: it is raised again for `main` to end quietly.
    """
    if isinstance(exc, BrokenPipeError):
        raise exc
    if isinstance(exc, ToolwireError):
        text = str(exc).strip() or type(exc).__name__
    elif isinstance(exc, httpx.HTTPError):
        text = f"The request failed ({type(exc).__name__}: {exc})."
    elif isinstance(exc, OSError):
        text = f"{exc.strerror or exc}."
    else:
        text = f"{type(exc).__name__}: {exc}"
    return "toolwire: " + " ".join(text.split())


@dataclass(slots=True)
class _Symbols:
    ok: str
    failed: str
    call: str
    pending: str
    thinking: str


_UNICODE = _Symbols(ok="✓", failed="✗", call="→", pending="…", thinking="thinking:")
_ASCII = _Symbols(ok="ok", failed="FAILED", call="->", pending="...", thinking="thinking:")


@dataclass(slots=True, kw_only=True)
class _Call:
    """One tool call of the current run, from its first fragment to its result."""

    name: str
    id: str = ""
    fragments: list[str] = field(default_factory=list)
    latest: ToolCallDelta | None = None
    """The call's latest fragment event: its preview is only computed when the row is drawn."""
    call: ToolCallPart | InvalidToolCallPart | None = None
    state: Literal["streaming", "queued", "running"] = "streaming"
    started: float | None = None
    spinner: Spinner | None = None

    def arguments(self) -> Any:
        """The best view of the arguments so far: the final ones, the parsed preview, or the raw text."""
        if isinstance(self.call, ToolCallPart):
            return self.call.arguments
        if isinstance(self.call, InvalidToolCallPart):
            return self.call.arguments_raw
        preview = self.latest.arguments if self.latest is not None else None
        if preview is not None:
            return preview
        return "".join(self.fragments)


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def format_call(name: str, arguments: Any, limit: int = _ARGS_LIMIT) -> str:
    """`name(key=value, ...)`: how a call reads on one line (raw argument text when it is not an object)."""
    if isinstance(arguments, dict):
        inner = ", ".join(f"{key}={_json(value)}" for key, value in arguments.items())
    elif isinstance(arguments, str):
        inner = arguments
    else:
        inner = _json(arguments)
    return f"{name}({_shorten(inner, limit)})"


def format_result(result: ToolResultPart, limit: int = _RESULT_LIMIT) -> str:
    value = result.result
    if result.is_error and isinstance(value, dict) and isinstance(value.get("error"), str):
        value = value["error"]
    return _shorten(value if isinstance(value, str) else _json(value), limit)


def format_usage(usage: Usage, requests: int, seconds: float) -> str:
    parts = [f"{requests} model request{'s' if requests != 1 else ''}"]
    if usage.input_tokens is None and usage.output_tokens is None:
        parts.append("tokens not reported")
    else:
        parts.append(f"{usage.input_tokens or 0:,} input + {usage.output_tokens or 0:,} output tokens")
        if usage.reasoning_tokens:
            parts.append(f"{usage.reasoning_tokens:,} reasoning")
        if usage.cache_read_tokens:
            parts.append(f"{usage.cache_read_tokens:,} cached")
    parts.append(f"{seconds:.1f} s")
    return "usage: " + " · ".join(parts)


class RunRenderer:
    """Renders the events of agent runs on a console (see the module docstring for the two modes).

    Args:
        console: Where to render.
        live: Force the live (terminal) mode on or off; by default it is on for a real terminal.
        waiting: What the spinner says while the model has not started answering.
    """

    def __init__(self, console: Console, *, live: bool | None = None, waiting: str = "waiting for the model") -> None:
        self.console = console
        self.live = (console.is_terminal and not console.is_dumb_terminal) if live is None else live
        encoding = (console.encoding or "").lower().replace("-", "")
        self.symbols = _UNICODE if encoding.startswith("utf") else _ASCII
        self.waiting = waiting
        self._reset()

    def _reset(self) -> None:
        self._line: list[str] = []          # the unfinished line of streamed text (live mode)
        self._channel: Literal["text", "thinking"] | None = None
        self._at_line_start = True          # plain mode: the output ends with a newline
        self._by_index: dict[int, _Call] = {}  # this response's calls, by their position in it
        self._by_id: dict[str, _Call] = {}
        self._pending: list[_Call] = []     # calls shown in the live region, in call order
        self._expecting = True              # a model response is due (the run started, or tools answered)
        self._waiting_spinner = Spinner("dots", text=Text(self.waiting, style="dim"))

    async def render(self, run: AgentRun[Any], *, waiting_calls: Sequence[ToolCallPart] = ()) -> None:
        """Consume `run` to its end, showing every event; the run's error is raised after what it showed.

        `waiting_calls` are calls made before this run began (those a resumed run decides), shown
        queued until their results arrive.
        """
        self._reset()
        for call in waiting_calls:
            row = self._row_for(call.id, call.name)
            row.call, row.state = call, "queued"
        if not self.live:
            try:
                async for event in run:
                    self.handle(event)
            finally:
                self._settle_all()
            return
        error: Exception | None = None
        with Live(_LiveView(self), console=self.console, auto_refresh=False, transient=True,
                  redirect_stdout=False, redirect_stderr=False) as live:
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._tick, live)
                    try:
                        async for event in run:
                            self.handle(event)
                    except Exception as exc:
                        error = exc  # raised below as it is, not wrapped in the task group's ExceptionGroup
                    finally:
                        group.cancel_scope.cancel()
            finally:
                self._settle_all()
                live.refresh()
        if error is not None:
            raise error

    async def _tick(self, live: Live) -> None:
        while True:
            live.refresh()
            await anyio.sleep(_REFRESH_SECONDS)

    # -- events --------------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        """Show one event (called per chunk: keep it cheap)."""
        if isinstance(event, TextDelta):
            self._expecting = False
            self._text(event.text, "text")
        elif isinstance(event, ToolCallDelta):
            row = self._by_index.get(event.index)
            if row is not None:
                row.fragments.append(event.arguments_delta)
                row.latest = event
        elif isinstance(event, ThinkingDelta):
            self._expecting = False
            self._text(event.text, "thinking")
        elif isinstance(event, ToolCallStart):
            self._expecting = False
            self._end_text()
            row = _Call(name=event.name, id=event.id)
            self._by_index[event.index] = row
            self._by_id[event.id] = row
            self._pending.append(row)
        elif isinstance(event, ToolCallEnd):
            self._call_complete(event.index, event.call)
        elif isinstance(event, ToolStartedEvent):
            row = self._row_for(event.call.id, event.call.name)
            row.call = event.call
            row.state = "running"
            row.started = time.monotonic()
            row.spinner = Spinner("dots", style="cyan")
        elif isinstance(event, ToolResultEvent):
            self._result(event.result, event.duration)
        elif isinstance(event, ProviderToolEvent):
            self._end_text()
            part = event.part
            status = f" ({part.status})" if part.status else ""
            self._print(Text(f"{self.symbols.ok} {part.provider} ran {part.name}{status}", style="magenta"))
        elif isinstance(event, FinishEvent):
            if event.reason == "length":
                self._end_text()
                self._print(Text("The response was cut off at the output token limit.", style="yellow"))
        elif isinstance(event, MessageEndEvent):
            self._end_text()
            self._by_index = {}  # the next response numbers its calls from 0 again
            message = event.message
            self._expecting = bool(message.tool_calls or message.invalid_tool_calls)

    def _row_for(self, call_id: str, name: str) -> _Call:
        row = self._by_id.get(call_id)
        if row is None:  # a call the events did not announce (it came with the assembled message)
            row = _Call(name=name, id=call_id)
            self._by_id[call_id] = row
            self._pending.append(row)
        return row

    def _call_complete(self, index: int, call: ToolCallPart | InvalidToolCallPart) -> None:
        row = self._by_index.get(index)
        if row is None:
            self._end_text()
            row = _Call(name=call.name)
            self._by_index[index] = row
            self._pending.append(row)
        row.call, row.id, row.name, row.state = call, call.id, call.name, "queued"
        self._by_id[call.id] = row
        if not self.live:
            self._print(Text(f"{self.symbols.call} {format_call(call.name, row.arguments())}", style="cyan"))

    def _result(self, result: ToolResultPart, duration: float | None) -> None:
        row = self._by_id.pop(result.call_id, None)
        if row is not None and row in self._pending:
            self._pending.remove(row)
        name = row.name if row is not None else result.name
        arguments = row.arguments() if row is not None else {}
        took = f"  {duration:.2f} s" if duration is not None else ""
        if result.is_error:
            line = Text(f"{self.symbols.failed} ", style="bold red")
            line.append(format_call(name, arguments), style="red")
            line.append(f" failed: {format_result(result)}", style="red")
        else:
            line = Text(f"{self.symbols.ok} ", style="bold green")
            line.append(format_call(name, arguments), style="green")
            line.append(f" {self.symbols.call} {format_result(result)}")
        line.append(took, style="dim")
        self._end_text()
        self._print(line)

    # -- output --------------------------------------------------------------------------------

    def _text(self, delta: str, channel: Literal["text", "thinking"]) -> None:
        if channel != self._channel:
            self._end_text()
            self._channel = channel
            if channel == "thinking" and not self.live:
                self._write(f"{self.symbols.thinking} ")
        if not self.live:
            self._write(delta)
            return
        self._line.append(delta)
        if "\n" in delta:
            done, _, rest = "".join(self._line).rpartition("\n")
            self._line = [rest] if rest else []
            self._print(Text(done, style=self._text_style()))

    def _text_style(self) -> str:
        return "dim italic" if self._channel == "thinking" else ""

    def _end_text(self) -> None:
        """Close the current run of text: what is left of its line is printed for good."""
        if self.live:
            if self._line:
                self._print(Text("".join(self._line), style=self._text_style()))
                self._line = []
        elif not self._at_line_start:
            self._write("\n")
        self._channel = None

    def _settle_all(self) -> None:
        """At the end of a run (or when it fails): print what is still pending, so nothing shown is lost."""
        self._end_text()
        for row in self._pending:
            # A call that never started waits for approval or was cut off; a started one was stopped.
            fate = "did not finish" if row.state == "running" else "not run yet"
            self._print(Text(f"{self.symbols.pending} {format_call(row.name, row.arguments())} ({fate})",
                             style="yellow"))
        self._pending = []

    def _write(self, text: str) -> None:
        if not text:
            return
        file = self.console.file
        file.write(text)
        file.flush()
        self._at_line_start = text.endswith("\n")

    def _print(self, renderable: Text) -> None:
        if not self.live and not self._at_line_start:
            self._write("\n")
        # soft_wrap: in a pipe, lines stay whole instead of being cut at an assumed 80 columns.
        self.console.print(renderable, soft_wrap=not self.live)
        self._at_line_start = True
        if not self.live:
            self.console.file.flush()

    def print_usage(self, run: AgentRun[Any], seconds: float) -> None:
        """The usage line that ends a turn."""
        self._print(Text(format_usage(run.usage, len(run.steps), seconds), style="dim"))

    # -- the live region -----------------------------------------------------------------------

    def live_lines(self, console: Console) -> list[Text | Spinner]:
        """What the live region shows now (called by rich when it redraws)."""
        lines: list[Text | Spinner] = []
        if self._line:
            lines.append(Text("".join(self._line), style=self._text_style()))
        now = time.monotonic()
        for row in self._pending:
            label = Text(format_call(row.name, row.arguments()), style="cyan", no_wrap=True, overflow="ellipsis")
            if row.state == "running" and row.spinner is not None:
                label.append(f"  running {now - (row.started or now):.1f} s", style="dim")
                row.spinner.update(text=label)
                lines.append(row.spinner)
            elif row.state == "queued":
                lines.append(Text(f"{self.symbols.pending} ", style="dim") + label + Text("  queued", style="dim"))
            else:
                lines.append(Text(f"{self.symbols.pending} ", style="dim") + label)
        if not lines and self._expecting:
            lines.append(self._waiting_spinner)
        return lines


class _LiveView:
    """The live region's renderable: built from the renderer's state each time rich redraws."""

    def __init__(self, renderer: RunRenderer) -> None:
        self.renderer = renderer

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.renderer.live_lines(console)


async def stream_turn(
    agent: Agent[Any],
    prompt: str | None,
    renderer: RunRenderer,
    *,
    history: Sequence[Message] = (),
    resume: RunState | None = None,
    approvals: Mapping[str, Approval] | None = None,
    kept: list[Message] | None = None,
) -> RunResult[Any]:
    """Run one turn of `agent` (or resume a paused one), rendered as it happens, ending with the usage line.

    Raises the run's error after showing what arrived; a `ProviderError` then carries the run's valid
    messages in `.messages`. `kept`, when given, is extended with the run's messages when it ends in any
    way (a result, an error, a cancellation): always a valid continuation of the history.
    """
    started = time.monotonic()
    run = agent.stream(prompt, history=history, resume=resume, approvals=approvals)
    try:
        async with run:
            await renderer.render(run, waiting_calls=resume.pending if resume is not None else ())
    finally:
        if kept is not None:
            kept += run.messages
    renderer.print_usage(run, time.monotonic() - started)
    return run.result
