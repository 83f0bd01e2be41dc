"""Loaded by the Python processes `bench.side_by_side.wakeups` starts (this folder is on their PYTHONPATH): when
`TOOLWIRE_BENCH_COUNTS` names a file, every callback the process's asyncio loops run is counted (a task step is
one: a task woken by a future, a ready socket, a timer), and SIGUSR1 writes `<count> <CPU seconds>` to that file.
With `TOOLWIRE_BENCH_CALLBACK_NAMES` set, each callback is also counted by name (a task's step by the chain of
coroutines it resumes, anything else by its function's name) and SIGUSR1 writes those counts as JSON to
`<file>.names`: what `wakeups --by-callback` lists."""

import os

_FILE = os.environ.get("TOOLWIRE_BENCH_COUNTS")

if _FILE:
    import asyncio.events
    import collections
    import json
    import signal
    import time

    _counted = [0]
    _names: "collections.Counter[str] | None" = (
        collections.Counter() if os.environ.get("TOOLWIRE_BENCH_CALLBACK_NAMES") else None)
    _run = asyncio.events.Handle._run

    def _name(handle: asyncio.events.Handle) -> str:
        callback = handle._callback  # type: ignore[attr-defined]
        owner = getattr(callback, "__self__", None)
        if isinstance(owner, asyncio.Task):
            chain, coroutine = [], owner.get_coro()
            while coroutine is not None and len(chain) < 5:
                chain.append(getattr(coroutine, "__qualname__", type(coroutine).__name__))
                coroutine = (getattr(coroutine, "cr_await", None) or getattr(coroutine, "gi_yieldfrom", None)
                             or getattr(coroutine, "ag_await", None))
            return "task " + " > ".join(chain)
        return getattr(callback, "__qualname__", type(callback).__name__)

    def _counting_run(self: asyncio.events.Handle) -> None:
        _counted[0] += 1
        if _names is not None:
            _names[_name(self)] += 1
        _run(self)

    def _report(_signal: int, _frame: object) -> None:
        if _names is not None:
            with open(f"{_FILE}.names.tmp", "w") as out:
                json.dump(_names, out)
            os.replace(f"{_FILE}.names.tmp", f"{_FILE}.names")
        with open(f"{_FILE}.tmp", "w") as out:
            out.write(f"{_counted[0]} {time.process_time()}\n")
        os.replace(f"{_FILE}.tmp", _FILE)

    asyncio.events.Handle._run = _counting_run  # type: ignore[method-assign]
    signal.signal(signal.SIGUSR1, _report)
