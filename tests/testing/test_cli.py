"""`toolwire fake-server` and `toolwire record` from the command line."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson
import pytest

from tests.conftest import fixture_path
from tests.services import interruptible
from toolwire import Message, get_model
from toolwire.cli import main
from toolwire.cli.fake_server import replies_from_replay_file
from toolwire.testing import FakeProviderServer, FakeText, FakeToolCall, FakeTurn

SECRET = "sk-cli-secret-0123456789"


@contextmanager
def fake_server_process(*args: str) -> Iterator[str]:
    """Run `toolwire fake-server ARGS` and yield the base URL it prints; stop it with Ctrl-C."""
    with subprocess.Popen([sys.executable, "-m", "toolwire.cli", "fake-server", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=interruptible) as process:
        assert process.stdout is not None and process.stderr is not None
        try:
            base_url = next((line.removeprefix("base_url: ").strip() for line in process.stdout
                             if line.startswith("base_url: ")), None)
            assert base_url, "the server printed no base URL"
            yield base_url
        finally:
            process.send_signal(signal.SIGINT)  # a graceful stop: exit status 130 and no traceback
            try:
                assert process.wait(timeout=10) == 130
                assert process.stderr.read() == ""
            finally:
                if process.poll() is None:
                    process.kill()


@pytest.mark.anyio
async def test_fake_server_command_serves_a_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(orjson.dumps([
        {"parts": [{"type": "text", "text": "Let me check."},
                   {"type": "tool_call", "name": "get_weather", "arguments": {"city": "Oslo"}}]},
        {"parts": [{"type": "text", "text": "It is snowing in Oslo."}]},
    ]).decode())
    with fake_server_process("--protocol", "anthropic", "--script", str(script), "--then-auto") as base_url:
        async with httpx.AsyncClient() as client:
            model = get_model("anthropic:claude-test", base_url=base_url, api_key="any", http_client=client)
            first = await model.request([Message.user("Weather in Oslo?")])
            second = await model.request([Message.user("And now?")])
            third = await model.request([Message.user("Thanks")])
    assert first.text == "Let me check."
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("get_weather", {"city": "Oslo"})]
    assert first.tool_calls[0].id.startswith("toolu_01")
    assert second.text == "It is snowing in Oslo."
    assert third.text.startswith('You said: "Thanks".')


@pytest.mark.anyio
async def test_fake_server_command_replays_a_recording() -> None:
    recording = fixture_path("mistral/mistral-large_parallel-2-tools-one-chunk.magentic.sse")
    with fake_server_process("--protocol", "mistral", "--replay", str(recording)) as base_url:
        async with httpx.AsyncClient() as client:
            response = await client.post(base_url + "/chat/completions",
                                         json={"model": "m", "messages": [{"role": "user", "content": "x"}],
                                               "stream": True})
    assert response.content == recording.read_bytes()


def test_fake_server_command_reports_a_bad_script_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "bad.json"
    script.write_text('{"turns": 3}')
    assert main(["fake-server", "--protocol", "openai-chat", "--script", str(script)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("toolwire: The script file") and "must hold a JSON list" in err


def test_record_command_writes_a_redacted_cassette_that_replays(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    cassette, raw = tmp_path / "weather.json", tmp_path / "weather.sse"
    tools = tmp_path / "tools.json"
    tools.write_text(orjson.dumps([{"name": "get_weather", "description": "Weather.",
                                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}])
                     .decode())
    turn = FakeTurn(parts=[FakeText(text="Checking."), FakeToolCall(name="get_weather", arguments={"city": "Rome"})])
    with FakeProviderServer("openai-chat", [turn], api_key=SECRET) as server:
        code = main(["record", "openai:gpt-test", "Weather in Rome?", "--out", str(cassette), "--raw", str(raw),
                     "--tools", str(tools), "--base-url", server.base_url, "--api-key", SECRET])
    out = capsys.readouterr().out
    assert code == 0
    assert "Checking." in out and '[tool call] get_weather {"city":"Rome"}' in out
    assert f"Recorded 1 interaction(s) in {cassette}" in out
    assert SECRET not in cassette.read_text()
    assert server.requests[0].body["tools"][0]["function"]["name"] == "get_weather"

    assert main(["replay", "--protocol", "openai-chat", str(raw), "--json"]) == 0
    replayed = orjson.loads(capsys.readouterr().out)
    assert replayed["finish_reason"] == "tool_calls"
    assert [p["type"] for p in replayed["message"]["parts"]] == ["text", "tool_call"]

    # `toolwire fake-server --replay CASSETTE` serves the recorded responses in order.
    with FakeProviderServer("openai-chat", replies_from_replay_file(cassette, 200, 0.0)) as replaying:
        response = httpx.post(replaying.base_url + "/chat/completions", json={
            "model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text == raw.read_text()


def test_record_command_fails_in_one_line_without_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["record", "anthropic:claude-test", "hi", "--out", str(tmp_path / "c.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("toolwire: No API key for 'anthropic'") and err.count("\n") == 1
