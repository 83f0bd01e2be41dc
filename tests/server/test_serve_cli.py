"""`toolwire serve` with no arguments on a machine without provider keys: it works, offline, at once."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.server.support import REPO, read_events
from tests.services import interruptible
from toolwire.demo_tools import DEMO_PROMPT

pytestmark = pytest.mark.anyio


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_HOST")) and k != "GOOGLE_API_KEY"}
    env["PYTHONPATH"] = str(REPO / "src")
    return env


def start_serve(folder: Path) -> tuple[subprocess.Popen[bytes], list[str]]:
    """`toolwire serve --port 0` in `folder`, and what it printed up to the URL to open."""
    process = subprocess.Popen([sys.executable, "-m", "toolwire", "serve", "--port", "0", "--fake-delay", "0"],
                               cwd=folder, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=interruptible)
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(line.startswith("Open ") for line in lines):
        lines.append(process.stdout.readline().decode())
    return process, lines


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=20)  # also closes the pipes


async def test_serve_without_arguments_runs_a_multi_tool_chat_offline(tmp_path: Path) -> None:
    process, lines = start_serve(tmp_path)
    try:
        opened = next(line for line in lines if line.startswith("Open "))
        found = re.fullmatch(r"Open (http://127\.0\.0\.1:\d+)/#token=(\S+)\n", opened)
        assert found, lines
        url, token = found.groups()
        assert "the offline fake model" in lines[0] and "get_weather" in lines[0]
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                     trust_env=False, timeout=30) as client:
            chat = (await client.post("/api/chats", json={})).json()["id"]
            async with client.stream("POST", f"/api/chats/{chat}/messages",
                                     json={"client_message_id": "1", "text": DEMO_PROMPT}) as response:
                events = [e async for e in read_events(response)]
            rows = (await client.get(f"/api/chats/{chat}/messages")).json()["messages"]
            title = (await client.get(f"/api/chats/{chat}")).json()["title"]
        results = [e.data["result"] for e in events if e.type == "tool_result"]
        assert sorted(r["name"] for r in results) == ["book_table", "convert_currency", "find_restaurants",
                                                      "get_weather"]
        assert results[0]["name"] == "book_table"  # the quickest finishes first (and fails)
        assert events[-1].data["status"] == "completed"
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]
        assert title.startswith("I'm in Lisbon this weekend.")
        assert (tmp_path / "toolwire.db").is_file()
    finally:
        stop(process)
    assert process.returncode == 130


def test_serve_explains_bad_options_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "tokens.txt").write_text("alice\n")
    cases: list[tuple[list[str], str, subprocess.Popen[str]]] = []
    for args, expected in ((["--token", "short"], "at least 16 characters"),
                           (["--tokens-file", "tokens.txt"], "USER TOKEN"),
                           (["--tokens-file", "missing.txt"], "Cannot read the tokens file"),
                           (["--db", "mysql://x/y"], "SQLite or PostgreSQL"),
                           (["--db-pool-size", "8"], "drop it with a SQLite database"),
                           (["--db", "postgresql://h/db", "--db-pool-size", "0"], "at least 1"),
                           (["--model", "nope"], "has no provider"),
                           (["--header-timeout", "0"], "--header-timeout must be more than 0"),
                           (["--frame-ancestors", "'self'; script-src *"], "cannot be empty or hold ';'"),
                           (["--mcp", "/no/such/mcp-server"], "Could not connect to the MCP server '/no/such")):
        cases.append((args, expected, subprocess.Popen(
            [sys.executable, "-m", "toolwire", "serve", "--port", "0", *args], cwd=tmp_path, env=clean_env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    for args, expected, process in cases:  # all at once: each is a process start of a second or more
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 1, (args, stderr)
        assert stderr.startswith("toolwire: ") and expected in stderr, (args, stderr)
        assert "Traceback" not in stderr and stderr.count("\n") == 1


def test_serve_tells_option_mistakes_before_importing_the_server(tmp_path: Path) -> None:
    """The server's modules take a second and more to import: `serve` (and every other command, which
    builds the same parser) answers what needs none of them first."""
    (tmp_path / "tokens.txt").write_text("alice\n")
    program = """if True:
        import json, sys
        from toolwire.cli import main
        heavy = ("toolwire.server", "toolwire.store", "sqlalchemy", "starlette", "uvicorn")
        seen = {}
        for args in json.loads(sys.argv[1]):
            code = main(["serve", "--port", "0", *args])
            seen[" ".join(args)] = [code, sorted(m for m in heavy if m in sys.modules)]
        print(json.dumps(seen))
    """
    cases = [["--token", "short"], ["--token", "x" * 16, "--tokens-file", "tokens.txt"],
             ["--tokens-file", "tokens.txt"], ["--tokens-file", "missing.txt"],
             ["--db", "postgresql://h/db", "--db-pool-size", "0"], ["--model", "nope"],
             ["--model", "nope:model"], ["--header-timeout", "0"], ["--limit-concurrency", "-1"]]
    done = subprocess.run([sys.executable, "-c", program, json.dumps(cases)], cwd=tmp_path, env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {" ".join(args): [1, []] for args in cases}, seen
    said = done.stderr.splitlines()
    assert len(said) == len(cases) and all(line.startswith("toolwire: ") for line in said), done.stderr
    assert "'nope' has no provider" in said[5] and "Unknown provider 'nope'" in said[6], said


def test_serve_tunes_the_garbage_collector_once_started() -> None:
    # In a child process: freezing and thresholds are process-wide, and this one is shared with other tests.
    script = ("import gc\nfrom toolwire.cli.serve import _tune_garbage_collector\n"
              "kept = [[i] for i in range(1000)]\n_tune_garbage_collector()\n"
              "print(gc.get_threshold(), gc.get_freeze_count() > len(kept))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "(10000, 10, 10) True"
