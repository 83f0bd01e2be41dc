"""The recorded event sequences follow the server contract exactly, checked with toolwire's own models.

Model and agent events must be exactly `event_to_dict` (plus `run_id` and `step`): each is read back with
toolwire's event adapter and dumped again. Messages round-trip through `Message`; server events carry
the fields the contract lists; cursors count each run's events from 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from toolwire.events import event_from_json, event_to_dict
from toolwire.messages import Message

from .sequences import NAMES, load

SERVER_EVENTS: dict[str, set[str]] = {
    "run_started": {"chat_id", "run_number", "resumed", "user_message"},
    "step_started": set(),
    "approval_required": {"approval_id", "call"},
    "message_saved": {"row"},
    "step_finished": set(),
    "run_finished": {"status", "usage", "error", "steps", "duration"},
}
ROW_KEYS = {"id", "sequence_number", "kind", "role", "run_id", "created_at", "messages"}
CHAT_KEYS = {"id", "title", "created_at", "updated_at", "active_run", "paused"}
USAGE_KEYS = {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"}


def check_message(data: dict[str, Any]) -> None:
    assert Message.from_dict(data).to_dict() == data


def check_row(row: dict[str, Any]) -> None:
    assert set(row) == ROW_KEYS
    assert row["kind"] in ("user", "assistant", "tools_aggregate")
    assert row["role"] == ("user" if row["kind"] == "user" else "assistant")
    assert len(row["messages"]) == (2 if row["kind"] == "tools_aggregate" else 1)
    for message in row["messages"]:
        check_message(message)
    if row["kind"] == "tools_aggregate":
        calls = [p["id"] for p in row["messages"][0]["parts"] if p["type"] in ("tool_call", "invalid_tool_call")]
        results = [p["call_id"] for p in row["messages"][1]["parts"]]
        assert results == calls, "every call answered, in call order"


def check_frames(frames: list[dict[str, Any]]) -> None:
    runs: dict[str, list[dict[str, Any]]] = {}
    for frame in frames:
        runs.setdefault(frame["data"]["run_id"], []).append(frame)
    for run_frames in runs.values():
        number = run_frames[0]["data"]["run_number"]
        assert [f["id"] for f in run_frames] == [f"{number}-{i}" for i in range(1, len(run_frames) + 1)]
        assert run_frames[0]["data"]["type"] == "run_started"
        assert run_frames[-1]["data"]["type"] == "run_finished"
    for frame in frames:
        data = dict(frame["data"])
        kind = data["type"]
        run_id, step = data.pop("run_id"), data.pop("step")
        assert isinstance(run_id, str)
        if kind in SERVER_EVENTS:
            assert set(data) - {"type"} == SERVER_EVENTS[kind], kind
            assert (step is None) == (kind in ("run_started", "run_finished")), kind
            if kind == "message_saved":
                check_row(data["row"])
            if kind == "run_started" and data["user_message"] is not None:
                check_row(data["user_message"])
            if kind == "run_finished":
                assert data["status"] in ("completed", "paused", "cancelled", "failed", "interrupted")
                assert set(data["usage"]) == USAGE_KEYS
                assert data["error"] is None or set(data["error"]) == {"code", "message"}
        else:
            assert isinstance(step, int), kind
            assert event_to_dict(event_from_json(orjson.dumps(data))) == data, kind


@pytest.mark.parametrize("name", NAMES)
def test_sequence_follows_the_contract(name: str) -> None:
    seq = load(name)
    assert set(seq["chat"]) == CHAT_KEYS
    for row in seq["history"]:
        check_row(row)
    check_frames(seq["frames"])
    for extra in ("approved", "denied"):
        if extra in seq:
            check_frames(seq[extra])
    if "paused" in seq:
        check_message(seq["paused"]["message"])
        assert {a["approval_id"] for a in seq["paused"]["approvals"]}


def test_every_sequence_is_used_by_the_node_tests() -> None:
    sources = "".join(p.read_text() for p in (Path(__file__).parent / "js").glob("*.mjs"))
    assert NAMES == ["approval", "failing_and_invalid", "parallel_out_of_order", "provider_error", "resume_mid_run", "xss"]
    for name in NAMES:
        assert f'"{name}"' in sources, name
