"""The tools of bench/load's rolling scenario (`--tools bench.load.rolling_tools:TOOLS`), with their journal.

Each execution appends `start <tool> <order> <pid>` to the file named by `TOOLWIRE_BENCH_JOURNAL` before it
waits its `seconds`, and `end <tool> <order> <pid>` after: the benchmark reads the file once the servers are
stopped, so it knows how many times each call ran, in which process, and whether it was cut off. Each line is
one `write` to a file opened with `O_APPEND`, which Linux keeps whole whatever other process appends at the
same moment. The model gives every call an order of its own (its call id: `provider.py`, shape `orders`).
"""

from __future__ import annotations

import os
from typing import Any

import anyio

from toolwire import tool

JOURNAL_ENV = "TOOLWIRE_BENCH_JOURNAL"


def _journal(event: str, name: str, order: str) -> None:
    path = os.environ.get(JOURNAL_ENV)
    if not path:
        return
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, f"{event} {name} {order} {os.getpid()}\n".encode())
    finally:
        os.close(descriptor)


@tool
async def charge(order: str, seconds: float) -> dict[str, Any]:
    """Charge an order (not idempotent: a second execution would charge twice).

    Args:
        order: The order to charge.
        seconds: How long the payment takes.
    """
    _journal("start", "charge", order)
    await anyio.sleep(seconds)
    _journal("end", "charge", order)
    return {"order": order, "charged": True}


@tool(idempotent=True)
async def lookup(order: str, seconds: float) -> dict[str, Any]:
    """Read an order's status (idempotent: reading it again does no harm).

    Args:
        order: The order to read.
        seconds: How long the read takes.
    """
    _journal("start", "lookup", order)
    await anyio.sleep(seconds)
    _journal("end", "lookup", order)
    return {"order": order, "status": "paid"}


TOOLS = [charge, lookup]
