"""Gemini 3 streamed function-call arguments: `partialArgs` entries rebuilt into one call's JSON text.

A streamed call is a `functionCall` with `name` and `willContinue`, then parts whose `partialArgs` each
name a place in the arguments by JSON path (`$.a.b[0]`) and carry a typed value (strings possibly in
pieces), then an empty `functionCall: {}`. `StreamedArguments` writes the JSON text as the entries come
(so previews work while the call streams) and keeps the value it describes.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ._values import MAX_VALUE_DEPTH, InvalidField, need_str, wrong

__all__ = ["StreamedArguments"]


_PATH_STEP = re.compile(r"""\.([^.\[]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\["((?:[^"\\]|\\.)*)"\]""")


def _parse_json_path(path: str) -> list[str | int]:
    """`$.a.b[0]['c d']` → `["a", "b", 0, "c d"]` (the RFC 9535 forms Gemini uses)."""
    if not path.startswith("$"):
        raise ValueError(f"partialArgs jsonPath {path!r} does not start with '$'")
    steps: list[str | int] = []
    i = 1
    while i < len(path):
        m = _PATH_STEP.match(path, i)
        if m is None:
            raise ValueError(f"partialArgs jsonPath {path!r} is not a path toolwire can read")
        name, index, single, double = m.groups()
        if index is not None:
            steps.append(int(index))
        elif name is not None:
            steps.append(name)
        else:
            quoted = single if single is not None else double
            steps.append(re.sub(r"\\(.)", r"\1", quoted))
        i = m.end()
    if not steps:
        raise ValueError(f"partialArgs jsonPath {path!r} names no argument")
    return steps


class _Frame:
    __slots__ = ("container", "count", "step")

    def __init__(self, step: str | int | None, container: dict[str, Any] | list[Any]) -> None:
        self.step = step
        self.container = container
        self.count = 0


class StreamedArguments:
    """Rebuilds one call's arguments from `partialArgs` entries.

    Two products: the JSON text written as the entries arrive (fed to the accumulator as argument
    fragments, so previews and `arguments_raw` work as for any streamed call), and the object itself,
    which is authoritative: were a path ever to revisit an object already closed in the text, the text
    would repeat a key, but the object merges both.
    """

    __slots__ = ("_open_path", "_open_pieces", "_stack", "root")

    def __init__(self) -> None:
        self.root: dict[str, Any] = {}
        self._stack: list[_Frame] = []
        self._open_path: list[str | int] | None = None
        self._open_pieces: list[str] = []

    @property
    def pending(self) -> bool:
        """A string value is still streaming (its last piece said `willContinue`)."""
        return self._open_path is not None

    def feed(self, entry: dict[str, Any]) -> str:
        """Apply one `partialArgs` entry; return the argument text it adds."""
        where = "candidates[0].content.parts[].functionCall.partialArgs[]"
        path = _parse_json_path(need_str(entry["jsonPath"], f"{where}.jsonPath"))
        if len(path) >= MAX_VALUE_DEPTH:
            raise InvalidField(f"{where}.jsonPath", f"a path of at most {MAX_VALUE_DEPTH} steps", entry["jsonPath"])
        more = bool(entry.get("willContinue"))
        out: list[str] = []
        if "stringValue" in entry:
            piece = need_str(entry["stringValue"], f"{where}.stringValue")
            if self._open_path == path:
                self._open_pieces.append(piece)
                out.append(orjson.dumps(piece).decode()[1:-1])
                if not more:
                    out.append(self._close_string())
                return "".join(out)
            value: Any = piece
        elif "numberValue" in entry:
            value = entry["numberValue"]
            if type(value) not in (int, float):
                wrong(f"{where}.numberValue", "a number", value)
            if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
                value = int(value)  # a double on the wire; integral values are meant as integers
        elif "boolValue" in entry:
            value = entry["boolValue"]
            if type(value) is not bool:
                wrong(f"{where}.boolValue", "true or false", value)
        elif "nullValue" in entry:
            value = None
        else:
            raise ValueError(f"partialArgs entry for {entry['jsonPath']!r} carries no value")
        if self._open_path is not None:
            out.append(self._close_string())
        frame = self._enter(path, out)
        self._member(frame, path[-1], out)
        if isinstance(value, str):
            self._open_path = path
            self._open_pieces = [value]
            out.append('"' + orjson.dumps(value).decode()[1:-1])
            if not more:
                out.append(self._close_string())
        else:
            _store(frame.container, path[-1], value)
            out.append(orjson.dumps(value).decode())
        return "".join(out)

    def finish(self) -> str:
        """Close every open object and array; the text that completes the JSON."""
        out = [self._close_string()] if self._open_path is not None else []
        out.extend("]" if isinstance(f.container, list) else "}" for f in reversed(self._stack))
        self._stack = []
        return "".join(out)

    def _close_string(self) -> str:
        assert self._open_path is not None
        frame = self._stack[-1]
        _store(frame.container, self._open_path[-1], "".join(self._open_pieces))
        self._open_path = None
        self._open_pieces = []
        return '"'

    def _enter(self, path: list[str | int], out: list[str]) -> _Frame:
        """Close containers not on `path`, open those missing; return the frame that holds the leaf."""
        if not self._stack:
            self._stack.append(_Frame(None, self.root))
            out.append("{")
        parents = path[:-1]
        depth = 1  # frames beyond the root that are shared with `parents`
        while depth < len(self._stack) and depth - 1 < len(parents) and self._stack[depth].step == parents[depth - 1]:
            depth += 1
        while len(self._stack) > depth:
            closed = self._stack.pop()
            out.append("]" if isinstance(closed.container, list) else "}")
        for position in range(depth - 1, len(parents)):
            step = parents[position]
            parent = self._stack[-1]
            self._member(parent, step, out)
            following = path[position + 1]
            container = _child(parent.container, step, list if isinstance(following, int) else dict)
            out.append("[" if isinstance(container, list) else "{")
            self._stack.append(_Frame(step, container))
        return self._stack[-1]

    @staticmethod
    def _member(frame: _Frame, step: str | int, out: list[str]) -> None:
        if frame.count:
            out.append(",")
        frame.count += 1
        if isinstance(frame.container, dict):
            out.append(orjson.dumps(str(step)).decode() + ":")


def _child(container: dict[str, Any] | list[Any], step: str | int, kind: type) -> Any:
    """The object or array at `step`, created unless a path already made it (a revisit merges)."""
    if isinstance(container, dict):
        existing = container.get(str(step))
    else:
        existing = container[step] if isinstance(step, int) and step < len(container) else None
    if isinstance(existing, kind):
        return existing
    created: dict[str, Any] | list[Any] = kind()
    _store(container, step, created)
    return created


def _store(container: dict[str, Any] | list[Any], step: str | int, value: Any) -> None:
    if isinstance(container, dict):
        container[str(step)] = value
        return
    if not isinstance(step, int):
        raise ValueError(f"partialArgs names key {step!r} inside an array")
    if step > len(container):
        # Elements arrive in order; a gap would have to be filled, and a hostile index could ask for
        # a billion of them.
        raise ValueError(f"partialArgs skips to element {step} of an array that has {len(container)}")
    if step == len(container):
        container.append(value)
    else:
        container[step] = value


# -- parser -------------------------------------------------------------------------------------
