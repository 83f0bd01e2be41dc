"""`toolwire serve --drain-handover`: a replica stopped with SIGTERM hands its run over to another, which continues it
at once (docs/guides/durable-runs.md, "Handing runs over").

Real replicas on one PostgreSQL database and one Redis, the gate as their model and its tools' journal
(`tests/server/durable_tools.py`), as in `test_durable_runs.py`.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest

from tests.scaleout.test_durable_runs import TOOLS, collect, gap_free
from tests.server.support import Event, GateServer, ServerProcess, calls, read_events, text, until
from tests.server.test_runs import assert_valid_history

pytestmark = pytest.mark.anyio

Replica = Callable[..., ServerProcess]
A_LEASE = 30.0
"""A's lease: far longer than the test waits, so only a released lease lets B take the run over."""


async def test_a_replica_stopped_with_drain_handover_hands_its_run_over_mid_tool(
        replica: Replica, gate: GateServer, tmp_path: Path) -> None:
    """A runs a non-idempotent tool when it gets SIGTERM: it lets the tool finish (the grace period), stops the run
    without ending it and releases its lease; B continues it at once (`run_resumed{reason: handover}`), even though
    B continues no crashed run (`--max-continuations 0`): the tool ran once, nothing was interrupted."""
    a = replica(*TOOLS, "--drain-handover", "--drain-seconds", "60", lease_seconds=A_LEASE)
    b = replica(*TOOLS, "--max-continuations", "0", lease_seconds=1.0)
    # The answer after the tool waits for the test (`open`): A hands the run over before it (B asks for it again).
    answer = text("Went on after the handover.")
    script = gate.script("handover", calls(("charge", {"label": "pay"})), answer, answer)
    async with a.api() as on_a, b.api() as on_b:
        chat = await on_a.new_chat()
        events: list[Event] = []
        async with anyio.create_task_group() as tg:
            async with on_a.send(chat, "[[handover]] go") as response:
                async for event in read_events(response):
                    if event.type == "tool_started":
                        break
            tg.start_soon(collect, on_b, chat, None, events)
            await until(lambda: gate.waiting.get("pay", 0) == 1)
            assert a.process is not None
            a.process.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
            async with httpx.AsyncClient() as client:  # A is draining: it refuses new runs, its tool still runs
                for _ in range(200):
                    if (await client.get(f"{a.url}/readyz")).status_code == 503:
                        break
                    await anyio.sleep(0.05)
            await until(lambda: any(e.type == "tool_started" for e in events))
            assert not any(e.type == "tool_result" for e in events)
            script.gated = True
            gate.release_tool("pay")  # the tool finishes on A, during its drain
            await until(lambda: any(e.type == "run_resumed" for e in events), timeout=20)
            taken_over = time.monotonic() - stopped
            script.open()
            await until(lambda: bool(events) and events[-1].type == "run_finished", timeout=20)
        exited = await anyio.to_thread.run_sync(lambda: a.process.wait(timeout=30))  # type: ignore[union-attr]

    print(f"run_resumed {taken_over:.2f} s after SIGTERM (A's lease {A_LEASE:.0f} s)")
    assert taken_over < A_LEASE  # B did not wait for the lease to expire: it was released
    assert exited == -signal.SIGTERM  # uvicorn stops as the signal asks, once the drain is over
    kinds = [e.type for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished", kinds
    assert kinds.count("run_finished") == 1 and events[-1].data["status"] == "completed"  # A did not end it
    gap_free(events)
    resumed = events[kinds.index("run_resumed")]
    assert resumed.data["reason"] == "handover" and resumed.data["continuation"] == 1
    # Its round stored by A (step 1 asked for again), or still in A's journal (stored by B): never run again.
    assert resumed.data["checkpoint"]["step"] in (0, 1)
    # The tool ran once, on A; its result (not `interrupted`) is in the history B completed.
    assert gate.events.count("exec:charge:pay") == 1
    assert kinds.index("tool_result") < kinds.index("run_resumed")
    async with b.api() as on_b:
        rows = await on_b.rows(chat)
    assert_valid_history(rows)
    assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]
    results = {p["name"]: p["result"] for p in rows[1]["messages"][1]["parts"]}
    assert results == {"charge": {"label": "pay", "released": True}}
    assert rows[2]["messages"][0]["parts"][0]["text"] == "Went on after the handover."
