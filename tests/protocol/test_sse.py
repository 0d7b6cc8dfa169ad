"""Server-Sent Events: the parser (the WHATWG rules, any chunking) and the event-id format."""

from __future__ import annotations

import pytest

from trio_mcp.protocol._sse import (
    ServerSentEvent,
    SSEError,
    SSEParser,
    event_id,
    parse_event_id,
)

# -- the parser ------------------------------------------------------------------------------------


def parse_all(chunks: list[bytes]) -> tuple[list[ServerSentEvent], SSEParser]:
    parser = SSEParser()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events, parser


STREAM = (
    b"\xef\xbb\xbf: a comment\r\n"
    b"id: 1\r\n"
    b"retry: 250\r\n"
    b"data: \r\n"
    b"\r\n"
    b"event: message\n"
    b"data: first line\n"
    b"data:second line\n"
    b"data:  two spaces\n"
    b"data\n"
    b"\n"
    b"id: 2\rdata: cr only\r\r"
    b"event: other\ndata: x\nid: bad\x00id\n\n"
    b"retry: soon\n"
    b"unknown: field\n"
    b"data: no id change\r\n\r\n"
    b"id: 3\n\n"
    b"data: unfinished"
)

EXPECTED = [
    ServerSentEvent("", "message", "1"),
    ServerSentEvent("first line\nsecond line\n two spaces\n", "message", "1"),
    ServerSentEvent("cr only", "message", "2"),
    ServerSentEvent("x", "other", "2"),
    ServerSentEvent("no id change", "message", "2"),
]


def test_sse_parser_whole_stream() -> None:
    events, parser = parse_all([STREAM])
    assert events == EXPECTED
    assert parser.last_event_id == "3"  # an event with no data still sets the id
    assert parser.retry == 250  # "soon" is not a number and is ignored


def test_sse_parser_any_split_gives_the_same_events() -> None:
    for cut in range(len(STREAM) + 1):
        assert parse_all([STREAM[:cut], STREAM[cut:]])[0] == EXPECTED, cut
    assert parse_all([STREAM[i : i + 1] for i in range(len(STREAM))])[0] == EXPECTED


def test_sse_parser_crlf_split_between_cr_and_lf_is_one_line_end() -> None:
    events, _ = parse_all([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"])
    assert events == [ServerSentEvent("a\nb", "message", None)]


def test_sse_parser_multibyte_character_split_across_chunks() -> None:
    data = "data: caf\u00e9 \u2603\n\n".encode()
    events, _ = parse_all([data[:9], data[9:13], data[13:]])
    assert events == [ServerSentEvent("caf\u00e9 \u2603")]


def test_sse_parser_resumes_from_a_previous_last_event_id() -> None:
    parser = SSEParser(last_event_id="s.r1.4")
    assert parser.feed(b"data: replayed\n\n") == [ServerSentEvent("replayed", "message", "s.r1.4")]
    assert parser.feed(b"id:\ndata: reset\n\n") == [ServerSentEvent("reset", "message", "")]


def test_sse_parser_refuses_an_oversized_event() -> None:
    parser = SSEParser(max_event_bytes=64)
    with pytest.raises(SSEError):
        for _ in range(10):
            parser.feed(b"data: " + b"x" * 20 + b"\n")
    with pytest.raises(SSEError):
        SSEParser(max_event_bytes=64).feed(b"data: " + b"y" * 100)


# -- event ids -------------------------------------------------------------------------------------


def test_event_ids_name_session_stream_and_sequence() -> None:
    assert event_id("abc", "r3", 7) == "abc.r3.7"
    assert parse_event_id("abc.r3.7") == ("abc", "r3", 7)
    for bad in ("", "abc", "abc.r3", "abc.r3.x", "a.b.c.4", "abc.r3.-1"):
        assert parse_event_id(bad) is None, bad
