"""Per-user token budgets: refused before the model is called (a real `toolwire serve`), summed from the runs'
recorded usage in the shared database, reset by the (injected) clock; on SQLite and PostgreSQL."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.server.conftest import SQLITE_ONLY
from tests.server.support import GateServer, ServerProcess
from tests.server.test_metrics import METRICS_TOKEN, samples, value
from toolwire.exceptions import UserError
from toolwire.messages import Message
from toolwire.server import MemoryRateLimiter
from toolwire.server.budgets import (
    BudgetedLimiter,
    BudgetExceeded,
    TokenBudget,
    TokenBudgets,
    Usage,
    parse_budget,
    usage_of,
)
from toolwire.store import SQLStore
from toolwire.testing.fake import FakeText, FakeTurn, FakeUsage

pytestmark = pytest.mark.anyio


def spend(output_tokens: int, input_tokens: int = 10) -> FakeTurn:
    return FakeTurn(parts=[FakeText(text="Here you are.")],
                    usage=FakeUsage(input_tokens=input_tokens, output_tokens=output_tokens))


async def test_a_used_up_budget_is_refused_before_the_model_is_called(
        serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    server = serve("--daily-output-tokens", "40", "--user-budget", "bob:daily-output=unlimited",
                   "--metrics", "--metrics-token", METRICS_TOKEN)
    gate.script("first", spend(50))
    refused_script = gate.script("second", spend(5))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "Go [[first]]")
        assert events[-1].data["status"] == "completed"
        assert events[-1].data["usage"]["output_tokens"] == 50
        rows_before = await api.rows(chat)

        async with api.send(chat, "Again [[second]]") as response:
            body = (await response.aread()).decode()
        assert response.status_code == 429, body
        error = response.json()["error"]
        tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")
        assert error["code"] == "budget_exceeded"
        assert error["message"].startswith("You have used today's output token budget (50 of 40 tokens); it resets "
                                           f"at {tomorrow} 00:00 UTC, in ")
        assert error["message"].endswith(". Send your message again then.")
        assert 0 < int(response.headers["retry-after"]) <= 86_400
        # Nothing reached the model, nothing was stored, and the chat is free.
        assert refused_script.requests == 0
        assert await api.rows(chat) == rows_before
        assert (await api.chat(chat))["active_run"] is None

    # Bob's own budget lifts the limit; alice's usage is hers alone anyway.
    gate.script("bob", spend(500))
    async with server.api("bob") as bob:
        chat = await bob.new_chat()
        assert (await bob.run(chat, "Go [[bob]]"))[-1].data["status"] == "completed"
        assert (await bob.run(chat, "And again [[bob]]"))[-1].data["status"] == "completed"
    # Carol has the default budget and has used nothing.
    gate.script("carol", spend(5))
    async with server.api("carol") as carol:
        chat = await carol.new_chat()
        assert (await carol.run(chat, "Go [[carol]]"))[-1].data["status"] == "completed"

    found = samples(server)
    assert value(found, "toolwire_limit_refusals_total", limit="daily_output_tokens") == 1
    assert value(found, "toolwire_limit_refusals_total", limit="runs") == 0


# The route asks the same budget check as the native one, whose usage query runs on PostgreSQL in
# test_a_used_up_budget_is_refused_before_the_model_is_called[postgres].
@SQLITE_ONLY
async def test_the_vercel_route_is_refused_too(serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    server = serve("--monthly-input-tokens", "0")
    refused_script = gate.script("vercel", spend(5))
    async with server.api() as api:
        response = await api.client.post("/api/chat", json={
            "id": "budget-chat", "messages": [{"id": "m1", "role": "user",
                                               "parts": [{"type": "text", "text": "Hi [[vercel]]"}]}]})
    assert response.status_code == 429, response.text
    assert response.json()["error"]["code"] == "budget_exceeded"
    assert "this month's input token budget (0 of 0 tokens)" in response.json()["error"]["message"]
    assert refused_script.requests == 0


async def finished_run(store: SQLStore, chat_id: str, number: int, usage: dict[str, int]) -> None:
    start = await store.start_run(chat_id, user_message=Message.user("Hi."), client_message_id=f"m{number}",
                                  owner="test", lease_seconds=30)
    await store.finish_run(start.run.id, status="completed", usage={**usage, "cache_read_tokens": None},
                           error=None, steps=1, event_count=3)


async def test_usage_is_summed_per_user_and_budgets_reset_by_the_clock(db_url: str) -> None:
    store = SQLStore(db_url)
    await store.open()
    try:
        alice = await store.ensure_user("alice")
        bob = await store.ensure_user("bob")
        chat = await store.create_chat(alice.id)
        await finished_run(store, chat.id, 1, {"input_tokens": 700, "output_tokens": 20})
        bobs = await store.create_chat(bob.id)
        await finished_run(store, bobs.id, 1, {"input_tokens": 9_000, "output_tokens": 9_000})
        # A run still going has recorded no usage yet: it counts once it ends.
        going = await store.create_chat(alice.id)
        await store.start_run(going.id, user_message=Message.user("Still going."), client_message_id="m-running",
                              owner="test", lease_seconds=30)

        now = datetime.now(UTC)
        assert await usage_of(store, alice.id, now) == Usage(daily_input=700, daily_output=20, monthly_input=700,
                                                             monthly_output=20)
        moment = [now]
        budgets = TokenBudgets(default=TokenBudget(daily_input=500, monthly_input=5_000),
                               users={"bob": TokenBudget()}, clock=lambda: moment[0])
        limiter = BudgetedLimiter(MemoryRateLimiter(1000, 1000, 1000), budgets, store)

        with pytest.raises(BudgetExceeded) as refused:
            await limiter.acquire(alice.id, "runs")
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
        assert refused.value.status == 429 and refused.value.limit == "daily_input_tokens"
        assert refused.value.headers["Retry-After"] == str(math.ceil((midnight - now).total_seconds()))
        assert f"resets at {midnight:%Y-%m-%d} 00:00 UTC" in refused.value.message
        assert await limiter.acquire(alice.id, "tool_calls") is None  # only a run's admission is checked
        assert await limiter.acquire(bob.id, "runs") is None  # bob's own budget has no limit

        moment[0] = midnight + timedelta(seconds=1)  # a new day: today's usage is none
        assert await limiter.acquire(alice.id, "runs") is None

        # The monthly budget outlasts the day: named when both are used up (waiting for the day would not help).
        await finished_run(store, chat.id, 2, {"input_tokens": 4_400, "output_tokens": 20})
        moment[0] = now
        with pytest.raises(BudgetExceeded) as refused:
            await limiter.acquire(alice.id, "runs")
        next_month = (now.replace(day=1, hour=0, minute=0, second=0, microsecond=0) + timedelta(days=32)).replace(day=1)
        assert refused.value.limit == "monthly_input_tokens"
        assert "this month's input token budget (5,100 of 5,000 tokens)" in refused.value.message
        assert f"resets at {next_month:%Y-%m-%d} 00:00 UTC" in refused.value.message
        if midnight < next_month:
            moment[0] = midnight + timedelta(seconds=1)
            with pytest.raises(BudgetExceeded):
                await limiter.acquire(alice.id, "runs")
        moment[0] = next_month + timedelta(seconds=1)
        assert await limiter.acquire(alice.id, "runs") is None
    finally:
        await store.close()


def test_budget_syntax_and_bad_values() -> None:
    assert parse_budget("daily-input=200_000, monthly-output=unlimited") == TokenBudget(daily_input=200_000)
    assert parse_budget("monthly-output=5") == TokenBudget(monthly_output=5)
    for bad in ("daily=5", "daily-input", "daily-input=-1", "daily-input=lots"):
        with pytest.raises(UserError):
            parse_budget(bad)
    with pytest.raises(UserError):
        TokenBudget(daily_input=-5)


def test_budget_options_are_checked_by_serve(tmp_path: object) -> None:
    import subprocess
    import sys

    from tests.server.test_serve_cli import clean_env

    cases = [(expected, subprocess.Popen([sys.executable, "-m", "toolwire", "serve", "--port", "0", *args],
                                         cwd=str(tmp_path), env=clean_env(), stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True))
             for args, expected in ((["--user-budget", "alice"], "--user-budget is USER:LIMITS"),
                                    (["--user-budget", "alice:weekly=5"], "is not one of them"),
                                    (["--daily-input-tokens", "-3"], "0 or more tokens"))]
    for expected, process in cases:  # all at once: each is a process start of a second or more
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 1, stderr
        assert stderr.startswith("toolwire: ") and expected in stderr, stderr


def test_budgets_and_metrics_are_refused_where_they_cannot_work() -> None:
    from toolwire.server import ServerConfig, create_app

    def factory(ctx: object) -> None:
        raise AssertionError("no run is started here")

    class NotSQL:  # a Store of the user's own, not an SQLStore
        pass

    with pytest.raises(UserError, match="read each user's usage from an SQLStore"):
        create_app(factory, store=NotSQL(), config=ServerConfig(budgets=TokenBudgets(  # type: ignore[arg-type]
            default=TokenBudget(daily_input=5))))
    with pytest.raises(UserError, match="Metrics need a token"):
        create_app(factory, store="sqlite:///:memory:", config=ServerConfig(metrics=True))
    with pytest.raises(UserError, match="at least 16 characters"):
        create_app(factory, store="sqlite:///:memory:", config=ServerConfig(metrics=True, metrics_token="short"))


async def test_a_paused_run_is_not_resumed_past_the_budget_and_stays_paused(
        serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    from dataclasses import replace

    from tests.server.support import calls, text

    server = serve("--daily-output-tokens", "40")
    paying = calls(("transfer", {"to": "alice", "amount": 5}))
    resumed = gate.script("pay", replace(paying, usage=FakeUsage(input_tokens=10, output_tokens=60)), text("Paid."))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "[[pay]] pay alice")
        assert events[-1].data["status"] == "paused" and events[-1].data["usage"]["output_tokens"] == 60
        approval = next(e.data["approval_id"] for e in events if e.type == "approval_required")
        async with api.decide(chat, [{"approval_id": approval, "approved": True}]) as response:
            await response.aread()
        assert response.status_code == 429 and response.json()["error"]["code"] == "budget_exceeded"
        assert resumed.requests == 1  # the resumed run never asked the model
        assert not [e for e in gate.events if e.startswith("transfer")]  # nor ran the approved tool
        detail = await api.chat(chat)
        assert detail["paused"] is not None and detail["paused"]["approvals"][0]["approval_id"] == approval
