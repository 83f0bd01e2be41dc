"""A long branched chat: what loading its active branch and switching branches cost.

    python -m bench.branches                         # 10,000 rows in 100 branches, SQLite and PostgreSQL
    python -m bench.branches --rows 500 --branches 10 --db sqlite

One chat of `--rows` rows in `--branches` branches of equal length: the first starts at the root, each next
one forks under a random row of an earlier one (an edit or a regenerate there), so the branches nest as
they do when a person goes back and forth. The rows are written in one transaction straight into the schema
(a set-up, not what is measured). Then, `--repeat` times each:

- load: `Store.chat_path(chat)`, the active branch with every row's siblings (what `GET .../messages` reads);
- switch: `Store.switch_leaf(chat, row)` to a random branch's first row (what `PUT .../leaf` does: down to the
  newest leaf, the write, and the new branch read back).

Reported: the active branch's length, p50 and the slowest of each, in milliseconds, the bench process's CPU
time per call (all threads: on a machine busy with other work the wall times wait for a core, this does not),
and whether loading stays
within `--budget-ms` (50 ms, the figure docs/guides/branches.md promises) at p50. PostgreSQL is started by the
tests' helper (`tests/services.py`, binaries from `scripts/test-services`).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Figures:
    database: str
    rows: int
    branches: int
    path_rows: int = 0
    loads: list[float] = field(default_factory=list)
    switches: list[float] = field(default_factory=list)
    load_cpu: float = 0.0
    switch_cpu: float = 0.0

    def row(self, budget_ms: float) -> str:
        load = statistics.median(self.loads) * 1000
        switch = statistics.median(self.switches) * 1000
        return (f"| {self.database} | {self.rows:,} | {self.branches} | {self.path_rows} | {load:.1f} | "
                f"{max(self.loads) * 1000:.1f} | {self.load_cpu * 1000 / len(self.loads):.1f} | {switch:.1f} | "
                f"{max(self.switches) * 1000:.1f} | {self.switch_cpu * 1000 / len(self.switches):.1f} | "
                f"{'yes' if load <= budget_ms else 'NO'} |")


def tree(rows: int, branches: int, rng: random.Random) -> tuple[list[tuple[str, str | None]], list[str]]:
    """(id, parent id) in write order, and each branch's first row."""
    per_branch = max(1, rows // branches)
    written: list[tuple[str, str | None]] = []
    firsts: list[str] = []
    for number in range(branches):
        # The first branch starts at the root; each other forks under a row of an earlier branch.
        parent = None if number == 0 else written[rng.randrange(len(written))][0]
        for i in range(per_branch if number < branches - 1 else rows - per_branch * (branches - 1)):
            row_id = f"msg_b{number}r{i}"
            written.append((row_id, parent))
            if i == 0:
                firsts.append(row_id)
            parent = row_id
    return written, firsts


async def measure(url: str, label: str, rows: int, branches: int, repeat: int) -> Figures:
    from sqlalchemy import insert, update

    from toolwire.messages import Message, dump_messages
    from toolwire.store import SQLStore
    from toolwire.store._records import utc_now
    from toolwire.store._schema import chats, messages

    rng = random.Random(1)
    figures = Figures(database=label, rows=rows, branches=branches)
    written, firsts = tree(rows, branches, rng)
    async with SQLStore(url) as store:
        user = await store.ensure_user("bench")
        chat = await store.create_chat(user.id, "long")
        now = utc_now()
        values = [{"id": row_id, "chat_id": chat.id, "sequence_number": seq, "role": "user" if seq % 2 else "assistant",
                   "kind": "user" if seq % 2 else "assistant", "run_id": None, "client_message_id": None,
                   "created_at": now, "parent_id": parent,
                   "message_json": dump_messages([Message.user(f"row {seq} " + "x" * 200)]).decode()}
                  for seq, (row_id, parent) in enumerate(written, start=1)]
        async with store.engine.begin() as conn:
            for start in range(0, len(values), 500):
                await conn.execute(insert(messages), values[start:start + 500])
            await conn.execute(update(chats).where(chats.c.id == chat.id)
                               .values(last_sequence=len(values), active_leaf_id=written[-1][0]))
        figures.path_rows = len((await store.chat_path(chat.id)).rows)
        for _ in range(repeat):
            began, cpu = time.perf_counter(), time.process_time()
            await store.chat_path(chat.id)
            figures.loads.append(time.perf_counter() - began)
            figures.load_cpu += time.process_time() - cpu
            began, cpu = time.perf_counter(), time.process_time()
            await store.switch_leaf(chat.id, rng.choice(firsts))
            figures.switches.append(time.perf_counter() - began)
            figures.switch_cpu += time.process_time() - cpu
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.branches", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000, help="rows of the chat (10,000 by default)")
    parser.add_argument("--branches", type=int, default=100, help="branches (100 by default)")
    parser.add_argument("--repeat", type=int, default=50, help="loads and switches measured (50 by default)")
    parser.add_argument("--budget-ms", type=float, default=50.0, help="the load time to stay within (50 ms)")
    parser.add_argument("--db", action="append", default=None,
                        help="sqlite, postgres (started here) or a database URL; repeatable (both by default)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    results: list[Figures] = []
    with ExitStack() as stack:
        for target in args.db or ["sqlite", "postgres"]:
            if target == "sqlite":
                folder = stack.enter_context(tempfile.TemporaryDirectory())
                url, label = f"sqlite:///{folder}/bench.db", "SQLite"
            elif target == "postgres":
                from tests.services import start_postgres

                cluster = stack.enter_context(start_postgres())
                url, label = cluster.url(cluster.new_database()), "PostgreSQL"
            else:
                url, label = target, target.split(":", 1)[0]
            results.append(asyncio.run(measure(url, label, args.rows, args.branches, args.repeat)))
    print("| database | rows | branches | active branch rows | load p50 ms | load max ms | load CPU ms | "
          f"switch p50 ms | switch max ms | switch CPU ms | load within {args.budget_ms:.0f} ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for figures in results:
        print(figures.row(args.budget_ms))


if __name__ == "__main__":
    main()
