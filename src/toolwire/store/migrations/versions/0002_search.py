"""Full-text search over chat titles and message text (toolwire.store._search says how it is used).

SQLite: FTS5 tables kept by triggers, filled from the existing rows. PostgreSQL: GIN expression indexes.
Neither is part of `_schema.metadata` (SQLAlchemy does not describe virtual tables or expression indexes);
`SEARCH_OBJECTS` names them so that schema comparisons leave them out.

Revision ID: 0002_search
Revises: 0001_initial
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002_search"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The text parts of a row, joined by newlines (NULL when it has none: tool rounds index nothing).
_SQLITE_TEXT = """(SELECT group_concat(json_extract(p.value, '$.text'), char(10))
                   FROM json_each({row}.message_json) AS m, json_each(m.value, '$.parts') AS p
                   WHERE json_extract(p.value, '$.type') = 'text')"""

_SQLITE = [
    # owner and chat_key are the hex of the user's and the chat's ids: one indexed word each (ids hold
    # punctuation the tokeniser would split on, and a phrase of common pieces such as "user" is slow to match),
    # so a query reads only its owner's part of the index and a deleted chat's rows are found by its key.
    # chat_id, message_id and seq (the row's sequence number) are stored, not indexed: the results are built from
    # them without reading the rows that did not make the page.
    "CREATE VIRTUAL TABLE search_messages USING fts5(body, owner, chat_key, chat_id UNINDEXED, "
    "message_id UNINDEXED, seq UNINDEXED, tokenize = 'unicode61 remove_diacritics 2')",
    "CREATE VIRTUAL TABLE search_titles USING fts5(body, owner, chat_key, chat_id UNINDEXED, "
    "tokenize = 'unicode61 remove_diacritics 2')",
    f"""CREATE TRIGGER search_messages_insert AFTER INSERT ON messages BEGIN
        INSERT INTO search_messages (body, owner, chat_key, chat_id, message_id, seq)
        SELECT body, hex(owner), hex(new.chat_id), new.chat_id, new.id, new.sequence_number
        FROM (SELECT {_SQLITE_TEXT.format(row='new')} AS body, c.user_id AS owner FROM chats AS c
              WHERE c.id = new.chat_id)
        WHERE body IS NOT NULL;
    END""",
    # Rows are deleted with their chat only; the chat's trigger removes its index rows through its key
    # (not rowids: VACUUM may renumber the rowids of a table without an INTEGER PRIMARY KEY).
    """CREATE TRIGGER search_chats_delete AFTER DELETE ON chats BEGIN
        DELETE FROM search_messages WHERE rowid IN (
            SELECT rowid FROM search_messages WHERE search_messages MATCH 'chat_key : ' || hex(old.id))
            AND chat_id = old.id;
        DELETE FROM search_titles WHERE rowid IN (
            SELECT rowid FROM search_titles WHERE search_titles MATCH 'chat_key : ' || hex(old.id))
            AND chat_id = old.id;
    END""",
    """CREATE TRIGGER search_chats_insert AFTER INSERT ON chats WHEN new.title != '' BEGIN
        INSERT INTO search_titles (body, owner, chat_key, chat_id)
        VALUES (new.title, hex(new.user_id), hex(new.id), new.id);
    END""",
    """CREATE TRIGGER search_chats_rename AFTER UPDATE OF title ON chats WHEN new.title != old.title BEGIN
        DELETE FROM search_titles WHERE rowid IN (
            SELECT rowid FROM search_titles WHERE search_titles MATCH 'chat_key : ' || hex(old.id))
            AND chat_id = old.id;
        INSERT INTO search_titles (body, owner, chat_key, chat_id)
        SELECT new.title, hex(new.user_id), hex(new.id), new.id WHERE new.title != '';
    END""",
    f"""INSERT INTO search_messages (body, owner, chat_key, chat_id, message_id, seq)
        SELECT body, hex(owner), hex(chat_id), chat_id, id, sequence_number
        FROM (SELECT {_SQLITE_TEXT.format(row='r')} AS body, c.user_id AS owner, r.chat_id, r.id, r.sequence_number
              FROM messages AS r JOIN chats AS c ON c.id = r.chat_id)
        WHERE body IS NOT NULL""",
    "INSERT INTO search_titles (body, owner, chat_key, chat_id) "
    "SELECT title, hex(user_id), hex(id), id FROM chats WHERE title != ''",
]

_POSTGRES = [
    """CREATE INDEX ix_search_messages_text ON messages USING gin (to_tsvector('simple'::regconfig,
        jsonb_path_query_array(message_json::jsonb, 'strict $[*].parts[*] ? (@.type == "text").text'::jsonpath)))""",
    "CREATE INDEX ix_search_chats_title ON chats USING gin (to_tsvector('simple'::regconfig, title))",
]


def upgrade() -> None:
    for statement in _SQLITE if op.get_bind().dialect.name == "sqlite" else _POSTGRES:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("search_messages_insert", "search_chats_delete", "search_chats_insert", "search_chats_rename"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS search_messages")
        op.execute("DROP TABLE IF EXISTS search_titles")
    else:
        op.execute("DROP INDEX IF EXISTS ix_search_messages_text")
        op.execute("DROP INDEX IF EXISTS ix_search_chats_title")
