"""bench/store_writes runs as the store guide gives it (at a small size here): both SQLite writers, no errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_store_bench_runs_both_writers_on_sqlite() -> None:
    for writer in ("thread", "aiosqlite"):
        done = subprocess.run([sys.executable, "-m", "bench.store_writes", "--chats", "5", "--db", "sqlite",
                               "--sqlite-writer", writer], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        header, _, row = done.stdout.strip().splitlines()[-3:]
        assert "commits" in header and row.startswith("| SQLite | 5 |") and row.endswith("| 0 |"), done.stdout
        assert "failed" not in done.stderr, done.stderr
