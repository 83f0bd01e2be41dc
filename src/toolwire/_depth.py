"""How deeply nested a JSON value from a provider may be, and the check for it (no recursion).

A message holding a value nested deeper than `MAX_VALUE_DEPTH` could not be sent back or stored
(orjson encodes at most 255 levels, and messages, events and requests wrap values in a few more), and
recursive code would fail on it far from its cause. Values are therefore refused where they enter: a
call's arguments make it an `InvalidToolCallPart`, a provider's item an `invalid_field` stream error,
and an argument preview stops growing at that depth. Real tool arguments nest a handful of levels.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_VALUE_DEPTH", "depth_exceeds"]

MAX_VALUE_DEPTH = 128
"""The deepest nesting of objects and arrays kept from a provider's JSON."""


def depth_exceeds(value: Any, limit: int = MAX_VALUE_DEPTH) -> bool:
    """Whether `value` nests objects and arrays more than `limit` levels deep."""
    if type(value) not in (dict, list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if level > limit:
            return True
        children = node.values() if type(node) is dict else node
        stack.extend((child, level + 1) for child in children if type(child) in (dict, list))
    return False
