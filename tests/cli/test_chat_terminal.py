"""`toolwire chat` in a real pseudo terminal, its screen read back through a terminal emulator.

The chat runs as its own process attached to a pty (pexpect), talking over loopback to a fake provider
started here; everything it writes, cursor movements included, is fed to pyte, so the assertions are
about what a person would see on the screen at that moment.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pexpect
import pyte

from toolwire import Message
from toolwire.testing import FakeProviderServer, FakeText, FakeToolCall, FakeTurn

from .support import ROOT, clean_env

COLUMNS, ROWS = 110, 40


class Terminal:
    """A child process on a pty and the screen it draws."""

    def __init__(self, child: pexpect.spawn) -> None:  # type: ignore[type-arg]
        self.child = child
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self.stream = pyte.ByteStream(self.screen)

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def pump(self, seconds: float = 0.05) -> None:
        try:
            self.stream.feed(self.child.read_nonblocking(65536, timeout=seconds))
        except pexpect.TIMEOUT:
            pass

    def wait_for(self, check: Callable[[str], bool], what: str, timeout: float = 15) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump()
            if check(self.text):
                return self.text
        raise AssertionError(f"the screen never showed {what}; it shows:\n{self.text}")

    def wait_text(self, needle: str, timeout: float = 15) -> str:
        return self.wait_for(lambda screen: needle in screen, repr(needle), timeout)


@contextmanager
def chat(*args: str) -> Iterator[Terminal]:
    child = pexpect.spawn(sys.executable, ["-m", "toolwire.cli", "chat", *args], cwd=str(ROOT),
                          env=clean_env(TERM="xterm-256color"), dimensions=(ROWS, COLUMNS))
    try:
        yield Terminal(child)
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_chat_streams_text_shows_the_tool_call_live_and_keeps_history() -> None:
    turns = [
        FakeTurn(parts=[FakeText(text="Let me look that up."),
                        FakeToolCall(name="get_weather", arguments={"city": "Paris"}, chunks=4)], delay=0.05),
        FakeTurn(parts=[FakeText(text="It is sunny in Paris at 24 degrees today.")], delay=0.2),
        FakeTurn(parts=[FakeText(text="You asked about the weather in Paris.")]),
    ]
    with FakeProviderServer("openai-chat", turns, api_key="sk-test") as server, \
            chat("openai:gpt-test", "--base-url", server.base_url, "--api-key", "sk-test",
                 "--tool", "tests.cli.chat_tools:get_weather") as term:
        term.wait_text("you>")
        assert "openai:gpt-test · tools: get_weather" in term.text
        term.child.sendline("What is the weather in Paris?")

        # While the tool runs (it takes a second) its call is on screen with a spinner and a timer.
        running = term.wait_text('get_weather(city="Paris")  running')
        assert "Let me look that up." in running
        assert "✓ get_weather" not in running

        # The result replaces the spinner; the answer then streams in word by word.
        term.wait_text('✓ get_weather(city="Paris") → {"city":"Paris","sky":"sunny","temperature_c":24}')
        partial = term.wait_text("It is sunny")
        assert "24 degrees today." not in partial, "the answer appeared all at once instead of streaming"
        done = term.wait_text("usage: 2 model requests")
        assert "It is sunny in Paris at 24 degrees today." in done
        assert done.index("Let me look that up.") < done.index("✓ get_weather") < done.index("It is sunny")

        # A second turn goes out with the whole conversation so far.
        term.wait_for(lambda screen: screen.rstrip().endswith("you>"), "the next prompt")
        term.child.sendline("What did I ask?")
        term.wait_text("You asked about the weather in Paris.")
        term.wait_text("usage: 1 model request")
        term.child.sendline("/exit")
        term.child.expect(pexpect.EOF, timeout=10)
        term.child.close()
        assert term.child.exitstatus == 0
        history = server.requests[2].messages
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant", "user"]
    assert history[0] == Message.user("What is the weather in Paris?")
    assert history[1].tool_calls[0].arguments == {"city": "Paris"}
    assert history[2].tool_results_parts[0].result == {"city": "Paris", "sky": "sunny", "temperature_c": 24}
    assert history[3].text == "It is sunny in Paris at 24 degrees today."
    assert history[4] == Message.user("What did I ask?")


def test_chat_reports_a_failed_turn_and_goes_on_until_ctrl_d() -> None:
    turns = [FakeTurn(parts=[FakeText(text="Hello again.")])]
    with FakeProviderServer("anthropic", turns, api_key="sk-right") as server, \
            chat("anthropic:claude-test", "--base-url", server.base_url, "--api-key", "sk-wrong") as term:
        term.wait_text("you>")
        term.child.sendline("Hi")
        screen = term.wait_text("toolwire: anthropic answered HTTP 401: Incorrect API key provided.")
        assert "Traceback" not in screen
        term.wait_for(lambda s: s.rstrip().endswith("you>"), "a new prompt after the error")
        term.child.sendeof()
        term.child.expect(pexpect.EOF, timeout=10)
        term.child.close()
        assert term.child.exitstatus == 0


def test_chat_asks_before_running_a_tool_that_needs_approval() -> None:
    turns = [
        FakeTurn(parts=[FakeToolCall(name="delete_file", arguments={"path": "old.log"}),
                        FakeToolCall(name="delete_file", arguments={"path": "keep.txt"})]),
        FakeTurn(parts=[FakeText(text="Deleted old.log; kept keep.txt as you asked.")]),
    ]
    with FakeProviderServer("openai-chat", turns) as server, \
            chat("openai:gpt-test", "--base-url", server.base_url, "--api-key", "k",
                 "--tool", "tests.cli.chat_tools:delete_file") as term:
        term.wait_text("you>")
        term.child.sendline("Clean up old.log and keep.txt")
        term.wait_text('Run delete_file(path="old.log")? [y/N]')
        term.child.sendline("y")
        term.wait_text('Run delete_file(path="keep.txt")? [y/N]')
        term.child.sendline("n")
        screen = term.wait_text("Deleted old.log; kept keep.txt as you asked.")
        assert '✓ delete_file(path="old.log") → deleted old.log' in screen
        assert ('✗ delete_file(path="keep.txt") failed: The user declined to run this call.' in screen)
        term.child.sendline("/exit")
        term.child.expect(pexpect.EOF, timeout=10)
        results = server.requests[1].pending_results()
    # (OpenAI's wire format has no error flag on tool results: the model reads the error text.)
    assert [r.result for r in results] == ["deleted old.log", {"error": "The user declined to run this call."}]


def test_ctrl_c_during_a_turn_cancels_only_that_turn() -> None:
    turns = [
        FakeTurn(parts=[FakeText(text="one two three four five six seven eight nine ten eleven twelve", chunks=1)],
                 delay=0.3),
        FakeTurn(parts=[FakeText(text="Fresh answer.")]),
    ]
    with FakeProviderServer("openai-chat", turns, api_key="sk-test") as server, \
            chat("openai:gpt-test", "--base-url", server.base_url, "--api-key", "sk-test") as term:
        term.wait_text("you>")
        term.child.sendline("Count slowly.")
        term.wait_text("one two")
        term.child.sendintr()
        screen = term.wait_text("(turn cancelled")
        assert "twelve" not in screen
        assert "Traceback" not in screen
        term.wait_for(lambda s: s.rstrip().endswith("you>"), "a new prompt after the cancelled turn")
        term.child.sendline("Something else.")
        term.wait_text("Fresh answer.")
        term.child.sendline("/exit")
        term.child.expect(pexpect.EOF, timeout=10)
        term.child.close()
        assert term.child.exitstatus == 0
        # The cancelled turn left nothing behind: the next request holds only the new question.
        assert server.requests[1].messages == [Message.user("Something else.")]


def test_item17_ctrl_c_after_an_approved_tool_ran_keeps_the_turn() -> None:
    """CLI item 17: the tool ran (its effect happened), so Ctrl-C keeps the turn and the model learns of it."""
    turns = [
        FakeTurn(parts=[FakeToolCall(name="delete_file", arguments={"path": "old.log"})]),
        FakeTurn(parts=[FakeText(text="Deleted it. Now some slow words " * 10, chunks=40)], delay=0.3),
        FakeTurn(parts=[FakeText(text="Fresh answer.")]),
    ]
    with FakeProviderServer("openai-chat", turns) as server, \
            chat("openai:gpt-test", "--base-url", server.base_url, "--api-key", "k",
                 "--tool", "tests.cli.chat_tools:delete_file") as term:
        term.wait_text("you>")
        term.child.sendline("Delete old.log")
        term.wait_text('Run delete_file(path="old.log")? [y/N]')
        term.child.sendline("y")
        term.wait_text("Deleted it.")
        term.child.sendintr()
        term.wait_text("(turn cancelled; the tools that ran are kept")
        term.wait_for(lambda s: s.rstrip().endswith("you>"), "a new prompt after the cancelled turn")
        term.child.sendline("Anything else?")
        term.wait_text("Fresh answer.")
        term.child.sendline("/exit")
        term.child.expect(pexpect.EOF, timeout=10)
        sent = server.requests[2].messages
    assert sent[0] == Message.user("Delete old.log")
    assert [r.result for r in sent[2].tool_results_parts] == ["deleted old.log"]
    assert sent[3].role == "assistant" and sent[3].text.startswith("Deleted it.")  # cut off, as far as it came
    assert sent[-1] == Message.user("Anything else?")


def test_chat_fake_is_the_offline_model_with_the_demo_tools() -> None:
    """`toolwire chat fake` needs no key and no network: the model `serve --model fake` uses, with the demo tools."""
    with chat("fake") as term:
        banner = term.wait_text("you>")
        assert "tools: get_weather" in banner and "find_restaurants" in banner
        term.child.sendline("What's the weather in Paris and Oslo?")
        screen = term.wait_for(lambda s: s.rstrip().endswith("you>") and "get_weather" in s and s.count("you>") == 2,
                               "the weather of both cities and a new prompt", timeout=30)
        assert "Paris" in screen and "Oslo" in screen
        assert "Traceback" not in screen and "API key" not in screen
        term.child.sendline("/exit")
        term.child.expect(pexpect.EOF, timeout=10)
        term.child.close()
        assert term.child.exitstatus == 0


def test_ctrl_c_at_the_prompt_ends_the_line_and_leaves() -> None:
    """At the prompt Ctrl-C leaves the chat with the prompt's line ended, so the shell's prompt starts on its own."""
    with chat("fake") as term:
        term.wait_text("you>")
        term.child.sendintr()
        term.child.expect(pexpect.EOF, timeout=10)
        term.stream.feed(term.child.before or b"")
        term.child.close()
        assert term.child.exitstatus == 130
        assert "Traceback" not in term.text
        # The cursor is at the start of the line below the prompt: what the shell prints next stands alone.
        assert term.screen.cursor.x == 0
        assert term.screen.display[term.screen.cursor.y].strip() == ""
