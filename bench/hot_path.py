"""The per-chunk path alone: toolwire's cost per wire event next to the parsing limit, on one tree.

    python -m bench.hot_path                    # the toolwire that is importable
    PYTHONPATH=/other/tree/src python -m bench.hot_path --label before

Runs the generated M and L streams of the three generated protocols through `model.stream` (argument
previews on, as users get them) over `httpx.MockTransport`, in two read patterns: 16 KiB reads (a busy
socket) and one read per event (a quiet one, where per-read overhead shows). Toolwire and the limit
(SSE framing plus `orjson.loads`) are timed in interleaved rounds, in CPU time of this process; the
figure is the fastest round's µs per event (on a shared machine the fastest run is the least disturbed
one, as `timeit` reasons) and its ratio to the fastest limit run. Run it on two trees alternately to
compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time

from .contenders import CONTENDERS, READS
from .streams import generate

__all__ = ["main"]


def measure(protocol: str, size: str, reads: str, rounds: int) -> tuple[float, float]:
    stream = generate(protocol, size, 7)
    chunks = READS[reads](stream.body)
    by_name = {c.name: c for c in CONTENDERS}
    toolwire = by_name["toolwire"].prepare(stream, chunks)
    limit = by_name["limit"].prepare(stream, chunks)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(toolwire())  # type: ignore[arg-type]
    times: list[float] = []
    limits: list[float] = []
    for _ in range(rounds):
        gc.collect(1)
        start = time.process_time()
        limit()
        limits.append(time.process_time() - start)
        gc.collect(1)
        start = time.process_time()
        loop.run_until_complete(toolwire())  # type: ignore[arg-type]
        times.append(time.process_time() - start)
    loop.close()
    return min(times) * 1e6 / stream.events, min(times) / min(limits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hot_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="this tree")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    print(f"{args.label}: µs per event (x limit)")
    for protocol in ("openai-chat", "anthropic", "openai-responses"):
        for size in ("M", "L"):
            row = []
            for reads in ("16k", "event"):
                us, ratio = measure(protocol, size, reads, args.rounds if size == "M" else max(3, args.rounds // 2))
                row.append(f"{reads} reads {us:6.2f} ({ratio:4.2f}x)")
            print(f"  {protocol:<17} {size}  " + "   ".join(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
