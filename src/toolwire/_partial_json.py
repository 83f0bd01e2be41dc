"""Incremental parsing of a JSON document that is still arriving, for live argument previews.

`PartialJSON.feed(fragment)` consumes only the new text (string bodies are skipped with one regex
search per fragment, not character by character, and escapes are decoded as they complete), so feeding
a document costs time linear in its size. A string being streamed is kept decoded, so a snapshot joins
its pieces (and keeps the join for the next one) instead of decoding the whole prefix again.
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

_STRING_SPECIAL = re.compile(r'["\\\x00-\x1f]')
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}

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

    __slots__ = ("_ctrl", "_esc", "_escaped", "_key", "_lit", "_mode", "_nested", "_root", "_stack", "_str",
                 "_str_is_key", "size")

    def __init__(self) -> None:
        self.size = 0
        self._mode = _VALUE
        self._stack: list[Any] = []  # open containers (dict or list)
        self._key: list[str | None] = []  # per open container: the key awaiting its value (dicts)
        self._root: Any = _MISSING
        self._nested = False  # a container was opened inside another one
        self._str: list[str] = []  # decoded text of the string being read
        self._str_is_key = False
        self._esc = ""  # an escape sequence not complete yet (or a high surrogate awaiting its pair)
        self._escaped = False  # the string being read has an escape
        self._ctrl = False  # ... and a raw control character (with an escape, that makes it invalid)
        self._lit: list[str] = []

    def feed(self, fragment: str) -> None:
        self.size += len(fragment)
        i, n = 0, len(fragment)
        if self._mode == _STRING:  # the common case: more of a long string
            if not self._esc and _STRING_SPECIAL.search(fragment) is None:
                self._str.append(fragment)
                return
            i = self._scan_string(fragment, 0)
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
        """The value so far, as fresh containers (safe to keep while parsing goes on); `None` if none."""
        root = self._root
        if not self._nested and type(root) is dict and self._mode == _STRING and not self._str_is_key:
            # The usual preview: a flat object whose string value is streaming (a file's content).
            copy = root.copy()
            key = self._key[-1]
            if key is not None:
                copy[key] = self._partial_string()
            return copy
        if root is _MISSING:
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

    def _start_string(self, is_key: bool) -> None:
        self._mode, self._str_is_key, self._str = _STRING, is_key, []
        self._escaped = self._ctrl = False

    def _scan_string(self, s: str, i: int) -> int:
        n = len(s)
        parts = self._str
        while i < n:
            if self._esc:
                i = self._continue_escape(s, i)
                if self._mode != _STRING:
                    return n
                continue
            m = _STRING_SPECIAL.search(s, i)
            if m is None:
                parts.append(s[i:] if i else s)
                return n
            j = m.start()
            if j > i:
                parts.append(s[i:j])
            c = s[j]
            if c == '"':
                self._end_string()
                return j + 1
            if c == "\\":
                self._escaped = True
                simple = _SIMPLE_ESCAPES.get(s[j + 1 : j + 2])
                if simple is not None:
                    parts.append(simple)
                    i = j + 2
                    continue
                self._esc = c
            else:
                # A raw control character: kept, as a string without escapes keeps it; with an escape
                # the string is not valid JSON (see `_end_string`).
                self._ctrl = True
                parts.append(c)
            i = j + 1
        return n

    def _continue_escape(self, s: str, i: int) -> int:
        """Consume characters of the pending escape; decode it once it is complete."""
        esc = self._esc
        if len(esc) == 1:  # just the backslash
            esc += s[i]
            i += 1
            if esc[1] != "u":
                return self._decode_escape(esc, i)
        if len(esc) < 6:  # \u and up to 4 hex digits
            take = min(6 - len(esc), len(s) - i)
            esc += s[i : i + take]
            i += take
            if len(esc) < 6:
                self._esc = esc
                return i
            if not ("\\ud800" <= esc.lower() <= "\\udbff"):
                return self._decode_escape(esc, i)
            self._esc = esc  # a high surrogate: the low one must follow as the next escape
            return i
        # A high surrogate is pending: collect "\\uXXXX" after it, or stop at the first character that
        # cannot continue it (decoding then fails, as it does for the whole string).
        while len(esc) < 12 and i < len(s):
            c = s[i]
            if (len(esc) == 6 and c != "\\") or (len(esc) == 7 and c != "u"):
                return self._decode_escape(esc, i)
            esc += c
            i += 1
        if len(esc) < 12:
            self._esc = esc
            return i
        return self._decode_escape(esc, i)

    def _decode_escape(self, esc: str, i: int) -> int:
        self._esc = ""
        try:
            self._str.append(orjson.loads('"' + esc + '"'))
        except orjson.JSONDecodeError:
            self._mode = _BROKEN
        return i

    def _end_string(self) -> None:
        parts = self._str
        self._str = []
        if self._escaped and self._ctrl:
            self._mode = _BROKEN  # JSON forbids raw control characters in strings
            return
        value = parts[0] if len(parts) == 1 else "".join(parts)
        if self._str_is_key:
            self._key[-1] = value
            self._mode = _COLON
        else:
            self._value(value)

    def _partial_string(self) -> str:
        parts = self._str
        if not parts or (self._escaped and self._ctrl):
            return ""
        if len(parts) == 1:
            return parts[0]
        text = "".join(parts)
        self._str = [text]  # the next snapshot joins only what arrives meanwhile
        return text

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
        if self._stack:
            self._nested = True
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
    # Only containers are copied (values are immutable); called once per preview, so kept lean.
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if kind is list:
        return [_copy(v) if type(v) in _CONTAINERS else v for v in value]
    return value


_CONTAINERS = (dict, list)


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
