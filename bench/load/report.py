"""The load benchmark's results: `load.json` (raw), `load.md` (the table README shows) and `load.png`."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.load.__main__ import Outcome

TARGETS = {"one": 250.0, "replicas": 300.0}
"""p99 added latency targets (ms)."""


def _machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {memory:.0f} GiB, Linux {platform.release()}, Python {platform.python_version()}"


def write(outcomes: list[Outcome], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    summaries = [o.summary() for o in outcomes]
    (folder / "load.json").write_text(json.dumps({"machine": _machine(), "scenarios": summaries}, indent=1) + "\n")
    lines = [f"Machine: {_machine()}. Everything on it at once: PostgreSQL, Redis, the model, the servers and the "
             "client.", "",
             "| scenario | streams x events | errors | lost / duplicated | p50 / p90 / p99 / max added latency | "
             "server CPU (cores) | RSS growth | Redis connections per process | Redis CPU | load avg before |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        latency = s["latency_ms"]
        target = TARGETS.get(s["scenario"])
        verdict = "" if target is None else (" ✓" if latency["p99"] <= target else f" ✗ (target {target:.0f})")
        connections = ", ".join(str(v) for v in s["redis_connections_per_process"].values()) or "-"
        redis_cpu = "-" if s["redis_cpu_cores"] is None else f"{s['redis_cpu_cores']}"
        lines.append(
            f"| {s['scenario']} | {s['streams']:,} x {s['events_per_stream']} | {s['errors']} | "
            f"{s['lost']} / {s['duplicated']} | {latency['p50']} / {latency['p90']} / {latency['p99']}{verdict} / "
            f"{latency['max']} ms | {' + '.join(str(c) for c in s['server_cpu_cores'])} | "
            f"{' + '.join(str(r) for r in s['rss_growth_mb'])} MB | {connections} | {redis_cpu} | "
            f"{s['load_average_before'][0]:.2f} |")
    (folder / "load.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (bench/load/run installs it).")
        return
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    for outcome in outcomes:
        ordered = sorted(outcome.latencies)
        if ordered:
            left.plot([v * 1000 for v in ordered], [i / len(ordered) for i in range(len(ordered))],
                      label=f"{outcome.scenario} ({outcome.streams:,} streams)")
        for number, series in enumerate(outcome.rss_series):
            if series:
                base = series[0][1]
                right.plot([t for t, _ in series], [(r - base) / 2**20 for _, r in series],
                           label=f"{outcome.scenario}: server {number}")
    left.set_xscale("log")
    left.set_xlabel("added latency, model → client (ms, log)")
    left.set_ylabel("fraction of text events")
    for name, target in TARGETS.items():
        left.axvline(target, linestyle=":", color="grey")
        left.text(target, 0.02, f" {name} target", rotation=90, color="grey", fontsize=8)
    left.grid(alpha=0.3)
    left.legend(loc="lower right")
    right.set_xlabel("seconds since the first stream")
    right.set_ylabel("RSS growth (MB)")
    right.axhline(150, linestyle=":", color="grey")
    right.grid(alpha=0.3)
    right.legend(loc="upper left", fontsize=8)
    figure.suptitle(f"toolwire serve under load ({_machine()})", fontsize=10)
    figure.tight_layout()
    figure.savefig(folder / "load.png", dpi=110)
