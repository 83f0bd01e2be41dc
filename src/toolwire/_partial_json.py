"""Incremental parsing of a JSON document that is still arriving, for live argument previews.

`PartialJSON.feed(fragment)` consumes only the new text (string bodies are skipped with one regex
search per fragment, not character by character), so feeding a document costs time linear in its size.
`snapshot()` materialises what is known so far: containers that are still open, strings cut short
(kept as the prefix received), and nothing for an unfinished key, number or literal — a preview never
shows a value that could still change meaning (`12` that may become `123`, `t` that may become `true`).

The preview is best-effort by design: malformed input stops the preview (it stays at its last good
state); the authoritative parse happens once, when the call ends.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["PartialJSON"]

_STRING_SPECIAL = re.compile(r'["\\]')
_PARTIAL_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{0,3})?$")

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

    __slots__ = ("_escape", "_key", "_lit", "_mode", "_root", "_stack", "_str", "_str_is_key", "size")

    def __init__(self) -> None:
        self.size = 0
        self._mode = _VALUE
        self._stack: list[Any] = []  # open containers (dict or list)
        self._key: list[str | None] = []  # per open container: the key awaiting its value (dicts)
        self._root: Any = _MISSING
        self._str: list[str] = []  # raw (still escaped) text of the string being read
        self._str_is_key = False
        self._escape = False  # the previous fragment ended with a backslash inside a string
        self._lit: list[str] = []

    def feed(self, fragment: str) -> None:
        self.size += len(fragment)
        i, n = 0, len(fragment)
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
                    self._open({})
                    self._mode = _KEY
                elif c == "[":
                    self._open([])
                    self._mode = _VALUE
                elif c == '"':
                    self._mode, self._str_is_key, self._str = _STRING, False, []
                elif c == "]" and self._stack and isinstance(self._stack[-1], list) and not self._stack[-1]:
                    self._close()
                else:
                    self._mode, self._lit = _LITERAL, [c]
            elif mode == _KEY:
                if c == '"':
                    self._mode, self._str_is_key, self._str = _STRING, True, []
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
        """The value so far, as fresh containers (safe to keep while parsing goes on); `None` if none."""
        if self._root is _MISSING:
            if self._mode == _STRING and not self._str_is_key and not self._stack:
                return self._partial_string()
            return None
        copy = _copy(self._root)
        if self._mode == _STRING and not self._str_is_key and self._stack:
            # Show the string being streamed at the place it will land.
            target = _follow(copy, self._stack, self._root)
            if isinstance(target, list):
                target.append(self._partial_string())
            elif isinstance(target, dict) and self._key[-1] is not None:
                target[self._key[-1]] = self._partial_string()
        return copy

    # -- internals -----------------------------------------------------------------------------

    def _scan_string(self, s: str, i: int) -> int:
        if self._escape:
            self._escape = False
            # The escaped character (for \u, the 4 hex digits follow as ordinary text).
            self._str.append(s[i])
            i += 1
        while True:
            m = _STRING_SPECIAL.search(s, i)
            if m is None:
                self._str.append(s[i:])
                return len(s)
            j = m.start()
            if s[j] == "\\":
                if j + 1 < len(s):
                    self._str.append(s[i : j + 2])
                    i = j + 2
                    continue
                self._str.append(s[i : j + 1])
                self._escape = True
                return len(s)
            self._str.append(s[i:j])
            self._end_string()
            return j + 1

    def _end_string(self) -> None:
        raw = "".join(self._str)
        self._str = []
        try:
            value = orjson.loads('"' + raw + '"') if "\\" in raw else raw
        except orjson.JSONDecodeError:
            self._mode = _BROKEN
            return
        if self._str_is_key:
            self._key[-1] = value
            self._mode = _COLON
        else:
            self._value(value)

    def _partial_string(self) -> str:
        raw = "".join(self._str)
        if "\\" not in raw:
            return raw
        raw = _PARTIAL_ESCAPE.sub("", raw)
        try:
            value: str = orjson.loads('"' + raw + '"')
        except orjson.JSONDecodeError:
            return ""
        return value

    def _end_literal(self) -> None:
        text = "".join(self._lit)
        self._lit = []
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            self._mode = _BROKEN
            return
        self._value(value)

    def _open(self, container: dict[str, Any] | list[Any]) -> None:
        self._value(container)
        self._stack.append(container)
        self._key.append(None)

    def _close(self) -> None:
        self._stack.pop()
        self._key.pop()
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


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _follow(copy: Any, stack: list[Any], root: Any) -> Any:
    """The copy of the innermost open container (`stack[-1]`), found by walking from the root."""
    node_orig, node_copy = root, copy
    for container in stack[1:]:
        if isinstance(node_orig, dict):
            for k, v in node_orig.items():
                if v is container:
                    node_orig, node_copy = v, node_copy[k]
                    break
        else:
            for idx in range(len(node_orig) - 1, -1, -1):
                if node_orig[idx] is container:
                    node_orig, node_copy = container, node_copy[idx]
                    break
    return node_copy
