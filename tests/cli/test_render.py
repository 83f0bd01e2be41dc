"""The run renderer on its own: plain transcripts for pipes, the live region for terminals."""

from __future__ import annotations

import io

import anyio
import pyte
import pytest
from rich.console import Console
from rich.spinner import Spinner
from rich.text import Text as RichText

from toolwire import Agent, Message, ToolCallPart, ToolResultPart, tool
from toolwire.cli._render import RunRenderer, format_call, format_usage, stream_turn
from toolwire.events import (
    MessageEndEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultEvent,
    ToolStartedEvent,
    Usage,
)
from toolwire.exceptions import ProviderStreamError
from toolwire.testing import Fail, ScriptedModel, ToolCall

from .support import ANSI

PARIS = ToolCallPart(id="call_1", name="get_weather", arguments={"city": "Paris"}, arguments_raw='{"city": "Paris"}')
OSLO = ToolCallPart(id="call_2", name="get_weather", arguments={"city": "Oslo"}, arguments_raw='{"city": "Oslo"}')


def _plain() -> tuple[RunRenderer, io.StringIO]:
    out = io.StringIO()
    return RunRenderer(Console(file=out, width=80)), out


def _live() -> tuple[RunRenderer, io.StringIO]:
    out = io.StringIO()
    return RunRenderer(Console(file=out, width=100, force_terminal=True, color_system="truecolor")), out


def _lines(renderer: RunRenderer, console: Console) -> list[str]:
    shown = []
    for item in renderer.live_lines(console):
        text = item.text if isinstance(item, Spinner) else item
        assert isinstance(text, RichText)
        shown.append(("(spinner) " if isinstance(item, Spinner) else "") + text.plain)
    return shown


def test_plain_mode_writes_a_transcript_with_results_in_completion_order() -> None:
    renderer, out = _plain()
    assert not renderer.live
    for event in [
        TextDelta(text="Checking "), TextDelta(text="two cities."),
        ToolCallStart(id="call_1", name="get_weather", index=0),
        ToolCallDelta(id="call_1", index=0, arguments_delta='{"city": "Par'),
        ToolCallEnd(index=0, call=PARIS),
        ToolCallStart(id="call_2", name="get_weather", index=1),
        ToolCallEnd(index=1, call=OSLO),
        MessageEndEvent(message=Message(role="assistant", parts=[PARIS, OSLO])),
        ToolStartedEvent(call=PARIS), ToolStartedEvent(call=OSLO),
        ToolResultEvent(result=ToolResultPart(call_id="call_2", name="get_weather", result={"error": "No data."},
                                              is_error=True), duration=0.1),
        ToolResultEvent(result=ToolResultPart(call_id="call_1", name="get_weather", result={"sky": "clear"}),
                        duration=0.5),
        ThinkingDelta(text="Summing up."),
        TextDelta(text="Paris is clear; Oslo is unknown."),
        MessageEndEvent(message=Message.assistant("Paris is clear; Oslo is unknown.")),
    ]:
        renderer.handle(event)
    assert out.getvalue().splitlines() == [
        "Checking two cities.",
        '→ get_weather(city="Paris")',
        '→ get_weather(city="Oslo")',
        '✗ get_weather(city="Oslo") failed: No data.  0.10 s',
        '✓ get_weather(city="Paris") → {"sky":"clear"}  0.50 s',
        "thinking: Summing up.",
        "Paris is clear; Oslo is unknown.",
    ]


def test_live_region_shows_arguments_growing_then_a_spinner_then_nothing() -> None:
    renderer, out = _live()
    console = renderer.console
    assert renderer.live
    assert _lines(renderer, console) == ["(spinner) waiting for the model"]
    renderer.handle(TextDelta(text="Let me check"))
    assert _lines(renderer, console) == ["Let me check"]
    renderer.handle(ToolCallStart(id="call_1", name="get_weather", index=0))
    assert ANSI.sub("", out.getvalue()) == "Let me check\n", "a call begins: the text before it is settled"
    renderer.handle(ToolCallDelta(id="call_1", index=0, arguments_delta='{"ci'))
    assert _lines(renderer, console) == ['… get_weather({"ci)']  # no preview yet: the raw text
    renderer.handle(ToolCallDelta(id="call_1", index=0, arguments_delta='ty": "Pa', arguments={"city": "Pa"}))
    assert _lines(renderer, console)[-1] == '… get_weather(city="Pa")'
    renderer.handle(ToolCallDelta(id="call_1", index=0, arguments_delta='ris"}', arguments={"city": "Paris"}))
    assert _lines(renderer, console)[-1] == '… get_weather(city="Paris")'
    renderer.handle(ToolCallEnd(index=0, call=PARIS))
    assert _lines(renderer, console)[-1] == '… get_weather(city="Paris")  queued'
    renderer.handle(ToolStartedEvent(call=PARIS))
    running = _lines(renderer, console)[-1]
    assert running.startswith('(spinner) get_weather(city="Paris")  running 0.')
    assert ANSI.sub("", out.getvalue()) == "Let me check\n", "a running call is not printed for good yet"
    renderer.handle(ToolResultEvent(result=ToolResultPart(call_id="call_1", name="get_weather", result="sunny"),
                                    duration=1.25))
    assert _lines(renderer, console) == []
    renderer.handle(MessageEndEvent(message=Message(role="assistant", parts=[PARIS])))
    assert _lines(renderer, console) == ["(spinner) waiting for the model"], "the results go back to the model"
    printed = ANSI.sub("", out.getvalue())
    assert printed == 'Let me check\n✓ get_weather(city="Paris") → sunny  1.25 s\n'


def test_live_text_is_printed_line_by_line_as_lines_complete() -> None:
    renderer, out = _live()
    renderer.handle(TextDelta(text="First line\nSecond "))
    assert ANSI.sub("", out.getvalue()) == "First line\n"
    assert _lines(renderer, renderer.console) == ["Second "]
    renderer.handle(TextDelta(text="line\n\nThird"))
    renderer.handle(MessageEndEvent(message=Message.assistant("...")))
    assert ANSI.sub("", out.getvalue()) == "First line\nSecond line\n\nThird\n"


def test_formatting_helpers() -> None:
    assert format_call("f", {"a": 1, "b": "x"}) == 'f(a=1, b="x")'
    assert format_call("f", '{"broken": ') == 'f({"broken":)'
    assert format_call("f", {"text": "y" * 500}, limit=20) == 'f(text="' + "y" * 13 + '…)'
    assert format_usage(Usage(input_tokens=1200, output_tokens=34), 2, 1.26) == (
        "usage: 2 model requests · 1,200 input + 34 output tokens · 1.3 s")
    assert format_usage(Usage(), 1, 0.5) == "usage: 1 model request · tokens not reported · 0.5 s"


@tool
async def slow_echo(text: str, seconds: float) -> str:
    """Echo after a pause."""
    await anyio.sleep(seconds)
    return text


@pytest.mark.anyio
@pytest.mark.parametrize("live", [True, False], ids=["terminal", "pipe"])
async def test_a_whole_run_renders_in_both_modes(live: bool) -> None:
    model = ScriptedModel(
        ["On it.", ToolCall("slow_echo", {"text": "slow", "seconds": 0.3}, chunks=5),
         ToolCall("slow_echo", {"text": "fast", "seconds": 0.0}, chunks=5)],
        ["Both came back.\nDone."],
    )
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=live)
    result = await stream_turn(Agent(model, tools=[slow_echo]), "Echo twice", RunRenderer(console))
    assert result.messages[-1].text == "Both came back.\nDone."
    raw = out.getvalue()
    assert (ANSI.search(raw) is not None) is live
    if live:  # what a terminal shows once the live region has gone
        screen = pyte.Screen(100, 30)
        pyte.Stream(screen).feed(raw.replace("\n", "\r\n"))
        shown = "\n".join(line.rstrip() for line in screen.display).strip() + "\n"
    else:
        shown = raw
    assert "waiting for the model" not in shown
    assert shown.index('✓ slow_echo(text="fast", seconds=0.0) → fast') < shown.index('✓ slow_echo(text="slow"')
    assert "Both came back.\nDone.\nusage: 2 model requests · tokens not reported" in shown


@pytest.mark.anyio
@pytest.mark.parametrize("live", [True, False], ids=["terminal", "pipe"])
async def test_a_failed_run_raises_its_own_error_after_showing_what_arrived(live: bool) -> None:
    model = ScriptedModel(["Half of it", Fail("The provider is overloaded.")])
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=live)
    with pytest.raises(ProviderStreamError, match="overloaded"):  # not wrapped in an ExceptionGroup
        await stream_turn(Agent(model), "Hi", RunRenderer(console))
    assert "Half of it" in ANSI.sub("", out.getvalue())
