from toolwire._sse import SSEDecoder, encode_sse


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
