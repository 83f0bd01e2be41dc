"""`toolwire run`: one prompt against a fake provider, as JSON messages and as rendered text."""

from __future__ import annotations

import pytest

from toolwire import Message, ToolCallPart, ToolResultPart, load_messages
from toolwire.cli import main
from toolwire.testing import FakeProviderServer, FakeText, FakeToolCall, FakeTurn

from .support import ANSI, clean_env, toolwire

TURNS = [
    FakeTurn(parts=[FakeText(text="Checking both."),
                    FakeToolCall(name="local_time", arguments={"city": "Oslo"}, chunks=4),
                    FakeToolCall(name="explode", arguments={"reason": "testing"}, chunks=3)]),
    FakeTurn(parts=[FakeText(text="It is 14:05 in Oslo; the other tool failed.")]),
]
TOOLS = ["--tool", "tests.cli.chat_tools:local_time", "--tool", "tests.cli.chat_tools:explode"]


def _check_history(messages: list[Message]) -> None:
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0].text == "What time is it in Oslo?"
    calls = messages[1].parts[1:]
    assert all(isinstance(c, ToolCallPart) for c in calls)
    assert [(c.name, c.arguments) for c in calls if isinstance(c, ToolCallPart)] == [
        ("local_time", {"city": "Oslo"}), ("explode", {"reason": "testing"})]
    results = messages[2].parts
    assert all(isinstance(r, ToolResultPart) for r in results)
    ok, failed = results
    assert isinstance(ok, ToolResultPart) and isinstance(failed, ToolResultPart)
    assert (ok.name, ok.result, ok.is_error) == ("local_time", "14:05 in Oslo", False)
    assert failed.is_error and "RuntimeError: boom: testing" in failed.result["error"]
    assert messages[3].text == "It is 14:05 in Oslo; the other tool failed."


def test_run_json_prints_the_new_messages_for_load_messages(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeProviderServer("openai-chat", TURNS, api_key="sk-test") as server:
        code = main(["run", "openai:gpt-test", "What time is it in Oslo?", *TOOLS, "--system", "Be brief.",
                     "--base-url", server.base_url, "--api-key", "sk-test", "--json"])
        sent = server.requests
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    _check_history(load_messages(out))
    assert sent[0].messages[0] == Message.system("Be brief.")
    assert [t.name for t in sent[0].tools] == ["local_time", "explode"]
    # The second request carried both results back, the failure as an error.
    assert [r.name for r in sent[1].pending_results()] == ["local_time", "explode"]


def test_run_json_from_a_separate_process() -> None:
    with FakeProviderServer("anthropic", TURNS, api_key="sk-ant") as server:
        done = toolwire("run", "anthropic:claude-test", "What time is it in Oslo?", *TOOLS,
                        "--base-url", server.base_url, "--json", env=clean_env(ANTHROPIC_API_KEY="sk-ant"))
    assert done.returncode == 0, done.stderr
    _check_history(load_messages(done.stdout))


def test_run_without_json_renders_text_calls_and_results(capsys: pytest.CaptureFixture[str]) -> None:
    """CLI item 17: in a pipe, the answer alone goes to stdout and the trace to stderr."""
    with FakeProviderServer("openai-chat", TURNS) as server:
        code = main(["run", "openai:gpt-test", "What time is it in Oslo?", *TOOLS,
                     "--base-url", server.base_url, "--api-key", "k"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == "It is 14:05 in Oslo; the other tool failed.\n"
    assert ANSI.search(err) is None
    assert err.splitlines()[:3] == ["Checking both.", '→ local_time(city="Oslo")', '→ explode(reason="testing")']
    assert '✓ local_time(city="Oslo") → 14:05 in Oslo' in err
    assert "✗ explode(reason=\"testing\") failed: The tool 'explode' failed with RuntimeError: boom: testing." in err
    assert "It is 14:05 in Oslo; the other tool failed.\nusage: 2 model requests · " in err


def test_item17_run_quiet_and_a_prompt_from_stdin(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """CLI item 17: `--quiet` prints only the answer; `-` reads the prompt from standard input."""
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("What time is it in Oslo?\n"))
    with FakeProviderServer("openai-chat", TURNS) as server:
        code = main(["run", "openai:gpt-test", "-", *TOOLS, "--base-url", server.base_url, "--api-key", "k",
                     "--quiet"])
        prompt = server.requests[0].messages[-1].text
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert out == "It is 14:05 in Oslo; the other tool failed.\n"
    assert prompt == "What time is it in Oslo?"


def test_run_fake_answers_offline_with_the_demo_tools() -> None:
    """`toolwire run fake` is the offline model of `serve --model fake`: no key, no network, the demo tools."""
    done = toolwire("run", "fake", "What's the weather in Lima?", "--json", env=clean_env())
    assert done.returncode == 0, done.stderr
    messages = load_messages(done.stdout)
    calls = [p for m in messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert [(c.name, c.arguments.get("city")) for c in calls] == [("get_weather", "Lima")]
    assert messages[-1].role == "assistant" and messages[-1].text.startswith("Here is the weather:\n\n- **Lima**: ")
    refused = toolwire("run", "fake", "hi", "--api-key", "sk-x", env=clean_env())
    assert refused.returncode == 1 and "takes no --base-url or --api-key" in refused.stderr
