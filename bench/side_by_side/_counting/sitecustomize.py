"""Loaded by the Python processes `bench.side_by_side.wakeups` starts (this folder is on their PYTHONPATH): when
`TOOLWIRE_BENCH_COUNTS` names a file, every callback the process's asyncio loops run is counted (a task step is
one: a task woken by a future, a ready socket, a timer), and SIGUSR1 writes `<count> <CPU seconds>` to that file."""

import os

_FILE = os.environ.get("TOOLWIRE_BENCH_COUNTS")

if _FILE:
    import asyncio.events
    import signal
    import time

    _counted = [0]
    _run = asyncio.events.Handle._run

    def _counting_run(self: asyncio.events.Handle) -> None:
        _counted[0] += 1
        _run(self)

    def _report(_signal: int, _frame: object) -> None:
        with open(f"{_FILE}.tmp", "w") as out:
            out.write(f"{_counted[0]} {time.process_time()}\n")
        os.replace(f"{_FILE}.tmp", _FILE)

    asyncio.events.Handle._run = _counting_run  # type: ignore[method-assign]
    signal.signal(signal.SIGUSR1, _report)
