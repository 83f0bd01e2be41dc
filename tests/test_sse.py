import pytest

from toolwire._sse import EventTooLarge, SSEDecoder, encode_sse


def decode_all(*chunks: bytes) -> list[tuple[str | None, bytes]]:
    decoder = SSEDecoder()
    out = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


def test_events_with_names_comments_and_multiline_data() -> None:
    body = b": OPENROUTER PROCESSING\n\nevent: ping\ndata: {}\n\ndata: a\ndata: b\nid: 7\nretry: 10\n\n"
    assert decode_all(body) == [("ping", b"{}"), (None, b"a\nb")]


def test_crlf_split_between_cr_and_lf_and_inside_utf8() -> None:
    body = "data: {\"t\":\"é😀\"}\r\n\r\ndata: [DONE]\r\n\r\n".encode()
    whole = decode_all(body)
    for cut in range(len(body) + 1):
        assert decode_all(body[:cut], body[cut:]) == whole
    assert whole == [(None, '{"t":"é😀"}'.encode()), (None, b"[DONE]")]


def test_last_event_without_blank_line_is_flushed_at_close() -> None:
    assert decode_all(b"data: 1\n\ndata: 2\n") == [(None, b"1"), (None, b"2")]
    assert decode_all(b"data: 1\n\ndata: 2") == [(None, b"1"), (None, b"2")]


def test_data_without_space_after_colon_and_event_reset() -> None:
    assert decode_all(b"event: a\ndata:x\n\ndata: y\n\n") == [("a", b"x"), (None, b"y")]


def test_encode_round_trips() -> None:
    raw = encode_sse('{"a":\n1}', event="message_start") + encode_sse(b"[DONE]")
    assert decode_all(raw) == [("message_start", b'{"a":\n1}'), (None, b"[DONE]")]


# -- one long event (hostile-input item 5) --------------------------------------------------------


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_a_long_event_in_small_reads_is_kept_as_pieces_and_joined_once(newline: bytes) -> None:
    """Hostile-input item 5: reads that cannot end the event are not re-copied (linear time; measured
    in bench/framing.py); the event arrives whole."""
    payload = b'{"text": "' + b"x" * 2_000_000 + b'"}'
    body = b"event: big" + newline + b"data: " + payload + newline + newline
    decoder = SSEDecoder()
    out = []
    for start in range(0, len(body) - 1024, 1024):
        out += decoder.feed(body[start:start + 1024])
    assert len(decoder._pending) > 1000  # held, not joined on every read
    out += decoder.feed(body[start + 1024:])
    assert out == [("big", payload)]
    assert decoder._pending == [] and decoder._tail == b""


def test_a_blank_line_split_across_two_reads_ends_a_held_event() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: " + b"y" * 70_000) == []
    assert decoder.feed(b"z\n") == []
    assert decoder.feed(b"\ndata: next\n\n") == [(None, b"y" * 70_000 + b"z"), (None, b"next")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_an_event_that_outgrows_the_limit_raises_event_too_large(newline: bytes) -> None:
    """Hostile-input item 5: a 200 MB line without a newline is not buffered without limit."""
    decoder = SSEDecoder(max_event_bytes=100_000)
    decoder.feed(b"data: ok" + newline + newline)
    with pytest.raises(EventTooLarge) as info:
        for _ in range(200):
            decoder.feed(b"data: " + b"w" * 1000 + newline)
    assert info.value.limit == 100_000 and info.value.size > 100_000
