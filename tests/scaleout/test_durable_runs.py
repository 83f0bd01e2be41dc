"""Durable runs across replicas: a replica SIGKILLed mid-run, its run continued by another (docs/guides/durable-runs.md).

Real `toolwire serve` replicas on one PostgreSQL database and one Redis, the gate as their model. The tools of
`tests/server/durable_tools.py` report each execution to the gate: its event list is the journal that proves
which calls ran, and how many times, in whichever process.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest

from tests.server.support import Api, Event, GateServer, ServerProcess, calls, read_events, text, until
from tests.server.test_runs import assert_valid_history
from toolwire.testing.fake import FakeToolCall, FakeTurn

pytestmark = pytest.mark.anyio

Replica = Callable[..., ServerProcess]
LEASE = 1.0
TOOLS = ("--tools", "tests.server.durable_tools:TOOLS")


async def collect(api: Api, chat: str, after: str | None = None, into: list[Event] | None = None) -> list[Event]:
    """The events of the chat's stream after `after`, each added to `into` as it arrives."""
    events = into if into is not None else []
    async with api.follow(chat, after) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        async for event in read_events(response):
            events.append(event)
    return events


async def two_replicas(replica: Replica, folder: Path) -> tuple[ServerProcess, ServerProcess]:
    """Two replicas started side by side (a start is seconds of Python imports on a loaded machine)."""
    first: list[ServerProcess] = []

    async def start_first() -> None:
        first.append(await anyio.to_thread.run_sync(lambda: replica(*TOOLS, lease_seconds=LEASE)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(start_first)
        await until(lambda: (folder / "replica-0" / "tokens.txt").exists())  # its folder is taken: B gets the next
        second = await anyio.to_thread.run_sync(lambda: replica(*TOOLS, lease_seconds=LEASE))
    return first[0], second


def gap_free(events: list[Event], first: int = 1) -> None:
    ids = [e.id for e in events]
    assert ids == [f"1-{i}" for i in range(first, first + len(ids))], ids  # monotonic, no gap, no duplicate


async def test_one_kill_at_three_phases_every_run_goes_on_on_the_other_replica(
        replica: Replica, gate: GateServer, tmp_path: Path) -> None:
    """Replica A is SIGKILLed once while it runs three chats' runs, each at another phase: two tools running (one
    idempotent, one not), the model streaming text after a stored round, and a run paused for approval. B takes
    over the running two and continues them; the paused one waits for its decision, given on B."""
    a, b = await two_replicas(replica, tmp_path)
    gate.script("mid-tools", calls(("lookup", {"label": "look"}), ("charge", {"label": "pay"})),
                text("Went on after the crash."))
    streaming = gate.script("mid-text", calls(("lookup", {"label": "early"})),
                            text("An answer that is cut off half-way.", chunks=8), text("The second attempt."))
    gate.script("pause", calls(("transfer", {"to": "bob", "amount": 5})), text("Sent."))
    async with a.api() as on_a, b.api() as on_b:
        tools_chat, text_chat, paused_chat = [await on_a.new_chat() for _ in range(3)]
        paused = await on_a.run(paused_chat, "[[pause]] pay bob")
        assert paused[-1].data["status"] == "paused"
        approval = next(e for e in paused if e.type == "approval_required").data["approval_id"]
        on_tools: list[Event] = []
        on_text: list[Event] = []
        seen: list[Event] = []
        async with anyio.create_task_group() as tg:
            async with on_a.send(tools_chat, "[[mid-tools]] go") as response:
                async for event in read_events(response):
                    seen.append(event)
                    if [e.type for e in seen].count("tool_started") == 2:
                        break
            tg.start_soon(collect, on_b, tools_chat, None, on_tools)
            async with on_a.send(text_chat, "[[mid-text]] go") as response:
                async for event in read_events(response):
                    if event.type == "tool_started":
                        break
            tg.start_soon(collect, on_b, text_chat, None, on_text)
            streaming.gated = True  # the second response waits frame by frame
            gate.release_tool("early")
            streaming.release(2)
            await until(lambda: any(e.type == "text_delta" for e in on_text))
            await until(lambda: gate.waiting.get("look", 0) == 1 and gate.waiting.get("pay", 0) == 1)
            a.kill()  # SIGKILL: no shutdown, no handover
            killed = time.monotonic()
            streaming.open()
            await until(lambda: any(e.type == "run_resumed" for e in on_tools), timeout=LEASE * 10)
            taken_over = time.monotonic() - killed
            await until(lambda: gate.events.count("exec:lookup:look") == 2, timeout=LEASE * 10)
            gate.release_tool("look", 2)  # the dead process's request may take one permit before it notices

        # Taken over once the lease ran out and the next maintenance round (a third of the lease) came: the bound is
        # generous for a loaded machine (measured: docs/guides/durable-runs.md).
        print(f"run_resumed {taken_over:.2f} s after the kill (lease {LEASE} s)")
        assert taken_over < LEASE * 5 + 5

        # Two tools were running: the idempotent one ran again, the other was answered `interrupted`.
        assert gate.events.count("exec:charge:pay") == 1
        kinds = [e.type for e in on_tools]
        assert kinds[0] == "run_started" and kinds[-1] == "run_finished", kinds
        assert on_tools[-1].data["status"] == "completed"
        gap_free(on_tools)
        resumed = on_tools[kinds.index("run_resumed")]
        assert resumed.data["reason"] == "lease_expired" and resumed.data["continuation"] == 1
        assert resumed.data["replica"] and resumed.data["checkpoint"]["step"] == 0
        assert resumed.data["restarted_step"] is None  # the step's message stands: only its calls go on
        after = kinds[kinds.index("run_resumed"):]
        assert after.count("tool_started") == 1 and after.count("tool_result") == 2
        rows = await on_b.rows(tools_chat)
        assert_valid_history(rows)
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]
        results = {p["name"]: p["result"] for p in rows[1]["messages"][1]["parts"]}
        assert results == {"lookup": {"label": "look", "released": True}, "charge": {"error": "interrupted"}}
        assert rows[2]["messages"][0]["parts"][0]["text"] == "Went on after the crash."
        # The model was asked to go on knowing what happened: its request holds both results.
        body = next(b for b in reversed(gate.bodies) if "mid-tools" in str(b["messages"][0]))
        sent = [m for m in body["messages"] if m["role"] == "tool"]
        assert len(sent) == 2 and any("interrupted" in str(m["content"]) for m in sent)
        # Last-Event-ID across the takeover: from an id A sent before the kill, B sends exactly the rest.
        cut = int(str(seen[-1].id).split("-")[1])
        rest = await collect(on_b, tools_chat, str(seen[-1].id))
        assert [e.id for e in rest] == [e.id for e in on_tools if int(str(e.id).split("-")[1]) > cut]

        # The model was streaming text after a stored round: the step is asked for again, the round never rerun.
        assert gate.events.count("exec:lookup:early") == 1
        assert on_text[-1].type == "run_finished" and on_text[-1].data["status"] == "completed"
        gap_free(on_text)
        kinds = [e.type for e in on_text]
        at = kinds.index("run_resumed")
        assert on_text[at].data["restarted_step"] == 1 and on_text[at].data["checkpoint"]["step"] == 1
        assert kinds[at + 1] == "step_started" and on_text[at + 1].data["step"] == 1  # the step is sent again
        rows = await on_b.rows(text_chat)
        assert_valid_history(rows)
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]
        assert rows[2]["messages"][0]["parts"][0]["text"] == "The second attempt."
        assert streaming.requests == 3

        # The paused run was not taken over (it holds no lease): it is decided on B.
        assert (await on_b.chat(paused_chat))["paused"] is not None
        async with on_b.decide(paused_chat, [{"approval_id": approval, "approved": True}]) as response:
            decided = [event async for event in read_events(response)]
        assert decided[-1].data["status"] == "completed"
        assert "run_resumed" not in [e.type for e in decided]
        assert gate.events.count("transfer:bob:5") == 1
        assert_valid_history(await on_b.rows(paused_chat))


# -- one phase per test: the same cut, seen from both replicas ---------------------------------------------------------


@dataclass
class Takeover:
    """What followers saw of a run whose replica A was SIGKILLed and which replica B continued."""

    on_b: list[Event]
    """A follower on B from the run's first event to its end."""
    before: list[Event]
    """What the run's own POST on A showed before A died."""
    after: list[Event]
    """What that client got from B when it reconnected with the last id A had sent (`Last-Event-ID`)."""
    seconds: float
    """From the kill to `run_resumed` on B."""


async def killed_mid_run(a: ServerProcess, b: ServerProcess, chat: str, message: str,
                         cut: Callable[[list[Event]], Awaitable[None]], then: Callable[[], None]) -> Takeover:
    """Send `message` on A with a follower on B, await `cut(on_b)` (the run held at the phase the test wants),
    SIGKILL A, call `then()` (let the gate go on), and follow the run on B to its end; the client that sent the
    message then reconnects to B with the last id it got from A."""
    on_b: list[Event] = []
    before: list[Event] = []

    async def send() -> None:
        with contextlib.suppress(httpx.HTTPError):  # A dies under the stream
            async with on_a.send(chat, message) as response:
                async for event in read_events(response):
                    before.append(event)

    async with a.api() as on_a, b.api() as on_b_api, anyio.create_task_group() as tg:
        tg.start_soon(send)
        await until(lambda: bool(before))
        tg.start_soon(collect, on_b_api, chat, None, on_b)
        await until(lambda: bool(on_b))
        await cut(on_b)
        a.kill()  # SIGKILL: no shutdown, no handover
        killed = time.monotonic()
        then()
        await until(lambda: any(e.type == "run_resumed" for e in on_b), timeout=LEASE * 10)
        seconds = time.monotonic() - killed
        await until(lambda: bool(on_b) and on_b[-1].type == "run_finished", timeout=30)
        tg.cancel_scope.cancel()
    async with b.api() as on_b_api:
        after = await collect(on_b_api, chat, before[-1].id)
    print(f"run_resumed {seconds:.2f} s after the kill (lease {LEASE} s)")
    return Takeover(on_b=on_b, before=before, after=after, seconds=seconds)


def one_stream(seen: Takeover) -> Event:
    """Both followers saw one gap-free stream that ends completed, with one `run_resumed`; returns that event."""
    gap_free(seen.on_b)
    gap_free(seen.before + seen.after)  # A's part and B's rest, joined at the cursor: nothing lost, nothing twice
    assert [e.id for e in seen.before + seen.after] == [e.id for e in seen.on_b]
    kinds = [e.type for e in seen.on_b]
    assert kinds[0] == "run_started" and kinds.count("run_resumed") == 1, kinds
    assert kinds[-1] == "run_finished" and seen.on_b[-1].data["status"] == "completed", kinds
    assert "run_resumed" not in [e.type for e in seen.before]  # A died first: the marker comes from B
    assert seen.seconds < LEASE * 5 + 5  # the bound is lease + lease/3; generous for a loaded machine
    resumed = seen.on_b[kinds.index("run_resumed")]
    assert resumed.data["reason"] == "lease_expired" and resumed.data["continuation"] == 1
    return resumed


async def test_killed_while_a_calls_arguments_stream_the_step_is_asked_for_again_and_the_call_runs_once(
        replica: Replica, gate: GateServer, tmp_path: Path) -> None:
    """A dies after the model sent part of a call's arguments: no call had started, so nothing ran; B asks for the
    step again, and the (non-idempotent) call of the new attempt runs once."""
    a, b = await two_replicas(replica, tmp_path)
    pieces = ['{"la', 'bel": "ar', 'gs-pay"}']
    cut_call = FakeTurn(parts=[FakeToolCall(name="charge", arguments={"label": "args-pay"}, id="call_cut",
                                            chunks=pieces)])
    again = FakeTurn(parts=[FakeToolCall(name="charge", arguments={"label": "args-pay"}, id="call_again")])
    script = gate.script("args", cut_call, again, text("Charged once."), gated=True)
    gate.release_tool("args-pay")

    async def cut(on_b: list[Event]) -> None:
        while not any(e.type == "tool_call_delta" for e in on_b):  # until the arguments are half-way
            sent = script.sent
            script.release(1)
            await until(lambda sent=sent: script.sent > sent)
            await anyio.sleep(0.05)  # B's follower reads what went out
        assert not any(e.type in ("tool_call_end", "tool_started") for e in on_b)

    async with a.api() as on_a:
        chat = await on_a.new_chat()
    seen = await killed_mid_run(a, b, chat, "[[args]] charge it", cut, script.open)

    resumed = one_stream(seen)
    assert resumed.data["restarted_step"] == 0 and resumed.data["checkpoint"]["step"] == 0
    kinds = [e.type for e in seen.on_b]
    at = kinds.index("run_resumed")
    assert kinds[at + 1] == "step_started" and seen.on_b[at + 1].data["step"] == 0
    assert "tool_started" not in kinds[:at]  # the cut call never started
    assert [e.data["call"]["id"] for e in seen.on_b if e.type == "tool_started"] == ["call_again"]
    assert gate.events.count("exec:charge:args-pay") == 1  # the journal: the charge ran once, on B
    assert script.requests == 3  # the cut request, its new attempt, the answer
    async with b.api() as on_b:
        rows = await on_b.rows(chat)
    assert_valid_history(rows)
    assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]
    [result] = rows[1]["messages"][1]["parts"]
    assert result["call_id"] == "call_again" and result["result"] == {"label": "args-pay", "released": True}
    assert "call_cut" not in str(rows)  # the cut attempt left nothing in the history
    assert rows[2]["messages"][0]["parts"][0]["text"] == "Charged once."


async def test_killed_between_rounds_the_stored_round_stands_and_the_next_request_is_sent_again(
        replica: Replica, gate: GateServer, tmp_path: Path) -> None:
    """A dies after it stored a round (a non-idempotent tool's result) and sent the next model request, before the
    answer came: B sends that request again; the tool never runs again and its result is stored once."""
    a, b = await two_replicas(replica, tmp_path)
    answer = text("Paid, once.")
    script = gate.script("between", calls(("charge", {"label": "between-pay"})), answer, answer)

    async def cut(on_b: list[Event]) -> None:
        await until(lambda: gate.waiting.get("between-pay", 0) == 1)
        script.gated = True  # the next request's answer waits (its first frame, a role, goes out at once)
        gate.release_tool("between-pay")
        await until(lambda: any(e.type == "message_saved" and e.data["row"]["kind"] == "tools_aggregate"
                                for e in on_b))
        await until(lambda: script.requests == 2)  # the next request was sent, and is not answered
        assert not any(e.type == "text_delta" for e in on_b)

    async with a.api() as on_a:
        chat = await on_a.new_chat()
    seen = await killed_mid_run(a, b, chat, "[[between]] pay", cut, script.open)

    resumed = one_stream(seen)
    stored = next(e for e in seen.on_b if e.type == "message_saved" and e.data["row"]["kind"] == "tools_aggregate")
    assert resumed.data["restarted_step"] == 1
    assert resumed.data["checkpoint"] == {"step": 1, "message_id": stored.data["row"]["id"]}
    kinds = [e.type for e in seen.on_b]
    after = kinds[kinds.index("run_resumed"):]
    assert "tool_started" not in after and "tool_result" not in after  # the stored round is not run again
    assert after.count("message_saved") == 1  # the answer only
    assert gate.events.count("exec:charge:between-pay") == 1
    assert script.requests == 3
    async with b.api() as on_b:
        rows = await on_b.rows(chat)
    assert_valid_history(rows)
    assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]
    assert rows[1]["id"] == stored.data["row"]["id"]
    [result] = rows[1]["messages"][1]["parts"]
    assert result["result"] == {"label": "between-pay", "released": True}
    assert rows[2]["messages"][0]["parts"][0]["text"] == "Paid, once."
