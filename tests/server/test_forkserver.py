"""The fork server (tests/server/forkserver.py) starts `python -m toolwire ...` as the interpreter would: its
arguments, environment, folder and output files are the start's own, and its exit status reads as
`subprocess.Popen`'s (a code, or minus the signal that ended it)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

import toolwire
from tests.server import forkserver
from tests.server.support import REPO

pytestmark = pytest.mark.skipif(not forkserver.ENABLED, reason="TOOLWIRE_TEST_FORK_SERVER=0 starts with Popen")


def start(tmp_path: Path, *args: str, **env: str) -> forkserver.ForkedProcess:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    process = forkserver.popen([sys.executable, "-m", "toolwire", *args], cwd=tmp_path, stdout=tmp_path / "out",
                               stderr=tmp_path / "err",
                               env={**base, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")]), **env})
    assert isinstance(process, forkserver.ForkedProcess)
    return process


def test_a_forked_command_gets_its_arguments_and_exit_code(tmp_path: Path) -> None:
    version = start(tmp_path, "--version")
    assert version.wait(timeout=30) == 0
    assert (tmp_path / "out").read_text() == f"toolwire {toolwire.__version__}\n"
    refused = start(tmp_path, "serve", "--port", "0", "--token", "short")
    assert refused.wait(timeout=30) == 1
    said = (tmp_path / "err").read_text()
    assert said.startswith("toolwire: ") and "at least 16 characters" in said and said.count("\n") == 1


def test_a_forked_server_has_the_starts_environment_and_folder_and_ends_by_its_signal(tmp_path: Path) -> None:
    args = ("serve", "--port", "0", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1")
    without_key = start(tmp_path, *args)
    assert without_key.wait(timeout=30) == 1
    assert "set OPENAI_API_KEY" in (tmp_path / "err").read_text()
    server = start(tmp_path, *args, OPENAI_API_KEY="k")
    deadline = time.monotonic() + 60
    while "Listening on" not in (tmp_path / "out").read_text():
        assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "err").read_text()
        time.sleep(0.02)
    assert (tmp_path / "toolwire.db").exists()  # the default database, in the start's folder
    assert Path(f"/proc/{server.pid}/cwd").resolve() == tmp_path.resolve()
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == -signal.SIGTERM  # uvicorn re-raises the signal it caught, as under Popen
    killed = start(tmp_path, *args, OPENAI_API_KEY="k")
    killed.kill()
    assert killed.wait(timeout=30) == -signal.SIGKILL
