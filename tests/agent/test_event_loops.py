"""Agent state item 12: a model or Agent built from a string works on any number of event loops.

Its pooled HTTP client belongs to one loop and is closed when that loop ends, so two `asyncio.run`
calls, a module-level agent shared by two tests, and `run_sync` after an `await` all work.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import anyio
import pytest

from toolwire import Agent, get_model
from toolwire.demo_tools import get_weather
from toolwire.testing import AutoResponder, FakeProviderServer


@pytest.fixture(scope="module")
def server() -> Iterator[FakeProviderServer]:
    # A server on a thread of its own, so it outlives each test's event loop (as a real provider does).
    with FakeProviderServer("openai-chat", AutoResponder(seed=3), api_key="k") as s:
        yield s


AGENT = Agent("openai:fake-model", api_key="k", base_url="http://127.0.0.1:9", tools=[get_weather])
"""A module-level agent, as a newcomer writes one; the fixture points it at the server below."""


@pytest.fixture
def module_agent(server: FakeProviderServer) -> Agent:
    AGENT.model.base_url = server.base_url  # type: ignore[attr-defined]
    return AGENT


def test_item12_two_asyncio_runs_in_one_process(server: FakeProviderServer) -> None:
    """Agent state item 12: two `asyncio.run(agent.run(...))` calls on one string-built agent."""
    agent = Agent("openai:fake-model", api_key="k", base_url=server.base_url, tools=[get_weather])
    first = asyncio.run(agent.run("Weather in Paris?"))
    second = asyncio.run(agent.run("And in Oslo?"))
    assert "get_weather returned" in first.output and "get_weather returned" in second.output
    # Each loop's client was closed when its loop ended.
    clients = [entry.client for entry in agent.model._loop_clients.values()]  # type: ignore[attr-defined]
    assert clients and all(c.is_closed for c in clients)


def test_item12_a_model_on_loops_of_two_threads_at_once(server: FakeProviderServer) -> None:
    """Agent state item 12: the same model used concurrently by two loops never shares a connection."""
    model = get_model("openai:fake-model", api_key="k", base_url=server.base_url)
    errors: list[BaseException] = []

    def work() -> None:
        async def go() -> None:
            for _ in range(3):
                await model.request([__import__("toolwire").Message.user("hi")])

        try:
            asyncio.run(go())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []


@pytest.mark.anyio
async def test_item12_module_level_agent_first_test(module_agent: Agent) -> None:
    """Agent state item 12: a module-level agent used by a first test..."""
    result = await module_agent.run("Weather in Paris?")
    assert "get_weather returned" in result.output


@pytest.mark.anyio
async def test_item12_module_level_agent_second_test(module_agent: Agent) -> None:
    """Agent state item 12: ...and by a second one, on another event loop."""
    result = await module_agent.run("Weather in Rome?")
    assert "get_weather returned" in result.output


def test_item12_module_level_agent_under_run_sync(module_agent: Agent) -> None:
    """Agent state item 12: and from plain code with `run_sync`."""
    assert "get_weather returned" in module_agent.run_sync("Weather in Lima?").output


@pytest.mark.anyio
async def test_item12_run_sync_after_an_await_in_a_running_loop(server: FakeProviderServer) -> None:
    """Agent state item 12: the notebook case: `await` in the loop, then `run_sync` (another loop)."""
    agent = Agent("openai:fake-model", api_key="k", base_url=server.base_url)
    assert (await agent.run("One.")).output
    result = await anyio.to_thread.run_sync(agent.run_sync, "Two.")  # what a notebook cell does, off-loop
    assert result.output
    assert (await agent.run("Three.")).output  # the first loop's client is still its own
    await agent.aclose()
