"""One long event in small reads: framing must take time linear in the event's size.

    python -m bench.framing

Feeds one event of 1, 2, 4 and 8 MB (a Gemini call carrying a whole file arrives that way) in 1 KiB
reads to each framing: the SSE decoder, the JSON-lines parser (Ollama) and Gemini's JSON-array
splitter, and prints the seconds and the growth per doubling (2.0 is linear, 4.0 quadratic).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from toolwire._accumulate import Accumulator
from toolwire.wire import protocol_class

__all__ = ["main"]


def _bodies(size: int) -> dict[str, tuple[str, bytes]]:
    text = b"x" * size
    return {
        "SSE (openai-chat)": ("openai-chat", b'data: {"choices": [{"index": 0, "delta": {"content": "' + text
                              + b'"}, "finish_reason": "stop"}]}\n\n'),
        "JSON lines (ollama)": ("ollama", b'{"message": {"content": "' + text + b'"}, "done": true}\n'),
        "JSON array (gemini)": ("gemini", b'[{"candidates": [{"content": {"parts": [{"text": "' + text
                                + b'"}]}, "finishReason": "STOP"}]}]'),
    }


def _time(protocol: str, body: bytes, read: int, size: int) -> float:
    acc = Accumulator(previews=False)
    parser = protocol_class(protocol)().new_parser(acc)
    start = time.perf_counter()
    for offset in range(0, len(body), read):
        parser.feed(body[offset:offset + read])
    message = parser.close()
    elapsed = time.perf_counter() - start
    assert acc.error is None, acc.error
    assert len(message.text) == size
    return elapsed


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.framing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--read", type=int, default=1024, help="bytes per read (default 1024)")
    parser.add_argument("--max-mb", type=int, default=8)
    args = parser.parse_args(argv)
    sizes = [mb for mb in (1, 2, 4, 8, 16) if mb <= args.max_mb]
    out(f"one event in {args.read}-byte reads: seconds (growth per doubling)")
    for name in _bodies(1):
        row, previous = [], None
        for mb in sizes:
            protocol, body = _bodies(mb * 1_000_000)[name]
            seconds = _time(protocol, body, args.read, mb * 1_000_000)
            growth = f" x{seconds / previous:.1f}" if previous else ""
            row.append(f"{mb} MB {seconds:.3f}s{growth}")
            previous = seconds
        out(f"  {name:<20} " + ", ".join(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
