"""The `toolwire` logger: silent by default; run lifecycle, retries, provider errors and tool failures when enabled."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from tests.cli.support import clean_env
from toolwire import Agent, ProviderHTTPError, tool
from toolwire.testing import FakeHTTPError, FakeProviderServer, FakeText, FakeToolCall, FakeTurn, ScriptedModel

pytestmark = pytest.mark.anyio


@tool
def explode() -> str:
    """Fails."""
    raise RuntimeError("boom")


async def test_lifecycle_retries_provider_errors_and_tool_failures_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="toolwire")
    turns = [FakeHTTPError(status=503, message="Busy."),
             FakeTurn(parts=[FakeText(text="Trying."), FakeToolCall(name="explode", arguments={})]),
             FakeHTTPError(status=400, message="Bad request.")]
    with FakeProviderServer("openai-chat", turns, api_key="sk") as server:
        agent = Agent("openai:gpt-test", tools=[explode], base_url=server.base_url, api_key="sk")
        agent.model.retry.base_delay = 0.01  # type: ignore[attr-defined]
        async with agent:
            with pytest.raises(ProviderHTTPError):
                await agent.run("Go.")
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("toolwire")]
    text = "\n".join(f"{level} {message}" for level, message in lines)
    assert "DEBUG Run " in text and "started (model openai:gpt-test" in text
    assert "INFO Retrying the request to openai in" in text and "after HTTP 503 (retry 1 of 2)" in text
    assert "WARNING Tool 'explode'" in text and "raised RuntimeError" in text
    assert "WARNING Run " in text and "stopped by a provider error: openai answered HTTP 400" in text
    (tool_record,) = [r for r in caplog.records if r.getMessage().startswith("Tool 'explode'")]
    assert tool_record.exc_info is not None  # the traceback goes with it


async def test_a_completed_run_logs_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolwire")
    await Agent(ScriptedModel(["Hi."])).run("Hello.")
    assert [r for r in caplog.records if r.name.startswith("toolwire")] == []


def test_nothing_is_printed_without_logging_configured() -> None:
    code = ("from toolwire import Agent, tool\n"
            "from toolwire.testing import ScriptedModel, ToolCall\n"
            "@tool\n"
            "def f() -> str:\n"
            "    '''F.'''\n"
            "    raise RuntimeError('boom')\n"
            "print(Agent(ScriptedModel([ToolCall('f', {})], ['ok']), tools=[f]).run_sync('go').output)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")
