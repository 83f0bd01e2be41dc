"""`/metrics` of a real `toolwire serve --metrics`, scraped during and after real runs, on SQLite and PostgreSQL
(and with Redis); parsed with the Prometheus client's own parser."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.redis_server import RedisServer
from tests.server.conftest import SQLITE_ONLY
from tests.server.support import TOKENS, GateServer, ServerProcess, calls, read_events, text

pytestmark = pytest.mark.anyio

METRICS_TOKEN = "scraper-token-0123456789abcdef"


def scrape(server: ServerProcess, token: str | None = METRICS_TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{server.url}/metrics", headers=headers, trust_env=False, timeout=10)


def samples(server: ServerProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a scrape: (name, labels) → value."""
    response = scrape(server)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def until_scraped(server: ServerProcess, condition: Callable[[dict[tuple[str, frozenset[tuple[str, str]]], float]],
                                                                   bool], what: str) -> None:
    with anyio.fail_after(15):
        while not condition(await anyio.to_thread.run_sync(samples, server)):  # noqa: ASYNC110 - another process
            await anyio.sleep(0.05)


# Metrics are counted in the process, above the store (runs on PostgreSQL: test_runs [postgres]).
@SQLITE_ONLY
async def test_metrics_move_during_and_after_a_run(serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    server = serve("--metrics", "--metrics-token", METRICS_TOKEN, "--runs-per-minute", "1")
    before = samples(server)
    assert value(before, "toolwire_active_runs") == 0 and value(before, "toolwire_followers") == 0
    assert value(before, "toolwire_events_published_total") == 0
    assert value(before, "toolwire_runs_finished_total", status="completed") == 0  # shown from the start
    gate.script("metrics", calls(("gated", {"label": "metrics-tool"})), text("Done."))
    async with server.api() as api:
        chat = await api.new_chat()
        async with api.send(chat, "Go [[metrics]]") as response:
            assert response.status_code == 200
            events = []
            async for event in read_events(response):
                events.append(event)
                if event.type == "tool_started":
                    during = await anyio.to_thread.run_sync(samples, server)
                    # One run executing, one stream following it, the events so far published.
                    assert value(during, "toolwire_active_runs") == 1
                    assert value(during, "toolwire_followers") == 1
                    assert value(during, "toolwire_events_published_total") >= len(events)
                    assert value(during, "toolwire_runs_finished_total", status="completed") == 0
                    assert value(during, "toolwire_store_operation_seconds_count", operation="start_run") == 1
                    async with api.follow(chat) as second:  # another tab follows the run, then goes away
                        assert second.status_code == 200
                        await until_scraped(server, lambda s: value(s, "toolwire_followers") == 2, "two followers")
                    await until_scraped(server, lambda s: value(s, "toolwire_followers") == 1, "the tab to go")
                    gate.release_tool("metrics-tool")
        assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed"

        await until_scraped(server, lambda s: value(s, "toolwire_followers") == 0 and value(
            s, "toolwire_active_runs") == 0, "the stream and run to end")
        after = samples(server)
        # Every event of the run went through the log once, and the stream showed each of them.
        assert value(after, "toolwire_events_published_total") == len(events)
        assert value(after, "toolwire_runs_finished_total", status="completed") == 1
        assert value(after, "toolwire_runs_finished_total", status="failed") == 0
        # The run's end, written with its answer (`RunMemory.answer`).
        assert value(after, "toolwire_store_operation_seconds_count", operation="finish_run_storing") == 1
        assert value(after, "toolwire_store_operation_seconds_sum", operation="finish_run_storing") > 0
        # The journal: the call, written while the tool was held (its result may come after its round's commit, and
        # is then not journaled at all).
        assert value(after, "toolwire_store_operation_seconds_count", operation="record_journal") >= 1

        # A second run within the minute is refused by the rate limit, and counted by limit.
        async with api.send(chat, "Again [[metrics]]") as refused:
            assert refused.status_code == 429
            assert (await refused.aread()) and refused.json()["error"]["code"] == "rate_limited"
    refusals = samples(server)
    assert value(refusals, "toolwire_limit_refusals_total", limit="runs") == 1
    assert value(refusals, "toolwire_limit_refusals_total", limit="writes") == 0
    assert value(refusals, "toolwire_events_published_total") == len(events)  # nothing published for it


# No store involved: the scraper's token is the command's.
@SQLITE_ONLY
async def test_metrics_need_the_metrics_token(serve: Callable[..., ServerProcess]) -> None:
    server = serve("--metrics", "--metrics-token", METRICS_TOKEN)
    for token in (None, TOKENS["alice"], METRICS_TOKEN + "x"):  # a user's token is not the scraper's
        response = scrape(server, token)
        assert response.status_code == 401, token
        assert response.json()["error"]["code"] == "unauthorized"
        assert "toolwire_" not in response.text


# No store involved: the route is there or not.
@SQLITE_ONLY
async def test_metrics_are_off_unless_enabled(server: ServerProcess) -> None:
    for token in (None, METRICS_TOKEN, TOKENS["alice"]):
        response = scrape(server, token)
        assert response.status_code == 404
        assert "toolwire_" not in response.text


def test_metrics_without_a_token_refuse_to_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.server.test_serve_cli import clean_env

    for args, expected in ((["--metrics"], "--metrics needs a token"),
                           (["--metrics", "--metrics-token", "short"], "at least 16 characters")):
        done = subprocess.run([sys.executable, "-m", "toolwire", "serve", "--port", "0", *args], cwd=tmp_path,
                              env=clean_env(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("toolwire: ") and expected in done.stderr, done.stderr


# Redis's latency; the database does not matter (Redis with PostgreSQL: tests/scaleout).
@SQLITE_ONLY
async def test_redis_latency_is_measured_where_redis_is_used(
        serve: Callable[..., ServerProcess], gate: GateServer, redis_server: RedisServer) -> None:
    redis_server.command("FLUSHALL")
    server = serve("--metrics", "--metrics-token", METRICS_TOKEN, "--redis", redis_server.url)
    gate.script("redis", text("Hello."))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "Hi [[redis]]")
    assert events[-1].data["status"] == "completed"
    found = samples(server)
    # Each append waited for Redis (count and sum); a follower's read and wait are on the per-event path: untimed.
    assert value(found, "toolwire_redis_append_seconds_count") >= 1
    assert value(found, "toolwire_redis_append_seconds_sum") > 0
    assert value(found, "toolwire_redis_operation_seconds_count", operation="log.read_after") == 0
    assert value(found, "toolwire_redis_operation_seconds_count", operation="log.expect_run") == 1
    assert value(found, "toolwire_redis_operation_seconds_count", operation="limiter.acquire") >= 2
    assert value(found, "toolwire_redis_operation_seconds_count", operation="log.wait") == 0  # a wait is no latency
    assert value(found, "toolwire_events_published_total") == len(events)
    assert value(found, "toolwire_runs_finished_total", status="completed") == 1
