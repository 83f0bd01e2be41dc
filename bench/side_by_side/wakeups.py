"""Event-loop callbacks and CPU per streamed delta in `toolwire serve`: the task hand-offs of issue #22.

    .venv/bin/python -m bench.side_by_side.wakeups --chats 50
    .venv/bin/python -m bench.side_by_side.wakeups --chats 50 --before /tmp/main-tree/src --rounds 3
    .venv/bin/python -m bench.side_by_side.wakeups --chats 50 --store postgresql

The side-by-side run's chats (`bench/side_by_side`: the paced model, 10 text deltas, two tool calls of 10
argument deltas each, 10 more text deltas) against `toolwire serve` on SQLite (or `--store postgresql`), on its
native route. The server process counts every callback its asyncio loop runs (a task step is one: a task woken
by a future, a socket ready, a timer) through the `sitecustomize` in `_counting/`, put on its PYTHONPATH, and
reports the count with its CPU time when sent SIGUSR1. A pass of N chats of 40 deltas and a pass of N chats of 4 deltas (as long in
time, so as many at once) give the line through the two: callbacks and CPU ms per delta, and the fixed part per
chat. The count does not depend on how busy the machine is (the CPU does); a delta that several tasks hand on to
one another costs a callback per hand-off. With `--before SRC`, a server from that tree runs the same passes
right after this tree's, `--rounds` times in turn. `--by-callback N` also lists, per chat of each pass, the N
callbacks run most often (a task's steps by the coroutines they resume, other callbacks by name): wake-ups
of the loop from other threads (`_read_from_self`) and the tasks a chat keeps busy show there.

    .venv/bin/python -m bench.side_by_side.wakeups --chats 50 --by-callback 25
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench.load.__main__ import REPO, services, start, start_servers, stop
from bench.side_by_side.__main__ import KINDS, Outcome, exercise
from bench.side_by_side.tools import TOOLS_MODULE

COUNTING = Path(__file__).parent / "_counting"


def snapshot(pid: int, counts: Path) -> tuple[int, float]:
    """The server's callbacks so far and its CPU seconds (it writes them when sent SIGUSR1, after the callbacks by
    name when it counts those: `names`)."""
    before = counts.stat().st_mtime_ns if counts.exists() else 0
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not counts.exists() or counts.stat().st_mtime_ns == before:
        if time.monotonic() > deadline:
            raise RuntimeError("The server did not report its callbacks (is _counting/ on its PYTHONPATH?).")
        time.sleep(0.01)
    count, cpu = counts.read_text().split()
    return int(count), float(cpu)


def names(counts: Path) -> collections.Counter[str]:
    """The callbacks by name as of the last snapshot (empty when the server does not count them)."""
    written = counts.with_name(counts.name + ".names")
    return collections.Counter(json.loads(written.read_text())) if written.exists() else collections.Counter()


def one_server(src: Path | None, args: argparse.Namespace,
               by_name: dict[str, collections.Counter[str]] | None = None) -> dict[str, float]:
    """Warm-up, then the long and the short pass on a fresh model process and server; the line through them.
    With `by_name`, each pass's callbacks by name, per chat, go there (under the pass's name)."""
    with tempfile.TemporaryDirectory(prefix="toolwire-wakeups-") as temp, ExitStack() as stack:
        folder = Path(temp)
        database = str(folder / "bench.db")
        if args.store == "postgresql":  # a fresh database on the tests' PostgreSQL, as bench/side_by_side's
            database, _, _ = stack.enter_context(services(False))
        counts = folder / "counts"
        provider, found = start([sys.executable, "-m", "bench.load.provider", "--shape", "agent",
                                 "--events", "10", "--argument-deltas", "10", "--interval", str(args.interval)],
                                folder / "provider.log", rb"Listening on port (\d+)",
                                {**os.environ, "PYTHONPATH": str(REPO)})
        os.environ["PYTHONPATH"] = str(COUNTING)  # (start_servers adds it to the server's own)
        os.environ["TOOLWIRE_BENCH_COUNTS"] = str(counts)
        if by_name is not None:
            os.environ["TOOLWIRE_BENCH_CALLBACK_NAMES"] = "1"
        try:
            [server] = start_servers(1, folder, database, int(found.group(1)), None,
                                     extra=["--tools", TOOLS_MODULE, "--max-steps", "5"], src=src)
        finally:
            del os.environ["PYTHONPATH"], os.environ["TOOLWIRE_BENCH_COUNTS"]
            os.environ.pop("TOOLWIRE_BENCH_CALLBACK_NAMES", None)
        try:
            pid = server.process.pid
            short_interval = args.interval * 40 / 4
            passes = {}
            for name, chats, events, deltas, interval in [("warm-up", 2, 10, 10, args.interval),
                                                           ("long", args.chats, 10, 10, args.interval),
                                                           ("short", args.chats, 1, 1, short_interval)]:
                outcome = Outcome("toolwire-sqlite", chats, events, deltas, interval)
                count, cpu = snapshot(pid, counts)
                named = names(counts)
                asyncio.run(exercise(KINDS["toolwire-sqlite"], [server], args, outcome))
                count_after, cpu_after = snapshot(pid, counts)
                if by_name is not None:
                    pass_names = names(counts)
                    pass_names.subtract(named)
                    by_name[name] = collections.Counter({key: value / chats for key, value in pass_names.items()
                                                         if value > 0})
                if outcome.errors or outcome.stuck or outcome.lost:
                    raise RuntimeError(f"{name} pass: {outcome.stuck} stuck, {outcome.lost} lost, {outcome.errors[:3]}")
                passes[name] = ((count_after - count) / chats, (cpu_after - cpu) * 1000 / chats)
        finally:
            stop(server.process)
            stop(provider)
    (long_calls, long_cpu), (short_calls, short_cpu) = passes["long"], passes["short"]
    return {"callbacks_per_delta": (long_calls - short_calls) / 36, "callbacks_per_chat": long_calls,
            "cpu_ms_per_delta": (long_cpu - short_cpu) / 36, "cpu_ms_per_chat": long_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.side_by_side.wakeups", description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=50, help="chats at once in each pass (default 50)")
    parser.add_argument("--before", type=Path, default=None, help="another toolwire source tree to compare with")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite",
                        help="the server's database (default sqlite; postgresql: the tests' server, from "
                             "scripts/test-services)")
    parser.add_argument("--rounds", type=int, default=1, help="passes of each tree, in turn (default 1)")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between a chat's deltas")
    parser.add_argument("--ramp-rate", type=float, default=100.0, help="chats started per second")
    parser.add_argument("--grace", type=float, default=30.0, help="seconds a chat may run late before it is stuck")
    parser.add_argument("--by-callback", type=int, default=0, metavar="N",
                        help="also list the N callbacks run most per chat in each pass (of the last round)")
    args = parser.parse_args()
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.before is not None:
        trees.append(("before", args.before))
    found: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
    for round_ in range(args.rounds):
        for label, src in trees:
            by_name: dict[str, collections.Counter[str]] | None = {} if args.by_callback else None
            row = one_server(src, args, by_name)
            found[label].append(row)
            if by_name is not None and round_ == args.rounds - 1:
                for pass_name in ("long", "short"):
                    print(f"{label}, {pass_name} pass: callbacks per chat by name (the {args.by_callback} most run)")
                    for key, value in by_name[pass_name].most_common(args.by_callback):
                        print(f"  {value:8.2f}  {key}")
            print(f"round {round_ + 1}, {label}: load average {os.getloadavg()[0]:.1f}; "
                  + ", ".join(f"{key} {value:.3f}" for key, value in row.items()), flush=True)
    for label, rows in found.items():
        print(f"{label} (median of {len(rows)}): "
              + ", ".join(f"{key} {statistics.median(r[key] for r in rows):.3f}" for key in rows[0]), flush=True)


if __name__ == "__main__":
    main()
