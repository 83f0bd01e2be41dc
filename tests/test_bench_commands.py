"""The benchmark commands the guides give run (at a small size here): the store writers, the model pool."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_store_bench_runs_on_sqlite() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.store_writes", "--chats", "5", "--db", "sqlite"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    header, _, row = done.stdout.strip().splitlines()[-3:]
    assert "commits" in header and row.startswith("| SQLite | 5 |") and row.endswith("| 0 |"), done.stdout
    assert "failed" not in done.stderr, done.stderr


def test_the_store_bench_one_chat_at_a_time_commits_each_write_alone() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.store_writes", "--chats", "4", "--at-once", "1", "--db",
                           "sqlite"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    cells = [cell.strip() for cell in done.stdout.strip().splitlines()[-1].split("|")[1:-1]]
    assert cells[:2] == ["SQLite", "4"] and cells[-1] == "0", done.stdout
    assert cells[2] == cells[3] == "36", done.stdout  # 9 write calls per chat, each its own commit


def test_the_model_pool_bench_runs() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.model_pool", "--streams", "8", "--requests", "5", "--shards", "4"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("8 streams open: pool bookkeeping ") and "with 4 pools" in done.stdout, done.stdout


def test_the_branches_bench_runs_on_sqlite() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.branches", "--rows", "300", "--branches", "6", "--repeat", "3",
                           "--db", "sqlite"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    header, _, row = done.stdout.strip().splitlines()[-3:]
    assert "load p50 ms" in header and row.startswith("| SQLite | 300 | 6 |"), done.stdout


def test_the_wakeups_bench_counts_a_servers_callbacks() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.side_by_side.wakeups", "--chats", "2", "--interval", "0.05",
                           "--by-callback", "5"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    last = lines[-1]
    assert last.startswith("this tree (median of 1): callbacks_per_delta "), done.stdout
    per_delta = float(last.split("callbacks_per_delta ")[1].split(",")[0])
    assert 0 < per_delta < 50, done.stdout  # counted (the server's hook ran), and per delta, not per chat
    # By name: five per pass, most run first, the chat's tasks among them.
    for pass_name in ("long", "short"):
        start = lines.index(f"this tree, {pass_name} pass: callbacks per chat by name (the 5 most run)")
        listed = [float(line.split()[0]) for line in lines[start + 1:start + 6]]
        assert len(listed) == 5 and listed == sorted(listed, reverse=True) and listed[-1] > 0, done.stdout
    assert any(" task " in line and ">" in line for line in lines), done.stdout
