"""Server-Sent Events: the parser (the WHATWG rules, any chunking), the encoder (what the parser
reads back) and the event-id format."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._sse import (
    KEEPALIVE,
    MAX_RETRY_MS,
    ServerSentEvent,
    SSEError,
    SSEParser,
    encode_comment,
    encode_event,
    event_id,
    parse_event_id,
    stream_id,
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


@pytest.mark.invariant(11)
def test_sse_parser_refuses_an_oversized_event() -> None:
    parser = SSEParser(max_event_bytes=64)
    with pytest.raises(SSEError):
        for _ in range(10):
            parser.feed(b"data: " + b"x" * 20 + b"\n")
    with pytest.raises(SSEError):
        SSEParser(max_event_bytes=64).feed(b"data: " + b"y" * 100)


def test_sse_parser_takes_any_retry_however_long() -> None:
    parser = SSEParser()
    parser.feed(b"retry: " + b"9" * 5000 + b"\n\n")  # int() alone refuses so many digits
    assert parser.retry == MAX_RETRY_MS == 10**15
    parser.feed(b"retry: 1500\n\n")
    assert parser.retry == 1500


# -- the encoder -----------------------------------------------------------------------------------


def test_the_server_s_events_keep_their_bytes() -> None:
    assert encode_event(b'{"a":1}', event="message", id="s.r1.3") == (
        b'event: message\nid: s.r1.3\ndata: {"a":1}\n\n'
    )
    assert encode_event(b"", id="s.r1.0", retry=1000) == b"id: s.r1.0\nretry: 1000\ndata: \n\n"
    assert KEEPALIVE == encode_comment("keepalive") == b": keepalive\n\n"
    assert encode_event(b"a\r\nb\rc\n") == b"data: a\ndata: b\ndata: c\ndata: \n\n"


def test_what_would_break_the_stream_is_refused() -> None:
    for event, ident in (("a\nb", None), (None, "1\r"), (None, "x\x00y")):
        with pytest.raises(ValueError):
            encode_event(b"x", event=event, id=ident)
    with pytest.raises(ValueError):
        encode_comment("two\nlines")


#: A field value the encoder takes: no line break, no NUL.
FIELD = st.text().filter(lambda v: not set(v) & {"\n", "\r", "\x00"})


@given(
    st.lists(
        st.tuples(st.text(), st.none() | FIELD, st.none() | FIELD, st.none() | st.integers(0)),
        max_size=5,
    ),
    st.integers(min_value=1, max_value=64),
)
def test_the_parser_reads_back_what_the_encoder_writes(
    events: list[tuple[str, str | None, str | None, int | None]], cut: int
) -> None:
    wire = b"".join(
        encode_event(data.encode(), event=kind, id=ident, retry=retry)
        for data, kind, ident, retry in events
    )
    parser = SSEParser()
    got: list[ServerSentEvent] = []
    for start in range(0, len(wire), cut):
        got.extend(parser.feed(wire[start : start + cut]))
    expected, last_id = [], None
    for data, kind, ident, _ in events:
        last_id = ident if ident is not None else last_id
        expected.append(ServerSentEvent(re.sub("\r\n|\r", "\n", data), kind or "message", last_id))
    assert got == expected
    retries = [retry for *_, retry in events if retry is not None]
    assert parser.retry == (min(retries[-1], MAX_RETRY_MS) if retries else None)


# -- event ids -------------------------------------------------------------------------------------


def test_event_ids_name_session_stream_and_sequence() -> None:
    assert event_id("abc", "r3", 7) == "abc.r3.7"
    assert parse_event_id("abc.r3.7") == ("abc", "r3", 7)
    for bad in ("", "abc", "abc.r3", "abc.r3.x", ".r3.4", "abc.r3.-1", "abc.r3.\u00b2"):
        assert parse_event_id(bad) is None, bad
    # A routing-tagged session id holds a '.': the id parses from the right.
    assert parse_event_id(event_id("n1.abc", "r3", 4)) == ("n1.abc", "r3", 4)
    # A Last-Event-ID is the client's to write: a number too long to be ours is not ours.
    assert parse_event_id("abc.r3." + "9" * 19) == ("abc", "r3", 10**19 - 1)
    assert parse_event_id("abc.r3." + "9" * 5000) is None
    with pytest.raises(ValueError):
        event_id("abc", "r.1", 1)


@given(st.text(min_size=1), st.text().filter(lambda t: "." not in t))
def test_event_ids_round_trip(session_id: str, key: str) -> None:
    for seq in (0, 1, 2**63 - 1):
        assert parse_event_id(event_id(session_id, key, seq)) == (session_id, key, seq)
        assert event_id(session_id, key, seq).startswith(stream_id(session_id, key) + ".")
