"""Newline framing without an event loop: lines from any chunking, the bound on a line's length,
blank lines, and the end of the stream."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._framing import (
    END,
    NEED_DATA,
    TOO_LONG,
    CuttingLineSplitter,
    Envelope,
    Framing,
    LineFramer,
    peek_envelope,
)


def drain(framer: LineFramer) -> list[bytes | Framing]:
    """Every line the framer can give now, then what it waits for."""
    out: list[bytes | Framing] = []
    while True:
        item = framer.next_line()
        out.append(item)
        if item is NEED_DATA or item is END:
            return out


def test_lines_across_reads_blank_lines_and_a_last_line_without_newline() -> None:
    framer = LineFramer()
    assert drain(framer) == [NEED_DATA]
    framer.feed(b'{"a"')
    assert drain(framer) == [NEED_DATA]
    framer.feed(b':1}\n\n \r\n{"b":2}\r\n{"c"')
    assert drain(framer) == [b'{"a":1}', b'{"b":2}\r', NEED_DATA]
    framer.feed(b":3}")
    framer.feed(b"")  # the end of the stream
    assert drain(framer) == [b'{"c":3}', END]
    assert drain(framer) == [END]


def test_an_oversized_line_is_refused_once_as_soon_as_it_is_one() -> None:
    framer = LineFramer(max_line_bytes=16)
    framer.feed(b"x" * 17)
    assert drain(framer) == [TOO_LONG, NEED_DATA]  # before its newline ever comes
    framer.feed(b"x" * 40)
    assert drain(framer) == [NEED_DATA]  # the rest of it is skipped, not buffered
    framer.feed(b'x\n{"ok":1}\n' + b"y" * 17 + b'\n{"ok":2}')
    assert drain(framer) == [b'{"ok":1}', TOO_LONG, NEED_DATA]
    framer.feed(b"")
    assert drain(framer) == [b'{"ok":2}', END]


def test_a_line_of_exactly_the_bound_is_a_line() -> None:
    framer = LineFramer(max_line_bytes=4)
    framer.feed(b"abcd")
    assert drain(framer) == [NEED_DATA]
    framer.feed(b"\nabcde\n")
    assert drain(framer) == [b"abcd", TOO_LONG, NEED_DATA]


def test_an_oversized_last_line_is_refused_at_the_end() -> None:
    framer = LineFramer(max_line_bytes=4)
    framer.feed(b"ok\nabcde")
    framer.feed(b"")
    assert drain(framer) == [b"ok", TOO_LONG, END]


LIMIT = 8


@given(
    st.lists(st.binary(max_size=2 * LIMIT).map(lambda b: b.replace(b"\n", b"x")), max_size=12),
    st.booleans(),
    st.lists(st.integers(min_value=1, max_value=3 * LIMIT), min_size=1, max_size=8),
)
def test_any_chunking_gives_each_line_once_or_one_refusal(
    lines: list[bytes], final_newline: bool, cuts: list[int]
) -> None:
    wire = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    framer = LineFramer(max_line_bytes=LIMIT)
    got: list[bytes | Framing] = []
    position = index = 0
    while position < len(wire):
        size = cuts[index % len(cuts)]
        framer.feed(wire[position : position + size])
        got.extend(i for i in drain(framer) if i is not NEED_DATA)
        position, index = position + size, index + 1
    framer.feed(b"")
    got.extend(drain(framer))
    expected: list[bytes | Framing] = []
    for line in lines:
        if len(line) > LIMIT:
            expected.append(TOO_LONG)
        elif line.strip():
            expected.append(line)
    assert got == [*expected, END]


def test_a_refused_line_keeps_its_start_to_read_the_envelope_from() -> None:
    framer = LineFramer(max_line_bytes=32)
    framer.feed(b'{"jsonrpc":"2.0","id":7,"result":{"text":"' + b"x" * 40)
    assert framer.next_line() is TOO_LONG
    assert peek_envelope(framer.refused_head) == (Envelope.RESPONSE, 7)


def test_the_envelope_is_read_from_the_scalar_members_at_the_top_level() -> None:
    assert peek_envelope(b'{"jsonrpc":"2.0","id":"a\\"b","result":{') == (Envelope.RESPONSE, 'a"b')
    assert peek_envelope(b' { "id" : 3 , "jsonrpc" : "2.0" , "error" : {') == (Envelope.RESPONSE, 3)
    assert peek_envelope(b'{"jsonrpc":"2.0","id":3,"method":"x","params":{') == (
        Envelope.REQUEST,
        3,
    )
    assert peek_envelope(b'{"jsonrpc":"2.0","method":"notifications/message","par') == (
        Envelope.REQUEST,
        None,
    )
    # The id written last (as some peers do), or inside a value: a response to an unknown id.
    assert peek_envelope(b'{"result":{"id":5,"content":[') == (Envelope.RESPONSE, None)
    assert peek_envelope(b'{"params":{"id":5,"method":"x"') == (Envelope.UNKNOWN, None)
    assert peek_envelope(b'{"jsonrpc":"2.0","id":1.5,"result":{') == (Envelope.RESPONSE, None)
    assert peek_envelope(b"[1,2") == (Envelope.UNKNOWN, None)


def test_a_line_for_a_person_is_cut_at_the_bound_and_says_how_much_was_cut() -> None:
    lines = CuttingLineSplitter(max_line_bytes=4)
    assert lines.feed(b"ab") == []
    assert lines.feed(b"cdefg\r\nok\r\n" + b"x" * 9) == ["abcd... (3 bytes cut)", "ok"]
    assert lines.feed(b"\nabcd\r") == ["xxxx... (5 bytes cut)"]
    assert lines.feed(b"\n") == ["abcd"]  # a line ending in \r\n, cut or not
    assert lines.feed(b"y" * 100) == []
    assert lines.end() == ["yyyy... (96 bytes cut)"]
    assert lines.end() == []


@given(st.binary(max_size=200), st.lists(st.integers(min_value=1, max_value=40), min_size=1))
def test_cut_lines_are_the_same_however_the_stream_is_read(data: bytes, cuts: list[int]) -> None:
    whole = CuttingLineSplitter(max_line_bytes=8)
    expected = whole.feed(data) + whole.end()
    lines = CuttingLineSplitter(max_line_bytes=8)
    got: list[str] = []
    position = index = 0
    while position < len(data):
        size = cuts[index % len(cuts)]
        got += lines.feed(data[position : position + size])
        position, index = position + size, index + 1
    assert got + lines.end() == expected
    assert len(expected) == data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
