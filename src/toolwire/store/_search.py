"""Full-text search over a user's chats: their titles and the text of their messages.

One query language for both databases: the words of the query (letters and digits; everything else
separates words), each matched as a word prefix, all of them required, case and accents ignored. The
database does the matching with its own full-text index, written by the database itself, so that no
write path of the store changes and the index can never disagree with the rows:

- SQLite: two FTS5 tables (`search_messages`, `search_titles`) kept by triggers on `messages` and `chats`
  (migration 0002). Each FTS row carries the owner's and the chat's id as indexed words, so that a query
  reads only the caller's part of the index; the rows are still joined to `chats` on the exact owner, which
  is what authorises them (a tokenised id narrows, it never grants).
- PostgreSQL: GIN indexes on `to_tsvector('simple', ...)` of the text parts and of the title. The 'simple'
  configuration neither stems nor drops stop words: the query is in the user's language, whatever it is.

Only text parts are indexed (what the person wrote and the model answered), not thinking, tool arguments
or tool results. A hit is a chat, newest first, with the newest matching message and a plain-text snippet
around the first matching word (built here from that message, the same on both databases).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from ._records import SearchHit
from ._schema import UTCDateTime
from ._writes import chat_from

__all__ = ["MAX_QUERY_WORDS", "query_words", "search_chats"]

MAX_QUERY_WORDS = 8
"""Words of a query beyond this are ignored: each one is another index lookup, and eight say enough."""

_MAX_WORD_CHARS = 64
_SNIPPET_CHARS = 160
# Letters and digits; underscores separate words, as both databases' tokenisers treat them.
_WORD = re.compile(r"[^\W_]+")

# The text parts of a stored row (a JSON list of messages), the same expression in the index and the query
# so that PostgreSQL's planner uses the index.
_PG_MESSAGE_TEXT = ("to_tsvector('simple'::regconfig, jsonb_path_query_array(m.message_json::jsonb, "
                    "'strict $[*].parts[*] ? (@.type == \"text\").text'::jsonpath))")
_PG_TITLE_TEXT = "to_tsvector('simple'::regconfig, c.title)"


def query_words(query: str) -> list[str]:
    """The words a query searches for, lower-cased, at most `MAX_QUERY_WORDS`, each at most 64 characters."""
    words: list[str] = []
    for word in _WORD.findall(query.lower()):
        if word not in words:
            words.append(word[:_MAX_WORD_CHARS])
        if len(words) == MAX_QUERY_WORDS:
            break
    return words


def _phrase(value: str) -> str:
    # An FTS5 string: double quotes doubled. Ids and words here hold none, but the rule costs nothing.
    return '"' + value.replace('"', '""') + '"'


def _fts_match(owner: str, words: list[str]) -> str:
    body = " AND ".join(f"{_phrase(word)}*" for word in words)
    # The owner column holds the hex of the user's id (migration 0002): one word, upper- or lower-case alike.
    return f"owner : {owner.encode().hex()} AND body : ({body})"


async def search_chats(conn: AsyncConnection, user_id: str, query: str, *, limit: int, offset: int) -> list[SearchHit]:
    """The caller's chats matching `query`, newest first: `limit` of them after the first `offset`."""
    words = query_words(query)
    if not words:
        return []
    params: dict[str, Any] = {"user_id": user_id, "limit": limit, "offset": offset}
    if conn.dialect.name == "sqlite":
        params["match"] = _fts_match(user_id, words)
        hits = """
            SELECT chat_id, max(seq) AS sequence_number FROM search_messages
            WHERE search_messages MATCH :match GROUP BY chat_id
            UNION ALL
            SELECT chat_id, NULL FROM search_titles WHERE search_titles MATCH :match
        """
    else:
        params["tsquery"] = " & ".join(f"{word}:*" for word in words)
        hits = f"""
            SELECT m.chat_id AS chat_id, max(m.sequence_number) AS sequence_number
            FROM messages AS m JOIN chats AS c ON c.id = m.chat_id
            WHERE c.user_id = :user_id AND {_PG_MESSAGE_TEXT} @@ to_tsquery('simple', :tsquery)
            GROUP BY m.chat_id
            UNION ALL
            SELECT c.id, NULL FROM chats AS c
            WHERE c.user_id = :user_id AND {_PG_TITLE_TEXT} @@ to_tsquery('simple', :tsquery)
        """
    page = text(f"""
        SELECT c.id, c.user_id, c.title, c.created_at, c.updated_at, c.last_sequence, c.run_count,
               h.sequence_number, m.id AS message_id, m.message_json
        FROM (SELECT chat_id, max(sequence_number) AS sequence_number FROM ({hits}) AS u GROUP BY chat_id) AS h
        JOIN chats AS c ON c.id = h.chat_id AND c.user_id = :user_id
        LEFT JOIN messages AS m ON m.chat_id = h.chat_id AND m.sequence_number = h.sequence_number
        ORDER BY c.updated_at DESC, c.id DESC
        LIMIT :limit OFFSET :offset
    """).columns(created_at=UTCDateTime(), updated_at=UTCDateTime())

    results = []
    for row in await conn.execute(page, params):
        chat = chat_from(row)
        source = _message_text(row.message_json) if row.message_json is not None else chat.title
        results.append(SearchHit(chat=chat, message_id=row.message_id, sequence_number=row.sequence_number,
                                 snippet=snippet(source, words)))
    return results


def _message_text(message_json: str) -> str:
    texts: list[str] = []
    for message in orjson.loads(message_json):
        texts.extend(part["text"] for part in message.get("parts", ()) if part.get("type") == "text")
    return "\n".join(texts)


def snippet(source: str, words: list[str]) -> str:
    """About 160 characters of `source` around the first of `words` it contains, on one line."""
    flat = " ".join(source.split())
    folded = flat.lower()
    # lower() can change a string's length (İ -> i̇); search the folded text only where it lines up.
    aligned = len(folded) == len(flat)
    found = [i for i in (folded.find(word) for word in words) if i >= 0] if aligned else []
    start = max(0, min(found) - _SNIPPET_CHARS // 3) if found else 0
    end = min(len(flat), start + _SNIPPET_CHARS)
    if start > 0:
        space = flat.find(" ", start, start + 20)
        start = space + 1 if space >= 0 else start
    return ("…" if start > 0 else "") + flat[start:end].strip() + ("…" if end < len(flat) else "")
