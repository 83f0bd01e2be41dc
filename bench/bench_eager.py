"""Eager tool execution versus running tools after the stream, on one turn with four slow tools.

    .venv/bin/python bench/bench_eager.py [--repeat N]

The scripted model streams for 1 s; its four tool calls complete at 0.25, 0.5, 0.75 and 1.0 s, and the
tools take 1.0, 0.7, 0.4 and 0.1 s. Ideal step times:
- eager (each tool starts when its call is complete): max(0.25 + 1.0, 0.5 + 0.7, 0.75 + 0.4, 1.0 + 0.1) = 1.25 s
- after the stream, in parallel: 1.0 + max(tool times) = 2.0 s
- after the stream, one by one: 1.0 + sum(tool times) = 3.2 s

The step time measured is from the start of the run to the last tool result; the agent then makes a
second (instant) request for the final answer. Tools are run once as async functions and once as
blocking sync functions (which the agent runs in worker threads).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import anyio

from toolwire import Agent, Tool, ToolResultEvent, tool
from toolwire.agent import ToolExecution
from toolwire.testing import ScriptedModel, ToolCall

CALL_DONE_AT = (0.25, 0.5, 0.75, 1.0)
TOOL_SECONDS = (1.0, 0.7, 0.4, 0.1)
IDEAL = {"eager": 1.25, "after_stream": 2.0, "sequential": 3.2}
FRAGMENTS = 5


def scripted_turn() -> list[Any]:
    # Each call streams its arguments in 5 fragments over 0.25 s, so call k completes at 0.25 * k.
    delay = (CALL_DONE_AT[0]) / FRAGMENTS
    return [ToolCall("work", {"index": i}, chunks=FRAGMENTS, delay=delay) for i in range(len(CALL_DONE_AT))]


@tool
async def work_async(index: int) -> int:
    await anyio.sleep(TOOL_SECONDS[index])
    return index


@tool
def work_sync(index: int) -> int:
    time.sleep(TOOL_SECONDS[index])
    return index


async def measure(mode: ToolExecution, work: Tool[..., Any]) -> tuple[float, float]:
    """Seconds to the last tool result, and to the end of the run."""
    model = ScriptedModel(scripted_turn(), ["done"])
    named = Tool(work.function, name="work")
    agent = Agent(model, tools=[named], tool_execution=mode, max_parallel_tools=4)
    started = time.perf_counter()
    last_result = 0.0
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ToolResultEvent):
                last_result = time.perf_counter() - started
    return last_result, time.perf_counter() - started


async def main(repeat: int) -> None:
    rows = []
    for mode in ("eager", "after_stream", "sequential"):
        row: list[str] = [mode, f"{IDEAL[mode]:.2f}"]
        for work in (work_async, work_sync):
            steps = [(await measure(mode, work))[0] for _ in range(repeat)]
            row.append(f"{statistics.median(steps):.3f}")
        rows.append(row)
    headers = ["tool_execution", "ideal (s)", "async tools (s)", "sync tools (s)"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print(f"Step time, median of {repeat} runs (stream 1 s; calls complete at 0.25/0.5/0.75/1.0 s; "
          "tools take 1.0/0.7/0.4/0.1 s)")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    eager = float(rows[0][2])
    after = float(rows[1][2])
    print(f"\nEager execution saves {after - eager:.2f} s ({(after - eager) / after:.0%}) on this turn "
          "versus running the tools in parallel after the stream.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell (the median is shown)")
    anyio.run(main, parser.parse_args().repeat)
