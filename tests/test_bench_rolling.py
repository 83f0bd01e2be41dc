"""bench/load's `rolling` scenario runs (at a small size here) and finds what durable runs promise: a replica
restarted under running runs, by SIGTERM with `--drain-handover` or by SIGKILL, leaves no run interrupted and no
non-idempotent tool executed twice (docs/guides/durable-runs.md, "Measured")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(180)  # PostgreSQL, Redis and six server starts: 31 to 70 s on this shared 2-core machine
def test_the_rolling_bench_restarts_a_replica_under_runs_and_loses_none(tmp_path: Path) -> None:
    figures = tmp_path / "rolling.json"
    done = subprocess.run([sys.executable, "-m", "bench.load", "--scenarios", "rolling", "--streams", "6",
                           "--restarts", "1", "--events", "5", "--interval", "0.1", "--tool-seconds", "1",
                           "--warm-up", "0.5", "--lease-seconds", "2", "--no-write", "--json", str(figures)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    variants = {v["variant"]: v for v in json.loads(figures.read_text())}
    assert set(variants) == {"handover", "kill"}
    for name, v in variants.items():
        assert v["runs"] >= 6 and len(v["restarts"]) == 1, (name, v)
        assert v["interrupted"] == 0 and v["failed"] == 0 and v["stuck"] == 0, (name, v)
        assert v["completed"] == v["runs"], (name, v)
        assert v["charge_duplicated"] == 0, (name, v)  # no non-idempotent call ran twice
        assert v["executions"].get("charge", 0) >= 6, (name, v)  # every run's round ran its tools
        assert v["invalid_rounds"] == 0 and v["event_gaps"] == 0 and v["event_repeats"] == 0, (name, v)
        assert v["errors"] == 0 and v["follower_stalls"] == 0, (name, v)
    # The handover variant hands the runs over without cutting any tool off.
    assert variants["handover"]["calls_interrupted"] == {}, variants["handover"]
