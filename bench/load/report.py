"""The load benchmark's results: `load.json` (raw), `load.md` (the table README shows) and `load.png`."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.load.__main__ import Outcome

TARGETS = {"one": 250.0, "replicas": 300.0}
"""p99 added latency targets (ms)."""

RSS_TARGET_MB = 150.0
"""RSS growth target for 1,000 streams (per server process)."""


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {memory:.0f} GiB, Linux {platform.release()}, Python {platform.python_version()}"


def _row(s: dict[str, Any]) -> str:
    latency = s["latency_ms"]
    target = TARGETS.get(s["scenario"])
    verdict = "" if target is None else (" ✓" if latency["p99"] <= target else " ✗")
    connections = ", ".join(str(v) for v in s["redis_connections_per_process"].values()) or "-"
    redis_cpu = "-" if s["redis_cpu_cores"] is None else f"{s['redis_cpu_cores']}"
    seconds = s["events_per_stream"] * s["interval"]
    kinds = s.get("error_kinds") or {}
    start = s["stream_start_ms"]
    per_event = f" ({s['server_cpu_ms_per_event']} ms/event)" if s.get("server_cpu_ms_per_event") else ""
    busy = s.get("machine_busy_cores", "-")
    errors = f"{s['errors']:,}" + (" (" + "; ".join(f"{n:,} {k}" for k, n in kinds.items()) + ")" if kinds else "")
    return (f"| {s['scenario']} | {s['streams']:,} x {seconds:g} s | {errors} | {s['lost']} / {s['duplicated']} | "
            f"{latency['p50']} / {latency['p90']} / **{latency['p99']}**{verdict} / {latency['max']} | "
            f"{start['p50']} / {start['p99']} | {s['text_events_caught_up']:,} | "
            f"{' + '.join(str(c) for c in s['server_cpu_cores'])}{per_event} | {busy} | "
            f"{' + '.join(str(r) for r in s['rss_growth_mb'])} | {connections} | {redis_cpu} | "
            f"{s['load_average_before'][0]:.1f} |")


def write(outcomes: list[Outcome], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    summaries = [o.summary() for o in outcomes]
    (folder / "load.json").write_text(json.dumps({"machine": machine(), "scenarios": summaries}, indent=1) + "\n")
    lines = [f"Machine: {machine()}; the PostgreSQL server, Redis, the model, the servers and the client all on it.",
             "",
             "| scenario | streams x length | errors | lost / duplicated events | added latency p50 / p90 / **p99** / "
             "max (ms) | stream start p50 / p99 (ms) | events caught up | server CPU (cores) | machine busy (cores) | "
             "RSS growth (MB) | Redis connections per process | Redis CPU (cores) | load average before |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_row(s) for s in summaries]
    (folder / "load.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (bench/load/run installs it).")
        return
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4))
    for scenario, colour in (("one", "tab:blue"), ("replicas", "tab:orange")):
        mine = sorted((s for s in summaries if s["scenario"] == scenario), key=lambda s: s["streams"])
        if not mine:
            continue
        counts = [s["streams"] for s in mine]
        label = "one process" if scenario == "one" else "2 replicas + Redis (followed on the other replica)"
        left.plot(counts, [s["latency_ms"]["p99"] for s in mine], "o-", color=colour, label=f"{label}: p99")
        left.plot(counts, [s["latency_ms"]["p50"] for s in mine], "o--", color=colour, label=f"{label}: p50")
        left.axhline(TARGETS[scenario], linestyle=":", color=colour)
        right.plot(counts, [max(s["rss_growth_mb"]) for s in mine], "o-", color=colour, label=label)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("concurrent streams (5 events/s each)")
    left.set_ylabel("added latency, model → client (ms)")
    left.set_title("latency (dotted: p99 targets)", fontsize=10)
    left.grid(alpha=0.3, which="both")
    left.legend(fontsize=7)
    right.set_xscale("log")
    right.axhline(RSS_TARGET_MB, linestyle=":", color="grey")
    right.set_xlabel("concurrent streams")
    right.set_ylabel("RSS growth of a server process (MB)")
    right.set_title("memory (dotted: the target for 1,000 streams)", fontsize=10)
    right.grid(alpha=0.3, which="both")
    right.legend(fontsize=7)
    figure.suptitle(f"toolwire serve under load ({machine()}, shared)", fontsize=10)
    figure.tight_layout()
    figure.savefig(folder / "load.png", dpi=100)
