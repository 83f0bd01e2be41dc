"""Where a sync tool runs: a thread pool whose threads take the next call as soon as they are free.

`anyio.to_thread.run_sync` bounds its threads with a limiter whose token goes back only when the calling
task runs again. On a busy event loop (1,000 chats streaming, turns of tens of milliseconds) each call then
held one of the 40 tokens for a loop turn, however short the function, and tool calls queued for them by the
hundreds (694 in a snapshot of such a run) while the threads idled. A `ThreadPoolExecutor` hands its result
back with `call_soon_threadsafe` and its thread goes on to the next call at once. Same bound (40 threads),
same context (the caller's `contextvars`, as anyio copies them), same cancellation (the caller stops waiting;
the thread finishes the call, since Python cannot stop a thread). Off asyncio (trio) anyio's own is used.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import anyio.to_thread

__all__ = ["TOOL_THREADS", "run_in_thread"]

_T = TypeVar("_T")

TOOL_THREADS = 40
"""Sync tools running at once per process (anyio's default thread limit)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _threads() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(TOOL_THREADS, thread_name_prefix="toolwire-tool")
    return _pool


async def run_in_thread(function: Callable[[], _T]) -> _T:
    """`function()` in a worker thread, with the caller's context; cancelling the caller abandons the call."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # not asyncio
        return await anyio.to_thread.run_sync(function, abandon_on_cancel=True)
    context = contextvars.copy_context()
    return await asyncio.wrap_future(_threads().submit(context.run, function))
