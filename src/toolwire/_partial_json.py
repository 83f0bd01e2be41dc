"""Incremental parsing of a JSON document that is still arriving, for live argument previews.

`PartialJSON.feed(fragment)` consumes only the new text, so feeding a document costs time linear in its
size. Inside a string (where long arguments spend their time) a fragment is only checked for a quote
and a trailing backslash and kept as it came; the raw text is decoded (by orjson, escapes included) when
a snapshot needs it, and only the part not decoded yet: a snapshot never re-decodes the whole prefix.
`snapshot()` materialises what is known so far: containers that are still open, strings cut short
(kept as the prefix received), and nothing for an unfinished key, number or literal — a preview never
shows a value that could still change meaning (`12` that may become `123`, `t` that may become `true`).

The preview is best-effort by design: malformed input stops the preview (it stays at its last good
state), and so does nesting deeper than `MAX_VALUE_DEPTH` (such arguments are refused when the call ends,
and a shallow preview is what every consumer can still encode and copy without recursion limits); the
authoritative parse happens once, when the call ends.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ._depth import MAX_VALUE_DEPTH

__all__ = ["PartialJSON"]

_loads = orjson.loads
_QUOTE_OR_BACKSLASH = re.compile(r'["\\]')
_CONTROL = re.compile(r"[\x00-\x1f]")

# Parser modes.
_VALUE = 0  # expecting a value
_AFTER = 1  # a value ended: expecting ',' or a closing bracket
_KEY = 2  # inside an object, expecting a key or '}'
_COLON = 3  # expecting ':'
_STRING = 4  # inside a string
_LITERAL = 5  # inside a number or true/false/null
_BROKEN = 6  # malformed input: the preview stops here


class PartialJSON:
    """Feed JSON text in fragments; take snapshots of the value parsed so far."""

    __slots__ = ("_bad", "_ctrl", "_done", "_escaped", "_key", "_lit", "_mode", "_odd", "_places", "_raw", "_root",
                 "_stack", "_str_is_key", "size")

    def __init__(self) -> None:
        self.size = 0
        self._mode = _VALUE
        self._stack: list[Any] = []  # open containers (dict or list)
        self._key: list[str | None] = []  # per open container: the key awaiting its value (dicts)
        self._places: list[Any] = []  # per open container: its key or index in the one holding it
        self._root: Any = _MISSING
        # The string being read: `_done` is decoded, `_raw` is what came after it, still escaped.
        self._done = ""
        self._raw: list[str] = []
        self._str_is_key = False
        self._odd = False  # the raw text ends with an unpaired backslash: the next character is escaped
        self._escaped = False  # the string has an escape ...
        self._ctrl = False  # ... or a raw control character: both together make it invalid JSON
        self._bad = False  # the string is not valid JSON: no preview of it, and the parse stops at its end
        self._lit: list[str] = []

    def feed(self, fragment: str) -> None:
        self.size += len(fragment)
        i = 0
        if self._mode == _STRING:  # the common case: more of a long string
            # A fragment that cannot end the string or leave an escape open is kept as it is: one without
            # a quote, or (with no backslash pair, so every backslash starts an escape) whose every quote
            # follows a backslash.
            if not self._odd and fragment[-1:] != "\\" and (
                '"' not in fragment
                or ("\\\\" not in fragment and fragment.count('"') == fragment.count('\\"'))
            ):
                self._raw.append(fragment)
                return
            i = self._scan_string(fragment, 0)
        n = len(fragment)
        while i < n:
            mode = self._mode
            if mode == _STRING:
                i = self._scan_string(fragment, i)
                continue
            c = fragment[i]
            if mode == _LITERAL:
                if c in ",]} \t\r\n":
                    self._end_literal()
                    continue  # re-read c in the new mode
                self._lit.append(c)
                i += 1
                continue
            i += 1
            if c in " \t\r\n":
                continue
            if mode == _VALUE:
                if c == "{":
                    self._mode = _KEY if self._open({}) else _BROKEN
                elif c == "[":
                    self._mode = _VALUE if self._open([]) else _BROKEN
                elif c == '"':
                    self._start_string(False)
                elif c == "]" and self._stack and isinstance(self._stack[-1], list) and not self._stack[-1]:
                    self._close()
                else:
                    self._mode, self._lit = _LITERAL, [c]
            elif mode == _KEY:
                if c == '"':
                    self._start_string(True)
                elif c == "}":
                    self._close()
                else:
                    self._mode = _BROKEN
            elif mode == _COLON:
                self._mode = _VALUE if c == ":" else _BROKEN
            elif mode == _AFTER:
                top = self._stack[-1] if self._stack else None
                if c == "," and top is not None:
                    self._mode = _KEY if isinstance(top, dict) else _VALUE
                elif (c == "}" and isinstance(top, dict)) or (c == "]" and isinstance(top, list)):
                    self._close()
                else:
                    self._mode = _BROKEN
            else:  # _BROKEN
                return

    def snapshot(self) -> Any:
        """The value so far (`None` if none), safe to keep while parsing goes on.

        Only what parsing can still change is copied: the objects and arrays still open (the path from
        the root to the value being read), each a shallow copy, and the string still arriving. Closed
        containers never change again, so successive snapshots share them: the cost follows the open
        path, not the size of the document so far. Snapshots are therefore meant to be read, not
        changed in place.
        """
        stack = self._stack
        streaming = self._mode == _STRING and not self._str_is_key
        if not stack:
            root = self._root
            if root is _MISSING:
                return self._partial_string() if streaming else None
            return root  # a finished document (or scalar): nothing will change it
        copy = parent = stack[0].copy()
        if len(stack) > 1:
            places = self._places
            for depth in range(1, len(stack)):
                child = stack[depth].copy()
                parent[places[depth]] = child
                parent = child
        if streaming:
            # Show the string being streamed at the place it will land.
            if type(parent) is list:
                parent.append(self._partial_string())
            else:
                key = self._key[-1]
                if key is not None:
                    parent[key] = self._partial_string()
        return copy

    # -- internals -----------------------------------------------------------------------------

    def _start_string(self, is_key: bool) -> None:
        self._mode, self._str_is_key = _STRING, is_key
        self._done, self._raw = "", []
        self._odd = self._escaped = self._ctrl = self._bad = False

    def _scan_string(self, s: str, i: int) -> int:
        """Find the closing quote (one not escaped by an odd run of backslashes); keep the raw text."""
        n = len(s)
        start = i
        odd = self._odd
        while i < n:
            if odd:
                odd = False
                i += 1  # the escaped character, whatever it is
                continue
            m = _QUOTE_OR_BACKSLASH.search(s, i)
            if m is None:
                break
            j = m.start()
            if s[j] == '"':
                if j > start:
                    self._raw.append(s[start:j])
                self._odd = False
                self._end_string()
                return j + 1
            odd = True
            i = j + 1
        if n > start:
            self._raw.append(s[start:] if start else s)
        self._odd = odd
        return n

    def _decode(self, final: bool) -> None:
        """Decode the raw text into `_done`, up to an escape that is not complete yet (unless `final`)."""
        raw = self._raw[0] if len(self._raw) == 1 else "".join(self._raw)
        keep = ""
        if not final and "\\" in raw[-12:]:
            cut = _incomplete_escape(raw)
            raw, keep = raw[:cut], raw[cut:]
        self._raw = [keep] if keep else []
        if self._bad:
            return
        has_escape = "\\" in raw
        if keep or has_escape:
            self._escaped = True
        if not has_escape and raw and _CONTROL.search(raw) is not None:
            self._ctrl = True  # (orjson checks the text it decodes itself)
        if self._escaped and self._ctrl:
            self._bad = True  # JSON forbids raw control characters; only an escape-free string keeps them
            return
        if not raw:
            return
        if has_escape:
            try:
                text: str = _loads('"' + raw + '"')
            except orjson.JSONDecodeError:
                self._bad = True
                return
        else:
            text = raw
        self._done = self._done + text if self._done else text

    def _end_string(self) -> None:
        if self._raw:
            self._decode(final=True)
        value, bad = self._done, self._bad
        self._done, self._raw = "", []
        if bad:
            self._mode = _BROKEN
            return
        if self._str_is_key:
            self._key[-1] = value
            self._mode = _COLON
        else:
            self._value(value)

    def _partial_string(self) -> str:
        raw = self._raw
        if raw:
            piece = raw[0]
            if len(raw) == 1 and "\\" not in piece and piece.isprintable() and not self._bad:
                # Plain text since the last snapshot (the usual case): nothing to decode or check.
                raw.clear()
                self._done = self._done + piece if self._done else piece
                return self._done
            self._decode(final=False)
        return "" if self._bad else self._done

    def _end_literal(self) -> None:
        text = "".join(self._lit)
        self._lit = []
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            self._mode = _BROKEN
            return
        self._value(value)

    def _open(self, container: dict[str, Any] | list[Any]) -> bool:
        """Open a container; False (nothing opened) past `MAX_VALUE_DEPTH` (see the module docstring)."""
        stack = self._stack
        place: Any = None
        if stack:
            if len(stack) >= MAX_VALUE_DEPTH:
                return False
            top = stack[-1]
            place = len(top) if type(top) is list else self._key[-1]
        self._value(container)
        stack.append(container)
        self._key.append(None)
        self._places.append(place)
        return True

    def _close(self) -> None:
        self._stack.pop()
        self._key.pop()
        self._places.pop()
        self._mode = _AFTER

    def _value(self, value: Any) -> None:
        if not self._stack:
            if self._root is _MISSING:
                self._root = value
            self._mode = _AFTER
            return
        top = self._stack[-1]
        if isinstance(top, list):
            top.append(value)
        else:
            key = self._key[-1]
            if key is not None:
                top[key] = value
                self._key[-1] = None
        self._mode = _AFTER


class _Missing:
    pass


_MISSING: Any = _Missing()


def _incomplete_escape(raw: str) -> int:
    """Where an escape still arriving begins at the end of `raw` (or `len(raw)` if none does): a lone
    backslash, a `\\u` with fewer than 4 digits, or a high surrogate whose low half may follow."""
    n = len(raw)
    # Escapes are at most 12 characters (a surrogate pair); start at a backslash run's first backslash
    # so that the run's parity is known.
    start = max(0, n - 12)
    while start > 0 and raw[start - 1] == "\\":
        start -= 1
    i = raw.find("\\", start)
    while 0 <= i < n:
        if i + 1 == n:
            return i
        if raw[i + 1] != "u":
            i = raw.find("\\", i + 2)
            continue
        if i + 6 > n:
            return i
        if raw[i + 2] in "dD" and raw[i + 3] in "89abAB":
            after = raw[i + 6 : i + 8]
            if after in ("", "\\") or (after == "\\u" and i + 12 > n):
                return i
        i = raw.find("\\", i + 6)
    return n
