"""`toolwire serve`'s generated token survives a restart: kept beside the SQLite database (mode 0600), reused.

A real `python -m toolwire serve` in a subprocess, started twice on one folder; the token it printed the first
time still signs in after the second start. A token given by `--token` or `--tokens-file` leaves no file.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.server.test_serve_cli import clean_env, stop
from tests.services import interruptible
from toolwire.cli._token_file import kept_token, token_file_for
from toolwire.exceptions import UserError


def serve(folder: Path, *args: str) -> tuple[subprocess.Popen[bytes], list[str], str, str]:
    """`toolwire serve --port 0 ...` in `folder`: the process, its first lines, its URL and the token it printed."""
    process = subprocess.Popen([sys.executable, "-m", "toolwire", "serve", "--port", "0", *args], cwd=folder,
                               env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=interruptible)
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any("Open " in line for line in lines):
        line = process.stdout.readline().decode()
        if not line and process.poll() is not None:
            break
        lines.append(line)
    found = next((m for line in lines if (m := re.search(r"Open (http://\S+)/#token=(\S+)", line))), None)
    if found is None:
        stop(process)
        pytest.fail(f"toolwire serve printed no URL: {lines}")
    return process, lines, found.group(1), found.group(2)


def me(url: str, token: str) -> int:
    return httpx.get(f"{url}/api/me", headers={"Authorization": f"Bearer {token}"}, trust_env=False).status_code


def test_the_generated_token_is_kept_private_and_signs_in_after_a_restart(tmp_path: Path) -> None:
    process, lines, url, token = serve(tmp_path)
    try:
        assert me(url, token) == 200
        assert any("toolwire.db.token" in line for line in lines), lines
    finally:
        stop(process)
    kept = tmp_path / "toolwire.db.token"
    assert kept.read_text().strip() == token
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".toolwire.db.token")] == []  # no draft left

    process, _, url, again = serve(tmp_path)
    try:
        assert again == token
        assert me(url, token) == 200
    finally:
        stop(process)


def test_a_configured_token_is_neither_kept_nor_replaced_by_a_kept_one(tmp_path: Path) -> None:
    (tmp_path / "toolwire.db.token").write_text("kept-token-from-an-earlier-start\n")
    os.chmod(tmp_path / "toolwire.db.token", 0o600)
    given = "given-on-the-command-line-0123456789"
    process, _, url, token = serve(tmp_path, "--token", given)
    try:
        assert token == given
        assert me(url, given) == 200
        assert me(url, "kept-token-from-an-earlier-start") == 401
    finally:
        stop(process)
    assert (tmp_path / "toolwire.db.token").read_text() == "kept-token-from-an-earlier-start\n"

    other = tmp_path / "other"
    other.mkdir()
    (other / "tokens.txt").write_text("alice alice-token-0123456789abcdef\n")
    process, _, url, _ = serve(other, "--tokens-file", "tokens.txt")
    try:
        assert me(url, "alice-token-0123456789abcdef") == 200
    finally:
        stop(process)
    assert not (other / "toolwire.db.token").exists()


def test_where_the_token_is_kept(tmp_path: Path) -> None:
    assert token_file_for("toolwire.db") == Path("toolwire.db.token")
    assert token_file_for(f"sqlite:///{tmp_path}/chats.db") == tmp_path / "chats.db.token"
    assert token_file_for("sqlite://") is None
    assert token_file_for("sqlite:///:memory:") is None
    assert token_file_for("postgresql://user:secret@localhost/toolwire") is None


def test_a_kept_token_others_can_read_or_a_damaged_one_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "chats.db.token"
    made = kept_token(path, lambda: "fresh-token-0123456789abcdef")
    assert made == "fresh-token-0123456789abcdef"
    assert kept_token(path, lambda: "never-used-0123456789abcdef") == made
    os.chmod(path, 0o644)
    with pytest.raises(UserError, match="chmod 600"):
        kept_token(path, lambda: "never-used-0123456789abcdef")
    os.chmod(path, 0o600)
    path.write_text("short\n")
    with pytest.raises(UserError, match="delete the file"):
        kept_token(path, lambda: "never-used-0123456789abcdef")


def test_a_token_kept_a_moment_ago_by_another_server_wins(tmp_path: Path) -> None:
    path = tmp_path / "chats.db.token"

    def racing() -> str:
        # Another server links its token into place between this one's look and its own link.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write("the-other-servers-token-0123456789\n")
        return "this-servers-token-0123456789abcd"

    assert kept_token(path, racing) == "the-other-servers-token-0123456789"
    assert path.read_text().strip() == "the-other-servers-token-0123456789"


def test_a_start_that_fails_on_its_options_keeps_no_token(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "toolwire", "serve", "--port", "0", "--model", "nope"], cwd=tmp_path,
                          env=clean_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "has no provider" in done.stderr
    assert not (tmp_path / "toolwire.db.token").exists()
