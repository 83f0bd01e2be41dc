"""The side-by-side run's results: `side_by_side.json` (raw) and `side_by_side.md` (the tables README points to).

    python -m bench.side_by_side.report bench/results/side_by_side.json   # the tables again from a run's numbers
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bench.load.report import machine

FLOOR = "relay"
PEERS = {"pydantic-ai": "pydantic-ai", "ai-sdk": "AI SDK"}
ONE_PROCESS = ("toolwire-sqlite", "toolwire-sqlite-vercel", "toolwire-pg", "toolwire-pg-vercel")
GOALS = {"p99_sizes": (200, 500), "cpu_ratio": 1.5, "clean_size": 1000}
"""Issue #22's targets: p99 at or below the AI SDK's at these N; CPU per chat and per delta at most 1.5x the
floor's; no chat stuck, no error, nothing lost at 1,000."""


def ratio(mine: float | None, theirs: float | None) -> str:
    """mine ÷ theirs; "-" when either is missing or not positive (a split the run could not resolve)."""
    if mine is None or theirs is None or mine <= 0 or theirs <= 0:
        return "-"
    return f"{mine / theirs:.2f}x"


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


Pass = tuple[int, int | None]
"""A pass's N, and its round of `--repeat` (`None` for a run of one round)."""


def _by_size(results: Iterable[Mapping[str, Any]]) -> dict[Pass, dict[str, Mapping[str, Any]]]:
    sizes: dict[Pass, dict[str, Mapping[str, Any]]] = {}
    for result in results:
        if not result.get("skipped"):
            sizes.setdefault((result["chats"], result.get("round")), {})[result["kind"]] = result
    return dict(sorted(sizes.items(), key=lambda item: (item[0][0], item[0][1] or 0)))


def _title(key: Pass) -> str:
    chats, round_ = key
    return f"N = {chats:,}" + (f", round {round_}" if round_ else "")


def _result_row(result: Mapping[str, Any], floor: Mapping[str, Any] | None) -> str:
    latency = result["latency_ms"]
    kinds = result.get("error_kinds") or {}
    errors = f"{result['errors']:,}" + (" (" + "; ".join(f"{n} x {k}" for k, n in kinds.items()) + ")" if kinds else "")
    short = result.get("short_pass")
    if short and (short["stuck"] or short["errors"]):
        errors += f" (short pass: {short['stuck']} stuck, {short['errors']} errors)"
    return (f"| {result['label']} | {result['finished']:,} / **{result['stuck']:,}** | {errors} | {result['lost']:,} | "
            f"{_number(latency['p50'])} / **{_number(latency['p99'])}** | {_chat_seconds(result)} | "
            f"{_number(result['cpu_ms_per_chat'])} | "
            f"{_number(result['cpu_ms_per_delta'], 3)} | {_number(result['fixed_cpu_ms_per_chat'])} | "
            f"{ratio(result['cpu_ms_per_chat'], floor and floor['cpu_ms_per_chat'])} | "
            f"{ratio(latency['p99'], floor and floor['latency_ms']['p99'])} | "
            f"{_number(result['rss_peak_mb'])} (+{_number(result['rss_growth_mb'])}) | "
            f"{_number(result['server_cpu_cores'], 2)} | {result['load_average_before'][0]:.1f} |")


def _chat_seconds(result: Mapping[str, Any]) -> str:
    """Finished chats' time from POST to end (older results have none)."""
    seconds = result.get("chat_seconds")
    if not seconds or seconds.get("p50") is None:
        return "-"
    return f"{seconds['p50']:.1f} / {seconds['p99']:.1f}"


def _ratio_row(result: Mapping[str, Any], others: Mapping[str, Mapping[str, Any]]) -> str:
    cells = [result["label"]]
    for measure in ("cpu_ms_per_chat", "cpu_ms_per_delta", "fixed_cpu_ms_per_chat"):
        cells += [ratio(result[measure], others[name][measure] if name in others else None)
                  for name in (FLOOR, *PEERS)]
    cells += [ratio(result["latency_ms"]["p99"], others[name]["latency_ms"]["p99"] if name in others else None)
              for name in (FLOOR, *PEERS)]
    return "| " + " | ".join(cells) + " |"


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def _goals(sizes: Mapping[Pass, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    lines = []
    for key, kinds in sizes.items():
        chats = key[0]
        floor, ai_sdk = kinds.get(FLOOR), kinds.get("ai-sdk")
        for name in ONE_PROCESS:
            mine = kinds.get(name)
            if mine is None:
                continue
            checks = []
            if chats in GOALS["p99_sizes"] and ai_sdk and mine["latency_ms"]["p99"] is not None \
                    and ai_sdk["latency_ms"]["p99"] is not None:
                checks.append(f"p99 {mine['latency_ms']['p99']:,} ms vs the AI SDK's {ai_sdk['latency_ms']['p99']:,} "
                              f"{_mark(mine['latency_ms']['p99'] <= ai_sdk['latency_ms']['p99'])}")
            for measure, name in (("cpu_ms_per_chat", "CPU per chat"), ("cpu_ms_per_delta", "CPU per delta")):
                if floor and floor[measure] and floor[measure] > 0 and mine[measure] and mine[measure] > 0:
                    times = mine[measure] / floor[measure]
                    checks.append(f"{name} {times:.2f}x the floor's {_mark(times <= GOALS['cpu_ratio'])}")
            if chats >= GOALS["clean_size"]:
                clean = not (mine["stuck"] or mine["errors"] or mine["lost"])
                checks.append(f"stuck / errors / lost {mine['stuck']} / {mine['errors']} / {mine['lost']} "
                              f"{_mark(clean)}")
            if checks:
                lines.append(f"- {_title(key)}, {mine['label']}: " + "; ".join(checks))
        one, two = kinds.get("toolwire-redis-1"), kinds.get("toolwire-redis-2")
        if one and two:
            lines.append(f"- {_title(key)}, PostgreSQL + Redis: p99 {_number(one['latency_ms']['p99'])} ms on one "
                         f"replica, {_number(two['latency_ms']['p99'])} ms on two (stuck {one['stuck']} / "
                         f"{two['stuck']}); two replicas carry 1.8x one's chats when two's p99 at 1.8 N is at most "
                         "one's at N")
    return lines


def _over_rounds(sizes: Mapping[Pass, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """With `--repeat`: per N and server, its ratio to the floor within each round (the floor ran in the same round,
    minutes apart, so what slowed the machine for a while slowed both) and the median of those; and how many rounds
    its p99 was at or below the AI SDK's of the same round. One pass at N = 200 moves by a quarter from one run to the
    next (the floor's own CPU per chat measured 13 to 20 ms in three runs), which a median of paired ratios evens
    out."""
    rounds: dict[int, list[Mapping[str, Mapping[str, Any]]]] = {}
    for (chats, round_), kinds in sizes.items():
        if round_:
            rounds.setdefault(chats, []).append(kinds)
    lines = []
    for chats, passes in rounds.items():
        if len(passes) < 2:
            continue
        for name in ONE_PROCESS:
            checks = []
            for measure, what in (("cpu_ms_per_chat", "CPU per chat"), ("cpu_ms_per_delta", "CPU per delta")):
                paired = [kinds[name][measure] / kinds[FLOOR][measure] for kinds in passes
                          if name in kinds and FLOOR in kinds and (kinds[name][measure] or 0) > 0
                          and (kinds[FLOOR][measure] or 0) > 0]
                if paired:
                    median = statistics.median(paired)
                    checks.append(f"{what} ÷ the floor's " + ", ".join(f"{times:.2f}x" for times in paired)
                                  + f", median **{median:.2f}x** {_mark(median <= GOALS['cpu_ratio'])}")
            if chats in GOALS["p99_sizes"]:
                p99s = [(kinds[name]["latency_ms"]["p99"], kinds["ai-sdk"]["latency_ms"]["p99"]) for kinds in passes
                        if name in kinds and "ai-sdk" in kinds and kinds[name]["latency_ms"]["p99"] is not None
                        and kinds["ai-sdk"]["latency_ms"]["p99"] is not None]
                if p99s:
                    below = sum(mine <= theirs for mine, theirs in p99s)
                    checks.append(f"p99 at or below the AI SDK's in {below} of {len(p99s)} rounds (median "
                                  f"{statistics.median(m for m, _ in p99s):,.1f} vs "
                                  f"{statistics.median(t for _, t in p99s):,.1f} ms) {_mark(below * 2 > len(p99s))}")
            if checks:
                label = next(kinds[name]["label"] for kinds in passes if name in kinds)
                lines.append(f"- N = {chats:,}, {label}, over {len(passes)} rounds: " + "; ".join(checks))
    return lines


def _scaling(results: Iterable[Mapping[str, Any]]) -> list[str]:
    """Two replicas against one (issue #22: at least 1.8x the chats at the same p99): for each one-replica pass,
    the most chats a two-replica pass carried with a p99 at or below that pass's, nothing stuck and no error. The
    ratio is a lower bound when two's largest N run stayed below: its next size was not run."""
    done = [r for r in results if not r.get("skipped") and r["latency_ms"]["p99"] is not None]
    ones = sorted((r for r in done if r["kind"] == "toolwire-redis-1"), key=lambda r: r["chats"])
    twos = sorted((r for r in done if r["kind"] == "toolwire-redis-2"), key=lambda r: r["chats"])
    if not ones or not twos:
        return []
    lines = []
    for one in ones:
        p99 = one["latency_ms"]["p99"]
        carried = [two for two in twos if two["latency_ms"]["p99"] <= p99 and not two["stuck"] and not two["errors"]]
        tried = ", ".join(f"{two['chats']:,}: {_number(two['latency_ms']['p99'])} ms" for two in twos)
        if not carried:
            lines.append(f"- one replica at N = {one['chats']:,}: p99 {_number(p99)} ms; two replicas carried none of "
                         f"the sizes run at or below it ({tried}) {_mark(False)}")
            continue
        best = max(carried, key=lambda two: two["chats"])
        times = best["chats"] / one["chats"]
        bound = "at least " if best is twos[-1] else ""
        lines.append(f"- one replica at N = {one['chats']:,}: p99 {_number(p99)} ms; two replicas carried N = "
                     f"{best['chats']:,} at or below it, {bound}{times:.1f}x ({tried}) {_mark(times >= 1.8)}")
    return lines


def markdown(run: Mapping[str, Any]) -> str:
    results = run["results"]
    sizes = _by_size(results)
    shape = run["shape"]
    lines = [f"Machine: {run['machine']}; the model, the servers, PostgreSQL, Redis and the client all on it "
             "(shared: see the load average before each row).",
             "",
             "CPU is the server processes' own (PostgreSQL's and Redis's are not counted), from before the first chat "
             "is created to the end. *CPU ms per chat* is the measured pass's whole cost divided by its chats; *per "
             "delta* and *fixed per chat* are the line through it and a pass of as many short chats (4 deltas, as "
             "long in time) on the same servers. A per-delta figure at or below zero means the two passes differed "
             "by less than the CPU clock (10 ms ticks) and the machine's noise resolve (more or longer chats "
             "needed); its ratios are left out (-).",
             "",
             f"Each chat: {shape['events']} text deltas, two tool calls streamed in parallel ({shape['argument_deltas']} "
             f"argument deltas each), the tools run, {shape['events']} more text deltas: "
             f"{shape['deltas_per_chat']} deltas, one every {shape['interval']:g} s, two model requests. "
             f"Chats started at {shape['ramp_rate']:g} per second; a chat not finished "
             f"{shape['grace']:g} s after the ramp and its own length is stuck. Command: `{run['command']}`.",
             ""]
    if shape.get("server_cpu"):
        throttled = ", ".join(f"{r['label']} at N = {r['chats']:,}: {r['throttled_s']:g} s" for r in results
                              if r.get("throttled_s") is not None)
        lines += [f"Each server process was capped at {shape['server_cpu']:g} of a core (a cgroup each, "
                  "`--server-cpu`); the kernel held them back, for having used their quota, for: "
                  f"{throttled or 'no time'}.", ""]
    skipped = [r for r in results if r.get("skipped")]
    if skipped:
        lines += [f"Not run: {r['label']} at N = {r['chats']}: {r['skipped']}" for r in skipped] + [""]
    for key, kinds in sizes.items():
        floor = kinds.get(FLOOR)
        lines += [f"### {_title(key)}: concurrent chats", "",
                  "| server | finished / **stuck** | errors | deltas lost | added latency p50 / **p99** (ms) | "
                  "chat time p50 / p99 (s) | CPU ms per chat | CPU ms per delta | fixed CPU ms per chat | CPU per chat ÷ floor | p99 ÷ floor | "
                  "RSS peak (growth), MB | server cores | load average before |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        lines += [_result_row(result, floor) for result in kinds.values()]
        lines.append("")
    lines += ["### Ratios to the floor and to each peer", "",
              "CPU per chat, per delta and fixed per chat, and p99 added latency, of each server divided by the "
              "floor's and each peer's at the same N (below 1: cheaper or faster).", ""]
    for key, kinds in sizes.items():
        header = ["server"] + [f"{measure} ÷ {name}" for measure in ("CPU/chat", "CPU/delta", "fixed CPU", "p99")
                               for name in ("floor", *PEERS.values())]
        lines += [f"{_title(key)}:", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += [_ratio_row(result, kinds) for name, result in kinds.items() if name != FLOOR]
        lines.append("")
    goals = _over_rounds(sizes) + _goals(sizes) + _scaling(results)
    if goals:
        lines += ["### Issue #22's targets", "", *goals, ""]
    return "\n".join(lines)


def write(results: list[dict[str, Any]], args: argparse.Namespace, command: str) -> Path:
    """Write the raw numbers and the tables into `args.out`; returns the table's path."""
    folder: Path = args.out
    folder.mkdir(parents=True, exist_ok=True)
    deltas = next((r["deltas_per_chat"] for r in results if r["deltas_per_chat"]), 0)
    run = {"machine": machine(), "command": command,
           "shape": {"events": args.events, "argument_deltas": args.argument_deltas, "deltas_per_chat": deltas,
                     "interval": args.interval, "ramp_rate": args.ramp_rate, "grace": args.grace,
                     "server_cpu": getattr(args, "server_cpu", None),
                     "per_replica": getattr(args, "per_replica", False)},
           "results": results}
    (folder / "side_by_side.json").write_text(json.dumps(run, indent=1) + "\n")
    table = folder / "side_by_side.md"
    table.write_text(markdown(run))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path, nargs="?", default=Path("bench/results/side_by_side.json"))
    path = parser.parse_args().raw
    run = json.loads(path.read_text())
    path.with_suffix(".md").write_text(markdown(run))


if __name__ == "__main__":
    main()
