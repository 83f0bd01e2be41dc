from typing import Any

import orjson
from hypothesis import given, settings, strategies as st

from toolwire._partial_json import PartialJSON


def previews(text: str, step: int = 1) -> list[Any]:
    parser = PartialJSON()
    out = []
    for i in range(0, len(text), step):
        parser.feed(text[i:i + step])
        out.append(parser.snapshot())
    return out


def test_partial_strings_show_and_unfinished_scalars_do_not() -> None:
    shots = previews('{"path": "a/b.txt", "n": 12, "ok": true, "tags": ["x", "yz"]}')
    assert {"path": "a/b"} in shots
    assert all(s.get("n") in (None, 12) for s in shots if isinstance(s, dict))  # never 1
    assert not any(isinstance(s, dict) and s.get("ok") is not None and s.get("ok") is not True for s in shots)
    assert {"path": "a/b.txt", "n": 12, "ok": True, "tags": ["x", "y"]} in shots
    assert shots[-1] == {"path": "a/b.txt", "n": 12, "ok": True, "tags": ["x", "yz"]}


def test_escapes_split_across_fragments() -> None:
    text = '{"s": "line\\nnext \\"q\\" \\u00e9\\ud83d\\ude00"}'
    for step in range(1, 6):
        assert previews(text, step)[-1] == {"s": 'line\nnext "q" é😀'}
    # A cut inside a \u escape never shows a broken character.
    parser = PartialJSON()
    parser.feed('{"s": "ab\\u00')
    assert parser.snapshot() == {"s": "ab"}


def test_snapshots_are_independent_copies() -> None:
    parser = PartialJSON()
    parser.feed('{"a": [1, ')
    first = parser.snapshot()
    parser.feed('2], "b": {"c": "d"}}')
    assert first == {"a": [1]}
    assert parser.snapshot() == {"a": [1, 2], "b": {"c": "d"}}


def test_malformed_input_keeps_the_last_good_preview() -> None:
    parser = PartialJSON()
    parser.feed('{"a": 1, ')
    parser.feed("}}}]garbage")
    assert parser.snapshot() == {"a": 1}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(value=st.dictionaries(st.text(max_size=6), json_values, max_size=5), step=st.integers(1, 9))
def test_final_snapshot_equals_the_parsed_document(value: dict[str, Any], step: int) -> None:
    text = orjson.dumps(value).decode()
    shots = previews(text, step)
    assert shots[-1] == value


def test_a_thousand_levels_deep_preview_stops_at_the_limit_without_recursion_error() -> None:
    """Hostile-input item 3: a snapshot never copies more than `MAX_VALUE_DEPTH` open levels."""
    from toolwire._depth import MAX_VALUE_DEPTH

    parser = PartialJSON()
    parser.feed('{"a": ' + "[" * 1000 + '"x"')
    snapshot = parser.snapshot()
    depth, node = 1, snapshot["a"]  # the root object is level 1
    while isinstance(node, list):
        depth, node = depth + 1, node[0] if node else None
    assert depth == MAX_VALUE_DEPTH
