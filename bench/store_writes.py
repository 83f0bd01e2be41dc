"""The store under concurrent chats: what one chat's writes cost and how long each waits for its commit.

    python -m bench.store_writes                       # 50 chats on SQLite and on PostgreSQL, then a table
    python -m bench.store_writes --chats 200 --db sqlite
    python -m bench.store_writes --db postgresql://user:pw@host/db
    python -m bench.store_writes --chats 200 --at-once 1   # one chat at a time: every write a batch of its own

Each of N chats does, all at once, what a chat of the server does to its store (see `server/runner.py` and
`server/runs.py`): the reads of a request (`user_for_token`, `get_chat`, `active_run`), `start_run`, the
journal of a tool round (`record_step_message`, two `record_tool_call`, two `record_tool_result`), the round
(`append_messages`), a second request's reads, the final answer (`append_messages`) and `finish_run`. Calls of
one chat follow each other, as the runner makes them; the chats run concurrently, as at a turn boundary. With
`--at-once K`, at most K chats run at a time: with 1, every write is a batch of its own, which is what a server's
writer mostly sees under a few hundred chats spread over time (bench/side_by_side: 1.1 operations per batch at
N = 200), so the figure is the fixed cost of each write.

Reported per database: commits/s (write transactions the database committed, counted by a SQLAlchemy
listener), the p50/p99 time a write call waits until it returns (it returns once committed), the store's CPU
per chat (the process's CPU time, all threads, over N; the bench's own loop is in it and is the same for every
store), and SQL statements per chat (counted by the same listener, reads included). `--postgres` databases
are made by the tests' helper (`tests/services.py`, PostgreSQL binaries from `scripts/test-services`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import event

REPO = Path(__file__).resolve().parent.parent

_WRITES = ("start_run", "record_step_message", "record_tool_call", "record_tool_result", "append_messages",
           "finish_run")


@dataclass
class Figures:
    database: str
    chats: int
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    commits: int = 0
    statements: int = 0
    waits: list[float] = field(default_factory=list)
    errors: int = 0

    def row(self) -> str:
        waits = sorted(self.waits)
        p50 = statistics.median(waits) * 1000 if waits else 0.0
        p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))] * 1000 if waits else 0.0
        return (f"| {self.database} | {self.chats} | {len(self.waits)} | {self.commits} | "
                f"{self.commits / self.seconds:,.0f} | {len(self.waits) / self.seconds:,.0f} | {p50:.1f} | "
                f"{p99:.1f} | {self.cpu_seconds * 1000 / self.chats:.2f} | {self.statements / self.chats:.1f} | "
                f"{self.seconds:.2f} | {self.errors} |")


HEADER = ("| database | chats | write calls | commits | commits/s | writes/s | p50 wait ms | p99 wait ms | "
          "CPU ms/chat | statements/chat | wall s | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def _engines(store: Any) -> list[Any]:
    """Every SQLAlchemy engine the store talks through (one, or a writer's engine besides the readers')."""
    engines = [store.engine.sync_engine]
    writer = getattr(store, "write_engine", None)
    if writer is not None and writer not in engines:
        engines.append(writer)
    return engines


async def one_chat(store: Any, user: Any, token: str, chat_id: str, index: int, figures: Figures) -> None:
    from toolwire.messages import Message, ToolCallPart, ToolResultPart

    async def write(call: Any) -> Any:
        started = time.perf_counter()
        result = await call
        figures.waits.append(time.perf_counter() - started)
        return result

    assert await store.user_for_token(token) == user
    chat = await store.get_chat(user.id, chat_id)
    assert chat is not None
    assert await store.active_run(chat_id) is None
    start = await write(store.start_run(chat_id, user_message=Message.user(f"Question {index}"),
                                        client_message_id=f"m{index}", owner="bench", lease_seconds=60,
                                        title=f"Chat {index}"))
    run_id = start.run.id
    calls = [ToolCallPart(id=f"call_{index}_{n}", name="lookup", arguments={"n": n, "q": "weather"},
                          arguments_raw=f'{{"n": {n}, "q": "weather"}}')
             for n in range(2)]
    step = Message(role="assistant", parts=[*calls])
    await write(store.record_step_message(run_id, step))
    for call in calls:
        await write(store.record_tool_call(run_id, call))
    results = [ToolResultPart(call_id=call.id, name=call.name, result=f"result {call.id} " + "x" * 200)
               for call in calls]
    for result in results:
        await write(store.record_tool_result(run_id, result))
    await write(store.append_messages(chat_id, [step, Message(role="user", parts=[*results])], run_id=run_id))
    # The follower's request (the stream) reads what a request reads.
    assert await store.user_for_token(token) == user
    assert await store.get_chat(user.id, chat_id) is not None
    await write(store.append_messages(chat_id, [Message.assistant(f"Answer {index}: " + "y" * 400)],
                                      run_id=run_id))
    assert await write(store.finish_run(run_id, status="completed", usage={"input_tokens": 10}, error=None,
                                        steps=2, event_count=40))


async def measure(url: str, label: str, chats: int, at_once: int | None = None) -> Figures:
    from toolwire.store import SQLStore

    figures = Figures(database=label, chats=chats)
    async with SQLStore(url) as store:
        user = await store.ensure_user("bench")
        token = "bench-token-" + "z" * 32
        await store.add_token(user.id, token)
        chat_ids = [(await store.create_chat(user.id)).id for _ in range(chats)]
        counts = {"commits": 0, "statements": 0}

        def on_commit(_conn: Any) -> None:
            counts["commits"] += 1

        def on_statement(*_args: Any) -> None:
            counts["statements"] += 1

        engines = _engines(store)
        for engine in engines:
            event.listen(engine, "commit", on_commit)
            event.listen(engine, "before_cursor_execute", on_statement)
        cpu, wall = time.process_time(), time.perf_counter()
        turns = asyncio.Semaphore(at_once or chats)

        async def in_turn(index: int, chat_id: str) -> None:
            async with turns:
                await one_chat(store, user, token, chat_id, index, figures)

        outcomes = await asyncio.gather(*(in_turn(i, chat_id) for i, chat_id in enumerate(chat_ids)),
                                        return_exceptions=True)
        figures.seconds = time.perf_counter() - wall
        figures.cpu_seconds = time.process_time() - cpu
        for engine in engines:
            event.remove(engine, "commit", on_commit)
            event.remove(engine, "before_cursor_execute", on_statement)
        figures.commits, figures.statements = counts["commits"], counts["statements"]
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        figures.errors = len(failures)
        if failures:
            print(f"{label}: {len(failures)} chats failed, the first with {failures[0]!r}", file=sys.stderr)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.store_writes", description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=50, help="concurrent chats (50 by default)")
    parser.add_argument("--db", action="append", default=None,
                        help="sqlite, postgres (started here) or a database URL; repeatable (both by default)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per database, each on a fresh database")
    parser.add_argument("--at-once", type=int, default=None, metavar="K",
                        help="chats running at a time (all by default; 1: one after another)")
    args = parser.parse_args(argv)
    targets = args.db or ["sqlite", "postgres"]
    rows: list[Figures] = []
    with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        cluster = None
        for target in targets:
            for attempt in range(args.repeat):
                if target == "sqlite":
                    url, label = f"sqlite:///{Path(folder) / f'bench{attempt}.db'}", "SQLite"
                elif target == "postgres":
                    if cluster is None:
                        sys.path.insert(0, str(REPO))
                        from tests.services import ServiceMissing, start_postgres

                        try:
                            cluster = stack.enter_context(start_postgres())
                        except ServiceMissing as exc:
                            raise SystemExit(f"bench.store_writes: {exc}; scripts/test-services installs it.") \
                                from None
                    url, label = cluster.url(cluster.new_database()), "PostgreSQL"
                else:
                    url, label = target, target.split(":", 1)[0]
                rows.append(asyncio.run(measure(url, label, args.chats, args.at_once)))
    print(HEADER)
    for figures in rows:
        print(figures.row())


if __name__ == "__main__":
    main()
