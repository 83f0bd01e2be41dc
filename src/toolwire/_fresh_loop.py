"""`run_in_new_loop`: `anyio.run`, also in a thread whose context was copied from one that runs a loop.

`asyncio.to_thread`, `contextvars.copy_context().run` and `Agent.run_sync` called from a notebook carry the
caller's context into a worker thread. When sniffio is installed (many packages pull it in), that context holds
sniffio's note that asyncio is running, which anyio sets, and `anyio.run` then refuses with "Already running
asyncio in this thread" although the worker thread runs no loop. The note describes the thread the context came
from, so it is cleared first, in the current context only (the caller's own context keeps it).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

__all__ = ["run_in_new_loop"]

T = TypeVar("T")


def run_in_new_loop(func: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`anyio.run(func, *args)` on a new event loop in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop here: a note saying otherwise came with a copied context
        sniffio = sys.modules.get("sniffio")
        if sniffio is not None:
            sniffio.current_async_library_cvar.set(None)
    return anyio.run(func, *args)
