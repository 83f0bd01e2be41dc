"""Live argument previews (`ToolCallDelta.arguments`): exact at every event, and free until read."""

import copy
import pickle
import random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from toolwire._accumulate import Accumulator
from toolwire._partial_json import PartialJSON
from toolwire.events import ToolCallDelta, event_from_json, event_to_dict, event_to_json
from toolwire.replay import replay

from .wire.helpers import recorded_body


def prefix_preview(text: str) -> Any:
    """The preview of `text` parsed on its own, in one piece, by a fresh parser."""
    parser = PartialJSON()
    parser.feed(text)
    return parser.snapshot()


def stream_call(fragments: list[str]) -> tuple[Accumulator, list[ToolCallDelta]]:
    acc = Accumulator()
    call = acc.start_call("c", "f")
    for fragment in fragments:
        acc.call_arguments(call, fragment)
    acc.end_call(call)
    return acc, [e for e in acc.events if isinstance(e, ToolCallDelta)]


def cut(text: str, rng: random.Random, longest: int = 8) -> list[str]:
    pieces, i = [], 0
    while i < len(text):
        n = rng.randint(1, longest)
        pieces.append(text[i:i + n])
        i += n
    return pieces


DOCUMENT = {
    "path": "src/app.py",
    "content": 'def f(x):\n    return "a\\tb" + \'q\' + "\u00e9\U0001f600"\n' * 40,
    "files": [{"name": "a", "size": 1, "tags": ["x", "y"]}, {"name": "b", "size": 22, "empty": {}}],
    "flags": [True, False, None, 1.5e3, -7],
}


def test_every_event_previews_the_arguments_up_to_itself_and_keeps_it() -> None:
    text = orjson.dumps(DOCUMENT).decode()
    fragments = cut(text, random.Random(3))
    _, deltas = stream_call(fragments)
    seen: list[tuple[Any, Any]] = []
    for i, delta in enumerate(deltas):
        preview = delta.arguments
        assert preview == prefix_preview("".join(fragments[: i + 1])), i
        seen.append((preview, copy.deepcopy(preview)))
    assert deltas[-1].arguments == DOCUMENT
    # Later fragments changed nothing already handed out, and a second read gives the same object.
    for (preview, at_the_time), delta in zip(seen, deltas, strict=True):
        assert preview == at_the_time
        assert delta.arguments is preview


@settings(max_examples=60, deadline=None)
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=25), seed=st.integers(0, 10**6), order=st.sampled_from(["forward", "backward", "shuffled"]))
def test_previews_read_in_any_order_match_the_parsed_prefix(value: Any, seed: int, order: str) -> None:
    text = orjson.dumps({"v": value, "s": "tail \\ \" end"}).decode()
    rng = random.Random(seed)
    fragments = cut(text, rng, 5)
    _, deltas = stream_call(fragments)
    positions = list(range(len(deltas)))
    if order == "backward":
        positions.reverse()
    elif order == "shuffled":
        rng.shuffle(positions)
    for i in positions:
        assert deltas[i].arguments == prefix_preview("".join(fragments[: i + 1]))


def test_previews_nobody_reads_are_never_parsed() -> None:
    acc = Accumulator()
    call = acc.start_call("c", "write")
    acc.call_arguments(call, '{"text": "')
    for _ in range(20_000):
        acc.call_arguments(call, "abcd")
    acc.call_arguments(call, '"}')
    assert call._parser is None
    assert acc.end_call(call).arguments == {"text": "abcd" * 20_000}  # type: ignore[union-attr]
    assert call._parser is None


def test_reading_every_preview_in_order_parses_each_fragment_once() -> None:
    acc = Accumulator()
    call = acc.start_call("c", "write")
    fragments = ['{"path": "a.txt", "text": "', *["abcd"] * 5000, '"}']
    for fragment in fragments:
        acc.call_arguments(call, fragment)
        for event in acc.events:
            if isinstance(event, ToolCallDelta):
                assert event.arguments is not None
        acc.events.clear()
    assert call._parser is not None
    assert call._parser.size == sum(map(len, fragments))  # no fragment was read twice


def test_successive_previews_share_what_is_finished() -> None:
    _, deltas = stream_call(['{"files": [{"name": "a", "tags": [1, 2]}, ', '{"name": "b', '", "body": "x', 'y"}]}'])
    first, second, third = (d.arguments for d in deltas[1:4])
    assert first == {"files": [{"name": "a", "tags": [1, 2]}, {"name": "b"}]}
    assert second == {"files": [{"name": "a", "tags": [1, 2]}, {"name": "b", "body": "x"}]}
    assert first["files"][0] is second["files"][0] is third["files"][0]  # closed: shared
    assert first["files"] is not second["files"] and first["files"][1] is not second["files"][1]  # open: copied


def test_previews_switched_off_are_none_and_events_built_by_hand_keep_their_value() -> None:
    acc = Accumulator(previews=False)
    call = acc.start_call("c", "f")
    acc.call_arguments(call, '{"q": 1}')
    assert [e.arguments for e in acc.events if isinstance(e, ToolCallDelta)] == [None]
    event = ToolCallDelta(id="c", index=0, arguments_delta="{", arguments={"given": True})
    assert event.arguments == {"given": True}
    event.arguments = None
    assert event.arguments is None


def test_deferred_events_compare_and_serialise_like_built_ones() -> None:
    _, deltas = stream_call(['{"q": "hel', 'lo"}'])
    built = [ToolCallDelta(id="c", index=0, arguments_delta='{"q": "hel', arguments={"q": "hel"}),
             ToolCallDelta(id="c", index=0, arguments_delta='lo"}', arguments={"q": "hello"})]
    fresh = stream_call(['{"q": "hel', 'lo"}'])[1]
    assert event_to_dict(fresh[0])["arguments"] == {"q": "hel"}  # serialising reads the preview
    assert event_from_json(event_to_json(fresh[1])) == built[1]
    assert deltas == built
    assert repr(deltas[0]) == repr(built[0])
    unread = stream_call(['{"q": "hel', 'lo"}'])[1]
    assert copy.copy(unread[0]) == built[0]
    assert pickle.loads(pickle.dumps(unread[1])) == built[1]


RECORDED = [
    ("openai-chat", "openai-chat/gpt-4o_parallel-2-tools.magentic.sse"),
    ("openai-chat", "openai-chat/gpt-4o_text-then-tool.magentic.sse"),
    ("anthropic", "anthropic/claude-3-opus_parallel-2-tools.magentic.sse"),
    ("anthropic", "anthropic/haiku-4.5_single-tool-whitespace-padding.ruby_llm.sse"),
    ("openai-responses", "openai-responses/gpt-4o_parallel-2-function-calls.mirascope.sse"),
    ("gemini", "gemini/vertex_gemini-3.1-pro_streamed-partial-args.vercel.chunks.jsonl"),
]


@pytest.mark.parametrize(("protocol", "name"), RECORDED)
@pytest.mark.parametrize("read", [1, 7, None])
def test_recorded_streams_preview_every_prefix(protocol: str, name: str, read: int | None) -> None:
    events = replay(protocol, recorded_body(name), chunk_size=read).events
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas
    texts: dict[str, str] = {}
    for delta in deltas:
        texts[delta.id] = texts.get(delta.id, "") + delta.arguments_delta
        assert delta.arguments == prefix_preview(texts[delta.id])
