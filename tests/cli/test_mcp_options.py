"""`toolwire chat` and `run` with `--mcp "cmd args"` / `--mcp-url URL`: an MCP server's tools next to `--tool`s."""

from __future__ import annotations

import sys

import pexpect

from tests.mcp.support import http_process
from toolwire import ToolResultPart, load_messages
from toolwire.testing import FakeProviderServer, FakeText, FakeToolCall, FakeTurn

from .support import clean_env, toolwire
from .test_chat_terminal import chat

SERVER = f"{sys.executable} -m tests.mcp.server"
TURNS = [
    FakeTurn(parts=[FakeText(text="Adding."), FakeToolCall(name="add", arguments={"a": 20, "b": 22}),
                    FakeToolCall(name="local_time", arguments={"city": "Oslo"})]),
    FakeTurn(parts=[FakeText(text="42, and it is 14:05 in Oslo.")]),
]


def test_run_with_an_mcp_server_over_stdio() -> None:
    with FakeProviderServer("openai-chat", TURNS, api_key="sk") as server:
        done = toolwire("run", "openai:gpt-test", "Add 20 and 22.", "--mcp", SERVER,
                        "--tool", "tests.cli.chat_tools:local_time", "--base-url", server.base_url,
                        "--api-key", "sk", "--json", timeout=60)
        offered = [t.name for t in server.requests[0].tools]
    assert done.returncode == 0, done.stderr
    assert offered == ["local_time", "add", "shout", "fail", "slow", "hang", "grow", "picture"]
    results = [p for m in load_messages(done.stdout) for p in m.parts if isinstance(p, ToolResultPart)]
    assert [(r.name, r.result) for r in results] == [("add", {"result": 42}), ("local_time", "14:05 in Oslo")]


def test_run_with_an_mcp_server_over_streamable_http() -> None:
    with http_process() as (url, _), FakeProviderServer("openai-chat", TURNS, api_key="sk") as server:
        done = toolwire("run", "openai:gpt-test", "Add.", "--mcp-url", url, "--tool",
                        "tests.cli.chat_tools:local_time", "--base-url", server.base_url, "--api-key", "sk", "--quiet",
                        timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "42, and it is 14:05 in Oslo.\n"


def test_an_mcp_server_that_cannot_start_is_one_line_on_stderr() -> None:
    done = toolwire("run", "openai:gpt-test", "Hi.", "--mcp", "/no/such/mcp-server --flag", "--base-url",
                    "http://127.0.0.1:9", "--api-key", "sk", env=clean_env(), timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("toolwire: Could not connect to the MCP server '/no/such/mcp-server --flag'")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_chat_lists_the_mcp_tools_and_calls_them() -> None:
    turns = [FakeTurn(parts=[FakeToolCall(name="shout", arguments={"text": "hello"})]),
             FakeTurn(parts=[FakeText(text="The server shouted HELLO!")])]
    with FakeProviderServer("openai-chat", turns, api_key="sk") as server, \
            chat("openai:gpt-test", "--base-url", server.base_url, "--api-key", "sk", "--mcp", SERVER) as term:
        term.wait_text("you>", timeout=30)
        assert "tools: add, shout, fail, slow, hang, grow, picture" in term.text
        term.child.sendline("Shout hello.")
        screen = term.wait_text("The server shouted HELLO!")
        assert "HELLO!" in screen
        term.child.sendline("/exit")
        term.child.expect(pexpect.EOF, timeout=20)
