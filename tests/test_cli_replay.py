"""`toolwire replay`: human output, --json output, and any byte file without a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import fixture_path
from toolwire.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolwire.cli", *args], capture_output=True, text=True, timeout=60)


def test_json_output_for_a_recorded_stream_gpt_4o_text_then_tool_magentic() -> None:
    path = fixture_path("openai-chat/gpt-4o_text-then-tool.magentic.sse")
    proc = run_cli("replay", "--protocol", "openai-chat", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    data = orjson.loads(lines[0])
    assert set(data) == {"message", "finish_reason", "usage", "error"}
    assert data["finish_reason"] == "tool_calls"
    assert data["usage"] == {"input_tokens": 58, "output_tokens": 32}
    assert data["error"] is None
    assert [p["type"] for p in data["message"]["parts"]] == ["text", "tool_call"]
    assert data["message"]["parts"][1]["arguments"] == {"location": "Paris"}


def test_human_output_lists_events_and_the_message(capsys: pytest.CaptureFixture[str]) -> None:
    path = fixture_path("openai-chat/gpt-4o_parallel-2-tools.magentic.sse")
    assert main(["replay", "-p", "openai-chat", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tool_call_start" in out and "tool_call_end" in out
    assert "assembled message:" in out and "finish_reason: tool_calls" in out


@pytest.mark.parametrize("content", [b"", b"\x00\xff\xfe garbage", b"data: {not json\n\n", b"[1,2", b"\n\n\n"])
def test_any_bytes_give_an_error_object_and_exit_1(tmp_path: Path, content: bytes,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "body"
    path.write_bytes(content)
    assert main(["replay", "-p", "openai-chat", str(path), "--json"]) == 1
    data = orjson.loads(capsys.readouterr().out)
    assert data["error"]["type"] in {"incomplete_stream", "malformed_chunk", "unrecognised_body"}
    assert data["error"]["message"].endswith(".")


def test_missing_file_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "-p", "openai-chat", "/nonexistent/body.sse"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("toolwire: Could not read /nonexistent/body.sse")
    assert "Traceback" not in err
