"""One server on SQLite, stopped with SIGTERM and `--drain-handover`, then started again: its next start continues
the run it handed over, as after a crash but at once and not counted (docs/guides/durable-runs.md)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.server.support import GateServer, ServerProcess, first_text, read_events, text, until
from tests.server.test_runs import assert_valid_history

pytestmark = pytest.mark.anyio


async def test_a_server_stopped_with_drain_handover_continues_its_run_at_its_next_start(gate: GateServer,
                                                                                     tmp_path: Path) -> None:
    """A run streaming text is handed over by SIGTERM; the server started again continues it even though it continues
    no crashed run (`--max-continuations 0`) and the lease (30 s) has not run out: the handover released it."""
    server = ServerProcess(db_url=f"sqlite:///{tmp_path / 'one.db'}", gate_url=gate.url, folder=tmp_path,
                           args=["--drain-handover", "--max-continuations", "0"], lease_seconds=30.0)
    words = [f"word{i} " for i in range(40)]
    script = gate.script("stop", text("".join(words), chunks=words), text("Answered after the restart."), gated=True)
    script.release(2)
    server.start()
    try:
        async with server.api() as api:
            chat = await api.new_chat()
            await first_text(api, chat, "[[stop]] go")
        await anyio.to_thread.run_sync(server.stop)  # SIGTERM: the run is handed over, not ended
        assert server.process is not None and server.process.returncode is not None
        server.start()
        async with server.api() as api:
            await until(lambda: script.requests == 2, timeout=30)  # asked for again at start-up, not in 30 s
            async with api.follow(chat) as response:  # no cursor: the continued run from its `run_resumed`
                assert response.status_code == 200
                script.open()
                events = [event async for event in read_events(response)]
            rows = await api.rows(chat)
        assert events[0].type == "run_resumed", [e.type for e in events]
        assert events[0].data["reason"] == "handover" and events[0].data["continuation"] == 1
        assert events[0].data["restarted_step"] == 0
        assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed"
        assert_valid_history(rows)
        assert [r["kind"] for r in rows] == ["user", "assistant"]
        assert rows[1]["messages"][0]["parts"][0]["text"] == "Answered after the restart."
    finally:
        script.open()
        server.stop()
