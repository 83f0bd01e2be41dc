"""Failures end a command with one clear line on standard error, no traceback, and a non-zero status."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from toolwire import load_messages
from toolwire.cli import main
from toolwire.testing import FakeHTTPError, FakeProviderServer, FakeStreamError, FakeText, FakeToolCall, FakeTurn

from .support import clean_env, toolwire


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_missing_key_names_the_variable_to_set() -> None:
    done = toolwire("run", "openai:gpt-4.1-mini", "Hello")
    assert done.returncode == 1
    assert done.stdout == ""
    assert _one_line(done.stderr) == (
        "toolwire: No API key for 'openai': set OPENAI_API_KEY in the environment, or pass --api-key.")


def test_missing_key_in_chat_is_reported_before_any_prompt() -> None:
    done = toolwire("chat", "mistral:mistral-small-latest", env=clean_env())
    assert done.returncode == 1
    assert "set MISTRAL_API_KEY" in _one_line(done.stderr)


def test_http_401_shows_the_providers_message(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeProviderServer("openai-chat", api_key="sk-right") as server:
        code = main(["run", "openai:gpt-test", "Hello", "--base-url", server.base_url, "--api-key", "sk-wrong"])
    _, err = capsys.readouterr()
    assert code == 1
    assert _one_line(err) == ("toolwire: openai answered HTTP 401: Incorrect API key provided. You can find your "
                              "API key in your account settings.")


def test_http_429_shows_the_providers_message_after_the_retries(capsys: pytest.CaptureFixture[str]) -> None:
    limited = FakeHTTPError(status=429, message="Rate limit reached for gpt-test on tokens per min (TPM).",
                            retry_after=0, repeat=True)
    with FakeProviderServer("anthropic", [limited]) as server:
        code = main(["run", "anthropic:claude-test", "Hello", "--base-url", server.base_url, "--api-key", "k"])
        attempts = len(server.requests)
    _, err = capsys.readouterr()
    assert (code, attempts) == (1, 3)
    assert _one_line(err) == "toolwire: anthropic answered HTTP 429: Rate limit reached for gpt-test on tokens per min (TPM)."


def test_unreachable_host_says_where_it_tried(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = main(["run", "openai:gpt-test", "Hello", "--base-url", f"http://127.0.0.1:{port}/v1", "--api-key", "k"])
    line = _one_line(capsys.readouterr().err)
    assert code == 1
    assert line.startswith(f"toolwire: Could not connect to openai at http://127.0.0.1:{port}/v1/chat/completions")
    assert line.endswith("Check the base URL and your network.")


def test_stream_error_keeps_the_partial_answer_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    broken = FakeTurn(parts=[FakeText(text="The answer starts here and")],
                      error=FakeStreamError(message="The model is overloaded, try again.", code="server_error"))
    with FakeProviderServer("openai-chat", [broken]) as server:
        code = main(["run", "openai:gpt-test", "Hello", "--base-url", server.base_url, "--api-key", "k", "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "The model is overloaded, try again." in _one_line(err)
    kept = load_messages(out)
    assert [m.role for m in kept] == ["user", "assistant"]
    assert kept[1].text == "The answer starts here and"


def test_stream_error_when_rendering_keeps_what_was_shown(capsys: pytest.CaptureFixture[str]) -> None:
    broken = FakeTurn(parts=[FakeText(text="Half an answer")], error=FakeStreamError(message="Overloaded."))
    with FakeProviderServer("anthropic", [broken]) as server:
        code = main(["run", "anthropic:claude-test", "Hello", "--base-url", server.base_url, "--api-key", "k"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""  # no answer: standard output stays empty; the trace shows what arrived
    assert err.startswith("Half an answer\n")
    assert "Overloaded." in _one_line(err.removeprefix("Half an answer\n"))


def test_a_bad_tool_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "openai:gpt-test", "Hi", "--api-key", "k", "--tool", "tests.cli.chat_tools:missing"])
    assert code == 1
    assert _one_line(capsys.readouterr().err) == (
        "toolwire: The module 'tests.cli.chat_tools' has no 'missing' (from the tool 'tests.cli.chat_tools:missing').")


def test_run_cannot_approve_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    turns = [FakeTurn(parts=[FakeText(text="Deleting."), FakeToolCall(name="delete_file", arguments={"path": "x"})])]
    with FakeProviderServer("openai-chat", turns) as server:
        code = main(["run", "openai:gpt-test", "Delete x", "--base-url", server.base_url, "--api-key", "k",
                     "--tool", "tests.cli.chat_tools:delete_file", "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert _one_line(err) == ("toolwire: The run stopped before calling 'delete_file', which needs a person's "
                              "approval; `toolwire run` cannot ask for it, `toolwire chat` can.")
    assert [m.role for m in load_messages(out)] == ["user"]


def test_item17_a_base_url_without_a_scheme_is_refused_before_any_request(capsys: pytest.CaptureFixture[str]) -> None:
    """CLI item 17: `--base-url localhost:8000` is named as the mistake, not retried as a connection failure."""
    code = main(["run", "openai:gpt-test", "Hi", "--api-key", "k", "--base-url", "localhost:8000"])
    assert code == 1
    assert _one_line(capsys.readouterr().err) == (
        "toolwire: The base URL 'localhost:8000' needs a scheme: write --base-url http://localhost:8000 (or https://).")


def test_item17_demo_with_a_provider_and_no_key_names_flags_that_exist(capsys: pytest.CaptureFixture[str],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """CLI item 17: the suggested `--api-key` exists on `demo` (and works)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(["demo", "--provider", "openai"])
    err = _one_line(capsys.readouterr().err)
    assert code == 1 and "set OPENAI_API_KEY in the environment, or pass --api-key" in err
    assert "api_key=" not in err
    parser_help = __import__("toolwire.cli", fromlist=["build_parser"]).build_parser()
    assert parser_help.parse_args(["demo", "--provider", "openai", "--api-key", "sk"]).api_key == "sk"


def test_item17_a_tool_given_as_a_file_path(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """CLI item 17: `--tool ./file.py:f` loads the file; a wrong path is one clear line, not a TypeError."""
    from toolwire.cli._tools import load_tool

    source = tmp_path / "my_tools.py"
    source.write_text("def shout(text: str) -> str:\n    '''Shout.'''\n    return text.upper()\n")
    (tool,) = load_tool(f"{source}:shout")
    assert tool.name == "shout"
    code = main(["run", "openai:gpt-test", "Hi", "--api-key", "k", "--tool", "./nowhere/missing.py:f"])
    assert code == 1
    assert _one_line(capsys.readouterr().err) == (
        "toolwire: The file './nowhere/missing.py' of the tool './nowhere/missing.py:f' does not exist.")


def test_item17_version_and_a_closed_pipe() -> None:
    """CLI item 17: `--version` exists; `toolwire providers | head -1` ends quietly with status 0."""
    import subprocess
    import sys

    from tests.cli.support import ROOT, clean_env, toolwire

    done = toolwire("--version")
    assert done.returncode == 0 and done.stdout.startswith("toolwire 0.")
    pipeline = subprocess.run(
        f"'{sys.executable}' -m toolwire.cli providers | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert pipeline.returncode == 0, pipeline.stderr
    assert pipeline.stderr == ""


def test_serve_without_the_server_extra_names_it(tmp_path: Any) -> None:
    """An install with the cli extra only: `toolwire serve` says which extra to install, and how before PyPI."""
    import subprocess
    import sys

    script = ("import sys; sys.modules['starlette'] = None\n"  # as if Starlette were not installed
              "from toolwire.cli import main; sys.exit(main(['serve', '--port', '0']))")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    line = _one_line(done.stderr)
    assert "toolwire serve needs the server extra" in line
    assert "pip install 'toolwire[server]'" in line and "from a checkout" in line
