"""A chat is a tree of rows: the statements that keep it and read it, as functions of a `Connection`.

Every row has a parent (`messages.parent_id`, `NULL` for a first message). Editing a message adds a sibling
of it (a new user row under the same parent); regenerating an answer adds a run whose first row goes under
the same user row as the old answer's. Nothing is rewritten or deleted: every branch stays, readable and
resumable to read. Sequence numbers still count every row of the chat, whatever its branch (they order
writes); a branch is given by parents only.

Where rows go:
- a run's rows go under the run's own tip: its last row, or, before it wrote any, the row it extends
  (`runs.leaf_id`: its user message, or the last row of the run it resumes). A run is never moved to another
  branch by someone switching branches while it runs;
- rows appended without a run (`ChatMemory.append`) go under the chat's active leaf;
- the chat's active leaf (`chats.active_leaf_id`, what it shows and answers next) follows a write when it was
  the parent of that write: a person looking at a run's branch keeps seeing its end, a person who switched to
  another branch stays there.

The model sees exactly the path from the root to the row it answers (`run_history`). Paths are read with a
recursive query from the leaf up (one primary-key lookup per row of the path), siblings with the
`(parent_id, chat_id)` index (children by parent id, which is unique across chats; first messages by
`parent_id IS NULL` and the chat).

Every function here runs inside a transaction it does not own (a write operation of `_writer.py`, or a read of
`sql.py`) and neither commits nor awaits.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection, Row, Update, bindparam, case, func, select, text, union_all, update

from ._protocol import ChatNotFound, IdempotencyConflict, InvalidParent, MessageNotFound
from ._records import ACTIVE_STATUSES, ChatPath, MessageRow, Run, RunStart, new_id
from ._schema import UTCDateTime, chats, messages, runs

__all__ = ["ROOT", "chat_path", "checked_parent", "follow_leaf", "leaf_under", "parent_for", "path_rows",
           "run_history", "start_answer", "switch_leaf", "take_under_run", "turn_user_row", "with_previous_leaf"]

ROOT = ""
"""A parent id meaning "no parent": the row starts a new first message of the chat (an edit of the first one)."""

# -- statements ------------------------------------------------------------------------------------------------

_RUN_LAST_ROW = (select(messages.c.id)
                 .where(messages.c.chat_id == bindparam("b_chat"), messages.c.run_id == bindparam("b_run"))
                 .order_by(messages.c.sequence_number.desc()).limit(1).scalar_subquery())
_RUN_LEAF = select(runs.c.leaf_id).where(runs.c.id == bindparam("b_run")).scalar_subquery()
_RUN_TIP = func.coalesce(_RUN_LAST_ROW, _RUN_LEAF)
_PARENT_FOR = select(func.coalesce(
    _RUN_LAST_ROW, _RUN_LEAF, select(chats.c.active_leaf_id).where(chats.c.id == bindparam("b_chat")).scalar_subquery(),
))

# A run's round, in the statement that takes its sequence numbers (and locks the chat's row on PostgreSQL): the
# run's tip is returned (the rows' parent) and the active leaf follows to the round's last row if it was the tip.
# Neither subquery reads `chats`, so what they see does not depend on when the lock was granted; a run without
# a tip (none of its rows, no `leaf_id`) leaves the leaf alone and returns NULL (the caller does it the long way).
_TAKE_UNDER_RUN = (update(chats).where(chats.c.id == bindparam("b_chat"))
                   .values(last_sequence=chats.c.last_sequence + bindparam("b_count"),
                           updated_at=bindparam("b_now", type_=UTCDateTime()),
                           active_leaf_id=case((func.coalesce(chats.c.active_leaf_id, "") == _RUN_TIP,
                                                bindparam("b_leaf")), else_=chats.c.active_leaf_id))
                   .returning(*chats.c, _RUN_TIP.label("run_tip")))

_FOLLOW_LEAF = (update(chats).where(chats.c.id == bindparam("b_chat"),
                                    func.coalesce(chats.c.active_leaf_id, "") == bindparam("b_parent"))
                .values(active_leaf_id=bindparam("b_leaf")))


def _up_from_leaf() -> Any:
    """The ids (and parents) of the rows from `b_leaf` up to the root of `b_chat`.

    Each step reads its row's parent with a scalar subquery (one primary-key lookup) rather than a join with
    `messages`: PostgreSQL plans a join in a recursive query for a whole table (a hash join over a scan of every
    chat's rows); a subquery it can only run as a lookup."""
    start = (select(messages.c.id, messages.c.parent_id)
             .where(messages.c.id == bindparam("b_leaf"), messages.c.chat_id == bindparam("b_chat"))
             .cte("up", recursive=True))
    step = messages.alias("step")
    parent_of = select(step.c.parent_id).where(step.c.id == start.c.parent_id).scalar_subquery()
    return start.union_all(select(start.c.parent_id, parent_of).where(start.c.parent_id.is_not(None)))


_UP = _up_from_leaf()
_PATH = select(messages).where(messages.c.id.in_(select(_UP.c.id))).order_by(messages.c.sequence_number)
# Two selects rather than one with an OR: each is one range of the (chat_id, parent_id) index.
_SIBLINGS = union_all(
    # Row ids are unique across chats, so a parent's children are found by it alone (the index's first column).
    select(messages.c.id, messages.c.parent_id, messages.c.sequence_number)
    .where(messages.c.parent_id.in_(select(_UP.c.parent_id))),
    select(messages.c.id, messages.c.parent_id, messages.c.sequence_number)
    .where(messages.c.chat_id == bindparam("b_chat"), messages.c.parent_id.is_(None)),
)  # sorted here, not by the database: an ORDER BY lets SQLite walk the (chat_id, sequence_number) index instead

# Down from a row to the newest leaf under it: at each row, its child with the highest sequence number. By parent
# alone: with the chat's id too, a planner may walk the (chat_id, sequence_number) index backwards instead.
_LEAF_UNDER = text("""
    WITH RECURSIVE down(id, depth) AS (
        SELECT id, 0 FROM messages WHERE id = :b_row AND chat_id = :b_chat
        UNION ALL
        SELECT (SELECT c.id FROM messages AS c WHERE c.parent_id = down.id
                ORDER BY c.sequence_number DESC LIMIT 1), depth + 1
        FROM down WHERE down.id IS NOT NULL
    )
    SELECT id FROM down WHERE id IS NOT NULL ORDER BY depth DESC LIMIT 1
""")

_ROW = select(messages).where(messages.c.id == bindparam("b_row"), messages.c.chat_id == bindparam("b_chat"))


def _row_from(row: Any) -> MessageRow:
    return MessageRow(id=row.id, chat_id=row.chat_id, sequence_number=row.sequence_number, kind=row.kind,
                      role=row.role, run_id=row.run_id, created_at=row.created_at, message_json=row.message_json,
                      client_message_id=row.client_message_id, parent_id=row.parent_id)


# -- where rows go ---------------------------------------------------------------------------------------------

def parent_for(conn: Connection, chat_id: str, run_id: str | None) -> str:
    """The row new rows go under (`ROOT` in an empty chat): the run's tip, or the chat's active leaf."""
    found = conn.execute(_PARENT_FOR, {"b_chat": chat_id, "b_run": run_id}).scalar()
    return found or ROOT


def with_previous_leaf(statement: Update) -> Update:
    """`statement`, an UPDATE of the chat `b_chat` that moves its active leaf, also returning the leaf as it was
    (`previous_leaf`), for PostgreSQL: read by a `SELECT ... FOR UPDATE` that takes the row's lock first. A
    subquery in RETURNING would read the statement's snapshot, which is older than the row it updates when it
    had to wait for the lock (another writer's leaf could be missed). SQLite's write transactions hold the write
    lock from their start (`BEGIN IMMEDIATE`, `_engine.py`): there the leaf is read before the UPDATE."""
    locked = (select(chats.c.id, chats.c.active_leaf_id.label("previous_leaf"))
              .where(chats.c.id == bindparam("b_chat")).with_for_update().cte("locked"))
    return statement.where(chats.c.id == locked.c.id).returning(locked.c.previous_leaf)


def take_under_run(conn: Connection, chat_id: str, run_id: str, count: int, now: Any, leaf_id: str) -> Row[Any] | None:
    """Take `count` sequence numbers for a round of `run_id` ending at `leaf_id`, moving the active leaf there if it
    was the run's tip: the chat's row as it is now, with the tip as `run_tip` (`None`: the run has none, nothing
    moved). `None` when there is no such chat."""
    return conn.execute(_TAKE_UNDER_RUN, {"b_chat": chat_id, "b_run": run_id, "b_count": count, "b_now": now,
                                          "b_leaf": leaf_id}).first()


def follow_leaf(conn: Connection, chat_id: str, parent_id: str, leaf_id: str) -> None:
    """Move the chat's active leaf to `leaf_id` if it is `parent_id` (the person is looking at that branch)."""
    conn.execute(_FOLLOW_LEAF, {"b_chat": chat_id, "b_parent": parent_id, "b_leaf": leaf_id})


def checked_parent(conn: Connection, chat_id: str, parent_id: str) -> MessageRow | None:
    """The row a new user message goes under, checked: it exists in this chat and is not a user message
    (a user message is answered, not followed by another). `None` for `ROOT`."""
    if parent_id == ROOT:
        return None
    row = conn.execute(_ROW, {"b_row": parent_id, "b_chat": chat_id}).first()
    if row is None:
        raise MessageNotFound(f"This chat has no message {parent_id[:80]!r} to reply under; use the id of one of "
                              "its messages (GET /api/chats/{id}/messages), or \"root\" for a new first message.")
    if row.kind == "user":
        raise InvalidParent("A new message goes under an answer, not under another user message; to answer "
                              "that message again, regenerate it (POST /api/chats/{id}/messages/{message_id}/"
                              "regenerate).")
    return _row_from(row)


# -- reading a branch ------------------------------------------------------------------------------------------

def path_rows(conn: Connection, chat_id: str, leaf_id: str) -> list[MessageRow]:
    """The rows from the chat's root to `leaf_id`, oldest first (empty if the chat has no such row)."""
    return [_row_from(row) for row in conn.execute(_PATH, {"b_leaf": leaf_id, "b_chat": chat_id})]


def leaf_under(conn: Connection, chat_id: str, row_id: str) -> str | None:
    """The newest leaf under `row_id` (itself if it has no children); `None` if the chat has no such row."""
    found = conn.execute(_LEAF_UNDER, {"b_row": row_id, "b_chat": chat_id}).scalar()
    return str(found) if found is not None else None


def chat_path(conn: Connection, chat_id: str, through: str | None) -> ChatPath:
    """The branch through `through` down to its newest leaf (`None`: the chat's active branch), with each
    row's siblings. Raises `MessageNotFound` for a row the chat does not have."""
    if through is None:
        leaf = conn.execute(select(chats.c.active_leaf_id).where(chats.c.id == chat_id)).scalar()
    else:
        leaf = leaf_under(conn, chat_id, through)
        if leaf is None:
            raise MessageNotFound(f"This chat has no message {through[:80]!r}.")
    if leaf is None:
        return ChatPath(leaf_id=None, rows=[], siblings={})
    rows = path_rows(conn, chat_id, leaf)
    children: dict[str | None, list[str]] = {}
    for sibling in sorted(conn.execute(_SIBLINGS, {"b_leaf": leaf, "b_chat": chat_id}),
                          key=lambda found: found.sequence_number):
        children.setdefault(sibling.parent_id, []).append(sibling.id)
    return ChatPath(leaf_id=leaf, rows=rows, siblings={row.id: children.get(row.parent_id, [row.id])
                                                       for row in rows})


def run_history(conn: Connection, chat_id: str, run_id: str) -> list[MessageRow]:
    """What the model answering in `run_id` sees: the path from the root to the run's tip."""
    tip = parent_for(conn, chat_id, run_id)
    return path_rows(conn, chat_id, tip) if tip != ROOT else []


# -- writing ---------------------------------------------------------------------------------------------------

def switch_leaf(conn: Connection, chat_id: str, row_id: str) -> ChatPath:
    """Make the branch through `row_id` (down to its newest leaf) the chat's active one; returns it."""
    leaf = leaf_under(conn, chat_id, row_id)
    if leaf is None:
        raise MessageNotFound(f"This chat has no message {row_id[:80]!r}.")
    conn.execute(update(chats).where(chats.c.id == chat_id).values(active_leaf_id=leaf))
    return chat_path(conn, chat_id, leaf)


def turn_user_row(conn: Connection, chat_id: str, row_id: str) -> MessageRow:
    """The user message whose answer `row_id` is part of (`row_id` itself when it is a user message)."""
    current: str | None = row_id
    while current is not None:
        row = conn.execute(_ROW, {"b_row": current, "b_chat": chat_id}).first()
        if row is None:
            break
        if row.kind == "user":
            return _row_from(row)
        current = row.parent_id
    raise MessageNotFound(f"This chat has no message {row_id[:80]!r} to regenerate, or it answers no user message.")


def start_answer(conn: Connection, chat_id: str, row_id: str, client_message_id: str | None, owner: str,
                 lease_seconds: float) -> tuple[RunStart, str]:
    """A new run answering again the user message of `row_id`'s turn (regenerate, or retry after a failure):
    its rows go under that user message, beside the earlier answer; the message is not stored again. The
    user message becomes the chat's active leaf (the new answer follows it). Returns the start and the chat
    id (for the caches).

    Raises `RunConflict` while the chat has a run going, `MessageNotFound` for a row it does not have, and
    `IdempotencyConflict` when `client_message_id` named another request; the same request again raises
    `_writes.Earlier` with its run (nothing stored)."""
    from ._writes import Earlier, Writes, run_conflict, run_from

    taken = conn.execute(update(chats).where(chats.c.id == chat_id).values(run_count=chats.c.run_count + 1)
                         .returning(chats.c.run_count)).first()
    if taken is None:
        raise ChatNotFound(f"There is no chat {chat_id!r}.")
    if client_message_id is not None:
        earlier = conn.execute(select(*[c for c in runs.c if c.name not in ("paused_state", "step_message")])
                               .where(runs.c.chat_id == chat_id, runs.c.client_message_id == client_message_id)
                               .order_by(runs.c.run_number).limit(1)).first()
        if earlier is not None:
            try:
                same = turn_user_row(conn, chat_id, row_id)
            except MessageNotFound:
                same = None
            if same is None or earlier.leaf_id != same.id:
                raise IdempotencyConflict(f"client_message_id {client_message_id!r} was already used in this chat "
                                          "for another request; give every new request its own id.")
            raise Earlier(RunStart(run=run_from(earlier), user_row=same, created=False))
    user_row = turn_user_row(conn, chat_id, row_id)
    active = Writes.run_where(conn, runs.c.chat_id == chat_id, runs.c.status.in_(ACTIVE_STATUSES))
    if active is not None:
        raise run_conflict(active)
    run = Run(id=new_id("run"), chat_id=chat_id, run_number=int(taken.run_count), status="running",
              client_message_id=client_message_id, lease_owner=owner, lease_expires_at=time.time() + lease_seconds,
              leaf_id=user_row.id)
    Writes.insert_run(conn, run)
    conn.execute(update(chats).where(chats.c.id == chat_id).values(active_leaf_id=user_row.id))
    return RunStart(run=run, user_row=user_row, created=True), chat_id

