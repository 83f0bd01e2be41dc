"""Checking the values a wire adapter reads, where they enter: once per payload, with `type(x) is ...`.

A provider (or a proxy in between) can send a field of the wrong type: text that is a number, an id
that is a list, a token count that is a string. Adapters check every field they read before it reaches
the accumulator, with the helpers below; a wrong one raises `InvalidField`, which the parser turns into
an `invalid_field` error that names the field and the protocol and stops the stream there (everything
complete before it is kept). Nothing of the wrong type is ever stored, so nothing fails later, far from
its cause (when usages are added, when the next request is built, when a message is serialised).

Checks are plain `type()` comparisons on the fields an adapter actually uses; nothing here walks a
payload, except `deep` for the few whole JSON values kept as they came (provider items, whole-call
arguments), once per value (see `toolwire._depth`), and the surrogate repair of the slow path, which
only runs for a payload that the fast JSON parser refused.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

import orjson

from .._depth import MAX_VALUE_DEPTH, depth_exceeds

__all__ = [
    "MAX_VALUE_DEPTH",
    "InvalidField",
    "SurrogateJoiner",
    "count",
    "deep",
    "depth_exceeds",
    "error_message_from_body",
    "kind_of",
    "need_dict",
    "need_list",
    "need_str",
    "opt_str",
    "slow_loads",
]

# Token counts beyond this are not counts (and would not fit JSON encoders' 64-bit integers).
_MAX_COUNT = 2**53


class InvalidField(ValueError):
    """A field the adapter reads has a type its protocol does not allow."""

    def __init__(self, path: str, expected: str, value: Any) -> None:
        self.path = path
        self.expected = expected
        self.value = value
        self.kind = "a value nested too deeply" if isinstance(value, _Deep) else kind_of(value)
        super().__init__(f"{path} is {self.kind} where {expected} belongs")


def kind_of(value: Any) -> str:
    """`value`'s JSON type in words ("a number", "a list"...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def wrong(path: str, expected: str, value: Any) -> NoReturn:
    raise InvalidField(path, expected, value)


def need_str(value: Any, path: str) -> str:
    """`value` if it is a string; else `InvalidField`."""
    if type(value) is not str:
        wrong(path, "a string", value)
    return value


def opt_str(value: Any, path: str) -> str | None:
    """`value` if it is a string or null/missing (`None`); else `InvalidField`."""
    if value is None or type(value) is str:
        return value
    wrong(path, "a string", value)


def need_dict(value: Any, path: str) -> dict[str, Any]:
    if type(value) is not dict:
        wrong(path, "an object", value)
    return value


def need_list(value: Any, path: str) -> list[Any]:
    if type(value) is not list:
        wrong(path, "a list", value)
    return value


def count(value: Any, path: str) -> int | None:
    """A token count: a non-negative integer (an integral float is accepted), or None when absent."""
    if value is None:
        return None
    kind = type(value)
    if kind is int and 0 <= value < _MAX_COUNT:
        return value  # type: ignore[no-any-return]
    if kind is float and value.is_integer() and 0 <= value < _MAX_COUNT:
        return int(value)
    wrong(path, "a token count (a whole number)", value)


def deep(value: Any, path: str, limit: int = MAX_VALUE_DEPTH) -> Any:
    """`value` if it nests at most `limit` levels; else `InvalidField` (see `MAX_VALUE_DEPTH`)."""
    if depth_exceeds(value, limit):
        raise InvalidField(path, f"a value nested at most {limit} levels", _Deep())
    return value


class _Deep:
    """Stands for a too-deep value in messages (never shown whole)."""


def error_message_from_body(body: bytes) -> str:
    """The human message inside a provider's error body (OpenAI, Anthropic, Gemini, Cohere shapes)."""
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body.decode("utf-8", "replace").strip()
        return text[:500] or "(empty body)"
    if isinstance(data, list) and data:
        data = data[0]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            for key in ("message", "detail", "error"):
                value = err.get(key)
                if isinstance(value, str) and value:
                    return value
        if isinstance(err, str):
            return err
        for key in ("message", "detail"):
            value = data.get(key)
            if isinstance(value, str):
                return value
    return body.decode("utf-8", "replace")[:500]


# -- the slow path: payloads the fast parser refused ------------------------------------------------


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _integer(text: str) -> int | float:
    value = int(text)
    # What orjson does for integers past 64 bits: a float, so that every value can be encoded again.
    return value if -(2**63) <= value < 2**64 else float(value)


def slow_loads(data: bytes) -> Any:
    """Parse what orjson refused only for lone UTF-16 surrogate escapes; raise ValueError otherwise."""
    return json.loads(data, parse_constant=_no_constants, parse_int=_integer)


_SURROGATE = re.compile("[\ud800-\udfff]")


class SurrogateJoiner:
    """Joins UTF-16 surrogate halves that a proxy split across payloads (`"\\ud83d"`, then `"\\ude00"`).

    A string that ends with a high surrogate keeps it back; the next string at the same place (same key
    path) starts with it. Pairs inside one string are combined, and any half left alone becomes U+FFFD,
    so no lone surrogate (which no UTF-8 encoder accepts) is ever stored.
    """

    __slots__ = ("_carry",)

    def __init__(self) -> None:
        self._carry: dict[tuple[Any, ...], str] = {}

    def repair(self, value: Any, path: tuple[Any, ...] = ()) -> Any:
        kind = type(value)
        if kind is str:
            return self._string(value, path)
        if kind is dict:
            return {self._string(k, (*path, "#key")) if _SURROGATE.search(k) else k: self.repair(v, (*path, k))
                    for k, v in value.items()}
        if kind is list:
            return [self.repair(v, (*path, i)) for i, v in enumerate(value)]
        return value

    def _string(self, text: str, path: tuple[Any, ...]) -> str:
        carry = self._carry.pop(path, None)
        if carry is not None:
            text = carry + text
        if text and "\ud800" <= text[-1] <= "\udbff":
            self._carry[path] = text[-1]
            text = text[:-1]
        if _SURROGATE.search(text) is None:
            return text
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
