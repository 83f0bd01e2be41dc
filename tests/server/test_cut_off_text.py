"""Text a provider error cut off mid-answer is stored, marked incomplete, and survives a reload (issue #25)."""

from __future__ import annotations

import pytest

from tests.server.support import GateServer, ServerProcess, text
from toolwire.testing.fake import FakeStreamError, FakeText, FakeTurn

pytestmark = pytest.mark.anyio


async def test_text_cut_off_by_a_provider_error_is_stored_as_an_incomplete_row(server: ServerProcess,
                                                                                gate: GateServer) -> None:
    gate.script("cut", FakeTurn(parts=[FakeText(text="The report covers three areas, and more.", chunks=6)],
                                error=FakeStreamError(message="The service is overloaded.", code="overloaded",
                                                      after=4)),
                text("Picked up again."))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "[[cut]] write the report")
        assert events[-1].data["status"] == "failed"
        streamed = "".join(e.data["text"] for e in events if e.type == "text_delta")
        assert streamed  # the person saw part of the answer
        saved = [e.data["row"] for e in events if e.type == "message_saved"]
        assert [r["kind"] for r in saved] == ["assistant"]  # followers are told, before run_finished
        rows = await api.rows(chat)  # what a reload shows
        assert [r["kind"] for r in rows] == ["user", "assistant"]
        [message] = rows[1]["messages"]
        assert message["metadata"]["incomplete"] is True
        assert message["parts"][0]["text"] == streamed
        # The next turn goes on, the cut text carried in the history as an assistant message.
        after = await api.run(chat, "[[cut]] go on")
        assert after[-1].data["status"] == "completed"
        sent = gate.bodies[-1]["messages"]
        assert [m["role"] for m in sent if m["role"] != "system"] == ["user", "assistant", "user"]
        assert streamed in str(sent[-2]["content"])
